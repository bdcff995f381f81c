//===- Gradients.cpp - The reverse sweep over a function
//-------------------===//
//
// Finds the values that carry a gradient, visits the forward ops last to
// first, and lets each op's rule add its contributions. Every op without a
// rule is collected, so the user gets one error listing them all rather
// than one per compile.
//
//===----------------------------------------------------------------------===//

#include "AdjointBuilder.h"
#include "autopar/Dialect/Attributes.h"
#include "autopar/Dialect/AutoparOps.h"
#include "autopar/Planner/ActiveValues.h"
#include "autopar/Transforms/Autodiff.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace autopar {

namespace autodiff {

void AdjointBuilder::accumulate(Value v, Value contribution) {
  if (!isActive(v))
    return;
  Value &slot = adjoints[v];
  if (!slot) {
    slot = contribution;
    return;
  }
  // Elementwise sum of two adjoints of the same type.
  auto type = cast<RankedTensorType>(v.getType());
  Location loc = contribution.getLoc();
  SmallVector<AffineMap> maps(3,
                              builder.getMultiDimIdentityMap(type.getRank()));
  SmallVector<utils::IteratorType> iterators(type.getRank(),
                                             utils::IteratorType::parallel);
  slot = linalg::GenericOp::create(
             builder, loc, TypeRange{type}, ValueRange{slot, contribution},
             ValueRange{tensor::EmptyOp::create(builder, loc, type.getShape(),
                                                type.getElementType())},
             maps, iterators,
             [](OpBuilder &nb, Location nl, ValueRange args) {
               linalg::YieldOp::create(
                   nb, nl,
                   ValueRange{arith::AddFOp::create(nb, nl, args[0], args[1])});
             })
             .getResult(0);
}

Value AdjointBuilder::zeros(Location loc, RankedTensorType type) {
  Value empty = tensor::EmptyOp::create(builder, loc, type.getShape(),
                                        type.getElementType());
  Value zero = arith::ConstantOp::create(
      builder, loc, builder.getFloatAttr(type.getElementType(), 0.0));
  return linalg::FillOp::create(builder, loc, zero, empty).getResult(0);
}

LogicalResult applyAdjointRule(Operation *op, AdjointBuilder &adjoints) {
  if (isa<linalg::LinalgOp>(op)) {
    // A linalg body that reads a differentiated tensor directly (a gather
    // written with tensor.extract) needs a scatter rule of its own: the
    // embedding lookup has one; any other such body is not covered.
    llvm::SetVector<Value> above;
    getUsedValuesDefinedAbove(op->getRegions(), above);
    if (llvm::any_of(above, [&](Value v) { return adjoints.isActive(v); }))
      return applyEmbeddingAdjoint(op, adjoints);
    return applyLinalgAdjoint(op, adjoints);
  }
  if (isa<tensor::TensorDialect>(op->getDialect()))
    return applyTensorAdjoint(op, adjoints);
  if (isa<AttentionOp>(op))
    return applyAttentionAdjoint(op, adjoints);
  if (isa<SoftmaxCrossEntropyOp>(op))
    return applyCrossEntropyAdjoint(op, adjoints);
  if (auto embedding = dyn_cast<EmbeddingOp>(op))
    return embedding.getRowOffset() ? failure()
                                    : applyEmbeddingAdjoint(op, adjoints);
  if (isa<shard::ShardDialect>(op->getDialect()))
    return applyShardAdjoint(op, adjoints);
  return failure();
}

} // namespace autodiff

FailureOr<SmallVector<Value>> buildGradients(func::FuncOp func, Value loss,
                                             ArrayRef<Value> wrt) {
  Block &body = func.getBody().front();
  DenseSet<Value> active = findActiveValues(func, wrt, loss);
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);

  OpBuilder builder(body.getTerminator());
  autodiff::AdjointBuilder adjoints(builder, active);
  Location loc = loss.getLoc();
  auto lossType = cast<RankedTensorType>(loss.getType());
  {
    Value empty = tensor::EmptyOp::create(builder, loc, lossType.getShape(),
                                          lossType.getElementType());
    Value one = arith::ConstantOp::create(
        builder, loc, builder.getFloatAttr(lossType.getElementType(), 1.0));
    adjoints.accumulate(
        loss, linalg::FillOp::create(builder, loc, one, empty).getResult(0));
  }

  // Op type -> the ONNX nodes (in order) whose ops have no rule.
  llvm::MapVector<StringRef, SmallVector<std::string>> missing;
  int64_t missingCount = 0;
  for (Operation *op : llvm::reverse(forward)) {
    if (llvm::none_of(op->getResults(),
                      [&](Value v) { return adjoints.getAdjoint(v); }))
      continue;
    if (llvm::none_of(readValues(op),
                      [&](Value v) { return adjoints.isActive(v); }))
      continue;
    if (succeeded(autodiff::applyAdjointRule(op, adjoints)))
      continue;
    ++missingCount;
    // Keep sweeping past it, so that every op without a rule is found: its
    // operands get a stand-in (zero) adjoint. The function is not kept.
    for (Value v : readValues(op))
      if (adjoints.isActive(v) && !adjoints.getAdjoint(v))
        adjoints.accumulate(
            v,
            adjoints.zeros(op->getLoc(), cast<RankedTensorType>(v.getType())));
    std::string node = onnxNodeName(op);
    auto &nodes = missing[op->getName().getStringRef()];
    if (!node.empty() && !llvm::is_contained(nodes, node))
      nodes.push_back(node);
  }
  if (missingCount) {
    InFlightDiagnostic diag =
        func.emitError() << "cannot differentiate the loss: " << missingCount
                         << " op(s) on the path from the parameters to "
                            "the loss have no gradient rule:";
    for (auto &[name, nodes] : missing) {
      diag << "\n  " << name;
      if (!nodes.empty()) {
        diag << " from ONNX node(s) ";
        llvm::interleaveComma(nodes, diag, [&](const std::string &n) {
          diag << "'" << n << "'";
        });
      }
    }
    diag << "\nfreeze the parameters before these ops (--freeze GLOB), or "
            "report the op so a rule can be added (docs/training.md lists "
            "the differentiable op families)";
    return failure();
  }

  SmallVector<Value> gradients;
  for (Value w : wrt) {
    Value g = adjoints.getAdjoint(w);
    if (!g)
      g = adjoints.zeros(w.getLoc(), cast<RankedTensorType>(w.getType()));
    gradients.push_back(g);
  }
  return gradients;
}

} // namespace autopar
