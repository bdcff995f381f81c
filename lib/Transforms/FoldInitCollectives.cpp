//===- FoldInitCollectives.cpp - Collectives of what no rank computed -----===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "ShardingModelsImpl.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace autopar {
#define GEN_PASS_DEF_FOLDINITCOLLECTIVES
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// Whether a reduction of equal copies of \p value gives \p value back: max,
/// min, the mean and bitwise and/or always, a sum or product only of its
/// neutral element's value (zero for a sum, one for a product), where ranks
/// that add zeros change nothing.
bool reductionKeeps(shard::ReductionKind kind, Attribute value) {
  auto isValue = [&](double v) {
    if (auto f = dyn_cast<FloatAttr>(value))
      return f.getValueAsDouble() == v;
    if (auto i = dyn_cast<IntegerAttr>(value))
      return i.getValue().getSExtValue() == static_cast<int64_t>(v);
    return false;
  };
  switch (kind) {
  case shard::ReductionKind::Max:
  case shard::ReductionKind::Min:
  case shard::ReductionKind::Average:
  case shard::ReductionKind::BitwiseAnd:
  case shard::ReductionKind::BitwiseOr:
    return true;
  case shard::ReductionKind::Sum:
    return isValue(0.0);
  case shard::ReductionKind::Product:
    return isValue(1.0);
  default:
    return false;
  }
}

/// A collective whose input is a `tensor.empty` (contents undefined on
/// every rank) or a fill of one constant it keeps: each rank makes its
/// result in place.
template <typename CollectiveOp>
struct FoldInitCollective : OpRewritePattern<CollectiveOp> {
  using OpRewritePattern<CollectiveOp>::OpRewritePattern;

  LogicalResult matchAndRewrite(CollectiveOp op,
                                PatternRewriter &rewriter) const override {
    auto type = dyn_cast<RankedTensorType>(op.getResult().getType());
    if (!type || !type.hasStaticShape())
      return failure();
    Value input = op.getInput();
    Location loc = op.getLoc();
    if (input.template getDefiningOp<tensor::EmptyOp>()) {
      // Read before the replacement erases `op`.
      DictionaryAttr attrs = op->getDiscardableAttrDictionary();
      auto empty = rewriter.replaceOpWithNewOp<tensor::EmptyOp>(
          op, type.getShape(), type.getElementType());
      empty->setDiscardableAttrs(attrs);
      return success();
    }
    auto value =
        dyn_cast_or_null<TypedAttr>(autopar::detail::fillConstant(input));
    if (!value || value.getType() != type.getElementType() ||
        !keepsConstant(op, value))
      return failure();
    // The collective's own attributes (its pipeline stage) go with what
    // replaces it.
    DictionaryAttr attrs = op->getDiscardableAttrDictionary();
    auto empty = tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                         type.getElementType());
    empty->setDiscardableAttrs(attrs);
    Value scalar = arith::ConstantOp::create(rewriter, loc, value);
    auto fill = rewriter.replaceOpWithNewOp<linalg::FillOp>(op, scalar,
                                                            empty.getResult());
    fill->setDiscardableAttrs(attrs);
    return success();
  }

  /// Data movement keeps any constant; a reduction only what
  /// reductionKeeps says.
  static bool keepsConstant(CollectiveOp op, Attribute value) {
    if constexpr (std::is_same_v<CollectiveOp, shard::AllReduceOp> ||
                  std::is_same_v<CollectiveOp, shard::ReduceScatterOp>)
      return reductionKeeps(op.getReduction(), value);
    else
      return true;
  }
};

struct FoldInitCollectivesPass
    : autopar::impl::FoldInitCollectivesBase<FoldInitCollectivesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldInitCollective<shard::AllGatherOp>,
                 FoldInitCollective<shard::AllSliceOp>,
                 FoldInitCollective<shard::AllToAllOp>,
                 FoldInitCollective<shard::AllReduceOp>,
                 FoldInitCollective<shard::ReduceScatterOp>>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
