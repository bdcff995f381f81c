//===- PlanGraph.cpp - The program as the planner sees it -----------------===//
//
// Flattens `@main` into ops over numbered tensors, derives each op's
// tensor-parallel options from its iteration domain and indexing maps (the
// information upstream's ShardingInterface exposes for linalg ops), and cuts
// the program into segments at points where a single activation is live:
// the boundaries between transformer blocks (and between their attention and
// MLP halves), or between the stages of a CNN.
//
//===----------------------------------------------------------------------===//

#include "PlannerImpl.h"

#include "autopar/Planner/ActiveValues.h"
#include "autopar/Planner/LossHead.h"
#include "autopar/Planner/Recompute.h"
#include "autopar/Planner/ReshapeSplits.h"

#include "autopar/Dialect/AttentionPattern.h"
#include "autopar/Dialect/Attributes.h"
#include "autopar/Dialect/AutoparOps.h"
#include "autopar/Dialect/CrossEntropyPattern.h"
#include "autopar/Dialect/EmbeddingLookup.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSet.h"

#include <queue>

using namespace mlir;
namespace autopar::plan {

std::string shardingName(TensorSharding s) {
  if (s == kReplicated)
    return "replicated";
  if (s == kPartial)
    return "partial sum";
  return "split dim " + std::to_string(s);
}

static double tensorBytes(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return 0;
  unsigned bits = tensor.getElementType().getIntOrFloatBitWidth();
  return double(tensor.getNumElements()) * std::max(1u, bits / 8);
}

/// Options of an op with an iteration domain: replicate, or split one loop
/// (divisibility by tp is checked per tp in the search). `operandMaps` index
/// the op's tensor operands as PlanOp::operands lists them, `resultMap` its
/// result; loops in `skip` are never split.
static void loopOptions(ArrayRef<AffineMap> operandMaps, AffineMap resultMap,
                        ArrayRef<utils::IteratorType> iterators,
                        const llvm::SmallDenseSet<int64_t> &skip,
                        PlanOp &planOp) {
  OpOption whole;
  whole.operands.assign(operandMaps.size(), kReplicated);
  whole.wholeOperandOfSplitOp.assign(operandMaps.size(), false);
  planOp.options.push_back(whole);

  // The sharding of a tensor indexed by `map` when `loop` is split.
  auto shardingOf = [](AffineMap map, int64_t loop) -> FailureOr<int> {
    TensorSharding s = kReplicated;
    for (unsigned j = 0; j < map.getNumResults(); ++j) {
      AffineExpr e = map.getResult(j);
      if (auto dim = dyn_cast<AffineDimExpr>(e)) {
        if (dim.getPosition() == loop)
          s = j;
      } else if (e.isFunctionOfDim(loop)) {
        return failure(); // e.g. a convolution's input window
      }
    }
    return s;
  };
  for (int64_t loop = 0; loop < int64_t(iterators.size()); ++loop) {
    if (skip.contains(loop))
      continue;
    OpOption option;
    option.splitLoop = loop;
    bool valid = true;
    for (AffineMap map : operandMaps) {
      FailureOr<int> s = shardingOf(map, loop);
      valid &= succeeded(s);
      option.operands.push_back(succeeded(s) ? *s : kReplicated);
      option.wholeOperandOfSplitOp.push_back(option.operands.back() ==
                                             kReplicated);
    }
    FailureOr<int> result = shardingOf(resultMap, loop);
    if (!valid || failed(result))
      continue;
    // Reduction results that are not sums (max) still reduce across ranks;
    // the cost is the same all-reduce.
    option.result =
        iterators[loop] == utils::IteratorType::reduction ? kPartial : *result;
    planOp.options.push_back(option);
  }
}

/// Options of a linalg op. Its result follows its (first) init's map.
static void linalgOptions(linalg::LinalgOp op, PlanOp &planOp) {
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  // Loops read through linalg.index would need offsets when split.
  llvm::SmallDenseSet<int64_t> indexed;
  op->walk([&](linalg::IndexOp index) { indexed.insert(index.getDim()); });
  planOp.loopRanges = op.getStaticLoopRanges();
  planOp.isContraction = planOp.cost.kind == ComputeKind::Gemm;
  loopOptions(maps, maps[op.getNumDpsInputs()], op.getIteratorTypesArray(),
              indexed, planOp);
}

/// Options of a fused cross-entropy (autopar.softmax_cross_entropy): split
/// a position loop (each rank its rows, no collective), or the classes (the
/// vocabulary-parallel loss: each rank its block of the logits, the labels
/// whole, the loss per position a partial result, as the max, the sum of
/// exponentials and the label's logit are all-reduced). Operands: logits,
/// labels, and the two inits, which are only written.
static void crossEntropyOptions(SoftmaxCrossEntropyOp op, PlanOp &planOp) {
  auto logits = cast<RankedTensorType>(op.getLogits().getType());
  int64_t rank = logits.getRank();
  MLIRContext *ctx = op.getContext();
  AffineMap all = AffineMap::getMultiDimIdentityMap(rank, ctx);
  AffineMap rows = all.dropResult(rank - 1);
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  iterators.back() = utils::IteratorType::reduction;
  planOp.loopRanges.assign(logits.getShape().begin(), logits.getShape().end());
  planOp.unreadOperands |= 0b1100;
  loopOptions({all, rows, rows, rows}, rows, iterators, {}, planOp);
  // Split classes (the vocabulary-parallel loss): the op's partition
  // merges the blocks itself, in three all-reduces of the rows, and
  // returns the whole loss.
  for (OpOption &option : planOp.options)
    if (option.result == kPartial) {
      option.result = kReplicated;
      option.reducesResult = true;
      option.resultAllReduces = 3;
    }
}

/// The op carrying a fused cross-entropy's kernel (an
/// autopar.softmax_cross_entropy, or the pick of the pattern it replaces):
/// its backward reads the logits (value id `logits`) and one f32
/// log-sum-exp per position, as many as its result, not the result itself.
static void keepLogitsAndLogSumExp(PlanOp &planOp, int64_t logits) {
  planOp.kernelOperands = {logits};
  planOp.kernelKeepsResult = false;
  planOp.kernelStatsFraction = 1.0;
}

/// Options of a fused attention (autopar.attention, fused before a
/// tensor-parallel plan): split the batch or the heads, as its sharding
/// model partitions it (lib/Transforms/AttentionShardingModels.cpp); the
/// queries, keys and head dims stay whole. Loops (batch, heads, queries,
/// keys, head dim, value dim); operands query, key, value, the mask if any,
/// and the two inits, which are only written. Grouped-query key and value
/// heads (query head h reads key/value head h / g) split with the query
/// heads in contiguous blocks: here their dim follows the heads loop, whose
/// range is the key/value heads' (a split needs them to divide by tp, and
/// then the query heads do too).
static void attentionOptions(AttentionOp op, PlanOp &planOp) {
  MLIRContext *ctx = op.getContext();
  auto query = cast<RankedTensorType>(op.getQuery().getType());
  auto key = cast<RankedTensorType>(op.getKey().getType());
  auto value = cast<RankedTensorType>(op.getValue().getType());
  AffineExpr b = getAffineDimExpr(0, ctx), h = getAffineDimExpr(1, ctx),
             q = getAffineDimExpr(2, ctx), k = getAffineDimExpr(3, ctx),
             d = getAffineDimExpr(4, ctx), e = getAffineDimExpr(5, ctx);
  auto map = [&](ArrayRef<AffineExpr> exprs) {
    return AffineMap::get(6, 0, exprs, ctx);
  };
  AffineMap out = map({b, h, q, e});
  SmallVector<AffineMap> maps = {map({b, h, q, d}), map({b, h, k, d}),
                                 map({b, h, k, e})};
  if (Value mask = op.getMask()) {
    SmallVector<AffineExpr> exprs = {b, h, q, k};
    for (auto [i, size] :
         llvm::enumerate(cast<ShapedType>(mask.getType()).getShape()))
      if (size == 1)
        exprs[i] = getAffineConstantExpr(0, ctx);
    maps.push_back(map(exprs));
  }
  unsigned inits = maps.size();
  maps.append({out, map({b, h, q})});
  planOp.unreadOperands |= uint64_t(0b11) << inits;
  planOp.loopRanges = {query.getDimSize(0), key.getDimSize(1),
                       query.getDimSize(2), key.getDimSize(2),
                       query.getDimSize(3), value.getDimSize(3)};
  SmallVector<utils::IteratorType> iterators(6, utils::IteratorType::parallel);
  iterators[3] = iterators[4] = utils::IteratorType::reduction;
  loopOptions(maps, out, iterators, {2, 3, 4, 5}, planOp);
}

/// Options of an embedding lookup (Embedding.h), whose operands are the
/// table and the ids: split the ids' dims, the table's row dims, or the
/// vocabulary, which leaves a partial sum (Megatron's vocabulary-parallel
/// embedding).
static void embeddingOptions(const EmbeddingLookup &lookup, Operation *op,
                             PlanOp &planOp) {
  auto result = cast<RankedTensorType>(op->getResult(0).getType());
  auto ids = cast<RankedTensorType>(lookup.ids.getType());
  SmallVector<AffineMap> maps = EmbeddingOp::getLookupMaps(
      op->getContext(), ids.getRank(), result.getRank());
  SmallVector<utils::IteratorType> iterators(result.getRank() + 1,
                                             utils::IteratorType::parallel);
  iterators.back() = utils::IteratorType::reduction;
  planOp.loopRanges.assign(result.getShape().begin(), result.getShape().end());
  planOp.loopRanges.push_back(lookup.numRows);
  planOp.gatheredOperand = 0;
  loopOptions(ArrayRef(maps).take_front(2), maps[2], iterators, {}, planOp);
}

/// Options of ops that only move data: sharding passes through unchanged
/// dims. `map[i]` is the result dim of operand dim i, or -1.
static void passThroughOptions(Operation *op, ArrayRef<int64_t> map,
                               PlanOp &planOp) {
  if (op->getNumOperands() > 0)
    if (auto t = dyn_cast<RankedTensorType>(op->getOperand(0).getType()))
      planOp.loopRanges.assign(t.getShape().begin(), t.getShape().end());
  OpOption whole;
  whole.operands.assign(op->getNumOperands(), kReplicated);
  whole.wholeOperandOfSplitOp.assign(op->getNumOperands(), false);
  planOp.options.push_back(whole);
  // A concat reads every operand like its first.
  unsigned splitOperands = isa<tensor::ConcatOp>(op) ? op->getNumOperands() : 1;
  for (auto [i, j] : llvm::enumerate(map)) {
    if (j < 0)
      continue;
    OpOption option = whole;
    option.splitLoop = i;
    for (unsigned k = 0; k < splitOperands; ++k)
      option.operands[k] = i;
    option.result = j;
    planOp.options.push_back(option);
  }
}

static void shapeOpOptions(Operation *op, PlanOp &planOp) {
  // A split passes through a reshape at a group's outermost non-unit dim
  // (ShardingModels.cpp).
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op)) {
    SmallVector<int64_t> map;
    for (const auto &group : expand.getReassociationIndices())
      map.push_back(
          splittableDimOfGroup(group, expand.getResultType().getShape()));
    return passThroughOptions(op, map, planOp);
  }
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op)) {
    auto groups = collapse.getReassociationIndices();
    SmallVector<int64_t> map(collapse.getSrcType().getRank(), -1);
    for (auto [g, group] : llvm::enumerate(groups))
      map[splittableDimOfGroup(group, collapse.getSrcType().getShape())] = g;
    return passThroughOptions(op, map, planOp);
  }
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
    auto srcShape = slice.getSourceType().getShape();
    llvm::SmallBitVector dropped = slice.getDroppedDims();
    SmallVector<int64_t> map(srcShape.size(), -1);
    int64_t j = 0;
    for (int64_t i = 0; i < int64_t(srcShape.size()); ++i) {
      if (dropped.test(i))
        continue;
      bool full = slice.isDynamicOffset(i) == false &&
                  slice.getStaticOffsets()[i] == 0 &&
                  slice.getStaticSizes()[i] == srcShape[i] &&
                  slice.getStaticStrides()[i] == 1;
      if (full)
        map[i] = j;
      ++j;
    }
    return passThroughOptions(op, map, planOp);
  }
  if (auto pad = dyn_cast<tensor::PadOp>(op)) {
    SmallVector<int64_t> map;
    for (auto [d, low, high] :
         llvm::enumerate(pad.getMixedLowPad(), pad.getMixedHighPad()))
      map.push_back(isConstantIntValue(low, 0) && isConstantIntValue(high, 0)
                        ? int64_t(d)
                        : -1);
    return passThroughOptions(op, map, planOp);
  }
  if (auto concat = dyn_cast<tensor::ConcatOp>(op)) {
    // Every dim but the concatenated one passes through.
    SmallVector<int64_t> map;
    for (int64_t d = 0; d < concat.getResultType().getRank(); ++d)
      map.push_back(d == int64_t(concat.getDim()) ? -1 : d);
    return passThroughOptions(op, map, planOp);
  }
  passThroughOptions(op, {}, planOp);
}

