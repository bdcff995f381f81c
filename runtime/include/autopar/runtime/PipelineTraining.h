//===- PipelineTraining.h - A pipeline stage's micro-batches --*- C++ -*-===//
//
// A pipeline-parallel training artifact gives each stage three programs
// (docs/distributed-training.md, "Pipeline parallelism"): a forward and a
// backward, run once per micro-batch, and the step (the rank's program),
// run once after the flush. The trainer walks the stage's schedule (GPipe
// or 1F1B, PipelineSchedule.h) over the first two: it receives the
// activations of the previous stage and the cotangents of the next one,
// keeps each micro-batch's residuals from its forward to its backward
// (with virtual stages, per model chunk: chunk c of stage s is virtual
// stage c * stages + s, whose neighbours are on stages s - 1 and s + 1
// modulo stages),
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
  /// outlive the trainer): with virtual stages, those of each of the
  /// stage's model chunks. Throws Error.
  explicit PipelineTrainer(Session &step);
  ~PipelineTrainer();

  /// One step's micro-batches, in the schedule's order: every forward and
  /// backward of this stage's chunks, exchanging with the neighbouring
  /// stages over \p comm's pp axis. Afterwards the step's accumulator
  /// arguments hold the sums over the micro-batches (and chunks); its data
  /// inputs must hold the step's batch (micro-batch m at block m), its
  /// parameters their current values.
  void runMicroBatches(Communicator &comm);

  /// Whether the stage's programs draw random numbers (training-mode
  /// Dropout), and the seed they draw from.
  bool hasSeed() const;
  void setSeed(int64_t seed);

  /// The model chunks this stage runs (the pipeline's virtual stages per
  /// stage; 1 without interleaving).
  int64_t chunkCount() const { return static_cast<int64_t>(chunks.size()); }
  /// The largest number of micro-batches whose residuals this stage held at
  /// once in the last step (with several chunks: chunk micro-batches, each
  /// holding its chunk's residuals), and the bytes one micro-batch's
  /// residuals take over all the stage's chunks.
  int64_t peakMicroBatchesInFlight() const { return peakInFlight; }
  size_t residualBytesPerMicroBatch() const;
  /// The most residual bytes this stage held at once in the last step: the
  /// schedule's activations in flight.
  size_t peakResidualBytes() const { return peakBytes; }

private:
  struct Phase;
  struct Chunk;
  void runPhase(Phase &phase, Chunk &chunk, const PipelineStep &step);
  std::vector<Communicator::Message> messages(Phase &phase, bool sends);
  Phase &phaseOf(const PipelineStep &step);

  Session &step;
  int64_t stage = 0, stages = 1, microBatches = 1, microBatchSize = 1;
  int64_t replica = 0;
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  /// The stage's steps in order, and the groups of them that exchange
  /// together (PipelineStep::pairedWithNext): [begin, end) into `order`.
  std::vector<PipelineStep> order;
  std::vector<std::pair<size_t, size_t>> groups;
  std::vector<std::unique_ptr<Chunk>> chunks;
  /// Per accumulator name: the running sum and the buffer the next call
  /// writes (they trade places after each call). Chunks that read one
  /// parameter add into one sum.
  struct Sum {
    HostBuffer current, next;
  };
  std::map<std::string, Sum> sums;
  int64_t peakInFlight = 0;
  size_t peakBytes = 0;
};

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_PIPELINETRAINING_H
