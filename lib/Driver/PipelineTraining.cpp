//===- PipelineTraining.cpp - The programs of a pipeline training plan ----===//
//
// See PipelineTraining.h. The model is imported for one micro-batch, its
// forward cut into stages as for inference (`autopar-split-pipeline-stages`),
// and each stage differentiated on its own: the stage's "loss" is the sum
// of its outputs times their cotangents (the last stage's is the model's
// loss), so `buildGradients` gives the stage's vector-Jacobian product. The
// differentiated stage is then cut in two by what depends on the
// cotangents: the ops the forward outputs need are the forward program,
// the rest the backward; the forward values the backward reads are
// residuals the runtime keeps per micro-batch. Recompute `full` instead
// clones into the backward every forward op it needs, so that only the
// stage's inputs are kept.
//
//===----------------------------------------------------------------------===//

#include "autopar/Driver/PipelineTraining.h"
#include "autopar/Driver/TensorParallel.h"

#include "autopar/Conversion/Passes.h"
#include "autopar/Dialect/Attributes.h"
#include "autopar/Import/InferenceModel.h"
#include "autopar/Import/WeightLocator.h"
#include "autopar/Planner/ActiveValues.h"
#include "autopar/Planner/Recompute.h"
#include "autopar/Target/Artifact.h"
#include "autopar/Target/LoweringPasses.h"
#include "autopar/Transforms/Autodiff.h"
#include "autopar/Transforms/GradientBuckets.h"
#include "autopar/Transforms/LossNormalisation.h"
#include "autopar/Transforms/LossScaling.h"
#include "autopar/Transforms/Passes.h"
#include "autopar/Transforms/PlanAnnotate.h"
#include "autopar/Transforms/ZeroSharding.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/GlobPattern.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <numeric>

using namespace mlir;

namespace autopar {
namespace {

llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// NumPy's name of a value's element type, for the manifest.
std::string dtypeOf(Type type) {
  return dtypeAttrName(getElementTypeOrSelf(type)).value_or("float32");
}

bool isFloatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType());
}

/// The ops of a block that \p roots need, through operands and the values
/// their regions capture, among those \p allowed admits; the values they
/// read from elsewhere (arguments, ops not admitted) go to \p external.
void collectSlice(ArrayRef<Value> roots,
                  llvm::function_ref<bool(Operation *)> allowed,
                  llvm::DenseSet<Operation *> &ops,
                  llvm::SetVector<Value> &external) {
  SmallVector<Value> work(roots.begin(), roots.end());
  while (!work.empty()) {
    Value v = work.pop_back_val();
    Operation *def = v.getDefiningOp();
    if (!def || !allowed(def)) {
      external.insert(v);
      continue;
    }
    if (!ops.insert(def).second)
      continue;
    llvm::SetVector<Value> read(def->operand_begin(), def->operand_end());
    getUsedValuesDefinedAbove(def->getRegions(), read);
    work.append(read.begin(), read.end());
  }
}

/// A conversion of a value to a wider float type, elementwise (mixed
/// precision's extension of a low-typed value for an f32 kernel): the
/// backward makes it again from the low-typed value, which the stage keeps
/// instead (half the bytes).
bool isWidening(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  if (!generic || generic.getNumDpsInputs() != 1 ||
      generic.getNumDpsInits() != 1 || generic.getNumReductionLoops() != 0 ||
      !llvm::all_of(generic.getIndexingMapsArray(),
                    [](AffineMap map) { return map.isIdentity(); }))
    return false;
  Block &body = generic.getRegion().front();
  auto ext = dyn_cast<arith::ExtFOp>(&body.front());
  return ext && ext.getIn() == body.getArgument(0) &&
         body.getOperations().size() == 2;
}

/// `a + b`, elementwise, for tensors of one type.
Value addTensors(OpBuilder &b, Location loc, Value a, Value c) {
  auto type = cast<RankedTensorType>(a.getType());
  Value init =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  return linalg::GenericOp::create(
             b, loc, TypeRange{type}, ValueRange{a, c}, ValueRange{init},
             ArrayRef<AffineMap>{id, id, id},
             SmallVector<utils::IteratorType>(type.getRank(),
                                              utils::IteratorType::parallel),
             [](OpBuilder &nb, Location nl, ValueRange args) {
               linalg::YieldOp::create(
                   nb, nl,
                   ValueRange{arith::AddFOp::create(nb, nl, args[0], args[1])});
             })
      .getResult(0);
}

/// `sum(a * c)` over every element, as a rank-0 tensor.
Value dotProduct(OpBuilder &b, Location loc, Value a, Value c) {
  auto type = cast<RankedTensorType>(a.getType());
  Type element = type.getElementType();
  auto scalar = RankedTensorType::get({}, element);
  Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(element));
  Value init =
      linalg::FillOp::create(b, loc, zero,
                             ValueRange{tensor::EmptyOp::create(
                                 b, loc, ArrayRef<int64_t>{}, element)})
          .getResult(0);
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  AffineMap toScalar = AffineMap::get(type.getRank(), 0, {}, b.getContext());
  return linalg::GenericOp::create(
             b, loc, TypeRange{scalar}, ValueRange{a, c}, ValueRange{init},
             ArrayRef<AffineMap>{id, id, toScalar},
             SmallVector<utils::IteratorType>(type.getRank(),
                                              utils::IteratorType::reduction),
             [](OpBuilder &nb, Location nl, ValueRange args) {
               Value product = arith::MulFOp::create(nb, nl, args[0], args[1]);
               linalg::YieldOp::create(
                   nb, nl,
                   ValueRange{arith::AddFOp::create(nb, nl, args[2], product)});
             })
      .getResult(0);
}

/// A rank-0 view of a single-element tensor.
Value asScalar(OpBuilder &b, Location loc, Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getRank() == 0)
    return v;
  return tensor::CollapseShapeOp::create(
      b, loc, RankedTensorType::get({}, type.getElementType()), v,
      ArrayRef<ReassociationIndices>{});
}

/// One argument or result of a program being cut out of a stage.
struct Port {
  Value value;
  DictionaryAttr attrs;
};

/// A program made of the ops \p ops of \p body (in block order): its
/// arguments stand for \p args, it returns \p results, and then, for each
/// of \p accumulated, an accumulator argument plus the value (named by the
/// accumulator's name).
void emitProgram(ModuleOp module, Location loc, Block &body,
                 const llvm::DenseSet<Operation *> &ops, ArrayRef<Port> args,
                 ArrayRef<Port> results,
                 ArrayRef<std::pair<Value, std::string>> accumulated) {
  MLIRContext *ctx = module.getContext();
  Builder attrs(ctx);
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  for (const Port &p : args) {
    argTypes.push_back(p.value.getType());
    argAttrs.push_back(p.attrs);
  }
  for (auto &[value, name] : accumulated) {
    argTypes.push_back(value.getType());
    argAttrs.push_back(attrs.getDictionaryAttr(
        {attrs.getNamedAttr(attrs::kAccumulator, attrs.getStringAttr(name)),
         attrs.getNamedAttr(attrs::kDType,
                            attrs.getStringAttr(dtypeOf(value.getType())))}));
  }
  OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
  auto fn = func::FuncOp::create(b, loc, "main",
                                 FunctionType::get(ctx, argTypes, {}));
  Block *entry = fn.addEntryBlock();
  IRMapping map;
  for (auto [port, arg] : llvm::zip(args, entry->getArguments()))
    map.map(port.value, arg);
  OpBuilder fb = OpBuilder::atBlockEnd(entry);
  for (Operation &op : body.without_terminator())
    if (ops.contains(&op))
      fb.clone(op, map);
  SmallVector<Value> returned;
  SmallVector<DictionaryAttr> resultAttrs;
  llvm::DenseSet<Value> seen;
  for (const Port &p : results) {
    Value v = map.lookup(p.value);
    // An argument returned, or a value returned twice, is copied: each
    // result gets a buffer of its own (bufferization's out-params).
    if (isa<BlockArgument>(v) || !seen.insert(v).second) {
      auto type = cast<RankedTensorType>(v.getType());
      Value init = tensor::EmptyOp::create(fb, loc, type.getShape(),
                                           type.getElementType());
      v = linalg::CopyOp::create(fb, loc, v, init).getResult(0);
    }
    returned.push_back(v);
    resultAttrs.push_back(p.attrs);
  }
  for (auto [k, entryValue] : llvm::enumerate(accumulated)) {
    auto &[value, name] = entryValue;
    Value sum = addTensors(fb, loc, entry->getArgument(args.size() + k),
                           map.lookup(value));
    returned.push_back(sum);
    resultAttrs.push_back(attrs.getDictionaryAttr(
        {attrs.getNamedAttr(attrs::kUpdate, attrs.getStringAttr(name)),
         attrs.getNamedAttr(attrs::kDType,
                            attrs.getStringAttr(dtypeOf(value.getType())))}));
  }
  func::ReturnOp::create(fb, loc, returned);
  fn.setType(FunctionType::get(ctx, argTypes, ValueRange(returned).getTypes()));
  fn.setAllArgAttrs(argAttrs);
  fn.setAllResultAttrs(resultAttrs);
}

/// The accumulator names of the loss's sums.
constexpr llvm::StringLiteral kLossSum = "loss.sum";
constexpr llvm::StringLiteral kLossDenominator = "loss.denominator";

/// The accumulator of a parameter's gradient.
std::string gradientAccumulator(llvm::StringRef parameter) {
  return (parameter + ".grad").str();
}

/// What the stages agree on: the loss, how it normalises, what is trained.
struct StepFacts {
  std::string lossName;
  LossKind kind = LossKind::Average;
  /// Trained parameters, in the order of the forward's arguments.
  llvm::StringSet<> trained;
};

