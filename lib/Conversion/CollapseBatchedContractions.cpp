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

/// `value` itself, or the value an `arith.extf` in the body extends (a
/// mixed-precision contraction reads bf16 operands into f32 products).
Value throughExtension(Value value) {
  if (auto ext = value.getDefiningOp<arith::ExtFOp>())
    return ext.getIn();
  return value;
}

/// The body is `yield out + a * b` or `yield out + b * a` (float or
/// integer), with a and b the two inputs, each possibly extended to the
/// output's type first (`arith.extf`: linalg.batch_matmul casts its
/// operands to the result type the same way).
bool isMultiplyAdd(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (yield.getNumOperands() != 1)
    return false;
  Operation *add = yield.getOperand(0).getDefiningOp();
  if (!add || !isa<arith::AddFOp, arith::AddIOp>(add))
    return false;
  Value c = body.getArgument(2);
  Value product = add->getOperand(0) == c   ? add->getOperand(1)
                  : add->getOperand(1) == c ? add->getOperand(0)
                                            : Value();
  Operation *mul = product ? product.getDefiningOp() : nullptr;
  if (!mul || !isa<arith::MulFOp, arith::MulIOp>(mul))
    return false;
  Value a = body.getArgument(0), b = body.getArgument(1);
  Value x = throughExtension(mul->getOperand(0)),
        y = throughExtension(mul->getOperand(1));
  if (!((x == a && y == b) || (x == b && y == a)))
    return false;
  // Nothing else in the body: the mul, the add and at most two extensions.
  size_t extensions = (x != mul->getOperand(0)) + (y != mul->getOperand(1));
  return body.getOperations().size() == 3 + extensions;
}

/// How a generic contracts: C[b..., m, n] += A[b..., m|k, k|m] *
/// B[b..., k|n, n|k] over the leading batch loops b..., with A and B
/// possibly transposed (the adjoints of a batched matmul read their operands
/// that way).
struct BatchedContraction {
  int64_t batch;
  unsigned aInput, bInput; ///< which input is A (holds m) and which B
  bool transposeA, transposeB;
};

std::optional<BatchedContraction>
matchBatchedContraction(linalg::GenericOp op) {
  int64_t loops = op.getNumLoops();
  int64_t batch = loops - 3;
  if (batch < 1)
    return std::nullopt;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  auto dimsOf = [&](AffineMap map) -> std::optional<SmallVector<unsigned>> {
    if (map.getNumResults() != batch + 2 || !map.isProjectedPermutation())
      return std::nullopt;
    SmallVector<unsigned> dims;
    for (AffineExpr e : map.getResults())
      dims.push_back(cast<AffineDimExpr>(e).getPosition());
    for (int64_t i = 0; i < batch; ++i)
      if (dims[i] != i)
        return std::nullopt;
    return dims;
  };
  auto c = dimsOf(maps[2]), x = dimsOf(maps[0]), y = dimsOf(maps[1]);
  if (!c || !x || !y)
    return std::nullopt;
  unsigned m = (*c)[batch], n = (*c)[batch + 1];
  // k: the one loop C does not index; it must be the only reduction.
  std::optional<unsigned> k;
  for (unsigned d = batch; d < loops; ++d)
    if (d != m && d != n)
      k = d;
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  for (unsigned d = 0; d < loops; ++d)
    if ((d == *k) != (iterators[d] == utils::IteratorType::reduction))
      return std::nullopt;
  auto tail = [&](const SmallVector<unsigned> &dims) {
    return std::pair{dims[batch], dims[batch + 1]};
  };
  BatchedContraction result{batch, 0, 1, false, false};
  auto [x0, x1] = tail(*x);
  auto [y0, y1] = tail(*y);
  bool xHoldsM = x0 == m || x1 == m;
  if (!xHoldsM) {
    std::swap(x0, y0);
    std::swap(x1, y1);
    std::swap(result.aInput, result.bInput);
  }
  if (std::pair{x0, x1} == std::pair{m, *k})
    result.transposeA = false;
  else if (std::pair{x0, x1} == std::pair{*k, m})
    result.transposeA = true;
  else
    return std::nullopt;
  if (std::pair{y0, y1} == std::pair{*k, n})
    result.transposeB = false;
  else if (std::pair{y0, y1} == std::pair{n, *k})
    result.transposeB = true;
  else
    return std::nullopt;
  return result;
}

struct CollapseBatchedContraction : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() || op.getNumDpsInputs() != 2 ||
        op.getNumDpsInits() != 1 || !isMultiplyAdd(op))
      return failure();
    std::optional<BatchedContraction> match = matchBatchedContraction(op);
    if (!match)
      return failure();
    int64_t batch = match->batch;
    auto reassociation = [&]() {
      SmallVector<ReassociationIndices> groups(1);
      for (int64_t i = 0; i < batch; ++i)
        groups[0].push_back(i);
      groups.push_back({batch});
      groups.push_back({batch + 1});
      return groups;
    }();
    Location loc = op.getLoc();
    auto collapse = [&](Value v) -> Value {
      if (batch == 1)
        return v;
      return tensor::CollapseShapeOp::create(rewriter, loc, v, reassociation)
          .getResult();
    };
    Value a = collapse(op.getDpsInputs()[match->aInput]);
    Value b = collapse(op.getDpsInputs()[match->bInput]);
    Value c = collapse(op.getDpsInits()[0]);
    // linalg.batch_matmul's loops are (batch, m, n, k).
    MLIRContext *ctx = op.getContext();
    auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
    auto map = [&](AffineExpr r, AffineExpr col) {
      return AffineMap::get(4, 0, {d(0), r, col}, ctx);
    };
    SmallVector<Attribute> maps{
        AffineMapAttr::get(match->transposeA ? map(d(3), d(1))
                                             : map(d(1), d(3))),
        AffineMapAttr::get(match->transposeB ? map(d(2), d(3))
                                             : map(d(3), d(2))),
        AffineMapAttr::get(map(d(1), d(2)))};
    SmallVector<NamedAttribute> attrs;
    if (match->transposeA || match->transposeB)
      attrs.push_back(
          rewriter.getNamedAttr("indexing_maps", rewriter.getArrayAttr(maps)));
    Value bmm =
        linalg::BatchMatmulOp::create(rewriter, loc, TypeRange{c.getType()},
                                      ValueRange{a, b}, ValueRange{c}, attrs)
            .getResult(0);
    if (batch == 1) {
      rewriter.replaceOp(op, bmm);
      return success();
    }
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