/// Elementwise fusion as the backends will do it (autopar-fuse-elementwise):
/// an all-parallel linalg.generic whose only user is a linalg.generic reading
/// its result through a permutation is computed inside that user, so the
/// intermediate tensor is neither written nor read back (the producer's own
/// reads stay: the fused loop does them). Without this, a GELU costs five
/// round trips of the activation through memory where the generated code
/// makes one. (A sharding conversion between the two would prevent the
/// fusion; the search does not see that.)
static void
fuseElementwiseProducers(Operation &op, PlanOp &consumer,
                         const llvm::DenseMap<Operation *, size_t> &opIndex,
                         std::vector<PlanOp> &ops) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic)
    return;
  for (OpOperand &use : op.getOpOperands()) {
    auto producer = use.get().getDefiningOp<linalg::GenericOp>();
    if (!producer || producer->getNumResults() != 1 || !use.get().hasOneUse() ||
        use.getOperandNumber() >= 64 ||
        producer.getNumParallelLoops() != producer.getNumLoops() ||
        !producer.getIndexingMapMatchingResult(producer->getResult(0))
             .isPermutation() ||
        !generic.getMatchingIndexingMap(&use).isPermutation())
      continue;
    auto it = opIndex.find(producer);
    if (it == opIndex.end())
      continue;
    ops[it->second].resultFused = true;
    consumer.unreadOperands |= uint64_t(1) << use.getOperandNumber();
  }
}

