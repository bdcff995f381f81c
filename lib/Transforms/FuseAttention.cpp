//===- FuseAttention.cpp - Attention patterns into autopar.attention ------===//
//
// See Passes.td and docs/design/attention.md. The pattern is recognised by
// autopar/Dialect/AttentionPattern.h (which the planner shares); this pass
// builds the op: the operands in [B, H, S, D] order, the mask as a rank-4
// broadcast (or the causal flag), and erases the matched ops. A training
// step is fused before it is differentiated: afterwards the probabilities
// have a second user (their backward) and nothing matches.
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/AttentionPattern.h"
#include "autopar/Dialect/AutoparOps.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

#include <cmath>
#include <optional>

namespace autopar {
#define GEN_PASS_DEF_FUSEATTENTION
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using namespace autopar;

namespace {

/// `v` (read through `map`) as a tensor with dims `loops` in that order,
/// transposed if needed; then with a leading unit dim when `loops` has only
/// one batch dim (rank 3 to rank 4).
Value toLayout(OpBuilder &b, Location loc, Value v, AffineMap map,
               ArrayRef<unsigned> loops, bool addUnitBatch) {
  SmallVector<int64_t> perm;
  for (unsigned loop : loops)
    perm.push_back(
        *map.getResultPosition(getAffineDimExpr(loop, b.getContext())));
  auto type = cast<RankedTensorType>(v.getType());
  if (!llvm::equal(perm, llvm::seq<int64_t>(0, perm.size()))) {
    SmallVector<int64_t> shape;
    for (int64_t p : perm)
      shape.push_back(type.getDimSize(p));
    Value init = tensor::EmptyOp::create(b, loc, shape, type.getElementType());
    v = linalg::TransposeOp::create(b, loc, v, init, perm)->getResult(0);
    type = cast<RankedTensorType>(v.getType());
  }
  if (addUnitBatch) {
    SmallVector<int64_t> shape = {1};
    llvm::append_range(shape, type.getShape());
    v = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get(shape, type.getElementType()), v,
        SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}});
  }
  return v;
}

/// Builds the rank-4 mask [B|1, H|1, S|1, T|1] (or sets `causal`) from what
/// the chain found; null when there is no mask or it is the causal one.
/// Fails when the mask's dims are not in the scores' order.
FailureOr<Value> buildMask(OpBuilder &b, Location loc, AttentionPattern &m,
                           ArrayRef<int64_t> scoreShape) {
  if (!m.mask)
    return Value();
  // The scores' loops in rank-4 order: (unit batch,) batch..., i, j.
  SmallVector<int> loops;
  if (m.batchDims == 1)
    loops.push_back(-1);
  for (unsigned l : m.scoreBatch)
    loops.push_back(l);
  loops.append({(int)m.i, (int)m.j});
  // The elementwise generic's loops are the scores' dims in order: dim k of
  // the scores is loop k there; map them back to the contraction's loops.
  SmallVector<unsigned> scoreLoops(m.scoreBatch);
  scoreLoops.append({m.i, m.j});
  SmallVector<int64_t> shape;
  SmallVector<int64_t> kept; // Mask dims that are not unit broadcasts.
  auto maskType = cast<RankedTensorType>(
      m.maskConstant ? m.maskConstant.getType() : m.mask.getType());
  int64_t lastPos = -1;
  for (AffineExpr e : m.maskMap.getResults()) {
    if (auto c = dyn_cast<AffineConstantExpr>(e)) {
      if (c.getValue() != 0)
        return failure();
      continue;
    }
    auto d = dyn_cast<AffineDimExpr>(e);
    if (!d || (int64_t)d.getPosition() <= lastPos)
      return failure();
    lastPos = d.getPosition();
  }
  for (int l : loops) {
    int64_t size = 1;
    if (l >= 0) {
      unsigned scoreDim =
          llvm::find(scoreLoops, (unsigned)l) - scoreLoops.begin();
      if (std::optional<unsigned> pos = m.maskMap.getResultPosition(
              getAffineDimExpr(scoreDim, b.getContext())))
        size = maskType.getDimSize(*pos);
    }
    shape.push_back(size);
  }
  int64_t rows = scoreShape[scoreShape.size() - 2], cols = scoreShape.back();
  if (shape[0] == 1 && shape[1] == 1 && shape[2] == rows && shape[3] == cols &&
      isCausalMask(m)) {
    m.causal = true;
    return Value();
  }
  Value mask =
      m.maskConstant
          ? arith::ConstantOp::create(b, loc, m.maskConstant).getResult()
          : m.mask;
  if (m.maskCondition) {
    // fill where the condition says masked, else 0, over its shape.
    auto condType = cast<RankedTensorType>(m.maskCondition.getType());
    Value init =
        tensor::EmptyOp::create(b, loc, condType.getShape(), b.getF32Type());
    AffineMap id = b.getMultiDimIdentityMap(condType.getRank());
    mask = linalg::GenericOp::create(
               b, loc, init.getType(), ValueRange{m.maskCondition},
               ValueRange{init}, ArrayRef<AffineMap>{id, id},
               SmallVector<utils::IteratorType>(condType.getRank(),
                                                utils::IteratorType::parallel),
               [&](OpBuilder &nb, Location nl, ValueRange args) {
                 Value fill = arith::ConstantOp::create(
                     nb, nl, nb.getF32FloatAttr(m.maskFill));
                 Value zero =
                     arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(0));
                 Value v = arith::SelectOp::create(
                     nb, nl, args[0], m.maskedWhenTrue ? fill : zero,
                     m.maskedWhenTrue ? zero : fill);
                 linalg::YieldOp::create(nb, nl, v);
               })
               .getResult(0);
  }
  auto type = cast<RankedTensorType>(mask.getType());
  if (!type.getElementType().isF32())
    return failure(); // Kernels take an f32 mask.
  // Flatten, then give it the rank-4 shape (same order, unit dims added).
  if (type.getRank() != 1) {
    ReassociationIndices all;
    for (int64_t i = 0; i < type.getRank(); ++i)
      all.push_back(i);
    mask = tensor::CollapseShapeOp::create(
        b, loc, mask, SmallVector<ReassociationIndices>{all});
  }
  return tensor::ExpandShapeOp::create(
             b, loc, RankedTensorType::get(shape, type.getElementType()), mask,
             SmallVector<ReassociationIndices>{{0, 1, 2, 3}})
      .getResult();
}

