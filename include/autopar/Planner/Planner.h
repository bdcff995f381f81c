//===- Planner.h - Automatic 3D-parallel plan search ------------*- C++ -*-===//
//
// Given an imported program (one `@main` of linalg on tensors), a global
// batch and a cluster, the planner chooses data (dp), tensor (tp) and
// pipeline (pp) parallelism, the ZeRO stage, micro-batch size and count,
// activation recomputation, pipeline stage boundaries and the sharding of
// every op, by predicting step time and memory with the cost model
// (Analysis/CostModel.h). Search is hierarchical (ARCHITECTURE.md, principle
// 5): the program is cut into segments where a single activation is live,
// identical segments (repeated layers) are solved once, per-op sharding
// within a segment is an exact dynamic program over the live tensors'
// shardings derived from the ops' indexing maps (upstream ShardingInterface),
// stage boundaries come from a balanced partition of segments, and grid
// shapes, ZeRO stages, micro-batch sizes and recomputation are enumerated
// around that.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PLANNER_PLANNER_H
#define AUTOPAR_PLANNER_PLANNER_H

#include "autopar/Planner/Cluster.h"
#include "autopar/Planner/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>
#include <vector>

namespace autopar {

enum class PlanMode { Inference, Training };
enum class Recompute { None, Selective, Full };
llvm::StringRef recomputeName(Recompute r); ///< "none", "selective", "full"
bool parseRecompute(llvm::StringRef name, Recompute &r);

/// Parts of the plan the user fixed (`--dp`, `--tp`, ...).
struct PlanPins {
  std::optional<int64_t> dp, tp, pp;
  std::optional<int> zeroStage;
  std::optional<int64_t> microBatchSize;
  std::optional<Recompute> recompute;
  /// The pipeline schedule (default 1F1B, Megatron's).
  std::optional<PipelineSchedule> schedule;
  /// Megatron-LM's sequence parallelism: with tp > 1, the activations handed
  /// on between and within the model's layers (the residual stream, read by
  /// LayerNorm, dropout and the residual adds) are split along the sequence
  /// over tp (true) or kept whole (false, Megatron-LM's layout without it);
  /// unset, the cost decides (a split of the features is one more choice).
  std::optional<bool> sequenceParallel;
  /// Model chunks per pipeline stage: v > 1 runs Megatron-LM's interleaved
  /// 1F1B (training, pp > 1, micro-batches a multiple of pp), each stage
  /// holding v chunks of the layers; unset or 1, one chunk.
  std::optional<int64_t> virtualStages;
};

/// One op's choice over tp as a plan made it, for a later plan of the same
/// program to follow: the plan of one tp group (a data-parallel replica or a
/// pipeline stage, planned again when it is partitioned) adopts the cluster
/// plan's choices, so that what runs is the layout that plan priced.
struct PinnedOpSharding {
  std::string node; ///< the ONNX node the op comes from (its location)
  /// The op's name and shapes (OpDecision::signature): pins match ops of
  /// the same kind on the same shapes, leading (batch) dims aside.
  std::string signature;
  /// Sharding over tp of each operand and of the result, as in OpDecision.
  std::vector<int> operandShardings;
  int resultSharding = -1;
};

struct PlanRequest {
  ClusterSpec cluster;
  PlanMode mode = PlanMode::Inference;
  Precision precision = Precision::FP32;
  PlanPins pins;
  /// The forward depends on the whole batch a replica sees (BatchNorm's
  /// batch statistics): plans cut no micro-batches unless a pin asks.
  bool wholeReplicaBatch = false;
  /// Name of the model in reports.
  std::string modelName;
  /// How many runner-up plans to report.
  int maxAlternatives = 4;
  /// Attention runs as fused FlashAttention kernels (autopar-compile's
  /// --fuse-attention): priced as one kernel, no S x S activation.
  bool fusedAttention = true;
  /// A training step computes the model's softmax cross-entropy with the
  /// fused kernels (autopar-compile's --fuse-cross-entropy): priced as one
  /// pass over the logits each way, the logits and their log-sum-exp kept
  /// rather than the log-probabilities.
  bool fusedCrossEntropy = true;
  /// Price tensor-parallel collectives as overlapped with the GEMMs of their
  /// segment, chunk by chunk, as Megatron-LM's --tp-comm-overlap
  /// (Transformer Engine's userbuffers) runs them (autopar-compile's
  /// --tp-comm-overlap, --plan-only: autopar's runtime does not overlap
  /// them). docs/cost-model.md, "Tensor-parallel communication overlapped".
  bool overlapTensorParallelComm = false;
  /// fp32 tensors the optimizer keeps per parameter: 2 for Adam and AdamW
  /// (the moments), 1 for SGD with momentum, 0 for plain SGD.
  int optimizerStatesPerParameter = 2;
  /// Globs of parameters the step keeps fixed (`--freeze`): held, but with
  /// no gradient, optimizer state or gradient traffic.
  std::vector<std::string> frozenParameters;
  /// The graph output the training loss is computed from (`--loss NAME`, or
  /// X of `cross-entropy:X`; empty: the only scalar float output, if there
  /// is one). Parameters it does not depend on get no gradient, as
  /// autopar-differentiate gives them none: held, but not trained. A name
  /// that is no output leaves every parameter trained (the compiler reports
  /// a bad --loss).
  std::string lossOutput;
  /// Fill PlanResult::dimensions (`--explain-plan`). A pinned dimension is
  /// compared by searching again without its pin.
  bool compareDimensions = false;
  /// Choices to follow (pinnedOpShardings of an earlier plan, in program
  /// order): an op keeps only the options that shard it so. The pins of a
  /// node are matched to its ops in order, by signature (op name and shapes,
  /// leading dims aside); an op that matches none (another lowering added it:
  /// a data-parallel replica's all-reduce of BatchNorm's statistics, the
  /// parts of a fused projection) is planned freely.
  std::vector<PinnedOpSharding> pinnedOpShardings;
};

struct MemoryBreakdown {
  double parameters = 0, gradients = 0, optimizerStates = 0, activations = 0,
         communication = 0, other = 0;
  /// Training: what the backward holds beyond the kept activations while it
  /// differentiates one segment: what recomputation makes again of it, and
  /// the gradient of the segment's largest value.
  double workingSet = 0;
  double total() const {
    return parameters + gradients + optimizerStates + activations + workingSet +
           communication + other;
  }
};

struct StepBreakdown {
  double compute = 0, exposedCommunication = 0, bubble = 0, optimizer = 0;
};

/// One pipeline stage: a contiguous range of segments.
struct StagePlan {
  int64_t firstSegment = 0, lastSegment = 0; ///< inclusive
  int64_t onnxNodes = 0;
  /// The model layers in the stage, as "first-last" (empty: none), for
  /// reports. A layer is one repeat of the block of segments the model
  /// repeats (a transformer block: its attention and its MLP segment); a
  /// stage that starts or ends inside a layer counts it.
  std::string layers;
  double secondsPerMicroBatch = 0; ///< forward (+ backward when training)
  MemoryBreakdown memory;
};

/// One collective operation on one grid axis, over one step on one rank, as
/// the runtime counts it (`autopar-run --comm-stats`): the number of calls
/// and their bus bytes (nccl-tests' definition; see the runtime's
/// Communicator.h). For each axis and operation, the busiest rank's figures.
struct CollectiveVolume {
  std::string axis; ///< "dp", "tp" or "pp"
  std::string op;   ///< "all_reduce", "all_gather", ..., "send", "recv"
  double calls = 0;
  double busBytes = 0;
};

/// Adds `v` to `volumes` as the busiest rank's figures: where `volumes`
/// already has v's axis and op, each number becomes the larger of the two
/// (the stages of a pipeline issue different collectives). Zero calls add
/// nothing.
void keepBusiest(std::vector<CollectiveVolume> &volumes,
                 const CollectiveVolume &v);

/// A fully specified plan and its predicted cost.
struct PlanCandidate {
  int64_t dp = 1, tp = 1, pp = 1;
  int zeroStage = 0;
  int64_t microBatchSize = 1, numMicroBatches = 1;
  Recompute recompute = Recompute::None;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  /// tp > 1 and the residual stream is split along the sequence over tp
  /// (PlanPins::sequenceParallel): the conversions around each layer's
  /// tensor-parallel pairs are reduce-scatters and all-gathers.
  bool sequenceParallel = false;
  /// Model chunks per pipeline stage (PlanPins::virtualStages); `stages` then
  /// lists the pp * v virtual stages, chunk c of stage s at c * pp + s.
  int64_t virtualStages = 1;

