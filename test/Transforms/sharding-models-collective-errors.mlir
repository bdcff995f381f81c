// shard.all_reduce's model partitions a sum over grid axes its tensor is not
// split over; a tensor split over a summed axis would sum different blocks.
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(shard-partition))' -verify-diagnostics

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
