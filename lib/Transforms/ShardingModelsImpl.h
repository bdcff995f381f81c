//===- ShardingModelsImpl.h - Internals of autopar's sharding models -*- C++
//-*-//
//
// Each file of sharding models attaches its own; ShardingModels.cpp registers
// them all with the tensor dialect.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_LIB_TRANSFORMS_SHARDINGMODELSIMPL_H
#define AUTOPAR_LIB_TRANSFORMS_SHARDINGMODELSIMPL_H

namespace mlir {
class MLIRContext;
} // namespace mlir

namespace autopar::detail {

/// tensor.extract_slice and tensor.pad (SliceShardingModels.cpp).
void attachSliceShardingModels(mlir::MLIRContext *ctx);

} // namespace autopar::detail

#endif // AUTOPAR_LIB_TRANSFORMS_SHARDINGMODELSIMPL_H
