//===- AccumulateGradients.cpp - One step over several micro-batches ------===//
//
// See Passes.td. The differentiated @main, imported for one micro-batch,
// becomes the private @main_micro_batch; the new @main takes the whole
// batch, calls it once per micro-batch in an scf.for, sums the loss and the
// gradients and normalises them as one big batch would (docs/training.md,
// "Gradient accumulation").
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/Attributes.h"
#include "autopar/Dialect/AutoparOps.h"
#include "autopar/Planner/ActiveValues.h"
#include "autopar/Planner/Planner.h"
#include "autopar/Transforms/Autodiff.h"
#include "autopar/Transforms/GradientBuckets.h"
#include "autopar/Transforms/LossNormalisation.h"
#include "autopar/Transforms/Passes.h"
#include "autopar/Transforms/ZeroSharding.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"

namespace autopar {
#define GEN_PASS_DEF_ACCUMULATEGRADIENTS
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// Dropout's masks are indexed by global sample: the call's first sample
/// times a sample's elements, plus the element's index in the call's tensor
/// (lib/Import/Dropout.cpp). That equals the element's index in the whole
/// batch only when the batch is the tensor's outermost dim. The importer
/// refuses a dim 0 that the call's batch does not divide; a sequence-first
/// [S, B, D] whose S it divides would pass there and draw masks that differ
/// between one call and several. The planner's batch analysis says where
/// the batch is: a Dropout input whose batch is another dim is an error
/// (what cannot be told, a batch mixed into a dim, is let through).
LogicalResult checkDropoutsBatchFirst(func::FuncOp main, int64_t microBatches,
                                      int64_t dataParallel) {
  Value offset;
  for (BlockArgument arg : main.getArguments())
    if (main.getArgAttr(arg.getArgNumber(), autopar::attrs::kSampleOffset))
      offset = arg;
  if (!offset)
    return success();
  // One sample per call indexes every layout right (the call's tensor is
  // that sample), and the batch analysis cannot tell a batch of 1 apart.
  for (BlockArgument arg : main.getArguments()) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!main.getArgAttr(arg.getArgNumber(), autopar::attrs::kInput) || !type ||
        type.getRank() == 0)
      continue;
    if (type.getDimSize(0) <= 1)
      return success();
    break;
  }
  llvm::DenseMap<Value, int> batchDims = autopar::findBatchDims(main);
  bool ok = true;
  for (Operation *user : offset.getUsers()) {
    auto dropout = dyn_cast<linalg::GenericOp>(user);
    // (data, seed, step, sample offset): a Dropout over a tensor.
    if (!dropout || dropout.getNumDpsInputs() != 4)
      continue;
    Value data = dropout.getDpsInputs()[0];
    auto it = batchDims.find(data);
    if (it == batchDims.end() || it->second == 0)
      continue;
    std::string node = autopar::onnxNodeName(dropout);
    dropout.emitError()
        << "training-mode Dropout" << (node.empty() ? "" : " '" + node + "'")
        << " on a tensor of type " << data.getType() << " whose batch is dim "
        << it->second
        << ", not dim 0: its masks are indexed by global sample, which needs "
           "the batch outermost, so "
        << microBatches << " micro-batch(es) x " << dataParallel
        << " replica(s) would draw other masks than one call over the whole "
           "batch; use a batch-first layout (batch_first=True), or one "
           "micro-batch and one replica (--dp 1 --micro-batch-size equal to "
           "the batch)";
    ok = false;
  }
  return success(ok);
}

using autopar::LossKind;

/// True if `value` depends on no argument marked trainable (no gradient
/// flows into it).
bool isInactive(func::FuncOp func, Value value) {
  SmallVector<Value> trained;
  for (BlockArgument arg : func.getArguments())
    if (func.getArgAttr(arg.getArgNumber(), autopar::attrs::kTrainable))
      trained.push_back(arg);
  return !autopar::findActiveValues(func, trained, value).contains(value);
}

