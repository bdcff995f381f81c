//===- FoldTransposesIntoMatmuls.cpp - transposed GEMM operands as maps ---===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace autopar {
#define GEN_PASS_DEF_FOLDTRANSPOSESINTOMATMULS
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// The permutation `value` is of its source when it is a pure transpose
/// (`result[r] = source[perm(r)]`, element types equal), with the source;
/// else nothing.
std::optional<std::pair<Value, SmallVector<int64_t>>> transposeOf(Value value) {
  if (auto transpose = value.getDefiningOp<linalg::TransposeOp>())
    return std::make_pair(transpose.getInput(),
                          llvm::to_vector(transpose.getPermutation()));
  auto generic = value.getDefiningOp<linalg::GenericOp>();
  if (!generic || generic.getNumDpsInputs() != 1 ||
      generic.getNumDpsInits() != 1 || generic.getNumReductionLoops() != 0)
    return std::nullopt;
  Block &body = generic.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (body.getOperations().size() != 1 ||
      yield.getOperand(0) != body.getArgument(0))
    return std::nullopt;
  Value source = generic.getDpsInputOperand(0)->get();
  if (getElementTypeOrSelf(source.getType()) !=
      getElementTypeOrSelf(value.getType()))
    return std::nullopt;
  AffineMap in = generic.getMatchingIndexingMap(generic.getDpsInputOperand(0));
  AffineMap out = generic.getMatchingIndexingMap(generic.getDpsInitOperand(0));
  if (!in.isPermutation() || !out.isPermutation())
    return std::nullopt;
  // Result index r is loop point out^-1(r), which reads source at in(...).
  AffineMap resultToSource = in.compose(inversePermutation(out));
  SmallVector<int64_t> perm;
  for (AffineExpr e : resultToSource.getResults())
    perm.push_back(cast<AffineDimExpr>(e).getPosition());
  return std::make_pair(source, perm);
}

/// Swaps the last two results of `map` (the matrix dims of an operand).
AffineMap swapLastTwo(AffineMap map) {
  SmallVector<AffineExpr> results(map.getResults());
  std::swap(results[results.size() - 1], results[results.size() - 2]);
  return AffineMap::get(map.getNumDims(), 0, results, map.getContext());
}

/// For linalg.matmul (rank 2) and linalg.batch_matmul (rank 3, batch first).
template <typename OpTy, int Rank>
struct FoldTransposedOperand : OpRewritePattern<OpTy> {
  using OpRewritePattern<OpTy>::OpRewritePattern;
  LogicalResult matchAndRewrite(OpTy op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics())
      return failure();
    // The transposes that swap exactly the two matrix dims.
    SmallVector<int64_t> swapped;
    for (int64_t i = 0; i < Rank; ++i)
      swapped.push_back(i);
    std::swap(swapped[Rank - 1], swapped[Rank - 2]);
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    bool changed = false;
    SmallVector<Value> inputs(op.getDpsInputs());
    for (int i : {0, 1}) {
      auto transpose = transposeOf(inputs[i]);
      if (!transpose || transpose->second != swapped ||
          maps[i].getNumResults() != Rank)
        continue;
      inputs[i] = transpose->first;
      maps[i] = swapLastTwo(maps[i]);
      changed = true;
    }
    if (!changed)
      return failure();
    rewriter.modifyOpInPlace(op, [&] {
      op->setOperand(0, inputs[0]);
      op->setOperand(1, inputs[1]);
      op->setAttr("indexing_maps", rewriter.getAffineMapArrayAttr(maps));
    });
    return success();
  }
};

struct FoldTransposesIntoMatmulsPass
    : autopar::impl::FoldTransposesIntoMatmulsBase<
          FoldTransposesIntoMatmulsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldTransposedOperand<linalg::MatmulOp, 2>,
                 FoldTransposedOperand<linalg::BatchMatmulOp, 3>>(
        &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
