// RUN: autopar-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(autopar-collapse-batched-contractions))' | FileCheck %s

// Batch and heads fold into the one batch dim of linalg.batch_matmul.
// CHECK-LABEL: func.func @attention_scores
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8x16xf32>, %[[K:.*]]: tensor<2x4x16x8xf32>, %[[INIT:.*]]: tensor<2x4x8x8xf32>)
// CHECK-DAG: %[[Q3:.*]] = tensor.collapse_shape %[[Q]] {{\[\[}}0, 1], [2], [3]] : tensor<2x4x8x16xf32> into tensor<8x8x16xf32>
// CHECK-DAG: %[[K3:.*]] = tensor.collapse_shape %[[K]] {{\[\[}}0, 1], [2], [3]] : tensor<2x4x16x8xf32> into tensor<8x16x8xf32>
// CHECK-DAG: %[[I3:.*]] = tensor.collapse_shape %[[INIT]] {{\[\[}}0, 1], [2], [3]]
// CHECK: %[[BMM:.*]] = linalg.batch_matmul ins(%[[Q3]], %[[K3]] : tensor<8x8x16xf32>, tensor<8x16x8xf32>) outs(%[[I3]] : tensor<8x8x8xf32>)
// CHECK: %[[R:.*]] = tensor.expand_shape %[[BMM]] {{\[\[}}0, 1], [2], [3]] output_shape [2, 4, 8, 8]
// CHECK: return %[[R]]
#a = affine_map<(b, h, m, n, k) -> (b, h, m, k)>
#b = affine_map<(b, h, m, n, k) -> (b, h, k, n)>
#c = affine_map<(b, h, m, n, k) -> (b, h, m, n)>
func.func @attention_scores(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>, %init: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) outs(%init : tensor<2x4x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x8xf32>
  return %r : tensor<2x4x8x8xf32>
}

// -----

// A body that is not a multiply-add is left alone.
// CHECK-LABEL: func.func @not_a_matmul
// CHECK: linalg.generic
// CHECK-NOT: linalg.batch_matmul
#a2 = affine_map<(b, h, m, n, k) -> (b, h, m, k)>
#b2 = affine_map<(b, h, m, n, k) -> (b, h, k, n)>
#c2 = affine_map<(b, h, m, n, k) -> (b, h, m, n)>
func.func @not_a_matmul(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>, %init: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %r = linalg.generic {indexing_maps = [#a2, #b2, #c2], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) outs(%init : tensor<2x4x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.maximumf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x8xf32>
  return %r : tensor<2x4x8x8xf32>
}