/// A single-element elementwise generic yielding `divf(in0, in1)`.
bool isScalarDivision(linalg::GenericOp op) {
  if (!op || op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() != 0)
    return false;
  auto yield = cast<linalg::YieldOp>(op.getBody()->getTerminator());
  auto div = yield.getOperand(0).getDefiningOp<arith::DivFOp>();
  Block *body = op.getBody();
  return div && div.getLhs() == body->getArgument(0) &&
         div.getRhs() == body->getArgument(1);
}

/// A generic summing its one input into its init.
bool isSumReduction(linalg::GenericOp op) {
  if (!op || op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() == 0)
    return false;
  auto yield = cast<linalg::YieldOp>(op.getBody()->getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  Block *body = op.getBody();
  return add && ((add.getLhs() == body->getArgument(0) &&
                  add.getRhs() == body->getArgument(1)) ||
                 (add.getLhs() == body->getArgument(1) &&
                  add.getRhs() == body->getArgument(0)));
}

/// The value through single-element reshapes (a loss viewed as tensor<1xf32>).
Value throughReshapes(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp, tensor::CastOp,
             tensor::ReshapeOp>(def))
      break;
    v = def->getOperand(0);
  }
  return v;
}

/// Elementwise `a op b` into `a`'s tensor, `b` of the same shape or a
/// single-element tensor broadcast.
Value elementwise(OpBuilder &b, Location loc, Value a, Value rhs,
                  function_ref<Value(OpBuilder &, Location, Value, Value)> fn) {
  auto type = cast<RankedTensorType>(a.getType());
  auto rhsType = cast<RankedTensorType>(rhs.getType());
  MLIRContext *ctx = b.getContext();
  AffineMap identity = AffineMap::getMultiDimIdentityMap(type.getRank(), ctx);
  AffineMap rhsMap = rhsType.getShape() == type.getShape()
                         ? identity
                         : AffineMap::get(type.getRank(), 0,
                                          SmallVector<AffineExpr>(
                                              rhsType.getRank(),
                                              getAffineConstantExpr(0, ctx)),
                                          ctx);
  SmallVector<utils::IteratorType> iterators(type.getRank(),
                                             utils::IteratorType::parallel);
  // Written into `a` (an accumulator the loop carries: updated in place).
  return linalg::GenericOp::create(
             b, loc, type, ValueRange{rhs}, ValueRange{a},
             ArrayRef<AffineMap>{rhsMap, identity}, iterators,
             [&](OpBuilder &nb, Location l, ValueRange args) {
               linalg::YieldOp::create(nb, l, fn(nb, l, args[1], args[0]));
             })
      .getResult(0);
}

Value add(OpBuilder &b, Location loc, Value x, Value y) {
  return elementwise(b, loc, x, y,
                     [](OpBuilder &nb, Location l, Value p, Value q) -> Value {
                       return arith::AddFOp::create(nb, l, p, q);
                     });
}

Value divide(OpBuilder &b, Location loc, Value x, Value y) {
  return elementwise(b, loc, x, y,
                     [](OpBuilder &nb, Location l, Value p, Value q) -> Value {
                       return arith::DivFOp::create(nb, l, p, q);
                     });
}

Value zeros(OpBuilder &b, Location loc, Type type) {
  auto tensor = cast<RankedTensorType>(type);
  Value empty = tensor::EmptyOp::create(b, loc, tensor.getShape(),
                                        tensor.getElementType());
  Value zero =
      arith::ConstantOp::create(b, loc, b.getZeroAttr(tensor.getElementType()));
  return linalg::FillOp::create(b, loc, zero, empty).getResult(0);
}

