//===- CrossEntropyShardingModels.cpp - ShardingInterface for the fused loss =//
//
// autopar.softmax_cross_entropy and autopar.softmax_cross_entropy_grad, split
// over tensor-parallel ranks. Their loops are the positions (the logits'
// leading dims) and the classes (the last). Any of them may be split:
//
// - the positions: each rank runs the op on its rows, no collective;
// - the classes (Megatron-LM's vocabulary-parallel cross-entropy, when the LM
//   head is split by columns): each rank holds a block of every row's logits
//   and they are never gathered. The forward runs the fused op on the block,
//   with the labels moved into the block (those of other blocks pick
//   nothing), and merges the blocks' log-sum-exps (an all-reduce of their
//   maximum and one of their rescaled sum) and the label's logit (an
//   all-reduce sum: only its block adds it); nll and lse come out whole on
//   every rank. The gradient needs no collective: each rank's block of
//   `d_logits` reads the whole lse and d_nll and its own logits.
//
// nll, lse and d_nll have no class dim, so a class split leaves them
// replicated over those grid axes (not partial: the forward's partition
// finishes the reduction itself).
//
//===----------------------------------------------------------------------===//

#include "Elementwise.h"
#include "LoopShardings.h"
#include "ShardingModelsImpl.h"

#include "autopar/Dialect/AutoparOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterfaceImpl.h"
#include "mlir/Dialect/Shard/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

using namespace mlir;
using namespace mlir::shard;

namespace {

/// The label a rank's fused op sees for a position that is ignored, and
/// for one whose label another rank's block of classes holds: both outside
/// every block, so the local op zeroes the first row and picks nothing in
/// the second.
constexpr int64_t kLocalIgnored = -1;
constexpr int64_t kElsewhere = -2;

/// The logits' rank: the positions' loops, then the classes'.
int64_t numLoops(Operation *op) {
  return cast<ShapedType>(op->getOperand(0).getType()).getRank();
}

bool isForward(Operation *op) {
  return isa<autopar::SoftmaxCrossEntropyOp>(op);
}

/// The maps of `op`'s operands, then of its results, over the loops.
SmallVector<AffineMap> crossEntropyMaps(Operation *op) {
  int64_t rank = numLoops(op);
  MLIRContext *ctx = op->getContext();
  AffineMap all = AffineMap::getMultiDimIdentityMap(rank, ctx);
  AffineMap rows = all.dropResult(rank - 1);
  SmallVector<AffineMap> maps;
  if (isForward(op)) {
    maps = {all, rows, rows, rows}; // logits, labels, nll and lse inits
    if (op->getNumResults() > 0)
      maps.append({rows, rows});
  } else {
    maps = {all, rows, rows, rows, all}; // logits, labels, lse, d_nll, init
    if (op->getNumResults() > 0)
      maps.push_back(all);
  }
  return maps;
}

/// Every dim of the ops' tensors reads one loop directly.
std::optional<unsigned> loopOf(AffineExpr expr) {
  return cast<AffineDimExpr>(expr).getPosition();
}

/// An elementwise generic over `inputs` (all of `type`'s shape).
Value elementwise(ImplicitLocOpBuilder &b, ValueRange inputs,
                  RankedTensorType type,
                  function_ref<Value(OpBuilder &, Location, ValueRange)> fn) {
  return autopar::detail::buildElementwise(b, b.getLoc(), inputs, type, fn);
}

Value constantI64(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(v));
}

/// Whether `label` (i64) is in [0, count).
Value inBlock(OpBuilder &b, Location loc, Value label, int64_t count) {
  return arith::AndIOp::create(
      b, loc,
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, label,
                            constantI64(b, loc, 0)),
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, label,
                            constantI64(b, loc, count)));
}

/// The labels as this rank's block of `blockSize` classes (over `axes` of
/// `grid`) numbers them: `label - offset` for a label of the block,
/// kLocalIgnored for an ignored one, kElsewhere for the others.
Value labelsInBlock(ImplicitLocOpBuilder &b, Value labels, int64_t ignoreIndex,
                    GridOp grid, ArrayRef<GridAxis> axes, int64_t blockSize) {
  Value block = createProcessLinearIndex(grid.getSymName(), axes, b);
  Value offset = arith::MulIOp::create(
      b, arith::IndexCastOp::create(b, b.getI64Type(), block),
      constantI64(b, b.getLoc(), blockSize));
  return elementwise(
      b, labels, cast<RankedTensorType>(labels.getType()),
      [&](OpBuilder &nb, Location nl, ValueRange a) -> Value {
        Value local = arith::SubIOp::create(nb, nl, a[0], offset);
        Value ignored =
            arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::eq, a[0],
                                  constantI64(nb, nl, ignoreIndex));
        Value mine =
            arith::SelectOp::create(nb, nl, inBlock(nb, nl, local, blockSize),
                                    local, constantI64(nb, nl, kElsewhere));
        return arith::SelectOp::create(
            nb, nl, ignored, constantI64(nb, nl, kLocalIgnored), mine);
      });
}

