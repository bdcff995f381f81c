//===- Checkpoint.h - Training checkpoints on disk --------------*- C++ -*-===//
//
// A checkpoint is a directory independent of the plan that wrote it
// (docs/training.md, "Checkpoints"):
//
//   CKPT_DIR/latest                     the name of the newest complete step
//   dir CKPT_DIR/step-00000400/metadata.json
//   CKPT_DIR/step-00000400/rank-00000.bin
//
// Saving writes step-N.tmp/, fsyncs every file and the directory, writes the
// metadata last, renames the directory to step-N and then replaces `latest`
// (write latest.tmp, fsync, rename), so a crash at any point leaves the
// previous checkpoint valid and named by `latest`. Loading checks everything
// it reads (JSON, model hash, each tensor's dtype and shape, each chunk's
// byte range and CRC-32, or the CRC-32 of each block it reads of a chunk
// checksummed in blocks) and names the file and tensor of any problem.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CHECKPOINT_H
#define AUTOPAR_RUNTIME_CHECKPOINT_H

#include "autopar/runtime/Communicator.h"
#include "autopar/runtime/DataLoader.h"
#include "autopar/runtime/Manifest.h"
#include "autopar/runtime/TensorLayout.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace autopar::runtime {

/// The metadata format this runtime writes and reads.
constexpr int64_t CheckpointFormatVersion = 1;

/// The default size of the blocks a chunk is checksummed in
/// (`--checkpoint-block-bytes`): a reader that needs part of a chunk reads
/// and checks the blocks that hold that part, not the whole chunk.
constexpr uint64_t DefaultCheckpointBlockBytes = 1 << 20;

/// One tensor of the training state.
struct CheckpointTensor {
  std::string name;
  /// `param` (trainable parameter), `state` (another updated parameter, such
  /// as batch-norm running statistics) or an optimizer state's role
  /// (`momentum`, `exp_avg`, `exp_avg_sq`).
  std::string kind;
  /// For optimizer states, the parameter they belong to; else empty.
  std::string of;
  DType dtype = DType::Float32;
  /// The global shape.
  Shape shape;
  /// Dense row-major memory of what this rank holds (the whole tensor, or
  /// its block): read when saving, written when loading.
  /// Null for a tensor this rank does not hold (another pipeline stage's):
  /// listed so that every rank describes the same training state, never
  /// written or read by this rank.
  void *data = nullptr;
  /// One cut of a split tensor: `count` equal blocks along `dim` of what
  /// the cuts before it left.
  struct BlockLevel {
    int64_t dim = 0, count = 1;
  };
  /// When the rank holds one block of the tensor (an argument split over a
  /// grid axis, such as ZeRO's optimizer states; or a block of a block,
  /// ZeRO's over tensor parallelism): the cuts, outermost first (empty: the
  /// whole tensor), and `data` is block `blockIndex` of them, numbered
  /// row-major over the cuts (the first cut's index most significant).
  std::vector<BlockLevel> blockLevels;
  int64_t blockIndex = 0;
  bool isBlock() const { return !blockLevels.empty(); }
  /// The box block \p index covers (blockIndex's numbering).
  TensorBox boxOf(int64_t index) const;
  /// Whether this rank writes what it holds: false on the ranks whose copy
  /// another rank writes (replicas).
  bool write = true;
};

/// Everything a checkpoint records besides the tensors.
struct CheckpointInfo {
  /// Optimizer steps taken (the next step is step + 1).
  int64_t step = 0;
  /// The batch the next step takes.
  DataPosition position;
  /// Samples taken so far (step * global batch).
  int64_t samplesConsumed = 0;
  std::optional<uint64_t> shuffleSeed;
  /// The seed of the run's random ops (dropout), when the program has one:
  /// with the step it decides every mask, so it is the whole RNG state.
  std::optional<uint64_t> randomSeed;
  std::string dataDir;
  int64_t samplesPerEpoch = 0;
  int64_t globalBatch = 0;
  /// modelHash() of the artifact that wrote it.
  std::string modelHash;
  /// The ONNX model the artifact was compiled from (the manifest's `model`),
  /// and the SHA-256 of its content then (`model_sha256`; may be empty).
  std::string model;
  std::string modelSha256;
  /// The plan that wrote it.
  std::string cluster;
  int64_t worldSize = 1;
  GridVector grid{1, 1, 1};
  /// Saving: a chunk larger than this many bytes also records the CRC-32
  /// of each such block (`block_bytes`, `block_crc32`), so that a reader
  /// of part of it reads only the blocks that hold that part.
  uint64_t blockBytes = DefaultCheckpointBlockBytes;
  /// Loading: the bytes of chunk files this rank read (the blocks of the
  /// chunks that overlap what it holds), and the bytes of the whole
  /// training state.
  uint64_t bytesRead = 0, bytesTotal = 0;
};

/// The training state of \p arguments (a training program's, in call
/// order): every parameter with an update, and every optimizer state.
/// Frozen parameters are not part of it: they come from the artifact.
/// `data` is left null.
std::vector<CheckpointTensor>
trainingStateTensors(const std::vector<ArgumentDesc> &arguments);

