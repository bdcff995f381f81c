//===- Distribution.cpp - Whole tensors in, per-rank blocks out -----------===//

#include "autopar/runtime/Distribution.h"

#include "autopar/runtime/Error.h"
#include "autopar/runtime/HostBuffer.h"
#include "autopar/runtime/TensorFiles.h"
#include "autopar/runtime/TensorLayout.h"
#include "autopar/runtime/Watchdog.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>

namespace fs = std::filesystem;

namespace autopar::runtime {

namespace {

constexpr int64_t Root = 0;

/// The number of blocks \p arg is cut into: the size of its split axis, or 1.
int64_t partsOf(const Manifest &manifest, const ArgumentDesc &arg) {
  return arg.split ? manifest.grid[static_cast<size_t>(arg.split->axis)] : 1;
}

/// \p arg at its global shape, for reading and writing files.
ArgumentDesc globalOf(const ArgumentDesc &arg) {
  ArgumentDesc global = arg;
  global.shape = arg.globalShape;
  return global;
}

std::string what(const ArgumentDesc &arg) {
  return std::string(argumentKindName(arg.kind)) + " '" + arg.name + "'";
}

/// Rank 0: fills \p data with input \p arg's global tensor.
void loadGlobal(const ArgumentDesc &arg, const InputSource &source,
                void *data) {
  ArgumentDesc global = globalOf(arg);
  if (source.dir) {
    std::string path =
        (fs::path(*source.dir) / tensorFileName(arg.name)).string();
    if (!fs::exists(path))
      throw Error("input '" + arg.name + "': missing file " + path +
                  " (--inputs needs one .npy file per graph input)");
    readTensorFile(path, global, data);
    return;
  }
  fillRandom(arg.dtype, numElements(arg.globalShape, arg.name), data,
             source.seed, arg.name, source.policy);
  if (source.writeRandomTo)
    writeTensorFile(
        (fs::path(*source.writeRandomTo) / tensorFileName(arg.name)).string(),
        global, data);
}

/// A graph input or output, and the world ranks whose programs take it
/// (with pipeline stages, not every rank's program does).
struct GraphTensor {
  const ArgumentDesc *desc;
  std::vector<int64_t> users;
};

/// Every graph tensor of \p kind, in the order the programs list them.
std::vector<GraphTensor> graphTensors(const Manifest &manifest,
                                      ArgumentKind kind) {
  std::vector<GraphTensor> tensors;
  for (const ProgramDesc &program : manifest.programs)
    for (const ArgumentDesc &arg : program.arguments) {
      if (arg.kind != kind)
        continue;
      auto known = std::find_if(
          tensors.begin(), tensors.end(),
          [&](const GraphTensor &t) { return t.desc->name == arg.name; });
      if (known == tensors.end())
        tensors.push_back({&arg, {}});
    }
  for (GraphTensor &tensor : tensors)
    for (const RankDesc &rank : manifest.ranks)
      for (const ArgumentDesc &arg :
           manifest.programForRank(rank.rank).arguments)
        if (arg.kind == kind && arg.name == tensor.desc->name)
          tensor.users.push_back(rank.rank);
  return tensors;
}

/// This rank's buffer of \p arg, or null if its program does not take it.
void *localData(Session &session, const ArgumentDesc &arg) {
  std::optional<size_t> index = session.findArgument(arg.kind, arg.name);
  return index ? session.argumentData(*index) : nullptr;
}

/// Rank 0 sends each rank in \p tensor.users its block of the input.
void sendToUsers(Session &session, Communicator &comm, Watchdog *watchdog,
                 const InputSource &source, const GraphTensor &tensor) {
  const ArgumentDesc &arg = *tensor.desc;
  const Manifest &manifest = session.getManifest();
  Watchdog::Scope scope(watchdog,
                        "sending " + what(arg) + " to the ranks that take it");
  void *local = localData(session, arg);
  int64_t count = numElements(arg.rankShape, arg.name);
  if (comm.worldRank() != Root) {
    if (local)
      comm.recv(local, count, arg.dtype, Root, CommScope::World);
    return;
  }
  int64_t parts = partsOf(manifest, arg);
  std::optional<BlockSplit> blocks;
  if (parts > 1)
    blocks.emplace(arg.globalShape, arg.split->dim, parts, dtypeSize(arg.dtype),
                   what(arg));
  HostBuffer global(
      static_cast<size_t>(byteSize(arg.dtype, arg.globalShape, what(arg))));
  loadGlobal(arg, source, global.data());
  HostBuffer block(blocks ? blocks->blockBytes() : 0);
  for (int64_t r : tensor.users) {
    const void *data = global.data();
    if (blocks) {
      blocks->pack(global.data(),
                   comm.coordsOf(r)[static_cast<size_t>(arg.split->axis)],
                   block.data());
      data = block.data();
    }
    if (r == Root)
      std::memcpy(local, data, global.size() / static_cast<size_t>(parts));
    else
      comm.send(data, count, arg.dtype, r, CommScope::World);
  }
}

/// The ranks that send rank 0 the blocks of \p tensor, each block once:
/// ranks that differ only in a coordinate other than the split axis hold
/// copies of the same block (a dp-split output is replicated over tp, a
/// tp-split one over dp), so the one at 0 on the other axes sends it. The
/// pp coordinate is whichever stage computes the output.
std::vector<int64_t> representatives(const Manifest &manifest,
                                     const ArgumentDesc &arg,
                                     const std::vector<int64_t> &users) {
  std::vector<int64_t> chosen;
  for (int64_t r : users) {
    const GridVector &coords = manifest.ranks[static_cast<size_t>(r)].coords;
    bool representative = true;
    for (GridAxis axis : {GridAxis::DP, GridAxis::TP, GridAxis::PP}) {
      bool skip = (arg.split && axis == arg.split->axis) ||
                  (manifest.pipeline && axis == GridAxis::PP);
      if (!skip && coords[static_cast<size_t>(axis)] != 0)
        representative = false;
    }
    if (representative)
      chosen.push_back(r);
  }
  return chosen;
}

/// Rank 0 receives the blocks of an output that only some ranks compute.
void receiveFromUsers(Session &session, Communicator &comm, Watchdog *watchdog,
                      const GraphTensor &tensor, const std::string &path) {
  const ArgumentDesc &arg = *tensor.desc;
  const Manifest &manifest = session.getManifest();
  Watchdog::Scope scope(watchdog, "collecting " + what(arg) +
                                      " from the ranks that compute it");
  const void *local = localData(session, arg);
  int64_t count = numElements(arg.rankShape, arg.name);
  std::vector<int64_t> senders = representatives(manifest, arg, tensor.users);
  if (comm.worldRank() != Root) {
    if (std::find(senders.begin(), senders.end(), comm.worldRank()) !=
        senders.end())
      comm.send(local, count, arg.dtype, Root, CommScope::World);
    return;
  }
  int64_t parts = partsOf(manifest, arg);
  std::optional<BlockSplit> blocks;
  if (parts > 1)
    blocks.emplace(arg.globalShape, arg.split->dim, parts, dtypeSize(arg.dtype),
                   what(arg));
  HostBuffer global(
      static_cast<size_t>(byteSize(arg.dtype, arg.globalShape, what(arg))));
  HostBuffer block(global.size() / static_cast<size_t>(parts));
  for (int64_t r : senders) {
    const void *data = local;
    if (r != Root) {
      comm.recv(block.data(), count, arg.dtype, r, CommScope::World);
      data = block.data();
    }
    if (blocks)
      blocks->unpack(data,
                     comm.coordsOf(r)[static_cast<size_t>(arg.split->axis)],
                     global.data());
    else
      std::memcpy(global.data(), data, global.size());
  }
  writeTensorFile(path, globalOf(arg), global.data());
}

} // namespace

void distributeInputs(Session &session, Communicator &comm, Watchdog *watchdog,
                      const InputSource &source) {
  const Manifest &manifest = session.getManifest();
  bool root = comm.worldRank() == Root;
  if (root && source.dir && !fs::is_directory(*source.dir))
    throw Error("inputs directory " + *source.dir + " does not exist");
  if (root && !source.dir && source.writeRandomTo)
    createDirectory(*source.writeRandomTo);

  for (const GraphTensor &tensor :
       graphTensors(manifest, ArgumentKind::Input)) {
    const ArgumentDesc &arg = *tensor.desc;
    if (int64_t(tensor.users.size()) != comm.worldSize()) {
      sendToUsers(session, comm, watchdog, source, tensor);
      continue;
    }
    void *local = localData(session, arg);
    int64_t count = numElements(arg.rankShape, arg.name);
    int64_t parts = partsOf(manifest, arg);
    if (parts == 1) {
      // Every rank takes the whole tensor.
      Watchdog::Scope scope(watchdog, "broadcast of " + what(arg));
      if (root)
        loadGlobal(arg, source, local);
      comm.broadcast(local, count, arg.dtype, Root, CommScope::World);
      continue;
    }
    Watchdog::Scope scope(watchdog, "scatter of " + what(arg));
    BlockSplit blocks(arg.globalShape, arg.split->dim, parts,
                      dtypeSize(arg.dtype), what(arg));
    HostBuffer stage;
    if (root) {
      HostBuffer global(blocks.blockBytes() * static_cast<size_t>(parts));
      loadGlobal(arg, source, global.data());
      // One block per world rank, in rank order, as MPI_Scatter wants.
      stage = HostBuffer(blocks.blockBytes() *
                         static_cast<size_t>(comm.worldSize()));
      for (int64_t r = 0; r < comm.worldSize(); ++r)
        blocks.pack(global.data(),
                    comm.coordsOf(r)[static_cast<size_t>(arg.split->axis)],
                    static_cast<char *>(stage.data()) +
                        r * blocks.blockBytes());
    }
    comm.scatter(stage.data(), local, count, arg.dtype, Root, CommScope::World);
  }
}

void collectOutputs(Session &session, Communicator &comm, Watchdog *watchdog,
                    const std::string &dir) {
  const Manifest &manifest = session.getManifest();
  bool root = comm.worldRank() == Root;
  if (root)
    createDirectory(dir);
  for (const GraphTensor &tensor :
       graphTensors(manifest, ArgumentKind::Output)) {
    const ArgumentDesc &arg = *tensor.desc;
    std::string path = (fs::path(dir) / tensorFileName(arg.name)).string();
    if (int64_t(tensor.users.size()) != comm.worldSize()) {
      receiveFromUsers(session, comm, watchdog, tensor, path);
      continue;
    }
    const void *local = localData(session, arg);
    int64_t parts = partsOf(manifest, arg);
    if (parts == 1) {
      // Not split: rank 0's copy is the tensor.
      if (root)
        writeTensorFile(path, arg, local);
      continue;
    }
    Watchdog::Scope scope(watchdog, "gather of " + what(arg));
    BlockSplit blocks(arg.globalShape, arg.split->dim, parts,
                      dtypeSize(arg.dtype), what(arg));
    HostBuffer stage;
    if (root)
      stage = HostBuffer(blocks.blockBytes() *
                         static_cast<size_t>(comm.worldSize()));
    comm.gather(local, stage.data(), numElements(arg.rankShape, arg.name),
                arg.dtype, Root, CommScope::World);
    if (!root)
      continue;
    // Ranks that differ in other coordinates hold copies of the same block
    // (a dp-split output is replicated over tp, a tp-split one over dp):
    // take block c from the rank at coordinate c on the split axis and 0 on
    // the others, the only one there is for each block.
    HostBuffer global(blocks.blockBytes() * static_cast<size_t>(parts));
    for (int64_t r = 0; r < comm.worldSize(); ++r) {
      const GridVector &coords = comm.coordsOf(r);
      bool representative = true;
      for (size_t a = 0; a < coords.size(); ++a)
        if (a != static_cast<size_t>(arg.split->axis) && coords[a] != 0)
          representative = false;
      if (!representative)
        continue;
      blocks.unpack(
          static_cast<const char *>(stage.data()) + r * blocks.blockBytes(),
          coords[static_cast<size_t>(arg.split->axis)], global.data());
    }
    writeTensorFile(path, globalOf(arg), global.data());
  }
}

} // namespace autopar::runtime
