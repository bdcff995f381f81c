//===- PlanBatch.cpp - Where the batch is in each tensor ------------------===//
//
// Data parallelism gives each replica a share of the batch, and autopar
// compiles one replica's program (re-imported with its share); tensor
// parallelism then splits that program. The planner chooses the sharding on
// the whole program, so an option is only sound if it also exists in every
// replica's: splitting a dim that holds the batch must divide it per batch
// item. A dim merging the batch with other dims ([seq * batch] rows of a
// matmul) stays splittable by its other factor.
//
// A tensor dim holds the batch when its index is `item * stride + rest` with
// `rest < stride` for the batch item `item`; reshapes move the batch between
// dims by that stride.
//
//===----------------------------------------------------------------------===//

#include "PlannerImpl.h"
#include "autopar/Dialect/AutoparOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
namespace autopar::plan {

/// The batch a loop (or dim) reads when two tensors disagree.
static int64_t join(int64_t a, int64_t b) {
  if (a == kNoBatch)
    return b;
  if (b == kNoBatch || a == b)
    return a;
  return kMixedBatch;
}

/// The stride of the batch after expanding a dim with stride `stride` into
/// dims of `sizes`: in the one dim holding all of the batch, or mixed.
static SmallVector<int64_t> expandBatch(int64_t stride, ArrayRef<int64_t> sizes,
                                        int64_t batch) {
  SmallVector<int64_t> result(sizes.size(), kNoBatch);
  if (stride == kNoBatch)
    return result;
  int64_t inner = 1; // elements below dim p
  for (int64_t p = sizes.size() - 1; p >= 0 && stride >= 0; --p) {
    if (stride % inner == 0) {
      int64_t within = stride / inner;
      if (within * batch <= sizes[p] && sizes[p] % (within * batch) == 0) {
        result[p] = within;
        return result;
      }
    }
    inner *= sizes[p];
  }
  return SmallVector<int64_t>(sizes.size(), kMixedBatch);
}

BatchInference inferBatch(Operation *op,
                          const std::optional<EmbeddingLookup> &lookup,
                          ArrayRef<ArrayRef<int64_t>> operands, int64_t batch) {
  BatchInference r;
  auto resultType = op->getNumResults() == 1
                        ? dyn_cast<RankedTensorType>(op->getResult(0).getType())
                        : RankedTensorType();
  int64_t rank = resultType ? resultType.getRank() : 0;
  r.result.assign(rank, kNoBatch);
  auto operand = [&](size_t k, size_t d) {
    return k < operands.size() && d < operands[k].size() ? operands[k][d]
                                                         : kNoBatch;
  };

  if (lookup) {
    // Loops: the result's dims, then the vocabulary. Operands: table, ids.
    int64_t ids = cast<RankedTensorType>(lookup->ids.getType()).getRank();
    for (int64_t d = 0; d < ids; ++d)
      r.result[d] = operand(1, d);
    r.loops = r.result;
    r.loops.push_back(kNoBatch);
    return r;
  }
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
    SmallVector<AffineMap> maps = linalgOp.getIndexingMapsArray();
    r.loops.assign(linalgOp.getNumLoops(), kNoBatch);
    for (auto [k, map] : llvm::enumerate(maps))
      for (auto [j, e] : llvm::enumerate(map.getResults())) {
        int64_t b = operand(k, j);
        if (auto dim = dyn_cast<AffineDimExpr>(e))
          r.loops[dim.getPosition()] = join(r.loops[dim.getPosition()], b);
        else if (b != kNoBatch)
          for (int64_t l = 0; l < int64_t(r.loops.size()); ++l)
            if (e.isFunctionOfDim(l))
              r.loops[l] = kMixedBatch;
      }
    if (rank > 0 && linalgOp.getNumDpsInits() == 1)
      for (auto [j, e] :
           llvm::enumerate(maps[linalgOp.getNumDpsInputs()].getResults()))
        if (auto dim = dyn_cast<AffineDimExpr>(e))
          r.result[j] = r.loops[dim.getPosition()];
    return r;
  }

  // The other ops' loops are their first operand's dims.
  if (!operands.empty())
    r.loops.assign(operands[0].begin(), operands[0].end());
  // A fused attention's output: the query's batch, heads and rows; its
  // loops (batch, heads, queries, keys, head dims) the query's first three.
  if (isa<autopar::AttentionOp>(op)) {
    auto out = cast<RankedTensorType>(op->getResult(0).getType());
    r.result.assign(out.getRank(), kNoBatch);
    r.loops.assign(6, kNoBatch);
    for (int64_t d = 0; d < 3; ++d)
      r.result[d] = r.loops[d] = operand(0, d);
    return r;
  }
  // A fused cross-entropy's loss per position (the result the planner
  // tracks): the logits' positions.
  if (isa<autopar::SoftmaxCrossEntropyOp>(op)) {
    auto nll = cast<RankedTensorType>(op->getResult(0).getType());
    r.result.assign(nll.getRank(), kNoBatch);
    for (int64_t d = 0; d < nll.getRank(); ++d)
      r.result[d] = operand(0, d);
    return r;
  }
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(op)) {
    for (auto [i, group] : llvm::enumerate(expand.getReassociationIndices())) {
      SmallVector<int64_t> sizes;
      for (int64_t d : group)
        sizes.push_back(resultType.getDimSize(d));
      SmallVector<int64_t> b = expandBatch(operand(0, i), sizes, batch);
      for (auto [k, d] : llvm::enumerate(group))
        r.result[d] = b[k];
    }
  } else if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(op)) {
    ArrayRef<int64_t> src = collapse.getSrcType().getShape();
    for (auto [g, group] :
         llvm::enumerate(collapse.getReassociationIndices())) {
      int64_t inner = 1;
      for (int64_t d : llvm::reverse(group)) {
        int64_t b = operand(0, d);
        r.result[g] = join(r.result[g], b >= 0 ? b * inner : b);
        inner *= src[d];
      }
    }
  } else if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
    RankedTensorType src = slice.getSourceType();
    llvm::SmallBitVector dropped = slice.getDroppedDims();
    int64_t j = 0;
    for (int64_t d = 0; d < src.getRank(); ++d) {
      if (dropped.test(d))
        continue;
      bool whole = !slice.isDynamicSize(d) &&
                   slice.getStaticSize(d) == src.getDimSize(d);
      int64_t b = operand(0, d);
      r.result[j++] = whole || b == kNoBatch ? b : kMixedBatch;
    }
  } else if (!operands.empty() && int64_t(operands[0].size()) == rank) {
    r.result.assign(operands[0].begin(), operands[0].end());
  }
  return r;
}

int64_t splittableRange(int64_t range, int64_t stride, int64_t batch) {
  if (stride == kNoBatch)
    return range;
  if (stride == kMixedBatch || batch <= 0 || range % batch != 0)
    return 0;
  return range / batch;
}

} // namespace autopar::plan
