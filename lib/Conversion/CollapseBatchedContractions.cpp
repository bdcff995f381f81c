//===- CollapseBatchedContractions.cpp - N-D batch loops to batch_matmul --===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace autopar {
#define GEN_PASS_DEF_COLLAPSEBATCHEDCONTRACTIONS
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// The maps of C[b..., m, n] += A[b..., m, k] * B[b..., k, n] with `batch`
/// leading batch loops.
SmallVector<AffineMap> batchedMatmulMaps(MLIRContext *ctx, int64_t batch) {
  int64_t loops = batch + 3;
  SmallVector<AffineExpr> b;
  for (int64_t i = 0; i < batch; ++i)
    b.push_back(getAffineDimExpr(i, ctx));
  auto map = [&](int64_t r, int64_t c) {
    SmallVector<AffineExpr> e(b);
    e.push_back(getAffineDimExpr(r, ctx));
    e.push_back(getAffineDimExpr(c, ctx));
    return AffineMap::get(loops, 0, e, ctx);
  };
  return {map(batch, batch + 2), map(batch + 2, batch + 1),
          map(batch, batch + 1)};
}

/// The body is `yield out + a * b` (float or integer).
bool isMultiplyAdd(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  if (body.getOperations().size() != 3)
    return false;
  Operation *mul = &body.front();
  Operation *add = mul->getNextNode();
  if (!isa<arith::MulFOp, arith::MulIOp>(mul) ||
      !isa<arith::AddFOp, arith::AddIOp>(add))
    return false;
  Value a = body.getArgument(0), b = body.getArgument(1),
        c = body.getArgument(2);
  bool mulOk = (mul->getOperand(0) == a && mul->getOperand(1) == b);
  bool addOk =
      (add->getOperand(0) == c && add->getOperand(1) == mul->getResult(0)) ||
      (add->getOperand(1) == c && add->getOperand(0) == mul->getResult(0));
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  return mulOk && addOk && yield.getNumOperands() == 1 &&
         yield.getOperand(0) == add->getResult(0);
}

struct CollapseBatchedContraction : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() || op.getNumDpsInputs() != 2 ||
        op.getNumDpsInits() != 1)
      return failure();
    int64_t loops = op.getNumLoops();
    int64_t batch = loops - 3;
    if (batch < 2)
      return failure();
    if (op.getIndexingMapsArray() !=
            batchedMatmulMaps(op.getContext(), batch) ||
        !isMultiplyAdd(op))
      return failure();
    auto reassociation = [&]() {
      SmallVector<ReassociationIndices> groups(1);
      for (int64_t i = 0; i < batch; ++i)
        groups[0].push_back(i);
      groups.push_back({batch});
      groups.push_back({batch + 1});
      return groups;
    }();
    Location loc = op.getLoc();
    auto collapse = [&](Value v) {
      return tensor::CollapseShapeOp::create(rewriter, loc, v, reassociation)
          .getResult();
    };
    Value a = collapse(op.getDpsInputs()[0]);
    Value b = collapse(op.getDpsInputs()[1]);
    Value c = collapse(op.getDpsInits()[0]);
    Value bmm = linalg::BatchMatmulOp::create(rewriter, loc, ValueRange{a, b},
                                              ValueRange{c})
                    .getResult(0);
    rewriter.replaceOpWithNewOp<tensor::ExpandShapeOp>(
        op, op.getResultTypes()[0], bmm, reassociation);
    return success();
  }
};

struct CollapseBatchedContractionsPass
    : autopar::impl::CollapseBatchedContractionsBase<
          CollapseBatchedContractionsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<CollapseBatchedContraction>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
