// autopar-gpu-tile-parallel-loops after autopar-gpu-warp-reductions: a
// block-size that is not a multiple of the warp width (48) is an error naming
// the option.
// RUN: autopar-opt %s --autopar-gpu-warp-reductions --autopar-gpu-tile-parallel-loops="block-size=48" -verify-diagnostics -o /dev/null

// Warp reductions need blocks of whole warps: a block size that is not a
// multiple of 32 would split a row's lanes over two warps, whose shuffles
// would then mix rows. The tiling pass refuses it, naming the option.
func.func @row_sum(%x: memref<8x64xf32>, %out: memref<8xf32>) {
  // expected-error @+1 {{autopar-gpu-tile-parallel-loops: a loop with warp shuffles of width 32 needs blocks of a multiple of that many threads, not 48 (block-size)}}
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x64xf32>) outs(%out : memref<8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %1 = arith.addf %in, %o : f32
    linalg.yield %1 : f32
  }
  return
}
