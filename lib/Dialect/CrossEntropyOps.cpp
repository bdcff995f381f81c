//===- CrossEntropyOps.cpp - autopar.softmax_cross_entropy and its gradient ==//
//
// Verification, memory effects and bufferization of the fused softmax
// cross-entropy ops (AutoparOps.td, docs/design/cross-entropy.md).
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/AutoparOps.h"

#include "OverwritingOps.h"

using namespace mlir;
using namespace autopar;

namespace {

/// Checks the logits and labels both ops read, and that `value` (named
/// `name`) is shaped like the positions [P...] with element type `element`.
LogicalResult expectPositions(Operation *op, StringRef name, Value value,
                              ShapedType logits, Type element) {
  auto type = dyn_cast<ShapedType>(value.getType());
  ArrayRef<int64_t> positions = logits.getShape().drop_back();
  if (!type || !type.hasRank() || type.getShape() != positions ||
      type.getElementType() != element) {
    std::string want;
    llvm::raw_string_ostream os(want);
    llvm::interleave(positions, os, "x");
    return op->emitOpError()
           << name << " must be shaped like the logits without their classes ("
           << (positions.empty() ? "a scalar" : want) << ") of " << element
           << ", got " << value.getType();
  }
  return success();
}

FailureOr<ShapedType> verifyLogitsAndLabels(Operation *op, Value logits,
                                            Value labels) {
  auto x = dyn_cast<ShapedType>(logits.getType());
  if (!x || !x.hasStaticShape() || x.getRank() < 1 ||
      !isa<FloatType>(x.getElementType()))
    return op->emitOpError("logits must be a static float shape [P..., C], "
                           "got ")
           << logits.getType();
  if (x.getShape().back() < 1)
    return op->emitOpError("logits must have at least one class, got ")
           << logits.getType();
  if (failed(expectPositions(op, "labels", labels, x,
                             IntegerType::get(op->getContext(), 64))))
    return failure();
  return x;
}

} // namespace

//===----------------------------------------------------------------------===//
// SoftmaxCrossEntropyOp
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxCrossEntropyOp::verify() {
  FailureOr<ShapedType> x =
      verifyLogitsAndLabels(*this, getLogits(), getLabels());
  if (failed(x))
    return failure();
  if (!getSaved().empty())
    return emitOpError("takes no saved values (those are the gradient's)");
  if (getOutputs().size() != 2)
    return emitOpError("has two outputs, nll and lse");
  Type f32 = Float32Type::get(getContext());
  if (failed(expectPositions(*this, "nll", getNllInit(), *x, f32)) ||
      failed(expectPositions(*this, "lse", getLseInit(), *x, f32)))
    return failure();
  return verifyOverwritingResults(*this, getOutputs(), getResultTypes());
}

void SoftmaxCrossEntropyOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  overwritingEffects(*this, effects);
}

//===----------------------------------------------------------------------===//
// SoftmaxCrossEntropyGradOp
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxCrossEntropyGradOp::verify() {
  FailureOr<ShapedType> x =
      verifyLogitsAndLabels(*this, getLogits(), getLabels());
  if (failed(x))
    return failure();
  if (getSaved().size() != 2)
    return emitOpError("saves two values: the forward's lse and the gradient "
                       "of nll");
  if (getOutputs().size() != 1)
    return emitOpError("has one output, the gradient of the logits");
  Type f32 = Float32Type::get(getContext());
  if (failed(expectPositions(*this, "lse", getSaved()[0], *x, f32)) ||
      failed(expectPositions(*this, "d_nll", getSaved()[1], *x, f32)))
    return failure();
  auto d = dyn_cast<ShapedType>(getOutputs()[0].getType());
  if (!d || !d.hasRank() || d.getShape() != x->getShape() ||
      d.getElementType() != x->getElementType())
    return emitOpError("d_logits must be shaped and typed like the logits (")
           << getLogits().getType() << "), got " << getOutputs()[0].getType();
  return verifyOverwritingResults(*this, getOutputs(), getResultTypes());
}

void SoftmaxCrossEntropyGradOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  overwritingEffects(*this, effects);
}

void autopar::attachCrossEntropyBufferization(MLIRContext *ctx) {
  SoftmaxCrossEntropyOp::attachInterface<
      OverwritingBufferization<SoftmaxCrossEntropyOp>>(*ctx);
  SoftmaxCrossEntropyGradOp::attachInterface<
      OverwritingBufferization<SoftmaxCrossEntropyGradOp>>(*ctx);
}