  double stepSeconds = 0;
  StepBreakdown time;
  /// Most loaded rank at its peak.
  MemoryBreakdown memory;
  bool fits = false;
  /// The pipeline stages in order (one without a pipeline); with virtual
  /// stages the virtual ones, each with its stage's memory.
  std::vector<StagePlan> stages;
  double tokensPerSecond = 0, tflopsPerGpu = 0, mfu = 0, bubbleFraction = 0;
  /// The collectives of one step (filled for the chosen plan).
  std::vector<CollectiveVolume> collectives;
  /// For runner-ups: why this plan lost to the chosen one.
  std::string whyNot;
};

/// The sharding chosen for one op, for `--explain` and annotations.
struct OpDecision {
  mlir::Operation *op = nullptr;
  std::string name; ///< the ONNX node name (the op's location)
  /// The op's name and the shapes of the tensors it reads and of its
  /// result, leading dims as '?' (e.g. "linalg.matmul(?x768,?x2304,_)->
  /// ?x2304"): what a later plan of another cut of the batch matches the
  /// choice by.
  std::string signature;
  std::string sharding;   ///< e.g. "split d1 over tp (result split dim 1)"
  int64_t splitLoop = -1; ///< loop split over tp, -1 when replicated
  /// Sharding over tp of each operand and of the result: a tensor dim (>= 0),
  /// -1 replicated, -2 partial sum.
  std::vector<int> operandShardings;
  int resultSharding = -1;
  /// A shape op that moves no data (a reshape): annotated for partitioning,
  /// left out of the explanation.
  bool free = false;
  /// Where the result is read after `segmentLast`, the last op of its
  /// segment (the next segment's input, a graph output), it is read with
  /// this sharding, converted once; null `segmentLast` when it is not.
  int leavingSharding = -1;
  mlir::Operation *segmentLast = nullptr;
  double computeSeconds = 0, communicationSeconds = 0;
};

/// The chosen plan against the best plan with another value of one
/// dimension (`--explain-plan`).
struct DimensionComparison {
  /// "dp", "tp", "pp", "zero", "micro-batch", "recompute",
  /// "sequence-parallel" (compared with a search of its own: the residual
  /// stream's layout is fixed per tp) or "virtual-stages" (training
  /// pipelines only; a search of its own too: they are not searched).
  std::string dimension;
  std::string chosen; ///< the chosen value, e.g. "8", "selective"
  /// A pin fixed it; `runnerUp` is then the best plan without the pin.
  bool pinned = false;
  /// The best plan with another value; none when no other value is possible.
  std::optional<PlanCandidate> runnerUp;
  std::string runnerUpValue;
  /// The chosen plan's step time over the runner-up's, minus 1 (-0.11: 11%
  /// faster); 0 without a runner-up.
  double stepTimeChange = 0;
  /// What decides between them: "compute", "exposed communication",
  /// "pipeline bubble", "optimizer", "memory" (one does not fit), "tie" or
  /// "" (no runner-up).
  std::string dominantTerm;
  /// The sentence `--explain-plan` prints, e.g. "over tp=4 (...): -11.0%
  /// step time (...), mostly less exposed communication (-1.2 ms); ...".
  std::string why;
};

/// A plan whose pins cannot fit in memory, and what would (PlanResult's
/// `infeasible`; InfeasiblePlanError).
struct PlanInfeasibility {
  double deviceMemoryBytes = 0;
  /// The plan's memory per device beyond the device's.
  double bytesOver = 0;
  /// The pins given, as (flag name without "--", value), in flag order.
  std::vector<std::pair<std::string, std::string>> pins;
  /// A set of pins whose release lets a plan fit, with the fastest plan that
  /// then fits.
  struct Release {
    std::vector<std::string> pins; ///< flag names without "--"
    PlanCandidate plan;
  };
  /// Each smallest set of pins whose release lets a plan fit, the fastest
  /// plan first (the nearest plan that fits). Empty when no pin was given or
  /// nothing fits even without the pins.
  std::vector<Release> releases;
  /// The error message: the bytes over, the pins to change, the nearest plan
  /// that fits.
  std::string message;
};

struct PlanResult {
  PlanCandidate best;
  std::vector<PlanCandidate> alternatives;
  std::vector<OpDecision> decisions; ///< for the chosen tp, per op
  /// Pipeline stage of every op of `@main`.
  std::vector<std::pair<mlir::Operation *, int64_t>> opStages;
  double searchSeconds = 0;
  int64_t globalBatch = 1;
  int64_t tokensPerStep = 1;
  double parameters = 0;   ///< model parameters
  double flopsPerStep = 0; ///< model FLOPs of one step (no recompute)
  int64_t segments = 0, distinctSegments = 0;
  /// Plans the search covered (every one the pins allow, but the stage
  /// boundaries) and, of them, those never priced because a lower bound
  /// showed they could not be chosen or reported (docs/planner.md).
  int64_t candidatesEvaluated = 0;
  int64_t candidatesPruned = 0;
  /// Per dimension, the choice against its runner-up (when the request asks:
  /// PlanRequest::compareDimensions).
  std::vector<DimensionComparison> dimensions;
  /// Set when `best` does not fit in memory (InfeasiblePlanError).
  std::optional<PlanInfeasibility> infeasible;
};

/// The choices of \p result (its `decisions`), for a later request's
/// pinnedOpShardings.
std::vector<PinnedOpSharding> pinnedOpShardingsOf(const PlanResult &result);

/// planProgram's error when no plan the pins allow fits in memory: the
/// message says by how much, which pins to change and the nearest plan that
/// fits; the result is the plan of least memory under the pins
/// (`best.fits` false, `infeasible` set), for the report.
class InfeasiblePlanError : public llvm::ErrorInfo<InfeasiblePlanError> {
public:
  static char ID;
  explicit InfeasiblePlanError(PlanResult result)
      : planResult(std::move(result)) {}
  const PlanResult &result() const { return planResult; }
  void log(llvm::raw_ostream &os) const override;
  std::error_code convertToErrorCode() const override {
    return llvm::inconvertibleErrorCode();
  }

private:
  PlanResult planResult;
};

/// The planning options as the tools spell them (`autopar-compile` flags,
/// `autopar-plan` pass options); 0 / -1 / "" mean "not given".
struct PlanFlags {
  std::string cluster = "local:1";
  std::string mode = "infer";
  std::string precision;
  std::string recompute;
  /// "gpipe" or "1f1b"; empty: 1F1B.
  std::string schedule;
  /// "on" or "off"; empty: the cost decides.
  std::string sequenceParallel;
  int64_t dp = 0, tp = 0, pp = 0, zero = -1, microBatchSize = 0;
  /// Model chunks per pipeline stage (the interleaved 1F1B); -1: not given.
  int64_t virtualStages = -1;
};

/// Validates the flags and builds the request: the cluster, the mode, the
/// precision (default: the cluster's), the pins. Errors name the flag.
llvm::Expected<PlanRequest> buildPlanRequest(const PlanFlags &flags);

/// Plans `main`. Errors say why no plan exists (pins that cannot work, ...);
/// when no plan fits in memory the error is an InfeasiblePlanError, which
/// carries the plan of least memory for the report.
llvm::Expected<PlanResult> planProgram(mlir::func::FuncOp main,
                                       const PlanRequest &request);

/// The plan report of INTERFACES.md, with each pipeline stage's order
/// ("stage_orders", pipelineStageOrder: forwards only unless `request` is
/// training).
llvm::json::Value planReportJson(const PlanResult &result,
                                 const PlanRequest &request);

/// The human-readable plan table printed by autopar-compile.
void printPlanTable(llvm::raw_ostream &os, const PlanResult &result,
                    const PlanRequest &request);

/// Each op's sharding decision with its cost (`--explain`).
void printPlanExplanation(llvm::raw_ostream &os, const PlanResult &result);

/// Why each dimension of the plan won against its runner-up
/// (`--explain-plan`; PlanResult::dimensions).
void printPlanDimensions(llvm::raw_ostream &os, const PlanResult &result);

/// The values of `main` that hold the batch in one of their dims, with that
/// dim (the planner's batch analysis, PlanBatch.cpp): data parallelism
/// splits them there. Values whose batch is mixed into a dim are left out.
llvm::DenseMap<mlir::Value, int> findBatchDims(mlir::func::FuncOp main);

/// The ops of each segment the planner cuts `main` into, in order: the
/// units pipeline stages are made of. Fails if `main` cannot be analyzed.
llvm::FailureOr<std::vector<std::vector<mlir::Operation *>>>
segmentOps(mlir::func::FuncOp main);

} // namespace autopar

#endif // AUTOPAR_PLANNER_PLANNER_H
