//===- ReplicateGraphIO.cpp - Whole inputs and outputs on every tp rank ---===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/Attributes.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace autopar {
#define GEN_PASS_DEF_REPLICATEGRAPHIO
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

struct ReplicateGraphIOPass
    : autopar::impl::ReplicateGraphIOBase<ReplicateGraphIOPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError("autopar-replicate-graph-io: no func.func @main");
      return signalPassFailure();
    }
    bool splitsSomething = false;
    main.walk([&](shard::ShardOp) { splitsSomething = true; });
    if (!splitsSomething) {
      for (shard::GridOp grid :
           llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
        grid.erase();
      return;
    }
    if (!module.lookupSymbol<shard::GridOp>("autopar_grid")) {
      module.emitError("autopar-replicate-graph-io: @main is annotated but "
                       "the module has no shard.grid @autopar_grid (run "
                       "autopar-plan first)");
      return signalPassFailure();
    }
    MLIRContext *ctx = module.getContext();
    OpBuilder b(ctx);
    // One empty entry, not none: see createSharding in PlanAnnotate.cpp.
    auto replicated = [&](Location loc) {
      return shard::ShardingOp::create(
                 b, loc, FlatSymbolRefAttr::get(ctx, "autopar_grid"),
                 ArrayRef<shard::GridAxesAttr>{
                     shard::GridAxesAttr::get(ctx, {})})
          .getResult();
    };
    b.setInsertionPointToStart(&main.getBody().front());
    for (BlockArgument arg : main.getArguments()) {
      if (main.getArgAttr(arg.getArgNumber(), autopar::attrs::kParameter))
        continue;
      // The input itself is whole; a user that needs it split slices it.
      auto annotated =
          shard::ShardOp::create(b, arg.getLoc(), arg, replicated(arg.getLoc()),
                                 /*annotate_for_users=*/false);
      arg.replaceAllUsesExcept(annotated.getResult(), annotated);
    }
    auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
    b.setInsertionPoint(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      auto annotated = shard::ShardOp::create(b, ret.getLoc(), operand.get(),
                                              replicated(ret.getLoc()),
                                              /*annotate_for_users=*/false);
      operand.set(annotated.getResult());
    }
  }
};

} // namespace
