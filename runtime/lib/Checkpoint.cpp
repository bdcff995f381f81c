//===- Checkpoint.cpp - Training checkpoints on disk ----------------------===//
//
// Each rank writes the chunks it holds and no other rank writes (a tensor
// whole, or its block of a split tensor) into its own file; world rank 0
// writes the metadata. The reader takes any set of chunks that tiles a
// tensor (row-major boxes given by `offsets` and `sizes`), which is what
// resuming under another plan needs.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/Checkpoint.h"

#include "autopar/runtime/Crc32.h"
#include "autopar/runtime/Error.h"
#include "autopar/runtime/Tensor.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace fs = std::filesystem;
using nlohmann::json;

namespace autopar::runtime {
namespace {

constexpr const char *MetadataFile = "metadata.json";
/// World rank r's chunk file.
std::string rankFile(int64_t rank) {
  char name[32];
  std::snprintf(name, sizeof(name), "rank-%05lld.bin",
                static_cast<long long>(rank));
  return name;
}
/// Chunks start on 64-byte boundaries, so that a future reader can map them.
constexpr size_t ChunkAlignment = 64;

std::string systemError() { return std::strerror(errno); }

/// A file descriptor, closed when it goes.
class Fd {
public:
  explicit Fd(int fd) : fd(fd) {}
  ~Fd() {
    if (fd >= 0)
      ::close(fd);
  }
  Fd(const Fd &) = delete;
  Fd &operator=(const Fd &) = delete;
  int get() const { return fd; }
  /// Closes it now, reporting a failure (a delayed write error).
  bool close() {
    int result = ::close(fd);
    fd = -1;
    return result == 0;
  }

private:
  int fd;
};

void writeAll(int fd, const void *data, size_t size, const std::string &path) {
  const char *bytes = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t written = ::write(fd, bytes, size);
    if (written < 0 && errno == EINTR)
      continue;
    if (written <= 0)
      throw Error("cannot write checkpoint file " + path + ": " +
                  systemError());
    bytes += written;
    size -= static_cast<size_t>(written);
  }
}

/// Creates \p path with \p bytes and fsyncs it.
void writeSyncedFile(const std::string &path, const std::string &bytes) {
  Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0)
    throw Error("cannot create checkpoint file " + path + ": " + systemError());
  writeAll(fd.get(), bytes.data(), bytes.size(), path);
  if (::fsync(fd.get()) != 0 || !fd.close())
    throw Error("cannot write checkpoint file " + path + ": " + systemError());
}

/// Makes a directory's entries (new files, renames) durable.
void syncDirectory(const std::string &path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0)
    throw Error("cannot sync checkpoint directory " + path + ": " +
                systemError());
}

void renameOrThrow(const std::string &from, const std::string &to) {
  if (std::rename(from.c_str(), to.c_str()) != 0)
    throw Error("cannot rename " + from + " to " + to + ": " + systemError());
}

/// The step of a directory named step-N (complete) or step-N.tmp.
std::optional<int64_t> parseStepName(const std::string &name, bool temporary) {
  std::string prefix = "step-", suffix = temporary ? ".tmp" : "";
  if (name.size() <= prefix.size() + suffix.size() ||
      name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoll(digits);
}

std::string hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(value));
  return text;
}

json gridJson(const GridVector &grid) {
  return {{"dp", grid[0]}, {"tp", grid[1]}, {"pp", grid[2]}};
}

/// Where one rank put one tensor's chunk.
struct ChunkRecord {
  int64_t rank = 0;
  size_t offsetBytes = 0;
  uint32_t crc = 0;
  /// The block it holds (CheckpointTensor::blockIndex).
  int64_t blockIndex = 0;
  /// The CRC-32 of each CheckpointInfo::blockBytes block of the chunk; none
  /// for a chunk of one block.
  std::vector<uint32_t> blockCrcs;
};

/// The number of \p blockBytes blocks a chunk of \p bytes is checksummed
/// in: 0 when one block would hold it all (its CRC-32 is the chunk's).
uint64_t checksumBlocks(uint64_t bytes, uint64_t blockBytes) {
  return bytes > blockBytes ? (bytes + blockBytes - 1) / blockBytes : 0;
}

/// The CRC-32 of \p size bytes at \p data, and into \p blocks that of each
/// \p blockBytes block (checksumBlocks() of them), in one pass.
uint32_t chunkCrc(const void *data, uint64_t size, uint64_t blockBytes,
                  std::vector<uint32_t> &blocks) {
  blocks.clear();
  if (!checksumBlocks(size, blockBytes))
    return crc32(0, data, size);
  const char *bytes = static_cast<const char *>(data);
  uint32_t whole = 0;
  for (uint64_t at = 0; at < size; at += blockBytes) {
    uint64_t length = std::min(blockBytes, size - at);
    blocks.push_back(crc32(0, bytes + at, length));
    whole =
        at == 0 ? blocks.back() : crc32Combine(whole, blocks.back(), length);
  }
  return whole;
}

} // namespace