/// The class loop's grid axes in `shardings` (those of `op`'s operands):
/// the logits' last dim's.
ArrayRef<GridAxis> classAxes(Operation *op, ArrayRef<Sharding> shardings) {
  const Sharding &logits = shardings[0];
  int64_t classDim = numLoops(op) - 1;
  if (!logits || int64_t(logits.getSplitAxes().size()) <= classDim)
    return {};
  return logits.getSplitAxes()[classDim].asArrayRef();
}

template <typename OpTy>
struct CrossEntropyShardingModel
    : public ShardingInterface::ExternalModel<CrossEntropyShardingModel<OpTy>,
                                              OpTy> {
  /// The positions are parallel; the classes too in the gradient, reduced
  /// in the forward.
  SmallVector<utils::IteratorType> getLoopIteratorTypes(Operation *op) const {
    SmallVector<utils::IteratorType> iterators(numLoops(op),
                                               utils::IteratorType::parallel);
    if (isForward(op))
      iterators.back() = utils::IteratorType::reduction;
    return iterators;
  }

  /// A log-sum-exp: not one the shard dialect finishes with an all-reduce
  /// (partition does it).
  SmallVector<ReductionKind>
  getReductionLoopIteratorKinds(Operation *op) const {
    if (isForward(op))
      return {ReductionKind::Generic};
    return {};
  }

  SmallVector<AffineMap> getIndexingMaps(Operation *op) const {
    return crossEntropyMaps(op);
  }

  /// The splits the operands and results agree on; a split some tensor
  /// dim does not divide evenly is dropped (that loop stays whole).
  FailureOr<ShardingOption>
  getShardingOption(Operation *op, ArrayRef<Sharding> operandShardings,
                    ArrayRef<Sharding> resultShardings) const {
    std::vector<Sharding> shardings(operandShardings.begin(),
                                    operandShardings.end());
    llvm::append_range(shardings, resultShardings);
    return autopar::detail::shardingOptionOverLoops(
        op, crossEntropyMaps(op), shardings, numLoops(op), loopOf,
        [](unsigned) { return true; });
  }

  /// Each tensor dim is split like the loop it indexes (nll, lse and d_nll
  /// are replicated over the class split's axes).
  FailureOr<std::vector<Sharding>>
  getShardingAnnotations(Operation *op, const ShardingOption &option) const {
    return autopar::detail::annotationsOverLoops(op, crossEntropyMaps(op),
                                                 option, loopOf);
  }

  LogicalResult addShardingAnnotations(Operation *op, OpBuilder &b,
                                       const ShardingOption &option) const {
    FailureOr<std::vector<Sharding>> shardings =
        getShardingAnnotations(op, option);
    if (failed(shardings))
      return failure();
    autopar::detail::addAnnotations(op, b, *shardings);
    return success();
  }

  LogicalResult partition(Operation *op, ArrayRef<Value> partitionedOperands,
                          ArrayRef<Sharding> operandShardings,
                          ArrayRef<Sharding> resultShardings,
                          IRMapping &partitionMap,
                          SymbolTableCollection &symbolTable,
                          OpBuilder &builder) const {
    auto ce = cast<OpTy>(op);
    if (!ce.hasPureTensorSemantics())
      return op->emitOpError("cannot be partitioned: it has memref operands");
    ArrayRef<GridAxis> axes = classAxes(op, operandShardings);
    // The operands with no class dim must be whole over the class split's
    // axes: each rank's block reads whole rows of them.
    int64_t positions = numLoops(op) - 1;
    for (auto [index, sharding] : llvm::enumerate(operandShardings)) {
      if (!sharding)
        continue;
      ArrayRef<GridAxesAttr> splits = sharding.getSplitAxes();
      bool hasClasses = crossEntropyMaps(op)[index].getNumResults() ==
                        unsigned(positions + 1);
      // A sharding lists no trailing whole dims: a class dim it leaves out
      // is whole.
      ArrayRef<GridAxis> classSplit;
      if (hasClasses && int64_t(splits.size()) > positions)
        classSplit = splits[positions].asArrayRef();
      if (hasClasses && index != 0 && classSplit != axes)
        return op->emitOpError("cannot be partitioned: operand ")
               << index << " splits the classes differently from the logits";
      for (auto [dim, split] : llvm::enumerate(splits)) {
        if (hasClasses && int64_t(dim) == positions)
          continue;
        if (llvm::any_of(split.asArrayRef(), [&](GridAxis a) {
              return llvm::is_contained(axes, a);
            }))
          return op->emitOpError("cannot be partitioned: operand ")
                 << index << " is split over grid axes the classes are split "
                 << "over";
      }
    }
    if (axes.empty()) {
      // Each rank's rows: the same op on its blocks.
      autopar::detail::cloneOnBlocks(op, partitionedOperands, partitionMap,
                                     builder);
      return success();
    }

    GridOp grid =
        getGridOrNull(op, operandShardings[0].getGridAttr(), symbolTable);
    if (!grid)
      return op->emitOpError("cannot be partitioned: its grid is not found");
    ImplicitLocOpBuilder b(op->getLoc(), builder);
    Value logits = partitionedOperands[0];
    Value labels = partitionedOperands[1];
    // Static: the ops' verifiers require static shapes.
    int64_t blockSize = cast<ShapedType>(logits.getType()).getShape().back();
    int64_t ignoreIndex = ce.getIgnoreIndex();
    Value local = labelsInBlock(b, labels, ignoreIndex, grid, axes, blockSize);
    auto localIgnore = b.getI64IntegerAttr(kLocalIgnored);

    if constexpr (std::is_same_v<OpTy, autopar::SoftmaxCrossEntropyGradOp>) {
      // d_logits[p, c] of this block: the whole row's lse and d_nll, the
      // label moved into the block.
      auto grad = autopar::SoftmaxCrossEntropyGradOp::create(
          b, TypeRange{partitionedOperands[4].getType()}, logits, local,
          ValueRange{partitionedOperands[2], partitionedOperands[3]},
          ValueRange{partitionedOperands[4]}, localIgnore);
      if (op->getNumResults() > 0)
        partitionMap.map(op->getResult(0), grad->getResult(0));
      partitionMap.map(op, grad.getOperation());
      return success();
    } else {
      // This block's nll and lse, then the whole row's: lse merged over the
      // blocks (max, then the rescaled sum), the label's logit from the
      // block that holds it.
      auto rowsType = cast<RankedTensorType>(partitionedOperands[2].getType());
      auto part = autopar::SoftmaxCrossEntropyOp::create(
          b, TypeRange{rowsType, rowsType}, logits, local, ValueRange{},
          ValueRange{partitionedOperands[2], partitionedOperands[3]},
          localIgnore);
      Value nllPart = part->getResult(0), lsePart = part->getResult(1);
      StringRef gridName = grid.getSymName();
      Value picked =
          elementwise(b, {nllPart, lsePart, local}, rowsType,
                      [&](OpBuilder &nb, Location nl, ValueRange a) -> Value {
                        Value zero = arith::ConstantOp::create(
                            nb, nl, nb.getF32FloatAttr(0));
                        return arith::SelectOp::create(
                            nb, nl, inBlock(nb, nl, a[2], blockSize),
                            arith::SubFOp::create(nb, nl, a[1], a[0]), zero);
                      });
      Value max =
          AllReduceOp::create(b, lsePart, gridName, axes, ReductionKind::Max);
      Value scaled =
          elementwise(b, {lsePart, max}, rowsType,
                      [](OpBuilder &nb, Location nl, ValueRange a) -> Value {
                        return math::ExpOp::create(
                            nb, nl, arith::SubFOp::create(nb, nl, a[0], a[1]));
                      });
      Value sum =
          AllReduceOp::create(b, scaled, gridName, axes, ReductionKind::Sum);
      Value pickedAll =
          AllReduceOp::create(b, picked, gridName, axes, ReductionKind::Sum);
      Value lse =
          elementwise(b, {max, sum}, rowsType,
                      [](OpBuilder &nb, Location nl, ValueRange a) -> Value {
                        return arith::AddFOp::create(
                            nb, nl, a[0], math::LogOp::create(nb, nl, a[1]));
                      });
      Value nll = elementwise(
          b, {lse, pickedAll, labels}, rowsType,
          [&](OpBuilder &nb, Location nl, ValueRange a) -> Value {
            Value ignored =
                arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::eq, a[2],
                                      constantI64(nb, nl, ignoreIndex));
            Value zero =
                arith::ConstantOp::create(nb, nl, nb.getF32FloatAttr(0));
            return arith::SelectOp::create(
                nb, nl, ignored, zero,
                arith::SubFOp::create(nb, nl, a[0], a[1]));
          });
      if (op->getNumResults() > 0) {
        partitionMap.map(op->getResult(0), nll);
        partitionMap.map(op->getResult(1), lse);
      }
      partitionMap.map(op, part.getOperation());
      return success();
    }
  }
};

} // namespace

void autopar::detail::attachCrossEntropyShardingModels(MLIRContext *ctx) {
  autopar::SoftmaxCrossEntropyOp::attachInterface<
      CrossEntropyShardingModel<autopar::SoftmaxCrossEntropyOp>>(*ctx);
  autopar::SoftmaxCrossEntropyGradOp::attachInterface<
      CrossEntropyShardingModel<autopar::SoftmaxCrossEntropyGradOp>>(*ctx);
}
