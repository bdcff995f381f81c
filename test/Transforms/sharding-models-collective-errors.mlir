// shard.all_reduce's model partitions a sum over grid axes its tensor is not
// split over; a tensor split over a summed axis would sum different blocks.
// The scalar code's models (tensor.extract and the like) refuse a split tensor.
// RUN: autopar-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(shard-partition))' -verify-diagnostics

shard.grid @grid2d(shape = 2x2)
func.func @sum_over_split_axis(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %s = shard.sharding @grid2d split_axes = [[], [1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8x4xf32>
  %xu = shard.shard %xs to %s annotate_for_users : tensor<8x4xf32>
  // expected-error @+1 {{'shard.all_reduce' op cannot be partitioned: a tensor it sums over grid axis 1 is also split over that axis}}
  %r = shard.all_reduce %xu on @grid2d grid_axes = [1] : tensor<8x4xf32> -> tensor<8x4xf32>
  %rs = shard.shard %r to %s : tensor<8x4xf32>
  return %rs : tensor<8x4xf32>
}

// -----

// The scalar code's element reads take tensors whole: reading one element of
// a split tensor would read the rank's own block.
shard.grid @grid(shape = 2)
func.func @extract_of_split(%x: tensor<8xf32>) -> f32 {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8xf32>
  %xu = shard.shard %xs to %s annotate_for_users : tensor<8xf32>
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'tensor.extract' op cannot be partitioned: it reads or writes single elements, so its tensors must be whole on every rank}}
  %e = tensor.extract %xu[%c0] : tensor<8xf32>
  return %e : f32
}
