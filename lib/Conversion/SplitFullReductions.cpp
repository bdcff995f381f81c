//===- SplitFullReductions.cpp - Scalars reduced in two stages ------------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

namespace autopar {
#define GEN_PASS_DEF_SPLITFULLREDUCTIONS
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

std::optional<arith::AtomicRMWKind> combinerKind(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<arith::AtomicRMWKind>>(op)
      .Case([](arith::AddFOp) { return arith::AtomicRMWKind::addf; })
      .Case([](arith::MulFOp) { return arith::AtomicRMWKind::mulf; })
      .Case([](arith::MaximumFOp) { return arith::AtomicRMWKind::maximumf; })
      .Case([](arith::MinimumFOp) { return arith::AtomicRMWKind::minimumf; })
      .Case([](arith::MaxNumFOp) { return arith::AtomicRMWKind::maxnumf; })
      .Case([](arith::MinNumFOp) { return arith::AtomicRMWKind::minnumf; })
      .Default([](Operation *) { return std::nullopt; });
}

/// The combiner of a full reduction worth splitting, or null.
Operation *matchFullReduction(linalg::GenericOp op, int64_t minSize) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumLoops() < 2 || op.hasIndexSemantics())
    return nullptr;
  if (!llvm::all_of(op.getIteratorTypesArray(), linalg::isReductionIterator))
    return nullptr;
  AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  auto outType = dyn_cast<RankedTensorType>(op.getResult(0).getType());
  if (outMap.getNumResults() != 0 || !outType || outType.getRank() != 0 ||
      !isa<FloatType>(outType.getElementType()))
    return nullptr;
  int64_t size = 1;
  for (int64_t range : op.getStaticLoopRanges()) {
    if (ShapedType::isDynamic(range))
      return nullptr;
    size *= range;
  }
  if (size < minSize)
    return nullptr;
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  Operation *combine = yield.getOperand(0).getDefiningOp();
  BlockArgument out = body.getArguments().back();
  if (!combine || combine->getBlock() != &body || !combinerKind(combine) ||
      !combine->getResult(0).hasOneUse() || !out.hasOneUse() ||
      out.getOwner() != &body ||
      !llvm::is_contained(combine->getOperands(), Value(out)))
    return nullptr;
  return combine;
}

void split(linalg::GenericOp op, Operation *combine) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  Type elementType = getElementTypeOrSelf(op.getResult(0).getType());
  int64_t rows = op.getStaticLoopRanges()[0];
  unsigned numLoops = op.getNumLoops();

  // Stage 1: the same body, with loop d0 parallel and one partial per d0.
  arith::AtomicRMWKind kind = *combinerKind(combine);
  Value identity = arith::ConstantOp::create(
      b, loc, arith::getIdentityValueAttr(kind, elementType, b, loc));
  auto partialType = RankedTensorType::get({rows}, elementType);
  Value empty =
      tensor::EmptyOp::create(b, loc, partialType.getShape(), elementType);
  Value init = linalg::FillOp::create(b, loc, identity, empty).getResult(0);
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  maps.back() = AffineMap::get(numLoops, 0, getAffineDimExpr(0, ctx));
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  iterators[0] = utils::IteratorType::parallel;
  auto partial = linalg::GenericOp::create(b, loc, TypeRange{partialType},
                                           op.getDpsInputs(), ValueRange{init},
                                           maps, iterators);
  IRMapping mapping;
  op.getRegion().cloneInto(&partial.getRegion(), mapping);

  // Stage 2: the partials combined into the original output.
  AffineMap row = AffineMap::get(1, 0, getAffineDimExpr(0, ctx));
  AffineMap scalar = AffineMap::get(1, 0, ctx);
  auto total = linalg::GenericOp::create(
      b, loc, op.getResultTypes(), ValueRange{partial.getResult(0)},
      op.getDpsInits(), ArrayRef<AffineMap>{row, scalar},
      ArrayRef<utils::IteratorType>{utils::IteratorType::reduction},
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        IRMapping combineArgs;
        // The accumulator stays where the original combiner had it.
        BlockArgument out = op.getRegion().front().getArguments().back();
        for (Value operand : combine->getOperands())
          combineArgs.map(operand, operand == out ? args[1] : args[0]);
        Operation *combined = nb.clone(*combine, combineArgs);
        linalg::YieldOp::create(nb, nl, combined->getResult(0));
      });
  op.getResult(0).replaceAllUsesWith(total.getResult(0));
  op.erase();
}

struct SplitFullReductionsPass
    : autopar::impl::SplitFullReductionsBase<SplitFullReductionsPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, Operation *>> found;
    getOperation().walk([&](linalg::GenericOp op) {
      if (Operation *combine = matchFullReduction(op, minSize))
        found.push_back({op, combine});
    });
    for (auto [op, combine] : found)
      split(op, combine);
  }
};

} // namespace
