// autopar.softmax_cross_entropy and its gradient: the printed forms parse
// back (tensors and memrefs, positions of any rank), and the verifier names
// what is wrong.
// RUN: autopar-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// RUN: autopar-opt %s -split-input-file -verify-diagnostics | autopar-opt -split-input-file | FileCheck %s

// The forward and its gradient over [batch, sequence] positions.
// CHECK-LABEL: func.func @forward_and_gradient
// CHECK: %[[L:.*]]:2 = autopar.softmax_cross_entropy ins(%[[X:[0-9a-z_]+]], %[[Y:[0-9a-z_]+]] : tensor<2x3x11xf32>, tensor<2x3xi64>) outs(%{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<2x3xf32>) {ignore_index = -100 : i64} -> tensor<2x3xf32>, tensor<2x3xf32>
// CHECK: autopar.softmax_cross_entropy_grad ins(%[[X]], %[[Y]] saved(%[[L]]#1, %{{.*}} : tensor<2x3xf32>, tensor<2x3xf32>) : tensor<2x3x11xf32>, tensor<2x3xi64>) outs(%{{.*}} : tensor<2x3x11xf32>) {ignore_index = 0 : i64} -> tensor<2x3x11xf32>
func.func @forward_and_gradient(%x: tensor<2x3x11xf32>, %y: tensor<2x3xi64>, %g: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3x11xf32>) {
  %n0 = tensor.empty() : tensor<2x3xf32>
  %l0 = tensor.empty() : tensor<2x3xf32>
  %nll, %lse = autopar.softmax_cross_entropy ins(%x, %y : tensor<2x3x11xf32>, tensor<2x3xi64>) outs(%n0, %l0 : tensor<2x3xf32>, tensor<2x3xf32>) {ignore_index = -100 : i64} -> tensor<2x3xf32>, tensor<2x3xf32>
  %d0 = tensor.empty() : tensor<2x3x11xf32>
  %d = autopar.softmax_cross_entropy_grad ins(%x, %y saved(%lse, %g : tensor<2x3xf32>, tensor<2x3xf32>) : tensor<2x3x11xf32>, tensor<2x3xi64>) outs(%d0 : tensor<2x3x11xf32>) {ignore_index = 0 : i64} -> tensor<2x3x11xf32>
  return %nll, %d : tensor<2x3xf32>, tensor<2x3x11xf32>
}

// -----

// With memrefs the ops write their outputs and return nothing; bf16 logits
// keep f32 statistics.
// CHECK-LABEL: func.func @buffers
// CHECK: autopar.softmax_cross_entropy ins(%{{.*}}, %{{.*}} : memref<4x7xbf16>, memref<4xi64>) outs(%{{.*}}, %{{.*}} : memref<4xf32>, memref<4xf32>) {ignore_index = -100 : i64}
// CHECK-NOT: ->
// CHECK: autopar.softmax_cross_entropy_grad
// CHECK-SAME: outs(%{{.*}} : memref<4x7xbf16>)
func.func @buffers(%x: memref<4x7xbf16>, %y: memref<4xi64>, %n: memref<4xf32>, %l: memref<4xf32>, %d: memref<4x7xbf16>) {
  autopar.softmax_cross_entropy ins(%x, %y : memref<4x7xbf16>, memref<4xi64>) outs(%n, %l : memref<4xf32>, memref<4xf32>) {ignore_index = -100 : i64}
  autopar.softmax_cross_entropy_grad ins(%x, %y saved(%l, %n : memref<4xf32>, memref<4xf32>) : memref<4x7xbf16>, memref<4xi64>) outs(%d : memref<4x7xbf16>) {ignore_index = -100 : i64}
  return
}

// -----