/// Attention the backends fuse (autopar-fuse-attention) runs as one
/// FlashAttention kernel: the output product carries the whole kernel (both
/// products' FLOPs, halved under a causal mask whose tiles it skips; reads
/// of Q, K (by the score product's entry), V, and the mask unless causal; a
/// write of the output), priced as ComputeKind::Attention with its backward
/// at kAttentionBackwardTime; the scores, the softmax's pieces and the
/// probabilities are neither written nor saved for the backward. The
/// model's FLOPs (graph.forwardFlops, MFU's numerator) are unchanged.
static void
priceFusedAttention(func::FuncOp main, const AttentionPatternOptions &options,
                    const llvm::DenseMap<Operation *, size_t> &index,
                    const llvm::DenseMap<Value, int64_t> &valueIds,
                    std::vector<PlanOp> &ops) {
  auto planOp = [&](Operation *op) -> PlanOp * {
    auto it = index.find(op);
    return it == index.end() ? nullptr : &ops[it->second];
  };
  llvm::DenseMap<Value, bool> causalMasks;
  main.walk([&](linalg::LinalgOp op) {
    std::optional<AttentionPattern> m = matchAttentionPattern(op, options);
    if (!m)
      return;
    PlanOp *scores = planOp(m->scores), *output = planOp(m->output);
    if (!scores || !output)
      return;
    bool causal = isCausalMask(*m, &causalMasks);
    double flops = scores->cost.flops + output->cost.flops;
    auto scoreType = cast<RankedTensorType>(m->scores->getResult(0).getType());
    output->cost.flops = causal ? flops / 2 : flops;
    output->cost.kind = ComputeKind::Attention;
    output->cost.minDim = double(scoreType.getShape().back());
    output->unreadOperands |= 1; // the probabilities
    output->backwardFactor = kAttentionBackwardTime;
    // FlashAttention's backward reads Q, K, V, O and the softmax's
    // statistics (one per query row: 1 / head dim of O).
    for (Value v : {m->query, m->key, m->value})
      if (auto it = valueIds.find(v); it != valueIds.end())
        output->kernelOperands.push_back(it->second);
    auto outType = cast<RankedTensorType>(m->output->getResult(0).getType());
    output->kernelStatsFraction = 1.0 / double(outType.getShape().back());
    scores->cost.flops = 0; // its reads of Q and K stay
    scores->resultFused = true;
    scores->savesNothing = true;
    scores->backwardFactor = 0;
    for (Operation *piece : m->interior) {
      PlanOp *p = planOp(piece);
      if (!p)
        continue;
      p->cost.flops = 0;
      p->resultFused = true;
      p->savesNothing = true;
      p->backwardFactor = 0;
      // Reads nothing from memory but the mask, which a causal kernel skips.
      uint64_t keep = 0;
      if (!causal && m->mask)
        for (auto [k, operand] : llvm::enumerate(piece->getOperands()))
          if (operand == m->mask && k < 64)
            keep |= uint64_t(1) << k;
      p->unreadOperands = ~keep;
    }
    // The scales and key/value repeats the kernel does not need (it scales
    // in registers and reads a key/value head per group of query heads) are
    // gone from the fused program when only the pattern read them.
    llvm::SmallPtrSet<Operation *, 16> pattern(m->interior.begin(),
                                               m->interior.end());
    pattern.insert(m->scores);
    pattern.insert(m->output);
    pattern.insert(m->operandOps.begin(), m->operandOps.end());
    for (Operation *piece : m->operandOps) {
      PlanOp *p = planOp(piece);
      if (p && llvm::all_of(piece->getUsers(), [&](Operation *user) {
            return pattern.contains(user);
          }))
        p->free = true;
    }
  });
}

/// A softmax cross-entropy the training step fuses
/// (autopar-fuse-cross-entropy) runs as one `autopar.softmax_cross_entropy`:
/// one pass over the logits forward, which reads them and the labels and
/// writes each position's loss and log-sum-exp; one backward, which reads
/// the logits, the labels and the log-sum-exp and writes the logits'
/// gradient (twice the forward's bytes: the default backwardFactor). The
/// pick carries the kernel: its read of the log-probabilities stands for
/// the kernel's read of the logits (as many elements), its FLOPs become the
/// whole log-softmax's. The log-softmax's pieces are neither written nor
/// kept; the backward keeps the logits and the log-sum-exp (f32, one per
/// position) instead of the log-probabilities. A vocabulary split over tp
/// is priced by the pieces' options (the max and the sum of exponentials
/// all-reduced, as the vocabulary-parallel op does).
static void priceFusedCrossEntropy(
    func::FuncOp main, const llvm::DenseMap<Operation *, size_t> &index,
    const llvm::DenseMap<Value, int64_t> &valueIds, std::vector<PlanOp> &ops) {
  auto planOp = [&](Operation *op) -> PlanOp * {
    auto it = index.find(op);
    return it == index.end() ? nullptr : &ops[it->second];
  };
  main.walk([&](linalg::GenericOp op) {
    std::optional<CrossEntropyPattern> m = matchCrossEntropyPattern(op);
    if (!m)
      return;
    PlanOp *pick = planOp(m->pick);
    auto logits = valueIds.find(m->logits);
    if (!pick || logits == valueIds.end())
      return;
    for (Operation *piece : m->logSoftmax) {
      PlanOp *p = planOp(piece);
      if (!p)
        continue;
      pick->cost.flops += p->cost.flops;
      p->cost.flops = 0;
      p->resultFused = true;
      p->savesNothing = true;
      p->backwardFactor = 0;
      p->unreadOperands = ~uint64_t(0);
    }
    keepLogitsAndLogSumExp(*pick, logits->second);
  });
}

