//===- PlanAnnotate.cpp - The plan as shard dialect annotations -----------===//
//
// Writes the chosen plan into the module so that upstream
// `sharding-propagation` and `shard-partition` can partition it: a grid of
// shape dp x tp, the batch of every activation split over dp (where a
// reshape merges it inside another dim, as torch's attention does with
// [seq * batch, hidden], that tensor is gathered over dp), each parameter's
// split over tp as its consumer needs it, and each split op's result
// sharding. Pipeline stages are `autopar.stage` attributes.
//
//===----------------------------------------------------------------------===//

#include "autopar/Transforms/PlanAnnotate.h"
#include "autopar/Dialect/Attributes.h"
#include "autopar/Transforms/Embedding.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
namespace autopar {

static constexpr llvm::StringLiteral kGridName = "autopar_grid";

/// A `shard.sharding` splitting tensor dim `tpDim` over grid axis 1 (tp) and
/// dim `dpDim` over axis 0 (dp); -1: none. On a dim split both ways, dp is
/// the major axis (the batch is the outer factor of a dim that holds it).
static Value createSharding(OpBuilder &b, Location loc, int64_t rank, int tpDim,
                            int dpDim) {
  SmallVector<SmallVector<int16_t>> axes(std::max<int64_t>(rank, 0));
  if (dpDim >= 0 && dpDim < rank)
    axes[dpDim].push_back(0);
  if (tpDim >= 0 && tpDim < rank)
    axes[tpDim].push_back(1);
  // Trailing empty entries are dropped, as the shard dialect prints them,
  // but one stays: upstream's defaultGetShardingOption (release 22) takes an
  // operand sharding without entries (`split_axes = []`) for "no sharding
  // known" and leaves the op unannotated (and `[]` does not parse back).
  while (axes.size() > 1 && axes.back().empty())
    axes.pop_back();
  SmallVector<shard::GridAxesAttr> attrs;
  for (auto &a : axes)
    attrs.push_back(shard::GridAxesAttr::get(b.getContext(), a));
  return shard::ShardingOp::create(
             b, loc, FlatSymbolRefAttr::get(b.getContext(), kGridName), attrs)
      .getResult();
}

/// Gives each tensor parameter of `main` one annotation that all its users
/// read, as shard-partition requires of block arguments: the split its users
/// were annotated with when they agree (each rank then holds only its block),
/// replicated otherwise (slicing a whole tensor is free; gathering a split
/// one is not).
static void annotateParameters(func::FuncOp main) {
  OpBuilder b(main.getContext());
  b.setInsertionPointToStart(&main.getBody().front());
  for (BlockArgument arg : main.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!type || type.getRank() == 0 ||
        !main.getArgAttr(arg.getArgNumber(), attrs::kParameter) ||
        arg.use_empty())
      continue;
    Value sharding;
    for (Operation *user : arg.getUsers()) {
      auto shard = dyn_cast<shard::ShardOp>(user);
      Value s =
          shard && shard.getAnnotateForUsers() ? shard.getSharding() : Value();
      if (!s || (sharding && shard::Sharding(s) != shard::Sharding(sharding))) {
        sharding = Value();
        break;
      }
      sharding = s;
    }
    Value def = sharding
                    ? b.clone(*sharding.getDefiningOp())->getResult(0)
                    : createSharding(b, arg.getLoc(), type.getRank(), -1, -1);
    auto annotated = shard::ShardOp::create(b, arg.getLoc(), arg, def,
                                            /*annotate_for_users=*/false);
    arg.replaceAllUsesExcept(annotated.getResult(), annotated);
  }
}

