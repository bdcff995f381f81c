//===- PipelineTraining.h - A pipeline stage's micro-batches --*- C++ -*-===//
//
// A pipeline-parallel training artifact gives each stage three programs
// (docs/distributed-training.md, "Pipeline parallelism"): a forward and a
// backward, run once per micro-batch, and the step (the rank's program),
// run once after the flush. The trainer walks the stage's schedule (GPipe
// or 1F1B, PipelineSchedule.h) over the first two: it receives the
// activations of the previous stage and the cotangents of the next one,
// keeps each micro-batch's residuals from its forward to its backward,
// adds the gradients and the loss into the step's accumulators and sends
// what the neighbours need. The training loop then runs the step as for any
// other plan.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_PIPELINETRAINING_H
#define AUTOPAR_RUNTIME_PIPELINETRAINING_H

#include "autopar/runtime/Communicator.h"
#include "autopar/runtime/HostBuffer.h"
#include "autopar/runtime/PipelineSchedule.h"
#include "autopar/runtime/Session.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace autopar::runtime {

class PipelineTrainer {
public:
  /// Opens the forward and backward programs of \p step's stage (\p step
  /// is the rank's session of a pipeline training artifact; it must
  /// outlive the trainer). Throws Error.
  explicit PipelineTrainer(Session &step);
  ~PipelineTrainer();

  /// One step's micro-batches, in the schedule's order: every forward and
  /// backward of this stage, exchanging with the neighbouring stages over
  /// \p comm's pp axis. Afterwards the step's accumulator arguments hold
  /// the sums over the micro-batches; its data inputs must hold the step's
  /// batch (micro-batch m at block m), its parameters their current values.
  void runMicroBatches(Communicator &comm);

  /// Whether the stage's programs draw random numbers (training-mode
  /// Dropout), and the seed they draw from.
  bool hasSeed() const;
  void setSeed(int64_t seed);

  /// The largest number of micro-batches whose residuals this stage held at
  /// once in the last step, and their bytes: the schedule's activations in
  /// flight.
  int64_t peakMicroBatchesInFlight() const { return peakInFlight; }
  size_t residualBytesPerMicroBatch() const { return residualBytes; }

private:
  struct Phase;
  void runPhase(Phase &phase, const PipelineStep &step);
  std::vector<Communicator::Message> messages(Phase &phase, bool sends);

  Session &step;
  int64_t stage = 0, stages = 1, microBatches = 1, microBatchSize = 1;
  int64_t replica = 0;
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  std::unique_ptr<Phase> forward, backward;
  /// Per residual name: one buffer per micro-batch slot.
  std::map<std::string, std::vector<HostBuffer>> stash;
  /// Per accumulator name: the running sum and the buffer the next call
  /// writes (they trade places after each call).
  struct Sum {
    HostBuffer current, next;
  };
  std::map<std::string, Sum> sums;
  int64_t peakInFlight = 0;
  size_t residualBytes = 0;
};

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_PIPELINETRAINING_H
