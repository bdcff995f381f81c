//===- ApplyOptimizer.cpp - Clipping, LR schedule and update as IR --------===//
//
// See Passes.td. Each formula is PyTorch's single-tensor code (torch 1.13,
// torch/optim/{sgd,adam,adamw}.py; clip_grad_norm_ in
// torch/nn/utils/clip_grad.py) or DeepSpeed's scheduler
// (deepspeed/runtime/lr_schedules.py), in the same order of operations:
// scalar hyperparameter arithmetic in f64 (Python floats there), tensor
// arithmetic in the parameters' type.
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/Attributes.h"
#include "autopar/Transforms/Autodiff.h"
#include "autopar/Transforms/Passes.h"
#include "autopar/Transforms/ZeroSharding.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include <cmath>
#include <limits>

namespace autopar {
#define GEN_PASS_DEF_APPLYOPTIMIZER
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// Builds scalar and elementwise arithmetic before @main's return.
struct UpdateBuilder {
  OpBuilder &b;
  Location loc;

  Value f64(double v) {
    return arith::ConstantOp::create(b, loc, b.getF64FloatAttr(v));
  }
  Value constant(Type type, double v) {
    return arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, v));
  }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value lt(Value x, Value y) {
    return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  Value max(Value x, Value y) {
    return arith::MaximumFOp::create(b, loc, x, y);
  }

  /// A rank-0 tensor holding scalar `v`, converted to `type`.
  Value scalarTensor(Value v, Type type) {
    if (v.getType() != type)
      v = arith::TruncFOp::create(b, loc, type, v);
    return tensor::FromElementsOp::create(
        b, loc, RankedTensorType::get({}, type), ValueRange{v});
  }

  /// An elementwise linalg.generic over `operands` (tensors of one shape,
  /// or rank-0 tensors broadcast to it) producing a tensor like the first.
  Value
  elementwise(ValueRange operands,
              function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
    auto type = cast<RankedTensorType>(operands.front().getType());
    int64_t rank = type.getRank();
    SmallVector<AffineMap> maps;
    for (Value v : operands)
      maps.push_back(cast<RankedTensorType>(v.getType()).getRank() == 0
                         ? AffineMap::get(rank, 0, {}, b.getContext())
                         : b.getMultiDimIdentityMap(rank));
    maps.push_back(b.getMultiDimIdentityMap(rank));
    Value init =
        tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
    SmallVector<utils::IteratorType> iterators(rank,
                                               utils::IteratorType::parallel);
    return linalg::GenericOp::create(
               b, loc, TypeRange{type}, operands, ValueRange{init}, maps,
               iterators,
               [&](OpBuilder &nb, Location nl, ValueRange args) {
                 linalg::YieldOp::create(
                     nb, nl, ValueRange{body(nb, nl, args.drop_back())});
               })
        .getResult(0);
  }

  /// x + a * y elementwise, `a` a rank-0 tensor (torch's x.add(y, alpha=a)).
  Value addScaled(Value x, Value y, Value a) {
    return elementwise({x, y, a}, [](OpBuilder &nb, Location nl, ValueRange v) {
      Value ay = arith::MulFOp::create(nb, nl, v[2], v[1]);
      return Value(arith::AddFOp::create(nb, nl, v[0], ay));
    });
  }

  /// sum(g * g) over every element, as a rank-0 tensor.
  Value sumOfSquares(Value g) {
    auto type = cast<RankedTensorType>(g.getType());
    Type et = type.getElementType();
    Value zero = constant(et, 0.0);
    Value init =
        linalg::FillOp::create(
            b, loc, zero,
            Value(tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, et)))
            .getResult(0);
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d < type.getRank(); ++d)
      dims.push_back(d);
    SmallVector<AffineMap> maps{
        b.getMultiDimIdentityMap(type.getRank()),
        AffineMap::get(type.getRank(), 0, {}, b.getContext())};
    SmallVector<utils::IteratorType> iterators(type.getRank(),
                                               utils::IteratorType::reduction);
    return linalg::GenericOp::create(
               b, loc, TypeRange{init.getType()}, ValueRange{g},
               ValueRange{init}, maps, iterators,
               [](OpBuilder &nb, Location nl, ValueRange a) {
                 Value sq = arith::MulFOp::create(nb, nl, a[0], a[0]);
                 linalg::YieldOp::create(
                     nb, nl,
                     ValueRange{arith::AddFOp::create(nb, nl, a[1], sq)});
               })
        .getResult(0);
  }
};

