// autopar.attention and autopar.attention_grad: the printed forms parse back
// (tensors and memrefs, with and without a mask, grouped-query shapes), and
// the verifier names what is wrong.
// RUN: autopar-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// RUN: autopar-opt %s -split-input-file -verify-diagnostics | autopar-opt -split-input-file | FileCheck %s

// Grouped-query attention (8 query heads, 2 key/value heads) with a padding
// mask, and its gradient.
// CHECK-LABEL: func.func @gqa
// CHECK: %[[O:.*]]:2 = autopar.attention ins(%{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} : tensor<2x8x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>, tensor<2x1x1x7xf32>) outs(%{{.*}}, %{{.*}} : tensor<2x8x5x32xf32>, tensor<2x8x5xf32>) {causal, scale = 2.500000e-01 : f64} -> tensor<2x8x5x32xf32>, tensor<2x8x5xf32>
// CHECK: autopar.attention_grad ins(%{{.*}}, %{{.*}}, %{{.*}} mask %{{.*}} saved(%[[O]]#0, %[[O]]#1, %{{.*}} : tensor<2x8x5x32xf32>, tensor<2x8x5xf32>, tensor<2x8x5x32xf32>) :
// CHECK-SAME: -> tensor<2x8x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>
func.func @gqa(%q: tensor<2x8x5x16xf32>, %k: tensor<2x2x7x16xf32>, %v: tensor<2x2x7x32xf32>, %m: tensor<2x1x1x7xf32>, %do: tensor<2x8x5x32xf32>) -> (tensor<2x8x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>) {
  %o0 = tensor.empty() : tensor<2x8x5x32xf32>
  %l0 = tensor.empty() : tensor<2x8x5xf32>
  %o, %l = autopar.attention ins(%q, %k, %v mask %m : tensor<2x8x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>, tensor<2x1x1x7xf32>) outs(%o0, %l0 : tensor<2x8x5x32xf32>, tensor<2x8x5xf32>) {scale = 0.25 : f64, causal} -> tensor<2x8x5x32xf32>, tensor<2x8x5xf32>
  %dq0 = tensor.empty() : tensor<2x8x5x16xf32>
  %dk0 = tensor.empty() : tensor<2x2x7x16xf32>
  %dv0 = tensor.empty() : tensor<2x2x7x32xf32>
  %dq, %dk, %dv = autopar.attention_grad ins(%q, %k, %v mask %m saved(%o, %l, %do : tensor<2x8x5x32xf32>, tensor<2x8x5xf32>, tensor<2x8x5x32xf32>) : tensor<2x8x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>, tensor<2x1x1x7xf32>) outs(%dq0, %dk0, %dv0 : tensor<2x8x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>) {scale = 0.25 : f64, causal} -> tensor<2x8x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>
  return %dq, %dk, %dv : tensor<2x8x5x16xf32>, tensor<2x2x7x16xf32>, tensor<2x2x7x32xf32>
}

// -----

// With memrefs the op writes its outputs and returns nothing.
// CHECK-LABEL: func.func @buffers
// CHECK: autopar.attention ins(%{{.*}}, %{{.*}}, %{{.*}} : memref<1x2x4x8xbf16>, memref<1x2x4x8xbf16>, memref<1x2x4x8xbf16>) outs(%{{.*}}, %{{.*}} : memref<1x2x4x8xbf16>, memref<1x2x4xf32>) {scale = 1.000000e+00 : f64}
// CHECK-NOT: ->
func.func @buffers(%q: memref<1x2x4x8xbf16>, %o: memref<1x2x4x8xbf16>, %l: memref<1x2x4xf32>) {
  autopar.attention ins(%q, %q, %q : memref<1x2x4x8xbf16>, memref<1x2x4x8xbf16>, memref<1x2x4x8xbf16>) outs(%o, %l : memref<1x2x4x8xbf16>, memref<1x2x4xf32>) {scale = 1.0 : f64}
  return
}

// -----

func.func @heads_not_multiple(%q: tensor<1x3x4x8xf32>, %k: tensor<1x2x4x8xf32>) {
  %o0 = tensor.empty() : tensor<1x3x4x8xf32>
  %l0 = tensor.empty() : tensor<1x3x4xf32>
  // expected-error @below {{the query's 3 heads are not a multiple of the key's 2}}
  %o, %l = autopar.attention ins(%q, %k, %k : tensor<1x3x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) outs(%o0, %l0 : tensor<1x3x4x8xf32>, tensor<1x3x4xf32>) {scale = 1.0 : f64} -> tensor<1x3x4x8xf32>, tensor<1x3x4xf32>
  return
}

// -----

func.func @head_dims_differ(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x16xf32>) {
  %o0 = tensor.empty() : tensor<1x2x4x16xf32>
  %l0 = tensor.empty() : tensor<1x2x4xf32>
  // expected-error @below {{key must be [1, 2, 4, 8] (dim 3 is 16)}}
  %o, %l = autopar.attention ins(%q, %k, %k : tensor<1x2x4x8xf32>, tensor<1x2x4x16xf32>, tensor<1x2x4x16xf32>) outs(%o0, %l0 : tensor<1x2x4x16xf32>, tensor<1x2x4xf32>) {scale = 1.0 : f64} -> tensor<1x2x4x16xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @mask_not_broadcastable(%q: tensor<1x2x4x8xf32>, %m: tensor<1x1x3x4xf32>) {
  %o0 = tensor.empty() : tensor<1x2x4x8xf32>
  %l0 = tensor.empty() : tensor<1x2x4xf32>
  // expected-error @below {{mask dim 2 is 3: it must be 1 (broadcast) or 4}}
  %o, %l = autopar.attention ins(%q, %q, %q mask %m : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x3x4xf32>) outs(%o0, %l0 : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) {scale = 1.0 : f64} -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return
}

// -----

func.func @lse_not_f32(%q: tensor<1x2x4x8xbf16>) {
  %o0 = tensor.empty() : tensor<1x2x4x8xbf16>
  %l0 = tensor.empty() : tensor<1x2x4xbf16>
  // expected-error @below {{lse must have element type 'f32'}}
  %o, %l = autopar.attention ins(%q, %q, %q : tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>) outs(%o0, %l0 : tensor<1x2x4x8xbf16>, tensor<1x2x4xbf16>) {scale = 1.0 : f64} -> tensor<1x2x4x8xbf16>, tensor<1x2x4xbf16>
  return
}

// -----

func.func @grad_without_saved(%q: tensor<1x2x4x8xf32>) {
  %d0 = tensor.empty() : tensor<1x2x4x8xf32>
  // expected-error @below {{saves three values: the forward's out and lse, and the gradient of out}}
  %dq, %dk, %dv = autopar.attention_grad ins(%q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) outs(%d0, %d0, %d0 : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) {scale = 1.0 : f64} -> tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>
  return
}
