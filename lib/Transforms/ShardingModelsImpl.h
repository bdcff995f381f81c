//===- ShardingModelsImpl.h - Internals of autopar's sharding models -*- C++
//-*-//
//
// Each file of sharding models attaches its own; ShardingModels.cpp registers
// them all with the dialects of their ops.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_LIB_TRANSFORMS_SHARDINGMODELSIMPL_H
#define AUTOPAR_LIB_TRANSFORMS_SHARDINGMODELSIMPL_H

#include "autopar/Planner/ReshapeSplits.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "llvm/ADT/SmallBitVector.h"

namespace mlir {
class InFlightDiagnostic;
class MLIRContext;
class Operation;
class SymbolTableCollection;
namespace shard {
class Sharding;
} // namespace shard
} // namespace mlir

namespace autopar::detail {

using autopar::splittableDimOfGroup;

/// tensor.extract_slice, tensor.pad and tensor.concat
/// (SliceShardingModels.cpp).
void attachSliceShardingModels(mlir::MLIRContext *ctx);

/// shard.all_reduce over the data-parallel replicas, partitioned over tp:
/// the identity on every dim (CollectiveShardingModels.cpp).
void attachCollectiveShardingModels(mlir::MLIRContext *ctx);

/// Every op of `dialect` without a ShardingInterface: whole tensors only
/// (ScalarShardingModels.cpp). For tensor.extract, tensor.from_elements
/// and the scalar arithmetic of arith and math; attach after the dialect's
/// other models.
void attachScalarShardingModels(mlir::MLIRContext *ctx,
                                llvm::StringRef dialect);

/// arith.constant, dense ones split too (ConstantShardingModel.cpp). Must
/// run before upstream's arith models.
void attachConstantShardingModel(mlir::MLIRContext *ctx);

/// Stops with a fatal error if op `name` already has a ShardingInterface:
/// the first model attached wins, so autopar's replacements of upstream's
/// models must be attached first (an ordering bug, not a user error).
void requireFirstModel(llvm::StringRef name, mlir::MLIRContext *ctx);

/// The loops some operand of `op` reads through a compound expression (a
/// convolution's or pool's window: `oh * stride + kh`): splitting one would
/// need the neighbours' halo, so they stay whole (LinalgShardingModels.cpp).
llvm::SmallBitVector windowLoops(mlir::linalg::LinalgOp op);

/// The loops whose position `op`'s body reads (`linalg.index`): Dropout's
/// counter-based mask hashes the global element index, an iota or a mask
/// built from indices depends on it. Partitioned, the body would read a
/// rank's local positions, so they stay whole (LinalgShardingModels.cpp).
llvm::SmallBitVector indexedLoops(mlir::linalg::LinalgOp op);

/// linalg.generic and the named convolutions and pools, windows included
/// (LinalgShardingModels.cpp). Must run before upstream's linalg models.
void attachLinalgShardingModels(mlir::MLIRContext *ctx);

/// autopar.attention and autopar.attention_grad: the batch and the heads
/// split, the rest whole (AttentionShardingModels.cpp).
void attachAttentionShardingModels(mlir::MLIRContext *ctx);

/// autopar.softmax_cross_entropy and its gradient: the positions and the
/// classes split (the classes as Megatron's vocabulary-parallel
/// cross-entropy: CrossEntropyShardingModels.cpp).
void attachCrossEntropyShardingModels(mlir::MLIRContext *ctx);

/// Reports through `error` (a diagnostic to complete with the reason) and
/// fails unless the shardings of attention op `op`'s operands and results
/// split only its batch and heads, every tensor alike and evenly (a
/// grouped-query attention's key/value heads too); null shardings are
/// ignored. shard-partition and autopar-check-partitionable both check this.
llvm::LogicalResult
checkAttentionShardings(mlir::Operation *op,
                        llvm::ArrayRef<mlir::shard::Sharding> operandShardings,
                        llvm::ArrayRef<mlir::shard::Sharding> resultShardings,
                        mlir::SymbolTableCollection &symbols,
                        llvm::function_ref<mlir::InFlightDiagnostic()> error);

/// The constant `init` holds everywhere (a linalg.fill of a constant or a
/// splat constant, possibly sliced); null if it is not one
/// (LinalgShardingModels.cpp).
mlir::Attribute fillConstant(mlir::Value init);

/// Whether two fill constants are the same value; float zeros of either
/// sign count as one (the neutral element of addition is -0.0; inits are
/// filled with +0.0, and a sum does not tell them apart). False if either
/// is null.
bool sameFillConstant(mlir::Attribute a, mlir::Attribute b);

} // namespace autopar::detail

#endif // AUTOPAR_LIB_TRANSFORMS_SHARDINGMODELSIMPL_H