/// The ops inside a pattern the backends may fuse (attention, softmax
/// cross-entropy), short of its last op: PlanOp::insideKernel, so that no
/// segment ends there. Whether or not the plan prices them fused: the
/// segments must be the same for every plan of the program, as
/// autopar::segmentOps (which maps a plan's stages onto the program) finds
/// them.
static void
markFusablePatterns(func::FuncOp main,
                    const llvm::DenseMap<Operation *, size_t> &index,
                    std::vector<PlanOp> &ops) {
  auto mark = [&](Operation *op) {
    if (auto it = index.find(op); it != index.end())
      ops[it->second].insideKernel = true;
  };
  main.walk([&](linalg::LinalgOp op) {
    if (std::optional<AttentionPattern> m =
            matchAttentionPattern(op, AttentionPatternOptions())) {
      mark(m->scores);
      llvm::for_each(m->interior, mark);
    }
    if (auto generic = dyn_cast<linalg::GenericOp>(op.getOperation()))
      if (std::optional<CrossEntropyPattern> m =
              matchCrossEntropyPattern(generic))
        llvm::for_each(m->logSoftmax, mark);
  });
}

/// What the backward keeps (PlanOp::savedOperands, savesResult and
/// savedUnderSelective): every value an adjoint reads, once, at its first
/// reader; a parameter is held anyway, and what is made from constants and
/// parameters alone is made again.
static void claimSavedActivations(func::FuncOp main, ProgramGraph &graph) {
  auto keepable = [&](int64_t id) {
    return id >= 0 && graph.values[id].dataDependent;
  };
  std::vector<int64_t> producer(graph.values.size(), -1);
  for (auto [i, p] : llvm::enumerate(graph.ops))
    if (p.result >= 0)
      producer[p.result] = int64_t(i);
  // Under selective recomputation, a kept value a recomputed op makes is
  // made again from what that op reads: the values kept instead, up to
  // those no recomputation makes (GEMM outputs, inputs, collectives, and
  // Dropout's masks, which are never recomputed). A value walked once has
  // had its kept values claimed: later walks stop there (a residual stream
  // is walked once, not once per layer).
  llvm::DenseSet<Operation *> random = opsReadingTheSeed(main);
  std::vector<bool> seen(graph.values.size());
  auto keptInstead = [&](int64_t id, std::vector<int64_t> &out) {
    llvm::SmallVector<int64_t> work{id};
    while (!work.empty()) {
      int64_t v = work.pop_back_val();
      if (!keepable(v) || seen[v])
        continue;
      seen[v] = true;
      Operation *op = producer[v] < 0 ? nullptr : graph.ops[producer[v]].op;
      if (!op || !isSelectivelyRecomputed(op) || random.contains(op))
        out.push_back(v);
      else
        llvm::append_range(work, graph.ops[producer[v]].operands);
    }
  };
  // Keeps `id` for `p`'s backward: false if it is not kept, or kept already.
  std::vector<bool> claimed(graph.values.size());
  auto claim = [&](int64_t id, PlanOp &p) {
    if (!keepable(id) || claimed[id])
      return false;
    claimed[id] = true;
    keptInstead(id, p.savedUnderSelective);
    return true;
  };
  std::vector<bool> inputRead(graph.values.size());
  for (PlanOp &p : graph.ops) {
    for (int64_t id : p.operands)
      if (id >= 0 && graph.values[id].isInput && !inputRead[id]) {
        inputRead[id] = true;
        p.firstReadInputs.push_back(id);
      }
    if (p.savesNothing || isRecomputedAnyway(p.op))
      continue;
    if (!p.kernelOperands.empty()) {
      // A fused kernel: attention's Q, K and V (read through its scores
      // piece) and its output, a cross-entropy's logits; and the kernel's
      // statistics (PlanSegment.cpp adds those).
      for (int64_t id : p.kernelOperands)
        if (claim(id, p))
          p.kernelSaved.push_back(id);
      p.savesResult = p.kernelKeepsResult && claim(p.result, p);
      p.savesKernelStats = true;
      continue;
    }
    auto active = [&](unsigned k) {
      int64_t id = k < p.operands.size() ? p.operands[k] : -1;
      if (id < 0 ||
          !(graph.values[id].isActivation || graph.values[id].isParameter))
        return false;
      // Operands by position (a lookup's are listed otherwise, and its
      // table is a parameter): only floats carry a gradient.
      if (k < p.op->getNumOperands() && !matchEmbeddingLookup(p.op))
        if (auto t = dyn_cast<RankedTensorType>(p.op->getOperand(k).getType()))
          return isa<FloatType>(t.getElementType());
      return true;
    };
    AdjointReads reads = adjointReads(p.op, active);
    for (auto [k, id] : llvm::enumerate(p.operands))
      if (k < 64 && ((reads.operands >> k) & 1) && claim(id, p))
        p.savedOperands |= uint64_t(1) << k;
    p.savesResult = reads.result && claim(p.result, p);
  }
}