LogicalResult fuse(AttentionPattern &m) {
  linalg::LinalgOp pv = m.output;
  OpBuilder b(pv);
  Location loc = pv.getLoc();
  bool unitBatch = m.batchDims == 1;
  SmallVector<unsigned> qLoops(m.scoreBatch), kLoops(m.scoreBatch),
      vLoops(m.outBatch);
  qLoops.append({m.i, m.d});
  kLoops.append({m.j, m.d});
  vLoops.append({m.oj, m.oe});
  auto scoreType =
      cast<RankedTensorType>(m.scores.getOperation()->getResult(0).getType());
  FailureOr<Value> mask = buildMask(b, loc, m, scoreType.getShape());
  if (failed(mask))
    return failure();
  Value q = toLayout(b, loc, m.query, m.queryMap, qLoops, unitBatch);
  Value k = toLayout(b, loc, m.key, m.keyMap, kLoops, unitBatch);
  Value v = toLayout(b, loc, m.value, m.valueMap, vLoops, unitBatch);
  auto qType = cast<RankedTensorType>(q.getType());
  auto vType = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> outShape(qType.getShape());
  outShape.back() = vType.getShape().back();
  Value outInit =
      tensor::EmptyOp::create(b, loc, outShape, qType.getElementType());
  Value lseInit = tensor::EmptyOp::create(
      b, loc, ArrayRef(outShape).drop_back(), b.getF32Type());
  auto attention = autopar::AttentionOp::create(
      b, loc, TypeRange{outInit.getType(), lseInit.getType()}, q, k, v, *mask,
      ValueRange{}, ValueRange{outInit, lseInit}, b.getF64FloatAttr(m.scale),
      m.causal ? b.getUnitAttr() : UnitAttr());
  Value out = attention.getResult(0);
  if (unitBatch)
    out = tensor::CollapseShapeOp::create(
        b, loc, out, SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}});
  Operation *replaced = pv.getOperation();
  replaced->getResult(0).replaceAllUsesWith(out);
  // Erase the pattern, users first.
  SmallVector<Operation *> dead = {replaced};
  llvm::append_range(dead, m.interior);
  dead.push_back(m.scores);
  for (Operation *op : dead) {
    SmallVector<Operation *> inits;
    for (Value init : cast<DestinationStyleOpInterface>(op).getDpsInits())
      if (Operation *def = init.getDefiningOp())
        inits.push_back(def);
    if (!op->use_empty())
      return op->emitError("autopar-fuse-attention: an op of the matched "
                           "attention is still used; this is a bug");
    op->erase();
    for (Operation *def : inits)
      if (def->use_empty() && isMemoryEffectFree(def))
        def->erase();
  }
  return success();
}

struct FuseAttentionPass : autopar::impl::FuseAttentionBase<FuseAttentionPass> {
  using Base::Base;

  void runOnOperation() override {
    AttentionPatternOptions options{maxHeadDim,
                                    std::max<int64_t>(1, headDimMultiple)};
    std::vector<AttentionPattern> matches;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (std::optional<AttentionPattern> m =
              matchAttentionPattern(op, options))
        matches.push_back(std::move(*m));
    });
    for (AttentionPattern &m : matches)
      if (failed(fuse(m)))
        return signalPassFailure();
  }
};

} // namespace