struct ApplyOptimizerPass
    : autopar::impl::ApplyOptimizerBase<ApplyOptimizerPass> {
  using Base::Base;

  /// The warm-up fraction at f64 iteration `it` (DeepSpeed's gamma / ratio
  /// before warmup_min_ratio), valid below the warm-up's end.
  Value warmupFraction(UpdateBuilder &u, Value it) {
    // DeepSpeed: warmup_num_steps = max(2, warmup_num_steps).
    double steps = std::max<int64_t>(2, warmupSteps);
    if (warmupType == autopar::WarmupType::Linear)
      return u.div(it, u.f64(steps));
    Value logIt = math::LogOp::create(u.b, u.loc, u.add(it, u.f64(1.0)));
    return u.mul(u.f64(1.0 / std::log(steps)), logIt);
  }

  /// The learning rate (f64) at iteration `it` = step - 1.
  Value learningRate(UpdateBuilder &u, Value it) {
    double steps = std::max<int64_t>(2, warmupSteps);
    Value inWarmup = u.lt(it, u.f64(steps));
    switch (schedule) {
    case autopar::LrSchedule::Constant:
      return u.f64(lr);
    case autopar::LrSchedule::Warmup:
    case autopar::LrSchedule::WarmupDecay: {
      Value gamma = warmupFraction(u, it);
      Value after = u.f64(1.0);
      if (schedule == autopar::LrSchedule::WarmupDecay)
        after = u.max(u.f64(0.0),
                      u.div(u.sub(u.f64(double(totalSteps)), it),
                            u.f64(std::max(1.0, double(totalSteps) - steps))));
      gamma = u.select(inWarmup, gamma, after);
      return u.add(u.f64(warmupMinLr),
                   u.mul(u.f64(warmupMaxLr - warmupMinLr), gamma));
    }
    case autopar::LrSchedule::WarmupCosine: {
      Value warm =
          u.add(u.f64(warmupMinRatio),
                u.mul(warmupFraction(u, it), u.f64(1.0 - warmupMinRatio)));
      Value realLast = u.add(u.sub(it, u.f64(steps)), u.f64(1.0));
      double realTotal = double(totalSteps) - steps;
      Value cosine = math::CosOp::create(
          u.b, u.loc, u.div(u.mul(u.f64(M_PI), realLast), u.f64(realTotal)));
      Value ratio = u.div(u.add(u.f64(1.0), cosine), u.f64(2.0));
      ratio = u.max(u.f64(0.0), u.add(u.f64(cosMinRatio),
                                      u.mul(u.f64(1.0 - cosMinRatio), ratio)));
      return u.mul(u.f64(lr), u.select(inWarmup, warm, ratio));
    }
    }
    llvm_unreachable("unknown schedule");
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError("autopar-apply-optimizer: no func.func @main");
      return signalPassFailure();
    }
    if ((schedule == autopar::LrSchedule::WarmupDecay ||
         schedule == autopar::LrSchedule::WarmupCosine) &&
        totalSteps <= std::max<int64_t>(2, warmupSteps)) {
      main.emitError() << "autopar-apply-optimizer: the schedule needs "
                          "total-steps ("
                       << static_cast<int64_t>(totalSteps)
                       << ") greater than warmup-steps ("
                       << std::max<int64_t>(2, warmupSteps) << ")";
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());

    // The loss, and each gradient with its parameter's argument.
    std::optional<unsigned> lossIndex;
    SmallVector<std::pair<BlockArgument, Value>> trained;
    llvm::StringMap<BlockArgument> params;
    for (BlockArgument arg : main.getArguments())
      if (auto name = main.getArgAttrOfType<StringAttr>(
              arg.getArgNumber(), autopar::attrs::kParameter))
        params[name.getValue()] = arg;
    // Updates the forward made itself (BatchNorm's running statistics) pass
    // through, after the optimizer's.
    SmallVector<std::pair<Value, DictionaryAttr>> forwardUpdates;
    for (unsigned i = 0; i < main.getNumResults(); ++i) {
      if (main.getResultAttr(i, autopar::attrs::kUpdate)) {
        forwardUpdates.push_back(
            {ret.getOperand(i), main.getResultAttrDict(i)});
        continue;
      }
      auto of =
          main.getResultAttrOfType<StringAttr>(i, autopar::attrs::kGradient);
      if (!of) {
        lossIndex = i;
        continue;
      }
      auto it = params.find(of.getValue());
      if (it == params.end()) {
        main.emitError() << "autopar-apply-optimizer: result " << i
                         << " is the gradient of '" << of.getValue()
                         << "', which is no parameter of @main";
        return signalPassFailure();
      }
      trained.push_back({it->second, ret.getOperand(i)});
    }
    // A pipeline stage may train nothing (a stage of parameter-free ops): it
    // still takes part in the global norm's sum over the stages.
    if ((trained.empty() && pipelineStages <= 1) || !lossIndex) {
      main.emitError("autopar-apply-optimizer: @main returns no loss and "
                     "gradients; run autopar-differentiate first");
      return signalPassFailure();
    }
    Value loss = ret.getOperand(*lossIndex);
    DictionaryAttr lossAttrs = main.getResultAttrDict(*lossIndex);

    // ZeRO: the parameters updated by blocks (ZeroSharding.h).
    if (zeroStage < 0 || zeroStage > 3 || dataParallel < 1) {
      main.emitError() << "autopar-apply-optimizer: zero-stage must be 0 to "
                          "3 and data-parallel at least 1, not "
                       << static_cast<int64_t>(zeroStage) << " and "
                       << static_cast<int64_t>(dataParallel);
      return signalPassFailure();
    }
    // sharded: updated by blocks; heldAsBlock: ZeRO-3's, whose argument is
    // already the block (autopar.zero_blocks) and whose update stays one.
    SmallVector<bool> sharded, heldAsBlock;
    for (auto &[param, grad] : trained) {
      auto type = cast<RankedTensorType>(param.getType());
      heldAsBlock.push_back(
          main.getArgAttr(param.getArgNumber(), autopar::attrs::kZeroBlocks) !=
          nullptr);
      sharded.push_back(
          heldAsBlock.back() ||
          (zeroStage >= 1 && autopar::isZeroSharded(type, dataParallel)));
      auto gradType = cast<RankedTensorType>(grad.getType());
      if (gradType != type &&
          !(sharded.back() && !heldAsBlock.back() &&
            gradType == autopar::zeroShardType(type, dataParallel))) {
        main.emitError() << "autopar-apply-optimizer: the gradient of '"
                         << main.getArgAttrOfType<StringAttr>(
                                    param.getArgNumber(),
                                    autopar::attrs::kParameter)
                                .getValue()
                         << "' is " << gradType << ", neither its parameter's "
                         << type << " nor (ZeRO) a block of it";
        return signalPassFailure();
      }
    }
    // Blocks of a tensor-parallel split (a pipeline stage's programs are
    // partitioned before its step is built): their sums of squares add up
    // over tp for the global norm.
    SmallVector<bool> tpBlock;
    for (auto &entry : trained)
      tpBlock.push_back(main.getArgAttr(entry.first.getArgNumber(),
                                        autopar::attrs::kTensorParallelSplit) !=
                        nullptr);
    if (llvm::is_contained(tpBlock, true)) {
      auto tpGrid = module.lookupSymbol<shard::GridOp>("autopar_grid");
      if (!tpGrid || tpGrid.getShape().size() < 2) {
        module.emitError() << "autopar-apply-optimizer: tensor-parallel "
                              "blocks (autopar.tp_split) need a grid "
                              "@autopar_grid whose axis 1 is tp";
        return signalPassFailure();
      }
    }
    FlatSymbolRefAttr grid;
    if (llvm::is_contained(sharded, true))
      grid = autopar::getOrCreateReplicaGrid(module, dataParallel);

    // New arguments after the last parameter: the optimizer states, then
    // the step.
    SmallVector<StringRef> roles;
    if (optimizer == autopar::OptimizerKind::SGD) {
      if (momentum != 0.0)
        roles = {"momentum"};
    } else {
      roles = {"exp_avg", "exp_avg_sq"};
    }
    unsigned position = 0;
    for (BlockArgument arg : main.getArguments())
      if (main.getArgAttr(arg.getArgNumber(), autopar::attrs::kParameter))
        position = arg.getArgNumber() + 1;
    Builder attrs(&getContext());
    // states[k][r]: parameter k's state of role r.
    SmallVector<SmallVector<BlockArgument>> states(trained.size());
    for (auto [k, entry] : llvm::enumerate(trained)) {
      BlockArgument param = entry.first;
      StringRef name = main.getArgAttrOfType<StringAttr>(
                               param.getArgNumber(), autopar::attrs::kParameter)
                           .getValue();
      Type stateType =
          sharded[k] && !heldAsBlock[k]
              ? autopar::zeroShardType(cast<RankedTensorType>(param.getType()),
                                       dataParallel)
              : param.getType();
      for (StringRef role : roles) {
        SmallVector<NamedAttribute> dict{
            attrs.getNamedAttr(autopar::attrs::kOptimizerState,
                               attrs.getStringAttr(role)),
            attrs.getNamedAttr(autopar::attrs::kStateOf,
                               attrs.getStringAttr(name))};
        if (Attribute dtype =
                main.getArgAttr(param.getArgNumber(), autopar::attrs::kDType))
          dict.push_back(attrs.getNamedAttr(autopar::attrs::kDType, dtype));
        if (failed(main.insertArgument(position, stateType,
                                       attrs.getDictionaryAttr(dict),
                                       param.getLoc())))
          return signalPassFailure();
        states[k].push_back(main.getArgument(position++));
      }
    }
    // The step argument: the one the forward already reads (training-mode
    // Dropout draws its masks from it), or a new one after the states.
    Value stepArg;
    for (BlockArgument arg : main.getArguments())
      if (main.getArgAttr(arg.getArgNumber(), autopar::attrs::kStep))
        stepArg = arg;
    if (!stepArg) {
      auto stepType = RankedTensorType::get({}, attrs.getI64Type());
      if (failed(main.insertArgument(
              position, stepType,
              attrs.getDictionaryAttr(
                  {attrs.getNamedAttr(autopar::attrs::kStep,
                                      attrs.getUnitAttr()),
                   attrs.getNamedAttr(autopar::attrs::kDType,
                                      attrs.getStringAttr("int64"))}),
              main.getLoc())))
        return signalPassFailure();
      stepArg = main.getArgument(position);
    }

    // fp16 loss scaling: the scaler's state (zero at the start).
    bool scaling = lossScale > 0.0;
    BlockArgument scaleOffset;
    llvm::StringMap<BlockArgument> scaler;
    if (scaling) {
      for (BlockArgument arg : main.getArguments()) {
        auto role = main.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), autopar::attrs::kOptimizerState);
        auto of = main.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                    autopar::attrs::kStateOf);
        if (role && of && of.getValue() == "loss_scaler" &&
            role.getValue() == "scale_offset")
          scaleOffset = arg;
      }
      if (dynamicLossScale && !scaleOffset) {
        main.emitError("autopar-apply-optimizer: dynamic loss scaling needs "
                       "the state loss_scaler.scale_offset; run "
                       "autopar-differentiate with the same loss-scale and "
                       "dynamic-loss-scale");
        return signalPassFailure();
      }
      SmallVector<StringRef> roles{"applied_steps"};
      if (dynamicLossScale)
        roles.append({"iter", "last_overflow", "hysteresis_used"});
      auto i64Scalar = RankedTensorType::get({}, attrs.getI64Type());
      for (StringRef role : roles) {
        if (failed(main.insertArgument(
                position, i64Scalar,
                attrs.getDictionaryAttr(
                    {attrs.getNamedAttr(autopar::attrs::kOptimizerState,
                                        attrs.getStringAttr(role)),
                     attrs.getNamedAttr(autopar::attrs::kStateOf,
                                        attrs.getStringAttr("loss_scaler")),
                     attrs.getNamedAttr(autopar::attrs::kDType,
                                        attrs.getStringAttr("int64"))}),
                main.getLoc())))
          return signalPassFailure();
        scaler[role] = main.getArgument(position++);
      }
    }

    OpBuilder b(ret);
    UpdateBuilder u{b, main.getLoc()};
    Type f32 = b.getF32Type();
    // ZeRO: replica r's block (dim 0) of the sharded parameters and of
    // their gradients (already a block when reduce-scattered).
    SmallVector<Value> paramValues;
    auto blockOf = [&](Value whole) -> Value {
      auto type = cast<RankedTensorType>(whole.getType());
      return shard::AllSliceOp::create(
          b, u.loc, autopar::zeroShardType(type, dataParallel), grid,
          b.getDenseI16ArrayAttr({0}), whole, b.getIndexAttr(0));
    };
    for (auto [k, entry] : llvm::enumerate(trained)) {
      Value param = entry.first;
      bool slice = sharded[k] && !heldAsBlock[k];
      paramValues.push_back(slice ? blockOf(param) : param);
      if (slice && entry.second.getType() == param.getType())
        entry.second = blockOf(entry.second);
    }
    auto i64Constant = [&](int64_t v) -> Value {
      return arith::ConstantOp::create(b, u.loc, b.getI64IntegerAttr(v));
    };
    auto extract = [&](Value t) -> Value {
      return tensor::ExtractOp::create(b, u.loc, t, ValueRange{});
    };
    // Under loss scaling the schedule and Adam count the applied steps.
    Value stepInt =
        scaling
            ? arith::AddIOp::create(b, u.loc, extract(scaler["applied_steps"]),
                                    i64Constant(1))
                  .getResult()
            : extract(stepArg);
    Value scale, overflow;
    if (scaling) {
      // The scale this step used; the loss and gradients without it.
      scale = u.constant(f32, lossScale);
      if (scaleOffset)
        scale = u.add(scale, extract(scaleOffset));
      auto divideByScale = [&](Value t) {
        Type et = cast<RankedTensorType>(t.getType()).getElementType();
        Value s = scale;
        if (et != f32)
          s = et.getIntOrFloatBitWidth() > 32
                  ? arith::ExtFOp::create(b, u.loc, et, s).getResult()
                  : arith::TruncFOp::create(b, u.loc, et, s).getResult();
        return u.elementwise(
            {t, tensor::FromElementsOp::create(
                    b, u.loc, RankedTensorType::get({}, et), ValueRange{s})},
            [](OpBuilder &nb, Location nl, ValueRange a) {
              return Value(arith::DivFOp::create(nb, nl, a[0], a[1]));
            });
      };
      loss = divideByScale(loss);
      for (auto &entry : trained)
        entry.second = divideByScale(entry.second);
    }
    Value stepF = arith::SIToFPOp::create(b, u.loc, b.getF64Type(), stepInt);
    Value iteration = u.sub(stepF, u.f64(1.0));
    Value rate = learningRate(u, iteration);

    // The global norm before clipping: sqrt of the sum of squares over every
    // gradient (clip_grad_norm_'s total_norm for norm_type 2).
    // Under ZeRO the blocks' sums add up over the replicas first.
    // Under tensor parallelism (pipeline stages) a block's sum adds up over
    // the tp ranks; a replicated parameter's is counted once. ZeRO's block
    // of a tp block adds up over both (first over the replicas).
    Value sumSq, blockSumSq, tpSumSq, tpBlockSumSq;
    for (auto [k, entry] : llvm::enumerate(trained)) {
      // A tied weight's copy: the stage that holds it first counts it.
      if (main.getArgAttr(entry.first.getArgNumber(),
                          autopar::attrs::kTiedCopy))
        continue;
      Value s = tensor::ExtractOp::create(
          b, u.loc, u.sumOfSquares(entry.second), ValueRange{});
      if (s.getType() != f32)
        s = arith::ExtFOp::create(b, u.loc, f32, s);
      Value &total = sharded[k] && tpBlock[k] ? tpBlockSumSq
                     : sharded[k]             ? blockSumSq
                     : tpBlock[k]             ? tpSumSq
                                              : sumSq;
      total = total ? u.add(total, s) : s;
    }
    // An f32 scalar summed over one axis of a grid.
    auto sumOver = [&](Value scalar, llvm::StringRef gridName,
                       int16_t axis) -> Value {
      auto oneF32 = RankedTensorType::get({1}, f32);
      Value partial =
          tensor::FromElementsOp::create(b, u.loc, oneF32, ValueRange{scalar});
      Value reduced = shard::AllReduceOp::create(
          b, u.loc, oneF32, gridName, ArrayRef<shard::GridAxis>{axis}, partial,
          shard::ReductionKind::Sum);
      return tensor::ExtractOp::create(
          b, u.loc, reduced,
          ValueRange{arith::ConstantIndexOp::create(b, u.loc, 0)});
    };
    if (tpBlockSumSq) {
      Value overReplicas = sumOver(tpBlockSumSq, grid.getValue(), 0);
      tpSumSq = tpSumSq ? u.add(tpSumSq, overReplicas) : overReplicas;
    }
    if (tpSumSq) {
      Value global = sumOver(tpSumSq, "autopar_grid", 1);
      sumSq = sumSq ? u.add(sumSq, global) : global;
    }
    if (blockSumSq) {
      Value global = sumOver(blockSumSq, grid.getValue(), 0);
      sumSq = sumSq ? u.add(sumSq, global) : global;
    }
    // Every trained parameter of the stage a tied copy: it adds nothing.
    if (!sumSq)
      sumSq = u.constant(f32, 0.0);
    if (pipelineStages > 1) {
      // Pipeline stages each hold their own parameters: the global norm
      // adds every stage's sum (axis 2 of @autopar_grid, dp x tp x pp).
      auto grid = module.lookupSymbol<shard::GridOp>("autopar_grid");
      if (!grid || grid.getShape().size() != 3 ||
          grid.getShape()[2] != pipelineStages) {
        module.emitError() << "autopar-apply-optimizer: pipeline-stages="
                           << static_cast<int64_t>(pipelineStages)
                           << " needs a grid @autopar_grid of shape dp x tp x "
                           << static_cast<int64_t>(pipelineStages);
        return signalPassFailure();
      }
      sumSq = sumOver(sumSq, "autopar_grid", 2);
    }
    Value gradNorm = math::SqrtOp::create(b, u.loc, sumSq);
    if (scaling) {
      // An overflow: a gradient, hence the sum of squares, is inf or NaN.
      overflow = arith::CmpFOp::create(
          b, u.loc, arith::CmpFPredicate::UGE, sumSq,
          u.constant(f32, std::numeric_limits<float>::infinity()));
    }
    if (clip > 0.0) {
      // clip_coef = max_norm / (total_norm + 1e-6), clamped to 1.
      Value coef =
          u.div(u.constant(f32, clip), u.add(gradNorm, u.constant(f32, 1e-6)));
      coef = arith::MinimumFOp::create(b, u.loc, coef, u.constant(f32, 1.0));
      for (auto &entry : trained) {
        Type et =
            cast<RankedTensorType>(entry.second.getType()).getElementType();
        Value c = u.scalarTensor(coef, et);
        entry.second = u.elementwise(
            {entry.second, c}, [](OpBuilder &nb, Location nl, ValueRange a) {
              return Value(arith::MulFOp::create(nb, nl, a[0], a[1]));
            });
      }
    }

    // Scalars of the update, each a rank-0 tensor read by the elementwise
    // update kernels.
    SmallVector<Value> newResults{loss, u.scalarTensor(rate, f32),
                                  u.scalarTensor(gradNorm, f32)};
    SmallVector<DictionaryAttr> newAttrs{
        lossAttrs,
        attrs.getDictionaryAttr(
            {attrs.getNamedAttr(autopar::attrs::kMetric,
                                attrs.getStringAttr("lr")),
             attrs.getNamedAttr(autopar::attrs::kDType,
                                attrs.getStringAttr("float32"))}),
        attrs.getDictionaryAttr(
            {attrs.getNamedAttr(autopar::attrs::kMetric,
                                attrs.getStringAttr("grad_norm")),
             attrs.getNamedAttr(autopar::attrs::kDType,
                                attrs.getStringAttr("float32"))})};
    auto updateAttrs = [&](BlockArgument of) {
      SmallVector<NamedAttribute> dict;
      DictionaryAttr argAttrs = main.getArgAttrDict(of.getArgNumber());
      StringAttr name = argAttrs.getAs<StringAttr>(autopar::attrs::kParameter);
      std::string updated =
          name ? name.str()
               : (argAttrs.getAs<StringAttr>(autopar::attrs::kStateOf).str() +
                  "." +
                  argAttrs.getAs<StringAttr>(autopar::attrs::kOptimizerState)
                      .str());
      dict.push_back(attrs.getNamedAttr(autopar::attrs::kUpdate,
                                        attrs.getStringAttr(updated)));
      if (Attribute dtype = argAttrs.get(autopar::attrs::kDType))
        dict.push_back(attrs.getNamedAttr(autopar::attrs::kDType, dtype));
      return attrs.getDictionaryAttr(dict);
    };

    // The value each update keeps when a step is skipped (loss scaling).
    SmallVector<Value> skippedValue;
    // Indices into newResults of the parameter blocks ZeRO gathers.
    SmallVector<unsigned> gatheredResults;
    Value isFirst = arith::CmpIOp::create(
        b, u.loc, arith::CmpIPredicate::eq, stepInt,
        arith::ConstantOp::create(b, u.loc, b.getI64IntegerAttr(1)));
    for (auto [k, entry] : llvm::enumerate(trained)) {
      auto [paramArg, grad] = entry;
      // The parameter, or under ZeRO this replica's block of it.
      Value param = paramValues[k];
      Type et = cast<RankedTensorType>(param.getType()).getElementType();
      auto scalar = [&](Value v) { return u.scalarTensor(v, et); };
      auto constant = [&](double v) { return u.scalarTensor(u.f64(v), et); };
      // (what is updated, its new value, its old value).
      SmallVector<std::tuple<BlockArgument, Value, Value>> updates;
      if (optimizer == autopar::OptimizerKind::SGD) {
        // d_p = grad + wd * p; buf = d_p at the first step, else
        // momentum * buf + (1 - dampening) * d_p; nesterov: d_p + momentum *
        // buf; p -= lr * d_p.
        Value d = grad;
        if (weightDecay != 0.0)
          d = u.addScaled(grad, param, constant(weightDecay));
        if (momentum != 0.0) {
          Value first = tensor::FromElementsOp::create(
              b, u.loc, RankedTensorType::get({}, b.getI1Type()),
              ValueRange{isFirst});
          Value buf = u.elementwise(
              {d, states[k][0], constant(momentum), constant(1.0 - dampening),
               first},
              [](OpBuilder &nb, Location nl, ValueRange a) {
                Value mb = arith::MulFOp::create(nb, nl, a[2], a[1]);
                Value dd = arith::MulFOp::create(nb, nl, a[3], a[0]);
                Value next = arith::AddFOp::create(nb, nl, mb, dd);
                return Value(arith::SelectOp::create(nb, nl, a[4], a[0], next));
              });
          updates.push_back({states[k][0], buf, states[k][0]});
          if (nesterov)
            d = u.addScaled(d, buf, constant(momentum));
          else
            d = buf;
        }
        Value newParam = u.elementwise(
            {param, d, scalar(rate)},
            [](OpBuilder &nb, Location nl, ValueRange a) {
              Value step = arith::MulFOp::create(nb, nl, a[2], a[1]);
              return Value(arith::SubFOp::create(nb, nl, a[0], step));
            });
        updates.insert(updates.begin(), {paramArg, newParam, param});
      } else {
        // Adam: grad += wd * p. AdamW: p *= 1 - lr * wd.
        Value g = grad, p = param;
        if (weightDecay != 0.0) {
          if (optimizer == autopar::OptimizerKind::Adam)
            g = u.addScaled(grad, param, constant(weightDecay));
          else
            p = u.elementwise(
                {param,
                 scalar(u.sub(u.f64(1.0), u.mul(rate, u.f64(weightDecay))))},
                [](OpBuilder &nb, Location nl, ValueRange a) {
                  return Value(arith::MulFOp::create(nb, nl, a[0], a[1]));
                });
        }
        // exp_avg = exp_avg * beta1 + (1 - beta1) * g;
        // exp_avg_sq = exp_avg_sq * beta2 + (1 - beta2) * g * g.
        Value expAvg = u.elementwise(
            {states[k][0], g, constant(beta1), constant(1.0 - beta1)},
            [](OpBuilder &nb, Location nl, ValueRange a) {
              Value decayed = arith::MulFOp::create(nb, nl, a[0], a[2]);
              Value added = arith::MulFOp::create(nb, nl, a[1], a[3]);
              return Value(arith::AddFOp::create(nb, nl, decayed, added));
            });
        Value expAvgSq = u.elementwise(
            {states[k][1], g, constant(beta2), constant(1.0 - beta2)},
            [](OpBuilder &nb, Location nl, ValueRange a) {
              Value decayed = arith::MulFOp::create(nb, nl, a[0], a[2]);
              Value gg = arith::MulFOp::create(nb, nl, a[1], a[1]);
              Value added = arith::MulFOp::create(nb, nl, gg, a[3]);
              return Value(arith::AddFOp::create(nb, nl, decayed, added));
            });
        // step_size = lr / (1 - beta1^step);
        // denom = sqrt(exp_avg_sq) / sqrt(1 - beta2^step) + eps;
        // p -= step_size * exp_avg / denom.
        Value pow1 = math::PowFOp::create(b, u.loc, u.f64(beta1), stepF);
        Value pow2 = math::PowFOp::create(b, u.loc, u.f64(beta2), stepF);
        Value stepSize = u.div(rate, u.sub(u.f64(1.0), pow1));
        Value correction2 =
            math::SqrtOp::create(b, u.loc, u.sub(u.f64(1.0), pow2));
        Value newParam = u.elementwise(
            {p, expAvg, expAvgSq, scalar(stepSize), scalar(correction2),
             constant(eps)},
            [](OpBuilder &nb, Location nl, ValueRange a) {
              Value root = math::SqrtOp::create(nb, nl, a[2]);
              Value denom = arith::AddFOp::create(
                  nb, nl, arith::DivFOp::create(nb, nl, root, a[4]), a[5]);
              Value ratio = arith::DivFOp::create(nb, nl, a[1], denom);
              Value step = arith::MulFOp::create(nb, nl, a[3], ratio);
              return Value(arith::SubFOp::create(nb, nl, a[0], step));
            });
        updates = {{paramArg, newParam, param},
                   {states[k][0], expAvg, states[k][0]},
                   {states[k][1], expAvgSq, states[k][1]}};
      }
      for (auto &[of, value, old] : updates) {
        if (sharded[k] && !heldAsBlock[k] && of == paramArg)
          gatheredResults.push_back(newResults.size());
        newResults.push_back(value);
        newAttrs.push_back(updateAttrs(of));
        skippedValue.push_back(old);
      }
    }

    if (scaling) {
      // A skipped step leaves every parameter and state as it was.
      Value skip = tensor::FromElementsOp::create(
          b, u.loc, RankedTensorType::get({}, b.getI1Type()),
          ValueRange{overflow});
      unsigned firstUpdate = 3;
      for (unsigned r = firstUpdate; r < firstUpdate + skippedValue.size(); ++r)
        newResults[r] = u.elementwise(
            {newResults[r], skippedValue[r - firstUpdate], skip},
            [](OpBuilder &nb, Location nl, ValueRange a) {
              return Value(arith::SelectOp::create(nb, nl, a[2], a[1], a[0]));
            });
      auto metricAttrs = [&](StringRef name) {
        return attrs.getDictionaryAttr(
            {attrs.getNamedAttr(autopar::attrs::kMetric,
                                attrs.getStringAttr(name)),
             attrs.getNamedAttr(autopar::attrs::kDType,
                                attrs.getStringAttr("float32"))});
      };
      auto stateUpdate = [&](BlockArgument state, Value scalar) {
        newResults.push_back(tensor::FromElementsOp::create(
            b, u.loc, state.getType(), ValueRange{scalar}));
        newAttrs.push_back(updateAttrs(state));
      };
      newResults.push_back(u.scalarTensor(scale, f32));
      newAttrs.push_back(metricAttrs("loss_scale"));
      newResults.push_back(u.scalarTensor(
          u.select(overflow, u.constant(f32, 1.0), u.constant(f32, 0.0)), f32));
      newAttrs.push_back(metricAttrs("overflow"));
      Value applied = extract(scaler["applied_steps"]);
      stateUpdate(
          scaler["applied_steps"],
          arith::SelectOp::create(
              b, u.loc, overflow, applied,
              arith::AddIOp::create(b, u.loc, applied, i64Constant(1))));
      if (dynamicLossScale) {
        // DeepSpeed's DynamicLossScaler.update_scale, with last_overflow
        // stored as last_overflow_iter + 1 and hysteresis_used as
        // hysteresis - cur_hysteresis, so that every state starts at zero.
        Value iter = extract(scaler["iter"]);
        Value last = arith::SubIOp::create(
            b, u.loc, extract(scaler["last_overflow"]), i64Constant(1));
        Value used = extract(scaler["hysteresis_used"]);
        auto eq = [&](Value x, Value y) -> Value {
          return arith::CmpIOp::create(b, u.loc, arith::CmpIPredicate::eq, x,
                                       y);
        };
        auto iselect = [&](Value c, Value x, Value y) -> Value {
          return arith::SelectOp::create(b, u.loc, c, x, y);
        };
        Value curHysteresis =
            arith::SubIOp::create(b, u.loc, i64Constant(hysteresis), used);
        // Overflow: halve (not below the minimum) once the hysteresis is
        // used up, else use one more of it; remember the iteration.
        Value shrink = arith::OrIOp::create(
            b, u.loc, eq(i64Constant(hysteresis), i64Constant(1)),
            eq(curHysteresis, i64Constant(1)));
        Value halved = u.max(u.div(scale, u.constant(f32, 2.0)),
                             u.constant(f32, minLossScale));
        Value scaleOver = u.select(shrink, halved, scale);
        Value usedOver =
            iselect(shrink, used,
                    arith::AddIOp::create(b, u.loc, used, i64Constant(1)));
        // No overflow: double after a window of good steps.
        Value sinceOverflow = arith::SubIOp::create(b, u.loc, iter, last);
        Value grow = eq(arith::RemSIOp::create(b, u.loc, sinceOverflow,
                                               i64Constant(lossScaleWindow)),
                        i64Constant(0));
        Value scaleOk =
            u.select(grow, u.mul(scale, u.constant(f32, 2.0)), scale);
        Value usedOk = consecutiveHysteresis
                           ? i64Constant(0)
                           : iselect(grow, i64Constant(0), used);
        Value nextScale = u.select(overflow, scaleOver, scaleOk);
        stateUpdate(scaleOffset, u.sub(nextScale, u.constant(f32, lossScale)));
        stateUpdate(scaler["iter"],
                    arith::AddIOp::create(b, u.loc, iter, i64Constant(1)));
        stateUpdate(
            scaler["last_overflow"],
            iselect(overflow,
                    arith::AddIOp::create(b, u.loc, iter, i64Constant(1)),
                    extract(scaler["last_overflow"])));
        stateUpdate(scaler["hysteresis_used"],
                    iselect(overflow, usedOver, usedOk));
      }
    }
    // ZeRO: every replica gets the whole of each updated parameter back.
    if (!gatheredResults.empty()) {
      SmallVector<Value> blocks;
      for (unsigned r : gatheredResults)
        blocks.push_back(newResults[r]);
      SmallVector<Value> wholes =
          autopar::allGatherBlocks(b, u.loc, grid, dataParallel, blocks);
      for (auto [k, r] : llvm::enumerate(gatheredResults))
        newResults[r] = wholes[k];
    }
    for (auto &[value, dict] : forwardUpdates) {
      newResults.push_back(value);
      newAttrs.push_back(dict);
    }
    func::ReturnOp::create(b, ret.getLoc(), newResults);
    ret.erase();
    main.setType(FunctionType::get(&getContext(), main.getArgumentTypes(),
                                   ValueRange(newResults).getTypes()));
    main.setAllResultAttrs(newAttrs);
  }
};

} // namespace
