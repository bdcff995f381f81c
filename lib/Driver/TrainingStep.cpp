//===- TrainingStep.cpp - From an imported forward to a training artifact -===//
//
// See TrainingStep.h.
//
//===----------------------------------------------------------------------===//

#include "autopar/Driver/TrainingStep.h"
#include "autopar/Conversion/Passes.h"
#include "autopar/Dialect/Attributes.h"
#include "autopar/Driver/TensorParallel.h"

#include "autopar/Import/InferenceModel.h"
#include "autopar/Import/OnnxImporter.h"
#include "autopar/Import/WeightLocator.h"
#include "autopar/Target/Artifact.h"
#include "autopar/Target/CpuCodegen.h"
#include "autopar/Target/GpuCodegen.h"
#include "autopar/Target/LoweringPasses.h"
#include "autopar/Target/SharedLibrary.h"
#include "autopar/Transforms/Passes.h"
#include "autopar/Transforms/ZeroSharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <map>

using namespace mlir;

namespace autopar {

ArtifactTraining trainingDescription(llvm::ArrayRef<ArtifactArgument> step,
                                     const TrainingArtifactOptions &options) {
  ArtifactTraining t;
  t.loss = options.loss;
  for (const ArtifactArgument &arg : step)
    if (arg.kind == ArtifactArgument::Kind::Output)
      t.loss = arg.name;
  t.globalBatch = options.globalBatch;
  // Sequence models (integer [batch, seq] inputs such as token ids): tokens
  // per sample for the throughput line.
  for (const ArtifactArgument &arg : step)
    if (arg.kind == ArtifactArgument::Kind::Input && arg.shape.size() == 2 &&
        arg.dtype.rfind("int", 0) == 0) {
      t.tokensPerSample = arg.shape[1];
      break;
    }
  t.optimizer = options.config.optimizerJson();
  t.scheduler = options.config.schedulerJson();
  t.gradientClipping = options.config.gradientClipping;
  t.precision =
      options.config.precision.empty() ? "fp32" : options.config.precision;
  t.microBatches = options.microBatches;
  return t;
}

ApplyOptimizerOptions optimizerOptions(const TrainConfig &c) {
  ApplyOptimizerOptions o;
  o.optimizer = c.optimizer;
  o.lr = c.lr;
  o.momentum = c.momentum;
  o.dampening = c.dampening;
  o.nesterov = c.nesterov;
  o.weightDecay = c.weightDecay;
  o.beta1 = c.beta1;
  o.beta2 = c.beta2;
  o.eps = c.eps;
  o.clip = c.gradientClipping;
  o.schedule = c.schedule;
  o.warmupType = c.warmupType;
  o.warmupMinLr = c.warmupMinLr;
  o.warmupMaxLr = c.warmupMaxLr;
  o.warmupSteps = c.warmupSteps;
  o.totalSteps = c.totalSteps;
  o.warmupMinRatio = c.warmupMinRatio;
  o.cosMinRatio = c.cosMinRatio;
  return o;
}

std::string crossEntropyOutput(llvm::StringRef loss) {
  return loss.starts_with("cross-entropy:")
             ? loss.drop_front(llvm::StringRef("cross-entropy:").size()).str()
             : std::string();
}

bool addCrossEntropyLossPass(OpPassManager &pm, llvm::StringRef loss,
                             bool fused) {
  std::string output = crossEntropyOutput(loss);
  if (output.empty())
    return false;
  AddCrossEntropyLossOptions addLoss;
  addLoss.output = output;
  addLoss.fused = fused;
  pm.addPass(createAddCrossEntropyLoss(addLoss));
  return true;
}

namespace {

/// The scale fp16's first step uses: the static one, or the dynamic
/// scaler's 2^initial_scale_power.
double initialLossScale(const LossScaling &scaling) {
  return scaling.staticScale > 0 ? scaling.staticScale
                                 : std::ldexp(1.0, scaling.initialScalePower);
}

} // namespace

double lossScaleOf(const TrainingStepOptions &options) {
  if (options.config.precision != "fp16" || options.emitGradients)
    return 0;
  return initialLossScale(options.config.lossScaling);
}

bool dynamicLossScaleOf(const TrainingStepOptions &options) {
  return lossScaleOf(options) > 0 &&
         options.config.lossScaling.staticScale == 0;
}

void setLossScaling(ApplyOptimizerOptions &o,
                    const TrainingStepOptions &options) {
  const LossScaling &scaling = options.config.lossScaling;
  o.lossScale = lossScaleOf(options);
  o.dynamicLossScale = dynamicLossScaleOf(options);
  o.lossScaleWindow = scaling.window;
  o.hysteresis = scaling.hysteresis;
  o.consecutiveHysteresis = scaling.consecutiveHysteresis;
  o.minLossScale = scaling.minScale;
}

MixedPrecisionOptions
mixedPrecisionOptions(const TrainingStepOptions &options) {
  // The forward and backward store activations in the low type and round
  // parameters to it where GEMMs read them; the parameters (master
  // weights), the gradients and the optimizer stay f32, since the optimizer
  // is added after. CPU GEMM kernels are f32: they read the low-rounded
  // operands extended back; GPU GEMMs read them as they are.
  MixedPrecisionOptions mixed;
  mixed.type = options.config.precision == "fp16" ? LowPrecision::F16
                                                  : LowPrecision::BF16;
  mixed.keepParameters = true;
  mixed.f32Gemms = !options.lowPrecisionGemms;
  // As autocast: log-softmax, the losses and their mean in f32.
  mixed.f32LossHead = true;
  return mixed;
}

std::optional<llvm::json::Object>
lossScalingDescription(const TrainConfig &config) {
  if (config.precision != "fp16")
    return std::nullopt;
  const LossScaling &ls = config.lossScaling;
  return llvm::json::Object{
      {"dynamic", ls.staticScale == 0},
      {"initial_scale", initialLossScale(ls)},
      {"loss_scale_window", ls.window},
      {"hysteresis", ls.hysteresis},
      // A fixed scale never shrinks: its overflows are skipped, never an
      // error.
      {"min_loss_scale", ls.staticScale > 0 ? 0.0 : ls.minScale}};
}

void buildGradientPipeline(OpPassManager &pm,
                           const TrainingStepOptions &options) {
  bool tensorParallel = options.tensorParallel > 1;
  // The model's own cross-entropy (an imported SoftmaxCrossEntropyLoss),
  // fused as the loss --loss cross-entropy:OUTPUT adds is below; before a
  // tensor-parallel plan, which places the fused op (its positions, or its
  // classes as the vocabulary-parallel loss: PlanGraph.cpp).
  if (options.fuseCrossEntropy)
    pm.addNestedPass<func::FuncOp>(createFuseCrossEntropy());
  // Attention likewise, before a tensor-parallel plan, which places the
  // fused op (its batch or its heads split: PlanGraph.cpp).
  if (options.fuseAttention) {
    FuseAttentionOptions fuse;
    fuse.maxHeadDim = options.attentionMaxHeadDim;
    fuse.headDimMultiple = options.attentionHeadDimMultiple;
    pm.addNestedPass<func::FuncOp>(createFuseAttention(fuse));
  }
  // Tensor parallelism: the forward is planned and annotated for the group
  // before it is differentiated, so that each cotangent is laid out as its
  // value (autodiff's shard rule) and partitioning gives the backward
  // Megatron's conjugate collectives.
  if (tensorParallel) {
    pm.addPass(options.makePlanPass
                   ? options.makePlanPass()
                   : createLocalTensorParallelPlan(options.tensorParallel));
    pm.addPass(createReplicateGraphIO());
  }
  DifferentiateOptions differentiate;
  differentiate.loss = options.loss;
  differentiate.freeze.assign(options.freeze.begin(), options.freeze.end());
  // Under tp too: the loss reads the logits as the planner left them (a
  // column-parallel head's blocks of classes), and the fused op's sharding
  // model partitions it as the vocabulary-parallel loss.
  if (addCrossEntropyLossPass(pm, options.loss, options.fuseCrossEntropy))
    differentiate.loss = "loss";
  differentiate.phaseMarks = options.phaseMarks;
  differentiate.lossScale = lossScaleOf(options);
  differentiate.dynamicLossScale = dynamicLossScaleOf(options);
  pm.addPass(createDifferentiate(differentiate));
  if (options.recompute != "none") {
    // Before the micro-batch loop and ZeRO-3's gathers, which read the
    // forward and the backward apart.
    RematerializeOptions remat;
    remat.mode = options.recompute;
    pm.addPass(createRematerialize(remat));
  }
}

void buildUpdatePipeline(OpPassManager &pm,
                         const TrainingStepOptions &options) {
  bool tensorParallel = options.tensorParallel > 1;
  // Annotated for the group, not yet partitioned: the replicas' sums and
  // the optimizer work on whole tensors, partitioned afterwards.
  bool annotated = tensorParallel && !options.partitionedForTensorParallel;
  {
    // Also with one call per step: it sets Dropout's sample offset.
    AccumulateGradientsOptions accumulate;
    accumulate.microBatches = options.microBatches;
    accumulate.dataParallel = options.dataParallel;
    accumulate.zeroStage = options.zeroStage;
    // An annotated tensor-parallel step's gradients become blocks: one
    // all-reduce each (over dp) keeps them so, where a flat bucket would
    // gather them. A partitioned step's are blocks already.
    accumulate.bucket = !annotated;
    pm.addPass(createAccumulateGradients(accumulate));
  }
  if (!options.config.precision.empty())
    pm.addNestedPass<func::FuncOp>(
        createMixedPrecision(mixedPrecisionOptions(options)));
  if (!options.emitGradients) {
    ApplyOptimizerOptions o = optimizerOptions(options.config);
    setLossScaling(o, options);
    o.zeroStage = options.zeroStage;
    o.dataParallel = options.dataParallel;
    pm.addPass(createApplyOptimizer(o));
  }
  if (annotated && !options.emitGradients)
    pm.addPass(createShardTrainingState());
  // The replicas' sums become runtime all-reduces over dp.
  if (options.dataParallel > 1 && options.lowerCollectives && !tensorParallel)
    pm.addPass(createLowerCollectivesToRuntime());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void buildTrainingStepPipeline(OpPassManager &pm,
                               const TrainingStepOptions &options) {
  buildGradientPipeline(pm, options);
  buildUpdatePipeline(pm, options);
}

namespace {

struct TrainPipelineOptions : public PassPipelineOptions<TrainPipelineOptions> {
  Option<std::string> trainConfig{
      *this, "train-config",
      llvm::cl::desc("DeepSpeed JSON with the optimizer, schedule and "
                     "clipping (default: DeepSpeed's defaults)")};
  Option<std::string> loss{
      *this, "loss",
      llvm::cl::desc("The loss output, or cross-entropy:OUTPUT (default: "
                     "the only scalar float output)")};
  ListOption<std::string> freeze{
      *this, "freeze", llvm::cl::desc("Globs of parameters to keep fixed")};
  Option<bool> emitGradients{
      *this, "emit-gradients",
      llvm::cl::desc("Stop after the gradients (no optimizer)"),
      llvm::cl::init(false)};
  Option<int64_t> microBatches{
      *this, "micro-batches",
      llvm::cl::desc("Micro-batches per step, for a forward imported for "
                     "one micro-batch (gradient accumulation)"),
      llvm::cl::init(1)};
  Option<int64_t> dataParallel{
      *this, "data-parallel",
      llvm::cl::desc("Data-parallel replicas, for a forward imported for "
                     "one replica's share of the batch: the sums are "
                     "all-reduced over them"),
      llvm::cl::init(1)};
  Option<int64_t> zeroStage{
      *this, "zero-stage",
      llvm::cl::desc("ZeRO stage over the data-parallel replicas: 1 shards "
                     "the optimizer states, 2 also the gradients"),
      llvm::cl::init(0)};
  Option<int64_t> tensorParallel{
      *this, "tensor-parallel",
      llvm::cl::desc("Tensor-parallel ranks: plan the forward for a group "
                     "of `local:N`, differentiate the annotated program, "
                     "and partition the step"),
      llvm::cl::init(1)};
};

} // namespace

void registerTrainingStepPipeline() {
  PassPipelineRegistration<TrainPipelineOptions>(
      "autopar-train-pipeline",
      "The forward program to one training step: the loss (added if "
      "asked), its gradients, clipping, learning-rate schedule and update "
      "(as autopar-compile --mode train)",
      [](OpPassManager &pm, const TrainPipelineOptions &options) {
        TrainingStepOptions step;
        step.loss = options.loss;
        step.freeze.assign(options.freeze.begin(), options.freeze.end());
        step.emitGradients = options.emitGradients;
        step.microBatches = options.microBatches;
        step.dataParallel = options.dataParallel;
        step.zeroStage = options.zeroStage;
        if (!options.trainConfig.empty()) {
          auto parsed = readTrainConfig(options.trainConfig);
          if (!parsed) {
            // A pipeline builder cannot fail: the pipeline becomes one pass
            // that reports the error when it runs.
            pm.addPass(
                createReportErrorPass("autopar-train-pipeline: " +
                                      llvm::toString(parsed.takeError())));
            return;
          }
          step.config = std::move(*parsed);
        }
        step.tensorParallel = options.tensorParallel;
        buildTrainingStepPipeline(pm, step);
        if (step.tensorParallel > 1) {
          addTensorParallelPartitioning(pm);
          addCollectiveLowering(pm);
        }
      });
}

namespace {

/// Adds to `tally` the collectives of `block`, each counted `times`. An op
/// over axis 0 of @autopar_grid (dp x tp) is counted under "dp", over axis 1
/// under "tp".
void countCollectives(Block &block, double times, ModuleOp module,
                      CollectiveTally &tally) {
  auto bytes = [](Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    return double(type.getNumElements()) *
           double(type.getElementTypeBitWidth() / 8);
  };
  // The ranks an op's group spans, and the name of its axes.
  auto group = [&](FlatSymbolRefAttr gridName, ArrayRef<int16_t> axes) {
    auto grid = module.lookupSymbol<shard::GridOp>(gridName.getValue());
    double n = 1;
    std::string name;
    for (int16_t axis : axes) {
      if (grid && axis < int16_t(grid.getShape().size()))
        n *= double(grid.getShape()[axis]);
      name += (name.empty() ? "" : "x") +
              std::string(axis == 0   ? "dp"
                          : axis == 1 ? "tp"
                          : axis == 2 ? "pp"
                                      : "axis") +
              (axis > 2 ? std::to_string(axis) : "");
    }
    return std::pair{n, name.empty() ? std::string("dp") : name};
  };
  auto add = [&](const std::string &axis, llvm::StringRef name, double bus) {
    auto &[calls, busBytes] = tally[axis][name.str()];
    calls += times;
    busBytes += times * bus;
  };
  for (Operation &op : block) {
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      auto lb = getConstantIntValue(loop.getLowerBound());
      auto ub = getConstantIntValue(loop.getUpperBound());
      auto st = getConstantIntValue(loop.getStep());
      double trips =
          lb && ub && st && *st > 0 ? double((*ub - *lb + *st - 1) / *st) : 1;
      countCollectives(*loop.getBody(), times * trips, module, tally);
    } else if (auto call = dyn_cast<func::CallOp>(op)) {
      if (auto callee = module.lookupSymbol<func::FuncOp>(call.getCallee()))
        if (!callee.isExternal())
          countCollectives(callee.getBody().front(), times, module, tally);
    } else if (auto reduce = dyn_cast<shard::AllReduceOp>(op)) {
      auto [n, axis] = group(reduce.getGridAttr(), reduce.getGridAxes());
      add(axis, "all_reduce", bytes(reduce.getInput()) * 2 * (n - 1) / n);
    } else if (auto gather = dyn_cast<shard::AllGatherOp>(op)) {
      auto [n, axis] = group(gather.getGridAttr(), gather.getGridAxes());
      add(axis, "all_gather", bytes(gather.getResult()) * (n - 1) / n);
    } else if (auto scatter = dyn_cast<shard::ReduceScatterOp>(op)) {
      auto [n, axis] = group(scatter.getGridAttr(), scatter.getGridAxes());
      add(axis, "reduce_scatter", bytes(scatter.getInput()) * (n - 1) / n);
    } else if (auto toAll = dyn_cast<shard::AllToAllOp>(op)) {
      auto [n, axis] = group(toAll.getGridAttr(), toAll.getGridAxes());
      add(axis, "all_to_all", bytes(toAll.getInput()) * (n - 1) / n);
    }
  }
}

} // namespace

/// `main` returning only its result named `name`; false if it has none.
bool keepOnlyResult(func::FuncOp main, llvm::StringRef name) {
  auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
  for (unsigned i = 0; i < main.getNumResults(); ++i) {
    auto output = main.getResultAttrOfType<StringAttr>(i, attrs::kOutput);
    if (!output || output.getValue() != name)
      continue;
    DictionaryAttr dict = main.getResultAttrDict(i);
    Value value = ret.getOperand(i);
    OpBuilder b(ret);
    func::ReturnOp::create(b, ret.getLoc(), value);
    ret.erase();
    main.setType(FunctionType::get(main.getContext(), main.getArgumentTypes(),
                                   value.getType()));
    main.setAllResultAttrs(ArrayRef<DictionaryAttr>{dict});
    return true;
  }
  return false;
}

/// Data parallelism: every rank runs a program on its share of each input's
/// batch (the leading dim), with the parameters whole.
LogicalResult markDataParallelInputs(std::vector<ArtifactArgument> &arguments,
                                     int64_t dataParallel, std::string &error) {
  if (dataParallel <= 1)
    return success();
  for (ArtifactArgument &arg : arguments) {
    if (arg.kind != ArtifactArgument::Kind::Input)
      continue;
    if (arg.shape.empty()) {
      error = "input '" + arg.name + "' has no batch dim to split over " +
              std::to_string(dataParallel) + " data-parallel ranks";
      return failure();
    }
    arg.globalShape.assign(arg.shape.begin(), arg.shape.end());
    arg.globalShape[0] *= dataParallel;
    arg.splitDim = 0;
    arg.splitAxis = "dp";
  }
  return success();
}

/// ZeRO: each data-parallel rank holds block r (dim 0) of an optimizer
/// state whose shape is a block of its parameter's
/// (autopar-apply-optimizer's zero-stage), and under ZeRO-3 of the
/// parameters in \p blockParameters (`autopar.zero_blocks`); their updates
/// are the same blocks.
void markZeroShardedStates(std::vector<ArtifactArgument> &arguments,
                           int64_t dataParallel,
                           const llvm::StringSet<> &blockParameters) {
  if (dataParallel <= 1)
    return;
  llvm::StringMap<llvm::SmallVector<int64_t>> parameterShapes;
  for (ArtifactArgument &arg : arguments) {
    if (arg.kind != ArtifactArgument::Kind::Parameter)
      continue;
    // A block of a tensor-parallel block is marked with both splits
    // already (markTensorParallelBlocks).
    if (blockParameters.contains(arg.name) && arg.splitDim < 0) {
      arg.globalShape = arg.shape;
      arg.globalShape[0] *= dataParallel;
      arg.splitDim = 0;
      arg.splitAxis = "dp";
    }
    parameterShapes[arg.name] =
        arg.globalShape.empty() ? arg.shape : arg.globalShape;
  }
  // What each split state or parameter belongs to.
  llvm::StringMap<std::string> blockOf;
  for (const ArtifactArgument &arg : arguments)
    if (arg.kind == ArtifactArgument::Kind::Parameter &&
        blockParameters.contains(arg.name))
      blockOf[arg.name] = arg.name;
  for (ArtifactArgument &arg : arguments) {
    // A tensor-parallel block is its parameter's block already.
    if (arg.kind != ArtifactArgument::Kind::OptimizerState || arg.splitDim >= 0)
      continue;
    auto it = parameterShapes.find(arg.stateOf);
    if (it == parameterShapes.end() || it->second == arg.shape ||
        arg.shape.empty())
      continue;
    arg.globalShape = it->second;
    arg.splitDim = 0;
    arg.splitAxis = "dp";
    blockOf[arg.name] = arg.stateOf;
  }
  for (ArtifactArgument &arg : arguments) {
    if (arg.kind != ArtifactArgument::Kind::Update ||
        !blockOf.count(arg.updates) || arg.splitDim >= 0)
      continue;
    arg.globalShape = parameterShapes[blockOf[arg.updates]];
    arg.splitDim = 0;
    arg.splitAxis = "dp";
  }
}

/// The manifest's view of tensor parallelism (within a pipeline stage, or a
/// one-program step partitioned before its update): a parameter
/// marked `autopar.tp_split` is this rank's block of a tensor of \p tp
/// blocks along that dim (the runtime loads and checkpoints its block), and
/// so are the parameter's optimizer states and the updates of both. Under
/// ZeRO over \p dp replicas such a tensor may be cut again, dim 0 of its tp
/// block over dp (`autopar.zero_blocks` on a ZeRO-3 parameter; an optimizer
/// state or update of a block's shape): the manifest lists both splits.
void markTensorParallelBlocks(func::FuncOp main, int64_t tp, int64_t dp,
                              std::vector<ArtifactArgument> &arguments) {
  if (tp <= 1)
    return;
  // The global shape, the tp block's shape and the tp split dim of each
  // split tensor's parameter, by name.
  struct Split {
    llvm::SmallVector<int64_t> global, tpBlock;
    int64_t dim;
  };
  llvm::StringMap<Split> blocks;
  auto mark = [&](ArtifactArgument &arg, llvm::StringRef of) {
    auto it = blocks.find(of);
    if (it == blocks.end() || arg.splitDim >= 0)
      return;
    const Split &split = it->second;
    arg.globalShape = split.global;
    arg.splitDim = split.dim;
    arg.splitAxis = "tp";
    if (llvm::ArrayRef<int64_t>(arg.shape) != llvm::ArrayRef(split.tpBlock)) {
      arg.innerSplitDim = 0;
      arg.innerSplitAxis = "dp";
    }
  };
  for (unsigned i = 0; i < main.getNumArguments(); ++i) {
    auto dim =
        main.getArgAttrOfType<IntegerAttr>(i, attrs::kTensorParallelSplit);
    if (!dim)
      continue;
    ArtifactArgument &arg = arguments[i];
    Split split;
    split.dim = dim.getInt();
    split.tpBlock.assign(arg.shape.begin(), arg.shape.end());
    if (main.getArgAttr(i, attrs::kZeroBlocks))
      split.tpBlock[0] *= dp;
    split.global = split.tpBlock;
    split.global[split.dim] *= tp;
    blocks[arg.name] = split;
    mark(arg, arg.name);
  }
  // An optimizer state is split as its parameter, and an update as what it
  // updates.
  for (ArtifactArgument &arg : arguments)
    if (arg.kind == ArtifactArgument::Kind::OptimizerState)
      if (auto it = blocks.find(arg.stateOf); it != blocks.end()) {
        Split split = it->second;
        blocks[arg.name] = std::move(split);
        mark(arg, arg.name);
      }
  for (ArtifactArgument &arg : arguments)
    if (arg.kind == ArtifactArgument::Kind::Update)
      mark(arg, arg.updates);
}

llvm::StringSet<> zeroBlockParameters(func::FuncOp main) {
  llvm::StringSet<> blocks;
  for (unsigned i = 0; i < main.getNumArguments(); ++i)
    if (main.getArgAttr(i, attrs::kZeroBlocks))
      if (auto name = main.getArgAttrOfType<StringAttr>(i, attrs::kParameter))
        blocks.insert(name.getValue());
  return blocks;
}

/// Lowers a training artifact's program for its target (one CPU rank or one
/// GPU) and writes `<name>.so` (and, on a GPU, its cubins) into the
/// artifact's directory; returns the manifest's description of it.
FailureOr<ArtifactProgram>
lowerTrainingProgram(ModuleOp module, const TrainingArtifactOptions &o,
                     llvm::StringRef name,
                     std::vector<ArtifactArgument> arguments,
                     const std::string &llvmIRPath, std::string &error) {
  if (o.gpu ? failed(lowerToLLVMForGpu(module, *o.gpu))
            : failed(lowerToLLVMForCpu(module, o.fuseAttention))) {
    error = "lowering the " +
            (name == "eval" ? std::string("eval program")
                            : std::string("training step")) +
            " of " + o.modelPath + " to " +
            (o.gpu ? "GPU code for " + o.gpu->arch : "native code") +
            " failed (see the diagnostics above)";
    return failure();
  }
  std::vector<std::string> deviceCode;
  if (o.gpu) {
    auto written = writeDeviceCode(module, o.outputDir, name, o.gpu->arch);
    if (!written) {
      error = llvm::toString(written.takeError());
      return failure();
    }
    deviceCode = std::move(*written);
  }
  llvm::SmallString<256> soPath(o.outputDir);
  llvm::sys::path::append(soPath, name + ".so");
  SharedLibraryOptions codegen;
  codegen.cpu = o.targetCpu;
  codegen.llvmIRPath = llvmIRPath;
  if (failed(emitSharedLibrary(module, soPath, codegen, error)))
    return failure();
  return ArtifactProgram{name.str(), (name + ".so").str(), std::move(arguments),
                         std::move(deviceCode)};
}

namespace {

/// Why the eval program cannot read \p eval's parameters where the step
/// holds them: the first whose block differs, or "" when none does.
std::string parameterLayoutMismatch(ArrayRef<ArtifactArgument> eval,
                                    ArrayRef<ArtifactArgument> step) {
  auto describe = [](const ArtifactArgument &a) {
    std::string text = "[";
    for (auto [i, d] : llvm::enumerate(a.shape))
      text += (i ? ", " : "") + std::to_string(d);
    text += "]";
    if (a.splitDim >= 0)
      text += " split along dim " + std::to_string(a.splitDim) + " over " +
              a.splitAxis;
    if (a.innerSplitDim >= 0)
      text += ", then along dim " + std::to_string(a.innerSplitDim) + " over " +
              a.innerSplitAxis + " (ZeRO-3)";
    return text;
  };
  for (const ArtifactArgument &e : eval) {
    if (e.kind != ArtifactArgument::Kind::Parameter)
      continue;
    auto held = llvm::find_if(step, [&](const ArtifactArgument &s) {
      return s.kind == ArtifactArgument::Kind::Parameter && s.name == e.name;
    });
    if (held == step.end())
      return "its parameter '" + e.name + "' is not one of the step's";
    if (held->shape != e.shape || held->splitDim != e.splitDim)
      return "the eval program's tensor-parallel plan holds parameter '" +
             e.name + "' as " + describe(e) + ", the step as " +
             describe(*held);
  }
  return "";
}

/// The eval program: the model imported again with Dropout off and
/// BatchNorm on its running statistics, returning only the loss, lowered
/// for the training step's target into `eval.so`. Under tensor parallelism
/// it is partitioned for the tp group as the step is, the step's choices
/// pinned; when it would still hold a parameter otherwise than the step
/// (whose blocks it reads), \p unavailable says which and no program is
/// returned.
FailureOr<std::optional<ArtifactProgram>>
buildEvalProgram(MLIRContext *context, const TrainingArtifactOptions &o,
                 llvm::StringRef lossOutput,
                 ArrayRef<ArtifactArgument> stepArguments,
                 std::string &unavailable, std::string &error) {
  ImportOptions importOptions = o.importOptions;
  importOptions.evalMode = true;
  importOptions.trainingStateUpdates = false;
  // Data parallelism: each rank evaluates its share of a batch, as it
  // trains on it (the manifest describes every program's inputs alike).
  if (o.dataParallel > 1) {
    for (auto &entry : importOptions.inputShapes) {
      llvm::SmallVector<int64_t> &shape = entry.second;
      if (!shape.empty() && shape[0] % o.dataParallel == 0)
        shape[0] /= o.dataParallel;
    }
    importOptions.batchRatio *= o.dataParallel;
  }
  OwningOpRef<ModuleOp> eval =
      importOnnxFile(context, o.modelPath, importOptions);
  if (!eval) {
    error = "importing " + o.modelPath + " for evaluation failed";
    return failure();
  }
  {
    // The loss as the step computes it: fused, the model's own or added
    // (under tp before the plan below, which places the fused op).
    PassManager pm = PassManager::on<ModuleOp>(context);
    if (o.fuseCrossEntropy)
      pm.addNestedPass<func::FuncOp>(createFuseCrossEntropy());
    addCrossEntropyLossPass(pm, o.loss, o.fuseCrossEntropy);
    if (failed(pm.run(*eval))) {
      error = "fusing or adding the eval program's loss failed";
      return failure();
    }
  }
  auto main = eval->lookupSymbol<func::FuncOp>("main");
  if (!keepOnlyResult(main, lossOutput)) {
    error = "the eval program has no output '" + lossOutput.str() + "'";
    return failure();
  }
  auto arguments = collectArtifactArguments(main);
  if (failed(arguments)) {
    error = "the eval program's @main lacks the importer's attributes";
    return failure();
  }
  if (o.tensorParallel > 1) {
    // The outputs keepOnlyResult dropped leave dead ops behind (an
    // eval-mode Dropout's mask), which partitioning would have to annotate.
    PassManager clean = PassManager::on<ModuleOp>(context);
    clean.addPass(createCanonicalizerPass());
    clean.addPass(createCSEPass());
    if (failed(clean.run(*eval))) {
      error = "simplifying the eval program failed";
      return failure();
    }
    if (!o.tensorParallelRequest) {
      error = "internal error: a tensor-parallel step without its plan "
              "request";
      return failure();
    }
    std::string diagnostics;
    LogicalResult partitioned = success();
    {
      // A failure here costs --eval-data, not the training artifact.
      ScopedDiagnosticHandler collect(context, [&](Diagnostic &diag) {
        if (diagnostics.empty() &&
            diag.getSeverity() == DiagnosticSeverity::Error)
          diagnostics = diag.str();
        return success();
      });
      partitioned = partitionTensorParallel(
          *eval, o.tensorParallel, *o.tensorParallelRequest, *arguments,
          nullptr, [](llvm::StringRef, ModuleOp) {});
    }
    if (failed(partitioned)) {
      unavailable = "partitioning it over the " +
                    std::to_string(o.tensorParallel) +
                    " tensor-parallel ranks failed (" + diagnostics + ")";
      return std::optional<ArtifactProgram>();
    }
    unavailable = parameterLayoutMismatch(*arguments, stepArguments);
    if (!unavailable.empty())
      return std::optional<ArtifactProgram>();
  }
  if (o.tensorParallel <= 1 && o.dataParallel > 1) {
    // ZeRO-3: the step holds a block (dim 0) of each parameter it shards;
    // the eval program reads the same blocks and gathers each where it is
    // read, as the step's forward does.
    llvm::StringSet<> blocks;
    for (const ArtifactArgument &held : stepArguments)
      if (held.kind == ArtifactArgument::Kind::Parameter &&
          held.splitDim >= 0 && held.splitAxis == "dp" &&
          held.innerSplitDim < 0)
        blocks.insert(held.name);
    if (!blocks.empty()) {
      main = eval->lookupSymbol<func::FuncOp>("main");
      readZeroBlocks(main, o.dataParallel, [&](BlockArgument arg) {
        auto name = main.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      attrs::kParameter);
        return name && blocks.contains(name.getValue());
      });
      for (auto [arg, type] : llvm::zip(*arguments, main.getArgumentTypes()))
        arg.shape.assign(cast<RankedTensorType>(type).getShape().begin(),
                         cast<RankedTensorType>(type).getShape().end());
      PassManager lower = PassManager::on<ModuleOp>(context);
      addCollectiveLowering(lower);
      if (failed(lower.run(*eval))) {
        error = "lowering the eval program's ZeRO-3 gathers failed";
        return failure();
      }
      markZeroShardedStates(*arguments, o.dataParallel, blocks);
    }
  }
  if (failed(markDataParallelInputs(*arguments, o.dataParallel, error)))
    return failure();
  auto program =
      lowerTrainingProgram(*eval, o, "eval", std::move(*arguments), "", error);
  if (failed(program))
    return failure();
  return std::optional<ArtifactProgram>(std::move(*program));
}

} // namespace

