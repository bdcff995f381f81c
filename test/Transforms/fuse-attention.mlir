// autopar-fuse-attention: softmax(scale * Q K^T + mask) V as the importer writes it becomes one
// autopar.attention; a constant causal mask (additive or masked_fill) becomes the causal flag;
// anything between the pieces, an intermediate used elsewhere, or a scale unknown at compile
// time leaves the ops as they are.
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-fuse-attention,canonicalize))' --split-input-file | FileCheck %s
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-fuse-attention{max-head-dim=8}))' --split-input-file | FileCheck %s --check-prefix=SMALL

// GPT-2's pattern: scores / sqrt(d) + a constant causal mask of -1e9.
// CHECK-LABEL: func.func @gpt_causal
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8x16xf32>, %[[K:.*]]: tensor<2x4x16x8xf32>, %[[V:.*]]: tensor<2x4x8x16xf32>)
// CHECK: %[[KT:.*]] = linalg.transpose ins(%[[K]] : tensor<2x4x16x8xf32>) {{.*}} permutation = [0, 1, 3, 2]
// CHECK: %[[O:.*]]:2 = autopar.attention ins(%[[Q]], %[[KT]], %[[V]] : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
// CHECK-SAME: outs({{.*}} : tensor<2x4x8x16xf32>, tensor<2x4x8xf32>) {causal, scale = 2.500000e-01 : f64}
// CHECK-NOT: linalg.reduce
// CHECK-NOT: linalg.generic
// CHECK: return %[[O]]#0
// SMALL-LABEL: func.func @gpt_causal
// SMALL-NOT: autopar.attention
// SMALL: linalg.reduce
#lhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#rhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#out = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#row = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#scalar = affine_map<(d0, d1, d2, d3) -> ()>
#ij = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#bj = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
func.func @gpt_causal(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e0 = tensor.empty() : tensor<2x4x8x8xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %s0 = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) outs(%f0 : tensor<2x4x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x8xf32>
  %c4 = arith.constant dense<4.0> : tensor<f32>
  %mask = arith.constant dense<[[0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, 0.0, 0.0, -1.0e+09, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0e+09, -1.0e+09], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0e+09], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<8x8xf32>
  %x0 = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0, %c4 : tensor<2x4x8x8xf32>, tensor<f32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %c: f32, %o: f32):
    %y = arith.divf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x8xf32>
  %x = linalg.generic {indexing_maps = [#id, #ij, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x0, %mask : tensor<2x4x8x8xf32>, tensor<8x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mk: f32, %o: f32):
    %y = arith.addf %in, %mk : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x8xf32>
  %e1 = tensor.empty() : tensor<2x4x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %max = linalg.reduce ins(%x : tensor<2x4x8x8xf32>) outs(%f1 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.maximumf %in, %init : f32
      linalg.yield %r : f32
    }
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %max : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %x1 = math.exp %d : f32
    linalg.yield %x1 : f32
  } -> tensor<2x4x8x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %sum = linalg.reduce ins(%ex : tensor<2x4x8x8xf32>) outs(%f2 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.addf %in, %init : f32
      linalg.yield %r : f32
    }
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %d = arith.divf %in, %sm : f32
    linalg.yield %d : f32
  } -> tensor<2x4x8x8xf32>

  %e2 = tensor.empty() : tensor<2x4x8x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %o = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) outs(%f3 : tensor<2x4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}


// -----