/// A hash of the model's training state, "fnv1a64:" and 16 hex digits: the
/// FNV-1a hash of the name, kind, dtype and shape of every
/// trainingStateTensors() entry and of every frozen parameter. The plan,
/// the batch size and the data do not enter it, so any plan of the same
/// model can resume a checkpoint: the entries are hashed in sorted order.
/// \p inArgumentOrder hashes them in the order of \p arguments instead, as
/// checkpoints written before 2026-11-26 did (resume accepts those too).
std::string modelHash(const std::vector<ArgumentDesc> &arguments,
                      bool inArgumentOrder = false);

/// "step-00000042".
std::string checkpointStepName(int64_t step);

/// Writes the checkpoint of step \p info.step into \p dir (created if
/// needed) and points `dir/latest` at it. Returns its directory. Throws
/// Error naming the file that could not be written.
///
/// With a communicator of several ranks every rank calls it: each writes
/// the tensors it holds with `write` set into its own `rank-NNNNN.bin`
/// (NNNNN its world rank; a block as a chunk at its offsets), the chunks'
/// places and CRCs are exchanged (uncounted bookkeeping, as
/// Communicator::maxOverWorld), and world rank 0 writes the metadata and
/// renames. Every rank returns, or throws the same failure, together.
///
/// For the crash tests: when AUTOPAR_TEST_CRASH_IN_CHECKPOINT equals the
/// step, world rank AUTOPAR_TEST_CRASH_RANK (default 0) kills itself
/// (SIGKILL), as `kill -9` would, at AUTOPAR_TEST_CRASH_POINT: `directory`
/// (rank 0, the step's `.tmp` directory just made), `mid-file` (half of its
/// first chunk written and synced), `file` (the default: its rank file
/// written and synced), `metadata` (rank 0, metadata.json written in the
/// `.tmp` directory), `rename` (rank 0, the directory renamed, `latest` not
/// yet rewritten) or `latest` (rank 0, `latest.tmp` written, not yet
/// renamed). At every point `latest` still names the previous checkpoint.
std::string writeCheckpoint(const std::string &dir, const CheckpointInfo &info,
                            const std::vector<CheckpointTensor> &tensors,
                            Communicator *comm = nullptr);

/// writeCheckpoint in three phases, so that the files can be written while
/// training goes on (autopar-run saves in the background). The communicator
/// is only used by the constructor and finish(), which every rank calls at
/// the same point of the run on the thread that makes the step's
/// collectives; writeRankFile() makes no communicator call and may run on
/// another thread (MPI_THREAD_MULTIPLE is not guaranteed, and communicators
/// are not thread-safe).
class CheckpointSave {
public:
  /// Rank 0 creates `dir/step-N.tmp`; every rank learns whether it could.
  /// With \p snapshot, copies what this rank writes of \p tensors (its
  /// shards), so that the buffers they point at may change afterwards.
  CheckpointSave(const std::string &dir, const CheckpointInfo &info,
                 std::vector<CheckpointTensor> tensors, Communicator *comm,
                 bool snapshot);
  ~CheckpointSave();
  CheckpointSave(const CheckpointSave &) = delete;
  CheckpointSave &operator=(const CheckpointSave &) = delete;

  /// Writes and syncs this rank's `rank-NNNNN.bin`; a failure is kept for
  /// finish() to report on every rank.
  void writeRankFile();
  /// After writeRankFile() returned: exchanges where each chunk went, rank 0
  /// writes the metadata and renames; returns the step directory. Throws the
  /// same failure on every rank.
  std::string finish();

  /// The seconds writeRankFile() took.
  double writeSeconds() const;
  /// The step directory it makes.
  const std::string &directory() const;

private:
  struct State;
  std::unique_ptr<State> state;
};

/// The step directory `dir/latest` names, or nullopt when there is no
/// `latest` (no checkpoint was completed yet). Throws Error if `latest` is
/// unreadable, malformed, or names a directory that does not exist.
std::optional<std::string> findLatestCheckpoint(const std::string &dir);

/// Reads the checkpoint in \p stepDir into \p tensors (each `data` must be
/// set; a tensor with a `blockDim` gets its block) and returns its info. Throws
/// Error naming the file and the tensor when the metadata is not valid JSON or
/// not a checkpoint's, the model hash differs from \p expectedModelHash, a
/// tensor is missing or has another kind, dtype or shape, or a chunk is out of
/// range, truncated or fails its CRC-32.
/// \p alsoAccepted, if not empty, is another model hash to accept (the
/// same model's hash as older builds wrote it).
CheckpointInfo readCheckpoint(const std::string &stepDir,
                              const std::string &expectedModelHash,
                              const std::vector<CheckpointTensor> &tensors,
                              const std::string &alsoAccepted = "");

/// Deletes the complete step directories of \p dir but the newest \p keep
/// (never the one `latest` names), and leftover `step-N.tmp` directories of
/// interrupted saves. Returns the names deleted.
std::vector<std::string> pruneCheckpoints(const std::string &dir, int64_t keep);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_CHECKPOINT_H