/// Cuts stage module \p stage (from autopar-split-pipeline-stages) into its
/// forward and backward programs; \p tensorParallel when the plan annotated
/// the stage for its tp group.
llvm::Error cutStage(ModuleOp stage, int64_t k, int64_t numStages,
                     const StepFacts &facts, Recompute recompute,
                     bool tensorParallel, const TrainingStepOptions &step,
                     PipelineTrainingStage &out) {
  MLIRContext *ctx = stage.getContext();
  Builder attrs(ctx);
  auto f = stage.lookupSymbol<func::FuncOp>("main");
  // Partitioning (tensor parallelism) replaces the body block.
  Block *body = &f.getBody().front();
  auto ret = cast<func::ReturnOp>(body->getTerminator());
  Location loc = f.getLoc();
  bool last = k == numStages - 1;

  // The stage's outputs: activations for the next stage, or the loss.
  SmallVector<Port> forwardResults;
  SmallVector<std::pair<Value, std::string>> forwardSums;
  // The new values of the state the stage's forward updates (BatchNorm's
  // running statistics), which the runtime stores in the parameters.
  SmallVector<Port> stateUpdates;
  Value loss;
  for (unsigned j = 0; j < f.getNumResults(); ++j) {
    Value v = ret.getOperand(j);
    if (f.getResultAttr(j, attrs::kActivationOut)) {
      forwardResults.push_back({v, f.getResultAttrDict(j)});
      continue;
    }
    if (f.getResultAttr(j, attrs::kUpdate)) {
      stateUpdates.push_back({v, f.getResultAttrDict(j)});
      continue;
    }
    auto name = f.getResultAttrOfType<StringAttr>(j, attrs::kOutput);
    if (name && name.getValue() == facts.lossName)
      loss = v;
    else if (name && name.getValue() == kLossDenominator)
      forwardSums.push_back({v, kLossDenominator.str()});
  }
  if (last && !loss)
    return error("internal error: the last pipeline stage does not return "
                 "the loss '" +
                 facts.lossName + "'");
  if (loss && lossScaleOf(step) > 0) {
    // fp16: the loss times the loss scale, as autopar-differentiate scales
    // the one-program step's. The backward starts from it, so that every
    // stage's gradients are scaled (the cotangents it sends carry the
    // scale), and the loss's sum is of it too: the steps divide both by the
    // scale (autopar-apply-optimizer) as the one-program step does.
    loss = scaleLoss(f, loss, lossScaleOf(step), dynamicLossScaleOf(step));
  }
  if (loss)
    forwardSums.insert(forwardSums.begin(), {loss, kLossSum.str()});

  // The stage's "loss": its outputs times their cotangents (new arguments,
  // received from the next stage), or the model's loss.
  OpBuilder b(ret);
  SmallVector<Port> cotangentsIn;
  Value stageLoss = loss;
  if (!last) {
    for (const Port &p : forwardResults) {
      if (!isFloatTensor(p.value.getType()))
        continue;
      auto name = p.attrs.getAs<StringAttr>(attrs::kActivationOut);
      DictionaryAttr dict = attrs.getDictionaryAttr(
          {attrs.getNamedAttr(attrs::kActivationIn,
                              attrs.getStringAttr(name.getValue() + ".grad")),
           attrs.getNamedAttr(attrs::kDType,
                              attrs.getStringAttr(dtypeOf(p.value.getType()))),
           attrs.getNamedAttr(attrs::kPeerStage,
                              attrs.getI64IntegerAttr(k + 1))});
      unsigned position = f.getNumArguments();
      if (failed(f.insertArgument(position, p.value.getType(), dict, loc)))
        return error("internal error: cannot add a cotangent argument");
      BlockArgument cot = f.getArgument(position);
      cotangentsIn.push_back({cot, dict});
      // Whole on every tp rank, as the activation it is the cotangent of.
      Value cotValue = tensorParallel ? annotateWhole(b, loc, cot) : Value(cot);
      Value term = dotProduct(b, loc, p.value, cotValue);
      if (stageLoss &&
          cast<RankedTensorType>(stageLoss.getType()).getElementType() !=
              cast<RankedTensorType>(term.getType()).getElementType())
        return error("pipeline stage " + llvm::Twine(k) +
                     " sends activations of several float types; pipeline "
                     "training needs one");
      stageLoss = stageLoss ? addTensors(b, loc, stageLoss, term) : term;
    }
    if (!stageLoss)
      return error("pipeline stage " + llvm::Twine(k) +
                   " sends no float activation to the next stage, so no "
                   "gradient reaches its parameters");
  }

  auto isCotangent = [&](Value v) {
    return llvm::any_of(cotangentsIn,
                        [&](const Port &p) { return p.value == v; });
  };
  // What the stage differentiates: its trained parameters and its float
  // inputs from the previous stage.
  SmallVector<Value> wrt;
  SmallVector<std::string> gradientNames;
  SmallVector<Port> cotangentsOut;
  for (BlockArgument arg : f.getArguments()) {
    unsigned i = arg.getArgNumber();
    if (auto name = f.getArgAttrOfType<StringAttr>(i, attrs::kParameter)) {
      if (!facts.trained.contains(name.getValue()))
        continue;
      f.setArgAttr(i, attrs::kTrainable, attrs.getUnitAttr());
      wrt.push_back(arg);
      gradientNames.push_back(name.getValue().str());
    }
  }
  size_t numParameters = wrt.size();
  for (BlockArgument arg : f.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto name = f.getArgAttrOfType<StringAttr>(i, attrs::kActivationIn);
    if (!name || !isFloatTensor(arg.getType()) || isCotangent(arg))
      continue;
    wrt.push_back(arg);
    gradientNames.push_back(name.getValue().str());
  }
  auto gradients = buildGradients(f, asScalar(b, loc, stageLoss), wrt);
  if (failed(gradients))
    return error("differentiating pipeline stage " + llvm::Twine(k) +
                 " failed (see the diagnostics above)");
  // Every value the cut needs, as results, so that the cleanup keeps them.
  SmallVector<Value> kept;
  for (const Port &p : forwardResults)
    kept.push_back(p.value);
  for (auto &[value, name] : forwardSums)
    kept.push_back(value);
  llvm::append_range(kept, *gradients);
  for (const Port &p : stateUpdates)
    kept.push_back(p.value);
  {
    // As autopar-differentiate: the adjoints' operands their bodies do not
    // read are dropped, so that the backward keeps no more residuals than
    // it reads.
    func::ReturnOp::create(b, loc, kept);
    ret.erase();
    f.setType(FunctionType::get(ctx, f.getArgumentTypes(),
                                ValueRange(kept).getTypes()));
    f.setAllResultAttrs(ArrayRef<DictionaryAttr>{});
    RewritePatternSet patterns(ctx);
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    if (failed(applyPatternsGreedily(f, std::move(patterns))))
      return error("internal error: cleaning up pipeline stage " +
                   llvm::Twine(k) + "'s backward failed");
    ret = cast<func::ReturnOp>(body->getTerminator());
  }
  // Partitioning replaces the block's arguments: by their numbers.
  SmallVector<unsigned> wrtArgs, cotangentArgs;
  for (Value v : wrt)
    wrtArgs.push_back(cast<BlockArgument>(v).getArgNumber());
  for (const Port &p : cotangentsIn)
    cotangentArgs.push_back(cast<BlockArgument>(p.value).getArgNumber());
  if (tensorParallel) {
    // A state update leaves as its parameter is laid out (the plan may split
    // BatchNorm's running statistics with the channels), so that the
    // runtime's copy into the parameter is this rank's block.
    llvm::StringMap<Value> parameterSharding;
    for (BlockArgument arg : f.getArguments())
      if (auto param = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      attrs::kParameter))
        for (Operation *user : arg.getUsers())
          if (auto shard = dyn_cast<shard::ShardOp>(user);
              shard && !shard.getAnnotateForUsers())
            parameterSharding[param.getValue()] = shard.getSharding();
    OpBuilder rb(ret);
    for (auto [j, p] : llvm::enumerate(stateUpdates)) {
      auto name = p.attrs.getAs<StringAttr>(attrs::kUpdate);
      Value sharding =
          name ? parameterSharding.lookup(name.getValue()) : Value();
      OpOperand &operand =
          ret->getOpOperand(kept.size() - stateUpdates.size() + j);
      operand.set(sharding
                      ? shard::ShardOp::create(rb, loc, operand.get(), sharding,
                                               /*annotate_for_users=*/
                                               false)
                            .getResult()
                      : annotateWhole(rb, loc, operand.get()));
    }
    size_t firstBlockResult = forwardResults.size() + forwardSums.size(),
           endBlockResult = kept.size();
    if (llvm::Error err = partitionDifferentiated(
            stage, f, "pipeline stage " + std::to_string(k), [&](unsigned j) {
              return j >= firstBlockResult && j < endBlockResult;
            }))
      return err;
  }
  if (!step.config.precision.empty()) {
    // Mixed precision, as the one-program step's (buildUpdatePipeline): on
    // the differentiated stage, before it is cut, so that the residuals it
    // keeps per micro-batch are stored in the low type. What the stage
    // sends and returns keeps its type. After partitioning: its collectives
    // (tp) stay f32, which the CPU runtime's collectives take.
    auto pm = PassManager::on<ModuleOp>(ctx);
    applyPassManagerCLOptionsIfAny(pm);
    pm.addNestedPass<func::FuncOp>(
        createMixedPrecision(mixedPrecisionOptions(step)));
    if (failed(pm.run(stage)))
      return error("mixed precision (" + step.config.precision +
                   ") of pipeline stage " + llvm::Twine(k) +
                   " failed (see the diagnostics above)");
  }
  // The values by their places, which the cleanup, partitioning and mixed
  // precision keep.
  body = &f.getBody().front();
  ret = cast<func::ReturnOp>(body->getTerminator());
  {
    size_t j = 0;
    for (Port &p : forwardResults)
      p.value = ret.getOperand(j++);
    for (auto &[value, name] : forwardSums)
      value = ret.getOperand(j++);
    for (Value &g : *gradients)
      g = ret.getOperand(j++);
    for (Port &p : stateUpdates)
      p.value = ret.getOperand(j++);
    for (auto [v, i] : llvm::zip(wrt, wrtArgs))
      v = f.getArgument(i);
    for (auto [p, i] : llvm::zip(cotangentsIn, cotangentArgs))
      p.value = f.getArgument(i);
  }

  // The forward: what its outputs need.
  SmallVector<Value> forwardRoots;
  for (const Port &p : forwardResults)
    forwardRoots.push_back(p.value);
  for (auto &[value, name] : forwardSums)
    forwardRoots.push_back(value);
  for (const Port &p : stateUpdates)
    forwardRoots.push_back(p.value);
  llvm::DenseSet<Operation *> forwardOps;
  llvm::SetVector<Value> forwardReads;
  collectSlice(
      forwardRoots, [](Operation *) { return true; }, forwardOps, forwardReads);

  SmallVector<Port> backwardResults;
  SmallVector<std::pair<Value, std::string>> gradientSums;
  for (auto [j, g] : llvm::enumerate(*gradients)) {
    if (j < numParameters) {
      gradientSums.push_back({g, gradientAccumulator(gradientNames[j])});
      continue;
    }
    BlockArgument input = cast<BlockArgument>(wrt[j]);
    backwardResults.push_back(
        {g, attrs.getDictionaryAttr(
                {attrs.getNamedAttr(
                     attrs::kActivationOut,
                     attrs.getStringAttr(gradientNames[j] + ".grad")),
                 attrs.getNamedAttr(attrs::kDType,
                                    attrs.getStringAttr(dtypeOf(g.getType()))),
                 attrs.getNamedAttr(
                     attrs::kPeerStage,
                     f.getArgAttr(input.getArgNumber(), attrs::kPeerStage))})});
  }

  // The backward: what its results need, apart from the forward's ops
  // (recompute none), with the memory-bound ones (selective) or with all of
  // them (full); under mixed precision, with the widenings of low-typed
  // values too, so that it keeps them in the low type.
  llvm::DenseSet<Operation *> randomOps = opsReadingTheSeed(f);
  llvm::DenseSet<Operation *> parameterOnly = opsOfParametersAlone(f);
  SmallVector<Value> backwardRoots;
  for (const Port &p : backwardResults)
    backwardRoots.push_back(p.value);
  for (auto &[value, name] : gradientSums)
    backwardRoots.push_back(value);
  llvm::DenseSet<Operation *> backwardOps;
  llvm::SetVector<Value> backwardReads;
  collectSlice(
      backwardRoots,
      [&](Operation *op) {
        return recompute == Recompute::Full || !forwardOps.contains(op) ||
               isRecomputedAnyway(op) || isWidening(op) ||
               parameterOnly.contains(op) ||
               (recompute == Recompute::Selective &&
                isSelectivelyRecomputed(op) && !randomOps.contains(op));
      },
      backwardOps, backwardReads);

  // The values the backward reads that are neither shared (parameters, the
  // seed, the step, fp16's loss scaler: the runtime binds them to the
  // step's) nor received
  // (cotangents) are residuals: the forward returns them and the runtime keeps
  // them per micro-batch.
  auto isShared = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && arg.getOwner() == body &&
           (f.getArgAttr(arg.getArgNumber(), attrs::kParameter) ||
            f.getArgAttr(arg.getArgNumber(), attrs::kOptimizerState) ||
            f.getArgAttr(arg.getArgNumber(), attrs::kSeed) ||
            f.getArgAttr(arg.getArgNumber(), attrs::kStep));
  };
  SmallVector<Port> backwardArgs, residualResults;
  for (Value v : backwardReads) {
    if (isShared(v)) {
      backwardArgs.push_back(
          {v, f.getArgAttrDict(cast<BlockArgument>(v).getArgNumber())});
      continue;
    }
    if (isCotangent(v))
      continue;
    std::string name = "residual." + std::to_string(residualResults.size());
    DictionaryAttr dict = attrs.getDictionaryAttr(
        {attrs.getNamedAttr(attrs::kResidual, attrs.getStringAttr(name)),
         attrs.getNamedAttr(attrs::kDType,
                            attrs.getStringAttr(dtypeOf(v.getType())))});
    residualResults.push_back({v, dict});
    backwardArgs.push_back({v, dict});
  }
  backwardArgs.append(cotangentsIn.begin(), cotangentsIn.end());

  // The forward reads its arguments, and those the residuals are.
  for (const Port &p : residualResults)
    if (isa<BlockArgument>(p.value))
      forwardReads.insert(p.value);
  SmallVector<Port> forwardArgs;
  for (BlockArgument arg : f.getArguments())
    if (forwardReads.contains(arg))
      forwardArgs.push_back({arg, f.getArgAttrDict(arg.getArgNumber())});
  for (Value v : forwardReads)
    if (!isa<BlockArgument>(v) || cast<BlockArgument>(v).getOwner() != body)
      return error("internal error: pipeline stage " + llvm::Twine(k) +
                   "'s forward reads a value it does not compute");
  SmallVector<Port> allForwardResults(forwardResults);
  allForwardResults.append(residualResults.begin(), residualResults.end());
  allForwardResults.append(stateUpdates.begin(), stateUpdates.end());

  auto makeModule = [&](llvm::StringRef phase) {
    auto module =
        ModuleOp::create(loc, ("stage" + llvm::Twine(k) + "." + phase).str());
    OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
    // Declarations and grids the stage's ops refer to.
    for (Operation &op : stage.getOps())
      if (&op != f.getOperation())
        mb.clone(op);
    return module;
  };
  out.forward = makeModule("forward");
  emitProgram(*out.forward, loc, *body, forwardOps, forwardArgs,
              allForwardResults, forwardSums);
  out.backward = makeModule("backward");
  emitProgram(*out.backward, loc, *body, backwardOps, backwardArgs,
              backwardResults, gradientSums);
  return llvm::Error::success();
}

