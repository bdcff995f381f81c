//===- LossNormalisation.h - How a loss adds up over a batch ---*- C++ -*-===//
//
// A step that cuts its batch (micro-batches, data-parallel replicas,
// pipeline stages) must normalise the loss and the gradients as one call on
// the whole batch would. This says how the loss of one call is built.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TRANSFORMS_LOSSNORMALISATION_H
#define AUTOPAR_TRANSFORMS_LOSSNORMALISATION_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace autopar {

/// How a micro-batch's loss adds up to the big batch's.
enum class LossKind {
  /// loss = num / den with den independent of the parameters (a mean over
  /// valid targets, weighted or not): the step's loss is sum(num) /
  /// sum(den), each micro-batch computes num and its gradient.
  Ratio,
  /// loss = a sum: the step's loss is the sum of the micro-batches'.
  Sum,
  /// Anything else: the mean of the micro-batches' losses (DeepSpeed's
  /// loss / gradient_accumulation_steps), the big batch's loss whenever
  /// every micro-batch's loss is a mean over the same count.
  Average,
};

/// The loss of one call and how it adds up.
struct LossParts {
  LossKind kind = LossKind::Average;
  /// Ratio: the division's operands (scalars); otherwise null.
  mlir::Value numerator, denominator;
};

/// How \p loss (a float scalar of \p func) adds up over calls: a division
/// `num / den` whose `den` depends on none of \p trained is a Ratio, a sum
/// reduction a Sum, anything else an Average. fp16's loss scaling and
/// single-element reshapes are looked through.
LossParts analyseLoss(mlir::func::FuncOp func, mlir::Value loss,
                      llvm::ArrayRef<mlir::Value> trained);

} // namespace autopar

#endif // AUTOPAR_TRANSFORMS_LOSSNORMALISATION_H
