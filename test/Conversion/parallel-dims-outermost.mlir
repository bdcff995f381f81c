// autopar-parallel-dims-outermost: a linalg op on memrefs with a reduction dim
// before a parallel one is generalized and interchanged, parallel dims first,
// each group in its order; ops already in that order and ops on tensors stay.
// RUN: autopar-opt %s --autopar-parallel-dims-outermost --split-input-file | FileCheck %s

// A reduction over the leading dim (ReduceSum over axis 0) is generalized
// and interchanged: the parallel dim (16 outputs) comes first, the reduction
// (8 rows) second, so each GPU thread owns one output element.
// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1) -> (d1, d0)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @reduce_leading
// CHECK-SAME: (%[[X:.*]]: memref<8x16xf32>, %[[Y:.*]]: memref<16xf32>)
// CHECK: linalg.generic {indexing_maps = [#[[IN]], #[[OUT]]], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME: ins(%[[X]] : memref<8x16xf32>) outs(%[[Y]] : memref<16xf32>)
// CHECK: arith.addf
// CHECK-NOT: linalg.reduce
func.func @reduce_leading(%in: memref<8x16xf32>, %out: memref<16xf32>) {
  linalg.reduce ins(%in : memref<8x16xf32>) outs(%out : memref<16xf32>) dimensions = [0]
    (%a: f32, %acc: f32) {
      %s = arith.addf %a, %acc : f32
      linalg.yield %s : f32
    }
  return
}

// -----

// Parallel dims already outermost (softmax's row reductions): unchanged.
// CHECK-LABEL: func.func @reduce_trailing
// CHECK: linalg.reduce
// CHECK-SAME: dimensions = [1]
func.func @reduce_trailing(%in: memref<8x16xf32>, %out: memref<8xf32>) {
  linalg.reduce ins(%in : memref<8x16xf32>) outs(%out : memref<8xf32>) dimensions = [1]
    (%a: f32, %acc: f32) {
      %s = arith.addf %a, %acc : f32
      linalg.yield %s : f32
    }
  return
}

// -----

// A generic with reductions between parallel dims keeps both groups in
// their order: (r0, p1, r2, p3) -> (p1, p3, r0, r2).
// CHECK-DAG: #[[IN2:.*]] = affine_map<(d0, d1, d2, d3) -> (d2, d0, d3, d1)>
// CHECK-DAG: #[[OUT2:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1)>
// CHECK-LABEL: func.func @interleaved
// CHECK: linalg.generic {indexing_maps = [#[[IN2]], #[[OUT2]]], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
func.func @interleaved(%in: memref<2x3x4x5xf32>, %out: memref<3x5xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d1, d3)>],
                  iterator_types = ["reduction", "parallel", "reduction", "parallel"]}
    ins(%in : memref<2x3x4x5xf32>) outs(%out : memref<3x5xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// On tensors nothing changes: the pass runs after bufferization.
// CHECK-LABEL: func.func @on_tensors
// CHECK: linalg.reduce
func.func @on_tensors(%in: tensor<8x16xf32>, %out: tensor<16xf32>) -> tensor<16xf32> {
  %r = linalg.reduce ins(%in : tensor<8x16xf32>) outs(%out : tensor<16xf32>) dimensions = [0]
    (%a: f32, %acc: f32) {
      %s = arith.addf %a, %acc : f32
      linalg.yield %s : f32
    }
  return %r : tensor<16xf32>
}