/// Full recomputation in a step without pipeline stages
/// (autopar-rematerialize) keeps the segments' outputs and recomputes the
/// rest: a segment output is kept when an adjoint reads it (what
/// claimSavedActivations keeps without recomputation) or a recomputed op
/// does, on the way from the segment's start to what an adjoint reads. An
/// output nothing recomputed reads (an embedding's lookup, summed with the
/// positions at once) is not kept. What the parameters do not flow into
/// is kept as it is (autopar-rematerialize recomputes none of it).
static void claimKeptUnderFull(ProgramGraph &graph) {
  std::vector<int64_t> producer(graph.values.size(), -1);
  for (auto [i, p] : llvm::enumerate(graph.ops))
    if (p.result >= 0)
      producer[p.result] = int64_t(i);
  std::vector<bool> output(graph.values.size());
  for (const Segment &seg : graph.segments)
    for (int64_t i = seg.first; i <= seg.last; ++i) {
      int64_t id = graph.ops[i].result;
      if (id >= 0 && graph.values[id].isActivation &&
          (graph.values[id].lastUse > seg.last || graph.values[id].isResult))
        output[id] = true;
    }
  llvm::SmallVector<int64_t> work;
  for (const PlanOp &p : graph.ops) {
    for (auto [k, id] : llvm::enumerate(p.operands))
      if (k < 64 && ((p.savedOperands >> k) & 1))
        work.push_back(id);
    if (p.savesResult)
      work.push_back(p.result);
    llvm::append_range(work, p.kernelSaved);
  }
  std::vector<bool> seen(graph.values.size()), kept(graph.values.size());
  while (!work.empty()) {
    int64_t id = work.pop_back_val();
    if (id < 0 || seen[id])
      continue;
    seen[id] = true;
    const ValueInfo &v = graph.values[id];
    // An output, or what no recomputation makes (computed from the data
    // but not from a parameter: Dropout's masks, a one-hot of the labels).
    if (output[id] || (v.dataDependent && !v.isActivation && !v.isInput)) {
      kept[id] = producer[id] >= 0;
      continue;
    }
    if (v.dataDependent && producer[id] >= 0)
      llvm::append_range(work, graph.ops[producer[id]].operands);
  }
  for (Segment &seg : graph.segments)
    for (int64_t i = seg.first; i <= seg.last; ++i)
      if (int64_t id = graph.ops[i].result; id >= 0 && kept[id])
        seg.keptUnderFull.push_back(i);
}

/// Identical segments are one distinct segment solved once; the blocks of
/// segments that repeat are the model's layers.
static void assignDistinctSegments(ProgramGraph &graph) {
  llvm::DenseMap<uint64_t, int64_t> ids;
  std::vector<int64_t> distinct;
  for (Segment &seg : graph.segments) {
    auto [it, inserted] = ids.try_emplace(seg.signature, ids.size());
    seg.distinctId = it->second;
    distinct.push_back(seg.distinctId);
  }
  std::vector<int64_t> layers = segmentLayers(distinct);
  for (auto [seg, layer] : llvm::zip_equal(graph.segments, layers))
    seg.layerIndex = layer;
  graph.distinctSegments = ids.size();
}

/// The result of \p main named \p lossOutput (its default: the only scalar
/// float output), or std::nullopt when there is no such output.
static std::optional<unsigned> lossResultIndex(func::FuncOp main,
                                               llvm::StringRef lossOutput) {
  std::optional<unsigned> loss;
  for (unsigned k = 0; k < main.getNumResults(); ++k) {
    auto name = main.getResultAttrOfType<StringAttr>(k, attrs::kOutput);
    if (!name)
      continue;
    auto type = dyn_cast<RankedTensorType>(main.getResultTypes()[k]);
    bool scalarFloat =
        type && type.getRank() == 0 && isa<FloatType>(type.getElementType());
    if (lossOutput.empty() ? scalarFloat : name.getValue() == lossOutput) {
      if (loss && lossOutput.empty())
        return std::nullopt; // several scalars: no default
      loss = k;
    }
  }
  return loss;
}

/// The arguments of \p main that carry a gradient from result \p lossIndex,
/// as autopar-differentiate finds them (ActiveValues.h): a float buffer read
/// only by a comparison (a causal mask) is not trained.
static llvm::DenseSet<Value> argumentsTheLossTrains(func::FuncOp main,
                                                    unsigned lossIndex) {
  auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
  SmallVector<Value> parameters;
  for (BlockArgument arg : main.getArguments())
    if (main.getArgAttr(arg.getArgNumber(), attrs::kParameter))
      parameters.push_back(arg);
  return findActiveValues(main, parameters, ret.getOperand(lossIndex));
}

/// Marks the values autopar-mixed-precision leaves in f32
/// (ValueInfo::f32UnderMixedPrecision): it stores only the outputs of
/// elementwise generics in the low type, and not those of the loss head
/// (what a returned f32 scalar is computed from after the last GEMM or
/// convolution: its `lossHead`); reshapes and slices carry their source's
/// type. Float graph inputs and parameters keep theirs (priced elsewhere).
static void markF32UnderMixedPrecision(func::FuncOp main, ProgramGraph &graph) {
  llvm::DenseSet<Operation *> head = lossHead(main);
  main.walk([&](Operation *op) {
    if (op->getNumResults() != 1)
      return;
    auto it = graph.valueIds.find(op->getResult(0));
    if (it == graph.valueIds.end())
      return;
    ValueInfo &info = graph.values[it->second];
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!type || !type.getElementType().isF32())
      return;
    if (isReshapeOrSlice(op)) {
      auto source = graph.valueIds.find(op->getOperand(0));
      info.f32UnderMixedPrecision =
          source != graph.valueIds.end() &&
          (graph.values[source->second].f32UnderMixedPrecision ||
           graph.values[source->second].isInput);
      return;
    }
    auto generic = dyn_cast<linalg::GenericOp>(op);
    bool elementwise = generic && generic.getNumReductionLoops() == 0;
    info.f32UnderMixedPrecision =
        isa<linalg::LinalgOp>(op) && (!elementwise || head.contains(op));
  });
}

