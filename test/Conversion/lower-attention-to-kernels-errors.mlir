// autopar-lower-attention-to-kernels' errors: an unknown library, an op not
// yet bufferized, a mask the kernels do not take.
// RUN: not autopar-opt %s --autopar-lower-attention-to-kernels=library=tpu 2>&1 | FileCheck %s --check-prefix=LIBRARY
// RUN: autopar-opt %s --split-input-file --autopar-lower-attention-to-kernels=library=cpu -verify-diagnostics

// LIBRARY: autopar-lower-attention-to-kernels: library must be cpu or cuda, not 'tpu'

func.func @tensors(%q: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %o0 = tensor.empty() : tensor<1x2x4x8xf32>
  %l0 = tensor.empty() : tensor<1x2x4xf32>
  // expected-error @below {{must be bufferized before it is lowered to kernels}}
  %o, %l = autopar.attention ins(%q, %q, %q : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) outs(%o0, %l0 : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) {scale = 1.0 : f64} -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  return %o : tensor<1x2x4x8xf32>
}

// -----

func.func @f16_mask(%q: memref<1x2x4x8xf32>, %m: memref<1x1x1x4xf16>, %o: memref<1x2x4x8xf32>, %l: memref<1x2x4xf32>) {
  // expected-error @below {{the kernels take an f32 mask}}
  autopar.attention ins(%q, %q, %q mask %m : memref<1x2x4x8xf32>, memref<1x2x4x8xf32>, memref<1x2x4x8xf32>, memref<1x1x1x4xf16>) outs(%o, %l : memref<1x2x4x8xf32>, memref<1x2x4xf32>) {scale = 1.0 : f64}
  return
}
