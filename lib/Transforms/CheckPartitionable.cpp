//===- CheckPartitionable.cpp - What shard-partition assumes --------------===//
//
// See Passes.td. The checks mirror what upstream's Partition.cpp reads
// without checking (release 22): the annotation of every block argument,
// operand and result of the function's ops.
//
//===----------------------------------------------------------------------===//

#include "ShardingModelsImpl.h"
#include "autopar/Dialect/AutoparOps.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "llvm/ADT/SmallBitVector.h"

namespace autopar {
#define GEN_PASS_DEF_CHECKPARTITIONABLE
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// Tensors that shard-partition annotates (it ignores scalars and rank 0).
bool isShardable(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.getRank() > 0;
}

/// " (ONNX node NAME)" for an op the importer named, or "".
std::string nodeSuffix(Operation *op) {
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    return (" (ONNX node " + name.getName().strref() + ")").str();
  return "";
}

/// Whether `sharding` splits nothing.
bool isReplicated(shard::ShardOp shard) {
  return llvm::all_of(shard::Sharding(shard.getSharding()).getSplitAxes(),
                      [](shard::GridAxesAttr axes) { return axes.empty(); });
}

/// The sharding that annotates `value` for `op` (the shard.shard that reads
/// it, or that its result feeds), if any.
std::optional<shard::Sharding> annotationOf(Value value, bool isResult) {
  shard::ShardOp shard;
  if (isResult)
    shard = value.hasOneUse() ? dyn_cast<shard::ShardOp>(*value.user_begin())
                              : shard::ShardOp();
  else
    shard = value.getDefiningOp<shard::ShardOp>();
  if (!shard)
    return std::nullopt;
  return shard::Sharding(shard.getSharding());
}

/// Errors if a tensor dim of `op` read through a window, or indexed by a
/// loop that also indexes a window, is split.
LogicalResult checkWindowsWhole(linalg::LinalgOp op) {
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  llvm::SmallBitVector window = autopar::detail::windowLoops(op);
  if (window.none())
    return success();
  auto check = [&](Value value, AffineMap map, bool isResult,
                   unsigned number) -> LogicalResult {
    std::optional<shard::Sharding> sharding = annotationOf(value, isResult);
    if (!sharding)
      return success();
    for (auto [dim, axes] : llvm::enumerate(sharding->getSplitAxes())) {
      if (axes.empty() || dim >= map.getNumResults())
        continue;
      auto loop = dyn_cast<AffineDimExpr>(map.getResult(dim));
      if (!loop || window.test(loop.getPosition()))
        return op->emitOpError("cannot be partitioned")
               << nodeSuffix(op) << ": " << (isResult ? "result " : "operand ")
               << number << " is split along dim " << dim
               << ", which the op reads through a window (only channel and "
                  "batch dims of a convolution or pool can be split)";
    }
    return success();
  };
  for (OpOperand &operand : op->getOpOperands())
    if (failed(check(operand.get(), maps[operand.getOperandNumber()], false,
                     operand.getOperandNumber())))
      return failure();
  for (OpResult result : op.getOperation()->getResults())
    if (failed(check(result,
                     maps[op.getDpsInitOperand(result.getResultNumber())
                              ->getOperandNumber()],
                     true, result.getResultNumber())))
      return failure();
  return success();
}

LogicalResult checkOp(Operation *op) {
  if (isa<shard::ShardOp, shard::ShardingOp>(op) ||
      op->hasTrait<OpTrait::ConstantLike>() ||
      op->hasTrait<OpTrait::IsTerminator>())
    return success();
  // An op whose model has no loops (ScalarShardingModels.cpp: the scalar
  // arithmetic and element reads of a training step) takes its tensors
  // whole: as good as no rule for a split operand or result.
  auto model = dyn_cast<shard::ShardingInterface>(op);
  bool interface = model && !(model.getLoopIteratorTypes().empty() &&
                              model.getIndexingMaps().empty());
  // A convolution or pool reads its input through windows (oh + kh): a
  // split of a window loop would need the neighbours' halo
  // (LinalgShardingModels.cpp partitions only the other loops).
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
    if (failed(checkWindowsWhole(linalgOp)))
      return failure();
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isShardable(operand.get().getType()))
      continue;
    auto shard = operand.get().getDefiningOp<shard::ShardOp>();
    if (!shard || !shard.getAnnotateForUsers())
      return op->emitOpError("cannot be partitioned")
             << nodeSuffix(op) << ": operand " << operand.getOperandNumber()
             << " has no sharding annotation";
    if (!interface && !isReplicated(shard))
      return op->emitOpError("cannot be partitioned")
             << nodeSuffix(op) << ": it has no sharding rule, and operand "
             << operand.getOperandNumber() << " is split";
  }
  // An unused result of a fused op (attention's log-sum-exp in inference,
  // a cross-entropy's) takes its destination's block
  // (AttentionShardingModels.cpp, CrossEntropyShardingModels.cpp).
  bool fused =
      isa<autopar::AttentionOp, autopar::AttentionGradOp,
          autopar::SoftmaxCrossEntropyOp, autopar::SoftmaxCrossEntropyGradOp>(
          op);
  for (OpResult result : op->getResults()) {
    if (!isa<RankedTensorType>(result.getType()) ||
        (fused && result.use_empty()))
      continue;
    auto shard = result.hasOneUse()
                     ? dyn_cast<shard::ShardOp>(*result.user_begin())
                     : shard::ShardOp();
    if (!shard || shard.getAnnotateForUsers())
      return op->emitOpError("cannot be partitioned")
             << nodeSuffix(op) << ": result " << result.getResultNumber()
             << (result.use_empty() ? " is unused"
                                    : " is not annotated once for its users");
    if (!interface && !isReplicated(shard))
      return op->emitOpError("cannot be partitioned")
             << nodeSuffix(op) << ": it has no sharding rule, and result "
             << result.getResultNumber() << " is split";
  }
  // Attention splits only its batch and heads, evenly
  // (AttentionShardingModels.cpp).
  if (isa<autopar::AttentionOp, autopar::AttentionGradOp>(op)) {
    std::vector<shard::Sharding> operands, results;
    for (Value operand : op->getOperands())
      operands.push_back(
          annotationOf(operand, false).value_or(shard::Sharding()));
    for (Value result : op->getResults())
      results.push_back(annotationOf(result, true).value_or(shard::Sharding()));
    SymbolTableCollection symbols;
    return autopar::detail::checkAttentionShardings(
        op, operands, results, symbols, [&] {
          return op->emitOpError("cannot be partitioned")
                 << nodeSuffix(op) << ": ";
        });
  }
  return success();
}

struct CheckPartitionablePass
    : autopar::impl::CheckPartitionableBase<CheckPartitionablePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (!func.getBody().hasOneBlock()) {
      func.emitOpError("cannot be partitioned: it has several blocks");
      return signalPassFailure();
    }
    Block &block = func.getBody().front();
    for (BlockArgument arg : block.getArguments()) {
      if (!isShardable(arg.getType()))
        continue;
      if (!arg.hasOneUse() || !isa<shard::ShardOp>(*arg.user_begin())) {
        func.emitOpError("cannot be partitioned: argument ")
            << arg.getArgNumber()
            << " must be read through exactly one sharding annotation";
        return signalPassFailure();
      }
    }
    for (Operation &op : block)
      if (failed(checkOp(&op)))
        return signalPassFailure();
  }
};

} // namespace