TensorBox CheckpointTensor::boxOf(int64_t index) const {
  std::vector<BlockCut> cuts(blockLevels.size());
  for (size_t l = blockLevels.size(); l-- > 0;) {
    cuts[l] = {blockLevels[l].dim, blockLevels[l].count,
               index % blockLevels[l].count};
    index /= blockLevels[l].count;
  }
  return cutBox(shape, cuts, "checkpoint tensor '" + name + "'");
}

namespace {

/// Bytes of what a rank holds of \p tensor.
size_t heldBytes(const CheckpointTensor &tensor) {
  return static_cast<size_t>(
      byteSize(tensor.dtype, tensor.boxOf(0).sizes, tensor.name));
}

/// Bytes of block \p index of \p tensor (the chunk a rank holding it
/// writes).
uint64_t chunkBytes(const CheckpointTensor &tensor, int64_t index) {
  return static_cast<uint64_t>(
      byteSize(tensor.dtype, tensor.boxOf(index).sizes, tensor.name));
}

json metadataJson(const CheckpointInfo &info,
                  const std::vector<CheckpointTensor> &tensors,
                  const std::vector<std::vector<ChunkRecord>> &chunks) {
  json meta;
  meta["format"] = "autopar-checkpoint";
  meta["version"] = CheckpointFormatVersion;
  meta["step"] = info.step;
  meta["model"] = info.model;
  if (!info.modelSha256.empty())
    meta["model_sha256"] = info.modelSha256;
  meta["model_hash"] = info.modelHash;
  meta["plan"] = {{"cluster", info.cluster},
                  {"world_size", info.worldSize},
                  {"grid", gridJson(info.grid)}};
  meta["data"] = {
      {"directory", info.dataDir},
      {"samples_per_epoch", info.samplesPerEpoch},
      {"global_batch", info.globalBatch},
      {"epoch", info.position.epoch},
      {"batch_in_epoch", info.position.batchInEpoch},
      {"samples_consumed", info.samplesConsumed},
      {"shuffle_seed", info.shuffleSeed ? json(*info.shuffleSeed) : json()}};
  meta["rng"] = {{"seed", info.randomSeed ? json(*info.randomSeed) : json()}};
  json list = json::array();
  for (size_t t = 0; t < tensors.size(); ++t) {
    const CheckpointTensor &tensor = tensors[t];
    json entry = {{"name", tensor.name},
                  {"kind", tensor.kind},
                  {"dtype", std::string(dtypeName(tensor.dtype))},
                  {"shape", tensor.shape}};
    if (!tensor.of.empty())
      entry["of"] = tensor.of;
    json chunkList = json::array();
    for (const ChunkRecord &chunk : chunks[t]) {
      auto [offsets, sizes] = tensor.boxOf(chunk.blockIndex);
      json record = {{"file", rankFile(chunk.rank)},
                     {"offset_bytes", chunk.offsetBytes},
                     {"offsets", offsets},
                     {"sizes", sizes},
                     {"crc32", chunk.crc}};
      if (!chunk.blockCrcs.empty()) {
        record["block_bytes"] = info.blockBytes;
        record["block_crc32"] = chunk.blockCrcs;
      }
      chunkList.push_back(std::move(record));
    }
    entry["chunks"] = std::move(chunkList);
    list.push_back(std::move(entry));
  }
  meta["tensors"] = std::move(list);
  return meta;
}

/// Files of a step directory opened for reading, once each.
class ChunkFiles {
public:
  explicit ChunkFiles(std::string stepDir) : stepDir(std::move(stepDir)) {}

  /// Reads \p size bytes at \p offset of \p name for \p tensor.
  void read(const std::string &name, uint64_t offset, void *out, size_t size,
            const std::string &tensor) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." ||
        name == "..")
      throw Error(stepDir + "/" + MetadataFile + ": tensor '" + tensor +
                  "': chunk file '" + name +
                  "' is not a file name in the checkpoint directory");
    std::string path = stepDir + "/" + name;
    auto [it, inserted] = files.try_emplace(name, nullptr);
    if (inserted) {
      it->second =
          std::make_unique<Fd>(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
      if (it->second->get() < 0)
        throw Error(path + ": cannot open (tensor '" + tensor +
                    "'): " + systemError() + "; the checkpoint is incomplete");
    }
    int fd = it->second->get();
    struct stat info;
    if (::fstat(fd, &info) != 0)
      throw Error(path + ": cannot stat: " + systemError());
    uint64_t fileSize = static_cast<uint64_t>(info.st_size);
    if (offset > fileSize || size > fileSize - offset)
      throw Error(path + ": truncated: tensor '" + tensor + "' needs bytes [" +
                  std::to_string(offset) + ", " +
                  std::to_string(offset + size) + "), the file has " +
                  std::to_string(fileSize));
    char *bytes = static_cast<char *>(out);
    read_ += size;
    while (size > 0) {
      ssize_t got = ::pread(fd, bytes, size, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0)
        throw Error(path + ": read error (tensor '" + tensor +
                    "'): " + (got == 0 ? "unexpected end" : systemError()));
      bytes += got;
      size -= static_cast<size_t>(got);
      offset += static_cast<uint64_t>(got);
    }
  }

