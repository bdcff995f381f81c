// autopar-gpu-warp-reductions: a row reduction becomes one warp per row (a
// lane loop from the identity, five xor shuffles, lane 0 updating the output),
// also over two reduction dims and for a max; tiled, the lane is the fastest
// index. Reductions the pass does not handle keep one thread per output.
// RUN: autopar-opt %s --autopar-gpu-warp-reductions --split-input-file | FileCheck %s
// RUN: autopar-opt %s --autopar-gpu-warp-reductions --autopar-gpu-tile-parallel-loops --canonicalize --split-input-file | FileCheck %s --check-prefix=TILED

// A row sum (softmax's denominator, layer norm's mean): one warp per row.
// Lane l folds elements l, l+32, ... of its row from the identity, five xor
// shuffles combine the 32 partials, and lane 0 folds the row's total into
// the output (which holds the fill, as linalg's semantics say).
// CHECK-LABEL: func.func @row_sum
// CHECK-SAME: (%[[X:.*]]: memref<8x64xbf16>, %[[OUT:.*]]: memref<8xf32>)
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : index
// CHECK-DAG: %[[C32:.*]] = arith.constant 32 : index
// CHECK: scf.parallel (%[[ROW:.*]], %[[LANE:.*]]) = (%{{.*}}, %{{.*}}) to (%[[C8]], %[[C32]])
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[PART:.*]] = scf.for %[[K:.*]] = %[[LANE]] to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (f32)
// CHECK:   %[[V:.*]] = memref.load %[[X]][%{{.*}}, %{{.*}}] : memref<8x64xbf16>
// CHECK:   %[[E:.*]] = arith.extf %[[V]]
// CHECK:   %[[S:.*]] = arith.addf %[[E]], %[[ACC]] : f32
// CHECK:   scf.yield %[[S]]
// CHECK: %[[SH1:.*]], %{{.*}} = gpu.shuffle xor %[[PART]], %{{.*}}, %{{.*}} : f32
// CHECK: %[[T1:.*]] = arith.addf %[[SH1]], %[[PART]]
// CHECK-COUNT-4: gpu.shuffle xor
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[LANE]], %{{.*}} : index
// CHECK: scf.if %[[FIRST]] {
// CHECK:   %[[OLD:.*]] = memref.load %[[OUT]][%[[ROW]]]
// CHECK:   %[[NEW:.*]] = arith.addf %{{.*}}, %[[OLD]] : f32
// CHECK:   memref.store %[[NEW]], %[[OUT]][%[[ROW]]]
// CHECK-NOT: linalg.generic
//
// Tiled for the GPU, the nest is collapsed with the lane fastest: lane =
// index mod 32, row = index / 32, so each warp of a block holds one row.
// TILED-LABEL: func.func @row_sum
// TILED: scf.parallel (%[[I:.*]]) =
// TILED: %[[LANE:.*]] = arith.remsi %[[I]], %c32
// TILED: %[[ROW:.*]] = arith.divsi %[[I]], %c32
// TILED: scf.for %{{.*}} = %[[LANE]] to %c64 step %c32
// TILED: memref.load %{{.*}}[%[[ROW]], %{{.*}}]
func.func @row_sum(%x: memref<8x64xbf16>, %out: memref<8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x64xbf16>) outs(%out : memref<8xf32>) {
  ^bb0(%in: bf16, %o: f32):
    %0 = arith.extf %in : bf16 to f32
    %1 = arith.addf %0, %o : f32
    linalg.yield %1 : f32
  }
  return
}

// -----

// Two reduction dims (a mean over H and W) are walked as one linear index,
// split back into (h, w) with the last fastest; a maximum starts from -inf
// and keeps its combining op; the body's linalg.index reads the loop index.
// CHECK-LABEL: func.func @max_over_two_dims
// CHECK: scf.parallel (%[[C:.*]], %[[LANE:.*]]) =
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: scf.for %[[K:.*]] = %[[LANE]] to %c96 step %c32{{.*}} iter_args(%[[ACC:.*]] = %[[NEGINF]])
// CHECK:   %[[W:.*]] = arith.remui %[[K]], %c12
// CHECK:   %[[H:.*]] = arith.divui %[[K]], %c12
// CHECK:   memref.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<4x8x12xf32>
// CHECK:   arith.index_cast %[[W]]
// CHECK:   arith.maximumf %[[ACC]], %{{.*}} : f32
// CHECK: gpu.shuffle xor
// CHECK: arith.maximumf
func.func @max_over_two_dims(%x: memref<4x8x12xf32>, %out: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(c, h, w) -> (c, h, w)>, affine_map<(c, h, w) -> (c)>],
                  iterator_types = ["parallel", "reduction", "reduction"]}
      ins(%x : memref<4x8x12xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%in: f32, %o: f32):
    %w = linalg.index 2 : index
    %wi = arith.index_cast %w : index to i32
    %wf = arith.sitofp %wi : i32 to f32
    %v = arith.addf %in, %wf : f32
    %m = arith.maximumf %o, %v : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// Not rewritten (one thread per output element stays): a row shorter than
// min-reduction-size, a bf16 accumulator (shuffles are 32-bit), an output
// read again in the body, a combiner that is not associative (subf), and a
// reduction dim before a parallel one.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: gpu.shuffle
// CHECK-COUNT-5: linalg.generic
// CHECK-NOT: gpu.shuffle
func.func @kept(%short: memref<8x16xf32>, %o8: memref<8xf32>, %x: memref<8x64xf32>,
                %obf: memref<8xbf16>, %xbf: memref<8x64xbf16>, %xt: memref<64x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%short : memref<8x16xf32>) outs(%o8 : memref<8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %1 = arith.addf %in, %o : f32
    linalg.yield %1 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%xbf : memref<8x64xbf16>) outs(%obf : memref<8xbf16>) {
  ^bb0(%in: bf16, %o: bf16):
    %1 = arith.addf %in, %o : bf16
    linalg.yield %1 : bf16
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x64xf32>) outs(%o8 : memref<8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %0 = arith.mulf %in, %o : f32
    %1 = arith.addf %0, %o : f32
    linalg.yield %1 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x64xf32>) outs(%o8 : memref<8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %1 = arith.subf %o, %in : f32
    linalg.yield %1 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%xt : memref<64x8xf32>) outs(%o8 : memref<8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %1 = arith.addf %in, %o : f32
    linalg.yield %1 : f32
  }
  return
}