/// A trained parameter several stages read (tied weights).
struct TiedParameter {
  std::string name;
  RankedTensorType type;
  /// The stages that read it, in order; the first counts it in the global
  /// norm and checkpoints it.
  SmallVector<int64_t> stages;
};

/// Gives a stage to the ops added after the planner placed the stages (the
/// loss, its parts): each goes with its operands; those that read only the
/// graph's inputs and constants (what the loss makes of the labels) go with
/// their first user, so that no stage computes them for another and sends
/// them on. The ops that make the loss's parts (\p lossName and its
/// denominator) move to the last of the \p pp stages.
void placeUnstagedOps(func::FuncOp main, int64_t pp, llvm::StringRef lossName) {
  MLIRContext *context = main.getContext();
  auto stageOf = [](Operation *op) -> std::optional<int64_t> {
    if (auto s = op->getAttrOfType<IntegerAttr>(attrs::kStage))
      return s.getInt();
    return std::nullopt;
  };
  Block &block = main.getBody().front();
  llvm::DenseSet<Operation *> floating;
  for (Operation &op : block.without_terminator()) {
    if (stageOf(&op) || op.getNumOperands() == 0)
      continue;
    std::optional<int64_t> stage;
    for (Value v : op.getOperands())
      if (Operation *def = v.getDefiningOp())
        if (auto s = stageOf(def); s && !floating.contains(def))
          stage = std::max(stage.value_or(0), *s);
    if (!stage)
      floating.insert(&op);
    op.setAttr(attrs::kStage, IntegerAttr::get(IntegerType::get(context, 64),
                                               stage.value_or(0)));
  }
  for (Operation &op : llvm::reverse(block.without_terminator())) {
    if (!floating.contains(&op))
      continue;
    std::optional<int64_t> first;
    for (Operation *user : op.getUsers())
      if (auto s = stageOf(user))
        first = std::min(first.value_or(*s), *s);
    op.setAttr(attrs::kStage, IntegerAttr::get(IntegerType::get(context, 64),
                                               first.value_or(0)));
  }
  // The loss's parts come out of the last stage. The planner may cut the
  // loss node's own chain into stages (on a small model a deep pipeline
  // runs out of other ops) and leave the final division, which the step
  // now does, alone in the stages after the sum: the op that makes each
  // part moves to the last stage, which then receives what it reads (a
  // per-sample loss, passed through any stage in between).
  // (The division the step took over is dead by now: gone first.)
  SmallVector<Operation *> bottomUp;
  for (Operation &op : llvm::reverse(block.without_terminator()))
    bottomUp.push_back(&op);
  for (Operation *op : bottomUp)
    if (isOpTriviallyDead(op))
      op->erase();
  auto ret = cast<func::ReturnOp>(block.getTerminator());
  for (unsigned j = 0; j < main.getNumResults(); ++j) {
    auto name = main.getResultAttrOfType<StringAttr>(j, attrs::kOutput);
    if (!name ||
        (name.getValue() != lossName && name.getValue() != kLossDenominator))
      continue;
    Operation *def = ret.getOperand(j).getDefiningOp();
    if (!def || !stageOf(def) || *stageOf(def) >= pp - 1 ||
        llvm::any_of(def->getUsers(),
                     [&](Operation *user) { return user != ret; }))
      continue;
    def->setAttr(attrs::kStage,
                 IntegerAttr::get(IntegerType::get(context, 64), pp - 1));
  }
}

/// How a stage's programs hold a parameter under tp: its type there and the
/// dim it is split along (-1: whole).
std::optional<std::pair<RankedTensorType, int64_t>>
tensorParallelLayout(PipelineTrainingStage &stage, llvm::StringRef name) {
  for (ModuleOp program : {*stage.forward, *stage.backward}) {
    auto fn = program.lookupSymbol<func::FuncOp>("main");
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (auto p = fn.getArgAttrOfType<StringAttr>(i, attrs::kParameter);
          p && p.getValue() == name) {
        auto split =
            fn.getArgAttrOfType<IntegerAttr>(i, attrs::kTensorParallelSplit);
        return std::make_pair(
            cast<RankedTensorType>(fn.getArgument(i).getType()),
            split ? split.getInt() : int64_t(-1));
      }
  }
  return std::nullopt;
}

/// Checks that every stage holding the tied weight \p t lays it out alike
/// over its tp group, and gives \p t the type of the block each tp rank
/// holds (what the stages' all-reduce of its gradient sums).
llvm::Error checkTiedLayouts(TiedParameter &t,
                             std::vector<PipelineTrainingStage> &stages,
                             int64_t tp) {
  auto describe = [&](int64_t dim) -> std::string {
    return dim < 0 ? "keeps it whole"
                   : "splits its dim " + std::to_string(dim) + " over " +
                         std::to_string(tp) + " ranks";
  };
  std::optional<std::pair<RankedTensorType, int64_t>> first;
  int64_t firstStage = -1;
  for (int64_t k : t.stages) {
    auto layout = tensorParallelLayout(stages[k], t.name);
    if (!layout)
      continue;
    if (!first) {
      first = layout;
      firstStage = k;
      continue;
    }
    if (layout->second != first->second || layout->first != first->first)
      return llvm::createStringError(
          llvm::inconvertibleErrorCode(),
          "parameter '" + t.name + "' is read by pipeline stages " +
              std::to_string(firstStage) + " and " + std::to_string(k) +
              " (tied weights), whose tensor-parallel plans lay it out "
              "differently: stage " +
              std::to_string(firstStage) + " " + describe(first->second) +
              ", stage " + std::to_string(k) + " " + describe(layout->second) +
              ", so the stages cannot sum its gradient block by block; drop "
              "--tp, or choose a --pp that keeps its readers on one stage");
  }
  if (first)
    t.type = first->first;
  return llvm::Error::success();
}

/// Attention fused as the planner prices it (autopar.attention keeps no
/// scores for the backward), as the one-program step fuses it, and the
/// model's own cross-entropy (an imported SoftmaxCrossEntropyLoss) likewise;
/// within tp groups too (their plans place the fused ops). A fused op goes
/// with its operands' stage. Returns what failed ("fusing the attention",
/// "fusing the cross-entropy"; the diagnostics are reported), or "".
std::string fuseKernels(ModuleOp module, const TrainingStepOptions &step) {
  MLIRContext *context = module.getContext();
  if (step.fuseAttention) {
    auto pm = PassManager::on<ModuleOp>(context);
    applyPassManagerCLOptionsIfAny(pm);
    FuseAttentionOptions fuse;
    fuse.maxHeadDim = step.attentionMaxHeadDim;
    fuse.headDimMultiple = step.attentionHeadDimMultiple;
    pm.addNestedPass<func::FuncOp>(createFuseAttention(fuse));
    if (failed(pm.run(module)))
      return "fusing the attention";
  }
  if (step.fuseCrossEntropy) {
    auto pm = PassManager::on<ModuleOp>(context);
    applyPassManagerCLOptionsIfAny(pm);
    pm.addNestedPass<func::FuncOp>(createFuseCrossEntropy());
    if (failed(pm.run(module)))
      return "fusing the cross-entropy";
  }
  return "";
}

/// The cross-entropy loss `--loss cross-entropy:OUTPUT` asks for, if any,
/// added as the cluster plan priced it (autopar-compile plans the model
/// with it). Returns "adding the loss" on failure (the diagnostics are
/// reported), or "".
std::string addRequestedLoss(ModuleOp module, const TrainingStepOptions &step) {
  auto pm = PassManager::on<ModuleOp>(module.getContext());
  // In a tp x pp stage too: the loss reads the logits as the stage's plan
  // left them (vocabulary-parallel under a column-parallel head).
  if (!addCrossEntropyLossPass(pm, step.loss, step.fuseCrossEntropy))
    return "";
  return failed(pm.run(module)) ? "adding the loss" : "";
}

/// fuseKernels, then addRequestedLoss (the eval graph's stages are placed
/// by ONNX node, so the loss comes after and goes with its inputs).
std::string fuseAttentionAndAddLoss(ModuleOp module,
                                    const TrainingStepOptions &step) {
  std::string what = fuseKernels(module, step);
  return what.empty() ? addRequestedLoss(module, step) : what;
}