  /// The bytes read so far.
  uint64_t bytesRead() const { return read_; }

private:
  std::string stepDir;
  uint64_t read_ = 0;
  std::map<std::string, std::unique_ptr<Fd>> files;
};

/// A row-major box of a tensor: its corner and extent.
struct Box {
  Shape offsets, sizes;
};

/// The intersection of two boxes of one tensor; empty sizes if none.
std::optional<Box> intersect(const Box &a, const Box &b) {
  Box out;
  for (size_t d = 0; d < a.offsets.size(); ++d) {
    int64_t lo = std::max(a.offsets[d], b.offsets[d]);
    int64_t hi = std::min(a.offsets[d] + a.sizes[d], b.offsets[d] + b.sizes[d]);
    if (hi <= lo)
      return std::nullopt;
    out.offsets.push_back(lo);
    out.sizes.push_back(hi - lo);
  }
  return out;
}

/// Calls \p row(inA, inB, length) for each innermost row of \p part
/// (inside both boxes), with the element offsets of its start in the dense
/// row-major boxes \p a and \p b and its length in elements.
template <typename Row>
void forEachRow(const Box &part, const Box &a, const Box &b, Row &&row) {
  size_t rank = part.sizes.size();
  if (rank == 0) {
    row(0, 0, 1);
    return;
  }
  int64_t rowLength = part.sizes[rank - 1];
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d)
    rows *= part.sizes[d];
  std::vector<int64_t> index(rank, 0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rest = r;
    for (size_t d = rank - 1; d-- > 0;) {
      index[d] = rest % part.sizes[d];
      rest /= part.sizes[d];
    }
    // The row's start in each box, row-major.
    int64_t inA = 0, inB = 0;
    for (size_t d = 0; d < rank; ++d) {
      int64_t global = part.offsets[d] + index[d];
      inA = inA * a.sizes[d] + (global - a.offsets[d]);
      inB = inB * b.sizes[d] + (global - b.offsets[d]);
    }
    row(inA, inB, rowLength);
  }
}

/// Copies \p part (inside both) from the dense box \p from (at \p src) to
/// the dense box \p to (at \p dst), one innermost row at a time.
void copyPart(const Box &part, const Box &from, const char *src, const Box &to,
              char *dst, size_t elementSize) {
  forEachRow(part, from, to, [&](int64_t inFrom, int64_t inTo, int64_t length) {
    std::memcpy(dst + static_cast<size_t>(inTo) * elementSize,
                src + static_cast<size_t>(inFrom) * elementSize,
                static_cast<size_t>(length) * elementSize);
  });
}

/// The value of \p key of \p object, with an error naming \p where.
const json &field(const json &object, const char *key,
                  const std::string &where) {
  if (!object.is_object() || !object.contains(key))
    throw Error(where + ": missing key '" + key + "'");
  return object.at(key);
}

