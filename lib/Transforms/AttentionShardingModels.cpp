//===- AttentionShardingModels.cpp - ShardingInterface for attention ------===//
//
// autopar.attention and autopar.attention_grad had no ShardingInterface, so a
// program had to be partitioned before autopar-fuse-attention ran: fusing
// first left the fused op with only replicated operands (shard-partition
// gathers everything around an op it cannot split). With these models the
// fused op partitions like the unfused ops it replaces under tensor
// parallelism: each rank runs the same attention on its block of the batch
// and of the heads, with no collective.
//
// The loops are (batch, heads, queries, keys, head dim, value dim). Only the
// batch and the heads may be split. Splitting the queries or keys would need
// the other ranks' keys (ring attention, merged through the log-sum-exp) and
// splitting the head dims a reduction the softmax cannot finish with an
// all-reduce, so those loops stay whole and a tensor split along them is
// gathered first. Key and value read the heads loop through
// `h floordiv (H / Hkv)` (grouped-query attention: query head h reads
// key/value head h / g): splitting H into n contiguous blocks gives each
// rank the query heads of its own n-th of the key/value heads exactly when
// Hkv divides by n, which the divisibility check below requires of every
// split tensor dim (otherwise the heads stay whole). The mask's broadcast
// dims (size 1) are read through the constant 0 and never split; its full
// dims follow the loop they index. lse, out, d_out and the gradients follow
// the query's, key's and value's dims.
//
// Upstream's default rules (ShardingInterface.cpp) cannot be used as they
// are: they accept neither the floordiv of the heads nor the constants of
// the mask, so the sharding option and annotations are computed here from
// the same maps.
//
//===----------------------------------------------------------------------===//

#include "LoopShardings.h"
#include "ShardingModelsImpl.h"

#include "autopar/Dialect/AutoparOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::shard;

