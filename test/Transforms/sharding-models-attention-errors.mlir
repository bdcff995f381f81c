// shard-partition of an attention annotated (by hand, not by
// sharding-propagation) with a split its model cannot run locally: an error
// naming the op, not a wrong program.
// RUN: autopar-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(func.func(shard-partition))'

shard.grid @grid(shape = 2)
func.func @keys_split(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %t = shard.sharding @grid split_axes = [[], [], [0]] : !shard.sharding
  %qs = shard.shard %q to %r : tensor<1x2x4x8xf32>
  %qu = shard.shard %qs to %r annotate_for_users : tensor<1x2x4x8xf32>
  %ks = shard.shard %k to %t : tensor<1x2x4x8xf32>
  %ku = shard.shard %ks to %t annotate_for_users : tensor<1x2x4x8xf32>
  %o0 = tensor.empty() : tensor<1x2x4x8xf32>
  %o0s = shard.shard %o0 to %r : tensor<1x2x4x8xf32>
  %o0u = shard.shard %o0s to %r annotate_for_users : tensor<1x2x4x8xf32>
  %l0 = tensor.empty() : tensor<1x2x4xf32>
  %l0s = shard.shard %l0 to %r : tensor<1x2x4xf32>
  %l0u = shard.shard %l0s to %r annotate_for_users : tensor<1x2x4xf32>
  // Splitting the keys is ring attention's (not built).
  // expected-error @+1 {{'autopar.attention' op cannot be partitioned: operand 1 is split along dim 2 (the keys), which attention needs whole (only the batch and the heads can be split)}}
  %o, %l = autopar.attention ins(%qu, %ku, %ku : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) outs(%o0u, %l0u : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) {scale = 1.0 : f64} -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  %os = shard.shard %o to %r : tensor<1x2x4x8xf32>
  return %os : tensor<1x2x4x8xf32>
}

// -----

shard.grid @grid(shape = 2)
func.func @mask_broadcast_split(%q: tensor<2x2x4x8xf32>, %m: tensor<2x1x4x4xf32>) -> tensor<2x2x4x8xf32> {
  %h = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %qs = shard.shard %q to %h : tensor<2x2x4x8xf32>
  %qu = shard.shard %qs to %h annotate_for_users : tensor<2x2x4x8xf32>
  %ms = shard.shard %m to %h : tensor<2x1x4x4xf32>
  %mu = shard.shard %ms to %h annotate_for_users : tensor<2x1x4x4xf32>
  %o0 = tensor.empty() : tensor<2x2x4x8xf32>
  %o0s = shard.shard %o0 to %h : tensor<2x2x4x8xf32>
  %o0u = shard.shard %o0s to %h annotate_for_users : tensor<2x2x4x8xf32>
  %l0 = tensor.empty() : tensor<2x2x4xf32>
  %l0s = shard.shard %l0 to %h : tensor<2x2x4xf32>
  %l0u = shard.shard %l0s to %h annotate_for_users : tensor<2x2x4xf32>
  // The mask's head dim is 1 (broadcast over the heads): it cannot split.
  // expected-error @+1 {{'autopar.attention' op cannot be partitioned: operand 3 is split along dim 1, a broadcast dim}}
  %o, %l = autopar.attention ins(%qu, %qu, %qu mask %mu : tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x2x4x8xf32>, tensor<2x1x4x4xf32>) outs(%o0u, %l0u : tensor<2x2x4x8xf32>, tensor<2x2x4xf32>) {scale = 1.0 : f64} -> tensor<2x2x4x8xf32>, tensor<2x2x4xf32>
  %os = shard.shard %o to %h : tensor<2x2x4x8xf32>
  return %os : tensor<2x2x4x8xf32>
}
