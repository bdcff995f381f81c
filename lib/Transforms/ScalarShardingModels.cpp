//===- ScalarShardingModels.cpp - ShardingInterface for element reads -----===//
//
// A training step computes its learning rate and its gradient-clipping
// factor in scalar arithmetic: it reads the step number and the global
// norm's sum with `tensor.extract` and makes rank-0 tensors of the results
// with `tensor.from_elements`, all in the step's body. Upstream's
// sharding-propagation (release 22) stops with an error at any op without a
// ShardingInterface, so these (and every op of arith and math that has no
// model of its own, and the shard dialect's grid queries: a data-parallel
// replica's coordinate, Dropout's sample offset) get one: they take every
// tensor whole (no loops to split), propagate nothing, and partition by
// cloning. Reading one element of a split tensor would read the rank's own
// block, so partitioning fails, naming the op, if an operand or result of rank
// > 0 is annotated as split.
//
//===----------------------------------------------------------------------===//

#include "ShardingModelsImpl.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::shard;

namespace {

/// Whether `sharding` splits some dim.
bool splitsAnything(const Sharding &sharding) {
  return sharding && llvm::any_of(sharding.getSplitAxes(),
                                  [](GridAxesAttr a) { return !a.empty(); });
}

/// Op-agnostic (a fallback model), so that it can be attached to every op
/// of the scalar dialects.
struct WholeTensorsShardingModel
    : public ShardingInterface::FallbackModel<WholeTensorsShardingModel> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *) const {
    return {};
  }

  SmallVector<ReductionKind> getReductionLoopIteratorKinds(Operation *) const {
    return {};
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *) const { return {}; }

  /// Nothing to split: the op propagates no sharding.
  FailureOr<ShardingOption> getShardingOption(Operation *, ArrayRef<Sharding>,
                                              ArrayRef<Sharding>) const {
    return ShardingOption::makeEmpty();
  }

  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *, const ShardingOption &) const {
    return std::vector<Sharding>{};
  }

  LogicalResult addShardingAnnotations(Operation *, OpBuilder &,
                                       const ShardingOption &) const {
    return success();
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap, SymbolTableCollection &,
                          OpBuilder &builder) const {
    for (const Sharding &s :
         llvm::concat<const Sharding>(operandShardings, resultShardings))
      if (splitsAnything(s))
        return op->emitOpError("cannot be partitioned: it reads or writes "
                               "single elements, so its tensors must be "
                               "whole on every rank");
    for (auto [operand, partitioned] :
         llvm::zip(op->getOperands(), partitionedOperands))
      partitionMap.map(operand, partitioned);
    (void)builder.clone(*op, partitionMap);
    return success();
  }
};

} // namespace

void autopar::detail::attachScalarShardingModels(MLIRContext *ctx,
                                                 StringRef dialect) {
  // Of the tensor dialect only the element reads and writes: upstream's own
  // models (tensor.empty) are attached later and must not be shadowed.
  if (dialect == "tensor") {
    tensor::ExtractOp::attachInterface<WholeTensorsShardingModel>(*ctx);
    tensor::FromElementsOp::attachInterface<WholeTensorsShardingModel>(*ctx);
    return;
  }
  // (getRegisteredOperationsByDialect misses math's ops in release 22.)
  // Of the shard dialect, what a data-parallel step computes besides its
  // collectives (the replica's coordinate, for Dropout's sample offset); the
  // annotations themselves are propagation's own.
  for (RegisteredOperationName name : ctx->getRegisteredOperations())
    if (name.getDialectNamespace() == dialect &&
        !name.hasInterface<ShardingInterface>() &&
        !llvm::is_contained({shard::ShardOp::getOperationName(),
                             shard::ShardingOp::getOperationName(),
                             shard::GetShardingOp::getOperationName(),
                             shard::GridOp::getOperationName()},
                            name.getStringRef()))
      name.attachInterface<WholeTensorsShardingModel>();
}
