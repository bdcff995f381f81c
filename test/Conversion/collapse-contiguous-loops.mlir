// autopar-collapse-contiguous-loops: adjacent loop dims that every operand
// reads as adjacent dims of a contiguous buffer, or not at all, become one
// loop; transposed dims and strided buffers stay as they are.
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-collapse-contiguous-loops))' | FileCheck %s

// CHECK-DAG: #[[ID1:.*]] = affine_map<(d0) -> (d0)>
// CHECK-DAG: #[[ID3:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[CH:.*]] = affine_map<(d0, d1, d2) -> (d1)>
// CHECK-DAG: #[[TR:.*]] = affine_map<(d0, d1, d2) -> (d1, d0, d2)>
// CHECK-DAG: #[[ID2:.*]] = affine_map<(d0, d1) -> (d0, d1)>

// Every operand reads every dim in order: one loop over 16*32*32*32.
// CHECK-LABEL: func.func @relu_bwd
// CHECK-SAME: (%[[A:.*]]: memref<16x32x32x32xf32>, %[[B:.*]]: memref<16x32x32x32xf32>, %[[C:.*]]: memref<16x32x32x32xf32>)
// CHECK: %[[A1:.*]] = memref.collapse_shape %[[A]] {{\[\[}}0, 1, 2, 3]] : memref<16x32x32x32xf32> into memref<524288xf32>
// CHECK: %[[B1:.*]] = memref.collapse_shape %[[B]] {{\[\[}}0, 1, 2, 3]]
// CHECK: %[[C1:.*]] = memref.collapse_shape %[[C]] {{\[\[}}0, 1, 2, 3]]
// CHECK: linalg.generic {indexing_maps = [#[[ID1]], #[[ID1]], #[[ID1]]], iterator_types = ["parallel"]} ins(%[[A1]], %[[B1]] : memref<524288xf32>, memref<524288xf32>) outs(%[[C1]] : memref<524288xf32>)

// A per-channel operand keeps N and C apart; H and W merge.
// CHECK-LABEL: func.func @bn
// CHECK-SAME: (%[[A:.*]]: memref<16x32x32x32xf32>, %[[S:.*]]: memref<32xf32>, %[[C:.*]]: memref<16x32x32x32xf32>)
// CHECK: %[[A1:.*]] = memref.collapse_shape %[[A]] {{\[\[}}0], [1], [2, 3]] : memref<16x32x32x32xf32> into memref<16x32x1024xf32>
// CHECK: %[[C1:.*]] = memref.collapse_shape %[[C]] {{\[\[}}0], [1], [2, 3]]
// CHECK: linalg.generic {indexing_maps = [#[[ID3]], #[[CH]], #[[ID3]]], {{.*}} ins(%[[A1]], %[[S]] : memref<16x32x1024xf32>, memref<32xf32>)

// N and C swap places in the output: only H and W merge.
// CHECK-LABEL: func.func @transposed
// CHECK: memref.collapse_shape %{{.*}} {{\[\[}}0], [1], [2, 3]] : memref<32x16x32x32xf32> into memref<32x16x1024xf32>
// CHECK: linalg.generic {indexing_maps = [#[[ID3]], #[[TR]]]

// A strided (non-contiguous) buffer: left alone.
// CHECK-LABEL: func.func @strided
// CHECK-NOT: memref.collapse_shape
// CHECK: linalg.generic {indexing_maps = [#[[ID2]], #[[ID2]]], iterator_types = ["parallel", "parallel"]}

#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#ch = affine_map<(d0, d1, d2, d3) -> (d1)>
#tr = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2, d3)>
func.func @relu_bwd(%a: memref<16x32x32x32xf32>, %b: memref<16x32x32x32xf32>, %c: memref<16x32x32x32xf32>) {
  %z = arith.constant 0.0 : f32
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%a, %b : memref<16x32x32x32xf32>, memref<16x32x32x32xf32>) outs(%c : memref<16x32x32x32xf32>) {
  ^bb0(%x: f32, %g: f32, %o: f32):
    %p = arith.cmpf ogt, %x, %z : f32
    %r = arith.select %p, %g, %z : f32
    linalg.yield %r : f32
  }
  return
}
func.func @bn(%a: memref<16x32x32x32xf32>, %s: memref<32xf32>, %c: memref<16x32x32x32xf32>) {
  linalg.generic {indexing_maps = [#id, #ch, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%a, %s : memref<16x32x32x32xf32>, memref<32xf32>) outs(%c : memref<16x32x32x32xf32>) {
  ^bb0(%x: f32, %g: f32, %o: f32):
    %r = arith.mulf %x, %g : f32
    linalg.yield %r : f32
  }
  return
}
func.func @transposed(%a: memref<16x32x32x32xf32>, %c: memref<32x16x32x32xf32>) {
  linalg.generic {indexing_maps = [#id, #tr], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%a : memref<16x32x32x32xf32>) outs(%c : memref<32x16x32x32xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  return
}
func.func @strided(%a: memref<4x8xf32, strided<[16, 1]>>, %c: memref<4x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<4x8xf32, strided<[16, 1]>>) outs(%c : memref<4x8xf32>) {
  ^bb0(%x: f32, %o: f32):
    linalg.yield %x : f32
  }
  return
}
