// shard-partition of a fused cross-entropy annotated (by hand, not by
// sharding-propagation) with splits its model cannot run locally: an error
// naming the op and the operand, not a wrong program.
// RUN: autopar-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(func.func(shard-partition))'

// The labels split over the grid axis that splits the classes: a rank's
// block of classes needs every position's label.
shard.grid @grid(shape = 2)
func.func @labels_split_with_the_classes(%x: tensor<4x16xf32>, %y: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xf32>) {
  %c = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %p = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %c : tensor<4x16xf32>
  %xu = shard.shard %xs to %c annotate_for_users : tensor<4x16xf32>
  %ys = shard.shard %y to %p : tensor<4xi64>
  %yu = shard.shard %ys to %p annotate_for_users : tensor<4xi64>
  %n0 = tensor.empty() : tensor<4xf32>
  %n0s = shard.shard %n0 to %r : tensor<4xf32>
  %n0u = shard.shard %n0s to %r annotate_for_users : tensor<4xf32>
  // expected-error @+1 {{'autopar.softmax_cross_entropy' op cannot be partitioned: operand 1 is split over grid axes the classes are split over}}
  %n, %l = autopar.softmax_cross_entropy ins(%xu, %yu : tensor<4x16xf32>, tensor<4xi64>) outs(%n0u, %n0u : tensor<4xf32>, tensor<4xf32>) {ignore_index = -100 : i64} -> tensor<4xf32>, tensor<4xf32>
  %ns = shard.shard %n to %r : tensor<4xf32>
  %ls = shard.shard %l to %r : tensor<4xf32>
  return %ns, %ls : tensor<4xf32>, tensor<4xf32>
}

// -----

// The gradient's init whole while the logits' classes are split: the block
// each rank writes is not the block it reads.
shard.grid @grid(shape = 2)
func.func @grad_init_whole(%x: tensor<4x16xf32>, %y: tensor<4xi64>, %lse: tensor<4xf32>, %dn: tensor<4xf32>) -> tensor<4x16xf32> {
  %c = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %c : tensor<4x16xf32>
  %xu = shard.shard %xs to %c annotate_for_users : tensor<4x16xf32>
  %ys = shard.shard %y to %r : tensor<4xi64>
  %yu = shard.shard %ys to %r annotate_for_users : tensor<4xi64>
  %lses = shard.shard %lse to %r : tensor<4xf32>
  %lseu = shard.shard %lses to %r annotate_for_users : tensor<4xf32>
  %dns = shard.shard %dn to %r : tensor<4xf32>
  %dnu = shard.shard %dns to %r annotate_for_users : tensor<4xf32>
  %d0 = tensor.empty() : tensor<4x16xf32>
  %d0s = shard.shard %d0 to %r : tensor<4x16xf32>
  %d0u = shard.shard %d0s to %r annotate_for_users : tensor<4x16xf32>
  // expected-error @+1 {{'autopar.softmax_cross_entropy_grad' op cannot be partitioned: operand 4 splits the classes differently from the logits}}
  %d = autopar.softmax_cross_entropy_grad ins(%xu, %yu saved(%lseu, %dnu : tensor<4xf32>, tensor<4xf32>) : tensor<4x16xf32>, tensor<4xi64>) outs(%d0u : tensor<4x16xf32>) {ignore_index = -100 : i64} -> tensor<4x16xf32>
  %ds = shard.shard %d to %r : tensor<4x16xf32>
  return %ds : tensor<4x16xf32>
}
