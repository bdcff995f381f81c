//===- ActiveValues.h - Which values carry a gradient -----------*- C++ -*-===//
//
// Activity analysis for reverse-mode autodiff: the values that depend on the
// differentiated arguments through float data flow and that the loss
// depends on the same way. autopar-differentiate trains exactly the active
// parameters; the planner prices exactly those as trained (gradients,
// optimizer states), so that a float buffer read only by a comparison (a
// causal mask) is held but not trained in both.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PLANNER_ACTIVEVALUES_H
#define AUTOPAR_PLANNER_ACTIVEVALUES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

namespace autopar {

/// The values \p op reads: its operands and the values its regions use from
/// above (a tensor read with tensor.extract inside a linalg body).
llvm::SmallVector<mlir::Value> readValues(mlir::Operation *op);

/// The results of the structured op \p op whose values depend
/// differentiably on the tensors in \p depends: through float values only,
/// so that a tensor read only by comparisons (a mask compared with zero,
/// then a select's condition) or as indices passes no gradient on.
llvm::SmallVector<mlir::Value>
differentiableResults(mlir::linalg::LinalgOp op,
                      const llvm::DenseSet<mlir::Value> &depends);

/// The values of \p func's body that depend on any of \p from through
/// float-typed data flow, intersected with those \p to depends on: the
/// values that carry a gradient from \p to back to \p from.
llvm::DenseSet<mlir::Value> findActiveValues(mlir::func::FuncOp func,
                                             llvm::ArrayRef<mlir::Value> from,
                                             mlir::Value to);

} // namespace autopar

#endif // AUTOPAR_PLANNER_ACTIVEVALUES_H
