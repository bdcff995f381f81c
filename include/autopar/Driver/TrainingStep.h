//===- TrainingStep.h - From an imported forward to a training artifact -*- C++
//-*-===//
//
// The training half of the compile flow (docs/training.md): the passes that
// turn the imported forward program into one training step, registered as the
// pipeline `autopar-train-pipeline` so that autopar-opt runs the same steps as
// autopar-compile --mode train, and the writing of a training artifact.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DRIVER_TRAININGSTEP_H
#define AUTOPAR_DRIVER_TRAININGSTEP_H

#include "autopar/Driver/TrainConfig.h"
#include "autopar/Import/OnnxImporter.h"
#include "autopar/Planner/Planner.h"
#include "autopar/Target/Artifact.h"
#include "autopar/Target/GpuCodegen.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace autopar {

/// What the training step computes.
struct TrainingStepOptions {
  /// The loss: a graph output's name, "" for the only scalar float output,
  /// or "cross-entropy:OUTPUT" to add PyTorch's cross-entropy on OUTPUT.
  std::string loss;
  /// Globs of parameters that stay fixed.
  std::vector<std::string> freeze;
  /// Stop after the gradients (no optimizer): the program returns the loss
  /// and `<param>.grad`.
  bool emitGradients = false;
  /// Micro-batches per step: the forward was imported for one micro-batch
  /// and autopar-accumulate-gradients loops over them (1: none).
  int64_t microBatches = 1;
  /// Data-parallel replicas: the forward was imported for one replica's
  /// share of the global batch; the loss and gradient sums are all-reduced
  /// over grid axis 0 and normalised for the global batch (1: none).
  int64_t dataParallel = 1;
  /// ZeRO stage over the data-parallel replicas (0 to 2;
  /// docs/distributed-training.md, "ZeRO"): 1 shards the optimizer states,
  /// 2 also reduce-scatters the gradients.
  int64_t zeroStage = 0;
  /// Optimizer, clipping and learning-rate schedule.
  TrainConfig config = defaultTrainConfig();
  /// Lower the replicas' collectives (shard ops) to runtime calls at the
  /// end; false leaves them, for stepCollectives, and the caller lowers.
  bool lowerCollectives = true;
  /// bf16/fp16: GEMMs read their 16-bit operands as they are (a GPU's
  /// tensor cores, accumulating in f32), instead of the rounded operands
  /// extended back to f32 (CPU kernels are f32).
  bool lowPrecisionGemms = false;
  /// Fuse attention (autopar-fuse-attention) before differentiating, so
  /// that the step runs FlashAttention's forward and backward; the head
  /// dims it takes (GPU kernels: multiples of 8 up to 128).
  bool fuseAttention = true;
  /// Compute `--loss cross-entropy:OUTPUT` with the fused
  /// autopar.softmax_cross_entropy (docs/design/cross-entropy.md): one pass
  /// over the logits forward and one backward, no f32 copy of bf16 logits.
  bool fuseCrossEntropy = true;
  int64_t attentionMaxHeadDim = 0;
  int64_t attentionHeadDimMultiple = 1;
  /// Tensor-parallel ranks (docs/distributed-training.md, "Tensor
  /// parallelism"): above 1, `makePlanPass` plans and annotates the forward
  /// for the group before it is differentiated, and
  /// autopar-shard-training-state lays out the optimizer states and updates
  /// as their parameters. The step is left annotated, for
  /// addTensorParallelPartitioning (TensorParallel.h).
  int64_t tensorParallel = 1;
  /// The plan's recomputation (autopar-rematerialize's mode): "none",
  /// "selective" or "full".
  std::string recompute = "none";
  /// The `autopar-plan` pass for the group; null: planned as `local:N`.
  std::function<std::unique_ptr<mlir::Pass>()> makePlanPass;
  /// Tensor parallelism: the differentiated step was partitioned over its
  /// group before the gradient accumulation and the optimizer
  /// (partitionDifferentiated), so that they see each rank's blocks: ZeRO
  /// then cuts a rank's tp block over dp as it would a whole parameter.
  /// For buildUpdatePipeline.
  bool partitionedForTensorParallel = false;
  /// Mark where each micro-batch's forward and backward begin
  /// (autopar-differentiate's phase-marks), so that autopar-run measures
  /// the activations kept for the backward. CPU steps only: the runtime's
  /// allocation accounting is the CPU code's.
  bool phaseMarks = false;
};

/// The output named by a "cross-entropy:OUTPUT" loss, or "" for any other.
std::string crossEntropyOutput(llvm::StringRef loss);

/// Adds autopar-add-cross-entropy-loss to `pm` (on a module) when `loss` is
/// "cross-entropy:OUTPUT", fused or not: the added output is named "loss".
/// Returns whether it did.
bool addCrossEntropyLossPass(mlir::OpPassManager &pm, llvm::StringRef loss,
                             bool fused);

