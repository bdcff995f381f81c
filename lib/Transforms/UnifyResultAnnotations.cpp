//===- UnifyResultAnnotations.cpp - One annotation per op result ----------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace autopar {
#define GEN_PASS_DEF_UNIFYRESULTANNOTATIONS
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

struct UnifyResultAnnotationsPass
    : autopar::impl::UnifyResultAnnotationsBase<UnifyResultAnnotationsPass> {
  void runOnOperation() override {
    // The grid the plan annotated with, for rank-0 results (none: nothing
    // to partition).
    auto module = getOperation()->getParentOfType<ModuleOp>();
    shard::GridOp gridOp =
        module ? module.lookupSymbol<shard::GridOp>("autopar_grid")
               : shard::GridOp();
    StringAttr grid = gridOp ? gridOp.getSymNameAttr() : StringAttr();
    getOperation().walk([&](Operation *op) {
      for (Value result : op->getResults()) {
        if (isa<shard::ShardOp, shard::ShardingOp>(op))
          continue;
        SmallVector<shard::ShardOp> annotations;
        for (Operation *user : result.getUsers())
          if (auto shard = dyn_cast<shard::ShardOp>(user);
              shard && shard.getSrc() == result && !shard.getAnnotateForUsers())
            annotations.push_back(shard);
        // A rank-0 tensor (a step's norm, learning rate or loss) is whole
        // on every rank; annotated so, a sum over split loops that makes
        // it is all-reduced.
        auto type = dyn_cast<RankedTensorType>(result.getType());
        if (annotations.empty() && type && type.getRank() == 0 &&
            !result.use_empty() && grid &&
            op->getParentOp() == getOperation()) {
          OpBuilder b(op->getContext());
          b.setInsertionPointAfter(op);
          MLIRContext *ctx = op->getContext();
          Value replicated = shard::ShardingOp::create(
                                 b, op->getLoc(), FlatSymbolRefAttr::get(grid),
                                 ArrayRef<shard::GridAxesAttr>{
                                     shard::GridAxesAttr::get(ctx, {})})
                                 .getResult();
          auto annotation =
              shard::ShardOp::create(b, op->getLoc(), result, replicated,
                                     /*annotate_for_users=*/false);
          result.replaceAllUsesExcept(annotation.getResult(), annotation);
          continue;
        }
        if (annotations.size() < 2)
          continue;
        // The earliest in the block dominates the others' users.
        shard::ShardOp first = annotations.front();
        for (shard::ShardOp other : annotations)
          if (other->isBeforeInBlock(first))
            first = other;
        for (shard::ShardOp other : annotations) {
          if (other == first)
            continue;
          other.getResult().replaceAllUsesWith(first.getResult());
          other.erase();
        }
      }
    });
  }
};

} // namespace
