//===- ShardAdjoint.cpp - Adjoints of the shard dialect's ops -------------===//
//
// A step is differentiated after a tensor-parallel plan annotated its
// forward (docs/distributed-training.md, "Tensor parallelism"), so the
// forward holds `shard.shard` annotations, and a data-parallel BatchNorm holds
// `shard.all_reduce` sums over the replicas.
//
// The cotangent of a value is laid out as the value: the adjoint of an
// annotation is the same annotation on the cotangent, read the other way. A
// result annotation (`%a = shard.shard %r to %s`: the producer leaves %s)
// becomes an annotation for users on the cotangent flowing back into the
// producer's adjoint (it reads %s), and an annotation for users (the consumer
// reads %s) becomes a result annotation on the cotangent the consumer's
// adjoint produces. So where the forward converts one sharding to another,
// the backward converts back, and shard-partition inserts the collective
// that conjugates the forward's: a replicated activation read by a
// column-split matmul gets its cotangent as the partial sums of the ranks'
// blocks, which the annotation makes replicated with an all-reduce
// (Megatron's `f`); the all-reduce after a row-split matmul becomes no
// communication in backward (`g`).
//
//===----------------------------------------------------------------------===//

#include "AdjointBuilder.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;

namespace autopar::autodiff {

LogicalResult applyShardAdjoint(Operation *op, AdjointBuilder &adjoints) {
  if (auto shard = dyn_cast<shard::ShardOp>(op)) {
    Value dY = adjoints.getAdjoint(shard.getResult());
    if (!dY || !adjoints.isActive(shard.getSrc()))
      return success();
    adjoints.accumulate(shard.getSrc(), shard::ShardOp::create(
                                            adjoints.getBuilder(), op->getLoc(),
                                            dY, shard.getSharding(),
                                            /*annotate_for_users=*/
                                            !shard.getAnnotateForUsers())
                                            .getResult());
    return success();
  }
  if (auto allReduce = dyn_cast<shard::AllReduceOp>(op)) {
    // A sum over replicas that every replica's loss reads (data-parallel
    // BatchNorm statistics): the adjoint of each replica's input is the sum
    // of the replicas' adjoints of the result.
    if (allReduce.getReduction() != shard::ReductionKind::Sum)
      return failure();
    Value dY = adjoints.getAdjoint(allReduce.getResult());
    if (!dY || !adjoints.isActive(allReduce.getInput()))
      return success();
    adjoints.accumulate(allReduce.getInput(),
                        shard::AllReduceOp::create(
                            adjoints.getBuilder(), op->getLoc(), dY.getType(),
                            allReduce.getGrid(), allReduce.getGridAxes(), dY,
                            shard::ReductionKind::Sum));
    return success();
  }
  return failure();
}

} // namespace autopar::autodiff
