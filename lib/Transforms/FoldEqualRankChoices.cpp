//===- FoldEqualRankChoices.cpp - Equal inits need no choice by rank ------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "ShardingModelsImpl.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace autopar {
#define GEN_PASS_DEF_FOLDEQUALRANKCHOICES
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// Each result of an scf.if that yields the same constant fill from both
/// branches: the one defined above the scf.if.
struct ChoiceOfEqualFills : OpRewritePattern<scf::IfOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(scf::IfOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getNumResults() == 0 || op.getElseRegion().empty())
      return failure();
    bool replaced = false;
    for (auto [i, result] : llvm::enumerate(op.getResults())) {
      Value then = op.thenYield().getOperand(i);
      Value other = op.elseYield().getOperand(i);
      if (result.use_empty() || then.getType() != other.getType() ||
          !autopar::detail::sameFillConstant(
              autopar::detail::fillConstant(then),
              autopar::detail::fillConstant(other)))
        continue;
      auto above = [&](Value v) {
        return !op->isAncestor(v.getParentRegion()->getParentOp());
      };
      Value outer = above(then) ? then : above(other) ? other : Value();
      if (!outer)
        continue;
      rewriter.replaceAllUsesWith(result, outer);
      replaced = true;
    }
    return success(replaced);
  }
};

struct FoldEqualRankChoicesPass
    : autopar::impl::FoldEqualRankChoicesBase<FoldEqualRankChoicesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ChoiceOfEqualFills>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
