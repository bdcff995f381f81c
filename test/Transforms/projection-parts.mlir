// autopar-expose-projection-parts: a fused QKV projection (matmul, bias, three
// slices) gets a part dim, its weight and bias viewed as [K, 3, N] and [3, N];
// a shared weight is left alone. After partitioning,
// autopar-merge-projection-parts makes the part-wise contraction a matmul.
// RUN: autopar-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(autopar-expose-projection-parts))' | FileCheck %s
// RUN: autopar-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition,autopar-merge-projection-parts))' | FileCheck %s --check-prefix=MERGE

// GPT's c_attn: one matmul computes Q, K and V, Split cuts its columns. The
// parts get a dim of their own: the weight [16, 48] and bias [48] are viewed
// as [16, 3, 16] and [3, 16], and each slice takes one index of the part dim.
// CHECK-LABEL: func.func @qkv
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32> {{.*}}, %[[W:.*]]: tensor<16x3x16xf32> {autopar.parameter = "c_attn.weight"}, %[[B:.*]]: tensor<3x16xf32> {autopar.parameter = "c_attn.bias"})
// CHECK: %[[F:.*]] = linalg.fill {{.*}} -> tensor<8x3x16xf32>
// CHECK: %[[C:.*]] = linalg.generic {indexing_maps = [#[[MA:.*]], #[[MW:.*]], #[[MC:.*]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%[[X]], %[[W]] : tensor<8x16xf32>, tensor<16x3x16xf32>) outs(%[[F]] : tensor<8x3x16xf32>) attrs = {autopar.projection_parts}
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[R:.*]] = tensor.expand_shape %[[C]] {{\[\[}}0, 1], [2], [3]] output_shape [2, 4, 3, 16]
// CHECK: %[[A:.*]] = linalg.generic {{.*}} ins(%[[B]], %[[R]] : tensor<3x16xf32>, tensor<2x4x3x16xf32>)
// CHECK: %[[Q:.*]] = tensor.extract_slice %[[A]][0, 0, 0, 0] [2, 4, 1, 16] [1, 1, 1, 1] : tensor<2x4x3x16xf32> to tensor<2x4x16xf32>
// CHECK: %[[K:.*]] = tensor.extract_slice %[[A]][0, 0, 1, 0] [2, 4, 1, 16] [1, 1, 1, 1]
// CHECK: %[[V:.*]] = tensor.extract_slice %[[A]][0, 0, 2, 0] [2, 4, 1, 16] [1, 1, 1, 1]
// CHECK: return %[[Q]], %[[K]], %[[V]]
#col = affine_map<(d0, d1, d2) -> (d2)>
#id = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @qkv(%x: tensor<8x16xf32> {autopar.input = "x"},
               %w: tensor<16x48xf32> {autopar.parameter = "c_attn.weight"},
               %b: tensor<48xf32> {autopar.parameter = "c_attn.bias"})
    -> (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x48xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x48xf32>) -> tensor<8x48xf32>
  %m = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x48xf32>) outs(%f : tensor<8x48xf32>) -> tensor<8x48xf32>
  %r = tensor.expand_shape %m [[0, 1], [2]] output_shape [2, 4, 48] : tensor<8x48xf32> into tensor<2x4x48xf32>
  %e2 = tensor.empty() : tensor<2x4x48xf32>
  %a = linalg.generic {indexing_maps = [#col, #id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%b, %r : tensor<48xf32>, tensor<2x4x48xf32>) outs(%e2 : tensor<2x4x48xf32>) {
  ^bb0(%bi: f32, %ri: f32, %o: f32):
    %s = arith.addf %bi, %ri : f32
    linalg.yield %s : f32
  } -> tensor<2x4x48xf32>
  %q = tensor.extract_slice %a[0, 0, 0] [2, 4, 16] [1, 1, 1] : tensor<2x4x48xf32> to tensor<2x4x16xf32>
  %k = tensor.extract_slice %a[0, 0, 16] [2, 4, 16] [1, 1, 1] : tensor<2x4x48xf32> to tensor<2x4x16xf32>
  %v = tensor.extract_slice %a[0, 0, 32] [2, 4, 16] [1, 1, 1] : tensor<2x4x48xf32> to tensor<2x4x16xf32>
  return %q, %k, %v : tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<2x4x16xf32>
}

