//===- ShardingModels.h - ShardingInterface for ops upstream lacks -*- C++ -*-//
//
// Upstream's `shard` dialect cannot partition a program across a reshape, a
// slice or a pad: `tensor.expand_shape`, `tensor.collapse_shape`,
// `tensor.extract_slice` and `tensor.pad` have no ShardingInterface
// (ARCHITECTURE.md). ONNX graphs are full of them (attention heads, Split,
// convolution padding), so autopar registers external models: a sharding
// passes through a reshape when it splits the outermost dim of a
// reassociation group, and through a slice or pad when it splits a dim the
// op keeps whole. autopar's own ops (autopar.embedding) come with theirs.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TRANSFORMS_SHARDINGMODELS_H
#define AUTOPAR_TRANSFORMS_SHARDINGMODELS_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace autopar {

/// Attaches autopar's ShardingInterface models (expand_shape, collapse_shape,
/// extract_slice, pad) and registers the autopar dialect.
void registerShardingModels(mlir::DialectRegistry &registry);

} // namespace autopar

#endif // AUTOPAR_TRANSFORMS_SHARDINGMODELS_H
