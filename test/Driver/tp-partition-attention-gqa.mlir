// autopar-tp-partition-pipeline on grouped-query attention fused before
// partitioning: 8 query heads share 4 key/value heads (2 each). The planner
// splits the heads (PlanGraph.cpp, attentionOptions: the key/value heads'
// dim follows the heads loop), so each of the 2 ranks runs its 4 query
// heads on its 2 key/value heads, the pairs the whole op would match, with
// no collective before the attention and no shard op left.
// RUN: autopar-opt %s --autopar-tp-partition-pipeline="tp=2" | FileCheck %s

// CHECK-LABEL: func.func @main(
// CHECK-SAME: -> (tensor<2x64x512xf32>
// CHECK-NOT: shard.
// CHECK-NOT: call @autopar_rt_all
// CHECK: %[[A:.*]]:2 = autopar.attention ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2x4x64x64xf32>, tensor<2x2x64x64xf32>, tensor<2x2x64x64xf32>) outs(%{{.*}}, %{{.*}} : tensor<2x4x64x64xf32>, tensor<2x4x64xf32>) {{.*}}causal
// CHECK-NOT: shard.
// CHECK: return %{{.*}} : tensor<2x64x512xf32>
func.func @main(%wq: tensor<512x512xf32> {autopar.parameter = "wq"}, %wk: tensor<512x256xf32> {autopar.parameter = "wk"}, %wv: tensor<512x256xf32> {autopar.parameter = "wv"}, %wo: tensor<512x512xf32> {autopar.parameter = "wo"}, %x: tensor<2x64x512xf32> {autopar.input = "x"}) -> (tensor<2x64x512xf32> {autopar.output = "y"}) {
  %zero = arith.constant 0.0 : f32
  %x2 = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x64x512xf32> into tensor<128x512xf32>
  %e = tensor.empty() : tensor<128x512xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<128x512xf32>) -> tensor<128x512xf32>
  %q2 = linalg.matmul ins(%x2, %wq : tensor<128x512xf32>, tensor<512x512xf32>) outs(%z : tensor<128x512xf32>) -> tensor<128x512xf32>
  %ekv = tensor.empty() : tensor<128x256xf32>
  %zkv = linalg.fill ins(%zero : f32) outs(%ekv : tensor<128x256xf32>) -> tensor<128x256xf32>
  %k2 = linalg.matmul ins(%x2, %wk : tensor<128x512xf32>, tensor<512x256xf32>) outs(%zkv : tensor<128x256xf32>) -> tensor<128x256xf32>
  %v2 = linalg.matmul ins(%x2, %wv : tensor<128x512xf32>, tensor<512x256xf32>) outs(%zkv : tensor<128x256xf32>) -> tensor<128x256xf32>
  %q3 = tensor.expand_shape %q2 [[0, 1], [2, 3]] output_shape [2, 64, 8, 64] : tensor<128x512xf32> into tensor<2x64x8x64xf32>
  %k3 = tensor.expand_shape %k2 [[0, 1], [2, 3]] output_shape [2, 64, 4, 64] : tensor<128x256xf32> into tensor<2x64x4x64xf32>
  %v3 = tensor.expand_shape %v2 [[0, 1], [2, 3]] output_shape [2, 64, 4, 64] : tensor<128x256xf32> into tensor<2x64x4x64xf32>
  %te = tensor.empty() : tensor<2x8x64x64xf32>
  %q = linalg.transpose ins(%q3 : tensor<2x64x8x64xf32>) outs(%te : tensor<2x8x64x64xf32>) permutation = [0, 2, 1, 3]
  %tkv = tensor.empty() : tensor<2x4x64x64xf32>
  %k = linalg.transpose ins(%k3 : tensor<2x64x4x64xf32>) outs(%tkv : tensor<2x4x64x64xf32>) permutation = [0, 2, 1, 3]
  %v = linalg.transpose ins(%v3 : tensor<2x64x4x64xf32>) outs(%tkv : tensor<2x4x64x64xf32>) permutation = [0, 2, 1, 3]
  %o0 = tensor.empty() : tensor<2x8x64x64xf32>
  %l0 = tensor.empty() : tensor<2x8x64xf32>
  %o, %l = autopar.attention ins(%q, %k, %v : tensor<2x8x64x64xf32>, tensor<2x4x64x64xf32>, tensor<2x4x64x64xf32>) outs(%o0, %l0 : tensor<2x8x64x64xf32>, tensor<2x8x64xf32>) {scale = 0.125 : f64, causal} -> tensor<2x8x64x64xf32>, tensor<2x8x64xf32>
  %ye = tensor.empty() : tensor<2x64x8x64xf32>
  %y4 = linalg.transpose ins(%o : tensor<2x8x64x64xf32>) outs(%ye : tensor<2x64x8x64xf32>) permutation = [0, 2, 1, 3]
  %y2 = tensor.collapse_shape %y4 [[0, 1], [2, 3]] : tensor<2x64x8x64xf32> into tensor<128x512xf32>
  %p = linalg.matmul ins(%y2, %wo : tensor<128x512xf32>, tensor<512x512xf32>) outs(%z : tensor<128x512xf32>) -> tensor<128x512xf32>
  %y = tensor.expand_shape %p [[0, 1], [2]] output_shape [2, 64, 512] : tensor<128x512xf32> into tensor<2x64x512xf32>
  return %y : tensor<2x64x512xf32>
}
