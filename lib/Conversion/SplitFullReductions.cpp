//===- SplitFullReductions.cpp - Scalars reduced in two stages ------------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "ReductionCombiner.h"
#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

namespace autopar {
#define GEN_PASS_DEF_SPLITFULLREDUCTIONS
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// The combiner of a full reduction worth splitting.
std::optional<autopar::Combiner> matchFullReduction(linalg::GenericOp op,
                                                    int64_t minSize) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
      op.getNumLoops() < 2 || op.hasIndexSemantics())
    return std::nullopt;
  if (!llvm::all_of(op.getIteratorTypesArray(), linalg::isReductionIterator))
    return std::nullopt;
  AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  auto outType = dyn_cast<RankedTensorType>(op.getResult(0).getType());
  if (outMap.getNumResults() != 0 || !outType || outType.getRank() != 0 ||
      !isa<FloatType>(outType.getElementType()))
    return std::nullopt;
  int64_t size = 1;
  for (int64_t range : op.getStaticLoopRanges()) {
    if (ShapedType::isDynamic(range))
      return std::nullopt;
    size *= range;
  }
  if (size < minSize)
    return std::nullopt;
  return autopar::matchCombiner(op);
}

void split(linalg::GenericOp op, const autopar::Combiner &combiner) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  Type elementType = getElementTypeOrSelf(op.getResult(0).getType());
  int64_t rows = op.getStaticLoopRanges()[0];
  unsigned numLoops = op.getNumLoops();

  // Stage 1: the same body, with loop d0 parallel and one partial per d0.
  arith::AtomicRMWKind kind = *autopar::combinerKind(combiner.op);
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
        linalg::YieldOp::create(
            nb, nl, autopar::combineWith(nb, combiner, args[1], args[0]));
      });
  op.getResult(0).replaceAllUsesWith(total.getResult(0));
  op.erase();
}

struct SplitFullReductionsPass
    : autopar::impl::SplitFullReductionsBase<SplitFullReductionsPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, autopar::Combiner>> found;
    getOperation().walk([&](linalg::GenericOp op) {
      if (std::optional<autopar::Combiner> combiner =
              matchFullReduction(op, minSize))
        found.push_back({op, *combiner});
    });
    for (auto &[op, combiner] : found)
      split(op, combiner);
  }
};

} // namespace
