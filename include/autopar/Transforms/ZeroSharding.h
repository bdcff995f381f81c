//===- ZeroSharding.h - Which tensors ZeRO shards, and its collectives --*-===//
//
// ZeRO (Rajbhandari et al., SC 2020) as dp shardings of the training state
// (docs/distributed-training.md, "ZeRO"): with `dp` data-parallel replicas,
// a trained parameter whose dim 0 divides by dp is cut into dp equal blocks
// along dim 0, block r belonging to replica r (its coordinate on axis 0 of
// `@autopar_grid`). Stage 1 shards its optimizer states, stage 2 also its
// gradient (reduce-scatter instead of all-reduce), stage 3 also the
// parameter itself. Other parameters (a dim 0 that does not divide, a
// scalar) stay replicated: every replica updates them whole, as in ZeRO 0.
//
// Blocks along dim 0 are boxes of the global tensor, so a checkpoint records
// each replica's block as one chunk (docs/training.md, "Checkpoints"), and
// PyTorch FSDP2 shards per parameter along dim 0 the same way.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TRANSFORMS_ZEROSHARDING_H
#define AUTOPAR_TRANSFORMS_ZEROSHARDING_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallVector.h"

namespace autopar {

/// True if ZeRO cuts a trained parameter of \p type over \p dp replicas:
/// dp > 1, rank at least 1 and dim 0 a multiple of dp.
bool isZeroSharded(mlir::RankedTensorType type, int64_t dp);

/// One replica's block of \p type: dim 0 divided by \p dp.
mlir::RankedTensorType zeroShardType(mlir::RankedTensorType type, int64_t dp);

/// `@autopar_grid`, made as a 1-D grid of \p dp replicas if \p module has
/// none; its axis 0 holds the data-parallel replicas. A grid whose axis 0
/// has another size (a tensor-parallel replica's, planned as 1 x tp) gets
/// axis 0 of size \p dp, its other axes kept.
mlir::FlatSymbolRefAttr getOrCreateReplicaGrid(mlir::ModuleOp module,
                                               int64_t dp);

/// Replica r's block (dim 0) of the sum over the replicas of each of
/// \p values (tensors ZeRO shards), with one `shard.reduce_scatter` per
/// element type: each value is viewed as [dp, n/dp] and the views are
/// concatenated along dim 1 into one bucket, so that row r holds every
/// value's block r.
llvm::SmallVector<mlir::Value> reduceScatterBlocks(mlir::OpBuilder &b,
                                                   mlir::Location loc,
                                                   mlir::FlatSymbolRefAttr grid,
                                                   int64_t dp,
                                                   mlir::ValueRange values);

/// The whole tensors whose blocks (dim 0) the replicas hold in \p blocks,
/// with one `shard.all_gather` per element type (the inverse of
/// reduceScatterBlocks's bucket layout).
llvm::SmallVector<mlir::Value> allGatherBlocks(mlir::OpBuilder &b,
                                               mlir::Location loc,
                                               mlir::FlatSymbolRefAttr grid,
                                               int64_t dp,
                                               mlir::ValueRange blocks);

/// ZeRO-3: \p param, an argument of \p f, becomes replica r's block (dim 0)
/// of it, with one `shard.all_gather` of the whole just before its first use
/// in the forward (up to \p forwardEnd, an op of \p f's body) and another
/// just before its first use in the backward (after it), so that between
/// them, and after, only the block is held (ZeRO's stage 3: Rajbhandari et
/// al., sec. 5.3). The backward's uses of views the forward made of it (a
/// transposed weight) read views made again from its gather. Without
/// \p forwardEnd, one gather before the first use.
void gatherZeroBlockAtUses(mlir::func::FuncOp f, mlir::BlockArgument param,
                           mlir::Operation *forwardEnd,
                           mlir::FlatSymbolRefAttr grid, int64_t dataParallel);

/// ZeRO-3 for a program that reads parameters without differentiating them
/// (a pipeline stage's forward or backward, an eval program): every
/// argument of \p f for which \p isBlock holds becomes replica r's block,
/// marked `autopar.zero_blocks`, gathered before its first use
/// (gatherZeroBlockAtUses without a forward end); \p f's type follows.
/// The grid is \p f's module's `@autopar_grid` (getOrCreateReplicaGrid).
void readZeroBlocks(mlir::func::FuncOp f, int64_t dataParallel,
                    llvm::function_ref<bool(mlir::BlockArgument)> isBlock);

} // namespace autopar

#endif // AUTOPAR_TRANSFORMS_ZEROSHARDING_H