namespace {

/// The sharding loops of an attention op.
enum AttentionLoop : unsigned {
  kBatch,
  kHeads,
  kQueries,
  kKeys,
  kHeadDim,
  kValueDim,
  kNumLoops
};

/// What each loop is called in diagnostics.
constexpr const char *kLoopNames[kNumLoops] = {
    "batch", "heads", "queries", "keys", "head dim", "value dim"};

/// Whether loop `loop` may be split.
bool isSplittable(unsigned loop) { return loop == kBatch || loop == kHeads; }

/// The loop whose blocks a tensor dim read through `expr` splits with: a loop
/// read directly, or the heads loop read through `h floordiv g` (key and
/// value heads). None for a broadcast dim (the constant 0).
std::optional<unsigned> loopOf(AffineExpr expr) {
  if (auto dim = dyn_cast<AffineDimExpr>(expr))
    return dim.getPosition();
  if (expr.getKind() == AffineExprKind::FloorDiv) {
    auto div = cast<AffineBinaryOpExpr>(expr);
    if (auto dim = dyn_cast<AffineDimExpr>(div.getLHS());
        dim && isa<AffineConstantExpr>(div.getRHS()))
      return dim.getPosition();
  }
  return std::nullopt;
}

/// The maps of `op`'s operands, then of its results, over the loops.
template <typename OpTy> SmallVector<AffineMap> attentionMaps(OpTy op) {
  MLIRContext *ctx = op->getContext();
  auto query = cast<ShapedType>(op.getQuery().getType());
  auto key = cast<ShapedType>(op.getKey().getType());
  int64_t group = std::max<int64_t>(
      1, query.getDimSize(1) / std::max<int64_t>(1, key.getDimSize(1)));
  AffineExpr b = getAffineDimExpr(kBatch, ctx);
  AffineExpr h = getAffineDimExpr(kHeads, ctx);
  AffineExpr s = getAffineDimExpr(kQueries, ctx);
  AffineExpr t = getAffineDimExpr(kKeys, ctx);
  AffineExpr d = getAffineDimExpr(kHeadDim, ctx);
  AffineExpr e = getAffineDimExpr(kValueDim, ctx);
  AffineExpr kvHead = h.floorDiv(group);
  auto map = [&](ArrayRef<AffineExpr> exprs) {
    return AffineMap::get(kNumLoops, 0, exprs, ctx);
  };
  AffineMap q = map({b, h, s, d});
  AffineMap k = map({b, kvHead, t, d});
  AffineMap v = map({b, kvHead, t, e});
  AffineMap out = map({b, h, s, e});
  AffineMap lse = map({b, h, s});
  SmallVector<AffineMap> maps = {q, k, v};
  if (Value mask = op.getMask()) {
    // A broadcast dim (size 1) reads index 0 whatever the loop.
    SmallVector<AffineExpr> exprs = {b, h, s, t};
    for (auto [i, size] :
         llvm::enumerate(cast<ShapedType>(mask.getType()).getShape()))
      if (size == 1)
        exprs[i] = getAffineConstantExpr(0, ctx);
    maps.push_back(map(exprs));
  }
  SmallVector<AffineMap> outputs;
  if constexpr (std::is_same_v<OpTy, autopar::AttentionOp>) {
    outputs = {out, lse};
  } else {
    maps.append({out, lse, out}); // saved: out, lse, d_out
    outputs = {q, k, v};          // d_query, d_key, d_value
  }
  maps.append(outputs); // the destinations
  if (!op->getResults().empty())
    maps.append(outputs); // the results, as their destinations
  return maps;
}

SmallVector<AffineMap> attentionMaps(Operation *op) {
  if (auto forward = dyn_cast<autopar::AttentionOp>(op))
    return attentionMaps(forward);
  return attentionMaps(cast<autopar::AttentionGradOp>(op));
}

/// The shardings of `op`'s operands, then of its results.
std::vector<Sharding> concatShardings(ArrayRef<Sharding> operandShardings,
                                      ArrayRef<Sharding> resultShardings) {
  std::vector<Sharding> shardings(operandShardings.begin(),
                                  operandShardings.end());
  llvm::append_range(shardings, resultShardings);
  return shardings;
}

template <typename OpTy>
struct AttentionShardingModel
    : public ShardingInterface::ExternalModel<AttentionShardingModel<OpTy>,
                                              OpTy> {
  /// Batch and heads are parallel. The forward's queries and value dim are
  /// parallel too, and it reduces over the keys and the head dim; the
  /// gradient reduces over all four (d_key and d_value over the queries).
  /// None of those four is ever split.
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    using utils::IteratorType;
    if constexpr (std::is_same_v<OpTy, autopar::AttentionOp>)
      return {IteratorType::parallel,  IteratorType::parallel,
              IteratorType::parallel,  IteratorType::reduction,
              IteratorType::reduction, IteratorType::parallel};
    return {IteratorType::parallel,  IteratorType::parallel,
            IteratorType::reduction, IteratorType::reduction,
            IteratorType::reduction, IteratorType::reduction};
  }

  /// The reductions go through the softmax: not one the shard dialect can
  /// finish with an all-reduce.
  SmallVector<ReductionKind>
  getReductionLoopIteratorKinds(Operation *op) const {
    return SmallVector<ReductionKind>(
        llvm::count(getLoopIteratorTypes(op), utils::IteratorType::reduction),
        ReductionKind::Generic);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    return attentionMaps(op);
  }

  /// The batch and heads splits the operands and results agree on; the
  /// splits of the other loops are dropped (those tensors are gathered
  /// first), and so is a split some tensor dim does not divide evenly (the
  /// heads of a grouped-query attention whose key/value heads do not divide
  /// by the split: every rank then computes all heads).
  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    return autopar::detail::shardingOptionOverLoops(
        op, attentionMaps(op),
        concatShardings(operandShardings, resultShardings), kNumLoops, loopOf,
        isSplittable);
  }

  /// Each tensor dim is split like the loop it indexes; broadcast dims of
  /// the mask are not split.
  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *op, const ShardingOption &option) const {
    return autopar::detail::annotationsOverLoops(op, attentionMaps(op), option,
                                                 loopOf);
  }

  LogicalResult addShardingAnnotations(Operation *op, OpBuilder &b,
                                       const ShardingOption &option) const {
    FailureOr<std::vector<Sharding>> shardings =
        getShardingAnnotations(op, option);
    if (failed(shardings))
      return failure();
    autopar::detail::addAnnotations(op, b, *shardings);
    return success();
  }

  /// Each rank runs the op on its blocks: the same attention over its part
  /// of the batch and of the heads (and of the key/value heads they read).
  /// Each result has its destination's local type: an unused result (the
  /// log-sum-exp of inference) has no annotation of its own.
  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable,
                          OpBuilder &builder) const {
    if (failed(autopar::detail::checkAttentionShardings(
            op, operandShardings, resultShardings, symbolTable,
            [&] { return op->emitOpError("cannot be partitioned: "); })))
      return failure();
    autopar::detail::cloneOnBlocks(op, partitionedOperands, partitionMap,
                                   builder);
    return success();
  }
};

} // namespace

