//===- CheckPartitionable.cpp - What shard-partition assumes --------------===//
//
// See Passes.td. The checks mirror what upstream's Partition.cpp reads
// without checking (release 22): the annotation of every block argument,
// operand and result of the function's ops.
//
//===----------------------------------------------------------------------===//

#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"

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

LogicalResult checkOp(Operation *op) {
  if (isa<shard::ShardOp, shard::ShardingOp>(op) ||
      op->hasTrait<OpTrait::ConstantLike>() ||
      op->hasTrait<OpTrait::IsTerminator>())
    return success();
  bool interface = isa<shard::ShardingInterface>(op);
  // Upstream's linalg model partitions only ops whose maps are projected
  // permutations (release 22); a convolution reads its input through
  // windows (h + kh).
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
    if (!llvm::all_of(linalgOp.getIndexingMapsArray(),
                      [](AffineMap m) { return m.isProjectedPermutation(); }))
      return op->emitOpError("cannot be partitioned")
             << nodeSuffix(op)
             << ": upstream partitions linalg ops only when every indexing "
                "map is a projected permutation (a convolution's input "
                "window is not)";
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
  for (OpResult result : op->getResults()) {
    if (!isa<RankedTensorType>(result.getType()))
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
