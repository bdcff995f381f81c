//===- TensorParallel.cpp - A program partitioned over a tp group ---------===//

#include "autopar/Driver/TensorParallel.h"
#include "autopar/Conversion/Passes.h"
#include "autopar/Dialect/Attributes.h"
#include "autopar/Target/LoweringPasses.h"
#include "autopar/Transforms/Passes.h"
#include "autopar/Transforms/PlanAnnotate.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
namespace autopar {

PlanRequest tensorParallelGroupRequest(const PlanRequest &request, int64_t tp) {
  PlanRequest group = request;
  group.cluster.nodes = 1;
  group.cluster.gpusPerNode = tp;
  group.pins = {};
  group.pins.dp = 1;
  group.pins.tp = tp;
  group.pins.pp = 1;
  return group;
}

std::unique_ptr<Pass> createLocalTensorParallelPlan(int64_t tp) {
  AutoparPlanOptions plan;
  plan.cluster = "local:" + std::to_string(tp);
  plan.dp = 1;
  plan.tp = tp;
  plan.pp = 1;
  return createAutoparPlan(plan);
}

void addTensorParallelAnnotation(OpPassManager &pm,
                                 std::unique_ptr<Pass> planPass) {
  // Attention's fused QKV projection is planned as the parts a tp split
  // keeps together (autopar-merge-projection-parts undoes it).
  pm.addNestedPass<func::FuncOp>(createExposeProjectionParts());
  pm.addPass(std::move(planPass));
  pm.addPass(createReplicateGraphIO());
}

void addTensorParallelPartitioning(OpPassManager &pm) {
  OpPassManager &main = pm.nest<func::FuncOp>();
  main.addPass(shard::createShardingPropagation());
  main.addPass(createUnifyResultAnnotations());
  main.addPass(createCheckPartitionable());
  main.addPass(shard::createPartition());
  main.addPass(createFoldInitCollectives());
  main.addPass(createFoldEqualRankChoices());
  main.addPass(createLowerEmbeddings());
  main.addPass(createMergeProjectionParts());
}

void addCollectiveLowering(OpPassManager &pm) {
  pm.addPass(createLowerCollectivesToRuntime());
  pm.addPass(createCanonicalizerPass());
}

namespace {
struct TensorParallelPipelineOptions
    : public PassPipelineOptions<TensorParallelPipelineOptions> {
  Option<int64_t> tp{*this, "tp",
                     llvm::cl::desc("Ranks of the tensor-parallel group"),
                     llvm::cl::init(2)};
};
} // namespace

void registerTensorParallelPipeline() {
  PassPipelineRegistration<TensorParallelPipelineOptions>(
      "autopar-tp-partition-pipeline",
      "Plan @main for a tensor-parallel group of `tp` CPU ranks, annotate, "
      "partition and lower the collectives to runtime calls (what "
      "autopar-compile does for each replica or stage of a tp > 1 plan)",
      [](OpPassManager &pm, const TensorParallelPipelineOptions &options) {
        addTensorParallelAnnotation(pm,
                                    createLocalTensorParallelPlan(options.tp));
        addTensorParallelPartitioning(pm);
        addCollectiveLowering(pm);
      });
}

LogicalResult partitionTensorParallel(
    ModuleOp module, int64_t tp, const PlanRequest &request,
    std::vector<ArtifactArgument> &arguments,
    std::vector<CollectiveVolume> *predicted,
    llvm::function_ref<void(llvm::StringRef, ModuleOp)> dumpIR) {
  // One tp group of the request's devices, every other dimension pinned.
  PlanRequest group = tensorParallelGroupRequest(request, tp);

  MLIRContext *ctx = module.getContext();
  auto annotate = PassManager::on<ModuleOp>(ctx);
  applyPassManagerCLOptionsIfAny(annotate);
  addTensorParallelAnnotation(
      annotate, createAutoparPlanPass(group, [&](const PlanResult &plan) {
        if (predicted)
          *predicted = plan.best.collectives;
      }));
  if (failed(annotate.run(module)))
    return failure();
  dumpIR("annotated.mlir", module);
  // The whole shapes, as the parameters are read: after
  // autopar-expose-projection-parts gave a fused projection's parameters
  // their part dim.
  auto main = module.lookupSymbol<func::FuncOp>("main");
  llvm::SmallVector<llvm::SmallVector<int64_t>> global;
  for (Type t : main.getArgumentTypes())
    global.push_back(
        llvm::SmallVector<int64_t>(cast<RankedTensorType>(t).getShape()));
  auto partition = PassManager::on<ModuleOp>(ctx);
  applyPassManagerCLOptionsIfAny(partition);
  addTensorParallelPartitioning(partition);
  if (failed(partition.run(module)))
    return failure();
  dumpIR("partitioned.mlir", module);
  auto lower = PassManager::on<ModuleOp>(ctx);
  applyPassManagerCLOptionsIfAny(lower);
  addCollectiveLowering(lower);
  if (failed(lower.run(module)))
    return failure();

  // Each argument's local block: a parameter may be split (each rank loads
  // its block); inputs, activations and outputs must stay whole.
  main = module.lookupSymbol<func::FuncOp>("main");
  for (auto [i, type] : llvm::enumerate(main.getArgumentTypes())) {
    auto local = cast<RankedTensorType>(type).getShape();
    ArtifactArgument &arg = arguments[i];
    if (local == llvm::ArrayRef(global[i]))
      continue;
    for (int64_t d = 0; d < int64_t(local.size()); ++d)
      if (local[d] != global[i][d]) {
        if (arg.kind != ArtifactArgument::Kind::Parameter)
          return main.emitError("'")
                 << arg.name
                 << "' was split over tp; inputs and activations must stay "
                    "whole";
        arg.globalShape = global[i];
        arg.splitDim = d;
        arg.splitAxis = "tp";
        arg.shape.assign(local.begin(), local.end());
        break;
      }
  }
  for (auto [k, type] : llvm::enumerate(main.getResultTypes())) {
    ArtifactArgument &out = arguments[main.getNumArguments() + k];
    if (cast<RankedTensorType>(type).getShape() != llvm::ArrayRef(out.shape))
      return main.emitError("'")
             << out.name << "' is not whole after partitioning";
  }
  return success();
}

Value annotateWhole(OpBuilder &b, Location loc, Value v) {
  MLIRContext *ctx = b.getContext();
  // One empty entry, not none: see createSharding in PlanAnnotate.cpp.
  Value replicated =
      shard::ShardingOp::create(
          b, loc, FlatSymbolRefAttr::get(ctx, "autopar_grid"),
          ArrayRef<shard::GridAxesAttr>{shard::GridAxesAttr::get(ctx, {})})
          .getResult();
  return shard::ShardOp::create(b, loc, v, replicated,
                                /*annotate_for_users=*/false);
}

llvm::Error
partitionDifferentiated(ModuleOp module, func::FuncOp f, llvm::StringRef what,
                        llvm::function_ref<bool(unsigned)> resultMayBeBlock) {
  auto error = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  MLIRContext *ctx = module.getContext();
  auto shapesOf = [](TypeRange types) {
    SmallVector<SmallVector<int64_t>> shapes;
    for (Type t : types)
      shapes.emplace_back(cast<RankedTensorType>(t).getShape());
    return shapes;
  };
  auto wholeArgs = shapesOf(f.getArgumentTypes());
  auto wholeResults = shapesOf(f.getResultTypes());
  // Partitioning reads every argument through one annotation. One the
  // differentiated program no longer reads (the cotangent of an output no
  // parameter affects, a parameter of such an output), or reads without an
  // annotation (the labels autopar-add-cross-entropy-loss added after the
  // plan), is whole; so are the results that must stay whole.
  {
    Block &body = f.getBody().front();
    OpBuilder b = OpBuilder::atBlockBegin(&body);
    auto isShardable = [](Type t) {
      auto type = dyn_cast<RankedTensorType>(t);
      return type && type.getRank() > 0;
    };
    auto isAnnotation = [](Operation *op) {
      auto shard = dyn_cast_or_null<shard::ShardOp>(op);
      return shard && !shard.getAnnotateForUsers();
    };
    for (BlockArgument arg : f.getArguments()) {
      if (!isShardable(arg.getType()) ||
          llvm::any_of(arg.getUsers(), isAnnotation))
        continue;
      Value whole = annotateWhole(b, arg.getLoc(), arg);
      arg.replaceAllUsesExcept(whole, whole.getDefiningOp());
    }
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    b.setInsertionPoint(ret);
    // The sharding each parameter is read with, by name.
    llvm::StringMap<Value> parameterSharding;
    for (BlockArgument arg : f.getArguments())
      if (auto name = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                     attrs::kParameter))
        for (Operation *user : arg.getUsers())
          if (isAnnotation(user))
            parameterSharding[name.getValue()] =
                cast<shard::ShardOp>(user).getSharding();
    for (OpOperand &result : ret->getOpOperands()) {
      Value value = result.get();
      if (!isShardable(value.getType()))
        continue;
      auto annotation = value.getDefiningOp<shard::ShardOp>();
      if (annotation && annotation.getAnnotateForUsers())
        annotation = {};
      // The update of what the forward updates (BatchNorm's running
      // statistics) is annotated whole as a graph output, but it leaves as
      // its parameter is split, or the rank's block would not hold it.
      unsigned j = result.getOperandNumber();
      if (auto of = f.getResultAttrOfType<StringAttr>(j, attrs::kUpdate))
        if (Value sharding = parameterSharding.lookup(of.getValue());
            sharding &&
            (!annotation || shard::Sharding(annotation.getSharding()) !=
                                shard::Sharding(sharding))) {
          result.set(shard::ShardOp::create(
              b, ret.getLoc(), value,
              b.clone(*sharding.getDefiningOp())->getResult(0),
              /*annotate_for_users=*/false));
          continue;
        }
      if (!resultMayBeBlock(j) && !annotation)
        result.set(annotateWhole(b, ret.getLoc(), value));
    }
  }
  auto pm = PassManager::on<ModuleOp>(ctx);
  applyPassManagerCLOptionsIfAny(pm);
  addTensorParallelPartitioning(pm);
  if (failed(pm.run(module)))
    return error("partitioning " + what +
                 " over its tensor-parallel group failed (see the "
                 "diagnostics above)");
  // The collectives as they will run (as partitionTrainingStep).
  RewritePatternSet fold(ctx);
  populateCollectiveFoldPatterns(fold);
  if (failed(applyPatternsGreedily(module, std::move(fold))))
    return error("folding the collectives of " + what + " did not converge");
  Builder b(ctx);
  for (auto [i, shapes] :
       llvm::enumerate(llvm::zip(wholeArgs, shapesOf(f.getArgumentTypes())))) {
    auto &[whole, local] = shapes;
    if (whole == local)
      continue;
    SmallVector<int64_t> dims;
    for (size_t d = 0; d < whole.size(); ++d)
      if (whole[d] != local[d])
        dims.push_back(int64_t(d));
    auto parameter = f.getArgAttrOfType<StringAttr>(i, attrs::kParameter);
    if (!parameter || dims.size() != 1)
      return error("internal error: partitioning " + what +
                   " split its argument " + llvm::Twine(i) +
                   (parameter
                        ? " ('" + parameter.getValue() + "') along several dims"
                        : llvm::Twine(", which is not a parameter: what it "
                                      "receives must stay whole")));
    f.setArgAttr(i, attrs::kTensorParallelSplit,
                 b.getI64IntegerAttr(dims.front()));
  }
  for (auto [j, shapes] :
       llvm::enumerate(llvm::zip(wholeResults, shapesOf(f.getResultTypes())))) {
    auto &[whole, local] = shapes;
    if (whole != local && !resultMayBeBlock(unsigned(j)))
      return error("internal error: partitioning " + what +
                   " split its result " + llvm::Twine(j) +
                   ", which it sends or sums: it must stay whole");
  }
  return llvm::Error::success();
}

