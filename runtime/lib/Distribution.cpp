//===- Distribution.cpp - Whole tensors in, per-rank blocks out -----------===//

#include "autopar/runtime/Distribution.h"

#include "autopar/runtime/Error.h"
#include "autopar/runtime/HostBuffer.h"
#include "autopar/runtime/TensorFiles.h"
#include "autopar/runtime/TensorLayout.h"
#include "autopar/runtime/Watchdog.h"

#include <filesystem>

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

} // namespace

void distributeInputs(Session &session, Communicator &comm, Watchdog *watchdog,
                      const InputSource &source) {
  const Manifest &manifest = session.getManifest();
  bool root = comm.worldRank() == Root;
  if (root && source.dir && !fs::is_directory(*source.dir))
    throw Error("inputs directory " + *source.dir + " does not exist");
  if (root && !source.dir && source.writeRandomTo)
    createDirectory(*source.writeRandomTo);

  for (size_t i = 0; i < manifest.arguments.size(); ++i) {
    const ArgumentDesc &arg = manifest.arguments[i];
    if (arg.kind != ArgumentKind::Input)
      continue;
    void *local = session.argumentData(i);
    int64_t count = numElements(arg.shape, arg.name);
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
  for (size_t i = 0; i < manifest.arguments.size(); ++i) {
    const ArgumentDesc &arg = manifest.arguments[i];
    if (arg.kind != ArgumentKind::Output)
      continue;
    std::string path = (fs::path(dir) / tensorFileName(arg.name)).string();
    const void *local = session.argumentData(i);
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
    comm.gather(local, stage.data(), numElements(arg.shape, arg.name),
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