// -----

// A weight with another reader is left alone (its view would change it for
// that reader too).
// CHECK-LABEL: func.func @shared_weight
// CHECK-SAME: %{{.*}}: tensor<16x32xf32>
// CHECK: linalg.matmul
// CHECK-NOT: autopar.projection_parts
func.func @shared_weight(%x: tensor<8x16xf32> {autopar.input = "x"},
                         %w: tensor<16x32xf32> {autopar.parameter = "w"})
    -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x32xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x32xf32>) -> tensor<8x32xf32>
  %m = linalg.matmul ins(%x, %w : tensor<8x16xf32>, tensor<16x32xf32>) outs(%f : tensor<8x32xf32>) -> tensor<8x32xf32>
  %q = tensor.extract_slice %m[0, 0] [8, 16] [1, 1] : tensor<8x32xf32> to tensor<8x16xf32>
  %k = tensor.extract_slice %m[0, 16] [8, 16] [1, 1] : tensor<8x32xf32> to tensor<8x16xf32>
  return %q, %k, %w : tensor<8x16xf32>, tensor<8x16xf32>, tensor<16x32xf32>
}

// -----

// After partitioning (each rank holding its 8 of 16 columns of every part)
// the part-wise contraction is a matmul over the rank's columns again.
// CHECK-LABEL: func.func @merge
// MERGE-LABEL: func.func @merge
// MERGE-SAME: (%[[X:.*]]: tensor<8x16xf32>, %[[W:.*]]: tensor<16x3x8xf32>) -> tensor<8x3x8xf32>
// MERGE: %[[F:.*]] = linalg.fill {{.*}} -> tensor<8x3x8xf32>
// MERGE: %[[C:.*]] = tensor.collapse_shape %[[F]] {{\[\[}}0], [1, 2]] : tensor<8x3x8xf32> into tensor<8x24xf32>
// MERGE: %[[WC:.*]] = tensor.collapse_shape %[[W]] {{\[\[}}0], [1, 2]] : tensor<16x3x8xf32> into tensor<16x24xf32>
// MERGE: %[[M:.*]] = linalg.matmul ins(%[[X]], %[[WC]] : tensor<8x16xf32>, tensor<16x24xf32>) outs(%[[C]] : tensor<8x24xf32>)
// MERGE: tensor.expand_shape %[[M]] {{\[\[}}0], [1, 2]] output_shape [8, 3, 8]
// MERGE-NOT: shard.
shard.grid @grid(shape = 2)
func.func @merge(%x: tensor<8x16xf32>, %w: tensor<16x3x16xf32>) -> tensor<8x3x16xf32> {
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %s = shard.sharding @grid split_axes = [[], [], [0]] : !shard.sharding
  %xs = shard.shard %x to %r : tensor<8x16xf32>
  %ws = shard.shard %w to %s : tensor<16x3x16xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x3x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x3x16xf32>) -> tensor<8x3x16xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(m, p, n, k) -> (m, k)>, affine_map<(m, p, n, k) -> (k, p, n)>, affine_map<(m, p, n, k) -> (m, p, n)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%xs, %ws : tensor<8x16xf32>, tensor<16x3x16xf32>) outs(%f : tensor<8x3x16xf32>) attrs = {autopar.projection_parts} {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = arith.mulf %a, %b : f32
    %q = arith.addf %o, %p : f32
    linalg.yield %q : f32
  } -> tensor<8x3x16xf32>
  %cs = shard.shard %c to %s : tensor<8x3x16xf32>
  return %cs : tensor<8x3x16xf32>
}
