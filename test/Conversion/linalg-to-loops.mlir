// autopar-linalg-to-loops: linalg ops on memrefs become scf.for nests as with
// convert-linalg-to-loops; the first loop with more than one iteration gets
// autopar.parallel = <iterations of the loops inside it> when the loops
// around it run once and it walks a parallel dim that indexes every output.
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-linalg-to-loops))' -split-input-file | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>

// CHECK-LABEL: func.func @elementwise(
// CHECK:         scf.for
// CHECK:           scf.for
// CHECK:             arith.addf
// CHECK:           }
// CHECK-NEXT:    } {autopar.parallel = 16 : i64}
// CHECK-NOT:     linalg.generic
func.func @elementwise(%a: memref<8x16xf32>, %b: memref<8x16xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<8x16xf32>) outs(%b : memref<8x16xf32>) {
  ^bb0(%x: f32, %y: f32):
    %z = arith.addf %x, %x : f32
    linalg.yield %z : f32
  }
  return
}

// -----

// A batch of one: the loop over it runs once, and the rows under it carry
// the mark (their inner loop: the reduction's 32 iterations).

// CHECK-LABEL: func.func @rows_of_batch_one(
// CHECK:         scf.for %[[B:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:      scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT:        scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step
// CHECK:               memref.store %{{.*}}, %{{.*}}[%[[B]], %[[R]]]
// CHECK:             }
// CHECK-NEXT:      } {autopar.parallel = 32 : i64}
// CHECK-NEXT:    }
// CHECK-NOT:     autopar.parallel
func.func @rows_of_batch_one(%a: memref<1x64x32xf32>, %s: memref<1x64xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a : memref<1x64x32xf32>) outs(%s : memref<1x64xf32>) {
  ^bb0(%x: f32, %y: f32):
    %z = arith.addf %x, %y : f32
    linalg.yield %z : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Not marked: a reduction outermost; an output element written by two
// iterations (d0 floordiv 2); every loop of one iteration; dynamic sizes; an
// input reading the output's buffer through another map.

// CHECK-LABEL: func.func @unmarked(
// CHECK-NOT:     autopar.parallel
// CHECK:         return
func.func @unmarked(%a: memref<8x16xf32>, %r: memref<16xf32>, %h: memref<4x16xf32>,
                    %one: memref<1x1xf32>, %d: memref<?x16xf32>, %sq: memref<16x16xf32>) {
  linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]}
      ins(%a : memref<8x16xf32>) outs(%r : memref<16xf32>) {
  ^bb0(%x: f32, %y: f32):
    %z = arith.addf %x, %y : f32
    linalg.yield %z : f32
  }
  linalg.generic {indexing_maps = [#id, affine_map<(d0, d1) -> (d0 floordiv 2, d1)>], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<8x16xf32>) outs(%h : memref<4x16xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%one : memref<1x1xf32>) outs(%one : memref<1x1xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%d : memref<?x16xf32>) outs(%d : memref<?x16xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, #id], iterator_types = ["parallel", "parallel"]}
      ins(%sq : memref<16x16xf32>) outs(%sq : memref<16x16xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// In place through the same map: each iteration reads what it writes.

// CHECK-LABEL: func.func @in_place(
// CHECK:         } {autopar.parallel = 16 : i64}
func.func @in_place(%a: memref<8x16xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<8x16xf32>) outs(%a : memref<8x16xf32>) {
  ^bb0(%x: f32, %y: f32):
    %z = arith.mulf %x, %x : f32
    linalg.yield %z : f32
  }
  return
}