// A BERT-style padding mask [B, T] (an argument) is added: it becomes the
// rank-4 mask [B, 1, 1, T]; the scale is a constant multiplier in the body.
// CHECK-LABEL: func.func @padding_mask
// CHECK-SAME: %[[PAD:[a-z0-9]*]]: tensor<2x8xf32>)
// CHECK: %[[M:.*]] = tensor.expand_shape %[[PAD]] {{\[\[}}0], [1, 2, 3]] output_shape [2, 1, 1, 8]
// CHECK: autopar.attention ins({{.*}} mask %[[M]] : {{.*}}, tensor<2x1x1x8xf32>)
// CHECK-SAME: {scale = 1.250000e-01 : f64}
#lhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#rhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#out = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#row = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#scalar = affine_map<(d0, d1, d2, d3) -> ()>
#ij = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#bj = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
func.func @padding_mask(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x8x16xf32>, %pad: tensor<2x8xf32>) -> tensor<2x4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e0 = tensor.empty() : tensor<2x4x8x8xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %s0 = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) outs(%f0 : tensor<2x4x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x8xf32>
  %x0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x4x8x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %c = arith.constant 0.125 : f32
    %y = arith.mulf %c, %in : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x8xf32>
  %x = linalg.generic {indexing_maps = [#id, #bj, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x0, %pad : tensor<2x4x8x8xf32>, tensor<2x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mk: f32, %o: f32):
    %y = arith.addf %in, %mk : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x8xf32>
  %e1 = tensor.empty() : tensor<2x4x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %max = linalg.reduce ins(%x : tensor<2x4x8x8xf32>) outs(%f1 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.maximumf %in, %init : f32
      linalg.yield %r : f32
    }
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %max : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %x1 = math.exp %d : f32
    linalg.yield %x1 : f32
  } -> tensor<2x4x8x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %sum = linalg.reduce ins(%ex : tensor<2x4x8x8xf32>) outs(%f2 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.addf %in, %init : f32
      linalg.yield %r : f32
    }
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %d = arith.divf %in, %sm : f32
    linalg.yield %d : f32
  } -> tensor<2x4x8x8xf32>

  %e2 = tensor.empty() : tensor<2x4x8x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %o = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) outs(%f3 : tensor<2x4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}


// -----

// PyTorch's masked_fill(tril == 0, -inf) with a constant condition, scaled
// after: the causal flag, and the scale.
// CHECK-LABEL: func.func @masked_fill
// CHECK-NOT: arith.select
// CHECK: autopar.attention
// CHECK-SAME: {causal, scale = 2.500000e-01 : f64}
#lhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#rhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#out = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#row = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#scalar = affine_map<(d0, d1, d2, d3) -> ()>
#ij = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#bj = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
func.func @masked_fill(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e0 = tensor.empty() : tensor<2x4x8x8xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %s0 = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) outs(%f0 : tensor<2x4x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x8xf32>
  %cond = arith.constant dense<[[false, true, true, true, true, true, true, true], [false, false, true, true, true, true, true, true], [false, false, false, true, true, true, true, true], [false, false, false, false, true, true, true, true], [false, false, false, false, false, true, true, true], [false, false, false, false, false, false, true, true], [false, false, false, false, false, false, false, true], [false, false, false, false, false, false, false, false]]> : tensor<8x8xi1>
  %x0 = linalg.generic {indexing_maps = [#ij, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%cond, %s0 : tensor<8x8xi1>, tensor<2x4x8x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%cd: i1, %in: f32, %o: f32):
    %y = arith.select %cd, %ninf, %in : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x8xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x0 : tensor<2x4x8x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x8xf32>
  %e1 = tensor.empty() : tensor<2x4x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %max = linalg.reduce ins(%x : tensor<2x4x8x8xf32>) outs(%f1 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.maximumf %in, %init : f32
      linalg.yield %r : f32
    }
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %max : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %x1 = math.exp %d : f32
    linalg.yield %x1 : f32
  } -> tensor<2x4x8x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %sum = linalg.reduce ins(%ex : tensor<2x4x8x8xf32>) outs(%f2 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.addf %in, %init : f32
      linalg.yield %r : f32
    }
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %d = arith.divf %in, %sm : f32
    linalg.yield %d : f32
  } -> tensor<2x4x8x8xf32>

  %e2 = tensor.empty() : tensor<2x4x8x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %o = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) outs(%f3 : tensor<2x4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}


// -----

