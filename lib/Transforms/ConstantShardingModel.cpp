//===- ConstantShardingModel.cpp - ShardingInterface for arith.constant ---===//
//
// Upstream's model (release 22) partitions only splat constants and fails,
// without a message, for any other dense constant, even a replicated one.
// Models exported with their weights in Constant nodes (PaddleOCR) have
// hundreds of those, and tensor parallelism splits them like any weight.
// autopar's model keeps upstream's handling of splats, clones a replicated
// constant, and gives each rank its block of a split one: the whole
// constant, then `shard.all_slice` along each split dim (a local slice at
// the rank's offset; no communication).
//
//===----------------------------------------------------------------------===//

#include "ShardingModelsImpl.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::shard;

namespace {

struct ConstantShardingModel
    : public ShardingInterface::ExternalModel<ConstantShardingModel,
                                              arith::ConstantOp> {
  static int64_t rank(Operation *op) {
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    return type ? type.getRank() : 0;
  }

  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return SmallVector<utils::IteratorType>(rank(op),
                                            utils::IteratorType::parallel);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    if (!isa<RankedTensorType>(op->getResult(0).getType()))
      return {};
    return {AffineMap::getMultiDimIdentityMap(rank(op), op->getContext())};
  }

  /// A constant takes whatever sharding its users want.
  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    if (resultShardings.empty() || !resultShardings[0])
      return failure();
    const Sharding &sharding = resultShardings[0];
    ShardingArray axes;
    if (rank(op) > 0)
      for (GridAxesAttr split : sharding.getSplitAxes())
        axes.emplace_back(split.asArrayRef().begin(), split.asArrayRef().end());
    return ShardingOption(axes, sharding.getGridAttr());
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable,
                          OpBuilder &builder) const {
    auto constant = cast<arith::ConstantOp>(op);
    Sharding sharding =
        resultShardings.empty() ? Sharding() : resultShardings[0];
    auto type = dyn_cast<RankedTensorType>(constant.getType());
    bool splits =
        sharding && llvm::any_of(sharding.getSplitAxes(),
                                 [](GridAxesAttr a) { return !a.empty(); });
    if (!type || !splits) {
      (void)builder.clone(*op, partitionMap);
      return success();
    }
    GridOp grid = getGrid(op, sharding.getGridAttr(), symbolTable);
    if (auto splat = dyn_cast<SplatElementsAttr>(constant.getValue())) {
      auto local = cast<RankedTensorType>(shardType(type, grid, sharding));
      auto slice = arith::ConstantOp::create(builder, op->getLoc(), local,
                                             splat.resizeSplat(local));
      partitionMap.map(op->getResult(0), slice.getResult());
      partitionMap.map(op, slice.getOperation());
      return success();
    }
    Value value = builder.clone(*op)->getResult(0);
    for (auto [dim, axes] : llvm::enumerate(sharding.getSplitAxes()))
      if (!axes.empty())
        value = AllSliceOp::create(builder, op->getLoc(), value, grid,
                                   axes.asArrayRef(), dim)
                    .getResult();
    partitionMap.map(op->getResult(0), value);
    partitionMap.map(op, value.getDefiningOp());
    return success();
  }
};

} // namespace

void autopar::detail::attachConstantShardingModel(MLIRContext *ctx) {
  autopar::detail::requireFirstModel(arith::ConstantOp::getOperationName(),
                                     ctx);
  arith::ConstantOp::attachInterface<ConstantShardingModel>(*ctx);
}
