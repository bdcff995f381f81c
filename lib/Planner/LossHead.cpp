//===- LossHead.cpp - What a loss is computed from after the last GEMM ----===//
//
// See LossHead.h.
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/LossHead.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

bool autopar::isReshapeOrSlice(Operation *op) {
  return isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp,
             tensor::ExtractSliceOp>(op);
}

llvm::DenseSet<Operation *> autopar::lossHead(func::FuncOp func) {
  llvm::DenseSet<Operation *> head;
  SmallVector<Value> work;
  func.walk([&](func::ReturnOp ret) {
    for (Value v : ret.getOperands()) {
      auto type = dyn_cast<RankedTensorType>(v.getType());
      if (type && type.getRank() == 0 && type.getElementType().isF32())
        work.push_back(v);
    }
  });
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || head.contains(def) ||
        !(isa<linalg::GenericOp, tensor::ExtractOp, tensor::FromElementsOp>(
              def) ||
          isReshapeOrSlice(def)))
      continue;
    head.insert(def);
    for (Value operand : def->getOperands())
      work.push_back(operand);
  }
  return head;
}
