// autopar's ShardingInterface models for what upstream (release 22) does not
// partition: convolutions and pools (their input is read through windows;
// only channel and batch loops split), tensor.concat, and dense constants,
// each checked for the collectives its split needs after shard-partition.
// RUN: autopar-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition))' | FileCheck %s

// Output channels split (Megatron's column-parallel layer): each rank
// convolves the whole input with its filters; no collective.
// CHECK-LABEL: func.func @conv_output_channels
// CHECK-SAME: (%[[X:.*]]: tensor<1x4x6x6xf32>, %[[W:.*]]: tensor<4x4x3x3xf32>) -> tensor<1x4x4x4xf32>
// CHECK: %[[F:.*]] = linalg.fill {{.*}} -> tensor<1x4x4x4xf32>
// CHECK-NEXT: %[[C:.*]] = linalg.conv_2d_nchw_fchw ins(%[[X]], %[[W]] : tensor<1x4x6x6xf32>, tensor<4x4x3x3xf32>) outs(%[[F]] : tensor<1x4x4x4xf32>)
// CHECK-NOT: shard.all
// CHECK: return %[[C]]
shard.grid @grid(shape = 2)
func.func @conv_output_channels(%x: tensor<1x4x6x6xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x4x4xf32> {
  %f = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %o = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %ws = shard.shard %w to %f annotate_for_users : tensor<8x4x3x3xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x8x4x4xf32>
  %fill = linalg.fill ins(%z : f32) outs(%e : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %fs = shard.shard %fill to %o : tensor<1x8x4x4xf32>
  %fu = shard.shard %fs to %o annotate_for_users : tensor<1x8x4x4xf32>
  %c = linalg.conv_2d_nchw_fchw ins(%x, %ws : tensor<1x4x6x6xf32>, tensor<8x4x3x3xf32>) outs(%fu : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %cs = shard.shard %c to %o : tensor<1x8x4x4xf32>
  return %cs : tensor<1x8x4x4xf32>
}

// -----

// Input channels split (row-parallel): partial sums, then the ranks
// all-reduce. The init is zeros, the sum's neutral element, so every rank
// starts from it (an init that is not is the first rank's alone:
// sharding-models-split-reduction.mlir).
// CHECK-LABEL: func.func @conv_input_channels
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x6x6xf32>, %[[W:.*]]: tensor<8x2x3x3xf32>) -> tensor<1x8x4x4xf32>
// CHECK: %[[F:.*]] = linalg.fill {{.*}} -> tensor<1x8x4x4xf32>
// CHECK-NOT: scf.if
// CHECK: %[[C:.*]] = linalg.conv_2d_nchw_fchw ins(%[[X]], %[[W]] : tensor<1x2x6x6xf32>, tensor<8x2x3x3xf32>) outs(%[[F]] : tensor<1x8x4x4xf32>)
// CHECK-NEXT: %[[R:.*]] = shard.all_reduce %[[C]] on @grid grid_axes = [0]
// CHECK-NEXT: return %[[R]]
shard.grid @grid(shape = 2)
func.func @conv_input_channels(%x: tensor<1x4x6x6xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x4x4xf32> {
  %c1 = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %xs = shard.shard %x to %c1 annotate_for_users : tensor<1x4x6x6xf32>
  %ws = shard.shard %w to %c1 annotate_for_users : tensor<8x4x3x3xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x8x4x4xf32>
  %fill = linalg.fill ins(%z : f32) outs(%e : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %fs = shard.shard %fill to %r : tensor<1x8x4x4xf32>
  %fu = shard.shard %fs to %r annotate_for_users : tensor<1x8x4x4xf32>
  %c = linalg.conv_2d_nchw_fchw ins(%xs, %ws : tensor<1x4x6x6xf32>, tensor<8x4x3x3xf32>) outs(%fu : tensor<1x8x4x4xf32>) -> tensor<1x8x4x4xf32>
  %cs = shard.shard %c to %r : tensor<1x8x4x4xf32>
  return %cs : tensor<1x8x4x4xf32>
}

// -----

// A pool (the importer's windowed linalg.generic) split by channels: each
// rank pools its channels.
// CHECK-LABEL: func.func @max_pool_channels
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x6x6xf32>) -> tensor<1x2x3x3xf32>
// CHECK: %[[P:.*]] = linalg.generic {{.*}} ins(%[[X]], %{{.*}} : tensor<1x2x6x6xf32>, tensor<2x2xf32>) outs(%{{.*}} : tensor<1x2x3x3xf32>)
// CHECK: arith.maximumf
// CHECK-NOT: shard.all
// CHECK: return %[[P]]
shard.grid @grid(shape = 2)
func.func @max_pool_channels(%x: tensor<1x4x6x6xf32>) -> tensor<1x4x3x3xf32> {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s annotate_for_users : tensor<1x4x6x6xf32>
  %win = tensor.empty() : tensor<2x2xf32>
  %min = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<1x4x3x3xf32>
  %fill = linalg.fill ins(%min : f32) outs(%e : tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
  %fs = shard.shard %fill to %s : tensor<1x4x3x3xf32>
  %fu = shard.shard %fs to %s annotate_for_users : tensor<1x4x3x3xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(n, c, h, w, kh, kw) -> (n, c, h * 2 + kh, w * 2 + kw)>, affine_map<(n, c, h, w, kh, kw) -> (kh, kw)>, affine_map<(n, c, h, w, kh, kw) -> (n, c, h, w)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%xs, %win : tensor<1x4x6x6xf32>, tensor<2x2xf32>) outs(%fu : tensor<1x4x3x3xf32>) {
  ^bb0(%in: f32, %unused: f32, %acc: f32):
    %m = arith.maximumf %in, %acc : f32
    linalg.yield %m : f32
  } -> tensor<1x4x3x3xf32>
  %ps = shard.shard %p to %s : tensor<1x4x3x3xf32>
  return %ps : tensor<1x4x3x3xf32>
}

// -----

// A concat passes a split of another dim through.
// CHECK-LABEL: func.func @concat_channels
// CHECK-SAME: (%[[A:.*]]: tensor<1x3x4xf32>, %[[B:.*]]: tensor<1x5x4xf32>) -> tensor<1x8x4xf32>
// CHECK-NEXT: %[[C:.*]] = tensor.concat dim(1) %[[A]], %[[B]] : (tensor<1x3x4xf32>, tensor<1x5x4xf32>) -> tensor<1x8x4xf32>
// CHECK-NEXT: return %[[C]]
shard.grid @grid(shape = 2)
func.func @concat_channels(%a: tensor<2x3x4xf32>, %b: tensor<2x5x4xf32>) -> tensor<2x8x4xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %as = shard.shard %a to %s annotate_for_users : tensor<2x3x4xf32>
  %bs = shard.shard %b to %s annotate_for_users : tensor<2x5x4xf32>
  %c = tensor.concat dim(1) %as, %bs : (tensor<2x3x4xf32>, tensor<2x5x4xf32>) -> tensor<2x8x4xf32>
  %cs = shard.shard %c to %s : tensor<2x8x4xf32>
  return %cs : tensor<2x8x4xf32>
}

// -----

// The concatenated dim cannot stay split: it is gathered first.
// CHECK-LABEL: func.func @concat_dim_split
// CHECK-SAME: (%[[A:.*]]: tensor<2x2xf32>, %[[B:.*]]: tensor<2x4xf32>)
// CHECK: %[[G:.*]] = shard.all_gather %[[A]] on @grid grid_axes = [0] gather_axis = 1 : tensor<2x2xf32> -> tensor<2x4xf32>
// CHECK: tensor.concat dim(1) %{{.*}}, %[[B]] : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
shard.grid @grid(shape = 2)
func.func @concat_dim_split(%a: tensor<2x4xf32>, %b: tensor<2x4xf32>) -> tensor<2x8xf32> {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %as = shard.shard %a to %s : tensor<2x4xf32>
  %c = tensor.concat dim(1) %as, %b : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return %c : tensor<2x8xf32>
}

// -----

// A dense (non-splat) constant split like a weight: each rank slices its
// block locally (upstream fails on any non-splat constant).
// CHECK-LABEL: func.func @dense_constant
// CHECK: %[[CST:.*]] = arith.constant dense<{{.*}}> : tensor<4x2xf32>
// CHECK-NEXT: %[[S:.*]] = shard.all_slice %[[CST]] on @grid grid_axes = [0] slice_axis = 0 : tensor<4x2xf32> -> tensor<2x2xf32>
// CHECK: linalg.negf ins(%[[S]] : tensor<2x2xf32>)
shard.grid @grid(shape = 2)
func.func @dense_constant() -> tensor<2x2xf32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %c = arith.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>
  %cs = shard.shard %c to %s : tensor<4x2xf32>
  %cu = shard.shard %cs to %s annotate_for_users : tensor<4x2xf32>
  %e = tensor.empty() : tensor<4x2xf32>
  %es = shard.shard %e to %s : tensor<4x2xf32>
  %eu = shard.shard %es to %s annotate_for_users : tensor<4x2xf32>
  %n = linalg.negf ins(%cu : tensor<4x2xf32>) outs(%eu : tensor<4x2xf32>) -> tensor<4x2xf32>
  %ns = shard.shard %n to %s : tensor<4x2xf32>
  %r = tensor.extract_slice %ns[0, 0] [2, 2] [1, 1] : tensor<4x2xf32> to tensor<2x2xf32>
  return %r : tensor<2x2xf32>
}

// -----

// A depthwise convolution (grouped, one channel per group) split by groups:
// each rank convolves its channels with their filters; no collective.
// CHECK-LABEL: func.func @depthwise_groups
// CHECK-SAME: (%[[X:.*]]: tensor<1x2x1x6x6xf32>, %[[W:.*]]: tensor<2x1x1x3x3xf32>) -> tensor<1x2x1x4x4xf32>
// CHECK: %[[C:.*]] = linalg.conv_2d_ngchw_gfchw ins(%[[X]], %[[W]] : tensor<1x2x1x6x6xf32>, tensor<2x1x1x3x3xf32>)
// CHECK-NOT: shard.all
// CHECK: return %[[C]]
shard.grid @grid(shape = 2)
func.func @depthwise_groups(%x: tensor<1x4x1x6x6xf32>, %w: tensor<4x1x1x3x3xf32>) -> tensor<1x4x1x4x4xf32> {
  %g = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %f = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %xs = shard.shard %x to %g annotate_for_users : tensor<1x4x1x6x6xf32>
  %ws = shard.shard %w to %f annotate_for_users : tensor<4x1x1x3x3xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x4x1x4x4xf32>
  %fill = linalg.fill ins(%z : f32) outs(%e : tensor<1x4x1x4x4xf32>) -> tensor<1x4x1x4x4xf32>
  %fs = shard.shard %fill to %g : tensor<1x4x1x4x4xf32>
  %fu = shard.shard %fs to %g annotate_for_users : tensor<1x4x1x4x4xf32>
  %c = linalg.conv_2d_ngchw_gfchw ins(%xs, %ws : tensor<1x4x1x6x6xf32>, tensor<4x1x1x3x3xf32>) outs(%fu : tensor<1x4x1x4x4xf32>) -> tensor<1x4x1x4x4xf32>
  %cs = shard.shard %c to %g : tensor<1x4x1x4x4xf32>
  return %cs : tensor<1x4x1x4x4xf32>
}

// -----

// A convolution's input adjoint reads its filter flipped (`2 - kh`: a window
// expression with a constant term, which upstream's propagation refuses).
// The filter's split channel dim propagates through the permutation; the
// flipped dims stay whole.
// CHECK-LABEL: func.func @flipped_filter
// CHECK-SAME: (%[[W:.*]]: tensor<8x2x3x3xf32>) -> tensor<2x8x3x3xf32>
// CHECK: %[[F:.*]] = linalg.generic {{.*}} ins(%[[W]] : tensor<8x2x3x3xf32>) outs(%{{.*}} : tensor<2x8x3x3xf32>)
// CHECK-NOT: shard.all
// CHECK: return %[[F]]
shard.grid @grid(shape = 2)
func.func @flipped_filter(%w: tensor<8x4x3x3xf32>) -> tensor<4x8x3x3xf32> {
  %c1 = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %f0 = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %ws = shard.shard %w to %c1 annotate_for_users : tensor<8x4x3x3xf32>
  %e = tensor.empty() : tensor<4x8x3x3xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1, d0, -d2 + 2, -d3 + 2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ws : tensor<8x4x3x3xf32>) outs(%e : tensor<4x8x3x3xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<4x8x3x3xf32>
  %ts = shard.shard %t to %f0 : tensor<4x8x3x3xf32>
  return %ts : tensor<4x8x3x3xf32>
}

// -----

// A max pool's input adjoint (autodiff's windowed generic: the spread
// gradient and output read at `h - kh + 1`) split by channels: each rank
// scatters its channels' gradients; no collective.
// CHECK-LABEL: func.func @max_pool_adjoint_channels
// CHECK-SAME: (%[[DY:.*]]: tensor<1x2x5x5xf32>, %[[Y:.*]]: tensor<1x2x5x5xf32>, %[[X:.*]]: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
// CHECK: %[[G:.*]] = linalg.generic {{.*}} ins(%[[DY]], %[[Y]], %[[X]], %{{.*}} : tensor<1x2x5x5xf32>, tensor<1x2x5x5xf32>, tensor<1x2x4x4xf32>, tensor<2x2xf32>) outs(%{{.*}} : tensor<1x2x4x4xf32>)
// CHECK: arith.cmpf oeq
// CHECK-NOT: shard.all
// CHECK: return %[[G]]
shard.grid @grid(shape = 2)
func.func @max_pool_adjoint_channels(%dy: tensor<1x4x5x5xf32>, %y: tensor<1x4x5x5xf32>, %x: tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32> {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %dys = shard.shard %dy to %s annotate_for_users : tensor<1x4x5x5xf32>
  %ys = shard.shard %y to %s annotate_for_users : tensor<1x4x5x5xf32>
  %xs = shard.shard %x to %s annotate_for_users : tensor<1x4x4x4xf32>
  %win = tensor.empty() : tensor<2x2xf32>
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x4x4x4xf32>
  %fill = linalg.fill ins(%z : f32) outs(%e : tensor<1x4x4x4xf32>) -> tensor<1x4x4x4xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(n, c, h, w, kh, kw) -> (n, c, h - kh + 1, w - kw + 1)>, affine_map<(n, c, h, w, kh, kw) -> (n, c, h - kh + 1, w - kw + 1)>, affine_map<(n, c, h, w, kh, kw) -> (n, c, h, w)>, affine_map<(n, c, h, w, kh, kw) -> (kh, kw)>, affine_map<(n, c, h, w, kh, kw) -> (n, c, h, w)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]} ins(%dys, %ys, %xs, %win : tensor<1x4x5x5xf32>, tensor<1x4x5x5xf32>, tensor<1x4x4x4xf32>, tensor<2x2xf32>) outs(%fill : tensor<1x4x4x4xf32>) {
  ^bb0(%d: f32, %out: f32, %in: f32, %unused: f32, %acc: f32):
    %hit = arith.cmpf oeq, %in, %out : f32
    %v = arith.select %hit, %d, %z : f32
    %sum = arith.addf %acc, %v : f32
    linalg.yield %sum : f32
  } -> tensor<1x4x4x4xf32>
  %gs = shard.shard %g to %s : tensor<1x4x4x4xf32>
  return %gs : tensor<1x4x4x4xf32>
}
