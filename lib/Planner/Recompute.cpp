//===- Recompute.cpp - Which forward ops a backward recomputes ------------===//
//
// See Recompute.h.
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/Recompute.h"

#include "autopar/Dialect/Attributes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

namespace {

bool isFloatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType());
}

} // namespace

bool autopar::isRecomputedAnyway(Operation *op) {
  if (!isMemoryEffectFree(op) || op->getNumRegions() > 0 ||
      op->getNumResults() == 0)
    return isa<linalg::FillOp>(op) &&
           llvm::all_of(op->getOperands(), [](Value v) {
             Operation *def = v.getDefiningOp();
             return def && isRecomputedAnyway(def);
           });
  return op->getNumOperands() == 0;
}

bool autopar::isSelectivelyRecomputed(Operation *op) {
  if (!isMemoryEffectFree(op))
    return false;
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
    return !linalg::isaContractionOpInterface(linalgOp) &&
           !linalg::isaConvolutionOpInterface(linalgOp);
  // autopar.attention and other ops of autopar's dialect are compute-bound;
  // a partitioned stage's collectives (shard) are not recomputed but kept,
  // as Megatron's selective recomputation keeps what tp all-reduced.
  llvm::StringRef dialect = op->getDialect()->getNamespace();
  return op->getNumRegions() == 0 && dialect != "autopar" && dialect != "shard";
}

llvm::DenseSet<Operation *> autopar::opsReadingTheSeed(func::FuncOp f) {
  llvm::DenseSet<Operation *> random;
  SmallVector<Value> work;
  for (BlockArgument arg : f.getArguments())
    if (f.getArgAttr(arg.getArgNumber(), attrs::kSeed))
      work.push_back(arg);
  while (!work.empty()) {
    Value v = work.pop_back_val();
    for (Operation *user : v.getUsers()) {
      Operation *top = f.getBody().front().findAncestorOpInBlock(*user);
      if (!top || !random.insert(top).second)
        continue;
      // Only through the mask's own scalar and integer arithmetic: the
      // masked float values are ordinary.
      for (Value r : top->getResults())
        if (!isFloatTensor(r.getType()))
          work.push_back(r);
    }
  }
  return random;
}

llvm::DenseSet<Operation *> autopar::opsOfParametersAlone(func::FuncOp f) {
  Block &body = f.getBody().front();
  llvm::DenseSet<Operation *> ops;
  for (Operation &op : body.without_terminator()) {
    if (!isMemoryEffectFree(&op) || op.getNumResults() == 0 ||
        op.getDialect()->getNamespace() == "shard")
      continue;
    llvm::SetVector<Value> reads(op.operand_begin(), op.operand_end());
    getUsedValuesDefinedAbove(op.getRegions(), reads);
    if (llvm::all_of(reads, [&](Value v) {
          if (auto arg = dyn_cast<BlockArgument>(v))
            return arg.getOwner() == &body &&
                   (f.getArgAttr(arg.getArgNumber(), attrs::kParameter) ||
                    f.getArgAttr(arg.getArgNumber(), attrs::kSeed) ||
                    f.getArgAttr(arg.getArgNumber(), attrs::kStep));
          Operation *def = v.getDefiningOp();
          return def && ops.contains(def);
        }))
      ops.insert(&op);
  }
  return ops;
}
