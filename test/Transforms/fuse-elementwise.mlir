// autopar-fuse-elementwise: an elementwise chain fuses into one generic; a
// producer that the consumer would recompute (map not a permutation) or whose
// consumer is a named contraction stays; a producer with several users is
// copied into them only when it is cheap and reads only small tensors.
// RUN: autopar-opt %s --autopar-fuse-elementwise --split-input-file | FileCheck %s

// An elementwise chain fuses into one generic: bias add then ReLU.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<8xf32>)
// CHECK: %[[R:.*]] = linalg.generic
// CHECK-SAME: ins(%[[X]], %[[B]] : tensor<4x8xf32>, tensor<8xf32>)
// CHECK: arith.addf
// CHECK: arith.maximumf
// CHECK-NOT: linalg.generic
// CHECK: return %[[R]]
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @chain(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %zero = arith.constant 0.0 : f32
  %add = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %b : tensor<4x8xf32>, tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %relu = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%add : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  return %relu : tensor<4x8xf32>
}

// -----

// A producer read through a map that skips a consumer loop (here the
// reduction dim k of a contraction written as a generic) would be recomputed
// for every k: it is not fused.
// CHECK-LABEL: func.func @no_recompute
// CHECK: %[[ERF:.*]] = linalg.generic
// CHECK: math.erf
// CHECK: linalg.generic
// CHECK-SAME: ins(%[[ERF]], %{{.*}} : tensor<4x8xf32>, tensor<8x16xf32>)
// CHECK-NOT: math.erf
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#id2 = affine_map<(d0, d1) -> (d0, d1)>
func.func @no_recompute(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %acc: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %erf = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.erf %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %mm = linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%erf, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) {
  ^bb0(%l: f32, %r: f32, %o: f32):
    %p = arith.mulf %l, %r : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %mm : tensor<4x16xf32>
}

// -----

// Named contractions are never consumers, so they stay GEMMs for the backend.
// CHECK-LABEL: func.func @named_matmul
// CHECK: linalg.generic
// CHECK: linalg.matmul
#id3 = affine_map<(d0, d1) -> (d0, d1)>
func.func @named_matmul(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %acc: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %t = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.tanh %a : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %mm = linalg.matmul ins(%t, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%acc : tensor<4x16xf32>) -> tensor<4x16xf32>
  return %mm : tensor<4x16xf32>
}

// -----

// A producer that other ops also read stays; fusing it copies its body into
// the consumer. A cheap one that reads only small tensors (a bias broadcast)
// is copied into both consumers; one that reads a tensor as large as itself
// (a residual add) or has more than 8 ops is not copied.
// CHECK-LABEL: func.func @multi_use
// CHECK-SAME: (%[[X:[^:]*]]: tensor<4x8xf32>, %[[B:[^:]*]]: tensor<8xf32>)
// CHECK: %[[CHEAP1:.*]] = linalg.generic {{.*}} ins(%[[B]] : tensor<8xf32>)
// CHECK:   arith.addf
// CHECK:   arith.mulf
// CHECK: %[[CHEAP2:.*]] = linalg.generic {{.*}} ins(%[[B]] : tensor<8xf32>)
// CHECK:   arith.addf
// CHECK:   arith.subf
// CHECK: %[[RESID:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4x8xf32>)
// CHECK:   arith.addf
// CHECK-NEXT: linalg.yield
// CHECK: linalg.generic {{.*}} ins(%[[RESID]] : tensor<4x8xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[RESID]] : tensor<4x8xf32>)
// CHECK: %[[LONG:.*]] = linalg.generic {{.*}} ins(%[[B]] : tensor<8xf32>)
// CHECK-COUNT-9: arith.mulf
// CHECK: linalg.generic {{.*}} ins(%[[LONG]] : tensor<4x8xf32>)
// CHECK: linalg.generic {{.*}} ins(%[[LONG]] : tensor<4x8xf32>)
// CHECK: return %[[CHEAP1]], %[[CHEAP2]]
#m2 = affine_map<(d0, d1) -> (d0, d1)>
#bias = affine_map<(d0, d1) -> (d1)>
func.func @multi_use(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %cheap = linalg.generic {indexing_maps = [#bias, #m2], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %c1 = linalg.generic {indexing_maps = [#m2, #m2], iterator_types = ["parallel", "parallel"]}
      ins(%cheap : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %c2 = linalg.generic {indexing_maps = [#m2, #m2], iterator_types = ["parallel", "parallel"]}
      ins(%cheap : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.subf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %resid = linalg.generic {indexing_maps = [#m2, #m2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %a : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %r1 = linalg.generic {indexing_maps = [#m2, #m2], iterator_types = ["parallel", "parallel"]}
      ins(%resid : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %r2 = linalg.generic {indexing_maps = [#m2, #m2], iterator_types = ["parallel", "parallel"]}
      ins(%resid : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.subf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %long = linalg.generic {indexing_maps = [#bias, #m2], iterator_types = ["parallel", "parallel"]}
      ins(%b : tensor<8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m1 = arith.mulf %a, %a : f32
    %m2 = arith.mulf %m1, %a : f32
    %m3 = arith.mulf %m2, %a : f32
    %m4 = arith.mulf %m3, %a : f32
    %m5 = arith.mulf %m4, %a : f32
    %m6 = arith.mulf %m5, %a : f32
    %m7 = arith.mulf %m6, %a : f32
    %m8 = arith.mulf %m7, %a : f32
    %m9 = arith.mulf %m8, %a : f32
    linalg.yield %m9 : f32
  } -> tensor<4x8xf32>
  %l1 = linalg.generic {indexing_maps = [#m2, #m2], iterator_types = ["parallel", "parallel"]}
      ins(%long : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.addf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  %l2 = linalg.generic {indexing_maps = [#m2, #m2], iterator_types = ["parallel", "parallel"]}
      ins(%long : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.subf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  return %c1, %c2, %r1, %r2, %l1, %l2 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A recomputed op (autopar-rematerialize's clone) stays marked when the
// patterns rebuild it (here: its splat operand folded into the body), so that
// CSE does not merge it back into the forward op it copies.
// CHECK-LABEL: func.func @recomputed
// CHECK: linalg.generic
// CHECK-NOT: autopar.recomputed
// CHECK: math.powf
// CHECK: linalg.generic {{.*}}autopar.recomputed
// CHECK: math.powf
#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>
func.func @recomputed(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %two = arith.constant dense<2.0> : tensor<f32>
  %e = tensor.empty() : tensor<8xf32>
  %forward = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel"]} ins(%x, %two : tensor<8xf32>, tensor<f32>) outs(%e : tensor<8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = math.powf %a, %b : f32
    linalg.yield %p : f32
  } -> tensor<8xf32>
  %again = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel"]} ins(%x, %two : tensor<8xf32>, tensor<f32>) outs(%e : tensor<8xf32>) attrs = {autopar.recomputed} {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %p = math.powf %a, %b : f32
    linalg.yield %p : f32
  } -> tensor<8xf32>
  return %forward, %again : tensor<8xf32>, tensor<8xf32>
}