struct AccumulateGradientsPass
    : autopar::impl::AccumulateGradientsBase<AccumulateGradientsPass> {
  using Base::Base;

  /// Replaces `values[i]` for every i of `which` by its sum over the
  /// replicas. The values are flattened into one bucket per element type
  /// (DDP's gradient buckets: one all-reduce for the whole step instead of
  /// one per tensor, the loss and the denominator riding along), reduced
  /// over axis 0 of `grid`, and cut back into their shapes. Without
  /// `bucket`, each is all-reduced on its own.
  void allReduceInBuckets(OpBuilder &b, Location loc, FlatSymbolRefAttr grid,
                          SmallVector<Value> &values,
                          ArrayRef<unsigned> which) {
    SmallVector<unsigned> inBucket;
    for (unsigned i : which) {
      auto type = cast<RankedTensorType>(values[i].getType());
      if (bucket) {
        inBucket.push_back(i);
        continue;
      }
      values[i] = shard::AllReduceOp::create(
          b, loc, type, grid.getValue(), ArrayRef<shard::GridAxis>{0},
          values[i], shard::ReductionKind::Sum);
    }
    autopar::allReduceInBuckets(b, loc, grid.getValue(), 0, values, inBucket);
  }

  void runOnOperation() override {
    if (microBatches < 1) {
      getOperation().emitError()
          << "autopar-accumulate-gradients: micro-batches must be at least 1, "
             "not "
          << static_cast<int64_t>(microBatches);
      return signalPassFailure();
    }
    if (dataParallel < 1) {
      getOperation().emitError()
          << "autopar-accumulate-gradients: data-parallel must be at least "
             "1, not "
          << static_cast<int64_t>(dataParallel);
      return signalPassFailure();
    }
    if (zeroStage < 0 || zeroStage > 3) {
      getOperation().emitError()
          << "autopar-accumulate-gradients: zero-stage must be 0 to 3, not "
          << static_cast<int64_t>(zeroStage);
      return signalPassFailure();
    }
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main && microBatches == 1 && dataParallel == 1)
      return;
    if (!main) {
      module.emitError("autopar-accumulate-gradients: no func.func @main");
      return signalPassFailure();
    }
    if (microBatches == 1 && dataParallel == 1) {
      // One call takes the whole batch: its first sample is 0.
      for (unsigned i = main.getNumArguments(); i-- > 0;) {
        if (!main.getArgAttr(i, autopar::attrs::kSampleOffset))
          continue;
        OpBuilder b = OpBuilder::atBlockBegin(&main.getBody().front());
        auto type = cast<RankedTensorType>(main.getArgument(i).getType());
        Value zero = arith::ConstantOp::create(
            b, main.getLoc(), DenseElementsAttr::get(type, int64_t(0)));
        main.getArgument(i).replaceAllUsesWith(zero);
        if (failed(main.eraseArgument(i)))
          return signalPassFailure();
      }
      return;
    }
    if (failed(checkDropoutsBatchFirst(main, microBatches, dataParallel)) ||
        failed(accumulate(module, main)))
      signalPassFailure();
  }

  LogicalResult accumulate(ModuleOp module, func::FuncOp main) {
    MLIRContext *ctx = &getContext();
    Location loc = main.getLoc();
    auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
    if (main.getNumResults() == 0 ||
        main.getResultAttr(0, autopar::attrs::kGradient) ||
        main.getResultAttr(0, autopar::attrs::kUpdate))
      return main.emitError("autopar-accumulate-gradients: @main must be "
                            "differentiated first (autopar-differentiate): "
                            "its first result is the loss");

    // Each batch input is cut along its leading dim.
    SmallVector<Type> wholeTypes(main.getArgumentTypes());
    for (unsigned i = 0; i < main.getNumArguments(); ++i) {
      if (!main.getArgAttr(i, autopar::attrs::kInput))
        continue;
      auto type = dyn_cast<RankedTensorType>(wholeTypes[i]);
      if (!type || type.getRank() == 0) {
        auto name =
            main.getArgAttrOfType<StringAttr>(i, autopar::attrs::kInput);
        return main.emitError()
               << "gradient accumulation: input '"
               << (name ? name.getValue() : StringRef("?"))
               << "' has no batch dim to cut into micro-batches";
      }
      SmallVector<int64_t> shape(type.getShape());
      shape[0] *= microBatches;
      wholeTypes[i] = type.clone(shape);
    }

    // The loss's normalisation.
    // fp16's loss scaling (a multiply marked autopar.loss_scaling) scales
    // the sums alike: look through it.
    Value loss = throughReshapes(ret.getOperand(0));
    // The backward (autopar-differentiate appends it) follows the op that
    // makes the returned loss.
    Operation *forwardEnd = ret.getOperand(0).getDefiningOp();
    if (auto scaling = loss.getDefiningOp<linalg::GenericOp>();
        scaling && scaling->hasAttr("autopar.loss_scaling"))
      loss = throughReshapes(scaling.getDpsInputOperand(0)->get());
    auto lossOp = loss.getDefiningOp<linalg::GenericOp>();
    LossKind kind = LossKind::Average;
    Value denominator;
    if (isScalarDivision(lossOp) &&
        isInactive(main, lossOp.getDpsInputOperand(1)->get())) {
      kind = LossKind::Ratio;
      denominator = lossOp.getDpsInputOperand(1)->get();
    } else if (isSumReduction(lossOp)) {
      kind = LossKind::Sum;
    }
    if (kind == LossKind::Ratio) {
      // The micro-batch computes the numerator and its gradient (the
      // division, and the adjoint's, by one); the step divides the sums.
      OpBuilder b(ctx);
      b.setInsertionPointToStart(&main.getBody().front());
      auto type = cast<RankedTensorType>(denominator.getType());
      Value one = arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(type,
                                 b.getFloatAttr(type.getElementType(), 1.0)));
      denominator.replaceAllUsesWith(one);
      OpBuilder rb(ret);
      SmallVector<Value> operands(ret.getOperands());
      operands.push_back(denominator);
      func::ReturnOp::create(rb, ret.getLoc(), operands);
      ret.erase();
      SmallVector<DictionaryAttr> resultAttrs;
      main.getAllResultAttrs(resultAttrs);
      resultAttrs.push_back(DictionaryAttr::get(ctx));
      main.setType(FunctionType::get(ctx, main.getArgumentTypes(),
                                     ValueRange(operands).getTypes()));
      main.setAllResultAttrs(resultAttrs);
    }

    // @main becomes @main_micro_batch; a new @main loops over it.
    SmallVector<DictionaryAttr> argAttrs, resultAttrs;
    main.getAllArgAttrs(argAttrs);
    main.getAllResultAttrs(resultAttrs);
    unsigned numResults = main.getNumResults() - (kind == LossKind::Ratio);
    resultAttrs.resize(numResults);
    SmallVector<Type> resultTypes(main.getResultTypes().take_front(numResults));
    SmallVector<NamedAttribute> funcAttrs;
    for (NamedAttribute attr : main->getDiscardableAttrs())
      funcAttrs.push_back(attr);
    main.setName("main_micro_batch");
    OpBuilder mb(module.getBodyRegion());
    mb.setInsertionPointAfter(main);
    auto step = func::FuncOp::create(
        mb, loc, "main", FunctionType::get(ctx, wholeTypes, resultTypes));
    step.setAllArgAttrs(argAttrs);
    step.setAllResultAttrs(resultAttrs);
    for (NamedAttribute attr : funcAttrs)
      step->setAttr(attr.getName(), attr.getValue());
    main.setPrivate();
    main.setAllArgAttrs(ArrayRef<DictionaryAttr>{});
    main.setAllResultAttrs(ArrayRef<DictionaryAttr>{});
    for (NamedAttribute attr : funcAttrs)
      main->removeAttr(attr.getName());
    func::FuncOp micro = main;

    // ZeRO-3: the replicas hold blocks of the trained parameters ZeRO
    // shards, and each micro-batch gathers a parameter just before it is
    // used.
    if (zeroStage >= 3 && dataParallel > 1) {
      FlatSymbolRefAttr grid =
          autopar::getOrCreateReplicaGrid(module, dataParallel);
      SmallVector<Type> stepTypes(step.getArgumentTypes());
      for (unsigned i = 0; i < step.getNumArguments(); ++i) {
        auto type = cast<RankedTensorType>(stepTypes[i]);
        if (!step.getArgAttr(i, autopar::attrs::kParameter) ||
            !step.getArgAttr(i, autopar::attrs::kTrainable) ||
            !autopar::isZeroSharded(type, dataParallel))
          continue;
        stepTypes[i] = autopar::zeroShardType(type, dataParallel);
        step.setArgAttr(i, autopar::attrs::kZeroBlocks,
                        IntegerAttr::get(IntegerType::get(ctx, 64),
                                         static_cast<int64_t>(dataParallel)));
        autopar::gatherZeroBlockAtUses(micro, micro.getArgument(i), forwardEnd,
                                       grid, dataParallel);
      }
      step.setType(FunctionType::get(ctx, stepTypes, step.getResultTypes()));
      micro.setType(
          FunctionType::get(ctx, micro.getBody().front().getArgumentTypes(),
                            micro.getResultTypes()));
    }

    Block *entry = step.addEntryBlock();
    OpBuilder b = OpBuilder::atBlockBegin(entry);
    // The parameters the forward updates itself (BatchNorm's running
    // statistics) carry from one micro-batch to the next, as PyTorch's
    // forward passes do.
    llvm::StringMap<unsigned> parameterArgs;
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      if (auto name =
              step.getArgAttrOfType<StringAttr>(i, autopar::attrs::kParameter))
        parameterArgs[name.getValue()] = i;
    llvm::DenseMap<unsigned, unsigned> carriedArgOfResult;
    for (unsigned r = 0; r < numResults; ++r)
      if (auto name =
              step.getResultAttrOfType<StringAttr>(r, autopar::attrs::kUpdate))
        if (auto it = parameterArgs.find(name.getValue());
            it != parameterArgs.end())
          carriedArgOfResult[r] = it->second;

    if (dataParallel > 1) {
      // Replicas would each update their own statistics and draw the same
      // masks for different samples: not what one rank computes.
      // Unless its statistics are the global batch's (the forward reduces
      // them over the replicas: ImportOptions::dataParallelReplicas).
      bool sharedStatistics = false;
      micro.walk([&](shard::AllReduceOp) { sharedStatistics = true; });
      if (!carriedArgOfResult.empty() && !sharedStatistics)
        return step.emitError()
               << "data-parallel training: the forward updates parameters "
                  "itself (BatchNorm's running statistics) from its own "
                  "batch, so the "
               << static_cast<int64_t>(dataParallel)
               << " replicas would differ; import the forward with its "
                  "statistics all-reduced over the replicas (autopar-compile "
                  "does)";
    }

    // Training-mode Dropout indexes its masks by global sample: micro-batch
    // k of replica r starts at sample (r * micro-batches + k) * its batch.
    Value replicaFirstSample;
    int64_t microSamples = 0;
    for (unsigned i = 0; i < micro.getNumArguments(); ++i)
      if (step.getArgAttr(i, autopar::attrs::kInput)) {
        auto type = cast<RankedTensorType>(micro.getArgumentTypes()[i]);
        microSamples = type.getDimSize(0);
        break;
      }
    auto i64Constant = [&](OpBuilder &cb, int64_t v) -> Value {
      return arith::ConstantOp::create(cb, loc, cb.getI64IntegerAttr(v));
    };
    replicaFirstSample = i64Constant(b, 0);
    if (dataParallel > 1) {
      FlatSymbolRefAttr grid =
          autopar::getOrCreateReplicaGrid(module, dataParallel);
      auto coord = shard::ProcessMultiIndexOp::create(
          b, loc, TypeRange{b.getIndexType()}, grid,
          b.getDenseI16ArrayAttr({0}));
      replicaFirstSample = arith::MulIOp::create(
          b, loc,
          arith::IndexCastOp::create(b, loc, b.getI64Type(),
                                     coord->getResult(0)),
          i64Constant(b, microBatches * microSamples));
    }

    // Iteration values: one per result (sums, or the carried state), and
    // the denominator's sum.
    SmallVector<Value> inits;
    for (unsigned r = 0; r < numResults; ++r)
      inits.push_back(carriedArgOfResult.count(r)
                          ? Value(step.getArgument(carriedArgOfResult[r]))
                          : zeros(b, loc, resultTypes[r]));
    if (kind == LossKind::Ratio)
      inits.push_back(zeros(b, loc, micro.getResultTypes().back()));

    Value lower = arith::ConstantIndexOp::create(b, loc, 0);
    Value upper = arith::ConstantIndexOp::create(b, loc, microBatches);
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    auto loop = scf::ForOp::create(
        b, loc, lower, upper, one, inits,
        [&](OpBuilder &lb, Location l, Value k, ValueRange iter) {
          SmallVector<Value> operands;
          for (unsigned i = 0; i < step.getNumArguments(); ++i) {
            Value arg = step.getArgument(i);
            if (step.getArgAttr(i, autopar::attrs::kInput)) {
              auto part = cast<RankedTensorType>(micro.getArgumentTypes()[i]);
              Value first = arith::MulIOp::create(
                  lb, l, k,
                  arith::ConstantIndexOp::create(lb, l, part.getDimSize(0)));
              SmallVector<OpFoldResult> offsets(part.getRank(),
                                                lb.getIndexAttr(0));
              offsets[0] = first;
              SmallVector<OpFoldResult> sizes, strides;
              for (int64_t d : part.getShape()) {
                sizes.push_back(lb.getIndexAttr(d));
                strides.push_back(lb.getIndexAttr(1));
              }
              operands.push_back(tensor::ExtractSliceOp::create(
                  lb, l, part, arg, offsets, sizes, strides));
              continue;
            }
            if (step.getArgAttr(i, autopar::attrs::kSampleOffset)) {
              // docs/training.md, "Dropout masks".
              Value index =
                  arith::IndexCastOp::create(lb, l, lb.getI64Type(), k);
              Value first = arith::AddIOp::create(
                  lb, l, replicaFirstSample,
                  arith::MulIOp::create(lb, l, index,
                                        i64Constant(lb, microSamples)));
              operands.push_back(tensor::FromElementsOp::create(
                  lb, l, arg.getType(), ValueRange{first}));
              continue;
            }
            operands.push_back(arg);
          }
          for (auto [r, argIndex] : carriedArgOfResult)
            operands[argIndex] = iter[r];
          auto call = func::CallOp::create(lb, l, micro, operands);
          SmallVector<Value> next;
          for (unsigned r = 0; r < numResults; ++r)
            next.push_back(carriedArgOfResult.count(r)
                               ? call.getResult(r)
                               : add(lb, l, iter[r], call.getResult(r)));
          if (kind == LossKind::Ratio)
            next.push_back(add(lb, l, iter.back(), call.getResults().back()));
          scf::YieldOp::create(lb, l, next);
        });

    // Data parallelism: every sum is added over the replicas, so that each
    // holds the global batch's.
    SmallVector<Value> sums(loop.getResults());
    if (dataParallel > 1) {
      // ZeRO 2 and 3: the gradients ZeRO shards are reduce-scattered, each
      // replica keeping its block; the rest is all-reduced.
      SmallVector<unsigned> reduced, scattered;
      for (unsigned r = 0; r < sums.size(); ++r) {
        if (r < numResults && carriedArgOfResult.count(r))
          continue;
        bool gradient =
            r < numResults &&
            step.getResultAttr(r, autopar::attrs::kGradient) != nullptr;
        if (zeroStage >= 2 && gradient &&
            autopar::isZeroSharded(cast<RankedTensorType>(sums[r].getType()),
                                   dataParallel))
          scattered.push_back(r);
        else
          reduced.push_back(r);
      }
      FlatSymbolRefAttr grid =
          autopar::getOrCreateReplicaGrid(module, dataParallel);
      allReduceInBuckets(b, loc, grid, sums, reduced);
      if (!scattered.empty()) {
        SmallVector<Value> full;
        for (unsigned r : scattered)
          full.push_back(sums[r]);
        SmallVector<Value> blocks =
            autopar::reduceScatterBlocks(b, loc, grid, dataParallel, full);
        for (auto [k, r] : llvm::enumerate(scattered))
          sums[r] = blocks[k];
      }
    }

    SmallVector<Value> results;
    Value scale;
    if (kind == LossKind::Ratio) {
      scale = sums.back();
    } else if (kind == LossKind::Average) {
      auto type = RankedTensorType::get(
          {}, cast<RankedTensorType>(resultTypes[0]).getElementType());
      scale = arith::ConstantOp::create(
          b, loc,
          DenseElementsAttr::get(
              type, b.getFloatAttr(type.getElementType(),
                                   double(microBatches * dataParallel))));
    }
    for (unsigned r = 0; r < numResults; ++r) {
      Value v = sums[r];
      bool summed = !carriedArgOfResult.count(r);
      if (summed && scale) {
        // The denominator is in the loss's element type; a gradient of
        // another float type divides by its own cast of it.
        auto type = cast<RankedTensorType>(v.getType());
        Value s = scale;
        auto scaleType = cast<RankedTensorType>(s.getType());
        if (scaleType.getElementType() != type.getElementType()) {
          Value e = tensor::ExtractOp::create(
              b, loc, s,
              SmallVector<Value>(scaleType.getRank(),
                                 arith::ConstantIndexOp::create(b, loc, 0)));
          if (type.getElementTypeBitWidth() >
              scaleType.getElementTypeBitWidth())
            e = arith::ExtFOp::create(b, loc, type.getElementType(), e);
          else
            e = arith::TruncFOp::create(b, loc, type.getElementType(), e);
          s = tensor::FromElementsOp::create(
              b, loc, RankedTensorType::get({}, type.getElementType()), e);
        }
        v = divide(b, loc, v, s);
      }
      results.push_back(v);
    }
    func::ReturnOp::create(b, loc, results);
    // Reduce-scattered gradients are blocks.
    step.setType(FunctionType::get(ctx, step.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    // The sample offset is the step's own business.
    for (unsigned i = step.getNumArguments(); i-- > 0;)
      if (step.getArgAttr(i, autopar::attrs::kSampleOffset) &&
          failed(step.eraseArgument(i)))
        return failure();
    return success();
  }
};

} // namespace

autopar::LossParts autopar::analyseLoss(func::FuncOp func, Value loss,
                                        ArrayRef<Value> trained) {
  LossParts parts;
  Value value = throughReshapes(loss);
  if (auto scaling = value.getDefiningOp<linalg::GenericOp>();
      scaling && scaling->hasAttr("autopar.loss_scaling"))
    value = throughReshapes(scaling.getDpsInputOperand(0)->get());
  auto op = value.getDefiningOp<linalg::GenericOp>();
  if (isScalarDivision(op)) {
    Value den = op.getDpsInputOperand(1)->get();
    if (!autopar::findActiveValues(func, trained, den).contains(den)) {
      parts.kind = LossKind::Ratio;
      parts.numerator = op.getDpsInputOperand(0)->get();
      parts.denominator = den;
      return parts;
    }
  }
  if (isSumReduction(op))
    parts.kind = LossKind::Sum;
  return parts;
}