void annotateModuleWithPlan(ModuleOp module, const PlanResult &result) {
  const PlanCandidate &best = result.best;
  MLIRContext *ctx = module.getContext();
  ctx->getOrLoadDialect<shard::ShardDialect>();
  OpBuilder b(ctx);
  // A program of one data-parallel replica may already reduce over the
  // replicas on axis 0 (BatchNorm's shared statistics): the grid keeps that
  // axis's size when the plan is the replica's own (dp = 1).
  int64_t dpAxis = best.dp;
  if (auto existing = module.lookupSymbol<shard::GridOp>(kGridName)) {
    if (best.dp == 1 && !existing.getShape().empty())
      dpAxis = existing.getShape().front();
    existing.erase();
  }
  // After the erase: an insertion point before the old grid (the module's
  // first op) would dangle.
  b.setInsertionPointToStart(module.getBody());
  shard::GridOp::create(b, module.getLoc(), kGridName,
                        ArrayRef<int64_t>{dpAxis, best.tp});
  module->setAttr(
      "autopar.plan",
      b.getDictionaryAttr({
          b.getNamedAttr("dp", b.getI64IntegerAttr(best.dp)),
          b.getNamedAttr("tp", b.getI64IntegerAttr(best.tp)),
          b.getNamedAttr("pp", b.getI64IntegerAttr(best.pp)),
          b.getNamedAttr("zero_stage", b.getI64IntegerAttr(best.zeroStage)),
          b.getNamedAttr("micro_batch_size",
                         b.getI64IntegerAttr(best.microBatchSize)),
          b.getNamedAttr("num_micro_batches",
                         b.getI64IntegerAttr(best.numMicroBatches)),
      }));

  for (auto [op, stage] : result.opStages)
    op->setAttr(attrs::kStage, b.getI64IntegerAttr(stage));

  // Data parallelism splits the batch of every activation over axis 0 (the
  // graph inputs' dim 0, and wherever the batch is the outer factor of a
  // dim further on), so the annotated program is the whole plan.
  auto main = module.lookupSymbol<func::FuncOp>("main");
  bool annotates = main && (best.tp > 1 || best.dp > 1);
  llvm::DenseMap<Value, int> dpDims;
  if (main && best.dp > 1)
    dpDims = findBatchDims(main);
  // The dp dim of `v`, looking through annotations; -1 without dp.
  auto dpDimOf = [&](Value v) -> int {
    while (auto shard = v.getDefiningOp<shard::ShardOp>())
      v = shard.getSrc();
    auto it = dpDims.find(v);
    return it == dpDims.end() ? -1 : it->second;
  };
  if (main && best.dp > 1) {
    b.setInsertionPointToStart(&main.getBody().front());
    for (BlockArgument arg : main.getArguments()) {
      if (!main.getArgAttr(arg.getArgNumber(), attrs::kInput))
        continue;
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      if (!type || type.getRank() == 0)
        continue;
      Value s = createSharding(b, arg.getLoc(), type.getRank(), -1, 0);
      auto annotated = shard::ShardOp::create(b, arg.getLoc(), arg, s,
                                              /*annotate_for_users=*/true);
      arg.replaceAllUsesExcept(annotated.getResult(), annotated);
    }
  }

  // Lookups read their table inside their body, where no sharding reaches:
  // make it an operand. (The decisions name the ops they replace.)
  llvm::DenseMap<Operation *, Operation *> raised;
  if (annotates) {
    SmallVector<Operation *> lookups;
    main.walk([&](linalg::GenericOp op) {
      if (matchEmbeddingLookup(op))
        lookups.push_back(op);
    });
    for (Operation *op : lookups) {
      Value old = op->getResult(0);
      int dim = dpDimOf(old);
      raised[op] = raiseEmbeddingLookup(op);
      if (dim >= 0)
        dpDims[raised[op]->getResult(0)] = dim;
    }
  }

  // Every op the plan decided on: the operands whose sharding the plan
  // tracks (parameters and the results of ops annotated before it) as it
  // reads them, and its result as it leaves it. Nothing is left for
  // sharding-propagation to choose, so the partitioned program moves the
  // bytes the planner predicted. A partial sum leaves replicated:
  // shard-partition all-reduces it inside the op (and
  // autopar-lower-collectives-to-runtime turns an all-reduce that is then
  // sliced into a reduce-scatter).
  auto annotatable = [](Value v) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return type && type.getRank() > 0;
  };
  auto isParameter = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner()->getParentOp() == main &&
           main.getArgAttr(arg.getArgNumber(), attrs::kParameter);
  };
  auto isPlanned = [](Value v) {
    auto shard = v.getDefiningOp<shard::ShardOp>();
    return shard && !shard.getAnnotateForUsers();
  };
  for (const OpDecision &d : result.decisions) {
    if (!annotates)
      break;
    Operation *op = raised.lookup(d.op) ? raised.lookup(d.op) : d.op;
    b.setInsertionPoint(op);
    for (auto [k, operand] : llvm::enumerate(op->getOperands())) {
      if (k >= d.operandShardings.size() || !annotatable(operand) ||
          !(isParameter(operand) || isPlanned(operand)))
        continue;
      auto type = cast<RankedTensorType>(operand.getType());
      Value s = createSharding(b, op->getLoc(), type.getRank(),
                               d.operandShardings[k], dpDimOf(operand));
      auto annotated = shard::ShardOp::create(b, op->getLoc(), operand, s,
                                              /*annotate_for_users=*/true);
      op->setOperand(k, annotated.getResult());
    }
    if (op->getNumResults() != 1 || !annotatable(op->getResult(0)))
      continue;
    Value res = op->getResult(0);
    b.setInsertionPointAfter(op);
    int dpDim = dpDimOf(res);
    Value s = createSharding(b, op->getLoc(),
                             cast<RankedTensorType>(res.getType()).getRank(),
                             d.resultSharding, dpDim);
    auto annotated = shard::ShardOp::create(b, op->getLoc(), res, s,
                                            /*annotate_for_users=*/false);
    res.replaceAllUsesExcept(annotated.getResult(), annotated);
    // Read after its segment with another sharding: converted once, where
    // the segment ends, as the planner counts it (not once per reader).
    if (!d.segmentLast || d.leavingSharding == std::max(d.resultSharding, -1))
      continue;
    Operation *last = raised.lookup(d.segmentLast)
                          ? raised.lookup(d.segmentLast)
                          : d.segmentLast;
    Value leaving = createSharding(
        b, op->getLoc(), cast<RankedTensorType>(res.getType()).getRank(),
        d.leavingSharding, dpDim);
    auto converted = shard::ShardOp::create(b, op->getLoc(), annotated, leaving,
                                            /*annotate_for_users=*/false);
    annotated.getResult().replaceUsesWithIf(
        converted.getResult(), [&](OpOperand &use) {
          Operation *user = use.getOwner();
          return user != converted && user->getBlock() == last->getBlock() &&
                 last->isBeforeInBlock(user);
        });
  }
  if (annotates)
    annotateParameters(main);
}

llvm::Error assignPipelineStages(func::FuncOp main, const PlanCandidate &plan) {
  auto segments = segmentOps(main);
  if (failed(segments))
    return llvm::createStringError("cannot analyze @main for pipeline stages");
  int64_t planned =
      plan.stages.empty() ? 0 : plan.stages.back().lastSegment + 1;
  if (int64_t(segments->size()) != planned)
    return llvm::createStringError(llvm::formatv(
        "the program for one micro-batch cuts into {0} segments, but the plan "
        "was made for {1}; pipeline stages cannot be mapped onto it",
        segments->size(), planned));
  Builder b(main.getContext());
  for (auto [k, stage] : llvm::enumerate(plan.stages))
    for (int64_t s = stage.firstSegment; s <= stage.lastSegment; ++s)
      for (Operation *op : (*segments)[s])
        op->setAttr(attrs::kStage, b.getI64IntegerAttr(k));
  return llvm::Error::success();
}

} // namespace autopar