func.func @labels_shape(%x: tensor<4x7xf32>, %y: tensor<5xi64>) {
  %n0 = tensor.empty() : tensor<4xf32>
  // expected-error @below {{labels must be shaped like the logits without their classes (4) of 'i64', got 'tensor<5xi64>'}}
  %nll, %lse = autopar.softmax_cross_entropy ins(%x, %y : tensor<4x7xf32>, tensor<5xi64>) outs(%n0, %n0 : tensor<4xf32>, tensor<4xf32>) {ignore_index = -100 : i64} -> tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @labels_type(%x: tensor<4x7xf32>, %y: tensor<4xi32>) {
  %n0 = tensor.empty() : tensor<4xf32>
  // expected-error @below {{labels must be shaped like the logits without their classes (4) of 'i64', got 'tensor<4xi32>'}}
  %nll, %lse = autopar.softmax_cross_entropy ins(%x, %y : tensor<4x7xf32>, tensor<4xi32>) outs(%n0, %n0 : tensor<4xf32>, tensor<4xf32>) {ignore_index = -100 : i64} -> tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @lse_not_f32(%x: tensor<4x7xbf16>, %y: tensor<4xi64>) {
  %n0 = tensor.empty() : tensor<4xf32>
  %l0 = tensor.empty() : tensor<4xbf16>
  // expected-error @below {{lse must be shaped like the logits without their classes (4) of 'f32', got 'tensor<4xbf16>'}}
  %nll, %lse = autopar.softmax_cross_entropy ins(%x, %y : tensor<4x7xbf16>, tensor<4xi64>) outs(%n0, %l0 : tensor<4xf32>, tensor<4xbf16>) {ignore_index = -100 : i64} -> tensor<4xf32>, tensor<4xbf16>
  return
}

// -----

func.func @integer_logits(%x: tensor<4x7xi32>, %y: tensor<4xi64>) {
  %n0 = tensor.empty() : tensor<4xf32>
  // expected-error @below {{logits must be a static float shape [P..., C], got 'tensor<4x7xi32>'}}
  %nll, %lse = autopar.softmax_cross_entropy ins(%x, %y : tensor<4x7xi32>, tensor<4xi64>) outs(%n0, %n0 : tensor<4xf32>, tensor<4xf32>) {ignore_index = -100 : i64} -> tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @forward_saves(%x: tensor<4x7xf32>, %y: tensor<4xi64>) {
  %n0 = tensor.empty() : tensor<4xf32>
  // expected-error @below {{takes no saved values (those are the gradient's)}}
  %nll, %lse = autopar.softmax_cross_entropy ins(%x, %y saved(%n0 : tensor<4xf32>) : tensor<4x7xf32>, tensor<4xi64>) outs(%n0, %n0 : tensor<4xf32>, tensor<4xf32>) {ignore_index = -100 : i64} -> tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @gradient_type(%x: tensor<4x7xbf16>, %y: tensor<4xi64>, %l: tensor<4xf32>) {
  %d0 = tensor.empty() : tensor<4x7xf32>
  // expected-error @below {{d_logits must be shaped and typed like the logits ('tensor<4x7xbf16>'), got 'tensor<4x7xf32>'}}
  %d = autopar.softmax_cross_entropy_grad ins(%x, %y saved(%l, %l : tensor<4xf32>, tensor<4xf32>) : tensor<4x7xbf16>, tensor<4xi64>) outs(%d0 : tensor<4x7xf32>) {ignore_index = -100 : i64} -> tensor<4x7xf32>
  return
}

// -----

func.func @gradient_saves(%x: tensor<4x7xf32>, %y: tensor<4xi64>, %l: tensor<4xf32>) {
  %d0 = tensor.empty() : tensor<4x7xf32>
  // expected-error @below {{saves two values: the forward's lse and the gradient of nll}}
  %d = autopar.softmax_cross_entropy_grad ins(%x, %y saved(%l : tensor<4xf32>) : tensor<4x7xf32>, tensor<4xi64>) outs(%d0 : tensor<4x7xf32>) {ignore_index = -100 : i64} -> tensor<4x7xf32>
  return
}

// -----

func.func @results(%x: tensor<4x7xf32>, %y: tensor<4xi64>) {
  %n0 = tensor.empty() : tensor<4xf32>
  // expected-error @below {{returns its tensor outputs, one result each, or nothing with memref outputs}}
  %nll = autopar.softmax_cross_entropy ins(%x, %y : tensor<4x7xf32>, tensor<4xi64>) outs(%n0, %n0 : tensor<4xf32>, tensor<4xf32>) {ignore_index = -100 : i64} -> tensor<4xf32>
  return
}
