// autopar-gpu-tile-parallel-loops: an outermost scf.parallel is collapsed to
// one dim and tiled by block-size (256, or 128) with a guard for the tail;
// after the GPU mapping the launch sizes are exact: a loop smaller than a block
// is one block of that many threads, a reduction stays a loop in each thread.
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-gpu-tile-parallel-loops))' --split-input-file | FileCheck %s --check-prefix=TILE
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-gpu-tile-parallel-loops,gpu-map-parallel-loops,convert-parallel-loops-to-gpu,canonicalize))' --split-input-file | FileCheck %s --check-prefix=LAUNCH
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-gpu-tile-parallel-loops{block-size=128},gpu-map-parallel-loops,convert-parallel-loops-to-gpu,canonicalize))' --split-input-file | FileCheck %s --check-prefix=B128

// A 64x100 loop nest is collapsed into one dim of 6400 iterations, tiled by
// 256 (constant inner bounds, a guard for the tail), and becomes 25 blocks
// of 256 threads; consecutive threads write consecutive elements of a row.
// TILE-LABEL: func.func @two_dims
// TILE: scf.parallel (%[[B:.*]]) = ({{.*}}) to ({{.*}}) step (%[[STEP:.*]]) {
// TILE: scf.parallel (%[[T:.*]]) = ({{.*}}) to (%[[STEP]]) step
// TILE: scf.if
// TILE: arith.remsi
// TILE: arith.divsi
// TILE: memref.store
// LAUNCH-LABEL: func.func @two_dims
// LAUNCH-DAG: %[[C1:.*]] = arith.constant 1 : index
// LAUNCH-DAG: %[[C25:.*]] = arith.constant 25 : index
// LAUNCH-DAG: %[[C256:.*]] = arith.constant 256 : index
// LAUNCH-DAG: %[[C6400:.*]] = arith.constant 6400 : index
// LAUNCH: gpu.launch blocks({{.*}}) in ({{.*}} = %[[C25]], {{.*}} = %[[C1]], {{.*}} = %[[C1]]) threads({{.*}}) in ({{.*}} = %[[C256]], {{.*}} = %[[C1]], {{.*}} = %[[C1]])
// LAUNCH: arith.cmpi ult, %{{.*}}, %[[C6400]]
// LAUNCH: memref.store
// B128-LABEL: func.func @two_dims
// B128-DAG: %[[C50:.*]] = arith.constant 50 : index
// B128-DAG: %[[C128:.*]] = arith.constant 128 : index
// B128: gpu.launch blocks({{.*}}) in ({{.*}} = %[[C50]], {{.*}}) threads({{.*}}) in ({{.*}} = %[[C128]],
func.func @two_dims(%x: memref<64x100xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c64 = arith.constant 64 : index
  %c100 = arith.constant 100 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c64, %c100) step (%c1, %c1) {
    memref.store %zero, %x[%i, %j] : memref<64x100xf32>
    scf.reduce
  }
  return
}

// -----

// Fewer iterations than a block: one block of exactly that many threads.
// LAUNCH-LABEL: func.func @small
// LAUNCH-DAG: %[[C1:.*]] = arith.constant 1 : index
// LAUNCH-DAG: %[[C4:.*]] = arith.constant 4 : index
// LAUNCH: gpu.launch blocks({{.*}}) in ({{.*}} = %[[C1]], {{.*}} = %[[C1]], {{.*}} = %[[C1]]) threads({{.*}}) in ({{.*}} = %[[C4]], {{.*}} = %[[C1]], {{.*}} = %[[C1]])
func.func @small(%x: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    memref.store %zero, %x[%i] : memref<4xf32>
    scf.reduce
  }
  return
}

// -----

// A reduction stays a sequential loop inside each thread: one thread per
// row of the softmax denominator, 8 rows, 16 steps each.
// LAUNCH-LABEL: func.func @row_sums
// LAUNCH-DAG: %[[C8:.*]] = arith.constant 8 : index
// LAUNCH: gpu.launch blocks({{.*}}) threads({{.*}}) in ({{.*}} = %[[C8]],
// LAUNCH: scf.for
// LAUNCH: memref.load
// LAUNCH: arith.addf
// LAUNCH: memref.store
func.func @row_sums(%x: memref<8x16xf32>, %s: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c16 = arith.constant 16 : index
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    scf.for %k = %c0 to %c16 step %c1 {
      %a = memref.load %x[%i, %k] : memref<8x16xf32>
      %acc = memref.load %s[%i] : memref<8xf32>
      %sum = arith.addf %a, %acc : f32
      memref.store %sum, %s[%i] : memref<8xf32>
    }
    scf.reduce
  }
  return
}
