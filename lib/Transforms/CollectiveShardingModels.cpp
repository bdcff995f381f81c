//===- CollectiveShardingModels.cpp - ShardingInterface for shard.all_reduce =//
//
// A data-parallel replica's program already holds collectives over the
// replicas (axis 0 of @autopar_grid): BatchNorm's shared statistics in the
// forward, the gradient bucket's sum before the update. Under dp x tp the
// replica's step is then partitioned over tp (axis 1), and upstream's
// sharding-propagation stops at an op without a ShardingInterface. A sum over
// the replicas is elementwise across the tp axis: each tp rank sums its own
// block with the replicas that hold the same block, so its model is the
// identity on every dim, and partitioning clones it on the local block.
//
//===----------------------------------------------------------------------===//

#include "ShardingModelsImpl.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::shard;

namespace {

struct AllReduceShardingModel
    : public ShardingInterface::ExternalModel<AllReduceShardingModel,
                                              AllReduceOp> {
  static int64_t rank(Operation *op) {
    return cast<RankedTensorType>(op->getResult(0).getType()).getRank();
  }

  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return SmallVector<utils::IteratorType>(rank(op),
                                            utils::IteratorType::parallel);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    AffineMap identity =
        AffineMap::getMultiDimIdentityMap(rank(op), op->getContext());
    return {identity, identity};
  }

  /// A rank-0 sum (the loss, a mean's denominator) has nothing to split.
  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    if (rank(op) == 0)
      return ShardingOption::makeEmpty();
    return shard::detail::defaultGetShardingOption(op, operandShardings,
                                                   resultShardings);
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable,
                          OpBuilder &builder) const {
    auto reduce = cast<AllReduceOp>(op);
    // A split along the reduced grid axes would sum different blocks.
    for (const Sharding &s :
         llvm::concat<const Sharding>(operandShardings, resultShardings)) {
      if (!s)
        continue;
      for (GridAxesAttr axes : s.getSplitAxes())
        for (GridAxis axis : axes.asArrayRef())
          if (llvm::is_contained(reduce.getGridAxes(), axis))
            return op->emitOpError("cannot be partitioned: a tensor it sums "
                                   "over grid axis ")
                   << axis << " is also split over that axis";
    }
    Value input = partitionedOperands[0];
    auto local = AllReduceOp::create(
        builder, op->getLoc(), input.getType(), reduce.getGridAttr(),
        reduce.getGridAxesAttr(), input, reduce.getReductionAttr());
    partitionMap.map(op->getResult(0), local.getResult());
    partitionMap.map(op, local.getOperation());
    return success();
  }
};

} // namespace

void autopar::detail::attachCollectiveShardingModels(MLIRContext *ctx) {
  AllReduceOp::attachInterface<AllReduceShardingModel>(*ctx);
}
