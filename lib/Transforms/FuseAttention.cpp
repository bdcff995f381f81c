//===- FuseAttention.cpp - Attention patterns into autopar.attention ------===//
//
// See Passes.td and docs/design/attention.md. The pattern is recognised by
// autopar/Dialect/AttentionPattern.h (which the planner shares); this pass
// builds the op: the operands in [B, H, S, D] order (the scores' batch dims
// merged into B and H as the match ordered them, key and value with their
// own Hkv heads), the mask as a rank-4 broadcast (or the causal flag), the
// output back in the scores' order, and erases the matched ops. A training
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
#include "llvm/ADT/SetVector.h"

#include <cmath>
#include <optional>

namespace autopar {
#define GEN_PASS_DEF_FUSEATTENTION
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using namespace autopar;

namespace {

/// `v`, read through `map`, as the rank-4 tensor whose dim k merges (in
/// order) the dims of `v` that `map` reads by the loops `groups[k]` (a unit
/// dim when none): transposed, collapsed and expanded as needed. A loop may
/// be read as `loop floordiv g` (a repeated key/value head); the dims of
/// `v` read by no loop of `groups` must have size 1.
Value toRank4(OpBuilder &b, Location loc, Value v, AffineMap map,
              ArrayRef<SmallVector<unsigned>> groups) {
  auto loopOf = [](AffineExpr e) -> std::optional<unsigned> {
    if (auto d = dyn_cast<AffineDimExpr>(e))
      return d.getPosition();
    if (auto div = dyn_cast<AffineBinaryOpExpr>(e);
        div && div.getKind() == AffineExprKind::FloorDiv)
      if (auto d = dyn_cast<AffineDimExpr>(div.getLHS()))
        return d.getPosition();
    return std::nullopt;
  };
  auto type = cast<RankedTensorType>(v.getType());
  // v's dims in the order of the groups, those of size 1 read by none last.
  SmallVector<int64_t> perm;
  SmallVector<int64_t> groupSizes; // Dims per group, in perm.
  SmallVector<bool> placed(type.getRank(), false);
  for (const SmallVector<unsigned> &group : groups) {
    int64_t count = 0;
    for (unsigned loop : group)
      for (auto [r, e] : llvm::enumerate(map.getResults()))
        if (!placed[r] && loopOf(e) == loop) {
          perm.push_back(r);
          placed[r] = true;
          ++count;
        }
    groupSizes.push_back(count);
  }
  for (int64_t r = 0; r < type.getRank(); ++r)
    if (!placed[r])
      perm.push_back(r);
  if (!llvm::equal(perm, llvm::seq<int64_t>(0, perm.size()))) {
    SmallVector<int64_t> shape;
    for (int64_t p : perm)
      shape.push_back(type.getDimSize(p));
    Value init = tensor::EmptyOp::create(b, loc, shape, type.getElementType());
    v = linalg::TransposeOp::create(b, loc, v, init, perm)->getResult(0);
    type = cast<RankedTensorType>(v.getType());
  }
  // Collapse each non-empty group to one dim (the unread unit dims join the
  // last one)...
  SmallVector<ReassociationIndices> collapse;
  int64_t next = 0;
  for (int64_t count : groupSizes) {
    if (count == 0)
      continue;
    ReassociationIndices group;
    for (int64_t k = 0; k < count; ++k)
      group.push_back(next++);
    collapse.push_back(group);
  }
  for (; next < type.getRank(); ++next)
    collapse.back().push_back(next);
  if (collapse.size() != size_t(type.getRank()))
    v = tensor::CollapseShapeOp::create(b, loc, v, collapse);
  // ...then add the unit dims of the empty groups.
  if (collapse.size() == groups.size())
    return v;
  auto collapsed = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape;
  SmallVector<ReassociationIndices> expand(collapsed.getRank());
  int64_t source = 0;
  for (auto [k, count] : llvm::enumerate(groupSizes)) {
    if (count == 0) {
      shape.push_back(1);
      // A unit dim joins the next non-empty group (the last one at the end).
      expand[std::min<int64_t>(source, collapsed.getRank() - 1)].push_back(k);
      continue;
    }
    shape.push_back(collapsed.getDimSize(source));
    expand[source++].push_back(k);
  }
  for (ReassociationIndices &group : expand)
    llvm::sort(group);
  return tensor::ExpandShapeOp::create(
      b, loc, RankedTensorType::get(shape, collapsed.getElementType()), v,
      expand);
}

/// The loops of a contraction whose batch loops are `batch` (in the order
/// of the scores' batch dims) grouped as the fused op's B and H (see
/// AttentionPattern::batchOrder), then `rows` and `cols`.
SmallVector<SmallVector<unsigned>> rank4Groups(const AttentionPattern &m,
                                               ArrayRef<unsigned> batch,
                                               unsigned rows, unsigned cols) {
  SmallVector<SmallVector<unsigned>> groups(4);
  for (auto [k, position] : llvm::enumerate(m.batchOrder))
    groups[k < m.outerBatch ? 0 : 1].push_back(batch[position]);
  groups[2] = {rows};
  groups[3] = {cols};
  return groups;
}

/// Builds the rank-4 mask [B|1, H|1, S|1, T|1] (or sets `causal`) from what
/// the chain found; null when there is no mask or it is the causal one.
/// The matcher has checked that it can be laid out so.
Value buildMask(OpBuilder &b, Location loc, AttentionPattern &m,
                ArrayRef<int64_t> scoreShape,
                llvm::DenseMap<Value, bool> &causalMasks) {
  if (!m.mask)
    return Value();
  // The mask's generic iterates over the scores' dims: batch positions,
  // then rows and cols.
  unsigned n = m.batchDims;
  auto positions = llvm::to_vector(llvm::seq<unsigned>(0, n));
  SmallVector<SmallVector<unsigned>> groups =
      rank4Groups(m, positions, n, n + 1);
  auto maskType = cast<RankedTensorType>(m.mask.getType());
  SmallVector<int64_t> shape;
  for (const SmallVector<unsigned> &group : groups) {
    int64_t size = 1;
    for (unsigned loop : group)
      if (std::optional<unsigned> pos = m.maskMap.getResultPosition(
              getAffineDimExpr(loop, b.getContext())))
        size *= maskType.getDimSize(*pos);
    shape.push_back(size);
  }
  int64_t rows = scoreShape[scoreShape.size() - 2], cols = scoreShape.back();
  if (shape[0] == 1 && shape[1] == 1 && shape[2] == rows && shape[3] == cols &&
      isCausalMask(m, &causalMasks)) {
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
  // Its dims are in the fused op's order already (the matcher checked):
  // flatten, then give it the rank-4 shape.
  auto type = cast<RankedTensorType>(mask.getType());
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

/// The fused op's output [B, H, S, E] as the output contraction's result
/// (its batch dims in the scores' order, then S, E).
Value fromRank4(OpBuilder &b, Location loc, Value out,
                const AttentionPattern &m, RankedTensorType resultType) {
  unsigned n = m.batchDims;
  if (m.outerBatch == 0)
    out = tensor::CollapseShapeOp::create(
        b, loc, out, SmallVector<ReassociationIndices>{{0, 1}, {2}, {3}});
  // [order's dims..., S, E].
  SmallVector<int64_t> shape;
  for (unsigned position : m.batchOrder)
    shape.push_back(resultType.getDimSize(position));
  shape.append({resultType.getDimSize(n), resultType.getDimSize(n + 1)});
  auto outType = cast<RankedTensorType>(out.getType());
  if (outType.getRank() != int64_t(shape.size())) {
    SmallVector<ReassociationIndices> groups;
    ReassociationIndices heads;
    for (unsigned k = m.outerBatch; k < n; ++k)
      heads.push_back(k);
    if (m.outerBatch)
      groups.push_back({0});
    groups.push_back(heads);
    groups.push_back({n});
    groups.push_back({n + 1});
    out = tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get(shape, outType.getElementType()), out,
        groups);
  }
  if (!llvm::equal(m.batchOrder, llvm::seq<unsigned>(0, n))) {
    SmallVector<int64_t> perm(n + 2);
    for (auto [k, position] : llvm::enumerate(m.batchOrder))
      perm[position] = k;
    perm[n] = n;
    perm[n + 1] = n + 1;
    Value init = tensor::EmptyOp::create(b, loc, resultType.getShape(),
                                         resultType.getElementType());
    out = linalg::TransposeOp::create(b, loc, out, init, perm)->getResult(0);
  }
  return out;
}

LogicalResult fuse(AttentionPattern &m,
                   llvm::DenseMap<Value, bool> &causalMasks) {
  linalg::LinalgOp pv = m.output;
  OpBuilder b(pv);
  Location loc = pv.getLoc();
  auto scoreType =
      cast<RankedTensorType>(m.scores.getOperation()->getResult(0).getType());
  Value mask = buildMask(b, loc, m, scoreType.getShape(), causalMasks);
  Value q = toRank4(b, loc, m.query, m.queryMap,
                    rank4Groups(m, m.scoreBatch, m.i, m.d));
  Value k =
      toRank4(b, loc, m.key, m.keyMap, rank4Groups(m, m.scoreBatch, m.j, m.d));
  Value v = toRank4(b, loc, m.value, m.valueMap,
                    rank4Groups(m, m.outBatch, m.oj, m.oe));
  auto qType = cast<RankedTensorType>(q.getType());
  auto vType = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> outShape(qType.getShape());
  outShape.back() = vType.getShape().back();
  Value outInit =
      tensor::EmptyOp::create(b, loc, outShape, qType.getElementType());
  Value lseInit = tensor::EmptyOp::create(
      b, loc, ArrayRef(outShape).drop_back(), b.getF32Type());
  auto attention = autopar::AttentionOp::create(
      b, loc, TypeRange{outInit.getType(), lseInit.getType()}, q, k, v, mask,
      ValueRange{}, ValueRange{outInit, lseInit}, b.getF64FloatAttr(m.scale),
      m.causal ? b.getUnitAttr() : UnitAttr());
  Operation *replaced = pv.getOperation();
  Value out =
      fromRank4(b, loc, attention.getResult(0), m,
                cast<RankedTensorType>(replaced->getResult(0).getType()));
  replaced->getResult(0).replaceAllUsesWith(out);
  // Erase the pattern, users first.
  SmallVector<Operation *> dead = {replaced};
  llvm::append_range(dead, m.interior);
  dead.push_back(m.scores);
  for (Operation *op : dead) {
    SmallVector<Operation *> inits;
    if (auto dps = dyn_cast<DestinationStyleOpInterface>(op))
      for (Value init : dps.getDpsInits())
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
  // What only the pattern read (its scales, the repeats of key and value).
  // They are listed users first.
  for (Operation *op :
       llvm::SetVector<Operation *>(m.operandOps.begin(), m.operandOps.end()))
    if (op->use_empty() && isMemoryEffectFree(op)) {
      SmallVector<Operation *> inits;
      if (auto dps = dyn_cast<DestinationStyleOpInterface>(op))
        for (Value init : dps.getDpsInits())
          if (Operation *def = init.getDefiningOp())
            inits.push_back(def);
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
    llvm::DenseMap<Value, bool> causalMasks;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (std::optional<AttentionPattern> m =
              matchAttentionPattern(op, options))
        matches.push_back(std::move(*m));
    });
    for (AttentionPattern &m : matches)
      if (failed(fuse(m, causalMasks)))
        return signalPassFailure();
  }
};

} // namespace