/// Reads into tensor.data what the rank holds of \p entry (the whole
/// tensor, or its block): only the chunks that overlap it, each checked.
void restoreTensor(const json &entry, const CheckpointTensor &tensor,
                   const std::string &metadataPath, ChunkFiles &files) {
  std::string where = metadataPath + ": tensor '" + tensor.name + "'";
  std::string kind = field(entry, "kind", where).get<std::string>();
  if (kind != tensor.kind)
    throw Error(where + " is a '" + kind + "' in the checkpoint, but a '" +
                tensor.kind + "' in this artifact");
  std::string dtype = field(entry, "dtype", where).get<std::string>();
  Shape shape = field(entry, "shape", where).get<Shape>();
  if (dtype != dtypeName(tensor.dtype) || shape != tensor.shape)
    throw Error(where + " is " + dtype + " " + formatShape(shape) +
                " in the checkpoint, but this artifact's is " +
                formatTensorType(tensor.dtype, tensor.shape));
  size_t elementSize = dtypeSize(tensor.dtype);
  TensorBox mine = tensor.boxOf(tensor.blockIndex);
  Box held{mine.offsets, mine.sizes};
  int64_t total = numElements(held.sizes, tensor.name), covered = 0;
  const json &chunks = field(entry, "chunks", where);
  if (!chunks.is_array())
    throw Error(where + ": 'chunks' must be an array");
  for (size_t c = 0; c < chunks.size(); ++c) {
    const json &chunk = chunks[c];
    std::string chunkWhere = where + ", chunk " + std::to_string(c);
    std::string file = field(chunk, "file", chunkWhere).get<std::string>();
    uint64_t offset = field(chunk, "offset_bytes", chunkWhere).get<uint64_t>();
    Shape offsets = field(chunk, "offsets", chunkWhere).get<Shape>();
    Shape sizes = field(chunk, "sizes", chunkWhere).get<Shape>();
    uint32_t expected = field(chunk, "crc32", chunkWhere).get<uint32_t>();
    bool inside =
        offsets.size() == shape.size() && sizes.size() == shape.size();
    for (size_t d = 0; inside && d < shape.size(); ++d)
      inside = offsets[d] >= 0 && sizes[d] >= 0 && offsets[d] <= shape[d] &&
               sizes[d] <= shape[d] - offsets[d];
    if (!inside)
      throw Error(chunkWhere + ": offsets " + formatShape(offsets) +
                  " and sizes " + formatShape(sizes) + " lie outside " +
                  formatShape(shape));
    int64_t count = numElements(sizes, tensor.name);
    std::optional<Box> part = intersect({offsets, sizes}, held);
    if (!part || count == 0)
      continue; // Another rank's (or empty): not read.
    std::vector<char> bytes(static_cast<size_t>(count) * elementSize);
    // A CRC-32 mismatch of bytes [begin, end) of the chunk.
    auto corrupt = [&](uint32_t actual, uint32_t wanted, uint64_t begin,
                       uint64_t end) {
      return Error(fs::path(metadataPath).parent_path().string() + "/" + file +
                   ": tensor '" + tensor.name + "' is corrupt: CRC-32 " +
                   hex64(actual).substr(8) + " at bytes [" +
                   std::to_string(offset + begin) + ", " +
                   std::to_string(offset + end) + "), expected " +
                   hex64(wanted).substr(8) +
                   "; resume from an older checkpoint (point latest at it)");
    };
    std::vector<uint32_t> blockCrcs;
    uint64_t blockBytes = 0;
    if (chunk.contains("block_crc32") || chunk.contains("block_bytes")) {
      blockBytes = field(chunk, "block_bytes", chunkWhere).get<uint64_t>();
      blockCrcs =
          field(chunk, "block_crc32", chunkWhere).get<std::vector<uint32_t>>();
      uint64_t blocks =
          blockBytes ? checksumBlocks(bytes.size(), blockBytes) : 0;
      if (!blockBytes || blocks != blockCrcs.size())
        throw Error(chunkWhere + ": 'block_crc32' holds " +
                    std::to_string(blockCrcs.size()) +
                    " CRCs, but a chunk of " + std::to_string(bytes.size()) +
                    " bytes in blocks of " + std::to_string(blockBytes) +
                    " has " + std::to_string(blocks));
    }
    if (blockCrcs.empty()) {
      files.read(file, offset, bytes.data(), bytes.size(), tensor.name);
      uint32_t actual = crc32(0, bytes.data(), bytes.size());
      if (actual != expected)
        throw corrupt(actual, expected, 0, bytes.size());
    } else {
      // Only the blocks that hold part of what this rank keeps, each run of
      // consecutive ones in one read, each block checked.
      std::vector<bool> needed(blockCrcs.size(), false);
      Box box{offsets, sizes};
      forEachRow(*part, box, box, [&](int64_t in, int64_t, int64_t length) {
        uint64_t begin = static_cast<uint64_t>(in) * elementSize;
        uint64_t end = begin + static_cast<uint64_t>(length) * elementSize;
        for (uint64_t b = begin / blockBytes; b * blockBytes < end; ++b)
          needed[b] = true;
      });
      for (size_t b = 0; b < needed.size();) {
        if (!needed[b]) {
          ++b;
          continue;
        }
        size_t last = b;
        while (last + 1 < needed.size() && needed[last + 1])
          ++last;
        uint64_t begin = b * blockBytes;
        uint64_t end =
            std::min<uint64_t>((last + 1) * blockBytes, bytes.size());
        files.read(file, offset + begin, bytes.data() + begin, end - begin,
                   tensor.name);
        for (; b <= last; ++b) {
          uint64_t from = b * blockBytes;
          uint64_t to = std::min<uint64_t>(from + blockBytes, bytes.size());
          uint32_t actual = crc32(0, bytes.data() + from, to - from);
          if (actual != blockCrcs[b])
            throw corrupt(actual, blockCrcs[b], from, to);
        }
      }
    }
    copyPart(*part, {offsets, sizes}, bytes.data(), held,
             static_cast<char *>(tensor.data), elementSize);
    covered += numElements(part->sizes, tensor.name);
  }
  if (covered != total)
    throw Error(where + ": its chunks hold " + std::to_string(covered) +
                " of the " + std::to_string(total) + " elements " +
                (tensor.isBlock() ? "of this rank's block" : "of the tensor"));
}

} // namespace

