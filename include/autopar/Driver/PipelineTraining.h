//===- PipelineTraining.h - Pipeline training programs ----------*- C++ -*-===//
//
// A pipeline-parallel training step runs three programs on each stage's
// ranks (docs/distributed-training.md, "Pipeline parallelism"):
//
// - `forward`, once per micro-batch: the stage's part of the forward, from
//   the activations the previous stage sends (or the data) to those the
//   next stage needs (or the loss), plus the residuals its backward reads;
// - `backward`, once per micro-batch: from the cotangents of the stage's
//   outputs (sent back by the next stage; the last stage starts from the
//   loss) and the residuals to the cotangents of its inputs (sent to the
//   previous stage), adding the parameters' gradients into accumulators;
// - the `step`, once per step after the flush: the sums over the
//   micro-batches and the data-parallel replicas normalised as one call on
//   the whole batch would, then clipping, schedule and the optimizer update
//   of the stage's parameters.
//
// The runtime walks the stage's GPipe or 1F1B schedule over the first two
// and runs the step after it.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DRIVER_PIPELINETRAINING_H
#define AUTOPAR_DRIVER_PIPELINETRAINING_H

#include "autopar/Driver/TrainingStep.h"
#include "autopar/Import/OnnxImporter.h"
#include "autopar/Planner/Planner.h"
#include "autopar/Target/Artifact.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <vector>

namespace autopar {

/// What a pipeline training step is built from.
struct PipelineTrainingOptions {
  /// The loss, frozen parameters and the optimizer configuration
  /// (microBatches, dataParallel, zeroStage and tensorParallel are the
  /// plan's).
  TrainingStepOptions step;
  std::string modelPath;
  /// The import at the global batch (`--input-shape` and friends).
  ImportOptions importOptions;
  /// The model's arguments at the global batch.
  std::vector<ArtifactArgument> globalArguments;
  int64_t globalBatch = 0;
};

/// One stage's programs, each a module with a `@main`. With virtual stages
/// (PlanCandidate::virtualStages v > 1) one per virtual stage, pp * v in
/// all: virtual stage c * pp + s is chunk c of stage s, and stage s's step
/// (over every chunk's parameters) is the `step` of virtual stage s; the
/// others have none.
struct PipelineTrainingStage {
  mlir::OwningOpRef<mlir::ModuleOp> forward, backward, step;
  /// The stage's eval program (--eval-data): one micro-batch's forward in
  /// eval mode, the last stage's returning its share of the loss; null, and
  /// `evalUnavailable` saying why (alike in every stage), when the model's
  /// eval graph cannot be cut as the step is.
  mlir::OwningOpRef<mlir::ModuleOp> eval;
  std::string evalUnavailable;
  /// The parameters the stage trains; none for a stage of parameter-free
  /// ops, which only passes activations on and cotangents back.
  int64_t trainedParameters = 0;
};

/// Builds the programs of every stage of `plan` (pp > 1; any ZeRO stage, and
/// 0 under tp > 1, whose stages are partitioned over their tp groups, each
/// planned by `options.step.makePlanPass`; any recompute). Errors say what
/// cannot run as a pipeline and what to do (MLIR diagnostics have been
/// reported).
llvm::Expected<std::vector<PipelineTrainingStage>>
buildPipelineTraining(mlir::MLIRContext &context, const PlanCandidate &plan,
                      const PipelineTrainingOptions &options);

/// What every stage exchanges per step, {axis: {op: {calls, bus_bytes}}},
/// the largest over the \p pp stages for each count (as `--comm-stats-json`
/// reports the largest over the ranks): the steps' collectives, and the
/// activations and cotangents sent and received between the stages, through
/// each of a stage's model chunks (`stages` holds pp * v virtual stages).
llvm::json::Object
pipelineCollectives(std::vector<PipelineTrainingStage> &stages, int64_t pp,
                    int64_t microBatches);

/// Lowers every stage's programs and writes the artifact (the manifest's
/// programs: each stage's step, named `stage<k>`, which the stage's ranks
/// run, then its `forward` and `backward`, with the `pipeline` key).
llvm::FailureOr<TrainedSummary> writePipelineTrainingArtifact(
    std::vector<PipelineTrainingStage> &stages, const PlanCandidate &plan,
    const TrainingArtifactOptions &options, std::string &error);

} // namespace autopar

#endif // AUTOPAR_DRIVER_PIPELINETRAINING_H
