//===- LoopShardings.cpp - Sharding models over named loops ---------------===//
//
// See LoopShardings.h.
//
//===----------------------------------------------------------------------===//

#include "LoopShardings.h"

#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"

using namespace mlir;
using namespace mlir::shard;

int64_t autopar::detail::blocksOf(GridOp grid, ArrayRef<GridAxis> axes) {
  return collectiveProcessGroupSize(axes, grid);
}

bool autopar::detail::dividesEvenly(Operation *op, ArrayRef<AffineMap> maps,
                                    unsigned loop, int64_t parts,
                                    LoopOf loopOf) {
  if (ShapedType::isDynamic(parts))
    return false;
  SmallVector<Type> types(op->getOperandTypes());
  llvm::append_range(types, op->getResultTypes());
  for (auto [type, map] : llvm::zip_equal(types, maps)) {
    auto shaped = dyn_cast<ShapedType>(type);
    if (!shaped || !shaped.hasRank())
      continue;
    for (auto [dim, expr] : llvm::enumerate(map.getResults())) {
      if (loopOf(expr) != loop)
        continue;
      if (shaped.isDynamicDim(dim) || shaped.getDimSize(dim) % parts != 0)
        return false;
    }
  }
  return true;
}

FailureOr<ShardingOption> autopar::detail::shardingOptionOverLoops(
    Operation *op, ArrayRef<AffineMap> maps, ArrayRef<Sharding> shardings,
    unsigned numLoops, LoopOf loopOf, function_ref<bool(unsigned)> splittable) {
  ShardingOption option;
  option.shardingArray.resize(numLoops);
  bool any = false;
  for (auto [sharding, map] : llvm::zip_equal(shardings, maps)) {
    if (!sharding)
      continue;
    if (option.grid && option.grid != sharding.getGridAttr())
      return failure();
    option.grid = sharding.getGridAttr();
    any = true;
    for (auto [dim, axes] : llvm::enumerate(sharding.getSplitAxes())) {
      if (axes.empty() || dim >= map.getNumResults())
        continue;
      std::optional<unsigned> loop = loopOf(map.getResult(dim));
      if (!loop || !splittable(*loop))
        continue;
      SmallVector<GridAxis> &chosen = option.shardingArray[*loop];
      if (!chosen.empty() && ArrayRef<GridAxis>(chosen) != axes.asArrayRef())
        return failure();
      for (auto [other, otherAxes] : llvm::enumerate(option.shardingArray))
        if (other != *loop && llvm::any_of(axes.asArrayRef(), [&](GridAxis a) {
              return llvm::is_contained(otherAxes, a);
            }))
          return failure();
      chosen.assign(axes.asArrayRef().begin(), axes.asArrayRef().end());
    }
  }
  if (!any)
    return ShardingOption::makeEmpty();
  SymbolTableCollection symbols;
  GridOp grid = getGridOrNull(op, option.grid, symbols);
  for (auto [loop, axes] : llvm::enumerate(option.shardingArray))
    if (!axes.empty() &&
        (!grid || !dividesEvenly(op, maps, loop, blocksOf(grid, axes), loopOf)))
      axes.clear();
  removeTrailingEmptySubArray(option.shardingArray);
  return option;
}

FailureOr<std::vector<Sharding>>
autopar::detail::annotationsOverLoops(Operation *op, ArrayRef<AffineMap> maps,
                                      const ShardingOption &option,
                                      LoopOf loopOf) {
  SmallVector<Type> types(op->getOperandTypes());
  llvm::append_range(types, op->getResultTypes());
  std::vector<Sharding> shardings;
  for (auto [type, map] : llvm::zip_equal(types, maps)) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor)
      return failure();
    SmallVector<SmallVector<GridAxis>> splitAxes(tensor.getRank());
    for (auto [dim, expr] : llvm::enumerate(map.getResults())) {
      std::optional<unsigned> loop = loopOf(expr);
      if (loop && *loop < option.shardingArray.size())
        splitAxes[dim] = option.shardingArray[*loop];
    }
    removeTrailingEmptySubArray(splitAxes);
    SmallVector<GridAxesAttr> attrs;
    for (ArrayRef<GridAxis> axes : splitAxes)
      attrs.push_back(GridAxesAttr::get(op->getContext(), axes));
    shardings.push_back(Sharding::get(option.grid, attrs));
  }
  return shardings;
}

void autopar::detail::addAnnotations(Operation *op, OpBuilder &b,
                                     ArrayRef<Sharding> shardings) {
  unsigned numOperands = op->getNumOperands();
  for (OpResult result : op->getResults())
    maybeInsertTargetShardingAnnotation(
        shardings[numOperands + result.getResultNumber()], result, b);
  for (OpOperand &operand : op->getOpOperands()) {
    OpBuilder::InsertionGuard guard(b);
    maybeInsertSourceShardingAnnotation(shardings[operand.getOperandNumber()],
                                        operand, b);
  }
}

void autopar::detail::cloneOnBlocks(Operation *op,
                                    ArrayRef<Value> partitionedOperands,
                                    IRMapping &partitionMap,
                                    OpBuilder &builder) {
  Operation *local = builder.clone(*op, partitionMap);
  auto dps = cast<DestinationStyleOpInterface>(op);
  for (OpResult result : local->getResults())
    result.setType(
        partitionedOperands[dps.getDpsInitOperand(result.getResultNumber())
                                ->getOperandNumber()]
            .getType());
}
