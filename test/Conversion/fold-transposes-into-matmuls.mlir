// autopar-fold-transposes-into-matmuls: a matmul or batch_matmul operand that
// transposes its last two dims (a copy-only generic or linalg.transpose) is
// read in place through a swapped indexing map; type-converting copies,
// permutations of other dims and plain copies are kept.
// RUN: autopar-opt %s --autopar-fold-transposes-into-matmuls --split-input-file | FileCheck %s

// A tied language-model head: logits = x @ Transpose(wte). The matmul reads
// wte through a transposed map; the transpose (a copy of the embedding every
// step) is gone.
// CHECK-DAG: #[[$A:.*]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[$BT:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[$C:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @tied_head
// CHECK-SAME: (%[[X:.*]]: tensor<8x4xbf16>, %[[WTE:.*]]: tensor<10x4xbf16>
// CHECK-NOT: linalg.generic
// CHECK: linalg.matmul indexing_maps = [#[[$A]], #[[$BT]], #[[$C]]]
// CHECK-SAME: ins(%[[X]], %[[WTE]] : tensor<8x4xbf16>, tensor<10x4xbf16>)
func.func @tied_head(%x: tensor<8x4xbf16>, %wte: tensor<10x4xbf16>, %init: tensor<8x10xf32>) -> tensor<8x10xf32> {
  %e = tensor.empty() : tensor<4x10xbf16>
  %t = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%wte : tensor<10x4xbf16>) outs(%e : tensor<4x10xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    linalg.yield %in : bf16
  } -> tensor<4x10xbf16>
  %r = linalg.matmul ins(%x, %t : tensor<8x4xbf16>, tensor<4x10xbf16>) outs(%init : tensor<8x10xf32>) -> tensor<8x10xf32>
  return %r : tensor<8x10xf32>
}

// -----

// A linalg.transpose of A, and of a batch_matmul's B over its last two dims
// (attention's K^T); the transpose stays for its other user.
// CHECK-DAG: #[[$AT:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-DAG: #[[$B:.*]] = affine_map<(d0, d1, d2) -> (d2, d1)>
// CHECK-DAG: #[[$C2:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$QA:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[$KB:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
// CHECK-DAG: #[[$SC:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @transposed_a_and_batched_b
// CHECK-SAME: (%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<4x10xf32>, %[[Q:.*]]: tensor<2x3x5xf32>, %[[K:.*]]: tensor<2x7x5xf32>
// CHECK: linalg.matmul indexing_maps = [#[[$AT]], #[[$B]], #[[$C2]]]
// CHECK-SAME: ins(%[[A]], %[[B]] :
// CHECK: %[[KT:.*]] = linalg.transpose ins(%[[K]]
// CHECK: linalg.batch_matmul indexing_maps = [#[[$QA]], #[[$KB]], #[[$SC]]]
// CHECK-SAME: ins(%[[Q]], %[[K]] :
// CHECK: return %{{.*}}, %{{.*}}, %[[KT]]
func.func @transposed_a_and_batched_b(%a: tensor<4x8xf32>, %b: tensor<4x10xf32>, %q: tensor<2x3x5xf32>, %k: tensor<2x7x5xf32>,
                                      %c: tensor<8x10xf32>, %s: tensor<2x3x7xf32>) -> (tensor<8x10xf32>, tensor<2x3x7xf32>, tensor<2x5x7xf32>) {
  %ea = tensor.empty() : tensor<8x4xf32>
  %at = linalg.transpose ins(%a : tensor<4x8xf32>) outs(%ea : tensor<8x4xf32>) permutation = [1, 0]
  %r = linalg.matmul ins(%at, %b : tensor<8x4xf32>, tensor<4x10xf32>) outs(%c : tensor<8x10xf32>) -> tensor<8x10xf32>
  %ek = tensor.empty() : tensor<2x5x7xf32>
  %kt = linalg.transpose ins(%k : tensor<2x7x5xf32>) outs(%ek : tensor<2x5x7xf32>) permutation = [0, 2, 1]
  %sc = linalg.batch_matmul ins(%q, %kt : tensor<2x3x5xf32>, tensor<2x5x7xf32>) outs(%s : tensor<2x3x7xf32>) -> tensor<2x3x7xf32>
  return %r, %sc, %kt : tensor<8x10xf32>, tensor<2x3x7xf32>, tensor<2x5x7xf32>
}

// -----

// Not folded: a transpose that converts the element type, one of other dims
// (a batch_matmul operand permuted over its batch), and a copy that is not
// a transpose.
// CHECK-LABEL: func.func @kept
// CHECK: %[[T:.*]] = linalg.generic
// CHECK: linalg.matmul ins(%{{.*}}, %[[T]] :
// CHECK: %[[P:.*]] = linalg.transpose
// CHECK: linalg.batch_matmul ins(%{{.*}}, %[[P]] :
// CHECK: %[[I:.*]] = linalg.generic
// CHECK: linalg.matmul ins(%[[I]], %{{.*}} :
func.func @kept(%x: tensor<8x4xf32>, %w: tensor<10x4xbf16>, %init: tensor<8x10xf32>,
                %q: tensor<2x3x5xf32>, %k: tensor<5x2x7xf32>, %s: tensor<2x3x7xf32>) -> (tensor<8x10xf32>, tensor<2x3x7xf32>, tensor<8x10xf32>) {
  %e = tensor.empty() : tensor<4x10xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<10x4xbf16>) outs(%e : tensor<4x10xf32>) {
  ^bb0(%in: bf16, %out: f32):
    %f = arith.extf %in : bf16 to f32
    linalg.yield %f : f32
  } -> tensor<4x10xf32>
  %r = linalg.matmul ins(%x, %t : tensor<8x4xf32>, tensor<4x10xf32>) outs(%init : tensor<8x10xf32>) -> tensor<8x10xf32>
  %ek = tensor.empty() : tensor<2x5x7xf32>
  %p = linalg.transpose ins(%k : tensor<5x2x7xf32>) outs(%ek : tensor<2x5x7xf32>) permutation = [1, 0, 2]
  %sc = linalg.batch_matmul ins(%q, %p : tensor<2x3x5xf32>, tensor<2x5x7xf32>) outs(%s : tensor<2x3x7xf32>) -> tensor<2x3x7xf32>
  %ex = tensor.empty() : tensor<8x4xf32>
  %id = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>],
                        iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x4xf32>) outs(%ex : tensor<8x4xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  } -> tensor<8x4xf32>
  %b = tensor.empty() : tensor<4x10xf32>
  %r2 = linalg.matmul ins(%id, %b : tensor<8x4xf32>, tensor<4x10xf32>) outs(%init : tensor<8x10xf32>) -> tensor<8x10xf32>
  return %r, %sc, %r2 : tensor<8x10xf32>, tensor<2x3x7xf32>, tensor<8x10xf32>
}
