// RUN: autopar-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition))' | FileCheck %s

// A split of the outermost dim of a reassociation group passes through
// expand_shape and collapse_shape (attention's [B, S, H*D] <-> [B, S, H, D]
// with the heads split), so partitioning needs no collective around them.
// CHECK-LABEL: func.func @heads
// CHECK-SAME: (%[[X:.*]]: tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
// CHECK: %[[E:.*]] = tensor.expand_shape %[[X]] {{\[\[}}0], [1], [2, 3]] output_shape [2, 8, 2, 16] : tensor<2x8x32xf32> into tensor<2x8x2x16xf32>
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[E]] {{\[\[}}0], [1], [2, 3]] : tensor<2x8x2x16xf32> into tensor<2x8x32xf32>
// CHECK-NOT: shard.all
// CHECK: return %[[C]]
shard.grid @grid(shape = 2)
func.func @heads(%x: tensor<2x8x64xf32>) -> tensor<2x8x64xf32> {
  %s = shard.sharding @grid split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %s annotate_for_users : tensor<2x8x64xf32>
  %e = tensor.expand_shape %xs [[0], [1], [2, 3]] output_shape [2, 8, 4, 16] : tensor<2x8x64xf32> into tensor<2x8x4x16xf32>
  %c = tensor.collapse_shape %e [[0], [1], [2, 3]] : tensor<2x8x4x16xf32> into tensor<2x8x64xf32>
  %r = shard.shard %c to %s : tensor<2x8x64xf32>
  return %r : tensor<2x8x64xf32>
}

// -----

// Splitting an inner dim of a group would interleave the blocks: the reshape
// runs replicated and the split tensor is gathered first.
// CHECK-LABEL: func.func @inner_dim
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[G:.*]] = shard.all_gather %[[X]] on @grid2 grid_axes = [0] gather_axis = 1 : tensor<4x8xf32> -> tensor<4x16xf32>
// CHECK: tensor.collapse_shape {{.*}} : tensor<4x16xf32> into tensor<64xf32>
shard.grid @grid2(shape = 2)
func.func @inner_dim(%x: tensor<4x16xf32>) -> tensor<64xf32> {
  %s = shard.sharding @grid2 split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<4x16xf32>
  %c = tensor.collapse_shape %xs [[0, 1]] : tensor<4x16xf32> into tensor<64xf32>
  return %c : tensor<64xf32>
}
