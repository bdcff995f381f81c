// autopar-lower-cross-entropy-to-kernels: what cannot become a kernel call
// is an error on the op.
// RUN: autopar-opt %s --autopar-lower-cross-entropy-to-kernels=library=cuda --split-input-file -verify-diagnostics

// An output whose classes are strided: the kernels write contiguous rows.
func.func @strided_output(%x: memref<6x5xf32>, %y: memref<6xi64>, %l: memref<6xf32>, %d: memref<6x10xf32>) {
  %v = memref.subview %d[0, 0] [6, 5] [1, 2] : memref<6x10xf32> to memref<6x5xf32, strided<[10, 2]>>
  // expected-error @below {{writes an output of layout strided<[10, 2]> that is not [N, C] or [N] with unit innermost stride, which the kernels need}}
  autopar.softmax_cross_entropy_grad ins(%x, %y saved(%l, %l : memref<6xf32>, memref<6xf32>) : memref<6x5xf32>, memref<6xi64>) outs(%v : memref<6x5xf32, strided<[10, 2]>>) {ignore_index = -100 : i64}
  return
}

// -----

func.func @f16(%x: memref<6x5xf16>, %y: memref<6xi64>, %n: memref<6xf32>) {
  // expected-error @below {{has no CUDA kernel for logits of element type 'f16' (the kernels take f32 and bf16)}}
  autopar.softmax_cross_entropy ins(%x, %y : memref<6x5xf16>, memref<6xi64>) outs(%n, %n : memref<6xf32>, memref<6xf32>) {ignore_index = -100 : i64}
  return
}

// -----

func.func @tensors(%x: tensor<6x5xf32>, %y: tensor<6xi64>, %n: tensor<6xf32>) -> tensor<6xf32> {
  // expected-error @below {{must be bufferized before it is lowered to kernels}}
  %a, %b = autopar.softmax_cross_entropy ins(%x, %y : tensor<6x5xf32>, tensor<6xi64>) outs(%n, %n : tensor<6xf32>, tensor<6xf32>) {ignore_index = -100 : i64} -> tensor<6xf32>, tensor<6xf32>
  return %a : tensor<6xf32>
}
