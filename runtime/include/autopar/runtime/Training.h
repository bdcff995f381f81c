//===- Training.h - autopar-run --train: the loop between steps -*- C++ -*-===//
//
// A training artifact's program is one whole step (forward, backward,
// optimizer); the runtime feeds it the data, the step number and its own
// previous results (docs/design/training-artifact.md). This is the loop for
// one rank, on its CPU or its GPU (where the parameters, optimizer states and
// updates stay on the device, and only the batch, the step number and the
// metrics cross to and from the host each step).
//
//===----------------------------------------------------------------------===//
#ifndef AUTOPAR_RUNTIME_TRAINING_H
#define AUTOPAR_RUNTIME_TRAINING_H

#include "autopar/runtime/Checkpoint.h"
#include "autopar/runtime/Communicator.h"
#include "autopar/runtime/Session.h"

#include <cstdint>
#include <optional>
#include <string>

namespace autopar::runtime {

/// What `autopar-run --train` was asked to do.
struct TrainOptions {
  /// One `<input name>.npy` per data input, dim 0 = samples.
  std::string dataDir;
  /// Train up to this step (1-based).
  int64_t steps = 1;
  /// Append one JSON object per step here.
  std::optional<std::string> metricsPath;
  /// Write the trained parameters here (`<name>.npy`).
  std::optional<std::string> outputsDir;
  /// Write the trained model here as an inference ONNX model.
  std::optional<std::string> saveOnnx;
  /// The held-out set (same layout as dataDir): its mean loss from the
  /// artifact's eval program, every evalEvery steps (0: only at the end).
  std::optional<std::string> evalDataDir;
  int64_t evalEvery = 0;
  /// Visit each epoch in epochPermutation(seed, epoch, samples) order.
  std::optional<uint64_t> shuffleSeed;
  /// Write checkpoints here (docs/training.md, "Checkpoints").
  std::optional<std::string> checkpointDir;
  /// Every this many steps (and at the end); 0: only at the end.
  int64_t checkpointEvery = 0;
  /// Keep only the newest this many checkpoints; 0: keep all.
  int64_t keepCheckpoints = 0;
  /// Checksum chunks larger than this in blocks of it (CheckpointInfo).
  uint64_t checkpointBlockBytes = DefaultCheckpointBlockBytes;
  /// Start from checkpointDir's `latest` (from step 0 if there is none).
  bool resume = false;
  /// The seed of the program's random ops (dropout masks), when it has a
  /// `seed` argument; a resumed run takes the checkpoint's.
  uint64_t seed = 0;
  /// Whether `seed` was given (--seed): a resumed run with another seed than
  /// its checkpoint's is an error rather than a silent change.
  bool seedGiven = false;
};

/// Trains: step s (0-based) takes the next global batch of the data (in
/// order, or in the epoch's shuffled order; the last incomplete batch of an
/// epoch is dropped and the next epoch starts), the update results become
/// the next step's parameters and optimizer states. Checks every data file
/// before step 1 and reports all problems at once; restores the training
/// state from a checkpoint with `resume`, writes checkpoints with
/// `checkpointDir`; stops with an error naming the step on a non-finite
/// loss or gradient norm. Throws Error.
/// \p comm runs the step's collectives (on a GPU, the device's); \p hostComm
/// the runtime's own exchanges on host memory (checkpoints, gathering the
/// trained parameters): the same communicator on CPU ranks.
/// Returns the steps this run took (after a resumed checkpoint's).
int64_t runTraining(Session &session, Communicator &comm,
                    Communicator &hostComm, const TrainOptions &options);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_TRAINING_H