FailureOr<ProgramGraph> buildProgramGraph(
    func::FuncOp main, std::optional<AttentionPatternOptions> fusedAttention,
    ArrayRef<llvm::GlobPattern> frozen,
    std::optional<llvm::StringRef> lossOutput, bool fusedCrossEntropy) {
  ProgramGraph graph;
  auto newValue = [&](Value v) {
    ValueInfo info;
    if (auto t = dyn_cast<RankedTensorType>(v.getType()))
      info.shape.assign(t.getShape().begin(), t.getShape().end());
    info.bytes = tensorBytes(v.getType());
    info.batch.assign(info.shape.size(), kNoBatch);
    if (auto t = dyn_cast<RankedTensorType>(v.getType())) {
      Type e = t.getElementType();
      info.communicable =
          e.isF32() || e.isF64() || e.isInteger(32) || e.isInteger(64);
    }
    graph.valueIds[v] = graph.values.size();
    graph.values.push_back(info);
    return graph.values.size() - 1;
  };

  // Parameters the forward updates as state (BatchNorm's running
  // statistics): held, but not trained.
  llvm::StringSet<> stateParameters;
  for (unsigned j = 0; j < main.getNumResults(); ++j)
    if (auto name = main.getResultAttrOfType<StringAttr>(j, attrs::kUpdate))
      stateParameters.insert(name.getValue());
  // Parameters the loss does not depend on, or only through comparisons
  // or indices, get no gradient.
  std::optional<unsigned> lossIndex;
  if (lossOutput)
    lossIndex = lossResultIndex(main, *lossOutput);
  std::optional<llvm::DenseSet<Value>> lossReads;
  if (lossIndex)
    lossReads = argumentsTheLossTrains(main, *lossIndex);
  bool sawInput = false;
  for (unsigned i = 0; i < main.getNumArguments(); ++i) {
    Value arg = main.getArgument(i);
    int64_t id = newValue(arg);
    ValueInfo &info = graph.values[id];
    if (auto name = main.getArgAttrOfType<StringAttr>(i, attrs::kParameter)) {
      info.isParameter = true;
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      info.isTrained = type && isa<FloatType>(type.getElementType()) &&
                       !stateParameters.contains(name.getValue()) &&
                       llvm::none_of(frozen,
                                     [&](const llvm::GlobPattern &glob) {
                                       return glob.match(name.getValue());
                                     }) &&
                       (!lossReads || lossReads->contains(main.getArgument(i)));
      double elements = info.bytes;
      if (auto t = dyn_cast<RankedTensorType>(arg.getType()))
        elements = t.getNumElements();
      graph.parameterElements += elements;
      graph.parameterBytes += info.bytes;
    } else {
      info.dataDependent = true;
      info.isInput = true;
      // A pipeline stage's received activation is one, as in the whole
      // program: the stage's first ops are planned and split like the
      // cluster plan's (a convolution's padded input).
      if (main.getArgAttr(i, attrs::kActivationIn))
        info.isActivation = true;
    }
    if (!info.isParameter && !sawInput && !info.shape.empty()) {
      // The first graph input's leading dim is the global batch.
      sawInput = true;
      graph.globalBatch = std::max<int64_t>(1, info.shape.front());
      auto t = cast<RankedTensorType>(arg.getType());
      graph.tokensPerStep = isa<IntegerType>(t.getElementType())
                                ? t.getNumElements()
                                : graph.globalBatch;
    }
  }

  // Graph inputs lead with the batch (data parallelism splits them there).
  for (BlockArgument arg : main.getArguments()) {
    ValueInfo &info = graph.values[graph.valueIds[arg]];
    if (!info.isParameter && !info.shape.empty() &&
        info.shape.front() == graph.globalBatch)
      info.batch.front() = 1;
  }

  llvm::DenseMap<Operation *, size_t> opIndex;
  for (Operation &op : main.getBody().front()) {
    if (isa<func::ReturnOp>(op)) {
      for (auto [k, v] : llvm::enumerate(op.getOperands())) {
        if (!graph.valueIds.count(v))
          continue;
        bool update = main.getResultAttr(k, attrs::kUpdate) != nullptr;
        // A training step returns the loss and what the forward updates
        // (autopar-differentiate drops the other outputs): those are not
        // gathered, and nothing keeps them live to the end.
        if (lossIndex && k != *lossIndex && !update)
          continue;
        ValueInfo &info = graph.values[graph.valueIds[v]];
        info.isResult = true;
        if (update)
          info.isStateUpdate = true;
        // Replicas (and micro-batches) each compute a block of the leading
        // dim, concatenated in order: that dim must hold the batch as its
        // outer factor, index = item * stride + rest with rest < stride.
        if (!graph.batchCutProblem.empty() || info.shape.empty() ||
            info.batch.empty())
          continue;
        int64_t stride = info.batch.front();
        if (stride >= 1 && info.shape.front() == graph.globalBatch * stride)
          continue;
        auto name = main.getResultAttrOfType<StringAttr>(k, attrs::kOutput);
        graph.batchCutProblem =
            "output '" + (name ? name.str() : std::to_string(k)) +
            "' does not hold the batch as the outer factor of its leading "
            "dim (an op such as Concat or Tile along the batch interleaves "
            "batch items), so the batch cannot be split over data-parallel "
            "replicas or micro-batches";
      }
      continue;
    }
    PlanOp planOp;
    planOp.op = &op;
    planOp.cost = getOpCost(&op);
    planOp.free = !planOp.cost.executes;
    // A lookup's table is read in its body: list it as an operand.
    std::optional<EmbeddingLookup> lookup = matchEmbeddingLookup(&op);
    // Operands by position (a lookup lists others, PlanOp::operands).
    if (!lookup) {
      fuseElementwiseProducers(op, planOp, opIndex, graph.ops);
      // Inits the body does not read are only written (once, as the result).
      if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
        for (OpOperand &init : linalgOp.getDpsInitsMutable())
          if (init.getOperandNumber() < 64 &&
              !linalgOp.payloadUsesValueFromOperand(&init))
            planOp.unreadOperands |= uint64_t(1) << init.getOperandNumber();
    }
    opIndex[&op] = graph.ops.size();
    SmallVector<Value> operands(op.getOperands());
    if (lookup)
      operands = {lookup->table, lookup->ids};
    bool activation = false, dataDependent = false;
    for (Value operand : operands) {
      auto it = graph.valueIds.find(operand);
      int64_t id = it == graph.valueIds.end() ? -1 : it->second;
      planOp.operands.push_back(id);
      if (id >= 0) {
        graph.values[id].lastUse = graph.ops.size();
        ++graph.values[id].uses;
        activation |=
            graph.values[id].isActivation || graph.values[id].isParameter;
        dataDependent |= graph.values[id].dataDependent;
      }
    }
    // A fused cross-entropy's loss per position (its other result, the
    // log-sum-exp, is read only by the backward).
    if (op.getNumResults() == 1 ||
        isa<SoftmaxCrossEntropyOp, AttentionOp>(op)) {
      planOp.result = newValue(op.getResult(0));
      graph.values[planOp.result].isActivation = activation;
      graph.values[planOp.result].dataDependent = dataDependent;
    }
    if (lookup) {
      embeddingOptions(*lookup, &op, planOp);
    } else if (auto ce = dyn_cast<SoftmaxCrossEntropyOp>(op)) {
      crossEntropyOptions(ce, planOp);
      if (planOp.operands[0] >= 0)
        keepLogitsAndLogSumExp(planOp, planOp.operands[0]);
    } else if (auto attention = dyn_cast<AttentionOp>(op)) {
      attentionOptions(attention, planOp);
      // As priceFusedAttention prices the unfused pattern: the backward
      // reads Q, K, V, the output and one statistic per query row.
      for (int64_t k = 0; k < 3; ++k)
        if (planOp.operands[k] >= 0)
          planOp.kernelOperands.push_back(planOp.operands[k]);
      planOp.kernelStatsFraction =
          1.0 / double(attention.getValue().getType().getShape().back());
      planOp.backwardFactor = kAttentionBackwardTime;
    } else if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
      linalgOptions(linalgOp, planOp);
    else
      shapeOpOptions(&op, planOp);
    // Only what every replica's share of the batch can divide is split.
    SmallVector<ArrayRef<int64_t>> operandBatch;
    for (int64_t id : planOp.operands)
      operandBatch.push_back(id >= 0 ? ArrayRef(graph.values[id].batch)
                                     : ArrayRef<int64_t>());
    BatchInference batch =
        inferBatch(&op, lookup, operandBatch, graph.globalBatch);
    if (planOp.result >= 0)
      graph.values[planOp.result].batch = batch.result;
    for (auto [l, range] : llvm::enumerate(planOp.loopRanges))
      if (l < batch.loops.size())
        range = splittableRange(range, batch.loops[l], graph.globalBatch);
    graph.forwardFlops += planOp.cost.flops;
    graph.ops.push_back(std::move(planOp));
  }

  markF32UnderMixedPrecision(main, graph);

  if (fusedAttention)
    priceFusedAttention(main, *fusedAttention, opIndex, graph.valueIds,
                        graph.ops);
  if (fusedCrossEntropy)
    priceFusedCrossEntropy(main, opIndex, graph.valueIds, graph.ops);
  markFusablePatterns(main, opIndex, graph.ops);

  claimSavedActivations(main, graph);

  // Segments: cut after an op when its result is the only live activation
  // and no fused kernel goes on past it (PlanOp::insideKernel).
  // A model's outputs stay live to the end; the new value of a state the
  // forward updates (BatchNorm's running statistics in a training step) is
  // not live past its last use: the stage that computes it stores it,
  // nothing carries it to the next (else no cut could follow the first
  // BatchNorm).
  int64_t start = 0;
  llvm::SmallDenseSet<int64_t> live;
  auto closeSegment = [&](int64_t last) {
    Segment seg;
    seg.first = start;
    seg.last = last;
    llvm::hash_code h = llvm::hash_value(last - start);
    llvm::StringSet<> nodes;
    for (int64_t i = start; i <= last; ++i) {
      Operation *op = graph.ops[i].op;
      h = llvm::hash_combine(h, op->getName().getStringRef());
      for (Type t : op->getResultTypes())
        h = llvm::hash_combine(h, mlir::hash_value(t));
      for (Value v : op->getOperands())
        h = llvm::hash_combine(h, mlir::hash_value(v.getType()));
      // What the backward keeps here (claimSavedActivations): two segments
      // alike but for it (a model's first layer reads the graph's input)
      // cost differently.
      const PlanOp &p = graph.ops[i];
      h = llvm::hash_combine(h, p.savedOperands, p.savesResult);
      for (int64_t id : p.savedUnderSelective)
        h = llvm::hash_combine(h, int64_t(graph.values[id].bytes));
      for (int64_t id : p.kernelSaved)
        h = llvm::hash_combine(h, int64_t(graph.values[id].bytes));
      for (int64_t id : p.firstReadInputs)
        h = llvm::hash_combine(h, int64_t(graph.values[id].bytes));
      for (int64_t id : p.operands)
        if (id >= 0 && graph.values[id].isParameter) {
          seg.parameterElements += numElements(graph.values[id].shape);
          // A frozen or state parameter has no gradient: not alike.
          h = llvm::hash_combine(h, graph.values[id].isTrained);
        }
      std::string name = onnxNodeName(op);
      if (!name.empty())
        nodes.insert(name);
    }
    seg.signature = h;
    seg.onnxNodes = nodes.size();
    graph.segments.push_back(seg);
    start = last + 1;
  };
  for (int64_t i = 0; i < int64_t(graph.ops.size()); ++i) {
    const PlanOp &op = graph.ops[i];
    auto liveToTheEnd = [&](int64_t id) {
      return graph.values[id].isResult && !graph.values[id].isStateUpdate;
    };
    for (int64_t id : op.operands)
      if (id >= 0 && graph.values[id].lastUse == i && !liveToTheEnd(id))
        live.erase(id);
    if (op.result >= 0 && graph.values[op.result].isActivation &&
        (graph.values[op.result].lastUse > i || liveToTheEnd(op.result)))
      live.insert(op.result);
    bool cut = live.size() == 1 && op.result >= 0 && live.contains(op.result) &&
               !op.free && !op.insideKernel;
    if (cut || i + 1 == int64_t(graph.ops.size()))
      closeSegment(i);
  }

  // A partial sum read by several conversions (its readers in the segment,
  // and its leaving the segment) is all-reduced by the op that makes it, as
  // shard-partition does: once, not once per reader.
  for (const Segment &seg : graph.segments) {
    for (int64_t i = seg.first; i <= seg.last; ++i) {
      PlanOp &op = graph.ops[i];
      if (op.result < 0)
        continue;
      const ValueInfo &v = graph.values[op.result];
      int64_t sites = (v.lastUse > seg.last || v.isResult) ? 1 : 0;
      for (int64_t j = i + 1; j <= seg.last; ++j)
        sites += llvm::count(graph.ops[j].operands, op.result);
      if (sites <= 1)
        continue;
      for (OpOption &option : op.options)
        if (option.result == kPartial) {
          option.result = kReplicated;
          option.reducesResult = true;
        }
    }
  }

  claimKeptUnderFull(graph);
  assignDistinctSegments(graph);
  return graph;
}

