// autopar-split-shared-inits: ops sharing a zero fill as init each get their
// own (a fill for reductions, an empty tensor for a write-only op), a read of
// the fill keeps it, a single-use fill stays, and GEMMs sharing a collapsed
// fill each get an empty, collapse and fill right before them.
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-split-shared-inits))' -split-input-file | FileCheck %s

// Three ops name one zero fill as their init (as CSE leaves them): the two
// reductions, which read their init, each get a zero fill of their own; the
// elementwise op, which only writes its init, gets an empty tensor. A read of
// the fill (the last op's input) keeps the original.
// CHECK-LABEL: func.func @shared_fill
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>)
// CHECK: %[[ZERO:.*]] = arith.constant 0.0
// CHECK: %[[E0:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[F0:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E0]] : tensor<4xf32>)
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[F1:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E1]] : tensor<4xf32>)
// CHECK: %[[S1:.*]] = linalg.reduce ins(%[[X]] : tensor<4x8xf32>) outs(%[[F1]] : tensor<4xf32>)
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[F2:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E2]] : tensor<4xf32>)
// CHECK: %[[S2:.*]] = linalg.reduce ins(%[[X]] : tensor<4x8xf32>) outs(%[[F2]] : tensor<4xf32>)
// CHECK: %[[E3:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: %[[W:.*]] = linalg.generic {{.*}} ins(%[[S1]], %[[F0]] : tensor<4xf32>, tensor<4xf32>) outs(%[[E3]] : tensor<4xf32>)
// CHECK: return %[[S2]], %[[W]]
#v = affine_map<(d0) -> (d0)>
func.func @shared_fill(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %s1 = linalg.reduce ins(%x : tensor<4x8xf32>) outs(%z : tensor<4xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  %s2 = linalg.reduce ins(%x : tensor<4x8xf32>) outs(%z : tensor<4xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %r = arith.maximumf %in, %acc : f32
      linalg.yield %r : f32
    }
  %w = linalg.generic {indexing_maps = [#v, #v, #v], iterator_types = ["parallel"]}
      ins(%s1, %z : tensor<4xf32>, tensor<4xf32>) outs(%z : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.subf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<4xf32>
  return %s2, %w : tensor<4xf32>, tensor<4xf32>
}

// -----

// A fill used once stays as it is; so does a fill of a non-constant value.
// CHECK-LABEL: func.func @single_use
// CHECK: %[[F:.*]] = linalg.fill
// CHECK-NEXT: linalg.reduce ins(%{{.*}} : tensor<4x8xf32>) outs(%[[F]] : tensor<4xf32>)
// CHECK-NOT: linalg.fill
func.func @single_use(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %s = linalg.reduce ins(%x : tensor<4x8xf32>) outs(%z : tensor<4xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  return %s : tensor<4xf32>
}

// -----

// Attention's score GEMMs over batch * heads share one zero fill of a
// collapsed empty tensor; each gets its own empty, collapse and fill right
// before it (which the GEMM lowering then turns into an overwrite GEMM)
// instead of a copy of the shared zeros, the last writer included.
// CHECK-LABEL: func.func @reshaped_fill
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<2x3x4x4xf32>
// CHECK-NEXT: %[[C1:.*]] = tensor.collapse_shape %[[E1]]
// CHECK-NEXT: %[[F1:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[C1]] : tensor<6x4x4xf32>)
// CHECK-NEXT: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<6x4x8xf32>, tensor<6x8x4xf32>) outs(%[[F1]] : tensor<6x4x4xf32>)
// CHECK-NEXT: %[[E2:.*]] = tensor.empty() : tensor<2x3x4x4xf32>
// CHECK-NEXT: %[[C2:.*]] = tensor.collapse_shape %[[E2]]
// CHECK-NEXT: %[[F2:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[C2]] : tensor<6x4x4xf32>)
// CHECK-NEXT: linalg.batch_matmul ins(%{{.*}}, %{{.*}} : tensor<6x4x8xf32>, tensor<6x8x4xf32>) outs(%[[F2]] : tensor<6x4x4xf32>)
// CHECK-NOT: linalg.fill
func.func @reshaped_fill(%a: tensor<6x4x8xf32>, %b: tensor<6x8x4xf32>) -> (tensor<6x4x4xf32>, tensor<6x4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x3x4x4xf32>
  %c = tensor.collapse_shape %e [[0, 1], [2], [3]] : tensor<2x3x4x4xf32> into tensor<6x4x4xf32>
  %z = linalg.fill ins(%zero : f32) outs(%c : tensor<6x4x4xf32>) -> tensor<6x4x4xf32>
  %s1 = linalg.batch_matmul ins(%a, %b : tensor<6x4x8xf32>, tensor<6x8x4xf32>) outs(%z : tensor<6x4x4xf32>) -> tensor<6x4x4xf32>
  %s2 = linalg.batch_matmul ins(%a, %b : tensor<6x4x8xf32>, tensor<6x8x4xf32>) outs(%z : tensor<6x4x4xf32>) -> tensor<6x4x4xf32>
  return %s1, %s2 : tensor<6x4x4xf32>, tensor<6x4x4xf32>
}
