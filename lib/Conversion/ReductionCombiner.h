//===- ReductionCombiner.h - The combining op of a reduction body -*- C++
//-*-===//
//
// What the reduction passes (autopar-gpu-warp-reductions,
// autopar-split-full-reductions) need to know of a `linalg.generic`'s body
// `yield combine(out, v)`: which op combines, what it folds in, in which
// operand order, and how to apply it again elsewhere.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_LIB_CONVERSION_REDUCTIONCOMBINER_H
#define AUTOPAR_LIB_CONVERSION_REDUCTIONCOMBINER_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace autopar {

/// A reduction body `yield combine(out, mapped)`: the combining op, the value
/// it folds into the accumulator, and whether the accumulator is its first
/// operand (kept, so that a non-commutative-looking form stays as written).
struct Combiner {
  mlir::Operation *op;
  mlir::Value mapped;
  bool accumulatorFirst;
};

/// The kind of `op` if it is a float combiner (addf, mulf, maximumf,
/// minimumf, maxnumf, minnumf): its identity is the kind's.
std::optional<mlir::arith::AtomicRMWKind> combinerKind(mlir::Operation *op);

/// The body's combiner when it yields one combining op applied to the
/// output block argument and one other value, the output used nowhere else.
std::optional<Combiner> matchCombiner(mlir::linalg::GenericOp op);

/// `combine` applied to the accumulator and a new value, in the order the
/// original body wrote it (the op cloned at `b`).
mlir::Value combineWith(mlir::OpBuilder &b, const Combiner &combiner,
                        mlir::Value accumulator, mlir::Value value);

} // namespace autopar

#endif // AUTOPAR_LIB_CONVERSION_REDUCTIONCOMBINER_H
