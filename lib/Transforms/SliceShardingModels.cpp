//===- SliceShardingModels.cpp - ShardingInterface for slices, pads, concats =//
//
// `tensor.extract_slice` (ONNX Slice, Split, Gather with constant indices)
// has no upstream ShardingInterface. Its loops are the dims of its source; the
// result reads the dims it keeps. A split of a dim the slice takes whole
// passes through: each rank slices its own block with the same offsets on
// the other dims. A dim the slice cuts cannot stay split (a rank's block
// would not hold the part of the slice it must produce), so it is gathered
// first while the splits of the other dims stay.
//
//===----------------------------------------------------------------------===//

#include "ShardingModelsImpl.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::shard;

namespace {

/// The default sharding option of `op`, with the splits of every dim that
/// `splittable(d)` rejects dropped (those dims are gathered first).
template <typename Splittable>
FailureOr<ShardingOption>
optionSplittingOnly(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings, Splittable splittable) {
  FailureOr<ShardingOption> option = shard::detail::defaultGetShardingOption(
      op, operandShardings, resultShardings);
  if (failed(option))
    return failure();
  for (auto [d, axes] : llvm::enumerate(option->shardingArray))
    if (!splittable(int64_t(d)))
      axes.clear();
  return option;
}

/// A slice's (or insert's) offsets, sizes and strides on a rank's block:
/// the dims `whole(d)` says it covers entirely take the block's size in
/// `localShape`; dynamic values are the partitioned operands'.
struct LocalSlice {
  SmallVector<OpFoldResult> offsets, sizes, strides;
};

template <typename SliceOp, typename Whole>
LocalSlice localSlice(SliceOp op, ArrayRef<int64_t> localShape, Whole whole,
                      ArrayRef<Value> partitionedOperands, OpBuilder &builder) {
  LocalSlice local{op.getMixedOffsets(), op.getMixedSizes(),
                   op.getMixedStrides()};
  for (auto [d, size] : llvm::enumerate(localShape))
    if (whole(int64_t(d)))
      local.sizes[d] = builder.getIndexAttr(size);
  IRMapping mapping;
  for (auto [old, partitioned] :
       llvm::zip(op->getOperands(), partitionedOperands))
    mapping.map(old, partitioned);
  for (SmallVector<OpFoldResult> *list :
       {&local.offsets, &local.sizes, &local.strides})
    for (OpFoldResult &v : *list)
      if (auto value = dyn_cast<Value>(v))
        v = mapping.lookupOrDefault(value);
  return local;
}

/// Whether slice-like `op` (extract or insert) covers dim `d` of `full`, the
/// tensor it slices, entirely.
template <typename SliceOp>
bool coversWhole(SliceOp op, RankedTensorType full, int64_t d) {
  return !full.isDynamicDim(d) && !op.isDynamicOffset(d) &&
         !op.isDynamicSize(d) && !op.isDynamicStride(d) &&
         op.getStaticOffset(d) == 0 &&
         op.getStaticSize(d) == full.getDimSize(d) &&
         op.getStaticStride(d) == 1;
}

/// Whether `slice` takes dim `d` of its source whole.
bool takesWhole(tensor::ExtractSliceOp slice, int64_t d) {
  return coversWhole(slice, slice.getSourceType(), d);
}

/// The loops (the full tensor's dims) a rank-reducing slice keeps.
SmallVector<AffineExpr>
keptDims(int64_t loops, const llvm::SmallBitVector &dropped, MLIRContext *ctx) {
  SmallVector<AffineExpr> kept;
  for (int64_t d = 0; d < loops; ++d)
    if (!dropped.test(d))
      kept.push_back(getAffineDimExpr(d, ctx));
  return kept;
}

struct ExtractSliceShardingModel
    : public ShardingInterface::ExternalModel<ExtractSliceShardingModel,
                                              tensor::ExtractSliceOp> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    auto slice = cast<tensor::ExtractSliceOp>(op);
    return SmallVector<utils::IteratorType>(slice.getSourceType().getRank(),
                                            utils::IteratorType::parallel);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    auto slice = cast<tensor::ExtractSliceOp>(op);
    MLIRContext *ctx = op->getContext();
    int64_t loops = slice.getSourceType().getRank();
    SmallVector<AffineExpr> kept = keptDims(loops, slice.getDroppedDims(), ctx);
    // The source, then the dynamic offsets, sizes and strides (scalars),
    // then the result.
    SmallVector<AffineMap> maps = {
        AffineMap::getMultiDimIdentityMap(loops, ctx)};
    maps.append(op->getNumOperands() - 1, AffineMap::get(loops, 0, ctx));
    maps.push_back(AffineMap::get(loops, 0, kept, ctx));
    return maps;
  }

  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    auto slice = cast<tensor::ExtractSliceOp>(op);
    return optionSplittingOnly(op, operandShardings, resultShardings,
                               [&](int64_t d) { return takesWhole(slice, d); });
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable,
                          OpBuilder &builder) const {
    auto slice = cast<tensor::ExtractSliceOp>(op);
    auto source = cast<RankedTensorType>(partitionedOperands[0].getType());
    // Split dims are taken whole: their size is the local block's.
    LocalSlice local = localSlice(
        slice, source.getShape(),
        [&](int64_t d) { return takesWhole(slice, d); }, partitionedOperands,
        builder);
    auto resultType = slice.getResultType();
    if (resultShardings[0]) {
      GridOp grid =
          shard::getGrid(op, resultShardings[0].getGridAttr(), symbolTable);
      resultType = cast<RankedTensorType>(
          shard::shardType(resultType, grid, resultShardings[0]));
    }
    Value result = tensor::ExtractSliceOp::create(
        builder, op->getLoc(), resultType, partitionedOperands[0],
        local.offsets, local.sizes, local.strides);
    partitionMap.map(op->getResult(0), result);
    partitionMap.map(op, result.getDefiningOp());
    return success();
  }
};

