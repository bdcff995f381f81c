//===- LinalgShardingModels.cpp - ShardingInterface for windowed linalg ops
//===//
//
// Upstream's linalg model (release 22) refuses to partition an op unless
// every indexing map is a projected permutation, so convolutions and pools,
// which read their input through windows (oh * stride + kh * dilation), stay
// whole on every tensor-parallel rank. Their channel loops are plain dims,
// though: splitting the output channels (filter rows) needs nothing from
// other ranks, and splitting the input channels (a reduction) leaves partial
// sums, exactly like Megatron's column- and row-parallel linear layers.
//
// This model is upstream's, generalised: loops that some operand reads
// through a compound expression (the window loops) are never split, and
// every other loop partitions as upstream partitions a linalg op (a local
// clone; a split reduction starts from the init on one rank of each group
// and the neutral element elsewhere, then all-reduces). For ops whose maps
// are projected permutations it does what upstream does. It is attached to
// linalg.generic (pools, grouped N-d convolutions) and to the named
// convolutions the importer creates, before upstream's model.
//
//===----------------------------------------------------------------------===//

#include "ShardingModelsImpl.h"

#include "mlir/Analysis/SliceAnalysis.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/Dialect/Shard/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::shard;

namespace {

/// The single combiner of `op`'s first init (addf for a convolution, maximumf
/// for a max pool), if its body reduces that way.
Operation *getCombiner(linalg::LinalgOp op) {
  SmallVector<Operation *> combiners;
  Value reduced = matchReduction(op.getRegionOutputArgs(), 0, combiners);
  return reduced && combiners.size() == 1 ? combiners.front() : nullptr;
}

ReductionKind getReductionKind(linalg::LinalgOp op) {
  Operation *combiner = getCombiner(op);
  if (!combiner)
    return ReductionKind::Generic;
  return llvm::TypeSwitch<Operation *, ReductionKind>(combiner)
      .Case<arith::AddFOp, arith::AddIOp>(
          [](Operation *) { return ReductionKind::Sum; })
      .Case<arith::MulFOp, arith::MulIOp>(
          [](Operation *) { return ReductionKind::Product; })
      .Case<arith::MaximumFOp, arith::MaxNumFOp, arith::MaxSIOp,
            arith::MaxUIOp>([](Operation *) { return ReductionKind::Max; })
      .Case<arith::MinimumFOp, arith::MinNumFOp, arith::MinSIOp,
            arith::MinUIOp>([](Operation *) { return ReductionKind::Min; })
      .Default([](Operation *) { return ReductionKind::Generic; });
}

/// The grid axes each loop is split over, read from the operand and result
/// shardings. Fails (with an error on `op`) when a window loop or a tensor
/// dim read through a compound expression is split, or when two tensors
/// disagree about a loop.
FailureOr<ShardingArray> loopAxes(linalg::LinalgOp op,
                                  ArrayRef<Sharding> operandShardings,
                                  ArrayRef<Sharding> resultShardings) {
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  std::vector<Sharding> shardings(operandShardings.begin(),
                                  operandShardings.end());
  for (auto [i, sharding] : llvm::enumerate(resultShardings)) {
    shardings.push_back(sharding);
    maps.push_back(maps[op.getDpsInitOperand(i)->getOperandNumber()]);
  }
  ShardingArray axes(op.getNumLoops());
  SmallVector<bool> seen(op.getNumLoops(), false);
  llvm::SmallBitVector window = autopar::detail::windowLoops(op);
  llvm::SmallBitVector indexed = autopar::detail::indexedLoops(op);
  for (auto [sharding, map] : llvm::zip_equal(shardings, maps)) {
    if (!sharding)
      continue;
    for (auto [dim, split] : llvm::enumerate(sharding.getSplitAxes())) {
      if (dim >= map.getNumResults())
        break;
      auto loop = dyn_cast<AffineDimExpr>(map.getResult(dim));
      if (!loop) {
        if (split.empty())
          continue;
        std::string expr;
        llvm::raw_string_ostream os(expr);
        map.getResult(dim).print(os);
        return op->emitOpError("cannot be partitioned: tensor dim ")
               << dim << " is read through a window (" << expr
               << ") and cannot be split";
      }
      unsigned pos = loop.getPosition();
      if (!split.empty() && window.test(pos))
        return op->emitOpError("cannot be partitioned: loop ")
               << pos << " also indexes a window and cannot be split";
      if (!split.empty() && indexed.test(pos))
        return op->emitOpError("cannot be partitioned: loop ")
               << pos
               << " is read by linalg.index in the body (a value that "
                  "depends on its position, such as Dropout's mask), so a "
                  "rank's block would see its local positions; it cannot "
                  "be split";
      ArrayRef<GridAxis> splitAxes = split.asArrayRef();
      if (seen[pos] && ArrayRef<GridAxis>(axes[pos]) != splitAxes)
        return op->emitOpError("cannot be partitioned: its operands and "
                               "results split loop ")
               << pos << " differently";
      seen[pos] = true;
      axes[pos].assign(splitAxes.begin(), splitAxes.end());
    }
  }
  return axes;
}

/// `partitioned`, the local block of the init, on the first rank of each
/// reduction group; a tensor of `neutral` (the combiner's neutral element)
/// on the others, so the all-reduce adds the init once. An init that is
/// `neutral` already is every rank's: a rank-dependent choice between two
/// equal tensors would cost a buffer whose free depends on the rank
/// (bufferization frees it at the block's end, not at its last use).
Value initOnLeadRank(TypedAttr neutral, Value partitioned,
                     ArrayRef<GridAxis> reductionAxes, GridOp grid,
                     ImplicitLocOpBuilder &b) {
  if (autopar::detail::sameFillConstant(
          autopar::detail::fillConstant(partitioned), neutral))
    return partitioned;
  Value index = createProcessLinearIndex(grid.getSymName(), reductionAxes, b);
  Value zero = arith::ConstantIndexOp::create(b, 0);
  Value isLead =
      arith::CmpIOp::create(b, arith::CmpIPredicate::eq, index, zero);
  auto ifOp = scf::IfOp::create(b, partitioned.getType(), isLead,
                                /*addThenBlock=*/true, /*addElseBlock=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(&ifOp.getThenRegion().front());
    scf::YieldOp::create(b, partitioned);
  }
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(&ifOp.getElseRegion().front());
    SmallVector<OpFoldResult> sizes =
        tensor::getMixedSizes(b, b.getLoc(), partitioned);
    Value empty = tensor::EmptyOp::create(b, sizes, neutral.getType());
    Value value = arith::ConstantOp::create(b, neutral);
    scf::YieldOp::create(b,
                         linalg::FillOp::create(b, value, empty).getResult(0));
  }
  return ifOp.getResult(0);
}

template <typename Op>
struct WindowedLinalgShardingModel
    : public ShardingInterface::ExternalModel<WindowedLinalgShardingModel<Op>,
                                              Op> {
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    return cast<linalg::LinalgOp>(op).getIteratorTypesArray();
  }

  /// The op's maps with every window expression (`oh * 2 + kh`, a flipped
  /// filter's `2 - kh`, a spread gradient's `oh - kh + 2`) replaced by the
  /// plain sum of its loops (`oh + kh`). Upstream's propagation accepts only
  /// sums of loops times constants, with no constant term; window loops are
  /// never split here (getShardingOption clears them), so such a tensor dim
  /// stays whole whatever its coefficients.
  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    auto linalgOp = cast<linalg::LinalgOp>(op);
    MLIRContext *ctx = op->getContext();
    SmallVector<AffineMap> maps;
    for (AffineMap map : linalgOp.getIndexingMapsArray()) {
      SmallVector<AffineExpr> exprs;
      for (AffineExpr expr : map.getResults()) {
        if (isa<AffineDimExpr, AffineConstantExpr>(expr)) {
          exprs.push_back(expr);
          continue;
        }
        AffineExpr loops;
        for (unsigned d = 0; d < map.getNumDims(); ++d)
          if (expr.isFunctionOfDim(d))
            loops = loops ? loops + getAffineDimExpr(d, ctx)
                          : getAffineDimExpr(d, ctx);
        exprs.push_back(loops ? loops : expr);
      }
      maps.push_back(
          AffineMap::get(map.getNumDims(), map.getNumSymbols(), exprs, ctx));
    }
    // Results are indexed like their inits.
    for (OpOperand &init : linalgOp.getDpsInitsMutable())
      maps.push_back(maps[init.getOperandNumber()]);
    return maps;
  }

  SmallVector<ReductionKind>
  getReductionLoopIteratorKinds(Operation *op) const {
    auto linalgOp = cast<linalg::LinalgOp>(op);
    return SmallVector<ReductionKind>(linalgOp.getNumReductionLoops(),
                                      getReductionKind(linalgOp));
  }

  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    FailureOr<ShardingOption> option = shard::detail::defaultGetShardingOption(
        op, operandShardings, resultShardings);
    if (failed(option))
      return failure();
    // Window loops, and loops whose position the body reads, stay whole;
    // their tensors are gathered first.
    llvm::SmallBitVector window =
        autopar::detail::windowLoops(cast<linalg::LinalgOp>(op)) |
        autopar::detail::indexedLoops(cast<linalg::LinalgOp>(op));
    for (auto [loop, axes] : llvm::enumerate(option->shardingArray))
      if (loop < window.size() && window.test(loop))
        axes.clear();
    return option;
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable,
                          OpBuilder &builder) const {
    auto linalgOp = cast<linalg::LinalgOp>(op);
    FailureOr<ShardingArray> axes =
        loopAxes(linalgOp, operandShardings, resultShardings);
    if (failed(axes))
      return failure();
    SmallVector<utils::IteratorType> iterators =
        linalgOp.getIteratorTypesArray();
    if (!isAtLeastOneReductionIteratorSharded(iterators, *axes)) {
      partitionTriviallyShardableOperation(*op, partitionedOperands,
                                           operandShardings, resultShardings,
                                           partitionMap, symbolTable, builder);
      return success();
    }

    // A split reduction: each rank reduces its block, then the partial
    // results are combined across the reduction group.
    Operation *combiner = getCombiner(linalgOp);
    std::optional<TypedAttr> neutral =
        combiner ? arith::getNeutralElement(combiner) : std::nullopt;
    if (linalgOp.getNumDpsInits() != 1 || !neutral)
      return op->emitOpError(
          "cannot be partitioned: its reduction is split, but its body does "
          "not reduce one result with a single arith combiner");
    GridOp grid;
    for (const Sharding &sharding :
         llvm::concat<const Sharding>(operandShardings, resultShardings))
      if (sharding && !grid)
        grid = getGrid(op, sharding.getGridAttr(), symbolTable);
    SmallVector<GridAxis> reductionAxes =
        getReductionGridAxes(iterators, *axes);
    ImplicitLocOpBuilder b(op->getLoc(), builder);
    SmallVector<Value> operands(partitionedOperands);
    unsigned initIndex = linalgOp.getDpsInitOperand(0)->getOperandNumber();
    operands[initIndex] =
        initOnLeadRank(*neutral, operands[initIndex], reductionAxes, grid, b);
    // The clone reads the new init; the caller's mapping of operands stays.
    // It starts from the caller's mapping all the same: the body may read
    // values defined above the op (a scalar constant the canonicalizer
    // hoisted out of it), whose partitioned copies only that mapping knows.
    IRMapping local = partitionMap;
    for (auto [original, partitioned] :
         llvm::zip_equal(op->getOperands(), operands))
      local.map(original, partitioned);
    partitionTriviallyShardableOperation(*op, operands, operandShardings,
                                         resultShardings, local, symbolTable,
                                         b);
    ReductionKind kind = getReductionKind(linalgOp);
    for (auto [result, sharding] :
         llvm::zip_equal(op->getResults(), resultShardings)) {
      Value reduced = AllReduceOp::create(
          b, local.lookup(result), grid.getSymName(), reductionAxes, kind);
      partitionMap.map(result, reduced);
    }
    partitionMap.map(op, local.lookup(op));
    return success();
  }
};

template <typename... Ops> void attach(MLIRContext *ctx) {
  (Ops::template attachInterface<WindowedLinalgShardingModel<Ops>>(*ctx), ...);
}

} // namespace

llvm::SmallBitVector autopar::detail::windowLoops(linalg::LinalgOp op) {
  llvm::SmallBitVector loops(op.getNumLoops());
  for (AffineMap map : op.getIndexingMapsArray())
    for (AffineExpr expr : map.getResults())
      if (!isa<AffineDimExpr, AffineConstantExpr>(expr))
        for (unsigned d = 0; d < loops.size(); ++d)
          if (expr.isFunctionOfDim(d))
            loops.set(d);
  return loops;
}

llvm::SmallBitVector autopar::detail::indexedLoops(linalg::LinalgOp op) {
  llvm::SmallBitVector loops(op.getNumLoops());
  if (Block *body = op.getBlock())
    body->walk([&](linalg::IndexOp index) {
      if (index.getDim() < loops.size())
        loops.set(index.getDim());
    });
  return loops;
}

void autopar::detail::attachLinalgShardingModels(MLIRContext *ctx) {
  requireFirstModel(linalg::GenericOp::getOperationName(), ctx);
  attach<linalg::GenericOp, linalg::Conv1DNcwFcwOp, linalg::Conv2DNchwFchwOp,
         linalg::Conv2DNgchwGfchwOp, linalg::Conv3DNcdhwFcdhwOp,
         linalg::DepthwiseConv2DNchwChwOp, linalg::PoolingNchwMaxOp,
         linalg::PoolingNchwSumOp>(ctx);
}

Attribute autopar::detail::fillConstant(Value init) {
  while (auto slice = init.getDefiningOp<tensor::ExtractSliceOp>())
    init = slice.getSource();
  Attribute value;
  if (auto fill = init.getDefiningOp<linalg::FillOp>())
    return matchPattern(fill.value(), m_Constant(&value)) ? value : nullptr;
  DenseElementsAttr dense;
  if (matchPattern(init, m_Constant(&dense)) && dense.isSplat())
    return dense.getSplatValue<Attribute>();
  return nullptr;
}

bool autopar::detail::sameFillConstant(Attribute a, Attribute b) {
  if (!a || !b)
    return false;
  if (a == b)
    return true;
  auto fa = dyn_cast<FloatAttr>(a), fb = dyn_cast<FloatAttr>(b);
  return fa && fb && fa.getType() == fb.getType() && fa.getValue().isZero() &&
         fb.getValue().isZero();
}
