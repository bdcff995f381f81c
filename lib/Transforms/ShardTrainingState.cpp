//===- ShardTrainingState.cpp - Optimizer states laid out as parameters ---===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/Attributes.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/StringMap.h"

namespace autopar {
#define GEN_PASS_DEF_SHARDTRAININGSTATE
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

constexpr llvm::StringLiteral kGrid = "autopar_grid";

/// The name an argument's update carries (`autopar.update`): a parameter's
/// name, or `<parameter>.<role>` for an optimizer state; "" for others.
std::string updateKey(func::FuncOp main, unsigned i) {
  if (auto name =
          main.getArgAttrOfType<StringAttr>(i, autopar::attrs::kParameter))
    return name.str();
  auto of = main.getArgAttrOfType<StringAttr>(i, autopar::attrs::kStateOf);
  auto role =
      main.getArgAttrOfType<StringAttr>(i, autopar::attrs::kOptimizerState);
  return of && role ? (of.getValue() + "." + role.getValue()).str() : "";
}

/// Tensors that shard-partition annotates (it ignores scalars and rank 0).
bool isShardable(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getRank() > 0;
}

/// The result annotation `arg`'s users read, if it has one.
shard::ShardOp argumentAnnotation(BlockArgument arg) {
  for (Operation *user : arg.getUsers())
    if (auto shard = dyn_cast<shard::ShardOp>(user);
        shard && !shard.getAnnotateForUsers())
      return shard;
  return {};
}

struct ShardTrainingStatePass
    : autopar::impl::ShardTrainingStateBase<ShardTrainingStatePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError("autopar-shard-training-state: no func.func @main");
      return signalPassFailure();
    }
    if (!module.lookupSymbol<shard::GridOp>(kGrid))
      return;
    // Rank-0 tensors are never partitioned, and upstream propagation
    // (release 22) fails on an annotated one that a data-parallel step
    // reads again (the loss it sums over micro-batches): their annotations
    // go (autopar-unify-result-annotations gives each its one after
    // propagation).
    module.walk([](shard::ShardOp shard) {
      if (isShardable(shard.getType()))
        return;
      shard.getResult().replaceAllUsesWith(shard.getSrc());
      shard.erase();
    });
    MLIRContext *ctx = module.getContext();
    OpBuilder b(ctx);
    Block &body = main.getBody().front();
    b.setInsertionPointToStart(&body);
    // One empty entry, not none: see createSharding in PlanAnnotate.cpp.
    auto replicated = [&](Location loc) {
      return shard::ShardingOp::create(b, loc,
                                       FlatSymbolRefAttr::get(ctx, kGrid),
                                       ArrayRef<shard::GridAxesAttr>{
                                           shard::GridAxesAttr::get(ctx, {})})
          .getResult();
    };
    // Every user of `arg` reads `annotation`.
    auto readThrough = [](BlockArgument arg, shard::ShardOp annotation) {
      arg.replaceAllUsesExcept(annotation.getResult(), annotation);
    };

    // The annotation a callee (a data-parallel replica's forward and
    // backward, outlined by autopar-accumulate-gradients) reads `arg` with,
    // directly or through the micro-batch loop that carries it (BatchNorm's
    // running statistics go from one micro-batch to the next).
    auto calleeSharding = [&](BlockArgument arg) -> Value {
      SmallVector<Value> worklist{arg};
      while (!worklist.empty()) {
        Value value = worklist.pop_back_val();
        for (OpOperand &use : value.getUses()) {
          if (auto loop = dyn_cast<scf::ForOp>(use.getOwner())) {
            if (BlockArgument carried = loop.getTiedLoopRegionIterArg(&use))
              worklist.push_back(carried);
            continue;
          }
          auto call = dyn_cast<func::CallOp>(use.getOwner());
          auto callee =
              call ? module.lookupSymbol<func::FuncOp>(call.getCallee())
                   : func::FuncOp();
          if (callee && use.getOperandNumber() < callee.getNumArguments())
            if (shard::ShardOp annotation = argumentAnnotation(
                    callee.getArgument(use.getOperandNumber())))
              return b.clone(*annotation.getSharding().getDefiningOp())
                  ->getResult(0);
        }
      }
      return {};
    };

    // Parameters first: their annotations are the plan's.
    llvm::StringMap<Value> shardingOf;
    llvm::StringMap<RankedTensorType> typeOf;
    for (BlockArgument arg : main.getArguments()) {
      unsigned i = arg.getArgNumber();
      if (!main.getArgAttr(i, autopar::attrs::kParameter) || arg.use_empty() ||
          !isShardable(arg.getType()))
        continue;
      shard::ShardOp annotation = argumentAnnotation(arg);
      if (!annotation) {
        Value sharding = calleeSharding(arg);
        annotation = shard::ShardOp::create(b, arg.getLoc(), arg,
                                            sharding ? sharding
                                                     : replicated(arg.getLoc()),
                                            /*annotate_for_users=*/false);
      }
      readThrough(arg, annotation);
      shardingOf[updateKey(main, i)] = annotation.getSharding();
      typeOf[updateKey(main, i)] = cast<RankedTensorType>(arg.getType());
    }
    // Then the optimizer states (as their parameter when they have its
    // shape), the step and the inputs (whole).
    for (BlockArgument arg : main.getArguments()) {
      unsigned i = arg.getArgNumber();
      if (main.getArgAttr(i, autopar::attrs::kParameter) || arg.use_empty() ||
          !isShardable(arg.getType()) || argumentAnnotation(arg))
        continue;
      Value sharding;
      if (auto of =
              main.getArgAttrOfType<StringAttr>(i, autopar::attrs::kStateOf)) {
        Value param = shardingOf.lookup(of.getValue());
        if (param && typeOf.lookup(of.getValue()) == arg.getType())
          sharding = b.clone(*param.getDefiningOp())->getResult(0);
      }
      if (!sharding)
        sharding = replicated(arg.getLoc());
      auto annotation = shard::ShardOp::create(b, arg.getLoc(), arg, sharding,
                                               /*annotate_for_users=*/false);
      readThrough(arg, annotation);
      if (std::string key = updateKey(main, i); !key.empty())
        shardingOf[key] = sharding;
    }

    // Each update leaves as the argument it replaces; the rest whole.
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    b.setInsertionPoint(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      unsigned k = operand.getOperandNumber();
      if (!isShardable(operand.get().getType()))
        continue;
      Value sharding;
      if (auto update =
              main.getResultAttrOfType<StringAttr>(k, autopar::attrs::kUpdate))
        sharding = shardingOf.lookup(update.getValue());
      // An annotated result stays as annotated unless it updates an
      // argument laid out otherwise: a forward's state (BatchNorm's running
      // statistics) is annotated whole as a graph output, but it must leave
      // as its parameter is split, or the rank's block would not hold it.
      if (auto shard = operand.get().getDefiningOp<shard::ShardOp>();
          shard && !shard.getAnnotateForUsers() &&
          (!sharding ||
           shard::Sharding(shard.getSharding()) == shard::Sharding(sharding)))
        continue;
      if (!sharding)
        sharding = replicated(ret.getLoc());
      operand.set(shard::ShardOp::create(b, ret.getLoc(), operand.get(),
                                         sharding,
                                         /*annotate_for_users=*/false)
                      .getResult());
    }
  }
};

} // namespace