// A constant mask that is not causal, scaled after it is added: the mask is
// folded with the scale (-2 * 0.5) and broadcast as [1, 1, 1, T].
// CHECK-LABEL: func.func @scaled_constant_mask
// CHECK: %[[M:.*]] = arith.constant dense<{{\[\[\[\[}}0.000000e+00, -1.000000e+00, {{.*}}> : tensor<1x1x1x8xf32>
// CHECK: autopar.attention ins({{.*}} mask %[[M]] :
// CHECK-SAME: {scale = 5.000000e-01 : f64}
#lhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#rhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#out = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#row = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#scalar = affine_map<(d0, d1, d2, d3) -> ()>
#ij = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#bj = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
func.func @scaled_constant_mask(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e0 = tensor.empty() : tensor<2x4x8x8xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %s0 = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) outs(%f0 : tensor<2x4x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x8xf32>
  %mask = arith.constant dense<[[0.0, -2.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<1x8xf32>
  %x0 = linalg.generic {indexing_maps = [#id, affine_map<(d0, d1, d2, d3) -> (0, d3)>, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0, %mask : tensor<2x4x8x8xf32>, tensor<1x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mk: f32, %o: f32):
    %y = arith.addf %in, %mk : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x8xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x0 : tensor<2x4x8x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %c = arith.constant 0.5 : f32
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x8xf32>
  %e1 = tensor.empty() : tensor<2x4x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %max = linalg.reduce ins(%x : tensor<2x4x8x8xf32>) outs(%f1 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.maximumf %in, %init : f32
      linalg.yield %r : f32
    }
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %max : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %x1 = math.exp %d : f32
    linalg.yield %x1 : f32
  } -> tensor<2x4x8x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %sum = linalg.reduce ins(%ex : tensor<2x4x8x8xf32>) outs(%f2 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.addf %in, %init : f32
      linalg.yield %r : f32
    }
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %d = arith.divf %in, %sm : f32
    linalg.yield %d : f32
  } -> tensor<2x4x8x8xf32>

  %e2 = tensor.empty() : tensor<2x4x8x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %o = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) outs(%f3 : tensor<2x4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}


// -----

// Attention dropout between the softmax and the second product: not fused.
// CHECK-LABEL: func.func @dropout_between
// CHECK-NOT: autopar.attention
// CHECK: linalg.reduce
// CHECK: return
#lhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#rhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#out = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#row = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#scalar = affine_map<(d0, d1, d2, d3) -> ()>
#ij = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#bj = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
func.func @dropout_between(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x8x16xf32>, %keep: tensor<2x4x8x8xf32>) -> tensor<2x4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e0 = tensor.empty() : tensor<2x4x8x8xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %s0 = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) outs(%f0 : tensor<2x4x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x8xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x4x8x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x8xf32>
  %e1 = tensor.empty() : tensor<2x4x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %max = linalg.reduce ins(%x : tensor<2x4x8x8xf32>) outs(%f1 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.maximumf %in, %init : f32
      linalg.yield %r : f32
    }
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %max : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %x1 = math.exp %d : f32
    linalg.yield %x1 : f32
  } -> tensor<2x4x8x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %sum = linalg.reduce ins(%ex : tensor<2x4x8x8xf32>) outs(%f2 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.addf %in, %init : f32
      linalg.yield %r : f32
    }
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %d = arith.divf %in, %sm : f32
    linalg.yield %d : f32
  } -> tensor<2x4x8x8xf32>
  %pd = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%p, %keep : tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %kp: f32, %o: f32):
    %y = arith.mulf %in, %kp : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x8xf32>
  %e2 = tensor.empty() : tensor<2x4x8x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %o = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%pd, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) outs(%f3 : tensor<2x4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}


// -----

