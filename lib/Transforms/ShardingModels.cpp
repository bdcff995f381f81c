//===- ShardingModels.cpp - ShardingInterface for reshapes ----------------===//
//
// A reshape's "loops" are the dims of its higher-rank side; the lower-rank
// side reads, for each reassociation group, the group's outermost dim of size
// > 1 (unit dims before it hold a single index). Splitting that dim over grid
// axes splits the whole group the same way in both shapes, so propagation and
// partitioning follow upstream's default rules through these maps. Splitting
// an inner dim of a group would interleave the blocks: then the reshape runs
// replicated and its operand is gathered first.
//
//===----------------------------------------------------------------------===//

#include "autopar/Transforms/ShardingModels.h"
#include "ShardingModelsImpl.h"

#include "autopar/Dialect/AutoparOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::shard;

namespace {

template <typename ReshapeOp>
struct ReshapeShardingModel
    : public ShardingInterface::ExternalModel<ReshapeShardingModel<ReshapeOp>,
                                              ReshapeOp> {
  static constexpr bool kExpands =
      std::is_same_v<ReshapeOp, tensor::ExpandShapeOp>;

  static RankedTensorType highRankType(Operation *op) {
    return cast<RankedTensorType>(kExpands ? op->getResult(0).getType()
                                           : op->getOperand(0).getType());
  }

  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return SmallVector<utils::IteratorType>(highRankType(op).getRank(),
                                            utils::IteratorType::parallel);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    MLIRContext *ctx = op->getContext();
    int64_t loops = highRankType(op).getRank();
    SmallVector<AffineExpr> firsts;
    for (const ReassociationIndices &group :
         cast<ReshapeOp>(op).getReassociationIndices())
      firsts.push_back(getAffineDimExpr(autopar::detail::splittableDimOfGroup(
                                            group, highRankType(op).getShape()),
                                        ctx));
    AffineMap high = AffineMap::getMultiDimIdentityMap(loops, ctx);
    AffineMap low = AffineMap::get(loops, 0, firsts, ctx);
    // Operand maps, then result maps.
    return kExpands ? SmallVector<AffineMap>{low, high}
                    : SmallVector<AffineMap>{high, low};
  }

  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    FailureOr<ShardingOption> option = shard::detail::defaultGetShardingOption(
        op, operandShardings, resultShardings);
    if (failed(option))
      return failure();
    // Only the outermost non-unit dim of a group may be split, evenly;
    // otherwise the reshape runs replicated and its operand is gathered
    // first (returning failure instead would leave the op unannotated for
    // shard-partition).
    RankedTensorType high = highRankType(op);
    SymbolTableCollection symbols;
    auto replicate = [&]() {
      for (auto &axes : option->shardingArray)
        axes.clear();
    };
    for (const ReassociationIndices &group :
         cast<ReshapeOp>(op).getReassociationIndices()) {
      int64_t outer =
          autopar::detail::splittableDimOfGroup(group, high.getShape());
      for (int64_t dim : group) {
        if (dim >= int64_t(option->shardingArray.size()) ||
            option->shardingArray[dim].empty())
          continue;
        GridOp grid =
            option->grid ? shard::getGrid(op, option->grid, symbols) : GridOp();
        int64_t parts = 1;
        if (grid)
          for (GridAxis axis : option->shardingArray[dim])
            parts *= grid.getShape()[axis];
        if (dim != outer || !grid || high.isDynamicDim(dim) ||
            high.getDimSize(dim) % parts != 0) {
          replicate();
          return option;
        }
      }
    }
    return option;
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable,
                          OpBuilder &builder) const {
    auto reshape = cast<ReshapeOp>(op);
    Value result;
    if constexpr (kExpands) {
      auto type = cast<RankedTensorType>(op->getResult(0).getType());
      if (resultShardings[0]) {
        GridOp grid =
            shard::getGrid(op, resultShardings[0].getGridAttr(), symbolTable);
        type = cast<RankedTensorType>(
            shard::shardType(type, grid, resultShardings[0]));
      }
      result = tensor::ExpandShapeOp::create(builder, op->getLoc(), type,
                                             partitionedOperands[0],
                                             reshape.getReassociationIndices());
    } else {
      result = tensor::CollapseShapeOp::create(
          builder, op->getLoc(), partitionedOperands[0],
          reshape.getReassociationIndices());
    }
    partitionMap.map(op->getResult(0), result);
    partitionMap.map(op, result.getDefiningOp());
    return success();
  }
};

} // namespace

void autopar::registerShardingModels(DialectRegistry &registry) {
  registry.insert<autopar::AutoparDialect>();
  registry.addExtension(+[](MLIRContext *ctx, tensor::TensorDialect *) {
    tensor::ExpandShapeOp::attachInterface<
        ReshapeShardingModel<tensor::ExpandShapeOp>>(*ctx);
    tensor::CollapseShapeOp::attachInterface<
        ReshapeShardingModel<tensor::CollapseShapeOp>>(*ctx);
    autopar::detail::attachSliceShardingModels(ctx);
    autopar::detail::attachScalarShardingModels(ctx, "tensor");
  });
  registry.addExtension(+[](MLIRContext *ctx, linalg::LinalgDialect *) {
    autopar::detail::attachLinalgShardingModels(ctx);
  });
  registry.addExtension(+[](MLIRContext *ctx, arith::ArithDialect *) {
    autopar::detail::attachConstantShardingModel(ctx);
    autopar::detail::attachScalarShardingModels(ctx, "arith");
  });
  // An extension's identity is its signature: a (math) one alone would be
  // dropped as a duplicate of upstream's.
  registry.addExtension(
      +[](MLIRContext *ctx, math::MathDialect *, shard::ShardDialect *) {
        autopar::detail::attachScalarShardingModels(ctx, "math");
      });
  registry.addExtension(+[](MLIRContext *ctx, autopar::AutoparDialect *) {
    autopar::detail::attachAttentionShardingModels(ctx);
    autopar::detail::attachCrossEntropyShardingModels(ctx);
  });
  // The runtime's phase marks in a training step (llvm.call of
  // autopar_rt_step_phase, autopar-differentiate{phase-marks}) are cloned.
  registry.addExtension(
      +[](MLIRContext *ctx, LLVM::LLVMDialect *, shard::ShardDialect *) {
        autopar::detail::attachScalarShardingModels(ctx, "llvm");
      });
  registry.addExtension(+[](MLIRContext *ctx, shard::ShardDialect *) {
    autopar::detail::attachCollectiveShardingModels(ctx);
    autopar::detail::attachScalarShardingModels(ctx, "shard");
  });
}

void autopar::detail::requireFirstModel(llvm::StringRef name,
                                        MLIRContext *ctx) {
  std::optional<RegisteredOperationName> op =
      RegisteredOperationName::lookup(name, ctx);
  if (op && op->hasInterface<ShardingInterface>())
    llvm::report_fatal_error(
        llvm::Twine("autopar::registerShardingModels must be called before "
                    "upstream's sharding models are registered "
                    "(registerAllDialects): ") +
        name + " already has one");
}