/// Adds to `pm` (on a module) the passes that make the imported forward one
/// training step: autopar-fuse-attention, the added loss if asked,
/// autopar-differentiate,
/// autopar-accumulate-gradients (micro-batches > 1), autopar-apply-optimizer
/// (unless emitGradients), canonicalize and CSE.
void buildTrainingStepPipeline(mlir::OpPassManager &pm,
                               const TrainingStepOptions &options);

/// The first half of buildTrainingStepPipeline: the forward planned for the
/// tp group (tensorParallel > 1), fused attention, the added loss,
/// autopar-differentiate and autopar-rematerialize; @main then returns the
/// loss and the gradients.
void buildGradientPipeline(mlir::OpPassManager &pm,
                           const TrainingStepOptions &options);

/// The second half: autopar-accumulate-gradients (micro-batches, the
/// replicas' sums, ZeRO), mixed precision, autopar-apply-optimizer (unless
/// emitGradients), the optimizer states' layout under tp, canonicalize and
/// CSE.
void buildUpdatePipeline(mlir::OpPassManager &pm,
                         const TrainingStepOptions &options);

/// Registers `autopar-train-pipeline` (options `train-config=FILE`,
/// `loss=NAME`, `freeze=GLOB,...`, `emit-gradients`, `micro-batches=N`,
/// `data-parallel=N`, `zero-stage=S`).
void registerTrainingStepPipeline();

/// A tensor of a step partitioned over tp: its whole shape and the dim each
/// rank holds a block of.
struct TensorParallelSplit {
  llvm::SmallVector<int64_t> globalShape;
  int64_t dim = -1;
};

/// Where and how to write a training artifact.
struct TrainingArtifactOptions {
  std::string modelPath; ///< the ONNX file the step was imported from
  std::string outputDir; ///< the artifact directory (created)
  std::string cluster;   ///< the --cluster spec, recorded in the manifest
  std::string targetCpu; ///< LLVM's CPU name ("native" by default)
  std::string dumpDir;   ///< --dump-ir, or ""
  int64_t globalBatch = 0;
  /// Micro-batches accumulated per step, recorded in the manifest.
  int64_t microBatches = 1;
  /// Data-parallel ranks running the step (the manifest's world and dp
  /// axis): each reads its share of every input's batch, parameters are
  /// replicated. Optimizer states (and their updates) whose shape is a
  /// block of their parameter's (ZeRO) are split over dp along dim 0.
  int64_t dataParallel = 1;
  /// With the optimizer: the training section of the manifest and the
  /// inference template for --save-onnx; without (emitGradients), a program
  /// autopar-run runs like an inference artifact.
  bool withOptimizer = true;
  TrainConfig config = defaultTrainConfig();
  /// The step's loss (TrainingStepOptions::loss) and the import options, to
  /// compile the eval program (the model re-imported with Dropout off and
  /// BatchNorm on its running statistics) for --eval-data.
  std::string loss;
  ImportOptions importOptions;
  /// Code for one NVIDIA GPU instead of one CPU rank: the step and the eval
  /// program lowered by the GPU backend (its `precision` must be "fp32": the
  /// training step is already in its mixed precision, with f32 master
  /// weights the eval program shares).
  std::optional<GpuTarget> gpu;
  /// Fuse attention in the programs lowered here (the eval program).
  bool fuseAttention = true;
  /// Compute the eval program's cross-entropy (the model's own, or the one
  /// `loss` adds) with the fused op, as the step does.
  bool fuseCrossEntropy = true;
  /// Tensor-parallel ranks: the manifest's tp axis. The step's arguments and
  /// results are then each rank's blocks, as `tensorParallelSplits` says,
  /// or, where it is empty (a step partitioned before its update), as the
  /// `autopar.tp_split` attributes of its parameters say
  /// (markTensorParallelBlocks).
  int64_t tensorParallel = 1;
  /// For each argument then each result of the partitioned step's @main
  /// (collectArtifactArguments' order): the whole shape and the dim split
  /// over tp, or an empty shape for one every rank holds whole.
  std::vector<TensorParallelSplit> tensorParallelSplits;
  /// With tensorParallel > 1: the plan request the eval program's tp group
  /// is planned for (partitionTensorParallel), the step's choices pinned, so
  /// that it holds the parameters as the step does.
  std::optional<PlanRequest> tensorParallelRequest;
};

/// The manifest's splits of \p main's tensor-parallel blocks: a parameter
/// marked `autopar.tp_split` is this rank's block of a tensor of \p tp
/// blocks along that dim, and so are its optimizer states and the updates
/// of both; under ZeRO over \p dp replicas, also cut along dim 0 of the tp
/// block over dp (a second split) where their shape is that block's block.
void markTensorParallelBlocks(mlir::func::FuncOp main, int64_t tp, int64_t dp,
                              std::vector<ArtifactArgument> &arguments);

