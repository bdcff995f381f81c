//===- Loss.cpp - SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss ---===//
//
// What `F.cross_entropy` / `F.nll_loss` export to. Both are built from
// structured ops that autopar-differentiate handles with its generic rule:
// the log-probability of each target is picked by a reduction over classes
// that selects where the class index equals the label (a one-hot
// contraction), so its adjoint is elementwise and needs no scatter.
//
// PyTorch's conventions (the ONNX spec agrees): a target equal to
// ignore_index contributes nothing; with class weights w, element i weighs
// w[target_i]; "mean" divides the weighted sum by the sum of the weights of
// the targets not ignored (their count without weights).
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
namespace autopar::import {
namespace {

/// `loss` for the log-probabilities `logProb` ([N, C, d1, ...]) of the
/// labels `labels` ([N, d1, ...], integer), set as output 0.
LogicalResult buildNegativeLogLikelihood(NodeContext &ctx, Value logProb,
                                         int64_t labelsInput,
                                         int64_t weightsInput) {
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  MLIRContext *mctx = ctx.getContext();
  llvm::ArrayRef<int64_t> shape = getShape(logProb);
  if (shape.size() < 2)
    return ctx.unsupported("the scores have rank " + llvm::Twine(shape.size()) +
                           "; they must be [N, C] or [N, C, d1, ...]");
  llvm::SmallVector<int64_t> labelShape{shape[0]};
  labelShape.append(shape.begin() + 2, shape.end());
  if (!isSignedIntDType(ctx.inputDType(labelsInput)) &&
      !isUnsignedIntDType(ctx.inputDType(labelsInput)))
    return ctx.unsupported("the labels have element type " +
                           dtypeName(ctx.inputDType(labelsInput)) +
                           "; they must be integers");
  if (llvm::ArrayRef<int64_t>(ctx.inputShape(labelsInput)) !=
      llvm::ArrayRef<int64_t>(labelShape)) {
    auto diag = ctx.emitError("the labels have shape [");
    llvm::interleaveComma(ctx.inputShape(labelsInput), diag);
    diag << "] but the scores [";
    llvm::interleaveComma(shape, diag);
    diag << "] need [";
    llvm::interleaveComma(labelShape, diag);
    return diag << "]";
  }
  std::string reduction = ctx.getStringAttr("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none")
    return ctx.unsupported("reduction '" + reduction +
                           "'; supported: mean, sum, none");
  std::optional<int64_t> ignoreIndex = ctx.getOptionalIntAttr("ignore_index");
  Value weights;
  if (ctx.hasInput(weightsInput)) {
    if (llvm::ArrayRef<int64_t>(ctx.inputShape(weightsInput)) !=
        llvm::ArrayRef<int64_t>{shape[1]})
      return ctx.unsupported("the class weights must have shape [C] = [" +
                             llvm::Twine(shape[1]) + "]");
    weights = ctx.input(weightsInput);
  }

  Type et = getElementTypeOf(logProb);
  Value labels = ctx.input(labelsInput);
  Type labelType = getElementTypeOf(labels);
  int64_t rank = shape.size();
  // Iteration domain (n, c, d1, ...); the labels are indexed without c.
  llvm::SmallVector<AffineExpr> labelExprs{getAffineDimExpr(0, mctx)};
  for (int64_t d = 2; d < rank; ++d)
    labelExprs.push_back(getAffineDimExpr(d, mctx));
  AffineMap full = AffineMap::getMultiDimIdentityMap(rank, mctx);
  AffineMap perTarget = AffineMap::get(rank, 0, labelExprs, mctx);
  llvm::SmallVector<utils::IteratorType> iterators(
      rank, utils::IteratorType::parallel);
  iterators[1] = utils::IteratorType::reduction;

  // picked[n, d...] = sum_c (c == label[n, d...]) ? logProb[n, c, d...] : 0.
  Value zero = createScalarConstant(b, loc, et, 0.0);
  Value picked =
      linalg::GenericOp::create(
          b, loc, TypeRange{RankedTensorType::get(labelShape, et)},
          ValueRange{logProb, labels},
          ValueRange{createFilledTensor(b, loc, labelShape, et, zero)},
          llvm::ArrayRef<AffineMap>{full, perTarget, perTarget}, iterators,
          [&](OpBuilder &nb, Location l, ValueRange a) {
            Value c = arith::IndexCastOp::create(
                nb, l, labelType, linalg::IndexOp::create(nb, l, 1));
            Value hit =
                arith::CmpIOp::create(nb, l, arith::CmpIPredicate::eq, c, a[1]);
            Value zeroF = createScalarConstant(nb, l, et, 0.0);
            Value v = arith::SelectOp::create(nb, l, hit, a[0], zeroF);
            linalg::YieldOp::create(
                nb, l, ValueRange{arith::AddFOp::create(nb, l, a[2], v)});
          })
          .getResult(0);

  // The weight of each target: 0 if ignored, w[label] or 1 otherwise.
  Value weight = createElementwise(
      b, loc, {labels}, labelShape, et,
      [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
        Value one = createScalarConstant(nb, l, et, 1.0);
        Value zeroF = createScalarConstant(nb, l, et, 0.0);
        Value w = one;
        Value valid;
        if (ignoreIndex) {
          Value ignored = createScalarConstant(nb, l, labelType, *ignoreIndex);
          valid = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::ne, a[0],
                                        ignored);
        }
        if (weights) {
          // An ignored label may be out of range: read class 0 instead.
          Value label = a[0];
          if (valid)
            label = arith::SelectOp::create(
                nb, l, valid, label, createScalarConstant(nb, l, labelType, 0));
          Value index =
              arith::IndexCastOp::create(nb, l, nb.getIndexType(), label);
          w = tensor::ExtractOp::create(nb, l, weights, ValueRange{index});
        }
        return valid ? Value(arith::SelectOp::create(nb, l, valid, w, zeroF))
                     : w;
      });
  // loss[n, d...] = -weight * picked.
  Value perElement =
      createElementwise(b, loc, {weight, picked}, labelShape, et,
                        [](OpBuilder &nb, Location l, ValueRange a) -> Value {
                          return arith::NegFOp::create(
                              nb, l, arith::MulFOp::create(nb, l, a[0], a[1]));
                        });
  OnnxDType dtype = ctx.inputDType(0);
  if (reduction == "none") {
    ctx.setOutput(0, perElement, dtype);
    return success();
  }
  llvm::SmallVector<int64_t> all;
  for (int64_t d = 0; d < int64_t(labelShape.size()); ++d)
    all.push_back(d);
  Value sum = createReduction(b, loc, perElement, all, ReductionKind::Sum);
  if (reduction == "mean") {
    Value total = createReduction(b, loc, weight, all, ReductionKind::Sum);
    sum = createElementwise(b, loc, {sum, total}, {}, et,
                            [](OpBuilder &nb, Location l, ValueRange a) {
                              return Value(
                                  arith::DivFOp::create(nb, l, a[0], a[1]));
                            });
  }
  ctx.setOutput(0, sum, dtype);
  return success();
}

LogicalResult requireFloatScores(NodeContext &ctx) {
  if (isFloatDType(ctx.inputDType(0)))
    return success();
  return ctx.unsupported("the scores have element type " +
                         dtypeName(ctx.inputDType(0)) +
                         "; only floating-point types are supported");
}

LogicalResult convertSoftmaxCrossEntropyLoss(NodeContext &ctx) {
  if (failed(requireFloatScores(ctx)))
    return failure();
  Value logProb = buildSoftmax(ctx.getBuilder(), ctx.getLoc(), ctx.input(0),
                               {1}, /*isLog=*/true);
  if (failed(buildNegativeLogLikelihood(ctx, logProb, 1, 2)))
    return failure();
  if (ctx.hasOutput(1))
    ctx.setOutput(1, logProb, ctx.inputDType(0));
  return success();
}

LogicalResult convertNegativeLogLikelihoodLoss(NodeContext &ctx) {
  if (failed(requireFloatScores(ctx)))
    return failure();
  return buildNegativeLogLikelihood(ctx, ctx.input(0), 1, 2);
}

} // namespace

void registerLossConverters(ConverterRegistry &registry) {
  registry["SoftmaxCrossEntropyLoss"] = convertSoftmaxCrossEntropyLoss;
  registry["NegativeLogLikelihoodLoss"] = convertNegativeLogLikelihoodLoss;
}

} // namespace autopar::import
