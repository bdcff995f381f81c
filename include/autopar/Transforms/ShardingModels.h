//===- ShardingModels.h - ShardingInterface for ops upstream lacks -*- C++ -*-//
//
// Upstream's `shard` dialect cannot partition a program across a reshape, a
// slice or a pad: `tensor.expand_shape`, `tensor.collapse_shape`,
// `tensor.extract_slice` and `tensor.pad` have no ShardingInterface
// (ARCHITECTURE.md), and its linalg model does not partition convolutions
// or pools (windowed maps). ONNX graphs are full of them (attention heads,
// Split, Concat, convolution padding, CNNs), so autopar registers external
// models: a sharding passes through a reshape when it splits the outermost
// dim of a reassociation group, through a slice, pad or concat when it
// splits a dim the op keeps whole, and through a convolution or pool when it
// splits a loop outside the window (channels). autopar.embedding comes with
// its own; the fused attention ops get theirs here (the batch and the heads
// split, so attention fused before partitioning partitions by heads), and so
// do the fused cross-entropy ops (the positions, or the classes as a
// vocabulary-parallel loss).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TRANSFORMS_SHARDINGMODELS_H
#define AUTOPAR_TRANSFORMS_SHARDINGMODELS_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace autopar {

/// Attaches autopar's ShardingInterface models (expand_shape, collapse_shape,
/// extract_slice, pad, concat; linalg ops whose maps have windows:
/// convolutions and pools; autopar.attention, autopar.attention_grad,
/// autopar.softmax_cross_entropy and its gradient) and
/// registers the autopar dialect. Call it before
/// upstream's `registerAllDialects`: the first model attached to an op
/// wins, and autopar's linalg model replaces upstream's (it is upstream's,
/// extended to windows); the other order is a fatal error.
void registerShardingModels(mlir::DialectRegistry &registry);

} // namespace autopar

#endif // AUTOPAR_TRANSFORMS_SHARDINGMODELS_H