// The probabilities are also returned: not fused.
// CHECK-LABEL: func.func @probabilities_used
// CHECK-NOT: autopar.attention
// CHECK: return
#lhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#rhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#out = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#row = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#scalar = affine_map<(d0, d1, d2, d3) -> ()>
#ij = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#bj = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
func.func @probabilities_used(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x8x16xf32>) -> (tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e0 = tensor.empty() : tensor<2x4x8x8xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %s0 = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) outs(%f0 : tensor<2x4x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x8xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0 : tensor<2x4x8x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x8xf32>
  %e1 = tensor.empty() : tensor<2x4x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %max = linalg.reduce ins(%x : tensor<2x4x8x8xf32>) outs(%f1 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.maximumf %in, %init : f32
      linalg.yield %r : f32
    }
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %max : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %x1 = math.exp %d : f32
    linalg.yield %x1 : f32
  } -> tensor<2x4x8x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %sum = linalg.reduce ins(%ex : tensor<2x4x8x8xf32>) outs(%f2 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.addf %in, %init : f32
      linalg.yield %r : f32
    }
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %d = arith.divf %in, %sm : f32
    linalg.yield %d : f32
  } -> tensor<2x4x8x8xf32>

  %e2 = tensor.empty() : tensor<2x4x8x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %o = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) outs(%f3 : tensor<2x4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x16xf32>
  return %o , %p : tensor<2x4x8x16xf32>, tensor<2x4x8x8xf32>
}


// -----

