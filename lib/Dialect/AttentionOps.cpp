//===- AttentionOps.cpp - autopar.attention and its gradient --------------===//
//
// Verification, memory effects and bufferization of the fused attention ops
// (AutoparOps.td, docs/design/attention.md); the last two are shared with
// the other fused ops (OverwritingOps.h).
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/AutoparOps.h"

#include "OverwritingOps.h"

using namespace mlir;
using namespace autopar;

namespace {

/// The sizes the operands of an attention op agree on.
struct AttentionSizes {
  int64_t batch, heads, kvHeads, queries, keys, headDim, valueDim;
};

/// Checks `type` is rank `rank` with `dims` (kDynamic: any) and, if
/// `elementType` is set, that element type.
LogicalResult expectShape(Operation *op, StringRef name, Type type,
                          ArrayRef<int64_t> dims, Type elementType) {
  auto shaped = dyn_cast<ShapedType>(type);
  if (!shaped || !shaped.hasRank() || shaped.getRank() != (int64_t)dims.size())
    return op->emitOpError()
           << name << " must have rank " << dims.size() << ", got " << type;
  for (auto [i, want] : llvm::enumerate(dims)) {
    if (want == ShapedType::kDynamic || shaped.getDimSize(i) == want)
      continue;
    std::string expected;
    llvm::raw_string_ostream os(expected);
    os << "[";
    llvm::interleaveComma(dims, os, [&](int64_t d) {
      if (d == ShapedType::kDynamic)
        os << "?";
      else
        os << d;
    });
    os << "]";
    return op->emitOpError()
           << name << " must be " << expected << " (dim " << i << " is "
           << shaped.getDimSize(i) << "), got " << type;
  }
  if (elementType && shaped.getElementType() != elementType)
    return op->emitOpError() << name << " must have element type "
                             << elementType << ", got " << type;
  return success();
}

/// Verifies the forward operands shared by both ops and returns the sizes.
FailureOr<AttentionSizes> verifyAttentionOperands(Operation *op, Value query,
                                                  Value key, Value value,
                                                  Value mask) {
  auto q = dyn_cast<ShapedType>(query.getType());
  auto k = dyn_cast<ShapedType>(key.getType());
  auto v = dyn_cast<ShapedType>(value.getType());
  if (!q.hasStaticShape() || !k.hasStaticShape() || !v.hasStaticShape() ||
      q.getRank() != 4 || k.getRank() != 4 || v.getRank() != 4)
    return op->emitOpError("query, key and value must be static rank-4 "
                           "shapes [B, H, S, D], [B, Hkv, T, D], "
                           "[B, Hkv, T, E]");
  if (!isa<FloatType>(q.getElementType()) ||
      k.getElementType() != q.getElementType() ||
      v.getElementType() != q.getElementType())
    return op->emitOpError("query, key and value must have one float "
                           "element type");
  AttentionSizes s{q.getDimSize(0), q.getDimSize(1), k.getDimSize(1),
                   q.getDimSize(2), k.getDimSize(2), q.getDimSize(3),
                   v.getDimSize(3)};
  if (failed(expectShape(op, "key", k, {s.batch, s.kvHeads, s.keys, s.headDim},
                         {})) ||
      failed(expectShape(op, "value", v,
                         {s.batch, s.kvHeads, s.keys, ShapedType::kDynamic},
                         {})))
    return failure();
  if (s.kvHeads < 1 || s.heads % s.kvHeads != 0)
    return op->emitOpError()
           << "the query's " << s.heads
           << " heads are not a multiple of the key's " << s.kvHeads;
  if (mask) {
    auto m = dyn_cast<ShapedType>(mask.getType());
    int64_t full[] = {s.batch, s.heads, s.queries, s.keys};
    if (!m.hasStaticShape() || m.getRank() != 4 ||
        !isa<FloatType>(m.getElementType()))
      return op->emitOpError("the mask must be a static rank-4 float shape");
    for (int i = 0; i < 4; ++i)
      if (m.getDimSize(i) != 1 && m.getDimSize(i) != full[i])
        return op->emitOpError()
               << "mask dim " << i << " is " << m.getDimSize(i)
               << ": it must be 1 (broadcast) or " << full[i];
  }
  return s;
}

} // namespace

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionOp::verify() {
  FailureOr<AttentionSizes> s = verifyAttentionOperands(
      *this, getQuery(), getKey(), getValue(), getMask());
  if (failed(s))
    return failure();
  if (!getSaved().empty())
    return emitOpError("takes no saved values (those are the gradient's)");
  if (getOutputs().size() != 2)
    return emitOpError("has two outputs, out and lse");
  Type element = cast<ShapedType>(getQuery().getType()).getElementType();
  Type f32 = Float32Type::get(getContext());
  if (failed(expectShape(*this, "out", getOutInit().getType(),
                         {s->batch, s->heads, s->queries, s->valueDim},
                         element)) ||
      failed(expectShape(*this, "lse", getLseInit().getType(),
                         {s->batch, s->heads, s->queries}, f32)))
    return failure();
  return verifyOverwritingResults(*this, getOutputs(), getResultTypes());
}

void AttentionOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  overwritingEffects(*this, effects);
}

//===----------------------------------------------------------------------===//
// AttentionGradOp
//===----------------------------------------------------------------------===//

LogicalResult AttentionGradOp::verify() {
  FailureOr<AttentionSizes> s = verifyAttentionOperands(
      *this, getQuery(), getKey(), getValue(), getMask());
  if (failed(s))
    return failure();
  if (getSaved().size() != 3)
    return emitOpError("saves three values: the forward's out and lse, and "
                       "the gradient of out");
  if (getOutputs().size() != 3)
    return emitOpError("has three outputs, the gradients of query, key and "
                       "value");
  Type element = cast<ShapedType>(getQuery().getType()).getElementType();
  Type f32 = Float32Type::get(getContext());
  SmallVector<int64_t> out = {s->batch, s->heads, s->queries, s->valueDim};
  if (failed(
          expectShape(*this, "out", getSaved()[0].getType(), out, element)) ||
      failed(expectShape(*this, "lse", getSaved()[1].getType(),
                         {s->batch, s->heads, s->queries}, f32)) ||
      failed(
          expectShape(*this, "d_out", getSaved()[2].getType(), out, element)) ||
      failed(expectShape(*this, "d_query", getOutputs()[0].getType(),
                         cast<ShapedType>(getQuery().getType()).getShape(),
                         element)) ||
      failed(expectShape(*this, "d_key", getOutputs()[1].getType(),
                         cast<ShapedType>(getKey().getType()).getShape(),
                         element)) ||
      failed(expectShape(*this, "d_value", getOutputs()[2].getType(),
                         cast<ShapedType>(getValue().getType()).getShape(),
                         element)))
    return failure();
  return verifyOverwritingResults(*this, getOutputs(), getResultTypes());
}

void AttentionGradOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  overwritingEffects(*this, effects);
}

void autopar::attachAttentionBufferization(MLIRContext *ctx) {
  AttentionOp::attachInterface<OverwritingBufferization<AttentionOp>>(*ctx);
  AttentionGradOp::attachInterface<OverwritingBufferization<AttentionGradOp>>(
      *ctx);
}
