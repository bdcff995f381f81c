//===- Elementwise.h - Building an elementwise linalg.generic ---*- C++ -*-===//
//
// The small per-position ops the fused cross-entropy's rewrites build around
// it (FuseCrossEntropy.cpp, CrossEntropyShardingModels.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_LIB_TRANSFORMS_ELEMENTWISE_H
#define AUTOPAR_LIB_TRANSFORMS_ELEMENTWISE_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace autopar::detail {

/// A linalg.generic giving `type` from `inputs` (all of its shape, read
/// through the identity), its body `fn` of the inputs' elements.
inline mlir::Value buildElementwise(
    mlir::OpBuilder &b, mlir::Location loc, mlir::ValueRange inputs,
    mlir::RankedTensorType type,
    llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Location,
                                   mlir::ValueRange)>
        fn) {
  using namespace mlir;
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  SmallVector<AffineMap> maps(inputs.size() + 1, id);
  SmallVector<utils::IteratorType> iterators(type.getRank(),
                                             utils::IteratorType::parallel);
  Value init =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  return linalg::GenericOp::create(
             b, loc, TypeRange{type}, inputs, ValueRange{init}, maps, iterators,
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               linalg::YieldOp::create(nb, nl, fn(nb, nl, args));
             })
      .getResult(0);
}

} // namespace autopar::detail

#endif // AUTOPAR_LIB_TRANSFORMS_ELEMENTWISE_H
