//===- AttentionAdjoint.cpp - The gradient of fused attention -------------===//
//
// autopar.attention's adjoint is one autopar.attention_grad (FlashAttention-2's
// backward): it reads the forward's operands, its out and lse, and the
// adjoint of out, and gives the query's, key's and value's gradients without
// an S x T matrix. The lse result is the forward's own by-product: nothing
// downstream of the loss reads it, so it has no adjoint. The mask is a
// constant of the step (the fusion takes only masks known at compile time
// or given as graph inputs); a mask that carries a gradient has no rule.
//
//===----------------------------------------------------------------------===//

#include "AdjointBuilder.h"
#include "autopar/Dialect/AutoparOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace autopar::autodiff {

LogicalResult applyAttentionAdjoint(Operation *op, AdjointBuilder &adjoints) {
  auto attention = dyn_cast<AttentionOp>(op);
  if (!attention || !attention.hasPureTensorSemantics())
    return failure();
  Value out = attention.getResult(0), lse = attention.getResult(1);
  if (adjoints.getAdjoint(lse) ||
      (attention.getMask() && adjoints.isActive(attention.getMask())))
    return failure();
  Value dOut = adjoints.getAdjoint(out);
  Value q = attention.getQuery(), k = attention.getKey(),
        v = attention.getValue();
  if (!dOut ||
      !(adjoints.isActive(q) || adjoints.isActive(k) || adjoints.isActive(v)))
    return success();
  OpBuilder &b = adjoints.getBuilder();
  Location loc = op->getLoc();
  SmallVector<Value> inits;
  for (Value operand : {q, k, v}) {
    auto type = cast<RankedTensorType>(operand.getType());
    inits.push_back(tensor::EmptyOp::create(b, loc, type.getShape(),
                                            type.getElementType()));
  }
  auto grad = AttentionGradOp::create(
      b, loc, TypeRange(ValueRange(inits)), q, k, v, attention.getMask(),
      ValueRange{out, lse, dOut}, inits, attention.getScaleAttr(),
      attention.getCausalAttr());
  adjoints.accumulate(q, grad.getResult(0));
  adjoints.accumulate(k, grad.getResult(1));
  adjoints.accumulate(v, grad.getResult(2));
  return success();
}

} // namespace autopar::autodiff