LogicalResult autopar::detail::checkAttentionShardings(
    Operation *op, ArrayRef<Sharding> operandShardings,
    ArrayRef<Sharding> resultShardings, SymbolTableCollection &symbols,
    llvm::function_ref<InFlightDiagnostic()> error) {
  SmallVector<AffineMap> maps = attentionMaps(op);
  std::vector<Sharding> shardings =
      concatShardings(operandShardings, resultShardings);
  unsigned numOperands = op->getNumOperands();
  ShardingArray loops(kNumLoops);
  SmallVector<bool> seen(kNumLoops, false);
  for (auto [index, sharding, map] : llvm::enumerate(shardings, maps)) {
    if (!sharding)
      continue;
    auto describe = [&, index = index](InFlightDiagnostic diag) {
      if (index < numOperands)
        return std::move(diag << "operand " << index);
      return std::move(diag << "result " << index - numOperands);
    };
    for (auto [dim, expr] : llvm::enumerate(map.getResults())) {
      ArrayRef<GridAxis> axes = dim < sharding.getSplitAxes().size()
                                    ? sharding.getSplitAxes()[dim].asArrayRef()
                                    : ArrayRef<GridAxis>();
      std::optional<unsigned> loop = loopOf(expr);
      if (!loop) {
        if (!axes.empty())
          return describe(error())
                 << " is split along dim " << dim << ", a broadcast dim";
        continue;
      }
      if (!axes.empty() && !isSplittable(*loop))
        return describe(error())
               << " is split along dim " << dim << " (the " << kLoopNames[*loop]
               << "), which attention needs whole (only the batch and the "
                  "heads can be split)";
      if (seen[*loop] && ArrayRef<GridAxis>(loops[*loop]) != axes)
        return error() << "its operands and results split the "
                       << kLoopNames[*loop] << " differently";
      seen[*loop] = true;
      loops[*loop].assign(axes.begin(), axes.end());
    }
  }
  auto any = llvm::find_if(
      shardings, [](const Sharding &sharding) { return bool(sharding); });
  if (any == shardings.end())
    return success();
  for (const Sharding &sharding : shardings)
    if (sharding && sharding.getGridAttr() != any->getGridAttr())
      return error() << "its operands and results are on different grids";
  GridOp grid = getGridOrNull(op, any->getGridAttr(), symbols);
  for (auto [loop, axes] : llvm::enumerate(loops)) {
    if (axes.empty())
      continue;
    if (!grid)
      return error() << "its grid " << any->getGridAttr() << " is not found";
    int64_t parts = autopar::detail::blocksOf(grid, axes);
    if (!autopar::detail::dividesEvenly(op, maps, loop, parts, loopOf))
      return error() << "the " << kLoopNames[loop] << " loop is split into "
                     << parts
                     << " blocks, which some operand or result does not "
                        "divide into evenly (a grouped-query attention's "
                        "key/value heads "
                        "must divide by the split too)";
  }
  return success();
}

void autopar::detail::attachAttentionShardingModels(MLIRContext *ctx) {
  autopar::AttentionOp::attachInterface<
      AttentionShardingModel<autopar::AttentionOp>>(*ctx);
  autopar::AttentionGradOp::attachInterface<
      AttentionShardingModel<autopar::AttentionGradOp>>(*ctx);
}
