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

// -----

// The same chain keeping the upper triangle (j >= i): evaluated through the
// inlined Trilu and Where, it is not causal, so the mask stays an operand.
// CHECK-LABEL: func.func @computed_upper_mask
// CHECK: autopar.attention ins({{.*}} mask %{{.*}} : {{.*}}, tensor<1x1x8x8xf32>)
// CHECK-NOT: causal
// CHECK-SAME: {scale = 1.000000e+00 : f64}
#lhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>
#rhs = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>
#out = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#row = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
#scalar = affine_map<(d0, d1, d2, d3) -> ()>
#ij = affine_map<(d0, d1, d2, d3) -> (d2, d3)>
#bj = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
func.func @computed_upper_mask(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
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
    %below = arith.cmpi sge, %d, %c0 : index
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

// -----

// Grouped-query attention written k[:, :, None].expand(B, Hkv, g, T, D)
// .reshape(B, H, T, D), as autopar-sink-merging-reshapes leaves it: scores over
// (B, Hkv, g), the query split to [B, Hkv, g, S, D], key and value broadcast
// over g, the reductions generics. The fused op reads the key and value
// unrepeated, [B, Hkv, T, D]; the padding mask [B, T] is [B, 1, 1, T].
// CHECK-LABEL: func.func @gqa_expand
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8x16xf32>, %[[K:.*]]: tensor<2x2x8x16xf32>, %[[V:.*]]: tensor<2x2x8x16xf32>, %[[PAD:.*]]: tensor<2x8xf32>)
// CHECK: %[[M:.*]] = tensor.expand_shape %[[PAD]] {{\[\[}}0], [1, 2, 3]] output_shape [2, 1, 1, 8]
// CHECK-NOT: linalg.generic
// CHECK: %[[O:.*]]:2 = autopar.attention ins(%[[Q]], %[[K]], %[[V]] mask %[[M]] : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x1x1x8xf32>)
// CHECK-SAME: outs({{.*}} : tensor<2x4x8x16xf32>, tensor<2x4x8xf32>) {scale = 2.500000e-01 : f64}
// CHECK-NOT: linalg.generic
// CHECK: return %[[O]]#0
func.func @gqa_expand(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>, %pad: tensor<2x8xf32>) -> tensor<2x4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %quarter = arith.constant dense<2.500000e-01> : tensor<f32>
  %eb = tensor.empty() : tensor<2x2x2x8x16xf32>
  %kb = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%k : tensor<2x2x8x16xf32>) outs(%eb : tensor<2x2x2x8x16xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<2x2x2x8x16xf32>
  %vb = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%v : tensor<2x2x8x16xf32>) outs(%eb : tensor<2x2x2x8x16xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<2x2x2x8x16xf32>
  %ekt = tensor.empty() : tensor<2x2x2x16x8xf32>
  %kt = linalg.transpose ins(%kb : tensor<2x2x2x8x16xf32>) outs(%ekt : tensor<2x2x2x16x8xf32>) permutation = [0, 1, 2, 4, 3]
  %qe = tensor.expand_shape %q [[0], [1, 2], [3], [4]] output_shape [2, 2, 2, 8, 16] : tensor<2x4x8x16xf32> into tensor<2x2x2x8x16xf32>
  %es = tensor.empty() : tensor<2x2x2x8x8xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<2x2x2x8x8xf32>) -> tensor<2x2x2x8x8xf32>
  %s0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d5, d4)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%qe, %kt : tensor<2x2x2x8x16xf32>, tensor<2x2x2x16x8xf32>) outs(%fs : tensor<2x2x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x2x8x8xf32>
  %x0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> ()>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%s0, %quarter : tensor<2x2x2x8x8xf32>, tensor<f32>) outs(%es : tensor<2x2x2x8x8xf32>) {
  ^bb0(%in: f32, %mk: f32, %o: f32):
    %y = arith.mulf %in, %mk : f32
    linalg.yield %y : f32
  } -> tensor<2x2x2x8x8xf32>
  %x = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%x0, %pad : tensor<2x2x2x8x8xf32>, tensor<2x8xf32>) outs(%es : tensor<2x2x2x8x8xf32>) {
  ^bb0(%in: f32, %mk: f32, %o: f32):
    %y = arith.addf %in, %mk : f32
    linalg.yield %y : f32
  } -> tensor<2x2x2x8x8xf32>
  %er = tensor.empty() : tensor<2x2x2x8xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%er : tensor<2x2x2x8xf32>) -> tensor<2x2x2x8xf32>
  %fz = linalg.fill ins(%zero : f32) outs(%er : tensor<2x2x2x8xf32>) -> tensor<2x2x2x8xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%x : tensor<2x2x2x8x8xf32>) outs(%fm : tensor<2x2x2x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x2x2x8xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%x, %max : tensor<2x2x2x8x8xf32>, tensor<2x2x2x8xf32>) outs(%es : tensor<2x2x2x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %x1 = math.exp %d : f32
    linalg.yield %x1 : f32
  } -> tensor<2x2x2x8x8xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<2x2x2x8x8xf32>) outs(%fz : tensor<2x2x2x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x2x2x8xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x2x2x8x8xf32>, tensor<2x2x2x8xf32>) outs(%es : tensor<2x2x2x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %d = arith.divf %in, %sm : f32
    linalg.yield %d : f32
  } -> tensor<2x2x2x8x8xf32>
  %eo = tensor.empty() : tensor<2x2x2x8x16xf32>
  %fo = linalg.fill ins(%zero : f32) outs(%eo : tensor<2x2x2x8x16xf32>) -> tensor<2x2x2x8x16xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d5, d4)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %vb : tensor<2x2x2x8x8xf32>, tensor<2x2x2x8x16xf32>) outs(%fo : tensor<2x2x2x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x2x8x16xf32>
  %oc = tensor.collapse_shape %o [[0], [1, 2], [3], [4]] : tensor<2x2x2x8x16xf32> into tensor<2x4x8x16xf32>
  return %oc : tensor<2x4x8x16xf32>
}

