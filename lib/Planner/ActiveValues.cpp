//===- ActiveValues.cpp - Which values carry a gradient -------------------===//
//
// See ActiveValues.h.
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/ActiveValues.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace autopar {
namespace {

bool isFloatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType());
}

} // namespace

SmallVector<Value> readValues(Operation *op) {
  SmallVector<Value> values(op->getOperands());
  if (op->getNumRegions()) {
    llvm::SetVector<Value> above;
    getUsedValuesDefinedAbove(op->getRegions(), above);
    values.append(above.begin(), above.end());
  }
  return values;
}

SmallVector<Value> differentiableResults(linalg::LinalgOp op,
                                         const DenseSet<Value> &depends) {
  Block *body = op.getBlock();
  DenseSet<Value> scalar;
  for (OpOperand &operand : op->getOpOperands())
    if (depends.contains(operand.get()))
      scalar.insert(op.getMatchingBlockArgument(&operand));
  SmallVector<Value> results;
  for (Operation &inner : *body) {
    if (auto yield = dyn_cast<linalg::YieldOp>(inner)) {
      for (auto [k, v] : llvm::enumerate(yield.getOperands()))
        if (scalar.contains(v))
          results.push_back(op->getResult(k));
      break;
    }
    bool reads = llvm::any_of(inner.getOperands(), [&](Value v) {
      return scalar.contains(v) || depends.contains(v);
    });
    if (!reads)
      continue;
    for (Value result : inner.getResults())
      if (isa<FloatType>(result.getType()))
        scalar.insert(result);
  }
  return results;
}

DenseSet<Value> findActiveValues(func::FuncOp func, ArrayRef<Value> from,
                                 Value to) {
  Block &body = func.getBody().front();
  DenseSet<Value> depends(from.begin(), from.end());
  for (Operation &op : body.without_terminator()) {
    if (llvm::none_of(readValues(&op),
                      [&](Value v) { return depends.contains(v); }))
      continue;
    auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
    if (linalgOp && linalgOp.getBlock()) {
      for (Value result : differentiableResults(linalgOp, depends))
        if (isFloatTensor(result.getType()))
          depends.insert(result);
      continue;
    }
    for (Value result : op.getResults())
      if (isFloatTensor(result.getType()))
        depends.insert(result);
  }

  // The loss needs what reaches it through float values: the same rule
  // backwards, so that a float mask read only by a comparison is not needed.
  DenseSet<Value> needed{to};
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    if (llvm::none_of(op.getResults(),
                      [&](Value v) { return needed.contains(v); }))
      continue;
    auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
    if (!linalgOp || !linalgOp.getBlock()) {
      for (Value v : readValues(&op))
        needed.insert(v);
      continue;
    }
    for (Value v : readValues(&op)) {
      if (needed.contains(v))
        continue;
      DenseSet<Value> one{v};
      if (llvm::any_of(differentiableResults(linalgOp, one),
                       [&](Value r) { return needed.contains(r); }))
        needed.insert(v);
    }
  }

  DenseSet<Value> active;
  for (Value v : depends)
    if (needed.contains(v))
      active.insert(v);
  return active;
}

} // namespace autopar
