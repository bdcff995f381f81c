//===- PipelineEvaluation.h - --eval-data for a pipeline ------*- C++ -*-===//
//
// A pipeline training artifact gives each stage an `eval` phase program
// (docs/distributed-training.md, "Evaluation under a pipeline"): one
// micro-batch's forward with Dropout off and BatchNorm on its running
// statistics, reading the parameters its stage's step holds. The evaluator
// runs it over the held-out set's full batches, micro-batch after
// micro-batch, receiving the previous stage's activations and sending its
// own on; the last stage adds up the micro-batches' shares of the loss.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_PIPELINEEVALUATION_H
#define AUTOPAR_RUNTIME_PIPELINEEVALUATION_H

#include "autopar/runtime/Communicator.h"
#include "autopar/runtime/DataLoader.h"
#include "autopar/runtime/HostBuffer.h"
#include "autopar/runtime/PipelineSchedule.h"
#include "autopar/runtime/Session.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace autopar::runtime {

class PipelineEvaluator {
public:
  /// Opens the eval program of \p step's stage (with virtual stages, of
  /// each of its chunks; \p step is the rank's session of a pipeline
  /// training artifact; it must outlive the evaluator) and maps the held-out
  /// data in \p dataDir. Throws Error naming the artifact when it has no eval
  /// program, saying why.
  PipelineEvaluator(Session &step, const std::string &dataDir);
  ~PipelineEvaluator();

  /// The mean loss over the held-out set's full batches with the step's
  /// current parameters, on every rank: each batch's loss is its
  /// micro-batches' shares added up (a ratio's numerators over its
  /// denominators); data-parallel replicas each evaluate their share of a
  /// batch and average their means, as one-program steps do. \p comm
  /// carries the activations over pp, \p hostComm the results.
  double run(Communicator &comm, Communicator &hostComm);

  int64_t batches() const { return data->batchesPerEpoch(); }

private:
  /// One model chunk's eval program (one without virtual stages) and how
  /// its arguments are fed.
  struct Chunk {
    std::unique_ptr<Session> session;
    /// (argument, the step's argument) for parameters; (argument, index
    /// into batchBuffers) for data inputs.
    std::vector<std::pair<size_t, size_t>> parameters, inputs;
    std::vector<size_t> received, sent;
    std::optional<size_t> loss, denominator;
  };
  std::vector<Communicator::Message> messages(Chunk &chunk, bool sends);

  Session &step;
  std::vector<Chunk> chunks;
  /// The stage's forward-only order over its chunks (PipelineSchedule.h).
  std::vector<PipelineStep> order;
  std::unique_ptr<DataLoader> data;
  /// One per data input of the step: the rank's rows of a held-out batch.
  std::vector<HostBuffer> batchBuffers;
  int64_t microBatches = 1, replicas = 1;
};

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_PIPELINEEVALUATION_H
