//===- LinalgMatchers.h - Small matchers over the importer's linalg -*- C++
//-*-//
//
// The pieces the fused-op recognisers (AttentionPattern.cpp,
// CrossEntropyPattern.cpp) look for in the importer's ops: fills, row
// reductions, elementwise generics of one op. Both patterns contain a row
// softmax written the same way, so they read it with the same matchers.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_LIB_DIALECT_LINALGMATCHERS_H
#define AUTOPAR_LIB_DIALECT_LINALGMATCHERS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"

#include <optional>

namespace autopar::detail {

/// The ops of a generic's body before its yield, but constants.
llvm::SmallVector<mlir::Operation *> bodyOps(mlir::linalg::GenericOp op);

/// Whether every loop of `op` is parallel.
bool allParallel(mlir::linalg::LinalgOp op);

/// A float scalar known at compile time: a constant, or a splat or 0-d
/// tensor constant.
std::optional<double> scalarConstant(mlir::Value v);

/// Whether `init` is a linalg.fill of `value` (or, with `atMost`, of a
/// value at most `value`).
bool isFilledWith(mlir::Value init, double value, bool atMost = false);

/// Whether `map` is the identity over `n` dims minus its last result.
bool isDropLast(mlir::AffineMap map, unsigned n);

/// The single body op of an elementwise generic with identity output that
/// yields that op's result, or null.
mlir::Operation *elementwiseOp(mlir::linalg::GenericOp g);

/// The row reduction of `input` over its last dim giving `result`: a
/// `linalg.reduce` or the generic it is written as once
/// autopar-sink-merging-reshapes has moved a reshape across it, whose body
/// is a single `OpTy` of the element and the accumulator.
template <typename... OpTys>
mlir::linalg::LinalgOp matchRowReduce(mlir::Value result, mlir::Value input) {
  using namespace mlir;
  auto op = result.getDefiningOp<linalg::LinalgOp>();
  if (!op || op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      op.getDpsInputs()[0] != input || op->getNumResults() != 1)
    return {};
  auto inputType = cast<RankedTensorType>(input.getType());
  unsigned rank = inputType.getRank();
  if (auto reduce = dyn_cast<linalg::ReduceOp>(op.getOperation())) {
    if (reduce.getDimensions() != ArrayRef<int64_t>{rank - 1})
      return {};
  } else if (isa<linalg::GenericOp>(op.getOperation())) {
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    if (op.getNumLoops() != rank || op.getNumReductionLoops() != 1 ||
        op.getIteratorTypesArray().back() != utils::IteratorType::reduction ||
        !maps[0].isIdentity() || !isDropLast(maps[1], rank))
      return {};
  } else {
    return {};
  }
  Block *body = op.getBlock();
  if (body->getOperations().size() != 2 || !isa<OpTys...>(body->front()))
    return {};
  Operation &combine = body->front();
  Value a = body->getArgument(0), b = body->getArgument(1);
  if (combine.getNumOperands() != 2 ||
      !((combine.getOperand(0) == a && combine.getOperand(1) == b) ||
        (combine.getOperand(0) == b && combine.getOperand(1) == a)) ||
      body->getTerminator()->getOperand(0) != combine.getResult(0))
    return {};
  return op;
}

} // namespace autopar::detail

#endif // AUTOPAR_LIB_DIALECT_LINALGMATCHERS_H