/// The ONNX node an imported op comes from (the importer locates each op at
/// its node's name), or "" for ops the import or later passes made.
llvm::StringRef onnxNodeOf(Operation *op) {
  Location loc = op->getLoc();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location part : fused.getLocations())
      if (isa<NameLoc>(part)) {
        loc = part;
        break;
      }
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().getValue();
  return "";
}

/// The stages the planner placed the ops of each ONNX node of \p main on,
/// in block order (a node's ops may straddle a stage boundary).
llvm::StringMap<SmallVector<int64_t>> stagesOfNodes(func::FuncOp main) {
  llvm::StringMap<SmallVector<int64_t>> stages;
  for (Operation &op : main.getBody().front().without_terminator()) {
    auto stage = op.getAttrOfType<IntegerAttr>(attrs::kStage);
    llvm::StringRef node = onnxNodeOf(&op);
    if (stage && !node.empty())
      stages[node].push_back(stage.getInt());
  }
  return stages;
}

/// The names of the parameters (virtual) stage \p stage's programs hold,
/// with its stage's step \p step (which holds every chunk's).
llvm::StringSet<> parametersOf(PipelineTrainingStage &stage, ModuleOp step) {
  llvm::StringSet<> names;
  for (ModuleOp program : {step, *stage.forward, *stage.backward}) {
    auto fn = program.lookupSymbol<func::FuncOp>("main");
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (auto p = fn.getArgAttrOfType<StringAttr>(i, attrs::kParameter))
        names.insert(p.getValue());
  }
  return names;
}

/// Whether stage \p stage's programs read parameter \p name as ZeRO-3
/// blocks.
bool readsZeroBlocks(PipelineTrainingStage &stage, llvm::StringRef name) {
  for (ModuleOp program : {*stage.forward, *stage.backward}) {
    auto fn = program.lookupSymbol<func::FuncOp>("main");
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (auto p = fn.getArgAttrOfType<StringAttr>(i, attrs::kParameter);
          p && p.getValue() == name && fn.getArgAttr(i, attrs::kZeroBlocks))
        return true;
  }
  return false;
}

/// --eval-data for a pipeline: each stage's eval program (the model imported
/// again for one micro-batch with Dropout off and BatchNorm on its running
/// statistics, its ops placed on the stages where the planner placed the
/// step's ops of their ONNX node, \p nodeStages), which reads the
/// parameters its training stage holds, as that
/// stage holds them (tp blocks, ZeRO-3 blocks gathered where read). The last
/// stage returns the micro-batch's share of the loss: the numerator and the
/// denominator of a ratio, a sum as it is, or a mean divided by the number
/// of micro-batches, so that the runtime adds them up over the micro-batches
/// (and divides by the denominators' sum). Fills `eval` of every stage and
/// returns "", or returns why no eval program can be built (the artifact
/// records it; training does not need it).
std::string
buildEvalStages(MLIRContext &context, const PlanCandidate &plan,
                const PipelineTrainingOptions &options, const StepFacts &facts,
                const llvm::StringMap<SmallVector<int64_t>> &nodeStages,
                std::vector<PipelineTrainingStage> &stages) {
  const TrainingStepOptions &step = options.step;
  // A failure here costs --eval-data, not the training artifact: the
  // diagnostics become the reason.
  std::string diagnostics;
  ScopedDiagnosticHandler collect(&context, [&](Diagnostic &diag) {
    if (diagnostics.empty() && diag.getSeverity() == DiagnosticSeverity::Error)
      diagnostics = diag.str();
    return success();
  });
  auto because = [&](const std::string &what) {
    return what + (diagnostics.empty() ? "" : ": " + diagnostics);
  };
  ImportOptions importOptions = options.importOptions;
  importOptions.evalMode = true;
  importOptions.trainingStateUpdates = false;
  importOptions.batchRatio = options.globalBatch / plan.microBatchSize;
  for (const ArtifactArgument &arg : options.globalArguments) {
    if (arg.kind != ArtifactArgument::Kind::Input || arg.shape.empty())
      continue;
    SmallVector<int64_t> shape(arg.shape);
    shape[0] = plan.microBatchSize;
    importOptions.inputShapes[arg.name] = shape;
  }
  OwningOpRef<ModuleOp> module =
      importOnnxFile(&context, options.modelPath, importOptions);
  if (!module)
    return because("importing the model in eval mode failed");
  {
    auto pm = PassManager::on<ModuleOp>(&context);
    pm.addNestedPass<func::FuncOp>(createSinkMergingReshapes());
    if (failed(pm.run(*module)))
      return because("preparing the eval model for pipeline stages failed");
  }
  // The eval graph's ops go where the step's ops of their ONNX node went:
  // its segments may differ (BatchNorm on running statistics, Dropout
  // gone), its nodes do not. The rest follow their operands or users.
  // A node imported to the same ops in both modes (most: a Gemm, a
  // MatMul) places them one by one, as the step's; one imported otherwise
  // (BatchNorm) goes with the last stage of the step's ops.
  auto main = module->lookupSymbol<func::FuncOp>("main");
  {
    llvm::StringMap<SmallVector<Operation *>> opsOfNodes;
    for (Operation &op : main.getBody().front().without_terminator())
      if (llvm::StringRef node = onnxNodeOf(&op); !node.empty())
        opsOfNodes[node].push_back(&op);
    for (auto &[node, ops] : opsOfNodes) {
      auto it = nodeStages.find(node);
      if (it == nodeStages.end())
        continue;
      const SmallVector<int64_t> &placed = it->second;
      for (auto [i, op] : llvm::enumerate(ops))
        op->setAttr(attrs::kStage,
                    IntegerAttr::get(IntegerType::get(&context, 64),
                                     ops.size() == placed.size()
                                         ? placed[i]
                                         : *llvm::max_element(placed)));
    }
  }
  if (std::string what = fuseAttentionAndAddLoss(*module, step); !what.empty())
    return because(what + " of the eval graph failed");
  main = module->lookupSymbol<func::FuncOp>("main");
  if (!keepOnlyResult(main, facts.lossName))
    return "the eval graph has no output '" + facts.lossName + "'";
  {
    // The loss's parts, as the step's stages return them.
    auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
    Value loss = ret.getOperand(0);
    OpBuilder b(ret);
    Builder a(&context);
    SmallVector<Value> results;
    SmallVector<DictionaryAttr> resultAttrs{main.getResultAttrDict(0)};
    if (facts.kind == LossKind::Ratio) {
      SmallVector<Value> parameters;
      for (BlockArgument arg : main.getArguments())
        if (auto name = main.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                          attrs::kParameter);
            name && facts.trained.contains(name.getValue()))
          parameters.push_back(arg);
      LossParts parts = analyseLoss(main, loss, parameters);
      if (parts.kind != LossKind::Ratio)
        return "the eval graph's loss is not the ratio the step's is";
      results = {asScalar(b, ret.getLoc(), parts.numerator),
                 asScalar(b, ret.getLoc(), parts.denominator)};
      resultAttrs.push_back(a.getDictionaryAttr(
          {a.getNamedAttr(attrs::kOutput, a.getStringAttr(kLossDenominator)),
           a.getNamedAttr(attrs::kDType, a.getStringAttr("float32"))}));
    } else {
      results = {asScalar(b, ret.getLoc(), loss)};
    }
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    main.setType(FunctionType::get(&context, main.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    main.setAllResultAttrs(resultAttrs);
  }
  // With virtual stages, one eval program per virtual stage, as the
  // forwards.
  const int64_t numChunkStages = int64_t(stages.size());
  placeUnstagedOps(main, numChunkStages, facts.lossName);
  {
    auto pm = PassManager::on<ModuleOp>(&context);
    pm.addPass(createSplitPipelineStages());
    if (failed(pm.run(*module)))
      return because("splitting it into pipeline stages failed");
  }
  SmallVector<ModuleOp> stageModules(module->getOps<ModuleOp>());
  if (int64_t(stageModules.size()) != numChunkStages)
    return "the eval graph cuts into " + std::to_string(stageModules.size()) +
           " pipeline stages, the step into " + std::to_string(numChunkStages);
  for (auto [k, stage] : llvm::enumerate(stageModules)) {
    auto f = stage.lookupSymbol<func::FuncOp>("main");
    bool last = int64_t(k) == numChunkStages - 1;
    std::string what = (plan.virtualStages > 1 ? "virtual pipeline stage "
                                               : "pipeline stage ") +
                       std::to_string(k);
    for (unsigned j = 0; j < f.getNumResults(); ++j)
      if (auto name = f.getResultAttrOfType<StringAttr>(j, attrs::kOutput);
          name && name.getValue() == facts.lossName && !last)
        return "the eval graph's " + what +
               " computes the loss, not its last stage";
    // Each stage reads what its training stage holds.
    llvm::StringSet<> held =
        parametersOf(stages[k], *stages[k % size_t(plan.pp)].step);
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      if (auto name = f.getArgAttrOfType<StringAttr>(i, attrs::kParameter);
          name && !held.contains(name.getValue()))
        return "the eval graph's " + what + " reads parameter '" +
               name.getValue().str() + "', which the step's " + what +
               " does not hold";
    if (last && facts.kind == LossKind::Average) {
      // A mean over the micro-batch: its share of the batch's mean.
      auto ret = cast<func::ReturnOp>(f.getBody().front().getTerminator());
      for (unsigned j = 0; j < f.getNumResults(); ++j) {
        auto name = f.getResultAttrOfType<StringAttr>(j, attrs::kOutput);
        if (!name || name.getValue() != facts.lossName)
          continue;
        OpBuilder b(ret);
        Location loc = ret.getLoc();
        Value mean =
            tensor::ExtractOp::create(b, loc, ret.getOperand(j), ValueRange{});
        Value share = arith::MulFOp::create(
            b, loc, mean,
            arith::ConstantOp::create(
                b, loc,
                b.getFloatAttr(mean.getType(),
                               1.0 / double(plan.numMicroBatches))));
        ret.setOperand(
            j, tensor::FromElementsOp::create(
                   b, loc, ret.getOperand(j).getType(), ValueRange{share}));
      }
    }
    if (plan.tp > 1) {
      // Planned for the tp group as the training stage was, then required
      // to hold every parameter as that stage does.
      auto pm = PassManager::on<ModuleOp>(&context);
      pm.addPass(step.makePlanPass ? step.makePlanPass()
                                   : createLocalTensorParallelPlan(plan.tp));
      pm.addPass(createReplicateGraphIO());
      if (failed(pm.run(stage)))
        return because("planning the eval program of " + what + " for " +
                       std::to_string(plan.tp) +
                       " tensor-parallel ranks failed");
      f = stage.lookupSymbol<func::FuncOp>("main");
      if (llvm::Error err =
              partitionDifferentiated(stage, f, "the eval program of " + what,
                                      [](unsigned) { return false; }))
        return because(llvm::toString(std::move(err)));
      f = stage.lookupSymbol<func::FuncOp>("main");
      for (unsigned i = 0; i < f.getNumArguments(); ++i) {
        auto name = f.getArgAttrOfType<StringAttr>(i, attrs::kParameter);
        if (!name)
          continue;
        auto split =
            f.getArgAttrOfType<IntegerAttr>(i, attrs::kTensorParallelSplit);
        auto layout = tensorParallelLayout(stages[k], name.getValue());
        int64_t dim = split ? split.getInt() : -1;
        // Under ZeRO-3 the step's programs read the replica's block of
        // their tp block, which the eval program will gather below.
        auto type = cast<RankedTensorType>(f.getArgument(i).getType());
        if (plan.zeroStage >= 3 && plan.dp > 1 &&
            readsZeroBlocks(stages[k], name.getValue()))
          type = zeroShardType(type, plan.dp);
        auto describe = [](int64_t d, RankedTensorType t) {
          std::string text =
              d < 0 ? "whole" : "split along dim " + std::to_string(d);
          llvm::raw_string_ostream os(text);
          os << " (" << t << ")";
          return text;
        };
        if (layout && (layout->first != type || layout->second != dim))
          return "the eval program's tensor-parallel plan of " + what +
                 " holds parameter '" + name.getValue().str() + "' " +
                 describe(dim, type) + ", the step's " +
                 describe(layout->second, layout->first);
      }
    }
    // The blocks the stage's replicas hold, gathered where read.
    if (plan.zeroStage >= 3 && plan.dp > 1)
      readZeroBlocks(f, plan.dp, [&](BlockArgument arg) {
        auto name = f.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                   attrs::kParameter);
        return name && readsZeroBlocks(stages[k], name.getValue());
      });
  }
  for (auto [k, stage] : llvm::enumerate(stageModules)) {
    stage->remove();
    stages[k].eval = OwningOpRef<ModuleOp>(stage);
  }
  return "";
}

