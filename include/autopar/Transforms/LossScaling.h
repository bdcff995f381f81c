//===- LossScaling.h - fp16's loss scale in a training step ----*- C++ -*-===//
//
// fp16 training multiplies the loss by a scale before the backward, so that
// small gradients stay above fp16's smallest numbers; the optimizer divides
// it out again (autopar-apply-optimizer). The one-program step
// (autopar-differentiate) and a pipeline's last stage scale the loss alike.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TRANSFORMS_LOSSSCALING_H
#define AUTOPAR_TRANSFORMS_LOSSSCALING_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace autopar {

/// `loss` (a float tensor of `main`'s body) times fp16's loss scale, built
/// right after it: `scale`, plus, with `dynamic` scaling, the optimizer
/// state `loss_scaler.scale_offset` (zero at the start; the optimizer
/// updates it), a new f32 scalar argument of `main` after its parameters.
/// The multiply carries `autopar.loss_scaling`. Where the plan annotated
/// `main` (tensor parallelism) the offset and the scaled loss are annotated
/// whole: sharding propagation would give a rank-0 op none of whose values
/// is annotated a sharding without a grid.
mlir::Value scaleLoss(mlir::func::FuncOp main, mlir::Value loss, double scale,
                      bool dynamic);

} // namespace autopar

#endif // AUTOPAR_TRANSFORMS_LOSSSCALING_H
