//===- ShardingModels.h - ShardingInterface for ops upstream lacks -*- C++ -*-//
//
// Upstream's `shard` dialect cannot partition a program across a reshape:
// `tensor.expand_shape` and `tensor.collapse_shape` have no ShardingInterface
// (ARCHITECTURE.md). ONNX graphs are full of them (attention heads), so
// autopar registers external models: a sharding passes through a reshape
// when it splits the outermost dim of a reassociation group.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TRANSFORMS_SHARDINGMODELS_H
#define AUTOPAR_TRANSFORMS_SHARDINGMODELS_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace autopar {

/// Attaches autopar's ShardingInterface models (expand_shape, collapse_shape).
void registerShardingModels(mlir::DialectRegistry &registry);

} // namespace autopar

#endif // AUTOPAR_TRANSFORMS_SHARDINGMODELS_H