std::vector<CheckpointTensor>
trainingStateTensors(const std::vector<ArgumentDesc> &arguments) {
  std::vector<CheckpointTensor> tensors;
  for (const ArgumentDesc &arg : arguments) {
    CheckpointTensor tensor;
    tensor.name = arg.name;
    tensor.dtype = arg.dtype;
    tensor.shape = arg.globalShape;
    if (arg.kind == ArgumentKind::OptimizerState) {
      tensor.kind = arg.role;
      tensor.of = arg.of;
    } else if (arg.kind == ArgumentKind::Parameter) {
      bool updated = std::any_of(arguments.begin(), arguments.end(),
                                 [&](const ArgumentDesc &other) {
                                   return other.kind == ArgumentKind::Update &&
                                          other.updates == arg.name;
                                 });
      if (!updated)
        continue;
      tensor.kind = arg.trainable ? "param" : "state";
    } else {
      continue;
    }
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

std::string modelHash(const std::vector<ArgumentDesc> &arguments,
                      bool inArgumentOrder) {
  std::vector<std::string> lines;
  for (const CheckpointTensor &tensor : trainingStateTensors(arguments)) {
    std::ostringstream line;
    line << tensor.kind << ' ' << tensor.name << ' ' << tensor.of << ' '
         << dtypeName(tensor.dtype) << ' ' << formatShape(tensor.shape) << '\n';
    lines.push_back(line.str());
  }
  size_t stateLines = lines.size();
  for (const ArgumentDesc &arg : arguments)
    if (arg.kind == ArgumentKind::Parameter &&
        !std::any_of(arguments.begin(), arguments.end(),
                     [&](const ArgumentDesc &other) {
                       return other.kind == ArgumentKind::Update &&
                              other.updates == arg.name;
                     })) {
      std::ostringstream line;
      line << "frozen " << arg.name << ' ' << dtypeName(arg.dtype) << ' '
           << formatShape(arg.globalShape) << '\n';
      lines.push_back(line.str());
    }
  // The order of the arguments is the plan's (a pipeline lists its stages'
  // in turn): sorted, the hash is the model's.
  if (!inArgumentOrder) {
    std::sort(lines.begin(), lines.begin() + stateLines);
    std::sort(lines.begin() + stateLines, lines.end());
  }
  uint64_t hash = 0xcbf29ce484222325ull; // FNV-1a 64.
  for (const std::string &line : lines)
    for (unsigned char c : line) {
      hash ^= c;
      hash *= 0x100000001b3ull;
    }
  return "fnv1a64:" + hex64(hash);
}

std::string checkpointStepName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08lld",
                static_cast<long long>(step));
  return name;
}

/// What a save keeps between its phases.
struct CheckpointSave::State {
  std::string dir, name, final, temporary;
  CheckpointInfo info;
  std::vector<CheckpointTensor> tensors;
  /// The copies `tensors` point at when the save took a snapshot.
  std::vector<std::vector<char>> snapshot;
  Communicator *comm = nullptr;
  int64_t rank = 0, ranks = 1;
  /// This rank's chunks (writeRankFile) and its failure, if any.
  std::vector<std::optional<ChunkRecord>> mine;
  std::string failure;
  double writeSeconds = 0;
};

namespace {

/// Runs \p work, keeping an Error's message in \p failure.
template <typename Work> void attempt(std::string &failure, Work &&work) {
  try {
    work();
  } catch (const Error &e) {
    failure = e.what();
  }
}

/// For the crash tests (Checkpoint.h): SIGKILL, as `kill -9` would, when
/// this save's step, this rank and \p point are the ones the environment
/// names.
void crashForTestAt(const char *point, int64_t rank, int64_t step) {
  const char *atStep = std::getenv("AUTOPAR_TEST_CRASH_IN_CHECKPOINT");
  if (!atStep || std::strtoll(atStep, nullptr, 10) != step)
    return;
  const char *atPoint = std::getenv("AUTOPAR_TEST_CRASH_POINT");
  const char *atRank = std::getenv("AUTOPAR_TEST_CRASH_RANK");
  if (std::string(atPoint ? atPoint : "file") != point ||
      (atRank ? std::strtoll(atRank, nullptr, 10) : 0) != rank)
    return;
  std::fflush(nullptr);
  std::raise(SIGKILL);
}

/// True if any rank failed (uncounted bookkeeping: every rank learns it, so
/// that they throw together instead of waiting on each other).
bool anyFailed(Communicator *comm, bool failed) {
  if (!comm)
    return failed;
  double flag = failed ? 1 : 0;
  comm->maxOverWorld(&flag, 1);
  return flag != 0;
}

/// For the tests of saves that outlast several steps: this rank's writer
/// first sleeps AUTOPAR_TEST_SLOW_WRITE_MS milliseconds, as a slow or busy
/// file system would make it.
void slowWriteForTest() {
  if (const char *ms = std::getenv("AUTOPAR_TEST_SLOW_WRITE_MS"))
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::strtoll(ms, nullptr, 10)));
}

} // namespace