/// Stage \p k's step: the sums over the micro-batches (accumulators) and the
/// replicas normalised as one call on the whole batch, then the optimizer,
/// over the parameters of the stage's model chunks \p chunks (one without
/// virtual stages; chunks that read one parameter add into one
/// accumulator).
llvm::Error buildStep(MLIRContext &context,
                      ArrayRef<PipelineTrainingStage *> chunks, int64_t k,
                      const PlanCandidate &plan, const StepFacts &facts,
                      const PipelineTrainingOptions &options,
                      const llvm::StringSet<> &heldByAStage,
                      ArrayRef<TiedParameter> tied,
                      OwningOpRef<ModuleOp> &out) {
  Builder attrs(&context);
  Location loc = UnknownLoc::get(&context);
  // The chunks' programs, backwards first (where the accumulators are).
  SmallVector<func::FuncOp> backwards, programs;
  for (PipelineTrainingStage *chunk : chunks)
    backwards.push_back(chunk->backward->lookupSymbol<func::FuncOp>("main"));
  programs.append(backwards);
  for (PipelineTrainingStage *chunk : chunks)
    programs.push_back(chunk->forward->lookupSymbol<func::FuncOp>("main"));
  OwningOpRef<ModuleOp> module =
      ModuleOp::create(loc, "stage" + std::to_string(k));
  OpBuilder b = OpBuilder::atBlockEnd(module->getBody());
  shard::GridOp::create(b, loc, "autopar_grid",
                        ArrayRef<int64_t>{plan.dp, plan.tp, plan.pp});

  // Arguments: the trained parameters (from the backward's accumulators),
  // their sums, the loss's sums, and the data (which the forward reads;
  // listed here so that the step's loader fills them).
  SmallVector<Type> types;
  SmallVector<DictionaryAttr> argAttrs;
  SmallVector<std::pair<std::string, Type>> trained;
  llvm::StringSet<> accumulated;
  for (func::FuncOp backward : backwards)
    for (unsigned i = 0; i < backward.getNumArguments(); ++i) {
      auto name = backward.getArgAttrOfType<StringAttr>(i, attrs::kAccumulator);
      if (!name || !accumulated.insert(name.getValue()).second)
        continue;
      std::string parameter =
          name.getValue().drop_back(llvm::StringRef(".grad").size()).str();
      Type type = backward.getArgument(i).getType();
      trained.push_back({parameter, type});
    }
  // The parameters' own attributes, from the stage's programs.
  auto parameterAttrs = [&](llvm::StringRef name) -> DictionaryAttr {
    for (func::FuncOp fn : programs)
      for (unsigned i = 0; i < fn.getNumArguments(); ++i)
        if (auto p = fn.getArgAttrOfType<StringAttr>(i, attrs::kParameter);
            p && p.getValue() == name)
          return fn.getArgAttrDict(i);
    return {};
  };
  for (auto &[name, type] : trained) {
    DictionaryAttr dict = parameterAttrs(name);
    // ZeRO-3: the step holds the block its programs read.
    types.push_back(dict && dict.get(attrs::kZeroBlocks)
                        ? zeroShardType(cast<RankedTensorType>(type), plan.dp)
                        : type);
    // A tied weight an earlier stage holds too (and counts in the norm).
    // With virtual stages, the first stage that runs a chunk holding it.
    if (llvm::any_of(tied, [&, &name = name](const TiedParameter &t) {
          int64_t first = plan.pp;
          for (int64_t v : t.stages)
            first = std::min(first, v % plan.pp);
          return t.name == name && first != k;
        })) {
      NamedAttrList list(dict);
      list.set(attrs::kTiedCopy, attrs.getUnitAttr());
      dict = list.getDictionary(&context);
    }
    argAttrs.push_back(dict);
  }
  // The stage's other parameters (frozen ones, buffers such as a causal
  // mask) and, on stage 0, those no stage reads: not read by the step, but
  // the stage's state, which it saves and writes out.
  auto typeOf = [&](llvm::StringRef dtype,
                    ArrayRef<int64_t> shape) -> RankedTensorType {
    Type element =
        dtype == "float32"    ? Type(b.getF32Type())
        : dtype == "float64"  ? Type(b.getF64Type())
        : dtype == "float16"  ? Type(b.getF16Type())
        : dtype == "bfloat16" ? Type(b.getBF16Type())
        : dtype == "bool"     ? Type(b.getI1Type())
        : dtype.starts_with("int")
            ? Type(b.getIntegerType(std::stoi(dtype.drop_front(3).str())))
        : dtype.starts_with("uint")
            ? Type(b.getIntegerType(std::stoi(dtype.drop_front(4).str())))
            : Type(b.getF32Type());
    return RankedTensorType::get(shape, element);
  };
  llvm::StringSet<> listed;
  for (auto &[name, type] : trained)
    listed.insert(name);
  for (func::FuncOp fn : programs)
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (auto p = fn.getArgAttrOfType<StringAttr>(i, attrs::kParameter);
          p && listed.insert(p.getValue()).second) {
        types.push_back(fn.getArgument(i).getType());
        argAttrs.push_back(fn.getArgAttrDict(i));
      }
  if (k == 0)
    for (const ArtifactArgument &arg : options.globalArguments)
      if (arg.kind == ArtifactArgument::Kind::Parameter &&
          !heldByAStage.contains(arg.name) && listed.insert(arg.name).second) {
        types.push_back(typeOf(arg.dtype, arg.shape));
        argAttrs.push_back(attrs.getDictionaryAttr(
            {attrs.getNamedAttr(attrs::kParameter,
                                attrs.getStringAttr(arg.name)),
             attrs.getNamedAttr(attrs::kDType,
                                attrs.getStringAttr(arg.dtype))}));
      }
  size_t numParameters = types.size();
  for (auto &[name, type] : trained) {
    types.push_back(type);
    argAttrs.push_back(attrs.getDictionaryAttr(
        {attrs.getNamedAttr(attrs::kAccumulator,
                            attrs.getStringAttr(gradientAccumulator(name))),
         attrs.getNamedAttr(attrs::kDType,
                            attrs.getStringAttr(dtypeOf(type)))}));
  }
  bool last = k == plan.pp - 1;
  auto f32Scalar = RankedTensorType::get({}, b.getF32Type());
  SmallVector<std::string> lossSums;
  if (last) {
    lossSums.push_back(kLossSum.str());
    if (facts.kind == LossKind::Ratio)
      lossSums.push_back(kLossDenominator.str());
  }
  for (const std::string &name : lossSums) {
    types.push_back(f32Scalar);
    argAttrs.push_back(attrs.getDictionaryAttr(
        {attrs.getNamedAttr(attrs::kAccumulator, attrs.getStringAttr(name)),
         attrs.getNamedAttr(attrs::kDType, attrs.getStringAttr("float32"))}));
  }
  // As every program of a pipeline, one micro-batch per call: the rank
  // holds its micro-batches one after the other (the forward reads block
  // m), though the step's code does not read them.
  // So are the labels of the loss --loss cross-entropy:OUTPUT adds (an
  // input of the last stage's forward, not of the model): the logits
  // without their classes, in int64.
  std::vector<ArtifactArgument> inputs;
  for (const ArtifactArgument &arg : options.globalArguments)
    if (arg.kind == ArtifactArgument::Kind::Input)
      inputs.push_back(arg);
  if (std::string output = crossEntropyOutput(options.step.loss);
      !output.empty())
    for (const ArtifactArgument &arg : options.globalArguments)
      if (arg.kind == ArtifactArgument::Kind::Output && arg.name == output &&
          arg.shape.size() >= 2) {
        ArtifactArgument labels = arg;
        labels.kind = ArtifactArgument::Kind::Input;
        labels.name = "labels";
        labels.dtype = "int64";
        labels.shape.pop_back();
        inputs.push_back(std::move(labels));
      }
  for (const ArtifactArgument &arg : inputs) {
    SmallVector<int64_t> shape(arg.shape);
    shape[0] = plan.microBatchSize;
    types.push_back(typeOf(arg.dtype, shape));
    argAttrs.push_back(attrs.getDictionaryAttr(
        {attrs.getNamedAttr(attrs::kInput, attrs.getStringAttr(arg.name)),
         attrs.getNamedAttr(attrs::kDType, attrs.getStringAttr(arg.dtype))}));
  }
  // fp16's dynamic loss scaler: every stage holds its state and updates it
  // alike (the overflow is the global norm's, summed over the stages), so
  // that the stages agree on the scale and on skipping a step.
  if (dynamicLossScaleOf(options.step)) {
    types.push_back(f32Scalar);
    argAttrs.push_back(attrs.getDictionaryAttr(
        {attrs.getNamedAttr(attrs::kOptimizerState,
                            attrs.getStringAttr("scale_offset")),
         attrs.getNamedAttr(attrs::kStateOf,
                            attrs.getStringAttr("loss_scaler")),
         attrs.getNamedAttr(attrs::kDType, attrs.getStringAttr("float32"))}));
  }
  auto main = func::FuncOp::create(b, loc, "main",
                                   FunctionType::get(&context, types, {}));
  main.setAllArgAttrs(argAttrs);
  Block *entry = main.addEntryBlock();
  b.setInsertionPointToStart(entry);
  size_t n = trained.size();

  // The loss's sums: every stage learns them from the last (one all-reduce
  // over pp of [sum, denominator], the others adding zeros), then over dp.
  // With tied weights that all-reduce comes after dp's and carries their
  // gradients too (below): a collective whose result a stage discards would
  // be erased as dead code there, and its peers would wait for it.
  auto f32 = b.getF32Type();
  auto pair = RankedTensorType::get({2}, f32);
  Value zero = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f));
  Value sum = zero, den = zero;
  if (last) {
    sum = tensor::ExtractOp::create(
        b, loc, entry->getArgument(numParameters + n), ValueRange{});
    if (facts.kind == LossKind::Ratio)
      den = tensor::ExtractOp::create(
          b, loc, entry->getArgument(numParameters + n + 1), ValueRange{});
  }
  Value sums =
      tensor::FromElementsOp::create(b, loc, pair, ValueRange{sum, den});
  if (plan.pp > 1 && tied.empty())
    sums = shard::AllReduceOp::create(b, loc, pair, "autopar_grid",
                                      ArrayRef<shard::GridAxis>{2}, sums,
                                      shard::ReductionKind::Sum);
  SmallVector<Value> gradients;
  for (size_t i = 0; i < n; ++i)
    gradients.push_back(entry->getArgument(numParameters + i));
  // ZeRO-2: a gradient ZeRO shards is reduce-scattered over the replicas
  // once per step, after the micro-batches' accumulation (as the one-program
  // step does), each replica keeping its block (dim 0).
  auto scatteredOverReplicas = [&](RankedTensorType type) {
    return plan.zeroStage >= 2 && isZeroSharded(type, plan.dp);
  };
  if (plan.dp > 1) {
    // Over the replicas: the gradients in one bucket per element type
    // (DDP's), the loss's pair riding along. A tp rank's gradients are its
    // blocks already, so a bucket of them stays this rank's.
    SmallVector<Value> values(gradients);
    values.push_back(sums);
    SmallVector<unsigned> reduced, scattered;
    for (unsigned i = 0; i < values.size(); ++i)
      (i < gradients.size() && scatteredOverReplicas(
                                   cast<RankedTensorType>(values[i].getType()))
           ? scattered
           : reduced)
          .push_back(i);
    allReduceInBuckets(b, loc, "autopar_grid", 0, values, reduced);
    if (!scattered.empty()) {
      SmallVector<Value> whole;
      for (unsigned i : scattered)
        whole.push_back(values[i]);
      SmallVector<Value> blocks = reduceScatterBlocks(
          b, loc, FlatSymbolRefAttr::get(&context, "autopar_grid"), plan.dp,
          whole);
      for (auto [i, block] : llvm::zip(scattered, blocks))
        values[i] = block;
    }
    sums = values.pop_back_val();
    gradients.assign(values.begin(), values.end());
  }
  if (!tied.empty()) {
    // Tied weights: each copy's gradient is the sum over the stages that
    // read it. Every stage takes part in the one all-reduce over pp (a
    // bucket of every tied gradient, zeros for those it does not hold, and
    // the loss's sums, which every stage reads: so no stage erases it), as
    // collectives over an axis need all its ranks.
    SmallVector<Value> values;
    SmallVector<std::optional<size_t>> mine;
    for (const TiedParameter &t : tied) {
      std::optional<size_t> index;
      for (size_t i = 0; i < n; ++i)
        if (trained[i].first == t.name)
          index = i;
      mine.push_back(index);
      // The holders' gradients are blocks under ZeRO-2: zeros alike.
      RankedTensorType type = scatteredOverReplicas(t.type)
                                  ? zeroShardType(t.type, plan.dp)
                                  : t.type;
      // In f32, the loss's type, so that one bucket holds them all.
      Value gradient =
          index ? gradients[*index]
                : arith::ConstantOp::create(
                      b, loc, type,
                      DenseElementsAttr::get(
                          type, b.getZeroAttr(type.getElementType())));
      if (type.getElementType() != f32)
        gradient = arith::ExtFOp::create(
            b, loc, RankedTensorType::get(type.getShape(), f32), gradient);
      values.push_back(gradient);
    }
    values.push_back(sums);
    SmallVector<unsigned> all(values.size());
    std::iota(all.begin(), all.end(), 0u);
    allReduceInBuckets(b, loc, "autopar_grid", 2, values, all);
    sums = values.pop_back_val();
    for (auto [j, index] : llvm::enumerate(mine))
      if (index) {
        Value gradient = values[j];
        auto type = cast<RankedTensorType>(gradients[*index].getType());
        if (type.getElementType() != f32)
          gradient = arith::TruncFOp::create(b, loc, type, gradient);
        gradients[*index] = gradient;
      }
  }
  auto element = [&](int64_t i) -> Value {
    return tensor::ExtractOp::create(
        b, loc, sums, ValueRange{arith::ConstantIndexOp::create(b, loc, i)});
  };
  // The normaliser: sum(den) for a ratio, the number of calls for a mean.
  Value scale;
  if (facts.kind == LossKind::Ratio)
    scale = arith::DivFOp::create(
        b, loc, arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f)),
        element(1));
  else if (facts.kind == LossKind::Average)
    scale = arith::ConstantOp::create(
        b, loc,
        b.getF32FloatAttr(1.0f / float(plan.numMicroBatches * plan.dp)));
  auto scaled = [&](Value t) -> Value {
    if (!scale)
      return t;
    auto type = cast<RankedTensorType>(t.getType());
    Value s = scale;
    if (type.getElementType() != f32)
      s = arith::TruncFOp::create(b, loc, type.getElementType(), s);
    Value init =
        tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
    AffineMap id = b.getMultiDimIdentityMap(type.getRank());
    return linalg::GenericOp::create(
               b, loc, TypeRange{type}, ValueRange{t}, ValueRange{init},
               ArrayRef<AffineMap>{id, id},
               SmallVector<utils::IteratorType>(type.getRank(),
                                                utils::IteratorType::parallel),
               [&](OpBuilder &nb, Location nl, ValueRange args) {
                 linalg::YieldOp::create(
                     nb, nl,
                     ValueRange{arith::MulFOp::create(nb, nl, args[0], s)});
               })
        .getResult(0);
  };
  Value lossValue =
      tensor::FromElementsOp::create(b, loc, f32Scalar, ValueRange{element(0)});
  SmallVector<Value> results{scaled(lossValue)};
  SmallVector<DictionaryAttr> resultAttrs{attrs.getDictionaryAttr(
      {attrs.getNamedAttr(attrs::kOutput, attrs.getStringAttr(facts.lossName)),
       attrs.getNamedAttr(attrs::kDType, attrs.getStringAttr("float32"))})};
  for (auto [i, g] : llvm::enumerate(gradients)) {
    results.push_back(scaled(g));
    const std::string &name = trained[i].first;
    SmallVector<NamedAttribute> dict{
        attrs.getNamedAttr(attrs::kGradient, attrs.getStringAttr(name)),
        attrs.getNamedAttr(attrs::kOutput,
                           attrs.getStringAttr(name + ".grad"))};
    if (Attribute dtype = argAttrs[i].get(attrs::kDType))
      dict.push_back(attrs.getNamedAttr(attrs::kDType, dtype));
    resultAttrs.push_back(attrs.getDictionaryAttr(dict));
  }
  func::ReturnOp::create(b, loc, results);
  main.setType(
      FunctionType::get(&context, types, ValueRange(results).getTypes()));
  main.setAllResultAttrs(resultAttrs);
  for (PipelineTrainingStage *chunk : chunks)
    chunk->trainedParameters = int64_t(n);
  ApplyOptimizerOptions o = optimizerOptions(options.step.config);
  setLossScaling(o, options.step);
  o.pipelineStages = plan.pp;
  // ZeRO-1 (DeepSpeed's pipeline engine's only stage) and ZeRO-2: the
  // stage's replicas each update a block of its optimizer states (from
  // their block of the gradient, under ZeRO-2) and gather the parameters.
  o.zeroStage = plan.zeroStage;
  o.dataParallel = plan.dp;
  auto pm = PassManager::on<ModuleOp>(&context);
  applyPassManagerCLOptionsIfAny(pm);
  pm.addPass(createApplyOptimizer(o));
  if (failed(pm.run(*module)))
    return error("adding the optimizer to pipeline stage " + llvm::Twine(k) +
                 " failed (see the diagnostics above)");
  out = std::move(module);
  return llvm::Error::success();
}

} // namespace

