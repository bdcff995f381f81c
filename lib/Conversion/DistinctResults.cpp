//===- DistinctResults.cpp - one value per function result ----------------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseSet.h"

namespace autopar {
#define GEN_PASS_DEF_DISTINCTRESULTS
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// A value of its own equal to \p value, made before \p ret.
Value distinctCopy(OpBuilder &b, func::ReturnOp ret, Value value) {
  Location loc = ret.getLoc();
  Operation *def = value.getDefiningOp();
  // A constant, or a constant fill of an empty tensor: made again.
  if (def && def->hasTrait<OpTrait::ConstantLike>())
    return b.clone(*def)->getResult(0);
  if (auto fill = dyn_cast_or_null<linalg::FillOp>(def))
    if (fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>() &&
        matchPattern(fill.getInputs()[0], m_Constant())) {
      Value empty =
          b.clone(*fill.getOutputs()[0].getDefiningOp())->getResult(0);
      return linalg::FillOp::create(b, loc, fill.getInputs()[0], empty)
          .getResult(0);
    }
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, value);
  Value empty = tensor::EmptyOp::create(b, loc, sizes, type.getElementType());
  return linalg::CopyOp::create(b, loc, value, empty).getResult(0);
}

struct DistinctResultsPass
    : autopar::impl::DistinctResultsBase<DistinctResultsPass> {
  void runOnOperation() override {
    getOperation().walk([](func::ReturnOp ret) {
      llvm::DenseSet<Value> returned;
      OpBuilder b(ret);
      for (OpOperand &operand : ret->getOpOperands()) {
        Value value = operand.get();
        if (!isa<RankedTensorType>(value.getType()) ||
            returned.insert(value).second)
          continue;
        operand.set(distinctCopy(b, ret, value));
      }
    });
  }
};

} // namespace