CheckpointSave::CheckpointSave(const std::string &dir,
                               const CheckpointInfo &info,
                               std::vector<CheckpointTensor> tensors,
                               Communicator *comm, bool snapshot)
    : state(std::make_unique<State>()) {
  State &st = *state;
  st.dir = dir;
  st.info = info;
  st.tensors = std::move(tensors);
  st.comm = comm;
  st.rank = comm ? comm->worldRank() : 0;
  st.ranks = comm ? comm->worldSize() : 1;
  st.name = checkpointStepName(info.step);
  st.final = dir + "/" + st.name;
  st.temporary = st.final + ".tmp";
  if (snapshot)
    for (CheckpointTensor &tensor : st.tensors) {
      if (!tensor.write)
        continue;
      const char *bytes = static_cast<const char *>(tensor.data);
      st.snapshot.emplace_back(bytes, bytes + heldBytes(tensor));
      tensor.data = st.snapshot.back().data();
    }
  std::string failure;
  if (st.rank == 0)
    attempt(failure, [&] {
      std::error_code error;
      fs::create_directories(dir, error);
      if (error)
        throw Error("cannot create --checkpoint-dir " + dir + ": " +
                    error.message());
      // A leftover of a save of the same step that was interrupted.
      fs::remove_all(st.temporary, error);
      if (!fs::create_directory(st.temporary, error) || error)
        throw Error("cannot create checkpoint directory " + st.temporary +
                    ": " + (error ? error.message() : "it exists"));
      crashForTestAt("directory", st.rank, st.info.step);
    });
  if (anyFailed(comm, !failure.empty()))
    throw Error(failure.empty() ? "the first rank could not create " +
                                      st.temporary + " (see its error)"
                                : failure);
}

CheckpointSave::~CheckpointSave() = default;

void CheckpointSave::writeRankFile() {
  State &st = *state;
  auto start = std::chrono::steady_clock::now();
  slowWriteForTest();
  // This rank's chunks, each at a 64-byte aligned offset, with their CRC-32.
  st.mine.assign(st.tensors.size(), std::nullopt);
  bool anyChunk =
      std::any_of(st.tensors.begin(), st.tensors.end(),
                  [](const CheckpointTensor &t) { return t.write; });
  std::string binPath = st.temporary + "/" + rankFile(st.rank);
  if (anyChunk)
    attempt(st.failure, [&] {
      Fd fd(::open(binPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                   0644));
      if (fd.get() < 0)
        throw Error("cannot create checkpoint file " + binPath + ": " +
                    systemError());
      size_t offset = 0;
      bool anyWritten = false;
      static const char Zeros[ChunkAlignment] = {};
      for (size_t t = 0; t < st.tensors.size(); ++t) {
        const CheckpointTensor &tensor = st.tensors[t];
        if (!tensor.write)
          continue;
        size_t padding =
            (ChunkAlignment - offset % ChunkAlignment) % ChunkAlignment;
        writeAll(fd.get(), Zeros, padding, binPath);
        offset += padding;
        size_t bytes = heldBytes(tensor);
        if (!anyWritten) {
          anyWritten = true;
          // Half of the first chunk on disk, the rest never written.
          writeAll(fd.get(), tensor.data, bytes / 2, binPath);
          ::fsync(fd.get());
          crashForTestAt("mid-file", st.rank, st.info.step);
          writeAll(fd.get(), static_cast<const char *>(tensor.data) + bytes / 2,
                   bytes - bytes / 2, binPath);
        } else {
          writeAll(fd.get(), tensor.data, bytes, binPath);
        }
        ChunkRecord record{
            st.rank, offset, 0, tensor.isBlock() ? tensor.blockIndex : 0, {}};
        record.crc =
            chunkCrc(tensor.data, bytes, st.info.blockBytes, record.blockCrcs);
        st.mine[t] = std::move(record);
        offset += bytes;
      }
      if (::fsync(fd.get()) != 0 || !fd.close())
        throw Error("cannot write checkpoint file " + binPath + ": " +
                    systemError());
    });
  crashForTestAt("file", st.rank, st.info.step);
  st.writeSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
}

double CheckpointSave::writeSeconds() const { return state->writeSeconds; }

const std::string &CheckpointSave::directory() const { return state->final; }