// -----

// repeat_interleave(g, dim=1) of key and value as torch 1.x exports it: a
// Split into single heads, each unsqueezed, expanded g times and reshaped,
// then a Concat. The fused op reads the key and value unrepeated.
// CHECK-LABEL: func.func @gqa_repeat_interleave
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8x16xf32>, %[[K:.*]]: tensor<2x2x8x16xf32>, %[[V:.*]]: tensor<2x2x8x16xf32>)
// CHECK-NOT: tensor.concat
// CHECK: %[[O:.*]]:2 = autopar.attention ins(%[[Q]], %[[K]], %[[V]] : tensor<2x4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>)
// CHECK-NOT: tensor.concat
// CHECK: return %[[O]]#0
func.func @gqa_repeat_interleave(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x2x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %eb = tensor.empty() : tensor<2x1x2x8x16xf32>
  %k0 = tensor.extract_slice %k[0, 0, 0, 0] [2, 1, 8, 16] [1, 1, 1, 1] : tensor<2x2x8x16xf32> to tensor<2x1x8x16xf32>
  %k1 = tensor.extract_slice %k[0, 1, 0, 0] [2, 1, 8, 16] [1, 1, 1, 1] : tensor<2x2x8x16xf32> to tensor<2x1x8x16xf32>
  %kb0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%k0 : tensor<2x1x8x16xf32>) outs(%eb : tensor<2x1x2x8x16xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<2x1x2x8x16xf32>
  %kc0 = tensor.collapse_shape %kb0 [[0], [1, 2], [3], [4]] : tensor<2x1x2x8x16xf32> into tensor<2x2x8x16xf32>
  %kb1 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%k1 : tensor<2x1x8x16xf32>) outs(%eb : tensor<2x1x2x8x16xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<2x1x2x8x16xf32>
  %kc1 = tensor.collapse_shape %kb1 [[0], [1, 2], [3], [4]] : tensor<2x1x2x8x16xf32> into tensor<2x2x8x16xf32>
  %kr = tensor.concat dim(1) %kc0, %kc1 : (tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x4x8x16xf32>
  %v0 = tensor.extract_slice %v[0, 0, 0, 0] [2, 1, 8, 16] [1, 1, 1, 1] : tensor<2x2x8x16xf32> to tensor<2x1x8x16xf32>
  %v1 = tensor.extract_slice %v[0, 1, 0, 0] [2, 1, 8, 16] [1, 1, 1, 1] : tensor<2x2x8x16xf32> to tensor<2x1x8x16xf32>
  %vb0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%v0 : tensor<2x1x8x16xf32>) outs(%eb : tensor<2x1x2x8x16xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<2x1x2x8x16xf32>
  %vc0 = tensor.collapse_shape %vb0 [[0], [1, 2], [3], [4]] : tensor<2x1x2x8x16xf32> into tensor<2x2x8x16xf32>
  %vb1 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%v1 : tensor<2x1x8x16xf32>) outs(%eb : tensor<2x1x2x8x16xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<2x1x2x8x16xf32>
  %vc1 = tensor.collapse_shape %vb1 [[0], [1, 2], [3], [4]] : tensor<2x1x2x8x16xf32> into tensor<2x2x8x16xf32>
  %vr = tensor.concat dim(1) %vc0, %vc1 : (tensor<2x2x8x16xf32>, tensor<2x2x8x16xf32>) -> tensor<2x4x8x16xf32>
  %ekt = tensor.empty() : tensor<2x4x16x8xf32>
  %kt = linalg.transpose ins(%kr : tensor<2x4x8x16xf32>) outs(%ekt : tensor<2x4x16x8xf32>) permutation = [0, 1, 3, 2]
  %es = tensor.empty() : tensor<2x4x8x8xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %s0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) outs(%fs : tensor<2x4x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x8xf32>
  %er = tensor.empty() : tensor<2x4x8xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%er : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %fz = linalg.fill ins(%zero : f32) outs(%er : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %max = linalg.reduce ins(%s0 : tensor<2x4x8x8xf32>) outs(%fm : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.maximumf %in, %init : f32
      linalg.yield %r : f32
    }
  %ex = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0, %max : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%es : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %x1 = math.exp %d : f32
    linalg.yield %x1 : f32
  } -> tensor<2x4x8x8xf32>
  %sum = linalg.reduce ins(%ex : tensor<2x4x8x8xf32>) outs(%fz : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.addf %in, %init : f32
      linalg.yield %r : f32
    }
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%es : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %d = arith.divf %in, %sm : f32
    linalg.yield %d : f32
  } -> tensor<2x4x8x8xf32>
  %eo = tensor.empty() : tensor<2x4x8x16xf32>
  %fo = linalg.fill ins(%zero : f32) outs(%eo : tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %vr : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) outs(%fo : tensor<2x4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// nn.MultiheadAttention's export: the query divided by sqrt(d) before Q K^T
// (a scale of the fused op), the scores times 1, the key padding mask
// [B, H, T] added (mask [B, H, 1, T]), the reductions generics.
// CHECK-LABEL: func.func @mha_scaled_query
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8x16xf32>, %{{.*}}: tensor<2x4x16x8xf32>, %[[V:.*]]: tensor<2x4x8x16xf32>, %[[PAD:.*]]: tensor<2x4x8xf32>)
// CHECK: %[[M:.*]] = tensor.expand_shape %[[PAD]] {{\[\[}}0], [1], [2, 3]] output_shape [2, 4, 1, 8]
// CHECK: autopar.attention ins(%[[Q]], %{{.*}}, %[[V]] mask %[[M]] : {{.*}}, tensor<2x4x1x8xf32>)
// CHECK-SAME: {scale = 5.000000e-01 : f64}
// CHECK-NOT: linalg.generic
func.func @mha_scaled_query(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x16x8xf32>, %v: tensor<2x4x8x16xf32>, %pad: tensor<2x4x8xf32>) -> tensor<2x4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c2 = arith.constant dense<2.000000e+00> : tensor<f32>
  %c1 = arith.constant dense<1.000000e+00> : tensor<f32>
  %eq = tensor.empty() : tensor<2x4x8x16xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> ()>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q, %c2 : tensor<2x4x8x16xf32>, tensor<f32>) outs(%eq : tensor<2x4x8x16xf32>) {
  ^bb0(%in: f32, %mk: f32, %o: f32):
    %y = arith.divf %in, %mk : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x16xf32>
  %es = tensor.empty() : tensor<2x4x8x8xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %s0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%qs, %k : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) outs(%fs : tensor<2x4x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x8xf32>
  %x0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> ()>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0, %c1 : tensor<2x4x8x8xf32>, tensor<f32>) outs(%es : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mk: f32, %o: f32):
    %y = arith.mulf %in, %mk : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x8xf32>
  %x = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x0, %pad : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%es : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mk: f32, %o: f32):
    %y = arith.addf %in, %mk : f32
    linalg.yield %y : f32
  } -> tensor<2x4x8x8xf32>
  %er = tensor.empty() : tensor<2x4x8xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%er : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %fz = linalg.fill ins(%zero : f32) outs(%er : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%x : tensor<2x4x8x8xf32>) outs(%fm : tensor<2x4x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%x, %max : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%es : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %x1 = math.exp %d : f32
    linalg.yield %x1 : f32
  } -> tensor<2x4x8x8xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<2x4x8x8xf32>) outs(%fz : tensor<2x4x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x4x8xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%es : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %d = arith.divf %in, %sm : f32
    linalg.yield %d : f32
  } -> tensor<2x4x8x8xf32>
  %fo = linalg.fill ins(%zero : f32) outs(%eq : tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) outs(%fo : tensor<2x4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// The key repeated over the query heads, the value not: they do not share
// heads alike, so the fused op reads the repeated key.
// CHECK-LABEL: func.func @key_only_repeated
// CHECK-SAME: (%[[Q:.*]]: tensor<2x4x8x16xf32>, %{{.*}}: tensor<2x2x8x16xf32>, %[[V:.*]]: tensor<2x4x8x16xf32>)
// CHECK: %[[KR:.*]] = tensor.collapse_shape {{.*}} into tensor<2x4x8x16xf32>
// CHECK: autopar.attention ins(%[[Q]], %[[KR]], %[[V]] : tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>, tensor<2x4x8x16xf32>)
func.func @key_only_repeated(%q: tensor<2x4x8x16xf32>, %k: tensor<2x2x8x16xf32>, %v: tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %eb = tensor.empty() : tensor<2x2x2x8x16xf32>
  %kb = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%k : tensor<2x2x8x16xf32>) outs(%eb : tensor<2x2x2x8x16xf32>) {
  ^bb0(%in: f32, %o: f32):
    linalg.yield %in : f32
  } -> tensor<2x2x2x8x16xf32>
  %kr = tensor.collapse_shape %kb [[0], [1, 2], [3], [4]] : tensor<2x2x2x8x16xf32> into tensor<2x4x8x16xf32>
  %ekt = tensor.empty() : tensor<2x4x16x8xf32>
  %kt = linalg.transpose ins(%kr : tensor<2x4x8x16xf32>) outs(%ekt : tensor<2x4x16x8xf32>) permutation = [0, 1, 3, 2]
  %es = tensor.empty() : tensor<2x4x8x8xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<2x4x8x8xf32>) -> tensor<2x4x8x8xf32>
  %s0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %kt : tensor<2x4x8x16xf32>, tensor<2x4x16x8xf32>) outs(%fs : tensor<2x4x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x8xf32>
  %er = tensor.empty() : tensor<2x4x8xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%er : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %fz = linalg.fill ins(%zero : f32) outs(%er : tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %max = linalg.reduce ins(%s0 : tensor<2x4x8x8xf32>) outs(%fm : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.maximumf %in, %init : f32
      linalg.yield %r : f32
    }
  %ex = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s0, %max : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%es : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %x1 = math.exp %d : f32
    linalg.yield %x1 : f32
  } -> tensor<2x4x8x8xf32>
  %sum = linalg.reduce ins(%ex : tensor<2x4x8x8xf32>) outs(%fz : tensor<2x4x8xf32>) dimensions = [3]
    (%in: f32, %init: f32) {
      %r = arith.addf %in, %init : f32
      linalg.yield %r : f32
    }
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x4x8x8xf32>, tensor<2x4x8xf32>) outs(%es : tensor<2x4x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %d = arith.divf %in, %sm : f32
    linalg.yield %d : f32
  } -> tensor<2x4x8x8xf32>
  %eo = tensor.empty() : tensor<2x4x8x16xf32>
  %fo = linalg.fill ins(%zero : f32) outs(%eo : tensor<2x4x8x16xf32>) -> tensor<2x4x8x16xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d4, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x4x8x8xf32>, tensor<2x4x8x16xf32>) outs(%fo : tensor<2x4x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x4x8x16xf32>
  return %o : tensor<2x4x8x16xf32>
}

