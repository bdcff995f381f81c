//===- PlannerImpl.h - Internals of the plan search -------------*- C++ -*-===//

#ifndef AUTOPAR_LIB_PLANNER_PLANNERIMPL_H
#define AUTOPAR_LIB_PLANNER_PLANNERIMPL_H

#include "autopar/Dialect/AttentionPattern.h"
#include "autopar/Dialect/EmbeddingLookup.h"
#include "autopar/Planner/OpCost.h"
#include "autopar/Planner/Planner.h"

#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/GlobPattern.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace autopar::plan {

/// Sharding of one tensor over the tensor-parallel axis: split along a
/// tensor dim (>= 0), replicated, or a partial sum awaiting reduction.
using TensorSharding = int;
constexpr TensorSharding kReplicated = -1;
constexpr TensorSharding kPartial = -2;
std::string shardingName(TensorSharding s);

/// Number of elements of a static shape (as double: counts reach 1e12).
inline double numElements(llvm::ArrayRef<int64_t> shape) {
  double n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Seconds with a unit that keeps three significant digits ("3.042 ms").
std::string formatSeconds(double s);

/// A tensor of the program.
struct ValueInfo {
  llvm::SmallVector<int64_t> shape;
  double bytes = 0;
  /// Depends on a parameter: its sharding matters. Other tensors (graph
  /// inputs, constants, values computed from them) are available replicated
  /// everywhere and can be sliced for free.
  bool isActivation = false;
  bool isParameter = false;
  /// A parameter the step trains (a float parameter that the forward does
  /// not update as state, as BatchNorm its running statistics): it has a
  /// gradient and optimizer states.
  bool isTrained = false;
  /// Depends on a graph input (the data): what differs from one
  /// micro-batch to the next. A backward makes again, rather than keeps,
  /// what it computes from constants and parameters alone (a transposed
  /// weight).
  bool dataDependent = false;
  /// A graph input (not a parameter).
  bool isInput = false;
  /// Per dim, where the batch is (PlanBatch.cpp): the index stride of one
  /// batch item, or kNoBatch / kMixedBatch.
  llvm::SmallVector<int64_t> batch;
  /// The runtime has collectives for its element type (f32, f64, i32,
  /// i64: Communicator.h); others (i1 masks) can only be sliced.
  bool communicable = true;
  /// Index of the last op using it, -1 if unused (or a function result).
  int64_t lastUse = -1;
  /// Operands of ops that read it (an op reading it twice counts twice).
  int64_t uses = 0;
  bool isResult = false;
  /// A result that is the new value of a parameter the forward updates
  /// (BatchNorm's running statistics in a training step).
  bool isStateUpdate = false;
  /// Stays f32 under bf16/fp16 mixed precision (autopar-mixed-precision
  /// stores only elementwise kernels' outputs in the low type): a GEMM's,
  /// a convolution's or a reduction's result, the loss head autocast runs
  /// in f32, and reshapes and slices of those.
  bool f32UnderMixedPrecision = false;
};

/// A dim without the batch, and one holding it in a way no split can keep
/// (sliced, or spread over several dims).
constexpr int64_t kNoBatch = -1;
constexpr int64_t kMixedBatch = -2;

/// Where the batch is in an op's loops and in its result.
struct BatchInference {
  llvm::SmallVector<int64_t> loops, result;
};

/// The batch of `op`'s loops (as its options number them) and result, from
/// its operands' (PlanOp::operands order); `batch` is the global batch.
BatchInference inferBatch(mlir::Operation *op,
                          const std::optional<EmbeddingLookup> &lookup,
                          llvm::ArrayRef<llvm::ArrayRef<int64_t>> operands,
                          int64_t batch);

/// The range tp may divide of a loop or dim of `range` whose batch is at
/// `stride`: all of it without the batch, the part per batch item with it
/// (a replica has a share of the batch), none where the batch is mixed.
int64_t splittableRange(int64_t range, int64_t stride, int64_t batch);

/// One way to run an op under tensor parallelism.
struct OpOption {
  int64_t splitLoop = -1; ///< loop split over tp; -1: replicated
  /// Required sharding of each operand (kReplicated for non-tensors).
  llvm::SmallVector<TensorSharding> operands;
  TensorSharding result = kReplicated;
  /// The op all-reduces its partial sum itself (`result` is then
  /// replicated): what shard-partition does with a split reduction. The
  /// planner keeps the sum partial, for its one reader to reduce-scatter or
  /// all-reduce as it needs, only where one conversion reads it.
  bool reducesResult = false;
  /// How many all-reduces of the result's size `reducesResult` runs: one
  /// for a split sum; three for the vocabulary-parallel cross-entropy (the
  /// blocks' maxima, their rescaled sums of exponentials, the label's
  /// logit: CrossEntropyShardingModels.cpp).
  int64_t resultAllReduces = 1;
  /// Operands that stay whole while the op is split: in training their
  /// gradient is a partial sum to all-reduce.
  llvm::SmallVector<bool> wholeOperandOfSplitOp;
};

struct PlanOp {
  mlir::Operation *op = nullptr;
  OpCost cost;
  llvm::SmallVector<int64_t> operands; ///< value ids, -1 for non-tensors
  int64_t result = -1;                 ///< value id, -1 if none
  std::vector<OpOption> options;
  /// Size of each splittable loop (for pass-through ops: the operand dims);
  /// an option splitting loop d needs loopRanges[d] % tp == 0.
  llvm::SmallVector<int64_t> loopRanges;
  /// Contractions (matmul, convolution): kept under selective recompute.
  bool isContraction = false;
  /// An operand read only at the rows an index picks (an embedding's
  /// table): it moves at most the result's bytes, not its own. -1: none.
  int64_t gatheredOperand = -1;
  /// Free shape ops (reshapes, empties, constants).
  bool free = false;
  /// Elementwise fusion (PlanGraph.cpp): the result is computed inside its
  /// only user and never written.
  bool resultFused = false;
  /// Operands the op does not read from memory (bit k: operand k): the
  /// result of a producer fused into it, an init its body ignores (the
  /// `tensor.empty` of an elementwise op).
  uint64_t unreadOperands = 0;
  /// A piece of a fused attention (docs/design/attention.md) whose result
  /// lives only in the kernel's registers: nothing of it is saved for the
  /// backward, whatever the recomputation.
  bool savesNothing = false;
  /// A piece of a pattern the backends may fuse (attention, softmax
  /// cross-entropy) short of its last op: no segment, so no pipeline stage,
  /// ends after it (a boundary would keep the stages from fusing it, and
  /// send what the kernel never writes). Marked whether or not the plan
  /// prices the pattern fused, so that every plan cuts alike.
  bool insideKernel = false;
  /// What the backward keeps for this op's adjoint (AdjointReads.cpp), each
  /// value counted at its first reader: its operands (bit k: operand k),
  /// its result (a max reduction's), and, under selective recomputation,
  /// the values kept instead of those of its reads that are recomputed (the
  /// GEMM outputs and inputs they are made again from), by value id.
  uint64_t savedOperands = 0;
  bool savesResult = false;
  std::vector<int64_t> savedUnderSelective;
  /// The op that carries a fused kernel's work (PlanGraph.cpp): what the
  /// kernel's backward reads besides its statistics (value ids), kept as the
  /// kernel reads them. A fused attention's output op: the query, key and
  /// value, and its output (kernelKeepsResult); its statistics are
  /// kernelStatsFraction of the output (one per query row). A fused
  /// cross-entropy's pick: the logits, not its result; its statistics (the
  /// log-sum-exp) are one per position, as many as the result.
  std::vector<int64_t> kernelOperands;
  double kernelStatsFraction = 0;
  bool kernelKeepsResult = true;
  /// The backward keeps the kernel's statistics (claimSavedActivations: a
  /// kernel that is recomputed anyway keeps nothing).
  bool savesKernelStats = false;
  /// Of kernelOperands, those this op keeps (the others are kept by an
  /// earlier reader).
  std::vector<int64_t> kernelSaved;
  /// The graph inputs this op is the first to read (value ids).
  std::vector<int64_t> firstReadInputs;
  /// The backward's compute time over the forward's.
  double backwardFactor = 2;
};

/// Calls of each collective and the sum of their sizes (bytes, as the
/// runtime's counters define a collective's size: Communicator.h).
struct CollectiveTally {
  static constexpr int kKinds = int(Collective::SendRecv) + 1;
  double calls[kKinds] = {};
  double bytes[kKinds] = {};
  void add(Collective c, double size) {
    calls[int(c)] += 1;
    bytes[int(c)] += size;
  }
  void add(const CollectiveTally &other, double times = 1) {
    for (int k = 0; k < kKinds; ++k) {
      calls[k] += times * other.calls[k];
      bytes[k] += times * other.bytes[k];
    }
  }
};

/// The collective that converts a tensor from sharding `from` to `to` over
/// tp (forward) or brings its gradient back (backward); nullopt when the
/// conversion is free (slicing a replicated tensor, or nothing to do).
std::optional<Collective> reshardCollective(TensorSharding from,
                                            TensorSharding to, bool backward);

/// The size (Communicator.h's definition) of the collective `c` that
/// reshards a tensor of `bytes` (whole, unsplit) over `n` ranks: the whole
/// tensor, except all-to-all, whose size is one rank's block.
double reshardMessageBytes(Collective c, double bytes, int64_t n);

/// The sharding over tp of the activation a segment receives from the one
/// before it (`in`) and of the one it hands on (`out`). Segments are cut where
/// one activation is live, so each end has one; graph outputs always leave
/// replicated.
struct SegmentBoundary {
  TensorSharding in = kReplicated, out = kReplicated;
  bool operator<(const SegmentBoundary &o) const {
    return std::pair(in, out) < std::pair(o.in, o.out);
  }
};

/// Ops between two points where a single activation is live.
struct Segment {
  int64_t first = 0, last = 0; ///< op indices, inclusive
  uint64_t signature = 0;
  int64_t distinctId = 0; ///< equal for identical (repeated) segments
  /// The model layer the segment belongs to (segmentLayers), or -1.
  int64_t layerIndex = -1;
  double parameterElements = 0;
  int64_t onnxNodes = 0;
  /// What a step without pipeline stages keeps of this segment for the
  /// backward under full recomputation: its outputs an adjoint or a
  /// recomputation reads, and what it makes that no recomputation makes
  /// (claimKeptUnderFull). Indices of the ops making them (each kept as
  /// its op's option lays out its result).
  llvm::SmallVector<int64_t> keptUnderFull;
};

struct ProgramGraph {
  std::vector<PlanOp> ops;
  std::vector<ValueInfo> values;
  llvm::DenseMap<mlir::Value, int64_t> valueIds;
  std::vector<Segment> segments;
  int64_t distinctSegments = 0;
  int64_t globalBatch = 1;
  /// Why the batch cannot be cut into parts (replicas, micro-batches) whose
  /// results concatenate into the whole batch's: a graph output whose
  /// leading dim does not hold the batch as its outer factor (a Concat or
  /// Tile along the batch). Empty when it can.
  std::string batchCutProblem;
  int64_t tokensPerStep = 1;
  double parameterElements = 0;
  double parameterBytes = 0;
  double forwardFlops = 0;
};

/// The model layer of each segment, from the segments' distinct ids in
/// program order (-1: in no layer). A layer is one repeat of a block of
/// segments that the model repeats back to back: the repeat covering the most
/// segments is found first (the shortest block among equals; a transformer
/// block of an attention and an MLP segment), then others in what is left (an
/// encoder's and a decoder's stacks). Next to a repeat, segments that match
/// the end of its block (before it) or the start (after it) form a layer of
/// their own (a first or last block that differs in a segment). Layers are
/// numbered in program order.
std::vector<int64_t> segmentLayers(llvm::ArrayRef<int64_t> distinctIds);

/// Builds the graph, the ops' sharding options and the segments of `main`.
/// With `fusedAttention`, attention the backends fuse (the head dims it
/// allows) is priced as one FlashAttention kernel (PlanGraph.cpp,
/// priceFusedAttention); without, as the unfused ops. With
/// `fusedCrossEntropy`, an imported softmax cross-entropy is priced as the
/// fused loss autopar-fuse-cross-entropy makes of it (priceFusedCrossEntropy).
/// Parameters whose
/// names match \p frozen are held but not trained (ValueInfo::isTrained),
/// and, for a training plan (\p lossOutput given), those the loss does not
/// depend on (PlanRequest::lossOutput). A training plan's results are the
/// loss and the state the forward updates, as the step returns them: the
/// model's other outputs are neither gathered nor kept live to the end
/// (all outputs are results when no output is the loss).
llvm::FailureOr<ProgramGraph>
buildProgramGraph(mlir::func::FuncOp main,
                  std::optional<AttentionPatternOptions> fusedAttention =
                      AttentionPatternOptions(),
                  llvm::ArrayRef<llvm::GlobPattern> frozen = {},
                  std::optional<llvm::StringRef> lossOutput = std::nullopt,
                  bool fusedCrossEntropy = true);

/// Restricts each op of \p graph that \p pins name to the options that
/// shard it as pinned (PlanRequest::pinnedOpShardings), and tells the
/// segments apart again by the options left. Returns how many ops were
/// pinned.
int64_t followPinnedShardings(ProgramGraph &graph,
                              llvm::ArrayRef<PinnedOpSharding> pins);

/// The ONNX node a planned op is named after (its NameLoc), or "".
std::string decisionNodeName(mlir::Operation *op);

/// OpDecision::signature of \p op: its name and the shapes of the tensors it
/// reads and of its result, leading dims as '?'.
std::string opSignature(const ProgramGraph &graph, const PlanOp &op);

/// Which operands of an op its adjoint reads (bit k: operand k, in
/// PlanOp::operands' order) and whether it reads the op's result, given
/// which operands need a gradient (`active`).
struct AdjointReads {
  uint64_t operands = 0;
  bool result = false;
};
AdjointReads adjointReads(mlir::Operation *op,
                          llvm::function_ref<bool(unsigned)> active);

/// Cost of one segment for a given tp degree and micro-batch.
struct SegmentCost {
  double forwardCompute = 0, backwardCompute = 0;
  /// Of the compute, the GEMMs' (contractions): what tensor-parallel
  /// collectives overlap under CostContext::overlapTensorParallelComm.
  double forwardGemm = 0, backwardGemm = 0;
  double forwardComm = 0, backwardComm = 0;
  /// Extra forward compute in the backward pass, per Recompute mode.
  double recomputeCompute[3] = {0, 0, 0};
  /// Activation bytes kept for the backward pass, per Recompute mode.
  double savedActivationBytes[3] = {0, 0, 0};
  /// The part of savedActivationBytes that is graph inputs (the data an
  /// MLP's first GEMM reads): a pipeline stage keeps its micro-batch's
  /// copy, a step without stages reads the batch the runtime holds anyway.
  double savedInputBytes[3] = {0, 0, 0};
  /// What a pipeline stage that starts here keeps under full recomputation
  /// (it recomputes everything from what it receives): the activation it
  /// receives, and the graph inputs (data, labels) its ops read first here.
  double receivedBytes = 0, dataInputBytes = 0;
  /// Largest live set in inference.
  double peakLiveBytes = 0;
  /// Largest tensor communicated (sizes communication buffers).
  double largestMessageBytes = 0;
  double parameterElementsPerRank = 0;
  /// Of those, the trained ones' (ValueInfo::isTrained): what has gradients
  /// and optimizer states.
  double trainedElementsPerRank = 0;
  /// Gradient bytes of whole weights used by split ops: all-reduced over tp
  /// once per step.
  double tpGradientSyncBytes = 0;
  /// The tp collectives of one micro-batch's forward and backward pass.
  CollectiveTally forwardCollectives, backwardCollectives;
  /// What solveSegment minimized: the segment's time under its choice.
  double objective = 0;
  /// The shardings the segment was solved for at its two ends.
  SegmentBoundary boundary;
  std::vector<int> choice; ///< option per op of the segment
};

/// Context for costing ops.
struct CostContext {
  const ClusterSpec *cluster = nullptr;
  Precision precision = Precision::FP32;
  PlanMode mode = PlanMode::Inference;
  GroupPlacement tpGroup;
  /// Activations are scaled by microBatch / globalBatch.
  double batchScale = 1;
  /// The IR holds f32 (as exported); tensors of a bf16/fp16 plan take half
  /// the bytes.
  double elementScale = 1;
  /// PlanRequest::overlapTensorParallelComm.
  bool overlapTensorParallelComm = false;

  /// Bytes of `v` in f32 (as the IR holds it): activations per
  /// micro-batch, parameters whole.
  double f32Bytes(const ValueInfo &v) const {
    return v.bytes * (v.isParameter ? 1 : batchScale);
  }
  /// Bytes of `v` in this plan's precision.
  double bytes(const ValueInfo &v) const { return f32Bytes(v) * elementScale; }
  /// Bytes of `v` kept for the backward: as bytes(), but what mixed
  /// precision leaves in f32 (ValueInfo::f32UnderMixedPrecision) at 4
  /// bytes. (Time and traffic are still priced at the plan's precision.)
  double keptBytes(const ValueInfo &v) const {
    return v.f32UnderMixedPrecision ? f32Bytes(v) : bytes(v);
  }
};

/// Solves the sharding of every op in `segment` exactly (dynamic program over
/// the shardings of the live tensors). The segment's input and output are
/// replicated over tp.
SegmentCost solveSegment(const ProgramGraph &graph, const Segment &segment,
                         int64_t tp, const CostContext &ctx,
                         SegmentBoundary boundary = {});

/// solveSegment for a segment entered with sharding `in`, once for each of
/// the `outs` it may hand its activation on with (one dynamic program).
std::vector<SegmentCost>
solveSegmentForOutputs(const ProgramGraph &graph, const Segment &segment,
                       int64_t tp, const CostContext &ctx, TensorSharding in,
                       llvm::ArrayRef<TensorSharding> outs);

/// The cost of `segment` with the given option per op (from solveSegment),
/// at the batch scale of `ctx`: re-evaluating a solution for another
/// micro-batch size is cheap.
SegmentCost evaluateSegment(const ProgramGraph &graph, const Segment &segment,
                            int64_t tp, const CostContext &ctx,
                            std::vector<int> choice,
                            SegmentBoundary boundary = {});

/// The sharding activation `id`, live past `segment`, leaves it with: the
/// boundary's for the one the next segment receives, replicated for the rest
/// (graph outputs are whole).
TensorSharding leavingSharding(const ProgramGraph &graph,
                               const Segment &segment, SegmentBoundary boundary,
                               int64_t id);

/// The activation `segment` receives from the segment before it (the result
/// of that segment's last op), or -1 for the first segment.
int64_t segmentInput(const ProgramGraph &graph, const Segment &segment);

/// The shardings over `tp` ranks an activation may have between two
/// segments: replicated, or split along a dim that `tp` divides.
llvm::SmallVector<TensorSharding>
boundaryShardings(const ProgramGraph &graph, int64_t valueId, int64_t tp);

/// Whether sharding \p s of activation \p valueId splits it along the
/// sequence (Megatron-LM's sequence parallelism): along a dim other than its
/// last (the features), which boundaryShardings offers only where the dim
/// holds no batch (or the part of it one batch item spans: the positions of
/// a flattened batch x sequence).
bool isSequenceSplit(const ProgramGraph &graph, int64_t valueId,
                     TensorSharding s);

/// Per segment k, whether the activation it receives from segment k - 1 is
/// the residual stream, which sequence parallelism splits along the
/// sequence: an activation of tokens by features (rank 2 or 3) with a
/// splittable dim besides the features, of the size (elements and features,
/// so that a [batch * sequence, hidden] product before its reshape counts)
/// of those handed on inside the model's repeated layers (both segments in a
/// layer: segmentLayers) or, where no layers are found (a 2-layer model
/// whose first layer differs), of most such activations. This takes in the
/// embeddings' output and the last LayerNorm's, as Megatron-LM's
/// sequence-parallel region does, and leaves out the logits (another width).
/// False for the first segment.
std::vector<bool> residualStreamBoundaries(const ProgramGraph &graph);

/// Time of the AdamW update of `elements` parameters on one rank.
double optimizerSeconds(const CostContext &ctx, double elements);

/// Forward time of `op` under `option` at tp degree `tp`.
double opComputeSeconds(const ProgramGraph &graph, const PlanOp &op,
                        const OpOption &option, int64_t tp,
                        const CostContext &ctx);

/// Time to convert a tensor of `bytes` from sharding `from` to `to`, forward
/// and (training) backward.
double reshardSeconds(TensorSharding from, TensorSharding to, double bytes,
                      const CostContext &ctx, bool backward);

//===----------------------------------------------------------------------===//
// Pipeline stages (PlanStages.cpp)
//===----------------------------------------------------------------------===//

/// What a pipeline stage's cost depends on, summed (or, for the largest
/// ones, maximized) over its segments. One segment's own figures are a
/// StageTotals too; a stage is the add() of its segments in order.
struct StageTotals {
  double seconds = 0;     ///< forward (+ backward, recompute) per micro-batch
  double params = 0;      ///< parameter elements per rank
  double trained = 0;     ///< of which trained (gradients, optimizer states)
  double tpGradBytes = 0; ///< gradients all-reduced over tp once per step
  double saved = 0;       ///< activation bytes kept per micro-batch
  double backward = 0;    ///< backward compute per micro-batch
  double forward = 0;     ///< forward compute per micro-batch
  /// ZeRO-3's exposed gathers and reduce-scatters per micro-batch.
  double zero3PerMicroBatch = 0;
  double peakLive = 0, message = 0, largestLayerBytes = 0; ///< largest
  /// The backward's working set beyond the kept activations (the largest
  /// over the segments): what the mode recomputes of the segment, live while
  /// its backward runs, and the gradient of its largest value.
  double workingSet = 0;
  /// The activations without recomputation, summed: what a pipeline stage
  /// under full recomputation makes again before its backward.
  double unrecomputed = 0;
  /// A pipeline stage under full recomputation keeps what its first segment
  /// receives and the data its segments read (SegmentCost).
  double received = 0, dataInputs = 0;
  int64_t segments = 0;
  void add(const StageTotals &o) {
    if (segments == 0)
      received = o.received;
    segments += o.segments;
    dataInputs += o.dataInputs;
    seconds += o.seconds;
    params += o.params;
    trained += o.trained;
    tpGradBytes += o.tpGradBytes;
    saved += o.saved;
    backward += o.backward;
    forward += o.forward;
    zero3PerMicroBatch += o.zero3PerMicroBatch;
    peakLive = std::max(peakLive, o.peakLive);
    workingSet = std::max(workingSet, o.workingSet);
    unrecomputed += o.unrecomputed;
    message = std::max(message, o.message);
    largestLayerBytes = std::max(largestLayerBytes, o.largestLayerBytes);
  }
};

/// The parts of the step time a stage decides (the step takes the largest of
/// each over the stages) and the stage's memory per device.
struct StagePrice {
  double dpExposed = 0;    ///< gradient synchronization not hidden
  double zero3Exposed = 0; ///< ZeRO-3's per-layer collectives not hidden
  double optimizer = 0;    ///< the optimizer step
  double memory = 0;       ///< bytes per device
  /// The activation bytes the stage keeps per micro-batch in flight, so a
  /// price made for no place in the pipeline can be placed (placeStage).
  double keptPerMicroBatch = 0;
};

/// Cutting a chain of segments into pipeline stages. For `stages` stages,
/// each a contiguous, non-empty range of segments, the step time is
///   sum_s T_s + (m - 1) max_s T_s + max_s dpExposed_s + max_s zero3Exposed_s
///   + max_s optimizer_s  (+ point-to-point terms no cut changes),
/// with T_s the stage's seconds per micro-batch; a split fits when every
/// stage's memory is at most `memoryCap`.
struct StageSplitProblem {
  std::vector<StageTotals> segments;
  int64_t stages = 1;
  int64_t microBatches = 1;
  double memoryCap = 0;
  /// Prices a stage holding `totals`, wherever it is in the pipeline: its
  /// memory without the activations of the micro-batches it holds in flight
  /// (placeStage adds them). Each part must not decrease when a segment is
  /// added to the stage, and zero3Exposed must be microBatches x
  /// totals.zero3PerMicroBatch (the lower bounds use both). Only the
  /// activations depend on the stage's place, so the search prices a range of
  /// segments once for every stage that could hold it.
  std::function<StagePrice(const StageTotals &totals)> price;
  /// Micro-batches whose activations stage k holds at once (1F1B: p - k).
  std::vector<int64_t> inFlight;
  /// Splits of a larger objective are of no interest to the caller (a plan
  /// search that already holds better plans): partial splits whose lower
  /// bound exceeds it are dropped too. When no split is under it, the result
  /// is the incumbent and not exact (StageSplitChoice::exact).
  double objectiveCap = std::numeric_limits<double>::infinity();
  /// The optimizer time of a stage holding `params` parameter elements
  /// (StagePrice::optimizer), non-decreasing in `params`; for bounds.
  std::function<double(double params)> optimizerSeconds;
};

/// Inclusive segment ranges, one per stage.
using StageRanges = std::vector<std::pair<int64_t, int64_t>>;

struct StageSplitChoice {
  StageRanges ranges;
  bool fits = false;
  /// (m - 1) max T + max dpExposed + max zero3Exposed + max optimizer: the
  /// step time less what every split shares.
  double objective = 0;
  double memory = 0; ///< of the most loaded stage
  /// False when the best split is known only to exceed the problem's
  /// objectiveCap; `ranges` is then the incumbent.
  bool exact = true;
};

/// The split of least step time among those that fit, exactly: `incumbent` (any
/// split, e.g. the balanced one) bounds a dynamic program over (stage, last
/// segment) that keeps, per state, the splits of the prefix no other beats on
/// every max the step time takes (slowest stage, exposed communication,
/// optimizer, memory), and drops those whose lower bound (the rest of the chain
/// spread evenly over the stages left) cannot beat the incumbent. When no split
/// fits, `incumbent`.
StageSplitChoice bestStageSplit(const StageSplitProblem &problem,
                                const StageRanges &incumbent);

/// `price` (StageSplitProblem::price) for stage `stage` of `problem`.
StagePrice placeStage(const StageSplitProblem &problem, StagePrice price,
                      int64_t stage);

/// The price of `ranges` under `problem` (fits, objective, memory).
StageSplitChoice priceStageSplit(const StageSplitProblem &problem,
                                 const StageRanges &ranges);

//===----------------------------------------------------------------------===//
// Pricing fully pinned plans (tests: brute force over the joint space)
//===----------------------------------------------------------------------===//

/// Every choice of a plan fixed, the stage boundaries included.
struct PinnedPlan {
  int64_t dp = 1, tp = 1, pp = 1;
  int zeroStage = 0;
  int64_t microBatchSize = 1;
  Recompute recompute = Recompute::None;
  StageRanges stages; ///< empty: one stage of every segment
};

/// Prices pinned plans exactly as the search prices its candidates (the same
/// segment shardings, the same step time and memory), so that a brute force
/// over every plan can check what the search returns.
class PinnedPlanPricer {
public:
  PinnedPlanPricer(const ProgramGraph &graph, const PlanRequest &request);
  ~PinnedPlanPricer();
  PlanCandidate price(const PinnedPlan &plan);

private:
  struct Impl;
  std::unique_ptr<Impl> impl;
};

} // namespace autopar::plan

#endif // AUTOPAR_LIB_PLANNER_PLANNERIMPL_H