std::string CheckpointSave::finish() {
  State &st = *state;
  // Every rank's records, [rank][tensor][written, offset, crc, block], and
  // a failure flag per rank; each rank fills its own, the maximum over the
  // world gives everyone all of them (offsets and CRCs are exact doubles).
  const std::vector<CheckpointTensor> &tensors = st.tensors;
  const size_t fields = 4, perRank = tensors.size() * fields + 1;
  std::vector<double> table(static_cast<size_t>(st.ranks) * perRank, 0.0);
  double *row = table.data() + static_cast<size_t>(st.rank) * perRank;
  for (size_t t = 0; t < tensors.size() && t < st.mine.size(); ++t)
    if (st.mine[t]) {
      row[t * fields] = 1;
      row[t * fields + 1] = static_cast<double>(st.mine[t]->offsetBytes);
      row[t * fields + 2] = st.mine[t]->crc;
      row[t * fields + 3] = static_cast<double>(st.mine[t]->blockIndex);
    }
  row[perRank - 1] = st.failure.empty() ? 0 : 1;
  if (st.comm)
    st.comm->maxOverWorld(table.data(), static_cast<int>(table.size()));
  for (int64_t r = 0; r < st.ranks; ++r)
    if (table[static_cast<size_t>(r) * perRank + perRank - 1] != 0)
      throw Error(!st.failure.empty()
                      ? st.failure
                      : "rank " + std::to_string(r) +
                            " could not write its checkpoint file in " +
                            st.temporary + " (see its error)");

  std::vector<std::vector<ChunkRecord>> chunks(tensors.size());
  for (int64_t r = 0; r < st.ranks; ++r)
    for (size_t t = 0; t < tensors.size(); ++t) {
      const double *f =
          table.data() + static_cast<size_t>(r) * perRank + t * fields;
      if (f[0] != 0)
        chunks[t].push_back({r,
                             static_cast<size_t>(f[1]),
                             static_cast<uint32_t>(f[2]),
                             static_cast<int64_t>(f[3]),
                             {}});
    }
  // The chunks' block CRCs: every rank now knows every chunk's size, so
  // where each one's go in a second table (the checkpoint's bytes over the
  // block size: small), which each rank fills for its own.
  struct Slot {
    ChunkRecord *chunk;
    size_t tensor, at;
  };
  std::vector<Slot> slots;
  size_t count = 0;
  for (size_t t = 0; t < tensors.size(); ++t)
    for (ChunkRecord &chunk : chunks[t]) {
      chunk.blockCrcs.resize(checksumBlocks(
          chunkBytes(tensors[t], chunk.blockIndex), st.info.blockBytes));
      slots.push_back({&chunk, t, count});
      count += chunk.blockCrcs.size();
    }
  if (count > 0) {
    std::vector<double> crcs(count, 0.0);
    for (const Slot &s : slots)
      if (s.chunk->rank == st.rank) {
        // The same count: writeRankFile() used the same sizes (no throw
        // here, before a collective the other ranks would wait in).
        const std::vector<uint32_t> &own = st.mine[s.tensor]->blockCrcs;
        std::copy_n(own.begin(),
                    std::min(own.size(), s.chunk->blockCrcs.size()),
                    crcs.begin() + static_cast<std::ptrdiff_t>(s.at));
      }
    if (st.comm)
      st.comm->maxOverWorld(crcs.data(), static_cast<int>(crcs.size()));
    for (const Slot &s : slots)
      for (size_t b = 0; b < s.chunk->blockCrcs.size(); ++b)
        s.chunk->blockCrcs[b] = static_cast<uint32_t>(crcs[s.at + b]);
  }

  std::string failure;
  if (st.rank == 0)
    attempt(failure, [&] {
      // The metadata last: a step directory with metadata is complete.
      writeSyncedFile(st.temporary + "/" + MetadataFile,
                      metadataJson(st.info, tensors, chunks).dump(2) + "\n");
      syncDirectory(st.temporary);
      crashForTestAt("metadata", st.rank, st.info.step);
      // An older run may have left a directory of this step (one that
      // `latest` no longer names, since this run resumed before it):
      // replace it.
      std::error_code error;
      if (fs::exists(st.final, error))
        fs::remove_all(st.final, error);
      renameOrThrow(st.temporary, st.final);
      syncDirectory(st.dir);
      crashForTestAt("rename", st.rank, st.info.step);
      writeSyncedFile(st.dir + "/latest.tmp", st.name + "\n");
      crashForTestAt("latest", st.rank, st.info.step);
      renameOrThrow(st.dir + "/latest.tmp", st.dir + "/latest");
      syncDirectory(st.dir);
    });
  if (anyFailed(st.comm, !failure.empty()))
    throw Error(failure.empty() ? "the first rank could not complete " +
                                      st.final + " (see its error)"
                                : failure);
  return st.final;
}

std::string writeCheckpoint(const std::string &dir, const CheckpointInfo &info,
                            const std::vector<CheckpointTensor> &tensors,
                            Communicator *comm) {
  CheckpointSave save(dir, info, tensors, comm, /*snapshot=*/false);
  save.writeRankFile();
  return save.finish();
}

std::optional<std::string> findLatestCheckpoint(const std::string &dir) {
  std::string path = dir + "/latest";
  std::error_code error;
  if (!fs::exists(path, error))
    return std::nullopt;
  std::ifstream file(path);
  std::string name;
  if (!file || !std::getline(file, name))
    throw Error(path + ": cannot read (it should hold the name of the "
                       "newest complete step directory, e.g. step-00000400)");
  while (!name.empty() && (name.back() == '\r' || name.back() == ' '))
    name.pop_back();
  if (!parseStepName(name, /*temporary=*/false))
    throw Error(path + ": '" + name +
                "' is not a step directory name (step-NNNNNNNN)");
  std::string stepDir = dir + "/" + name;
  if (!fs::is_directory(stepDir, error))
    throw Error(path + " names " + name + ", but " + stepDir +
                " does not exist; point latest at a complete step directory "
                "of " +
                dir + ", or remove latest to start from step 0");
  return stepDir;
}