llvm::Expected<std::vector<PipelineTrainingStage>>
buildPipelineTraining(MLIRContext &context, const PlanCandidate &plan,
                      const PipelineTrainingOptions &options) {
  const TrainingStepOptions &step = options.step;
  int64_t microBatch = plan.microBatchSize;
  if (microBatch * plan.numMicroBatches * plan.dp != options.globalBatch)
    return error(llvm::Twine(plan.dp) + " replicas of " +
                 llvm::Twine(plan.numMicroBatches) + " micro-batches of " +
                 llvm::Twine(microBatch) + " do not make the global batch " +
                 llvm::Twine(options.globalBatch));

  // The model for one micro-batch.
  ImportOptions perMicroBatch = options.importOptions;
  perMicroBatch.batchRatio = options.globalBatch / microBatch;
  perMicroBatch.trainingStateUpdates = true;
  // Replicas share BatchNorm's batch statistics (SyncBatchNorm's), as in
  // the one-program step.
  perMicroBatch.dataParallelReplicas = plan.dp;
  for (const ArtifactArgument &arg : options.globalArguments) {
    if (arg.kind != ArtifactArgument::Kind::Input)
      continue;
    if (arg.shape.empty() || arg.shape[0] != options.globalBatch)
      return error("input '" + arg.name + "' does not have the global batch (" +
                   llvm::Twine(options.globalBatch) +
                   ") as its leading dim, so it cannot be cut into "
                   "micro-batches for the pipeline");
    SmallVector<int64_t> shape(arg.shape);
    shape[0] = microBatch;
    perMicroBatch.inputShapes[arg.name] = shape;
  }
  OwningOpRef<ModuleOp> module =
      importOnnxFile(&context, options.modelPath, perMicroBatch);
  if (!module)
    return error("importing " + options.modelPath + " for a micro-batch of " +
                 llvm::Twine(microBatch) +
                 " failed (see the diagnostics above)");
  {
    auto pm = PassManager::on<ModuleOp>(&context);
    applyPassManagerCLOptionsIfAny(pm);
    pm.addNestedPass<func::FuncOp>(createSinkMergingReshapes());
    if (failed(pm.run(*module)))
      return error("preparing " + options.modelPath +
                   " for pipeline stages failed (see the diagnostics above)");
  }
  auto main = module->lookupSymbol<func::FuncOp>("main");
  // The state the forward updates (BatchNorm's running statistics): each
  // stage's forward returns the new values of what it updates, and the
  // runtime carries them from one micro-batch to the next, as the
  // one-program step does.
  SmallVector<std::pair<Value, DictionaryAttr>> stateUpdates;
  {
    auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
    for (unsigned j = 0; j < main.getNumResults(); ++j)
      if (main.getResultAttr(j, attrs::kUpdate))
        stateUpdates.push_back({ret.getOperand(j), main.getResultAttrDict(j)});
  }

  // The loss `--loss cross-entropy:OUTPUT` asks for, and the loss alone
  // returned, as the cluster plan was made (the planner prices the added
  // loss, and a training plan's only result is the loss): the segments
  // that the plan's stages map onto are the plan's.
  if (std::string what = addRequestedLoss(*module, step); !what.empty())
    return error(what + " of " + options.modelPath +
                 " failed (see the diagnostics above)");
  std::string lossName =
      crossEntropyOutput(step.loss).empty() ? step.loss : "loss";
  main = module->lookupSymbol<func::FuncOp>("main");
  if (lossName.empty()) {
    SmallVector<std::string> scalars;
    for (unsigned j = 0; j < main.getNumResults(); ++j) {
      auto type = dyn_cast<RankedTensorType>(main.getResultTypes()[j]);
      auto name = main.getResultAttrOfType<StringAttr>(j, attrs::kOutput);
      if (type && name && isa<FloatType>(type.getElementType()) &&
          type.getNumElements() == 1)
        scalars.push_back(name.getValue().str());
    }
    if (scalars.size() != 1)
      return error("pipeline training needs one loss: name it with --loss "
                   "NAME (the float scalar outputs are " +
                   llvm::Twine(scalars.size()) + ")");
    lossName = scalars.front();
  }
  if (!keepOnlyResult(main, lossName))
    return error("--loss " + lossName +
                 ": the model has no output of that name");
  // The stages of the forward, as the planner placed them; then attention
  // and the model's own loss fused, each fused op in its operands' stage.
  if (llvm::Error err = assignPipelineStages(main, plan))
    return std::move(err);
  llvm::StringMap<SmallVector<int64_t>> nodeStages = stagesOfNodes(main);
  if (std::string what = fuseKernels(*module, step); !what.empty())
    return error(what + " of " + options.modelPath +
                 " failed (see the diagnostics above)");
  main = module->lookupSymbol<func::FuncOp>("main");
  // What is trained, as one rank trains it, and how the loss adds up.
  StepFacts facts;
  facts.lossName = lossName;
  auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
  Value loss = ret.getOperand(0);
  {
    SmallVector<llvm::GlobPattern> globs;
    for (const std::string &glob : step.freeze) {
      auto pattern = llvm::GlobPattern::create(glob);
      if (!pattern)
        return error("--freeze " + glob + ": " +
                     llvm::toString(pattern.takeError()));
      globs.push_back(std::move(*pattern));
    }
    SmallVector<Value> candidates;
    for (BlockArgument arg : main.getArguments()) {
      auto name = main.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    attrs::kParameter);
      if (!name || !isFloatTensor(arg.getType()) ||
          llvm::any_of(globs, [&](const llvm::GlobPattern &g) {
            return g.match(name.getValue());
          }))
        continue;
      candidates.push_back(arg);
    }
    llvm::DenseSet<Value> active = findActiveValues(main, candidates, loss);
    SmallVector<Value> trainedValues;
    for (Value arg : candidates)
      if (active.contains(arg)) {
        trainedValues.push_back(arg);
        facts.trained.insert(
            main.getArgAttrOfType<StringAttr>(
                    cast<BlockArgument>(arg).getArgNumber(), attrs::kParameter)
                .getValue());
      }
    if (trainedValues.empty())
      return error("the loss '" + lossName +
                   "' does not depend on any float parameter, so there is "
                   "nothing to train");
    LossParts parts = analyseLoss(main, loss, trainedValues);
    facts.kind = parts.kind;
    if (parts.kind == LossKind::Ratio) {
      // The stages compute the numerator and the denominator; the step
      // divides their sums.
      OpBuilder b(ret);
      Value num = asScalar(b, ret.getLoc(), parts.numerator);
      Value den = asScalar(b, ret.getLoc(), parts.denominator);
      Builder a(&context);
      func::ReturnOp::create(b, ret.getLoc(), ValueRange{num, den});
      DictionaryAttr lossAttrs = main.getResultAttrDict(0);
      ret.erase();
      main.setType(FunctionType::get(&context, main.getArgumentTypes(),
                                     {num.getType(), den.getType()}));
      main.setAllResultAttrs(ArrayRef<DictionaryAttr>{
          lossAttrs,
          a.getDictionaryAttr(
              {a.getNamedAttr(attrs::kOutput,
                              a.getStringAttr(kLossDenominator)),
               a.getNamedAttr(attrs::kDType, a.getStringAttr("float32"))})});
    } else if (cast<RankedTensorType>(loss.getType()).getRank() > 0) {
      OpBuilder b(ret);
      ret->setOperand(0, asScalar(b, ret.getLoc(), loss));
      main.setType(FunctionType::get(&context, main.getArgumentTypes(),
                                     ret->getOperandTypes()));
    }
    if (!stateUpdates.empty()) {
      // The updates after the loss's results.
      auto last = cast<func::ReturnOp>(main.getBody().front().getTerminator());
      SmallVector<Value> values(last.getOperands());
      SmallVector<DictionaryAttr> dicts;
      for (unsigned j = 0; j < main.getNumResults(); ++j)
        dicts.push_back(main.getResultAttrDict(j));
      for (auto &[value, dict] : stateUpdates) {
        values.push_back(value);
        dicts.push_back(dict);
      }
      OpBuilder b(last);
      func::ReturnOp::create(b, last.getLoc(), values);
      last.erase();
      main.setType(FunctionType::get(&context, main.getArgumentTypes(),
                                     ValueRange(values).getTypes()));
      main.setAllResultAttrs(dicts);
    }
  }

  // With virtual stages the forward is cut into pp * v stages, stage s
  // running virtual stages s, s + pp, ... (as the plan placed them).
  const int64_t numChunkStages = plan.pp * plan.virtualStages;
  if (int64_t(plan.stages.size()) != numChunkStages)
    return error("the plan places " + llvm::Twine(plan.stages.size()) +
                 " pipeline stages, but " + llvm::Twine(plan.pp) +
                 " stages of " + llvm::Twine(plan.virtualStages) +
                 " model chunks each need " + llvm::Twine(numChunkStages));
  placeUnstagedOps(main, numChunkStages, lossName);

  {
    auto pm = PassManager::on<ModuleOp>(&context);
    applyPassManagerCLOptionsIfAny(pm);
    pm.addPass(createSplitPipelineStages());
    if (failed(pm.run(*module)))
      return error("splitting " + options.modelPath +
                   " into pipeline stages failed (see the diagnostics above)");
  }
  SmallVector<ModuleOp> stageModules(module->getOps<ModuleOp>());
  if (int64_t(stageModules.size()) != numChunkStages)
    return error("the plan has " + llvm::Twine(numChunkStages) +
                 (plan.virtualStages > 1 ? " virtual" : "") +
                 " pipeline stages, but its ops cover " +
                 llvm::Twine(stageModules.size()));
  // The loss must come out of the last stage: a stage after it would hold
  // nothing the loss depends on.
  for (auto [k, stage] : llvm::enumerate(stageModules)) {
    auto f = stage.lookupSymbol<func::FuncOp>("main");
    for (unsigned j = 0; j < f.getNumResults(); ++j)
      if (auto name = f.getResultAttrOfType<StringAttr>(j, attrs::kOutput);
          name && name.getValue() == lossName &&
          int64_t(k) != numChunkStages - 1)
        return error(
            (plan.virtualStages > 1 ? "virtual pipeline stage "
                                    : "pipeline stage ") +
            llvm::Twine(k) + " computes the loss, but the plan has " +
            llvm::Twine(numChunkStages) +
            (plan.virtualStages > 1 ? " virtual" : "") +
            " stages: the stages after it would hold nothing the loss "
            "depends on, so they would train nothing; choose fewer stages " +
            (plan.virtualStages > 1
                 ? "or fewer virtual stages (pp x virtual stages " +
                       llvm::Twine(k + 1) + " or fewer)"
                 : "(--pp " + llvm::Twine(k + 1) + " or fewer)"));
  }
  // A trained parameter several stages read (tied embeddings: the token
  // table and the language-model head) is held by each of them, and its
  // gradient summed over them (Megatron's embedding group).
  std::map<std::string, int64_t> firstStage;
  std::map<std::string, TiedParameter> tiedByName;
  for (auto [k, stage] : llvm::enumerate(stageModules)) {
    auto f = stage.lookupSymbol<func::FuncOp>("main");
    for (unsigned i = 0; i < f.getNumArguments(); ++i)
      if (auto name = f.getArgAttrOfType<StringAttr>(i, attrs::kParameter)) {
        auto [it, inserted] =
            firstStage.try_emplace(name.getValue().str(), int64_t(k));
        if (inserted || !facts.trained.contains(name.getValue()))
          continue;
        TiedParameter &tied = tiedByName[name.getValue().str()];
        tied.name = name.getValue().str();
        tied.type = cast<RankedTensorType>(f.getArgument(i).getType());
        if (tied.stages.empty())
          tied.stages.push_back(it->second);
        tied.stages.push_back(int64_t(k));
      }
  }
  std::vector<TiedParameter> tied;
  for (auto &[name, t] : tiedByName)
    tied.push_back(t);

  // Tensor parallelism within the stages: each stage's forward is planned
  // for one tp group and annotated before it is differentiated, as the
  // one-program step's is (buildTrainingStepPipeline); cutStage partitions
  // it. The stage's inputs and outputs stay whole: they travel between the
  // stages' tp ranks one to one.
  if (plan.tp > 1)
    for (auto [k, stage] : llvm::enumerate(stageModules)) {
      auto pm = PassManager::on<ModuleOp>(&context);
      applyPassManagerCLOptionsIfAny(pm);
      // As the one-program step plans its forward: without
      // autopar-expose-projection-parts, so that a parameter keeps the
      // model's shape (the checkpoint's and the runtime's).
      pm.addPass(step.makePlanPass ? step.makePlanPass()
                                   : createLocalTensorParallelPlan(plan.tp));
      pm.addPass(createReplicateGraphIO());
      if (failed(pm.run(stage)))
        return error("planning pipeline stage " + llvm::Twine(k) + " for " +
                     llvm::Twine(plan.tp) +
                     " tensor-parallel ranks failed (see the diagnostics "
                     "above)");
    }

  std::vector<PipelineTrainingStage> stages(numChunkStages);
  for (auto [k, stage] : llvm::enumerate(stageModules))
    if (llvm::Error err =
            cutStage(stage, k, numChunkStages, facts, plan.recompute,
                     plan.tp > 1, step, stages[k]))
      return std::move(err);
  // Under tp, each stage planned its copy of a tied weight on its own. The
  // stages' all-reduce of its gradient sums a tp rank's block with the
  // blocks of the same tp rank in the other stages, so every holder must
  // cut it alike (as Megatron's vocabulary-parallel embedding and output
  // layer both split the vocabulary); the stages that do not hold it then
  // add zeros of that block.
  if (plan.tp > 1)
    for (TiedParameter &t : tied)
      if (llvm::Error err = checkTiedLayouts(t, stages, plan.tp))
        return std::move(err);
  // ZeRO-3: a stage's replicas each hold a block (dim 0) of each trained
  // parameter ZeRO shards; the forward gathers it before its first use, and
  // the backward again (once per micro-batch each, as the one-program step's
  // micro-batches do), so that only the block is held between them.
  if (plan.zeroStage >= 3 && plan.dp > 1)
    for (PipelineTrainingStage &stage : stages)
      for (ModuleOp program : {*stage.forward, *stage.backward}) {
        auto fn = program.lookupSymbol<func::FuncOp>("main");
        readZeroBlocks(fn, plan.dp, [&](BlockArgument arg) {
          auto type = dyn_cast<RankedTensorType>(arg.getType());
          return type && fn.getArgAttr(arg.getArgNumber(), attrs::kParameter) &&
                 fn.getArgAttr(arg.getArgNumber(), attrs::kTrainable) &&
                 isZeroSharded(type, plan.dp);
        });
      }
  llvm::StringSet<> heldByAStage;
  for (auto &[name, stage] : firstStage)
    heldByAStage.insert(name);
  // The weights tied across stages, not only across the chunks of one
  // stage (which add into one accumulator): their gradients are summed over
  // pp.
  std::vector<TiedParameter> acrossStages;
  for (const TiedParameter &t : tied)
    if (llvm::any_of(t.stages, [&](int64_t v) {
          return v % plan.pp != t.stages.front() % plan.pp;
        }))
      acrossStages.push_back(t);
  for (int64_t k = 0; k < plan.pp; ++k) {
    SmallVector<PipelineTrainingStage *> chunks;
    for (int64_t v = k; v < numChunkStages; v += plan.pp)
      chunks.push_back(&stages[v]);
    if (llvm::Error err = buildStep(context, chunks, k, plan, facts, options,
                                    heldByAStage, acrossStages, stages[k].step))
      return std::move(err);
  }
  std::string evalUnavailable =
      buildEvalStages(context, plan, options, facts, nodeStages, stages);
  for (PipelineTrainingStage &stage : stages) {
    stage.evalUnavailable = evalUnavailable;
    if (!evalUnavailable.empty())
      stage.eval = nullptr;
  }
  return stages;
}

