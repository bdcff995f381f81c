//===- LossHead.h - What a loss is computed from after the last GEMM -*- C++
//-*-===//
//
// PyTorch's autocast runs log-softmax, the losses and their reductions in
// f32. autopar-mixed-precision keeps that part of a training step in f32
// (`f32-loss-head`), and the planner prices what it keeps there at 4 bytes:
// both ask which ops it is here.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PLANNER_LOSSHEAD_H
#define AUTOPAR_PLANNER_LOSSHEAD_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

namespace autopar {

/// Whether `op` is a reshape or a slice (expand_shape, collapse_shape,
/// extract_slice): it carries its source's values on.
bool isReshapeOrSlice(mlir::Operation *op);

/// The ops a returned f32 scalar of `func` (a loss) is computed from
/// without passing a GEMM or a convolution: generics, reshapes, slices,
/// extracts and from_elements, back to the last contraction.
llvm::DenseSet<mlir::Operation *> lossHead(mlir::func::FuncOp func);

} // namespace autopar

#endif // AUTOPAR_PLANNER_LOSSHEAD_H
