//===- Distribution.h - Whole tensors in, per-rank blocks out ---*- C++ -*-===//
//
// The user gives and gets whole (global) tensors; each rank's program takes
// its block. Rank 0 reads or draws every graph input at its global_shape and
// scatters the blocks of split inputs (a rank gets the block of its
// coordinate on the split axis) or broadcasts unsplit ones; after the steps,
// split outputs are gathered back to rank 0, which writes the files.
// Rank 0 keeps one global tensor (and one staging buffer of one block per
// rank) at a time.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_DISTRIBUTION_H
#define AUTOPAR_RUNTIME_DISTRIBUTION_H

#include "autopar/runtime/Communicator.h"
#include "autopar/runtime/RandomInputs.h"
#include "autopar/runtime/Session.h"

#include <optional>
#include <string>

namespace autopar::runtime {

class Watchdog;

/// Where the graph inputs come from.
struct InputSource {
  /// DIR/<input name>.npy holding the global tensor; without it, random.
  std::optional<std::string> dir;
  /// Random inputs: the global tensor is the same for any number of ranks.
  uint64_t seed = 0;
  RandomInputPolicy policy;
  /// With random inputs, rank 0 also writes them here (as global tensors).
  std::optional<std::string> writeRandomTo;
};

/// Fills every rank's input buffers of \p session. Collective: every rank
/// calls it. Throws Error on rank 0 for a missing or mismatched file.
void distributeInputs(Session &session, Communicator &comm, Watchdog *watchdog,
                      const InputSource &source);

/// Gathers the graph outputs on rank 0, which writes each as
/// \p dir/<output name>.npy at its global_shape. Collective.
void collectOutputs(Session &session, Communicator &comm, Watchdog *watchdog,
                    const std::string &dir);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_DISTRIBUTION_H