// A scale known only at run time: not fused.
// CHECK-LABEL: func.func @runtime_scale
// CHECK-NOT: autopar.attention
// CHECK: return
#lhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#rhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#out = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#row = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#scalar = affine_map<(d0, d1, d2, d3) -> ()>
#ij = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#bj = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
func.func @runtime_scale(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x8x16xf32>, %t: tensor<f32>) -> tensor<2x4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e0 = tensor.empty() : tensor<2x4x8x8xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %s0 = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) outs(%f0 : tensor<2x4x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x8xf32>
  %x = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0, %t : tensor<2x4x8x8xf32>, tensor<f32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %c: f32, %o: f32):
    %y = arith.divf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x8xf32>
  %e1 = tensor.empty() : tensor<2x4x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %max = linalg.reduce ins(%x : tensor<2x4x8x8xf32>) outs(%f1 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.maximumf %in, %init : f32
      linalg.yield %r : f32
    }
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %max : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %x1 = math.exp %d : f32
    linalg.yield %x1 : f32
  } -> tensor<2x4x8x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %sum = linalg.reduce ins(%ex : tensor<2x4x8x8xf32>) outs(%f2 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.addf %in, %init : f32
      linalg.yield %r : f32
    }
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %d = arith.divf %in, %sm : f32
    linalg.yield %d : f32
  } -> tensor<2x4x8x8xf32>

  %e2 = tensor.empty() : tensor<2x4x8x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %o = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) outs(%f3 : tensor<2x4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// masked_fill whose condition is computed at run time (PyTorch's tril
// buffer is a weight): the additive mask is made from it (the fill where the
// condition holds, else 0) and broadcast as [1, 1, S, T].
// CHECK-LABEL: func.func @masked_fill_runtime_condition
// CHECK-SAME: %[[COND:[a-z0-9]*]]: tensor<8x8xi1>)
// CHECK: %[[ADD:.*]] = linalg.generic {{.*}} ins(%[[COND]] : tensor<8x8xi1>) outs(%{{.*}} : tensor<8x8xf32>)
// CHECK: arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK: %[[M:.*]] = tensor.expand_shape %[[ADD]] {{.*}} output_shape [1, 1, 8, 8]
// CHECK: autopar.attention ins({{.*}} mask %[[M]] :
// CHECK-SAME: {scale = 2.500000e-01 : f64}
#lhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#rhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#out = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#row = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#scalar = affine_map<(d0, d1, d2, d3) -> ()>
#ij = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#bj = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
func.func @masked_fill_runtime_condition(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x8x16xf32>, %cond: tensor<8x8xi1>) -> tensor<2x4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e0 = tensor.empty() : tensor<2x4x8x8xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %s0 = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) outs(%f0 : tensor<2x4x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x8xf32>
  %ninf_t = arith.constant dense<0xFF800000> : tensor<f32>
  %x0 = linalg.generic {indexing_maps = [#ij, #scalar, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%cond, %ninf_t, %s0 : tensor<8x8xi1>, tensor<f32>, tensor<2x4x8x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%cd: i1, %fl: f32, %in: f32, %o: f32):
    %y = arith.select %cd, %fl, %in : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x8xf32>
  %x = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x0 : tensor<2x4x8x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %c = arith.constant 0.25 : f32
    %y = arith.mulf %in, %c : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x8xf32>
  %e1 = tensor.empty() : tensor<2x4x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %max = linalg.reduce ins(%x : tensor<2x4x8x8xf32>) outs(%f1 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.maximumf %in, %init : f32
      linalg.yield %r : f32
    }
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %max : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %x1 = math.exp %d : f32
    linalg.yield %x1 : f32
  } -> tensor<2x4x8x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %sum = linalg.reduce ins(%ex : tensor<2x4x8x8xf32>) outs(%f2 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.addf %in, %init : f32
      linalg.yield %r : f32
    }
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %d = arith.divf %in, %sm : f32
    linalg.yield %d : f32
  } -> tensor<2x4x8x8xf32>

  %e2 = tensor.empty() : tensor<2x4x8x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %o = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) outs(%f3 : tensor<2x4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// The causal mask as an exporter writes it (Trilu of ones, then Where),
// computed by generics from constants and indices alone: evaluated at
// compile time, it is the causal flag; the mask's ops are left dead.
// CHECK-LABEL: func.func @computed_causal_mask
// CHECK-NOT: linalg.generic
// CHECK: autopar.attention
// CHECK-SAME: {causal, scale = 1.000000e+00 : f64}
#lhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#rhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#out = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#row = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#scalar = affine_map<(d0, d1, d2, d3) -> ()>
#ij = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#bj = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
func.func @computed_causal_mask(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %e0 = tensor.empty() : tensor<2x4x8x8xf32>
  %f0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %s0 = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) outs(%f0 : tensor<2x4x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x8xf32>
  %one = arith.constant 1.0 : f32
  %big = arith.constant -1.0e+09 : f32
  %c0 = arith.constant 0 : index
  %me = tensor.empty() : tensor<8x8xf32>
  %ones = linalg.fill ins(%one : f32) outs(%me : tensor<8x8xf32>) -> tensor<8x8xf32>
  %tril = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%ones : tensor<8x8xf32>) outs(%me : tensor<8x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %r = linalg.index 0 : index
    %c = linalg.index 1 : index
    %d = arith.subi %c, %r : index
    %below = arith.cmpi sle, %d, %c0 : index
    %vb = arith.select %below, %in, %zero : f32
    linalg.yield %vb : f32
  } -> tensor<8x8xf32>
  %mask = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%tril : tensor<8x8xf32>) outs(%me : tensor<8x8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %keep = arith.cmpf une, %in, %zero : f32
    %vm = arith.select %keep, %zero, %big : f32
    linalg.yield %vm : f32
  } -> tensor<8x8xf32>
  %x = linalg.generic {indexing_maps = [#id, #ij, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0, %mask : tensor<2x4x8x8xf32>, tensor<8x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mk: f32, %o: f32):
    %y = arith.addf %in, %mk : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x8xf32>
  %e1 = tensor.empty() : tensor<2x4x8xf32>
  %f1 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %max = linalg.reduce ins(%x : tensor<2x4x8x8xf32>) outs(%f1 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.maximumf %in, %init : f32
      linalg.yield %r : f32
    }
  %ex = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %max : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %x1 = math.exp %d : f32
    linalg.yield %x1 : f32
  } -> tensor<2x4x8x8xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %sum = linalg.reduce ins(%ex : tensor<2x4x8x8xf32>) outs(%f2 : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.addf %in, %init : f32
      linalg.yield %r : f32
    }
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%e0 : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %d = arith.divf %in, %sm : f32
    linalg.yield %d : f32
  } -> tensor<2x4x8x8xf32>

  %e2 = tensor.empty() : tensor<2x4x8x16xf32>
  %f3 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %o = linalg.generic {indexing_maps = [#lhs, #rhs, #out], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) outs(%f3 : tensor<2x4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}
