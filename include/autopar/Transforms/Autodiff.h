//===- Autodiff.h - Reverse-mode differentiation on linalg-on-tensors
//------===//
//
// autopar differentiates a whole training step before planning
// (docs/training.md): the adjoint of a structured op is a structured op over
// the same iteration domain, so the planner, the partitioner and the backends
// see the backward pass as ordinary IR.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TRANSFORMS_AUTODIFF_H
#define AUTOPAR_TRANSFORMS_AUTODIFF_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/SmallVector.h"

namespace autopar {

/// Appends to `func`'s body (before its terminator) the reverse-mode adjoint
/// computation of the scalar `loss` with respect to each value of `wrt`
/// (block arguments of `func` of float tensor type), and returns one gradient
/// per `wrt` entry (a zero tensor where the loss does not depend on it).
///
/// Fails (after one error on `func` listing every op type without an adjoint
/// rule, with the ONNX nodes it comes from and their count) when an op on the
/// path from `wrt` to `loss` cannot be differentiated.
llvm::FailureOr<llvm::SmallVector<mlir::Value>>
buildGradients(mlir::func::FuncOp func, mlir::Value loss,
               llvm::ArrayRef<mlir::Value> wrt);

} // namespace autopar

#endif // AUTOPAR_TRANSFORMS_AUTODIFF_H