llvm::json::Object
pipelineCollectives(std::vector<PipelineTrainingStage> &stages, int64_t pp,
                    int64_t microBatches) {
  // The largest over the stages, count by count.
  CollectiveTally most;
  for (int64_t k = 0; k < pp; ++k) {
    CollectiveTally mine = stepCollectiveTally(*stages[k].step);
    // Each micro-batch's activations and cotangents, one call per tensor,
    // through each of the stage's chunks.
    SmallVector<ModuleOp> programs;
    for (size_t v = size_t(k); v < stages.size(); v += size_t(pp))
      programs.append({*stages[v].forward, *stages[v].backward});
    for (ModuleOp program : programs) {
      // Its tensor-parallel collectives, once per micro-batch.
      for (auto &[axis, ops] : stepCollectiveTally(program))
        for (auto &[op, counts] : ops) {
          auto &[calls, bytes] = mine[axis][op];
          calls += double(microBatches) * counts.first;
          bytes += double(microBatches) * counts.second;
        }
      auto main = program.lookupSymbol<func::FuncOp>("main");
      auto count = [&](Type type, const char *op) {
        auto tensor = cast<RankedTensorType>(type);
        auto &[calls, bytes] = mine["pp"][op];
        calls += double(microBatches);
        bytes += double(microBatches) * double(tensor.getNumElements()) *
                 double(tensor.getElementTypeBitWidth() / 8);
      };
      for (unsigned i = 0; i < main.getNumArguments(); ++i)
        if (main.getArgAttr(i, attrs::kActivationIn))
          count(main.getArgumentTypes()[i], "recv");
      for (unsigned j = 0; j < main.getNumResults(); ++j)
        if (main.getResultAttr(j, attrs::kActivationOut))
          count(main.getResultTypes()[j], "send");
    }
    for (auto &[axis, ops] : mine)
      for (auto &[op, counts] : ops) {
        auto &best = most[axis][op];
        best.first = std::max(best.first, counts.first);
        best.second = std::max(best.second, counts.second);
      }
  }
  return collectivesJson(most);
}