LogicalResult partitionTrainingStep(ModuleOp module,
                                    std::vector<TensorParallelSplit> &splits) {
  auto shapesOf = [](func::FuncOp main) {
    llvm::SmallVector<llvm::SmallVector<int64_t>> shapes;
    for (Type t : llvm::concat<const Type>(main.getArgumentTypes(),
                                           main.getResultTypes()))
      shapes.emplace_back(cast<RankedTensorType>(t).getShape());
    return shapes;
  };
  auto main = module.lookupSymbol<func::FuncOp>("main");
  if (!main)
    return module.emitError("the training step has no func.func @main");
  auto whole = shapesOf(main);
  // Gradient accumulation loops over micro-batches; shard-partition works
  // on one block, so the loop (a constant trip count) is unrolled, each
  // micro-batch a copy of the call.
  SmallVector<scf::ForOp> loops;
  main.walk([&](scf::ForOp loop) { loops.push_back(loop); });
  for (scf::ForOp loop : loops)
    if (failed(loopUnrollFull(loop)))
      return loop.emitError("the micro-batch loop of the training step "
                            "cannot be unrolled for tensor-parallel "
                            "partitioning (its trip count is not constant)");
  auto partition = PassManager::on<ModuleOp>(module.getContext());
  applyPassManagerCLOptionsIfAny(partition);
  // A data-parallel replica's step calls its forward and backward
  // (autopar-accumulate-gradients outlines them); shard-partition works on
  // one block, so the call is inlined first.
  partition.addPass(createInlinerPass());
  partition.addPass(createSymbolDCEPass());
  addTensorParallelPartitioning(partition);
  if (failed(partition.run(module)))
    return failure();
  // The collectives as they will run (stepCollectives counts them before
  // autopar-lower-collectives-to-runtime, which makes these rewrites first).
  RewritePatternSet fold(module.getContext());
  populateCollectiveFoldPatterns(fold);
  if (failed(applyPatternsGreedily(module, std::move(fold))))
    return module.emitError("folding the partitioned step's collectives "
                            "did not converge");
  main = module.lookupSymbol<func::FuncOp>("main");
  auto local = shapesOf(main);
  splits.assign(local.size(), TensorParallelSplit{});
  unsigned numArgs = main.getNumArguments();
  for (auto [i, shapes] : llvm::enumerate(llvm::zip(whole, local))) {
    auto &[global, mine] = shapes;
    if (global == mine)
      continue;
    // What a rank keeps from step to step may be a block; what the runtime
    // hands in or reads out (inputs, the loss, metrics) must be whole.
    bool state = i < numArgs
                     ? main.getArgAttr(i, attrs::kParameter) ||
                           main.getArgAttr(i, attrs::kOptimizerState)
                     : bool(main.getResultAttr(i - numArgs, attrs::kUpdate));
    llvm::SmallVector<int64_t> dims;
    for (int64_t d = 0; d < int64_t(global.size()); ++d)
      if (global[d] != mine[d])
        dims.push_back(d);
    if (!state || dims.size() != 1)
      return main.emitError()
             << (i < numArgs ? "argument " : "result ")
             << (i < numArgs ? i : i - numArgs)
             << (state ? " is split along several dims"
                       : " was split over tp; inputs, the loss and the "
                         "metrics must stay whole");
    splits[i].globalShape = global;
    splits[i].dim = dims.front();
  }
  return success();
}

} // namespace autopar
