// autopar-check-partitionable: what shard-partition assumes (a release build
// of MLIR would crash instead) is an error naming the op and its ONNX node: an
// unannotated operand or argument, an unused result, a split operand of an op
// without sharding rule, a convolution split along a window dim, an attention
// split along other dims than its batch and heads.
// RUN: autopar-opt %s --split-input-file --verify-diagnostics --pass-pipeline='builtin.module(func.func(autopar-check-partitionable))'

shard.grid @grid(shape = 2)
func.func @operand(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8xf32>
  %ys = shard.shard %y to %s : tensor<8xf32>
  %xu = shard.shard %xs to %s annotate_for_users : tensor<8xf32>
  %e = tensor.empty() : tensor<8xf32>
  %es = shard.shard %e to %s : tensor<8xf32>
  %eu = shard.shard %es to %s annotate_for_users : tensor<8xf32>
  // The importer names each op after its ONNX node (no file location).
  // expected-error @unknown {{'linalg.add' op cannot be partitioned (ONNX node /Add): operand 1 has no sharding annotation}}
  %z = linalg.add ins(%xu, %ys : tensor<8xf32>, tensor<8xf32>) outs(%eu : tensor<8xf32>) -> tensor<8xf32> loc("/Add")
  %zs = shard.shard %z to %s : tensor<8xf32>
  return %zs : tensor<8xf32>
}

// -----

shard.grid @grid(shape = 2)
// expected-error @+1 {{'func.func' op cannot be partitioned: argument 0 must be read through exactly one sharding annotation}}
func.func @argument(%t: tensor<8x4xf32>, %i: tensor<2xi64>) -> tensor<2x4xf32> {
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %is = shard.shard %i to %r : tensor<2xi64>
  %iu = shard.shard %is to %r annotate_for_users : tensor<2xi64>
  %e = tensor.empty() : tensor<2x4xf32>
  %es = shard.shard %e to %r : tensor<2x4xf32>
  %eu = shard.shard %es to %r annotate_for_users : tensor<2x4xf32>
  // A table read inside a body: no sharding reaches it.
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%iu : tensor<2xi64>) outs(%eu : tensor<2x4xf32>) {
  ^bb0(%in: i64, %out: f32):
    %0 = arith.index_cast %in : i64 to index
    %1 = linalg.index 1 : index
    %x = tensor.extract %t[%0, %1] : tensor<8x4xf32>
    linalg.yield %x : f32
  } -> tensor<2x4xf32>
  %gs = shard.shard %g to %r : tensor<2x4xf32>
  return %gs : tensor<2x4xf32>
}

// -----

shard.grid @grid(shape = 2)
func.func @unused(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8xf32>
  // expected-error @+1 {{'tensor.empty' op cannot be partitioned: result 0 is unused}}
  %e = tensor.empty() : tensor<4xf32>
  return %xs : tensor<8xf32>
}

// -----

shard.grid @grid(shape = 2)
func.func @no_rule(%x: tensor<8xf32>) -> tensor<8xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8xf32>
  %xu = shard.shard %xs to %s annotate_for_users : tensor<8xf32>
  // expected-error @+1 {{'arith.negf' op cannot be partitioned: it has no sharding rule, and operand 0 is split}}
  %y = arith.negf %xu : tensor<8xf32>
  %ys = shard.shard %y to %s : tensor<8xf32>
  return %ys : tensor<8xf32>
}

// -----

