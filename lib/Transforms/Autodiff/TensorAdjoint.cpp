//===- TensorAdjoint.cpp - Adjoints of data movement on tensors -----------===//
//
// Reshapes, slices, padding and concatenation are linear maps; each adjoint
// is the transposed map: a reshape back, an insert into zeros, a slice of
// the padded adjoint, slices of a concatenation's adjoint.
//
//===----------------------------------------------------------------------===//

#include "AdjointBuilder.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace autopar::autodiff {

LogicalResult applyTensorAdjoint(Operation *op, AdjointBuilder &adjoints) {
  if (op->getNumResults() != 1)
    return failure();
  Value dY = adjoints.getAdjoint(op->getResult(0));
  if (!dY)
    return success();
  OpBuilder &b = adjoints.getBuilder();
  Location loc = op->getLoc();
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](tensor::ExpandShapeOp expand) {
        adjoints.accumulate(
            expand.getSrc(),
            tensor::CollapseShapeOp::create(b, loc, expand.getSrcType(), dY,
                                            expand.getReassociationIndices()));
        return success();
      })
      .Case([&](tensor::CollapseShapeOp collapse) {
        adjoints.accumulate(
            collapse.getSrc(),
            tensor::ExpandShapeOp::create(b, loc, collapse.getSrcType(), dY,
                                          collapse.getReassociationIndices()));
        return success();
      })
      .Case([&](tensor::CastOp cast) {
        adjoints.accumulate(
            cast.getSource(),
            tensor::CastOp::create(b, loc, cast.getSource().getType(), dY));
        return success();
      })
      .Case([&](tensor::ExtractSliceOp slice) {
        // The slice's elements go back where they came from; the rest of
        // the source received nothing.
        Value zeros = adjoints.zeros(loc, slice.getSourceType());
        adjoints.accumulate(slice.getSource(),
                            tensor::InsertSliceOp::create(
                                b, loc, dY, zeros, slice.getMixedOffsets(),
                                slice.getMixedSizes(),
                                slice.getMixedStrides()));
        return success();
      })
      .Case([&](tensor::InsertSliceOp insert) {
        if (adjoints.isActive(insert.getSource()))
          adjoints.accumulate(
              insert.getSource(),
              tensor::ExtractSliceOp::create(
                  b, loc, insert.getSourceType(), dY, insert.getMixedOffsets(),
                  insert.getMixedSizes(), insert.getMixedStrides()));
        if (adjoints.isActive(insert.getDest()))
          adjoints.accumulate(
              insert.getDest(),
              tensor::InsertSliceOp::create(
                  b, loc, adjoints.zeros(loc, insert.getSourceType()), dY,
                  insert.getMixedOffsets(), insert.getMixedSizes(),
                  insert.getMixedStrides()));
        return success();
      })
      .Case([&](tensor::PadOp pad) {
        // Only the source's window of the padded adjoint flows back (the
        // padding value is a constant).
        auto sourceType = pad.getSourceType();
        SmallVector<OpFoldResult> sizes, strides;
        for (int64_t d : sourceType.getShape()) {
          sizes.push_back(b.getIndexAttr(d));
          strides.push_back(b.getIndexAttr(1));
        }
        adjoints.accumulate(
            pad.getSource(),
            tensor::ExtractSliceOp::create(
                b, loc, sourceType, dY, pad.getMixedLowPad(), sizes, strides));
        return success();
      })
      .Case([&](tensor::ConcatOp concat) {
        int64_t dim = concat.getDim();
        int64_t offset = 0;
        auto resultType = concat.getResultType();
        for (Value input : concat.getInputs()) {
          auto type = cast<RankedTensorType>(input.getType());
          if (adjoints.isActive(input)) {
            SmallVector<OpFoldResult> offsets, sizes, strides;
            for (int64_t d = 0; d < resultType.getRank(); ++d) {
              offsets.push_back(b.getIndexAttr(d == dim ? offset : 0));
              sizes.push_back(b.getIndexAttr(type.getDimSize(d)));
              strides.push_back(b.getIndexAttr(1));
            }
            adjoints.accumulate(
                input, tensor::ExtractSliceOp::create(b, loc, type, dY, offsets,
                                                      sizes, strides));
          }
          offset += type.getDimSize(dim);
        }
        return success();
      })
      .Default([](Operation *) { return failure(); });
}

} // namespace autopar::autodiff
