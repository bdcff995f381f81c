// autopar-split-full-reductions: a reduction of a whole tensor to a scalar
// becomes one partial per outer index (a row reduction) and a reduction of
// the partials into the original output; small, partial or non-combiner
// reductions are left alone.
// RUN: autopar-opt %s -split-input-file -autopar-split-full-reductions="min-size=64" | FileCheck %s

// A sum of squares (a gradient norm's term) accumulating into %init.
// CHECK-LABEL: func.func @sum_of_squares
// CHECK-SAME: (%[[G:.*]]: tensor<16x8xf32>, %[[INIT:.*]]: tensor<f32>)
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[FILL:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<16xf32>)
// CHECK: %[[PART:.*]] = linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = ["parallel", "reduction"]}
// CHECK-SAME: ins(%[[G]] : tensor<16x8xf32>) outs(%[[FILL]] : tensor<16xf32>)
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: %[[TOTAL:.*]] = linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}], iterator_types = ["reduction"]}
// CHECK-SAME: ins(%[[PART]] : tensor<16xf32>) outs(%[[INIT]] : tensor<f32>)
// CHECK-NEXT: ^bb0(%[[P:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT: %[[S:.*]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK-NEXT: linalg.yield %[[S]]
// CHECK: return %[[TOTAL]]
#in = affine_map<(i, j) -> (i, j)>
#out = affine_map<(i, j) -> ()>
func.func @sum_of_squares(%g: tensor<16x8xf32>, %init: tensor<f32>) -> tensor<f32> {
  %r = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "reduction"]}
      ins(%g : tensor<16x8xf32>) outs(%init : tensor<f32>) {
  ^bb0(%x: f32, %acc: f32):
    %sq = arith.mulf %x, %x : f32
    %s = arith.addf %acc, %sq : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// A maximum, the accumulator second: the partials start at -inf and the
// combination keeps the operand order.
// CHECK-LABEL: func.func @maximum
// CHECK: arith.constant 0xFF800000 : f32
// CHECK: iterator_types = ["parallel", "reduction", "reduction"]
// CHECK: iterator_types = ["reduction"]
// CHECK-NEXT: ^bb0(%[[P:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT: arith.maximumf %[[P]], %[[ACC]] : f32
#in = affine_map<(i, j, k) -> (i, k, j)>
#out = affine_map<(i, j, k) -> ()>
func.func @maximum(%g: tensor<4x4x8xf32>, %init: tensor<f32>) -> tensor<f32> {
  %r = linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "reduction", "reduction"]}
      ins(%g : tensor<4x4x8xf32>) outs(%init : tensor<f32>) {
  ^bb0(%x: f32, %acc: f32):
    %m = arith.maximumf %x, %acc : f32
    linalg.yield %m : f32
  } -> tensor<f32>
  return %r : tensor<f32>
}

// -----

// Left alone: below min-size (8x4 = 32 elements), one loop only, an output
// with a parallel dim, and a body whose accumulator is used twice.
// CHECK-LABEL: func.func @left_alone
// CHECK-COUNT-4: linalg.generic
// CHECK-NOT: linalg.generic
// CHECK-NOT: linalg.fill
#in2 = affine_map<(i, j) -> (i, j)>
#scalar2 = affine_map<(i, j) -> ()>
#row2 = affine_map<(i, j) -> (i)>
#in1 = affine_map<(i) -> (i)>
#scalar1 = affine_map<(i) -> ()>
func.func @left_alone(%small: tensor<8x4xf32>, %flat: tensor<1024xf32>, %big: tensor<64x64xf32>, %init: tensor<f32>, %rows: tensor<64xf32>) -> (tensor<f32>, tensor<f32>, tensor<64xf32>, tensor<f32>) {
  %a = linalg.generic {indexing_maps = [#in2, #scalar2], iterator_types = ["reduction", "reduction"]}
      ins(%small : tensor<8x4xf32>) outs(%init : tensor<f32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %b = linalg.generic {indexing_maps = [#in1, #scalar1], iterator_types = ["reduction"]}
      ins(%flat : tensor<1024xf32>) outs(%init : tensor<f32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %c = linalg.generic {indexing_maps = [#in2, #row2], iterator_types = ["parallel", "reduction"]}
      ins(%big : tensor<64x64xf32>) outs(%rows : tensor<64xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %acc, %x : f32
    linalg.yield %s : f32
  } -> tensor<64xf32>
  %d = linalg.generic {indexing_maps = [#in2, #scalar2], iterator_types = ["reduction", "reduction"]}
      ins(%big : tensor<64x64xf32>) outs(%init : tensor<f32>) {
  ^bb0(%x: f32, %acc: f32):
    %t = arith.mulf %acc, %x : f32
    %s = arith.addf %acc, %t : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %a, %b, %c, %d : tensor<f32>, tensor<f32>, tensor<64xf32>, tensor<f32>
}
