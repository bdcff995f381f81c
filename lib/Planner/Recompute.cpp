//===- Recompute.cpp - Which forward ops a backward recomputes ------------===//
//
// See Recompute.h.
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/Recompute.h"

#include "autopar/Dialect/Attributes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

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