CheckpointInfo readCheckpoint(const std::string &stepDir,
                              const std::string &expectedModelHash,
                              const std::vector<CheckpointTensor> &tensors,
                              const std::string &alsoAccepted) {
  std::string metadataPath = stepDir + "/" + MetadataFile;
  std::ifstream file(metadataPath);
  if (!file)
    throw Error(metadataPath + ": cannot open: " + systemError() +
                " (the checkpoint is incomplete)");
  json meta;
  try {
    meta = json::parse(file);
  } catch (const json::exception &e) {
    throw Error(metadataPath + ": not valid JSON: " + e.what());
  }
  CheckpointInfo info;
  try {
    if (!meta.is_object() || meta.value("format", "") != "autopar-checkpoint")
      throw Error(metadataPath + ": not an autopar checkpoint (no \"format\": "
                                 "\"autopar-checkpoint\")");
    int64_t version = field(meta, "version", metadataPath).get<int64_t>();
    if (version != CheckpointFormatVersion)
      throw Error(metadataPath + ": checkpoint format version " +
                  std::to_string(version) + ", this autopar-run reads " +
                  std::to_string(CheckpointFormatVersion));
    info.step = field(meta, "step", metadataPath).get<int64_t>();
    info.model = meta.value("model", "");
    info.modelSha256 = meta.value("model_sha256", "");
    info.modelHash = field(meta, "model_hash", metadataPath).get<std::string>();
    if (info.modelHash != expectedModelHash &&
        (alsoAccepted.empty() || info.modelHash != alsoAccepted))
      throw Error(stepDir + " is a checkpoint of another model (model '" +
                  info.model + "', model hash " + info.modelHash +
                  "; this artifact's is " + expectedModelHash +
                  "): resume with the artifact that wrote it, or use another "
                  "--checkpoint-dir");
    const json &plan = field(meta, "plan", metadataPath);
    info.cluster = plan.value("cluster", "");
    info.worldSize =
        field(plan, "world_size", metadataPath + ": plan").get<int64_t>();
    const json &data = field(meta, "data", metadataPath);
    std::string where = metadataPath + ": data";
    info.dataDir = field(data, "directory", where).get<std::string>();
    info.samplesPerEpoch =
        field(data, "samples_per_epoch", where).get<int64_t>();
    info.globalBatch = field(data, "global_batch", where).get<int64_t>();
    info.position.epoch = field(data, "epoch", where).get<int64_t>();
    info.position.batchInEpoch =
        field(data, "batch_in_epoch", where).get<int64_t>();
    info.samplesConsumed =
        field(data, "samples_consumed", where).get<int64_t>();
    const json &seed = field(data, "shuffle_seed", where);
    if (!seed.is_null())
      info.shuffleSeed = seed.get<uint64_t>();
    // Optional: checkpoints of programs without random ops may omit it.
    if (auto rng = meta.find("rng"); rng != meta.end() && rng->is_object())
      if (auto s = rng->find("seed"); s != rng->end() && !s->is_null())
        info.randomSeed = s->get<uint64_t>();
    if (info.step < 0 || info.position.epoch < 0 ||
        info.position.batchInEpoch < 0)
      throw Error(metadataPath + ": negative step or data position");

    std::map<std::string, const json *> entries;
    for (const json &entry : field(meta, "tensors", metadataPath))
      entries[field(entry, "name", metadataPath + ": tensors")
                  .get<std::string>()] = &entry;
    ChunkFiles files(stepDir);
    for (const CheckpointTensor &tensor : tensors) {
      auto it = entries.find(tensor.name);
      if (it == entries.end())
        throw Error(metadataPath + ": no tensor '" + tensor.name + "' (" +
                    tensor.kind + ") in the checkpoint");
      // A pipeline stage holds only its own part of the training state.
      if (tensor.data)
        restoreTensor(*it->second, tensor, metadataPath, files);
      info.bytesTotal += static_cast<uint64_t>(
          byteSize(tensor.dtype, tensor.shape, tensor.name));
    }
    info.bytesRead = files.bytesRead();
  } catch (const json::exception &e) {
    throw Error(metadataPath + ": malformed checkpoint metadata: " + e.what());
  }
  return info;
}

std::vector<std::string> pruneCheckpoints(const std::string &dir,
                                          int64_t keep) {
  std::vector<std::string> deleted;
  std::optional<std::string> latest;
  try {
    if (std::optional<std::string> path = findLatestCheckpoint(dir))
      latest = fs::path(*path).filename().string();
  } catch (const Error &) {
    return deleted; // Leave a directory we do not understand alone.
  }
  std::vector<std::pair<int64_t, std::string>> complete;
  std::error_code error;
  for (const fs::directory_entry &entry : fs::directory_iterator(dir, error)) {
    std::string name = entry.path().filename().string();
    if (!entry.is_directory(error))
      continue;
    if (parseStepName(name, /*temporary=*/true)) {
      // An interrupted save's: never complete, never named by latest.
      fs::remove_all(entry.path(), error);
      deleted.push_back(name);
    } else if (std::optional<int64_t> step = parseStepName(name, false)) {
      complete.push_back({*step, name});
    }
  }
  if (keep <= 0)
    return deleted;
  std::sort(complete.rbegin(), complete.rend());
  for (size_t i = static_cast<size_t>(keep); i < complete.size(); ++i) {
    if (complete[i].second == latest)
      continue;
    fs::remove_all(dir + "/" + complete[i].second, error);
    deleted.push_back(complete[i].second);
  }
  return deleted;
}

} // namespace autopar::runtime
