//===- CrossEntropyAdjoint.cpp - The gradient of fused cross-entropy ------===//
//
// autopar.softmax_cross_entropy's adjoint is one
// autopar.softmax_cross_entropy_grad: from the logits, the labels, the
// forward's lse and the adjoint of nll it writes the logits' gradient in one
// pass, the probabilities recomputed from lse. lse is the forward's
// by-product for its gradient: nothing downstream of the loss reads it, so
// it has no adjoint; the labels are integers.
//
//===----------------------------------------------------------------------===//

#include "AdjointBuilder.h"
#include "autopar/Dialect/AutoparOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace autopar::autodiff {

LogicalResult applyCrossEntropyAdjoint(Operation *op,
                                       AdjointBuilder &adjoints) {
  auto loss = dyn_cast<SoftmaxCrossEntropyOp>(op);
  if (!loss || !loss.hasPureTensorSemantics())
    return failure();
  Value nll = loss.getResult(0), lse = loss.getResult(1);
  if (adjoints.getAdjoint(lse))
    return failure();
  Value dNll = adjoints.getAdjoint(nll);
  Value logits = loss.getLogits();
  if (!dNll || !adjoints.isActive(logits))
    return success();
  OpBuilder &b = adjoints.getBuilder();
  Location loc = op->getLoc();
  auto type = cast<RankedTensorType>(logits.getType());
  Value init =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  auto grad = SoftmaxCrossEntropyGradOp::create(
      b, loc, TypeRange{type}, logits, loss.getLabels(), ValueRange{lse, dNll},
      ValueRange{init}, loss.getIgnoreIndexAttr());
  adjoints.accumulate(logits, grad.getResult(0));
  return success();
}

} // namespace autopar::autodiff