llvm::FailureOr<TrainedSummary> writePipelineTrainingArtifact(
    std::vector<PipelineTrainingStage> &stages, const PlanCandidate &plan,
    const TrainingArtifactOptions &options, std::string &error) {
  auto fail = [&](const llvm::Twine &message) {
    error = message.str();
    return failure();
  };
  auto weights = locateInitializers(options.modelPath);
  if (!weights)
    return fail(llvm::toString(weights.takeError()));
  if (std::error_code ec = llvm::sys::fs::create_directories(options.outputDir))
    return fail("cannot create " + options.outputDir + ": " + ec.message());

  ArtifactDescription description;
  std::vector<ArtifactProgram> phases;
  TrainedSummary trained;
  for (auto [k, stage] : llvm::enumerate(stages)) {
    // Chunk c of stage s is virtual stage c * pp + s: its programs are
    // stage<s>.chunk<c>.forward and .backward, with `stage` the virtual
    // stage; stage s's step is stage<s>, as without virtual stages.
    bool hasStep = int64_t(k) < plan.pp;
    std::string name = "stage" + std::to_string(k);
    std::string phaseName = name;
    if (plan.virtualStages > 1)
      phaseName = "stage" + std::to_string(int64_t(k) % plan.pp) + ".chunk" +
                  std::to_string(int64_t(k) / plan.pp);
    MLIRContext *context = stage.forward->getContext();
    // The step's collectives over dp, tp and pp; under tensor parallelism
    // the forward's and the backward's over tp too, and BatchNorm's over dp
    // (the replicas share their batch statistics).
    // A pipeline's eval programs run on CPU ranks, as its trainer does.
    if (options.gpu)
      stage.eval = nullptr;
    SmallVector<ModuleOp> programs{*stage.forward, *stage.backward};
    if (hasStep)
      programs.push_back(*stage.step);
    if (stage.eval)
      programs.push_back(*stage.eval);
    for (ModuleOp program : programs) {
      if ((!hasStep || program != *stage.step) && plan.tp == 1 && plan.dp == 1)
        continue;
      auto lower = PassManager::on<ModuleOp>(context);
      applyPassManagerCLOptionsIfAny(lower);
      lower.addPass(createLowerCollectivesToRuntime());
      lower.addPass(mlir::createCanonicalizerPass());
      lower.addPass(mlir::createCSEPass());
      if (failed(lower.run(program)))
        return fail("lowering the collectives of pipeline stage " +
                    llvm::Twine(k) + " failed (see the diagnostics above)");
    }
    struct Part {
      ModuleOp module;
      std::string name, phase;
    };
    SmallVector<Part> parts;
    if (hasStep)
      parts.push_back(Part{*stage.step, name, ""});
    parts.push_back(Part{*stage.forward, phaseName + ".forward", "forward"});
    parts.push_back(Part{*stage.backward, phaseName + ".backward", "backward"});
    if (stage.eval)
      parts.push_back(Part{*stage.eval, phaseName + ".eval", "eval"});
    for (Part part : parts) {
      if (!options.dumpDir.empty()) {
        std::error_code ec;
        llvm::raw_fd_ostream os(
            options.dumpDir + "/train-" + part.name + ".mlir", ec);
        if (!ec)
          part.module.print(os);
      }
      auto main = part.module.lookupSymbol<func::FuncOp>("main");
      auto arguments = collectArtifactArguments(main);
      if (failed(arguments))
        return fail("pipeline stage " + llvm::Twine(k) + "'s " +
                    (part.phase.empty() ? std::string("step") : part.phase) +
                    " lacks the importer's attributes");
      markTensorParallelBlocks(main, plan.tp, plan.dp, *arguments);
      // The data: the global batch, cut over the replicas.
      for (ArtifactArgument &arg : *arguments) {
        if (arg.kind != ArtifactArgument::Kind::Input || arg.shape.empty())
          continue;
        arg.globalShape.assign(arg.shape.begin(), arg.shape.end());
        arg.globalShape[0] = options.globalBatch;
        if (plan.dp > 1) {
          arg.splitDim = 0;
          arg.splitAxis = "dp";
        }
      }
      // ZeRO: the step's optimizer states are blocks, and under ZeRO-3 the
      // parameters too, in all three programs alike.
      if (plan.zeroStage > 0)
        markZeroShardedStates(*arguments, plan.dp, zeroBlockParameters(main));
      if (part.phase.empty()) {
        for (const ArtifactArgument &arg : *arguments) {
          if (arg.kind != ArtifactArgument::Kind::Parameter || !arg.trainable)
            continue;
          int64_t elements = 1;
          for (int64_t d :
               arg.globalShape.empty() ? arg.shape : arg.globalShape)
            elements *= d;
          ++trained.tensors;
          trained.elements += elements;
          trained.bytes += elements * (arg.dtype == "float64"   ? 8
                                       : arg.dtype == "float32" ? 4
                                                                : 2);
        }
      }
      auto program = lowerTrainingProgram(part.module, options, part.name,
                                          std::move(*arguments), "", error);
      if (failed(program))
        return failure();
      program->phase = part.phase;
      program->stage = int64_t(k);
      if (part.phase.empty())
        description.programs.push_back(std::move(*program));
      else
        phases.push_back(std::move(*program));
    }
  }
  for (ArtifactProgram &program : phases)
    description.programs.push_back(std::move(program));

  llvm::SmallString<256> absModel(options.modelPath);
  llvm::sys::fs::make_absolute(absModel);
  description.modelPath = std::string(absModel);
  description.cluster = options.cluster;
  if (options.gpu)
    description.target = ArtifactTarget{
        "cuda", options.gpu->arch,
        options.config.precision.empty() ? "fp32" : options.config.precision};
  description.worldSize = plan.dp * plan.tp * plan.pp;
  description.dp = plan.dp;
  description.tp = plan.tp;
  description.pp = plan.pp;
  description.pipeline =
      ArtifactPipeline{plan.numMicroBatches, plan.microBatchSize,
                       scheduleName(plan.schedule).str(), plan.virtualStages};
  ArtifactTraining t =
      trainingDescription(description.programs[0].arguments, options);
  t.microBatches = plan.numMicroBatches;
  t.lossScaling = lossScalingDescription(options.config);
  // --eval-data: each stage runs its `eval` phase program.
  if (options.gpu)
    t.evalUnavailable = "a pipeline's eval programs run on CPU ranks, as its "
                        "trainer does, and this artifact is compiled for GPUs";
  else if (stages.front().eval)
    t.evalProgram =
        plan.virtualStages > 1 ? "stage0.chunk0.eval" : "stage0.eval";
  else
    t.evalUnavailable = "its pipeline stages have no eval programs (" +
                        stages.front().evalUnavailable + ")";
  // --save-onnx: the inference model without the parameters the stages
  // update, which the runtime appends with their trained values.
  if (!llvm::StringRef(options.modelPath).ends_with(".onnxtxt")) {
    llvm::StringSet<> updated;
    // The steps update the trained parameters, the forwards the state
    // they update themselves (BatchNorm's running statistics); the
    // accumulators' updates name no parameter.
    for (const ArtifactProgram &program : description.programs)
      for (const ArtifactArgument &arg : program.arguments)
        if (arg.kind == ArtifactArgument::Kind::Update)
          updated.insert(arg.updates);
    llvm::SmallString<256> templatePath(options.outputDir);
    llvm::sys::path::append(templatePath, "inference-template.onnx");
    if (failed(writeInferenceTemplate(options.modelPath, updated, templatePath,
                                      error)))
      return failure();
    t.inferenceTemplate = "inference-template.onnx";
  }
  description.training = std::move(t);
  if (failed(writeManifest(options.outputDir, std::move(description), *weights,
                           error)))
    return failure();
  return trained;
}

} // namespace autopar