shard.grid @grid(shape = 2)
func.func @convolution_window(%x: tensor<1x4x6x6xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x4x4xf32> {
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %h = shard.sharding @grid split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %r : tensor<1x4x6x6xf32>
  %ws = shard.shard %w to %r : tensor<8x4x3x3xf32>
  %xu = shard.shard %xs to %r annotate_for_users : tensor<1x4x6x6xf32>
  %wu = shard.shard %ws to %r annotate_for_users : tensor<8x4x3x3xf32>
  %e = tensor.empty() : tensor<1x8x4x4xf32>
  %es = shard.shard %e to %h : tensor<1x8x4x4xf32>
  %eu = shard.shard %es to %h annotate_for_users : tensor<1x8x4x4xf32>
  // Output rows would need the neighbours' input rows (a halo).
  // expected-error @unknown {{'linalg.conv_2d_nchw_fchw' op cannot be partitioned (ONNX node /conv/Conv): operand 2 is split along dim 2, which the op reads through a window (only channel and batch dims of a convolution or pool can be split)}}
  %c = linalg.conv_2d_nchw_fchw ins(%xu, %wu : tensor<1x4x6x6xf32>, tensor<8x4x3x3xf32>) outs(%eu : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32> loc("/conv/Conv")
  %cs = shard.shard %c to %h : tensor<1x8x4x4xf32>
  return %cs : tensor<1x8x4x4xf32>
}

// -----

shard.grid @grid(shape = 2)
func.func @convolution_channels(%x: tensor<1x4x6x6xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x4x4xf32> {
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %f = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %o = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %r : tensor<1x4x6x6xf32>
  %ws = shard.shard %w to %f : tensor<8x4x3x3xf32>
  %xu = shard.shard %xs to %r annotate_for_users : tensor<1x4x6x6xf32>
  %wu = shard.shard %ws to %f annotate_for_users : tensor<8x4x3x3xf32>
  %e = tensor.empty() : tensor<1x8x4x4xf32>
  %es = shard.shard %e to %o : tensor<1x8x4x4xf32>
  %eu = shard.shard %es to %o annotate_for_users : tensor<1x8x4x4xf32>
  // Output channels split: partitionable (no diagnostic).
  %c = linalg.conv_2d_nchw_fchw ins(%xu, %wu : tensor<1x4x6x6xf32>, tensor<8x4x3x3xf32>) outs(%eu : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %cs = shard.shard %c to %o : tensor<1x8x4x4xf32>
  return %cs : tensor<1x8x4x4xf32>
}

// -----

// Attention splits only its batch and heads: a split of the queries would
// need the other ranks' keys.
shard.grid @grid(shape = 2)
func.func @attention_queries(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %s = shard.sharding @grid split_axes = [[], [], [0]] : !shard.sharding
  %qs = shard.shard %q to %s : tensor<1x2x4x8xf32>
  %qu = shard.shard %qs to %s annotate_for_users : tensor<1x2x4x8xf32>
  %ks = shard.shard %k to %r : tensor<1x2x4x8xf32>
  %ku = shard.shard %ks to %r annotate_for_users : tensor<1x2x4x8xf32>
  %o0 = tensor.empty() : tensor<1x2x4x8xf32>
  %o0s = shard.shard %o0 to %r : tensor<1x2x4x8xf32>
  %o0u = shard.shard %o0s to %r annotate_for_users : tensor<1x2x4x8xf32>
  %l0 = tensor.empty() : tensor<1x2x4xf32>
  %l0s = shard.shard %l0 to %r : tensor<1x2x4xf32>
  %l0u = shard.shard %l0s to %r annotate_for_users : tensor<1x2x4xf32>
  // expected-error @unknown {{'autopar.attention' op cannot be partitioned (ONNX node /attn): operand 0 is split along dim 2 (the queries), which attention needs whole (only the batch and the heads can be split)}}
  %o, %l = autopar.attention ins(%qu, %ku, %ku : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) outs(%o0u, %l0u : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) {scale = 1.0 : f64} -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32> loc("/attn")
  %os = shard.shard %o to %r : tensor<1x2x4x8xf32>
  return %os : tensor<1x2x4x8xf32>
}

// -----

// 6 query heads over 3 key/value heads: split in two, a rank's query heads
// would read a key/value head of the other rank.
shard.grid @grid(shape = 2)
func.func @attention_gqa_indivisible(%q: tensor<1x6x4x8xf32>, %k: tensor<1x3x4x8xf32>) -> tensor<1x6x4x8xf32> {
  %h = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %qs = shard.shard %q to %h : tensor<1x6x4x8xf32>
  %qu = shard.shard %qs to %h annotate_for_users : tensor<1x6x4x8xf32>
  %ks = shard.shard %k to %h : tensor<1x3x4x8xf32>
  %ku = shard.shard %ks to %h annotate_for_users : tensor<1x3x4x8xf32>
  %o0 = tensor.empty() : tensor<1x6x4x8xf32>
  %o0s = shard.shard %o0 to %h : tensor<1x6x4x8xf32>
  %o0u = shard.shard %o0s to %h annotate_for_users : tensor<1x6x4x8xf32>
  %l0 = tensor.empty() : tensor<1x6x4xf32>
  %l0s = shard.shard %l0 to %h : tensor<1x6x4xf32>
  %l0u = shard.shard %l0s to %h annotate_for_users : tensor<1x6x4xf32>
  // expected-error @+1 {{'autopar.attention' op cannot be partitioned: the heads loop is split into 2 blocks, which some operand or result does not divide into evenly (a grouped-query attention's key/value heads must divide by the split too)}}
  %o, %l = autopar.attention ins(%qu, %ku, %ku : tensor<1x6x4x8xf32>, tensor<1x3x4x8xf32>, tensor<1x3x4x8xf32>) outs(%o0u, %l0u : tensor<1x6x4x8xf32>, tensor<1x6x4xf32>) {scale = 1.0 : f64} -> tensor<1x6x4x8xf32>, tensor<1x6x4xf32>
  %os = shard.shard %o to %h : tensor<1x6x4x8xf32>
  return %os : tensor<1x6x4x8xf32>
}

// -----

// The query's heads split, the key's whole.
shard.grid @grid(shape = 2)
func.func @attention_heads_differ(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %h = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %qs = shard.shard %q to %h : tensor<1x2x4x8xf32>
  %qu = shard.shard %qs to %h annotate_for_users : tensor<1x2x4x8xf32>
  %ks = shard.shard %k to %r : tensor<1x2x4x8xf32>
  %ku = shard.shard %ks to %r annotate_for_users : tensor<1x2x4x8xf32>
  %o0 = tensor.empty() : tensor<1x2x4x8xf32>
  %o0s = shard.shard %o0 to %h : tensor<1x2x4x8xf32>
  %o0u = shard.shard %o0s to %h annotate_for_users : tensor<1x2x4x8xf32>
  %l0 = tensor.empty() : tensor<1x2x4xf32>
  %l0s = shard.shard %l0 to %h : tensor<1x2x4xf32>
  %l0u = shard.shard %l0s to %h annotate_for_users : tensor<1x2x4xf32>
  // expected-error @+1 {{'autopar.attention' op cannot be partitioned: its operands and results split the heads differently}}
  %o, %l = autopar.attention ins(%qu, %ku, %ku : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) outs(%o0u, %l0u : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) {scale = 1.0 : f64} -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  %os = shard.shard %o to %h : tensor<1x2x4x8xf32>
  return %os : tensor<1x2x4x8xf32>
}

// -----

// Heads split alike everywhere: partitionable (no diagnostic), the unused
// log-sum-exp of inference included (it takes its destination's block).
shard.grid @grid(shape = 2)
func.func @attention_heads(%q: tensor<1x4x4x8xf32>, %k: tensor<1x2x4x8xf32>) -> tensor<1x4x4x8xf32> {
  %h = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %qs = shard.shard %q to %h : tensor<1x4x4x8xf32>
  %qu = shard.shard %qs to %h annotate_for_users : tensor<1x4x4x8xf32>
  %ks = shard.shard %k to %h : tensor<1x2x4x8xf32>
  %ku = shard.shard %ks to %h annotate_for_users : tensor<1x2x4x8xf32>
  %o0 = tensor.empty() : tensor<1x4x4x8xf32>
  %o0s = shard.shard %o0 to %h : tensor<1x4x4x8xf32>
  %o0u = shard.shard %o0s to %h annotate_for_users : tensor<1x4x4x8xf32>
  %l0 = tensor.empty() : tensor<1x4x4xf32>
  %l0s = shard.shard %l0 to %h : tensor<1x4x4xf32>
  %l0u = shard.shard %l0s to %h annotate_for_users : tensor<1x4x4xf32>
  %o, %l = autopar.attention ins(%qu, %ku, %ku : tensor<1x4x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) outs(%o0u, %l0u : tensor<1x4x4x8xf32>, tensor<1x4x4xf32>) {scale = 1.0 : f64} -> tensor<1x4x4x8xf32>, tensor<1x4x4xf32>
  %os = shard.shard %o to %h : tensor<1x4x4x8xf32>
  return %os : tensor<1x4x4x8xf32>
}

// -----

// tensor.extract reads one element: its tensor must be whole (its model,
// for a training step's scalar code, takes tensors whole only).
shard.grid @grid(shape = 2)
func.func @extract_split(%x: tensor<8xf32>) -> f32 {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8xf32>
  %xu = shard.shard %xs to %s annotate_for_users : tensor<8xf32>
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{'tensor.extract' op cannot be partitioned: it has no sharding rule, and operand 0 is split}}
  %e = tensor.extract %xu[%c0] : tensor<8xf32>
  return %e : f32
}