/// What a training step trains, for the plan table and the report.
/// The collectives one call of the training step's @main runs (`shard`
/// ops on @autopar_grid, counted through calls and constant-trip loops), as the
/// plan report's `predicted_collectives`: {"dp"|"tp": {op:
/// {"calls", "bus_bytes"}}}, bus bytes as the runtime counts them
/// (Communicator.h). Run before the collectives are lowered.
llvm::json::Object stepCollectives(mlir::ModuleOp module);

/// What a program's collectives move: {axis name: {op: (calls, bus
/// bytes)}}.
using CollectiveTally =
    std::map<std::string, std::map<std::string, std::pair<double, double>>>;

/// stepCollectives before it becomes JSON.
CollectiveTally stepCollectiveTally(mlir::ModuleOp module);

/// A tally as the report's `predicted_collectives`.
llvm::json::Object collectivesJson(const CollectiveTally &tally);

struct TrainedSummary {
  int64_t tensors = 0, elements = 0, bytes = 0;
};

/// Lowers the training step in `module` for one CPU rank (or one GPU) and
/// writes the artifact: the shared library, the inference template and the
/// manifest. Returns what is trained; fails with `error` set (diagnostics of
/// the lowering are emitted on the module's context).
llvm::FailureOr<TrainedSummary>
writeTrainingArtifact(mlir::ModuleOp module,
                      const TrainingArtifactOptions &options,
                      std::string &error);

/// The manifest's `training` key of an artifact whose ranks run the step
/// program with arguments `step` (the loss, the batch, tokens per sample,
/// the configuration); fp16's loss scaling, the eval program and the
/// inference template are the caller's.
ArtifactTraining trainingDescription(llvm::ArrayRef<ArtifactArgument> step,
                                     const TrainingArtifactOptions &options);

/// The optimizer, clipping and schedule of `config` as
/// autopar-apply-optimizer's options (loss scaling, ZeRO and pipeline
/// stages left at their defaults).
ApplyOptimizerOptions optimizerOptions(const TrainConfig &config);

/// fp16's loss scale (the static scale, or the dynamic scaler's initial
/// one) for autopar-differentiate and autopar-apply-optimizer alike: 0
/// without fp16 loss scaling (another precision, or `--emit-gradients`).
double lossScaleOf(const TrainingStepOptions &options);

/// Whether fp16's loss scale moves (dynamic scaling: the scaler's state
/// `loss_scaler.scale_offset` and the rest).
bool dynamicLossScaleOf(const TrainingStepOptions &options);

/// `o` with fp16's loss scaling of `options` (unchanged without it).
void setLossScaling(ApplyOptimizerOptions &o,
                    const TrainingStepOptions &options);

/// autopar-mixed-precision's options for a training step in
/// `options.config.precision` (bf16 or fp16): f32 master weights, the loss
/// head in f32, f32 GEMMs unless the target has low-precision ones.
MixedPrecisionOptions mixedPrecisionOptions(const TrainingStepOptions &options);

/// The manifest's `training.loss_scaling` for fp16 training under
/// `config`; none otherwise.
std::optional<llvm::json::Object>
lossScalingDescription(const TrainConfig &config);

/// `main` returning only its result named `name`; false if it has none.
bool keepOnlyResult(mlir::func::FuncOp main, llvm::StringRef name);

/// Data parallelism: marks every input of `arguments` as cut along its
/// leading dim over `dataParallel` ranks (an input without one is an
/// error).
mlir::LogicalResult
markDataParallelInputs(std::vector<ArtifactArgument> &arguments,
                       int64_t dataParallel, std::string &error);

/// ZeRO: marks each optimizer state of `arguments` that is a block (dim 0)
/// of its parameter as split over dp into `dataParallel` blocks, and under
/// ZeRO-3 the parameters in `blockParameters` too; their updates alike.
void markZeroShardedStates(std::vector<ArtifactArgument> &arguments,
                           int64_t dataParallel,
                           const llvm::StringSet<> &blockParameters);

/// ZeRO-3: the parameters `main` takes as blocks (`autopar.zero_blocks`).
llvm::StringSet<> zeroBlockParameters(mlir::func::FuncOp main);

/// Lowers a training artifact's program `module` for the target of `o` (one
/// CPU rank or one GPU) and writes `<name>.so` (and, on a GPU, its cubins)
/// into the artifact's directory; returns the manifest's description of it.
mlir::FailureOr<ArtifactProgram>
lowerTrainingProgram(mlir::ModuleOp module, const TrainingArtifactOptions &o,
                     llvm::StringRef name,
                     std::vector<ArtifactArgument> arguments,
                     const std::string &llvmIRPath, std::string &error);

} // namespace autopar

#endif // AUTOPAR_DRIVER_TRAININGSTEP_H
