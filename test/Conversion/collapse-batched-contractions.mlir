// autopar-collapse-batched-contractions: a generic contraction with several
// batch dims (attention's batch and heads) becomes one linalg.batch_matmul on
// collapsed operands, also with a transposed operand (the adjoints) or with
// bf16 operands extended to f32; bodies that are not a multiply-add stay.
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

// -----

// The adjoints of a batched matmul read an operand transposed, with the
// reduction loop anywhere and the product's factors in either order:
// dA[b,h,m,k] = sum_n dC[b,h,m,n] B[b,h,k,n] is a batch_matmul of dC by
// B transposed; the input holding m is A whichever input it is.
// CHECK-DAG: #[[BT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
// CHECK-LABEL: func.func @adjoint_transposed_b
// CHECK-SAME: (%[[B:[^:]*]]: tensor<2x4x16x8xf32>, %[[DC:[^:]*]]: tensor<2x4x8x8xf32>, %[[INIT:[^:]*]]: tensor<2x4x8x16xf32>)
// CHECK-DAG: %[[DC3:.*]] = tensor.collapse_shape %[[DC]] {{\[\[}}0, 1], [2], [3]] : tensor<2x4x8x8xf32> into tensor<8x8x8xf32>
// CHECK-DAG: %[[B3:.*]] = tensor.collapse_shape %[[B]] {{\[\[}}0, 1], [2], [3]] : tensor<2x4x16x8xf32> into tensor<8x16x8xf32>
// CHECK: %[[BMM:.*]] = linalg.batch_matmul indexing_maps = [#{{.*}}, #[[BT]], #{{.*}}] ins(%[[DC3]], %[[B3]] : tensor<8x8x8xf32>, tensor<8x16x8xf32>)
// CHECK: tensor.expand_shape %[[BMM]]
#bt = affine_map<(b, h, m, k, n) -> (b, h, k, n)>
#dc = affine_map<(b, h, m, k, n) -> (b, h, m, n)>
#da = affine_map<(b, h, m, k, n) -> (b, h, m, k)>
func.func @adjoint_transposed_b(%b: tensor<2x4x16x8xf32>, %dc: tensor<2x4x8x8xf32>, %init: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %r = linalg.generic {indexing_maps = [#bt, #dc, #da], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%b, %dc : tensor<2x4x16x8xf32>, tensor<2x4x8x8xf32>) outs(%init : tensor<2x4x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %y, %x : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x16xf32>
  return %r : tensor<2x4x8x16xf32>
}

// -----

// dB[b,h,k,n] = sum_m A[b,h,m,k] dC[b,h,m,n]: A transposed, the reduction
// loop in the middle.
// CHECK-DAG: #[[AT:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>
// CHECK-LABEL: func.func @adjoint_transposed_a
// CHECK: linalg.batch_matmul indexing_maps = [#[[AT]], #{{.*}}, #{{.*}}] ins(%{{.*}}, %{{.*}} : tensor<8x8x16xf32>, tensor<8x8x8xf32>) outs(%{{.*}} : tensor<8x16x8xf32>)
#a2 = affine_map<(b, h, m, k, n) -> (b, h, m, k)>
#dc2 = affine_map<(b, h, m, k, n) -> (b, h, m, n)>
#db2 = affine_map<(b, h, m, k, n) -> (b, h, k, n)>
func.func @adjoint_transposed_a(%a: tensor<2x4x8x16xf32>, %dc: tensor<2x4x8x8xf32>, %init: tensor<2x4x16x8xf32>) -> tensor<2x4x16x8xf32> {
  %r = linalg.generic {indexing_maps = [#a2, #dc2, #db2], iterator_types = ["parallel", "parallel", "reduction", "parallel", "parallel"]}
      ins(%a, %dc : tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>) outs(%init : tensor<2x4x16x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x4x16x8xf32>
  return %r : tensor<2x4x16x8xf32>
}

// -----

// Mixed precision: bf16 operands extended to f32 in the body (a training
// step's attention, demoted by autopar-mixed-precision before this pass)
// become a batch_matmul of the bf16 operands into the f32 result.
// CHECK-LABEL: func.func @extended_operands
// CHECK: %[[BMM:.*]] = linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<8x8x16xbf16>, tensor<8x16x8xbf16>) outs(%{{.*}} : tensor<8x8x8xf32>)
// CHECK: tensor.expand_shape %[[BMM]]
// CHECK-NOT: linalg.generic
#a = affine_map<(b, h, m, n, k) -> (b, h, m, k)>
#b = affine_map<(b, h, m, n, k) -> (b, h, k, n)>
#c = affine_map<(b, h, m, n, k) -> (b, h, m, n)>
func.func @extended_operands(%q: tensor<2x4x8x16xbf16>, %k: tensor<2x4x16x8xbf16>, %init: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x4x8x16xbf16>, tensor<2x4x16x8xbf16>) outs(%init : tensor<2x4x8x8xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xe = arith.extf %x : bf16 to f32
    %ye = arith.extf %y : bf16 to f32
    %p = arith.mulf %xe, %ye : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x8xf32>
  return %r : tensor<2x4x8x8xf32>
}

// -----

// An extension of something other than an operand (here the accumulator's
// square) is not a plain contraction: left alone.
// CHECK-LABEL: func.func @extended_other
// CHECK: linalg.generic
// CHECK-NOT: linalg.batch_matmul
#a = affine_map<(b, h, m, n, k) -> (b, h, m, k)>
#b = affine_map<(b, h, m, n, k) -> (b, h, k, n)>
#c = affine_map<(b, h, m, n, k) -> (b, h, m, n)>
func.func @extended_other(%q: tensor<2x4x8x16xbf16>, %k: tensor<2x4x16x8xbf16>, %init: tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32> {
  %r = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x4x8x16xbf16>, tensor<2x4x16x8xbf16>) outs(%init : tensor<2x4x8x8xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xe = arith.extf %x : bf16 to f32
    %xx = arith.mulf %xe, %xe : f32
    %p = arith.mulf %xx, %xe : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x8xf32>
  return %r : tensor<2x4x8x8xf32>
}
