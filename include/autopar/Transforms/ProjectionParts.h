//===- ProjectionParts.h - Fused projections with a part dim ----*- C++ -*-===//
//
// See autopar-expose-projection-parts in Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TRANSFORMS_PROJECTIONPARTS_H
#define AUTOPAR_TRANSFORMS_PROJECTIONPARTS_H

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace autopar {

/// Rewrites every fused projection of `func` (a matmul whose columns are
/// cut into equal parts) so that its parts have a dim of their own; returns
/// how many were rewritten. The rewritten parameters take the new shapes
/// (the same bytes): `func`'s type changes.
int exposeProjectionParts(mlir::func::FuncOp func);

} // namespace autopar

#endif // AUTOPAR_TRANSFORMS_PROJECTIONPARTS_H