/// Whether `insert` writes dim `d` of its destination whole.
bool writesWhole(tensor::InsertSliceOp insert, int64_t d) {
  return coversWhole(insert, insert.getDestType(), d);
}

/// tensor.insert_slice (the adjoint of a slice: the QKV split's gradient
/// put back into the fused projection's). Its loops are the dims of its
/// destination; a split of a dim it writes whole passes through (each rank
/// inserts its block of the source into its block of the destination); a
/// dim it writes part of is gathered first.
struct InsertSliceShardingModel
    : public ShardingInterface::ExternalModel<InsertSliceShardingModel,
                                              tensor::InsertSliceOp> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    auto insert = cast<tensor::InsertSliceOp>(op);
    return SmallVector<utils::IteratorType>(insert.getDestType().getRank(),
                                            utils::IteratorType::parallel);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    auto insert = cast<tensor::InsertSliceOp>(op);
    MLIRContext *ctx = op->getContext();
    int64_t loops = insert.getDestType().getRank();
    SmallVector<AffineExpr> kept =
        keptDims(loops, insert.getDroppedDims(), ctx);
    // The source, the destination, the dynamic offsets, sizes and strides
    // (scalars), then the result.
    AffineMap identity = AffineMap::getMultiDimIdentityMap(loops, ctx);
    SmallVector<AffineMap> maps = {AffineMap::get(loops, 0, kept, ctx),
                                   identity};
    maps.append(op->getNumOperands() - 2, AffineMap::get(loops, 0, ctx));
    maps.push_back(identity);
    return maps;
  }

  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    auto insert = cast<tensor::InsertSliceOp>(op);
    llvm::SmallBitVector dropped = insert.getDroppedDims();
    return optionSplittingOnly(
        op, operandShardings, resultShardings,
        [&](int64_t d) { return !dropped.test(d) && writesWhole(insert, d); });
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable,
                          OpBuilder &builder) const {
    auto insert = cast<tensor::InsertSliceOp>(op);
    auto dest = cast<RankedTensorType>(partitionedOperands[1].getType());
    // Split dims are written whole: their size is the local block's.
    LocalSlice local = localSlice(
        insert, dest.getShape(),
        [&](int64_t d) { return writesWhole(insert, d); }, partitionedOperands,
        builder);
    Value result = tensor::InsertSliceOp::create(
        builder, op->getLoc(), partitionedOperands[0], partitionedOperands[1],
        local.offsets, local.sizes, local.strides);
    partitionMap.map(op->getResult(0), result);
    partitionMap.map(op, result.getDefiningOp());
    return success();
  }
};

