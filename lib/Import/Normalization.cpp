//===- Normalization.cpp - Softmax and normalization layers ---------------===//
//
// Softmax, LogSoftmax, LayerNormalization and inference-mode
// BatchNormalization, built from `linalg.reduce` (createReduction) and
// broadcasting elementwise `linalg.generic`s (createElementwise). Softmax
// subtracts the maximum first so that exp never overflows.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
namespace autopar::import {
namespace {

/// Requires a floating-point input `i`.
LogicalResult requireFloat(NodeContext &ctx, int64_t i, llvm::StringRef what) {
  if (isFloatDType(ctx.inputDType(i)))
    return success();
  return ctx.unsupported(llvm::Twine(what) + " has element type " +
                         dtypeName(ctx.inputDType(i)) +
                         "; only floating-point types are supported");
}

/// Reduces `x` over `dims` keeping them as size-1 dims.
Value reduceKeepDims(OpBuilder &b, Location loc, Value x,
                     llvm::ArrayRef<int64_t> dims, ReductionKind kind) {
  return expandReducedDims(b, loc, createReduction(b, loc, x, dims, kind),
                           dims);
}

//===----------------------------------------------------------------------===//
// Softmax / LogSoftmax
//===----------------------------------------------------------------------===//

} // namespace

Value buildSoftmax(OpBuilder &b, Location loc, Value x,
                   llvm::ArrayRef<int64_t> dims, bool isLog) {
  llvm::ArrayRef<int64_t> shape = getShape(x);
  Type et = getElementTypeOf(x);
  Value max = reduceKeepDims(b, loc, x, dims, ReductionKind::Max);
  Value e =
      createElementwise(b, loc, {x, max}, shape, et,
                        [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                          return math::ExpOp::create(
                              nb, l, arith::SubFOp::create(nb, l, a[0], a[1]));
                        });
  Value sum = reduceKeepDims(b, loc, e, dims, ReductionKind::Sum);
  if (!isLog)
    return createElementwise(
        b, loc, {e, sum}, shape, et,
        [](OpBuilder &nb, Location l, ValueRange a) -> Value {
          return arith::DivFOp::create(nb, l, a[0], a[1]);
        });
  return createElementwise(
      b, loc, {x, max, sum}, shape, et,
      [](OpBuilder &nb, Location l, ValueRange a) -> Value {
        Value shifted = arith::SubFOp::create(nb, l, a[0], a[1]);
        return arith::SubFOp::create(nb, l, shifted,
                                     math::LogOp::create(nb, l, a[2]));
      });
}

namespace {

/// Opset >= 13 normalizes along `axis` (default -1). Earlier opsets coerce
/// the input to 2-D at `axis` (default 1) and normalize each row, i.e. over
/// the flattened dims [axis, rank).
LogicalResult convertSoftmaxLike(NodeContext &ctx, bool isLog) {
  if (failed(requireFloat(ctx, 0, "the input")))
    return failure();
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  Value x = ctx.input(0);
  llvm::SmallVector<int64_t> shape(getShape(x));
  // A scalar is normalized as a one-element vector.
  if (shape.empty())
    x = reshapeTensor(b, loc, x, {1});
  int64_t rank = getShape(x).size();
  bool legacy = ctx.getOpset() < 13;
  auto axis = ctx.normalizeAxis(ctx.getIntAttr("axis", legacy ? 1 : -1), rank);
  if (failed(axis))
    return failure();
  llvm::SmallVector<int64_t> dims{*axis};
  if (legacy)
    for (int64_t d = *axis + 1; d < rank; ++d)
      dims.push_back(d);
  Value y = buildSoftmax(b, loc, x, dims, isLog);
  ctx.setOutput(0, reshapeTensor(b, loc, y, shape), ctx.inputDType(0));
  return success();
}

LogicalResult convertSoftmax(NodeContext &ctx) {
  return convertSoftmaxLike(ctx, /*isLog=*/false);
}
LogicalResult convertLogSoftmax(NodeContext &ctx) {
  return convertSoftmaxLike(ctx, /*isLog=*/true);
}

//===----------------------------------------------------------------------===//
// LayerNormalization
//===----------------------------------------------------------------------===//

/// The mean of `x` (of `shape`, element type `et`) over `dims`, kept as
/// size-1 dims, `x` minus it, and the biased variance: the statistics of
/// LayerNormalization and InstanceNormalization.
struct CenteredMoments {
  Value mean, centered, variance;
};
CenteredMoments centeredMoments(OpBuilder &b, Location loc, Value x,
                                llvm::ArrayRef<int64_t> shape, Type et,
                                llvm::ArrayRef<int64_t> dims) {
  Value mean = reduceKeepDims(b, loc, x, dims, ReductionKind::Mean);
  Value centered =
      createElementwise(b, loc, {x, mean}, shape, et,
                        [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                          return arith::SubFOp::create(nb, l, a[0], a[1]);
                        });
  Value squares =
      createElementwise(b, loc, centered, shape, et,
                        [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                          return arith::MulFOp::create(nb, l, a[0], a[0]);
                        });
  return {mean, centered,
          reduceKeepDims(b, loc, squares, dims, ReductionKind::Mean)};
}

/// Checks that input `i` broadcasts to `shape` (unidirectionally).
LogicalResult requireBroadcastableTo(NodeContext &ctx, int64_t i,
                                     llvm::ArrayRef<int64_t> shape,
                                     llvm::StringRef what) {
  llvm::SmallVector<int64_t> target(shape);
  auto result =
      broadcastShapes({target, llvm::SmallVector<int64_t>(ctx.inputShape(i))});
  if (succeeded(result) && *result == target)
    return success();
  auto diag = ctx.emitError(what) << " of shape [";
  llvm::interleaveComma(ctx.inputShape(i), diag);
  diag << "] does not broadcast to the input shape [";
  llvm::interleaveComma(shape, diag);
  return diag << "]";
}

/// Y = (X - mean) / sqrt(var + epsilon) * Scale + B over dims [axis, rank),
/// computed in stash_type; optional outputs Mean and InvStdDev keep the
/// normalized dims as size 1.
LogicalResult convertLayerNormalization(NodeContext &ctx) {
  if (failed(requireFloat(ctx, 0, "X")))
    return failure();
  OnnxDType t = ctx.inputDType(0);
  llvm::SmallVector<int64_t> shape(ctx.inputShape(0));
  int64_t rank = shape.size();
  auto axis = ctx.normalizeAxis(ctx.getIntAttr("axis", -1), rank);
  if (failed(axis))
    return failure();
  OnnxDType stash =
      ctx.getIntAttr("stash_type", onnx::TensorProto_DataType_FLOAT);
  if (!isFloatDType(stash) || !getElementType(ctx.getContext(), stash))
    return ctx.unsupported("stash_type " + dtypeName(stash) +
                           " is not supported (supported: float32, float64, "
                           "float16, bfloat16)");
  if (failed(requireBroadcastableTo(ctx, 1, shape, "Scale")) ||
      (ctx.hasInput(2) && failed(requireBroadcastableTo(ctx, 2, shape, "B"))))
    return failure();
  double epsilon = ctx.getFloatAttr("epsilon", 1e-5f);

  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  Type st = getElementType(ctx.getContext(), stash);
  llvm::SmallVector<int64_t> dims;
  for (int64_t d = *axis; d < rank; ++d)
    dims.push_back(d);

  Value x = ctx.input(0);
  if (stash != t)
    x = createElementwise(b, loc, x, shape, st,
                          [&](OpBuilder &nb, Location l, ValueRange a) {
                            return castScalar(nb, l, a[0], t, stash);
                          });
  auto [mean, diff, var] = centeredMoments(b, loc, x, shape, st, dims);
  Value invStdDev =
      createElementwise(b, loc, var, getShape(var), st,
                        [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                          Value eps = createScalarConstant(nb, l, st, epsilon);
                          Value one = createScalarConstant(nb, l, st, 1.0);
                          Value stddev = math::SqrtOp::create(
                              nb, l, arith::AddFOp::create(nb, l, a[0], eps));
                          return arith::DivFOp::create(nb, l, one, stddev);
                        });

  llvm::SmallVector<Value> operands{diff, invStdDev, ctx.input(1)};
  if (ctx.hasInput(2))
    operands.push_back(ctx.input(2));
  OnnxDType scaleType = ctx.inputDType(1);
  OnnxDType biasType = ctx.hasInput(2) ? ctx.inputDType(2) : t;
  Value y = createElementwise(
      b, loc, operands, shape, getElementType(ctx.getContext(), t),
      [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
        Value normalized = arith::MulFOp::create(nb, l, a[0], a[1]);
        normalized = castScalar(nb, l, normalized, stash, t);
        Value scale = castScalar(nb, l, a[2], scaleType, t);
        Value r = arith::MulFOp::create(nb, l, normalized, scale);
        if (a.size() > 3)
          r = arith::AddFOp::create(nb, l, r,
                                    castScalar(nb, l, a[3], biasType, t));
        return r;
      });
  ctx.setOutput(0, y, t);
  if (ctx.hasOutput(1))
    ctx.setOutput(1, mean, stash);
  if (ctx.hasOutput(2))
    ctx.setOutput(2, invStdDev, stash);
  return success();
}

//===----------------------------------------------------------------------===//
// InstanceNormalization
//===----------------------------------------------------------------------===//

/// Y = scale[c] * (X - mean) / sqrt(var + epsilon) + B[c], mean and the
/// biased variance over the spatial dims [2, rank) of each sample and
/// channel (torch.nn.InstanceNorm without running statistics).
LogicalResult convertInstanceNormalization(NodeContext &ctx) {
  if (failed(requireFloat(ctx, 0, "input")))
    return failure();
  OnnxDType t = ctx.inputDType(0);
  llvm::SmallVector<int64_t> shape(ctx.inputShape(0));
  int64_t rank = shape.size();
  if (rank < 3)
    return ctx.emitError("input of rank ")
           << rank << ": InstanceNormalization takes [N, C, D1, ...]";
  for (int64_t i : {1, 2})
    if (ctx.inputShape(i) != llvm::ArrayRef<int64_t>{shape[1]}) {
      auto diag = ctx.emitError(i == 1 ? "scale" : "B") << " of shape [";
      llvm::interleaveComma(ctx.inputShape(i), diag);
      return diag << "], expected [" << shape[1] << "] (the channels)";
    }
  double epsilon = ctx.getFloatAttr("epsilon", 1e-5f);
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  Type et = getElementType(ctx.getContext(), t);
  llvm::SmallVector<int64_t> dims;
  for (int64_t d = 2; d < rank; ++d)
    dims.push_back(d);
  Value x = ctx.input(0);
  CenteredMoments moments = centeredMoments(b, loc, x, shape, et, dims);
  // scale and B as [C, 1, ..., 1], broadcast from the right.
  llvm::SmallVector<int64_t> perChannel(rank - 1, 1);
  perChannel[0] = shape[1];
  Value scale = reshapeTensor(b, loc, ctx.input(1), perChannel);
  Value bias = reshapeTensor(b, loc, ctx.input(2), perChannel);
  OnnxDType scaleType = ctx.inputDType(1), biasType = ctx.inputDType(2);
  Value y = createElementwise(
      b, loc, {moments.centered, moments.variance, scale, bias}, shape, et,
      [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
        Value eps = createScalarConstant(nb, l, et, epsilon);
        Value stddev = math::SqrtOp::create(
            nb, l, arith::AddFOp::create(nb, l, a[1], eps));
        Value normalized = arith::DivFOp::create(nb, l, a[0], stddev);
        Value r = arith::MulFOp::create(nb, l, normalized,
                                        castScalar(nb, l, a[2], scaleType, t));
        return arith::AddFOp::create(nb, l, r,
                                     castScalar(nb, l, a[3], biasType, t));
      });
  ctx.setOutput(0, y, t);
  return success();
}

//===----------------------------------------------------------------------===//
// BatchNormalization
//===----------------------------------------------------------------------===//

const char *const kBatchNormInputs[] = {"X", "scale", "B", "input_mean",
                                        "input_var"};

/// `@autopar_grid`, the grid data-parallel replicas reduce over (axis 0),
/// made of shape `replicas` at the start of the module if it is missing.
static StringRef getOrCreateReplicaGrid(OpBuilder &b, int64_t replicas) {
  auto module =
      b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
  if (!module.lookupSymbol<shard::GridOp>("autopar_grid")) {
    OpBuilder mb = OpBuilder::atBlockBegin(module.getBody());
    shard::GridOp::create(mb, module.getLoc(), "autopar_grid",
                          ArrayRef<int64_t>{replicas});
  }
  return "autopar_grid";
}

/// Rejects the training forms: training_mode=1, extra outputs (running
/// statistics), and the per-activation statistics of spatial=0.
LogicalResult checkInferenceForm(NodeContext &ctx) {
  if (ctx.getIntAttr("training_mode", 0) != 0)
    return ctx.unsupported("training_mode=1 is not supported; autopar imports "
                           "BatchNormalization in inference form only "
                           "(training_mode=0, one output Y)");
  int64_t outputs = 0;
  for (int64_t i = 0; i < ctx.getNumOutputs(); ++i)
    outputs += ctx.hasOutput(i);
  if (outputs > 1 || !ctx.hasOutput(0))
    return ctx.unsupported("requests " + llvm::Twine(outputs) +
                           " outputs (running or saved statistics); only the "
                           "inference form with the single output Y is "
                           "supported");
  if (ctx.getOpset() < 9 && ctx.getIntAttr("spatial", 1) == 0)
    return ctx.unsupported("spatial=0 (per-activation statistics) is not "
                           "supported; only spatial=1 is");
  return success();
}

/// Checks X's rank and the four per-channel inputs' shapes; returns the
/// channel count (dim 1 of X).
FailureOr<int64_t> checkBatchNormShapes(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> shape = ctx.inputShape(0);
  if (shape.size() < 2)
    return ctx.emitError("X must have rank >= 2 (N, C, ...), got rank ")
           << shape.size();
  if (ctx.getNumInputs() < 5)
    return ctx.emitError("needs 5 inputs (X, scale, B, input_mean, "
                         "input_var), got ")
           << ctx.getNumInputs();
  int64_t channels = shape[1];
  for (int64_t i = 1; i < 5; ++i)
    if (ctx.inputShape(i) != llvm::ArrayRef<int64_t>{channels})
      return ctx.emitError(kBatchNormInputs[i])
             << " must have shape [" << channels << "] (the channel count)";
  return channels;
}

/// training_mode=1: normalizes with the batch's statistics over every dim
/// but the channels (dim 1), with the biased variance. Outputs 1 and 2, when
/// requested, are the ONNX running statistics: input_mean * momentum +
/// mean * (1 - momentum), and the same for the (biased) variance.
///
/// Compiling a training step, the running statistics that are parameters
/// are updated as PyTorch updates them (docs/training.md, Conventions):
/// with its momentum m = 1 - ONNX's and the *unbiased* batch variance,
///   running = m * batch + (1 - m) * running,
/// whether or not the graph uses outputs 1 and 2 (PyTorch's exports leave
/// them unused).
LogicalResult convertBatchNormalizationTraining(NodeContext &ctx) {
  OnnxDType t = ctx.inputDType(0);
  llvm::SmallVector<int64_t> shape(ctx.inputShape(0));
  auto checked = checkBatchNormShapes(ctx);
  if (failed(checked))
    return failure();
  int64_t channels = *checked;
  for (int64_t i = 1; i < 5; ++i)
    if (ctx.inputDType(i) != t)
      return ctx.unsupported(llvm::Twine("training_mode=1 with ") +
                             kBatchNormInputs[i] + " of type " +
                             dtypeName(ctx.inputDType(i)) + " and X of type " +
                             dtypeName(t) + "; all inputs must have one type");
  for (int64_t i = 3; i < ctx.getNumOutputs(); ++i)
    if (ctx.hasOutput(i))
      return ctx.unsupported("requests saved statistics (outputs 3 and 4 of "
                             "opset < 14); only Y and the running mean and "
                             "variance are supported");
  double epsilon = ctx.getFloatAttr("epsilon", 1e-5f);
  double momentum = ctx.getFloatAttr("momentum", 0.9f);
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  Type et = getElementType(ctx.getContext(), t);
  llvm::SmallVector<int64_t> dims{0};
  for (int64_t d = 2; d < int64_t(shape.size()); ++d)
    dims.push_back(d);
  llvm::SmallVector<int64_t> channelShape(shape.size() - 1, 1);
  channelShape[0] = channels;
  auto perChannel = [&](Value v) {
    return reshapeTensor(b, loc, v, channelShape);
  };
  Value x = ctx.input(0);
  // Data-parallel replicas share the global batch's statistics (equal
  // shares: the mean of their means).
  int64_t replicas = ctx.dataParallelReplicas();
  auto acrossReplicas = [&](Value local) -> Value {
    if (replicas == 1)
      return local;
    Value sum = shard::AllReduceOp::create(
        b, loc, local.getType(), getOrCreateReplicaGrid(b, replicas),
        ArrayRef<shard::GridAxis>{0}, local, shard::ReductionKind::Sum);
    return createElementwise(
        b, loc, {sum}, {channels}, et,
        [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
          return arith::MulFOp::create(
              nb, l, a[0], createScalarConstant(nb, l, et, 1.0 / replicas));
        });
  };
  Value mean =
      acrossReplicas(createReduction(b, loc, x, dims, ReductionKind::Mean));
  Value centered =
      createElementwise(b, loc, {x, perChannel(mean)}, shape, et,
                        [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                          return arith::SubFOp::create(nb, l, a[0], a[1]);
                        });
  Value squares =
      createElementwise(b, loc, {centered}, shape, et,
                        [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                          return arith::MulFOp::create(nb, l, a[0], a[0]);
                        });
  Value var = acrossReplicas(
      createReduction(b, loc, squares, dims, ReductionKind::Mean));
  Value factor =
      createElementwise(b, loc, {ctx.input(1), var}, {channels}, et,
                        [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                          Value eps = createScalarConstant(nb, l, et, epsilon);
                          Value stddev = math::SqrtOp::create(
                              nb, l, arith::AddFOp::create(nb, l, a[1], eps));
                          return arith::DivFOp::create(nb, l, a[0], stddev);
                        });
  Value y = createElementwise(
      b, loc, {centered, perChannel(factor), perChannel(ctx.input(2))}, shape,
      et, [](OpBuilder &nb, Location l, ValueRange a) -> Value {
        return arith::AddFOp::create(
            nb, l, arith::MulFOp::create(nb, l, a[0], a[1]), a[2]);
      });
  ctx.setOutput(0, y, t);
  auto running = [&](Value previous, Value current) {
    return createElementwise(
        b, loc, {previous, current}, {channels}, et,
        [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
          Value m = createScalarConstant(nb, l, et, momentum);
          Value rest = createScalarConstant(nb, l, et, 1.0 - momentum);
          return arith::AddFOp::create(
              nb, l, arith::MulFOp::create(nb, l, a[0], m),
              arith::MulFOp::create(nb, l, a[1], rest));
        });
  };
  if (ctx.hasOutput(1))
    ctx.setOutput(1, running(ctx.input(3), mean), t);
  if (ctx.hasOutput(2))
    ctx.setOutput(2, running(ctx.input(4), var), t);

  if (!ctx.importsTrainingState())
    return success();
  int64_t count = replicas;
  for (int64_t d : dims)
    count *= shape[d];
  // PyTorch: momentum * batch + (1 - momentum) * running, with the batch
  // variance scaled by n / (n - 1) (n = 1 keeps the biased one, as there
  // is no unbiased estimate).
  double torchMomentum = 1.0 - momentum;
  double unbias = count > 1 ? double(count) / double(count - 1) : 1.0;
  auto torchRunning = [&](Value previous, Value current, double scale) {
    return createElementwise(
        b, loc, {previous, current}, {channels}, et,
        [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
          Value batch = a[1];
          if (scale != 1.0)
            batch = arith::MulFOp::create(
                nb, l, batch, createScalarConstant(nb, l, et, scale));
          // Named, so that the ops come in this order on any compiler.
          Value batchTerm = arith::MulFOp::create(
              nb, l, createScalarConstant(nb, l, et, torchMomentum), batch);
          Value runningTerm = arith::MulFOp::create(
              nb, l, createScalarConstant(nb, l, et, 1.0 - torchMomentum),
              a[0]);
          return arith::AddFOp::create(nb, l, batchTerm, runningTerm);
        });
  };
  if (failed(ctx.updateParameter(3, torchRunning(ctx.input(3), mean, 1.0))) ||
      failed(ctx.updateParameter(4, torchRunning(ctx.input(4), var, unbias))))
    return failure();
  return success();
}

/// y = (x - mean) * (scale / sqrt(var + epsilon)) + B per channel (dim 1).
LogicalResult convertBatchNormalization(NodeContext &ctx) {
  bool evalOfTraining =
      ctx.getIntAttr("training_mode", 0) != 0 && ctx.importsForEval();
  if (ctx.getIntAttr("training_mode", 0) != 0 && !evalOfTraining) {
    if (failed(requireFloat(ctx, 0, "X")))
      return failure();
    return convertBatchNormalizationTraining(ctx);
  }
  // Evaluating a training-mode node: the inference form on the running
  // statistics, which stay what they are.
  if (evalOfTraining) {
    for (int64_t i = 3; i < ctx.getNumOutputs(); ++i)
      if (ctx.hasOutput(i))
        return ctx.unsupported("requests saved statistics (outputs 3 and 4 "
                               "of opset < 14)");
    if (ctx.hasOutput(1))
      ctx.setOutput(1, ctx.input(3), ctx.inputDType(3));
    if (ctx.hasOutput(2))
      ctx.setOutput(2, ctx.input(4), ctx.inputDType(4));
  } else if (failed(checkInferenceForm(ctx))) {
    return failure();
  }
  if (failed(requireFloat(ctx, 0, "X")))
    return failure();
  OnnxDType t = ctx.inputDType(0);
  llvm::SmallVector<int64_t> shape(ctx.inputShape(0));
  auto checked = checkBatchNormShapes(ctx);
  if (failed(checked))
    return failure();
  int64_t channels = *checked;
  for (int64_t i = 1; i < 5; ++i)
    if (failed(requireFloat(ctx, i, kBatchNormInputs[i])))
      return failure();
  double epsilon = ctx.getFloatAttr("epsilon", 1e-5f);
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  Type et = getElementType(ctx.getContext(), t);
  llvm::SmallVector<OnnxDType> types;
  for (int64_t i = 1; i < 5; ++i)
    types.push_back(ctx.inputDType(i));

  // The per-channel multiplier, computed once per channel.
  Value factor =
      createElementwise(b, loc, {ctx.input(1), ctx.input(4)}, {channels}, et,
                        [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
                          Value scale = castScalar(nb, l, a[0], types[0], t);
                          Value var = castScalar(nb, l, a[1], types[3], t);
                          Value eps = createScalarConstant(nb, l, et, epsilon);
                          Value stddev = math::SqrtOp::create(
                              nb, l, arith::AddFOp::create(nb, l, var, eps));
                          return arith::DivFOp::create(nb, l, scale, stddev);
                        });
  // [C] -> [C, 1, ..., 1] so that ONNX broadcasting aligns it with dim 1.
  llvm::SmallVector<int64_t> channelShape(shape.size() - 1, 1);
  channelShape[0] = channels;
  auto perChannel = [&](Value v) {
    return reshapeTensor(b, loc, v, channelShape);
  };
  Value y = createElementwise(
      b, loc,
      {ctx.input(0), perChannel(ctx.input(3)), perChannel(factor),
       perChannel(ctx.input(2))},
      shape, et, [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
        Value mean = castScalar(nb, l, a[1], types[2], t);
        Value bias = castScalar(nb, l, a[3], types[1], t);
        Value centered = arith::SubFOp::create(nb, l, a[0], mean);
        return arith::AddFOp::create(
            nb, l, arith::MulFOp::create(nb, l, centered, a[2]), bias);
      });
  ctx.setOutput(0, y, t);
  return success();
}

} // namespace

void registerNormalizationConverters(ConverterRegistry &registry) {
  registry["Softmax"] = convertSoftmax;
  registry["LogSoftmax"] = convertLogSoftmax;
  registry["LayerNormalization"] = convertLayerNormalization;
  registry["InstanceNormalization"] = convertInstanceNormalization;
  registry["BatchNormalization"] = convertBatchNormalization;
}

} // namespace autopar::import