std::string decisionNodeName(Operation *op) {
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    return name.getName().str();
  return "";
}

std::string opSignature(const ProgramGraph &graph, const PlanOp &op) {
  std::string text = op.op->getName().getStringRef().str();
  llvm::raw_string_ostream os(text);
  // The leading dim is left out: it holds the batch, or a batch folded with
  // other dims ([batch x sequence, hidden]), which another cut of the batch
  // (a micro-batch, a replica's share) changes. A plan of a micro-batch of
  // 1 cannot even tell which dims hold the batch.
  auto shape = [&](int64_t id) {
    const ValueInfo &v = graph.values[id];
    for (auto [d, size] : llvm::enumerate(v.shape)) {
      if (d)
        os << 'x' << size;
      else
        os << '?';
    }
  };
  os << '(';
  for (auto [k, id] : llvm::enumerate(op.operands)) {
    if (k)
      os << ',';
    // An init the op only writes (a tensor.empty) says nothing the result
    // does not.
    if (k < 64 && ((op.unreadOperands >> k) & 1))
      os << '_';
    else if (id >= 0)
      shape(id);
  }
  os << ")->";
  if (op.result >= 0)
    shape(op.result);
  return text;
}

int64_t followPinnedShardings(ProgramGraph &graph,
                              ArrayRef<PinnedOpSharding> pins) {
  if (pins.empty())
    return 0;
  // The pins of each node, in program order, and the ops a plan decides
  // (PlanResult::decisions: those with an activation result), likewise.
  llvm::StringMap<std::vector<const PinnedOpSharding *>> pinned;
  for (const PinnedOpSharding &pin : pins)
    pinned[pin.node].push_back(&pin);
  // Dead ops are left out: a rewrite of the program (the training step's
  // unbiased running variance) may leave the op it replaced behind, which
  // would take the pin of the op that is used.
  llvm::StringMap<std::vector<int64_t>> decided;
  for (auto [i, op] : llvm::enumerate(graph.ops)) {
    if (op.result < 0)
      continue;
    const ValueInfo &v = graph.values[op.result];
    if (v.isActivation && (v.uses > 0 || v.isResult))
      if (std::string node = decisionNodeName(op.op); !node.empty())
        decided[node].push_back(i);
  }
  int64_t followed = 0;
  for (auto &[node, ops] : decided) {
    auto it = pinned.find(node);
    if (it == pinned.end())
      continue;
    ArrayRef<const PinnedOpSharding *> left = it->second;
    for (int64_t i : ops) {
      if (left.empty())
        break;
      const PinnedOpSharding &pin = *left.front();
      PlanOp &op = graph.ops[i];
      auto matches = [&](const OpOption &option) {
        return option.result == pin.resultSharding &&
               llvm::equal(option.operands, pin.operandShardings);
      };
      auto kept = llvm::find_if(op.options, matches);
      // An op this lowering added, or one the pin cannot describe.
      if (opSignature(graph, op) != pin.signature || kept == op.options.end())
        continue;
      OpOption only = *kept;
      op.options.assign(1, only);
      left = left.drop_front();
      ++followed;
    }
  }
  // Segments alike before may now be held to different choices.
  for (Segment &seg : graph.segments) {
    llvm::hash_code h = seg.signature;
    for (int64_t i = seg.first; i <= seg.last; ++i) {
      const std::vector<OpOption> &options = graph.ops[i].options;
      h = llvm::hash_combine(h, options.size());
      if (options.size() == 1)
        h = llvm::hash_combine(
            h, options.front().result,
            llvm::hash_combine_range(options.front().operands.begin(),
                                     options.front().operands.end()));
    }
    seg.signature = h;
  }
  assignDistinctSegments(graph);
  return followed;
}

