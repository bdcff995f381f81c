// autopar-split-column-reductions: a sum over the tokens of [tokens,
// features] (a bias gradient) becomes P partials per feature, the split
// token loop's inputs expanded to [P, tokens / P, ...], then the partials,
// contiguous per feature, combined into the original init. Row reductions,
// short or wide ones and full reductions are left alone.
// RUN: autopar-opt %s --autopar-split-column-reductions="max-parts=64" --split-input-file | FileCheck %s
// RUN: autopar-opt %s --autopar-split-column-reductions="max-parts=16" --split-input-file | FileCheck %s --check-prefix=P16

// CHECK-DAG: #[[IN:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[PART:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-DAG: #[[ALL:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[OUT:.*]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @bias_gradient
// CHECK-SAME: (%[[DY:.*]]: tensor<2048x96xf32>, %[[INIT:.*]]: tensor<96xf32>)
// CHECK: %[[E:.*]] = tensor.expand_shape %[[DY]] {{\[\[}}0, 1], [2]] output_shape [64, 32, 96] : tensor<2048x96xf32> into tensor<64x32x96xf32>
// CHECK: %[[ZEROS:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<96x64xf32>)
// CHECK: %[[P:.*]] = linalg.generic {indexing_maps = [#[[IN]], #[[PART]]], iterator_types = ["parallel", "reduction", "parallel"]} ins(%[[E]] : tensor<64x32x96xf32>) outs(%[[ZEROS]] : tensor<96x64xf32>)
// CHECK:   arith.addf
// CHECK: %[[T:.*]] = linalg.generic {indexing_maps = [#[[ALL]], #[[OUT]]], iterator_types = ["parallel", "reduction"]} ins(%[[P]] : tensor<96x64xf32>) outs(%[[INIT]] : tensor<96xf32>)
// CHECK:   arith.addf
// CHECK: return %[[T]]
// P16-LABEL: func.func @bias_gradient
// P16: tensor.expand_shape {{.*}} output_shape [16, 128, 96]
func.func @bias_gradient(%dy: tensor<2048x96xf32>, %init: tensor<96xf32>) -> tensor<96xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%dy : tensor<2048x96xf32>) outs(%init : tensor<96xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<96xf32>
  return %r : tensor<96xf32>
}

// -----

// LayerNorm's weight gradient over [batch, sequence, features]: two
// reduction loops; the longer (sequence) is split; the per-token statistic
// (read by the split loop) is expanded too, the per-feature one is not.
// CHECK-LABEL: func.func @layer_norm_weight_gradient
// CHECK-DAG: tensor.expand_shape %{{.*}} {{\[\[}}0], [1, 2], [3]] output_shape [2, 64, 16, 48] : tensor<2x1024x48xbf16> into tensor<2x64x16x48xbf16>
// CHECK-DAG: tensor.expand_shape %{{.*}} {{\[\[}}0], [1, 2]] output_shape [2, 64, 16] : tensor<2x1024xf32> into tensor<2x64x16xf32>
// CHECK: linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "reduction", "parallel"]} ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<2x64x16x48xbf16>, tensor<2x64x16xf32>, tensor<48xf32>) outs(%{{.*}} : tensor<48x64xf32>)
// CHECK:   arith.extf
// CHECK:   arith.mulf
// CHECK: linalg.generic {{.*}} ins(%{{.*}} : tensor<48x64xf32>) outs(%{{.*}} : tensor<48xf32>)
func.func @layer_norm_weight_gradient(%dy: tensor<2x1024x48xbf16>, %rstd: tensor<2x1024xf32>, %g: tensor<48xf32>, %init: tensor<48xf32>) -> tensor<48xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d2)>, affine_map<(d0, d1, d2) -> (d2)>], iterator_types = ["reduction", "reduction", "parallel"]} ins(%dy, %rstd, %g : tensor<2x1024x48xbf16>, tensor<2x1024xf32>, tensor<48xf32>) outs(%init : tensor<48xf32>) {
  ^bb0(%a: bf16, %s: f32, %w: f32, %acc: f32):
    %x = arith.extf %a : bf16 to f32
    %m = arith.mulf %x, %s : f32
    %n = arith.mulf %m, %w : f32
    %t = arith.addf %n, %acc : f32
    linalg.yield %t : f32
  } -> tensor<48xf32>
  return %r : tensor<48xf32>
}

// -----

// A row reduction (the reduced dim is the contiguous one) is left to the
// warp-per-row lowering.
// CHECK-LABEL: func.func @row_sum
// CHECK-NOT: expand_shape
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK-NOT: linalg.generic
func.func @row_sum(%x: tensor<96x2048xf32>, %init: tensor<96xf32>) -> tensor<96xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<96x2048xf32>) outs(%init : tensor<96xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<96xf32>
  return %r : tensor<96xf32>
}

// -----

// Too short a column (below min-reduced) is left whole.
// CHECK-LABEL: func.func @short_column
// CHECK-NOT: expand_shape
func.func @short_column(%x: tensor<512x96xf32>, %init: tensor<96xf32>) -> tensor<96xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%x : tensor<512x96xf32>) outs(%init : tensor<96xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.addf %in, %acc : f32
    linalg.yield %s : f32
  } -> tensor<96xf32>
  return %r : tensor<96xf32>
}

// -----

// A maximum keeps its identity (-inf) in the partials.
// CHECK-LABEL: func.func @column_max
// CHECK: %[[LOWEST:.*]] = arith.constant 0xFF800000 : f32
// CHECK: linalg.fill ins(%[[LOWEST]] : f32) outs(%{{.*}} : tensor<96x64xf32>)
// CHECK: arith.maximumf
// CHECK: arith.maximumf
func.func @column_max(%x: tensor<4096x96xf32>, %init: tensor<96xf32>) -> tensor<96xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%x : tensor<4096x96xf32>) outs(%init : tensor<96xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %s = arith.maximumf %acc, %in : f32
    linalg.yield %s : f32
  } -> tensor<96xf32>
  return %r : tensor<96xf32>
}
