// autopar-forward-results-to-out-params: a result computed in a fresh
// allocation and copied, reshaped, into its out-param is computed in a view of
// the out-param (no allocation, no copy); an allocation read after the copy
// and an out-param written by something else are kept.
// RUN: autopar-opt %s --autopar-forward-results-to-out-params --split-input-file | FileCheck %s

// Logits: a GEMM on [batch * seq, vocab] reshaped to the out-param's
// [batch, seq, vocab]. The GEMM writes into a collapsed view of the
// out-param; the allocation and the final copy are gone.
// CHECK-LABEL: func.func @logits
// CHECK-SAME: (%[[X:.*]]: memref<6x4xf32>, %[[W:.*]]: memref<4x5xf32>, %[[OUT:.*]]: memref<2x3x5xf32>)
// CHECK-NOT: memref.alloc
// CHECK: %[[VIEW:.*]] = memref.collapse_shape %[[OUT]] {{\[\[}}0, 1], [2]] : memref<2x3x5xf32> into memref<6x5xf32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[VIEW]] : memref<6x5xf32>)
// CHECK: linalg.matmul ins(%[[X]], %[[W]] : memref<6x4xf32>, memref<4x5xf32>) outs(%[[VIEW]] : memref<6x5xf32>)
// CHECK-NOT: memref.copy
// CHECK: return
func.func @logits(%x: memref<6x4xf32>, %w: memref<4x5xf32>, %out: memref<2x3x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<6x5xf32>
  linalg.fill ins(%zero : f32) outs(%a : memref<6x5xf32>)
  linalg.matmul ins(%x, %w : memref<6x4xf32>, memref<4x5xf32>) outs(%a : memref<6x5xf32>)
  %e = memref.expand_shape %a [[0, 1], [2]] output_shape [2, 3, 5] : memref<6x5xf32> into memref<2x3x5xf32>
  memref.copy %e, %out : memref<2x3x5xf32> to memref<2x3x5xf32>
  return
}

// -----

// Kept: the allocation is read after the copy (a second result), and an
// out-param that something else also writes.
// CHECK-LABEL: func.func @kept
// CHECK: %[[A:.*]] = memref.alloc() : memref<6x5xf32>
// CHECK: memref.copy
// CHECK: linalg.copy ins(%[[A]]
// CHECK: %[[B:.*]] = memref.alloc() : memref<6x5xf32>
// CHECK: memref.copy
func.func @kept(%out: memref<2x3x5xf32>, %out2: memref<6x5xf32>, %out3: memref<2x3x5xf32>) {
  %zero = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<6x5xf32>
  linalg.fill ins(%zero : f32) outs(%a : memref<6x5xf32>)
  %e = memref.expand_shape %a [[0, 1], [2]] output_shape [2, 3, 5] : memref<6x5xf32> into memref<2x3x5xf32>
  memref.copy %e, %out : memref<2x3x5xf32> to memref<2x3x5xf32>
  linalg.copy ins(%a : memref<6x5xf32>) outs(%out2 : memref<6x5xf32>)
  %b = memref.alloc() : memref<6x5xf32>
  linalg.fill ins(%zero : f32) outs(%b : memref<6x5xf32>)
  %eb = memref.expand_shape %b [[0, 1], [2]] output_shape [2, 3, 5] : memref<6x5xf32> into memref<2x3x5xf32>
  linalg.fill ins(%zero : f32) outs(%out3 : memref<2x3x5xf32>)
  memref.copy %eb, %out3 : memref<2x3x5xf32> to memref<2x3x5xf32>
  return
}
