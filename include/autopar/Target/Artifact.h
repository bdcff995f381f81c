//===- Artifact.h - The directory autopar-compile writes ---------*- C++
//-*-===//
//
// See docs/design/artifact.md for the format. The runtime reads it without
// any LLVM/MLIR, so the manifest is plain JSON.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TARGET_ARTIFACT_H
#define AUTOPAR_TARGET_ARTIFACT_H

#include "autopar/Import/WeightLocator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>
#include <vector>

namespace autopar {

/// One argument of a program's entry point.
struct ArtifactArgument {
  /// Training steps add OptimizerState, Step, Seed, Metric and Update
  /// (docs/design/training-artifact.md).
  enum class Kind {
    Parameter,
    Input,
    Output,
    ActivationIn,
    ActivationOut,
    OptimizerState,
    Step,
    Seed,
    /// The index of the call's first sample in the global batch
    /// (attrs::kSampleOffset): internal to a training step, except in a
    /// pipeline stage's forward, whose runtime passes it per micro-batch.
    SampleOffset,
    Metric,
    Update,
    /// Pipeline-parallel training: a forward value a stage's backward
    /// reads (attrs::kResidual), kept per micro-batch.
    Residual,
    /// Pipeline-parallel training: a sum over the step's micro-batches
    /// (attrs::kAccumulator).
    Accumulator
  };
  Kind kind;
  std::string name;
  /// NumPy-style element type name.
  std::string dtype;
  llvm::SmallVector<int64_t> shape;
  /// Where a parameter's bytes are.
  WeightSource source;
  /// The type of those bytes when it differs from `dtype` (a float32 model
  /// parameter stored as bfloat16 on a GPU: the runtime converts it), else
  /// empty.
  std::string sourceDtype;
  /// For inputs and outputs: the shape of the whole tensor when it differs
  /// from `shape` (cut over data-parallel ranks, or into micro-batches), and
  /// the dim it is cut along over `splitAxis` (-1: not cut over ranks).
  llvm::SmallVector<int64_t> globalShape;
  int64_t splitDim = -1;
  /// The grid axis the tensor is cut over: "dp" or "tp".
  std::string splitAxis = "dp";
  /// A second cut, of the block the first leaves: ZeRO's data-parallel
  /// blocks (dim 0) of a tensor-parallel block (PyTorch FSDP2's layout over
  /// TP); the manifest lists both splits, outermost first (-1: none).
  int64_t innerSplitDim = -1;
  std::string innerSplitAxis = "dp";
  /// For activations: the pipeline stage they come from or go to.
  int64_t peerStage = -1;
  /// Parameters of a training step: whether it is trained.
  bool trainable = false;
  /// Optimizer states: the role ("exp_avg", ...) and the parameter.
  std::string role, stateOf;
  /// Updates: the argument whose next value this result is.
  std::string updates;
};

/// The `training` key of a training artifact's manifest.
struct ArtifactTraining {
  std::string loss;
  int64_t globalBatch = 0;
  /// Samples times this is the token count (sequence models), or 0.
  int64_t tokensPerSample = 0;
  /// The resolved configuration, for logs and checkpoints.
  llvm::json::Object optimizer, scheduler;
  double gradientClipping = 0.0;
  /// "fp32", or "bf16": activations stored in bf16, parameters, gradients
  /// and optimizer state f32 (mixed precision).
  std::string precision = "fp32";
  /// Micro-batches per step (gradient accumulation inside the program).
  int64_t microBatches = 1;
  /// fp16's loss scaling (`dynamic`, `initial_scale`, `min_loss_scale`,
  /// ...), or none.
  std::optional<llvm::json::Object> lossScaling;
  /// The inference model the runtime completes with the trained values for
  /// --save-onnx (InferenceModel.h), relative to the artifact; empty: none.
  std::string inferenceTemplate;
  /// The program computing the loss with dropout off and BatchNorm on its
  /// running statistics (`--eval-data`); empty: none.
  std::string evalProgram;
  /// Why the artifact has no eval program, for autopar-run's error
  /// (`eval_unavailable`); empty when it has one.
  std::string evalUnavailable;
};

/// One program: a shared library and the arguments of its entry.
struct ArtifactProgram {
  std::string name = "stage0";
  std::string library = "stage0.so";
  std::vector<ArtifactArgument> arguments;
  /// GPU programs: the kernel objects (cubins) written next to the library,
  /// relative to the artifact directory.
  std::vector<std::string> deviceCode;
  /// Pipeline-parallel training: "forward" or "backward" for the programs
  /// a stage's ranks run per micro-batch, with that `stage`; empty for a
  /// program ranks run as their step.
  std::string phase;
  int64_t stage = 0;
};

/// How a pipeline plan runs its stages (docs/design/artifact.md).
struct ArtifactPipeline {
  int64_t microBatches = 1, microBatchSize = 1;
  std::string schedule = "1f1b";
  /// Model chunks per stage (the interleaved schedule); written only when
  /// more than 1.
  int64_t virtualStages = 1;
};

/// The device the programs run on (manifest `target`); absent means CPU.
struct ArtifactTarget {
  std::string kind;      ///< "cuda"
  std::string arch;      ///< "sm_90"
  std::string precision; ///< "fp32", "bf16", "fp16"
};

/// What the manifest describes.
struct ArtifactDescription {
  std::string modelPath;
  std::string cluster;
  int64_t worldSize = 1;
  /// The grid of the plan.
  int64_t dp = 1, tp = 1, pp = 1;
  /// Without `pipeline`, every rank runs the one program; with it, the ranks
  /// at pp coordinate k run programs[k], one per stage.
  std::vector<ArtifactProgram> programs;
  std::optional<ArtifactPipeline> pipeline;
  /// GPU programs: the target (absent: the CPU).
  std::optional<ArtifactTarget> target;
  /// Training artifacts (`mode` "train").
  std::optional<ArtifactTraining> training;
};

/// The entry's arguments in call order (parameters, inputs, then outputs;
/// a pipeline stage's received activations after its inputs and its sent
/// activations before its outputs), read from the attributes the importer
/// and `autopar-split-pipeline-stages` put on `main` (before lowering).
mlir::FailureOr<std::vector<ArtifactArgument>>
collectArtifactArguments(mlir::func::FuncOp main);

/// Writes `dir/manifest.json` (and `dir/constants.bin` for parameters whose
/// bytes are not stored raw in the model). Parameters get their sources from
/// `weights`; a parameter missing there is an error.
mlir::LogicalResult writeManifest(llvm::StringRef dir,
                                  ArtifactDescription description,
                                  const llvm::StringMap<WeightSource> &weights,
                                  std::string &error);

} // namespace autopar

#endif // AUTOPAR_TARGET_ARTIFACT_H