std::vector<int64_t> segmentLayers(llvm::ArrayRef<int64_t> distinctIds) {
  int64_t n = distinctIds.size();
  /// Segments from `start` on that repeat with `period` over `span` segments
  /// (span / period whole blocks); with `before` segments ahead of it that
  /// end like the block and `after` behind the whole blocks that start like
  /// it.
  struct Repeat {
    int64_t start = 0, period = 0, span = 0, before = 0, after = 0;
    int64_t count() const { return span / period; }
    int64_t end() const { return start + count() * period; }
  };
  // The heap's top: the most segments in whole blocks, then the shortest
  // block, then the earliest.
  auto ranksBelow = [](const Repeat &a, const Repeat &b) {
    int64_t ca = a.count() * a.period, cb = b.count() * b.period;
    if (ca != cb)
      return ca < cb;
    if (a.period != b.period)
      return a.period > b.period;
    return a.start > b.start;
  };
  std::priority_queue<Repeat, std::vector<Repeat>, decltype(ranksBelow)> queue(
      ranksBelow);
  // Every maximal run of segments equal to the one `p` after them: `p` plus
  // the run's length segments repeat with period p.
  for (int64_t p = 1; 2 * p <= n; ++p) {
    int64_t runStart = 0, run = 0;
    for (int64_t k = 0; k <= n - p; ++k) {
      if (k < n - p && distinctIds[k] == distinctIds[k + p]) {
        if (run++ == 0)
          runStart = k;
        continue;
      }
      if (run >= p)
        queue.push(Repeat{runStart, p, run + p, 0, 0});
      run = 0;
    }
  }
  // The best repeat first; one overlapping those taken is cut to its longest
  // part outside them and ranked again.
  std::vector<bool> covered(n, false);
  std::vector<Repeat> repeats;
  while (!queue.empty()) {
    Repeat r = queue.top();
    queue.pop();
    int64_t from = r.start, to = r.start;
    for (int64_t a = r.start, stop = r.start + r.span; a < stop;) {
      if (covered[a]) {
        ++a;
        continue;
      }
      int64_t b = a;
      while (b < stop && !covered[b])
        ++b;
      if (b - a > to - from) {
        from = a;
        to = b;
      }
      a = b;
    }
    if (from != r.start || to != r.start + r.span) {
      Repeat cut{from, r.period, to - from, 0, 0};
      if (cut.count() >= 2)
        queue.push(cut);
      continue;
    }
    int64_t end = r.end();
    for (int64_t k = r.start; k < end; ++k)
      covered[k] = true;
    while (r.before + 1 < r.period && r.start - r.before - 1 >= 0 &&
           !covered[r.start - r.before - 1] &&
           distinctIds[r.start - r.before - 1] ==
               distinctIds[r.start + r.period - r.before - 1]) {
      ++r.before;
      covered[r.start - r.before] = true;
    }
    while (r.after + 1 < r.period && end + r.after < n &&
           !covered[end + r.after] &&
           distinctIds[end + r.after] == distinctIds[r.start + r.after]) {
      covered[end + r.after] = true;
      ++r.after;
    }
    repeats.push_back(r);
  }
  llvm::sort(repeats, [](const Repeat &a, const Repeat &b) {
    return a.start < b.start;
  });
  std::vector<int64_t> layers(n, -1);
  int64_t layer = 0;
  for (const Repeat &r : repeats) {
    if (r.before > 0) {
      for (int64_t k = r.start - r.before; k < r.start; ++k)
        layers[k] = layer;
      ++layer;
    }
    for (int64_t i = 0; i < r.count(); ++i, ++layer)
      for (int64_t k = 0; k < r.period; ++k)
        layers[r.start + i * r.period + k] = layer;
    if (r.after > 0) {
      for (int64_t k = r.end(); k < r.end() + r.after; ++k)
        layers[k] = layer;
      ++layer;
    }
  }
  return layers;
}

} // namespace autopar::plan