CollectiveTally stepCollectiveTally(ModuleOp module) {
  CollectiveTally tally;
  if (auto main = module.lookupSymbol<func::FuncOp>("main"))
    countCollectives(main.getBody().front(), 1, module, tally);
  return tally;
}

llvm::json::Object collectivesJson(const CollectiveTally &tally) {
  llvm::json::Object axes;
  for (auto &[axis, byOp] : tally) {
    llvm::json::Object ops;
    for (auto &[name, counts] : byOp)
      ops[name] = llvm::json::Object{{"calls", counts.first},
                                     {"bus_bytes", counts.second}};
    axes[axis] = std::move(ops);
  }
  return axes;
}

llvm::json::Object stepCollectives(ModuleOp module) {
  return collectivesJson(stepCollectiveTally(module));
}

llvm::FailureOr<TrainedSummary>
writeTrainingArtifact(ModuleOp module, const TrainingArtifactOptions &options,
                      std::string &error) {
  auto fail = [&](const llvm::Twine &message) {
    error = message.str();
    return failure();
  };
  auto main = module.lookupSymbol<func::FuncOp>("main");
  auto arguments = collectArtifactArguments(main);
  if (failed(arguments))
    return fail("the training step's @main lacks the importer's attributes");
  llvm::StringSet<> blockParameters = zeroBlockParameters(main);
  // Tensor parallelism: each rank holds blocks of the state it keeps. A
  // step partitioned before its update marks its blocks itself.
  if (options.tensorParallel > 1 && options.tensorParallelSplits.empty()) {
    markTensorParallelBlocks(main, options.tensorParallel, options.dataParallel,
                             *arguments);
  } else if (options.tensorParallel > 1) {
    if (options.tensorParallelSplits.size() != arguments->size())
      return fail("internal error: the tensor-parallel splits do not match "
                  "the training step's arguments and results");
    for (auto [arg, split] :
         llvm::zip(*arguments, options.tensorParallelSplits)) {
      if (split.dim < 0)
        continue;
      arg.globalShape = split.globalShape;
      arg.splitDim = split.dim;
      arg.splitAxis = "tp";
    }
  }
  TrainedSummary trained;
  for (const ArtifactArgument &arg : *arguments) {
    if (arg.kind != ArtifactArgument::Kind::Parameter || !arg.trainable)
      continue;
    int64_t elements = 1;
    for (int64_t d : arg.globalShape.empty() ? arg.shape : arg.globalShape)
      elements *= d;
    // A ZeRO-3 block not yet given its whole shape.
    if (blockParameters.contains(arg.name) && arg.globalShape.empty())
      elements *= options.dataParallel;
    ++trained.tensors;
    trained.elements += elements;
    trained.bytes += elements * (arg.dtype == "float64"   ? 8
                                 : arg.dtype == "float32" ? 4
                                                          : 2);
  }

  auto weights = locateInitializers(options.modelPath);
  if (!weights)
    return fail(llvm::toString(weights.takeError()));
  if (std::error_code ec = llvm::sys::fs::create_directories(options.outputDir))
    return fail("cannot create " + options.outputDir + ": " + ec.message());
  if (options.gpu && options.gpu->precision != "fp32")
    return fail("internal error: a training step's GPU target must be fp32 "
                "(its mixed precision is in the step)");
  if (failed(markDataParallelInputs(*arguments, options.dataParallel, error)))
    return failure();
  markZeroShardedStates(*arguments, options.dataParallel, blockParameters);
  auto step = lowerTrainingProgram(
      module, options, "stage0", std::move(*arguments),
      options.dumpDir.empty() ? "" : options.dumpDir + "/model.ll", error);
  if (failed(step))
    return failure();
  if (!options.dumpDir.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream os(options.dumpDir + "/llvm-dialect.mlir", ec);
    if (!ec)
      module.print(os);
  }

  ArtifactDescription description;
  description.programs.push_back(std::move(*step));
  if (options.gpu)
    description.target = ArtifactTarget{
        "cuda", options.gpu->arch,
        options.config.precision.empty() ? "fp32" : options.config.precision};
  llvm::SmallString<256> absModel(options.modelPath);
  llvm::sys::fs::make_absolute(absModel);
  description.modelPath = std::string(absModel);
  description.cluster = options.cluster;
  description.worldSize = options.dataParallel * options.tensorParallel;
  description.dp = options.dataParallel;
  description.tp = options.tensorParallel;
  if (options.withOptimizer) {
    const std::vector<ArtifactArgument> &args =
        description.programs[0].arguments;
    ArtifactTraining t = trainingDescription(args, options);
    t.lossScaling = lossScalingDescription(options.config);
    // --save-onnx: the inference model without the parameters training
    // updates, which the runtime appends with their trained values.
    llvm::StringSet<> updated;
    for (const ArtifactArgument &arg : args)
      if (arg.kind == ArtifactArgument::Kind::Update)
        updated.insert(arg.updates);
    // --eval-data: the loss with Dropout off and BatchNorm on its running
    // statistics, reading the step's parameters (their blocks under tp).
    std::string unavailable;
    auto evalProgram = buildEvalProgram(module.getContext(), options, t.loss,
                                        args, unavailable, error);
    if (failed(evalProgram))
      return failure();
    if (*evalProgram) {
      description.programs.push_back(std::move(**evalProgram));
      t.evalProgram = "eval";
    } else {
      t.evalUnavailable =
          unavailable + "; evaluate the saved model (--save-onnx) instead";
    }
    if (!llvm::StringRef(options.modelPath).ends_with(".onnxtxt")) {
      llvm::SmallString<256> templatePath(options.outputDir);
      llvm::sys::path::append(templatePath, "inference-template.onnx");
      if (failed(writeInferenceTemplate(options.modelPath, updated,
                                        templatePath, error)))
        return failure();
      t.inferenceTemplate = "inference-template.onnx";
    }
    description.training = std::move(t);
  }
  if (failed(writeManifest(options.outputDir, std::move(description), *weights,
                           error)))
    return failure();
  return trained;
}

} // namespace autopar
