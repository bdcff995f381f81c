//===- LoopShardings.h - Sharding models over named loops -------*- C++ -*-===//
//
// The fused ops' sharding models (AttentionShardingModels.cpp,
// CrossEntropyShardingModels.cpp) describe each operand and result by a map
// from the op's loops to its dims, as upstream's linalg models do, but read
// them their own way (attention's key/value heads through `h floordiv g`, a
// mask's broadcast dims through a constant), so upstream's default helpers
// do not apply. These compute the sharding option and the annotations from
// such maps, given how a dim's expression names its loop.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_LIB_TRANSFORMS_LOOPSHARDINGS_H
#define AUTOPAR_LIB_TRANSFORMS_LOOPSHARDINGS_H

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"

#include <optional>
#include <vector>

namespace autopar::detail {

/// The loop whose blocks a tensor dim read through an expression splits
/// with, or none (a dim that is never split).
using LoopOf = llvm::function_ref<std::optional<unsigned>(mlir::AffineExpr)>;

/// The blocks `axes` of `grid` split a dim into (kDynamic for a dynamic
/// grid axis).
int64_t blocksOf(mlir::shard::GridOp grid,
                 llvm::ArrayRef<mlir::shard::GridAxis> axes);

/// Whether every static tensor dim of `op` (its operands, then its results,
/// read through `maps`) that loop `loop` indexes divides into `parts`
/// blocks (false for a dynamic dim or count).
bool dividesEvenly(mlir::Operation *op, llvm::ArrayRef<mlir::AffineMap> maps,
                   unsigned loop, int64_t parts, LoopOf loopOf);

/// The splits of `numLoops` loops that `shardings` (of `op`'s operands,
/// then its results, read through `maps`) agree on, keeping only loops
/// `splittable` accepts; a split some tensor dim does not divide evenly is
/// dropped. Fails when they disagree (two splits of a loop, one grid axis
/// for two loops, two grids).
mlir::FailureOr<mlir::shard::ShardingOption> shardingOptionOverLoops(
    mlir::Operation *op, llvm::ArrayRef<mlir::AffineMap> maps,
    llvm::ArrayRef<mlir::shard::Sharding> shardings, unsigned numLoops,
    LoopOf loopOf, llvm::function_ref<bool(unsigned)> splittable);

/// Each tensor of `op` (read through `maps`) split like the loops its dims
/// index under `option`.
mlir::FailureOr<std::vector<mlir::shard::Sharding>>
annotationsOverLoops(mlir::Operation *op, llvm::ArrayRef<mlir::AffineMap> maps,
                     const mlir::shard::ShardingOption &option, LoopOf loopOf);

/// Annotates `op`'s results and operands with `shardings` (operands, then
/// results).
void addAnnotations(mlir::Operation *op, mlir::OpBuilder &b,
                    llvm::ArrayRef<mlir::shard::Sharding> shardings);

/// Clones destination-passing `op` on its partitioned operands (through
/// `partitionMap`), each result typed as its destination's block: every
/// rank runs the op on its blocks.
void cloneOnBlocks(mlir::Operation *op,
                   llvm::ArrayRef<mlir::Value> partitionedOperands,
                   mlir::IRMapping &partitionMap, mlir::OpBuilder &builder);

} // namespace autopar::detail

#endif // AUTOPAR_LIB_TRANSFORMS_LOOPSHARDINGS_H
