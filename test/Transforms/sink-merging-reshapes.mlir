// autopar-sink-merging-reshapes: in torch's attention on [seq, batch * heads,
// d] the merge of batch and heads moves past the transpose and the batched
// matmul, which iterate over batch and heads apart, and happens once at the
// end; a matmul without batch dims keeps its merged rows.
// RUN: autopar-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(autopar-sink-merging-reshapes))' | FileCheck %s

// torch's attention on [seq, batch * heads, d]: the merge of batch and heads
// moves past the transpose and the batched matmul, which then iterate over
// batch and heads apart (heads can be split by tensor parallelism); the
// merge happens once, at the end.
// Q and K are different values, so the order of the contraction's operands
// (and which of them is read as (b, h, n, k)) is checked.
// CHECK-DAG: #[[$QMAP:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
// CHECK-DAG: #[[$KMAP:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>
// CHECK-DAG: #[[$SMAP:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @attention_scores
// CHECK-SAME: (%[[Q:.*]]: tensor<8x2x64xf32>, %[[K:.*]]: tensor<8x2x64xf32>)
// CHECK: %[[QE:.*]] = tensor.expand_shape %[[Q]] {{\[\[}}0], [1], [2, 3]] output_shape [8, 2, 4, 16] : tensor<8x2x64xf32> into tensor<8x2x4x16xf32>
// CHECK: %[[QT:.*]] = linalg.transpose ins(%[[QE]] : tensor<8x2x4x16xf32>) outs(%{{.*}} : tensor<2x4x8x16xf32>) permutation = [1, 2, 0, 3]
// CHECK: %[[KE:.*]] = tensor.expand_shape %[[K]] {{\[\[}}0], [1], [2, 3]] output_shape [8, 2, 4, 16] : tensor<8x2x64xf32> into tensor<8x2x4x16xf32>
// CHECK: %[[KT:.*]] = linalg.transpose ins(%[[KE]] : tensor<8x2x4x16xf32>) outs(%{{.*}} : tensor<2x4x8x16xf32>) permutation = [1, 2, 0, 3]
// CHECK-NOT: linalg.batch_matmul
// CHECK: %[[S:.*]] = linalg.generic {indexing_maps = [#[[$QMAP]], #[[$KMAP]], #[[$SMAP]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[QT]], %[[KT]] : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
// CHECK: %[[C:.*]] = tensor.collapse_shape %[[S]] {{\[\[}}0, 1], [2], [3]] : tensor<2x4x8x8xf32> into tensor<8x8x8xf32>
// CHECK: return %[[C]]
func.func @attention_scores(%q: tensor<8x2x64xf32>, %k: tensor<8x2x64xf32>) -> tensor<8x8x8xf32> {
  %qe = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [8, 2, 4, 16] : tensor<8x2x64xf32> into tensor<8x2x4x16xf32>
  %qm = tensor.collapse_shape %qe [[0], [1, 2], [3]] : tensor<8x2x4x16xf32> into tensor<8x8x16xf32>
  %qi = tensor.empty() : tensor<8x8x16xf32>
  %qt = linalg.transpose ins(%qm : tensor<8x8x16xf32>) outs(%qi : tensor<8x8x16xf32>) permutation = [1, 0, 2]
  %ke = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [8, 2, 4, 16] : tensor<8x2x64xf32> into tensor<8x2x4x16xf32>
  %km = tensor.collapse_shape %ke [[0], [1, 2], [3]] : tensor<8x2x4x16xf32> into tensor<8x8x16xf32>
  %ki = tensor.empty() : tensor<8x8x16xf32>
  %kt = linalg.transpose ins(%km : tensor<8x8x16xf32>) outs(%ki : tensor<8x8x16xf32>) permutation = [1, 0, 2]
  %zero = arith.constant 0.0 : f32
  %e2 = tensor.empty() : tensor<8x8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e2 : tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
  %s = linalg.batch_matmul indexing_maps = [
         affine_map<(b, m, n, k) -> (b, m, k)>,
         affine_map<(b, m, n, k) -> (b, n, k)>,
         affine_map<(b, m, n, k) -> (b, m, n)>]
       ins(%qt, %kt : tensor<8x8x16xf32>, tensor<8x8x16xf32>) outs(%f : tensor<8x8x8xf32>) -> tensor<8x8x8xf32>
  return %s : tensor<8x8x8xf32>
}

// -----

// A matmul without batch dims stays a matmul (BLAS and cuBLAS take it): the
// merge of [seq, batch] into rows is not moved past it.
// CHECK-LABEL: func.func @projection
// CHECK: %[[R:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : tensor<8x2x64xf32> into tensor<16x64xf32>
// CHECK: linalg.matmul ins(%[[R]], %{{.*}} : tensor<16x64xf32>, tensor<64x64xf32>)
func.func @projection(%x: tensor<8x2x64xf32>, %w: tensor<64x64xf32>) -> tensor<16x64xf32> {
  %r = tensor.collapse_shape %x [[0, 1], [2]] : tensor<8x2x64xf32> into tensor<16x64xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x64xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<16x64xf32>) -> tensor<16x64xf32>
  %y = linalg.matmul ins(%r, %w : tensor<16x64xf32>, tensor<64x64xf32>) outs(%f : tensor<16x64xf32>) -> tensor<16x64xf32>
  return %y : tensor<16x64xf32>
}