/// Whether `pad` adds nothing on either side of dim `d`.
bool padsNothing(tensor::PadOp pad, int64_t d) {
  auto zero = [](OpFoldResult v) { return isConstantIntValue(v, 0); };
  return zero(pad.getMixedLowPad()[d]) && zero(pad.getMixedHighPad()[d]);
}

/// tensor.pad (convolution padding): a split of a dim it does not pad
/// passes through; a padded dim is gathered first (a rank's block would need
/// its neighbours' edges).
struct PadShardingModel
    : public ShardingInterface::ExternalModel<PadShardingModel, tensor::PadOp> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return SmallVector<utils::IteratorType>(
        cast<tensor::PadOp>(op).getSourceType().getRank(),
        utils::IteratorType::parallel);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    MLIRContext *ctx = op->getContext();
    int64_t loops = cast<tensor::PadOp>(op).getSourceType().getRank();
    AffineMap identity = AffineMap::getMultiDimIdentityMap(loops, ctx);
    // The source, the dynamic low and high pads (scalars), the result.
    SmallVector<AffineMap> maps = {identity};
    maps.append(op->getNumOperands() - 1, AffineMap::get(loops, 0, ctx));
    maps.push_back(identity);
    return maps;
  }

  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    auto pad = cast<tensor::PadOp>(op);
    return optionSplittingOnly(op, operandShardings, resultShardings,
                               [&](int64_t d) { return padsNothing(pad, d); });
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable,
                          OpBuilder &builder) const {
    // Split dims are not padded: the same pad of the local block.
    shard::partitionTriviallyShardableOperation(
        *op, partitionedOperands, operandShardings, resultShardings,
        partitionMap, symbolTable, builder);
    return success();
  }
};

/// tensor.concat (ONNX Concat): every operand and the result are indexed by
/// the result's dims; a split of any dim but the concatenated one passes
/// through (each rank concatenates its blocks), the concatenated dim is
/// gathered first (a rank's block would straddle the inputs).
struct ConcatShardingModel
    : public ShardingInterface::ExternalModel<ConcatShardingModel,
                                              tensor::ConcatOp> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return SmallVector<utils::IteratorType>(
        cast<tensor::ConcatOp>(op).getResultType().getRank(),
        utils::IteratorType::parallel);
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    int64_t loops = cast<tensor::ConcatOp>(op).getResultType().getRank();
    return SmallVector<AffineMap>(
        op->getNumOperands() + 1,
        AffineMap::getMultiDimIdentityMap(loops, op->getContext()));
  }

  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    int64_t dim = cast<tensor::ConcatOp>(op).getDim();
    return optionSplittingOnly(op, operandShardings, resultShardings,
                               [&](int64_t d) { return d != dim; });
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable,
                          OpBuilder &builder) const {
    int64_t dim = cast<tensor::ConcatOp>(op).getDim();
    for (const Sharding &sharding :
         llvm::concat<const Sharding>(operandShardings, resultShardings))
      if (sharding && dim < int64_t(sharding.getSplitAxes().size()) &&
          !sharding.getSplitAxes()[dim].empty())
        return op->emitOpError("cannot be partitioned: the concatenated dim ")
               << dim << " is split";
    shard::partitionTriviallyShardableOperation(
        *op, partitionedOperands, operandShardings, resultShardings,
        partitionMap, symbolTable, builder);
    return success();
  }
};

} // namespace

void autopar::detail::attachSliceShardingModels(MLIRContext *ctx) {
  tensor::ExtractSliceOp::attachInterface<ExtractSliceShardingModel>(*ctx);
  tensor::InsertSliceOp::attachInterface<InsertSliceShardingModel>(*ctx);
  tensor::PadOp::attachInterface<PadShardingModel>(*ctx);
  tensor::ConcatOp::attachInterface<ConcatShardingModel>(*ctx);
}