// -----

// Three batch dims (B, H1, H2) and a mask over B and H1 only: the fused op's
// H would merge H1 and H2, over which the mask neither varies nor
// broadcasts. Left as it is.
// CHECK-LABEL: func.func @mask_splits_heads
// CHECK-NOT: autopar.attention
// CHECK: linalg.generic
// CHECK: return
func.func @mask_splits_heads(%q: tensor<2x2x2x8x16xf32>, %k: tensor<2x2x2x16x8xf32>, %v: tensor<2x2x2x8x16xf32>, %mask: tensor<2x2x8x8xf32>) -> tensor<2x2x2x8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %es = tensor.empty() : tensor<2x2x2x8x8xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<2x2x2x8x8xf32>) -> tensor<2x2x2x8x8xf32>
  %s0 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d5, d4)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x2x2x8x16xf32>, tensor<2x2x2x16x8xf32>) outs(%fs : tensor<2x2x2x8x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x2x8x8xf32>
  %x = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%s0, %mask : tensor<2x2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%es : tensor<2x2x2x8x8xf32>) {
  ^bb0(%in: f32, %mk: f32, %o: f32):
    %y = arith.addf %in, %mk : f32
    linalg.yield %y : f32
  } -> tensor<2x2x2x8x8xf32>
  %er = tensor.empty() : tensor<2x2x2x8xf32>
  %fm = linalg.fill ins(%ninf : f32) outs(%er : tensor<2x2x2x8xf32>) -> tensor<2x2x2x8xf32>
  %fz = linalg.fill ins(%zero : f32) outs(%er : tensor<2x2x2x8xf32>) -> tensor<2x2x2x8xf32>
  %max = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%x : tensor<2x2x2x8x8xf32>) outs(%fm : tensor<2x2x2x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.maximumf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x2x2x8xf32>
  %ex = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%x, %max : tensor<2x2x2x8x8xf32>, tensor<2x2x2x8xf32>) outs(%es : tensor<2x2x2x8x8xf32>) {
  ^bb0(%in: f32, %mx: f32, %o: f32):
    %d = arith.subf %in, %mx : f32
    %x1 = math.exp %d : f32
    linalg.yield %x1 : f32
  } -> tensor<2x2x2x8x8xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%ex : tensor<2x2x2x8x8xf32>) outs(%fz : tensor<2x2x2x8xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<2x2x2x8xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%ex, %sum : tensor<2x2x2x8x8xf32>, tensor<2x2x2x8xf32>) outs(%es : tensor<2x2x2x8x8xf32>) {
  ^bb0(%in: f32, %sm: f32, %o: f32):
    %d = arith.divf %in, %sm : f32
    linalg.yield %d : f32
  } -> tensor<2x2x2x8x8xf32>
  %eo = tensor.empty() : tensor<2x2x2x8x16xf32>
  %fo = linalg.fill ins(%zero : f32) outs(%eo : tensor<2x2x2x8x16xf32>) -> tensor<2x2x2x8x16xf32>
  %o = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d5)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d5, d4)>, affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%p, %v : tensor<2x2x2x8x8xf32>, tensor<2x2x2x8x16xf32>) outs(%fo : tensor<2x2x2x8x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x2x8x16xf32>
  return %o : tensor<2x2x2x8x16xf32>
}
