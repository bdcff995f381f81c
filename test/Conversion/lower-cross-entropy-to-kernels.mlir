// autopar-lower-cross-entropy-to-kernels: bufferized cross-entropy ops become
// calls of the runtime's kernels on the positions collapsed into one dim,
// with the ignore index as an i64; an input whose positions do not collapse
// is copied to a dense buffer (freed after the call); a type without a
// kernel is an error (lower-cross-entropy-to-kernels-errors.mlir has more).
// RUN: autopar-opt %s --autopar-lower-cross-entropy-to-kernels=library=cpu --split-input-file -verify-diagnostics | FileCheck %s --check-prefix=CPU
// RUN: autopar-opt %s --autopar-lower-cross-entropy-to-kernels=library=cuda --split-input-file | FileCheck %s --check-prefix=CUDA

// CPU-LABEL: func.func private @autopar_cpu_cross_entropy_fwd_f32(memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?xi64, strided<[?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>, i64) attributes {llvm.emit_c_interface}
// CPU-LABEL: func.func @forward
// CPU-SAME: (%[[X:.*]]: memref<2x3x11xf32>, %[[Y:.*]]: memref<2x3xi64>, %[[N:.*]]: memref<2x3xf32>, %[[L:.*]]: memref<2x3xf32>)
// CPU-DAG: %[[X2:.*]] = memref.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : memref<2x3x11xf32> into memref<6x11xf32>
// CPU-DAG: %[[Y1:.*]] = memref.collapse_shape %[[Y]] {{\[\[}}0, 1]] : memref<2x3xi64> into memref<6xi64>
// CPU-DAG: %[[N1:.*]] = memref.collapse_shape %[[N]] {{\[\[}}0, 1]]
// CPU-DAG: %[[L1:.*]] = memref.collapse_shape %[[L]] {{\[\[}}0, 1]]
// CPU-DAG: %[[IGNORE:.*]] = arith.constant -100 : i64
// CPU-DAG: %[[CX:.*]] = memref.cast %[[X2]]
// CPU-DAG: %[[CY:.*]] = memref.cast %[[Y1]]
// CPU-DAG: %[[CN:.*]] = memref.cast %[[N1]]
// CPU-DAG: %[[CL:.*]] = memref.cast %[[L1]]
// CPU: call @autopar_cpu_cross_entropy_fwd_f32(%[[CX]], %[[CY]], %[[CN]], %[[CL]], %[[IGNORE]])
// CPU-NOT: autopar.softmax_cross_entropy
// CUDA-LABEL: func.func @forward
// CUDA: call @autopar_cuda_cross_entropy_fwd_f32
func.func @forward(%x: memref<2x3x11xf32>, %y: memref<2x3xi64>, %n: memref<2x3xf32>, %l: memref<2x3xf32>) {
  autopar.softmax_cross_entropy ins(%x, %y : memref<2x3x11xf32>, memref<2x3xi64>) outs(%n, %l : memref<2x3xf32>, memref<2x3xf32>) {ignore_index = -100 : i64}
  return
}

// -----

// The gradient of [N, C] logits: no collapse needed; operands in the ABI's
// order (logits, labels, lse, d_nll, d_logits, ignore index).
// CPU-LABEL: func.func @gradient
// CPU-SAME: (%[[X:.*]]: memref<6x11xf32>, %[[Y:.*]]: memref<6xi64>, %[[L:.*]]: memref<6xf32>, %[[G:.*]]: memref<6xf32>, %[[D:.*]]: memref<6x11xf32>)
// CPU-NOT: collapse_shape
// CPU-DAG: %[[IGNORE:.*]] = arith.constant 3 : i64
// CPU-DAG: %[[CX:.*]] = memref.cast %[[X]]
// CPU-DAG: %[[CL:.*]] = memref.cast %[[L]]
// CPU-DAG: %[[CG:.*]] = memref.cast %[[G]]
// CPU-DAG: %[[CD:.*]] = memref.cast %[[D]]
// CPU: call @autopar_cpu_cross_entropy_bwd_f32(%[[CX]], %{{.*}}, %[[CL]], %[[CG]], %[[CD]], %[[IGNORE]])
// CUDA-LABEL: func.func @gradient
// CUDA: call @autopar_cuda_cross_entropy_bwd_f32
func.func @gradient(%x: memref<6x11xf32>, %y: memref<6xi64>, %l: memref<6xf32>, %g: memref<6xf32>, %d: memref<6x11xf32>) {
  autopar.softmax_cross_entropy_grad ins(%x, %y saved(%l, %g : memref<6xf32>, memref<6xf32>) : memref<6x11xf32>, memref<6xi64>) outs(%d : memref<6x11xf32>) {ignore_index = 3 : i64}
  return
}

// -----

// Logits that are a strided view (every other class) are copied to a dense
// buffer first, which is freed after the call.
// CPU-LABEL: func.func @strided_logits
// CPU: %[[COPY:.*]] = memref.alloc() : memref<2x3x5xf32>
// CPU: memref.copy %{{.*}}, %[[COPY]]
// CPU: memref.collapse_shape %[[COPY]]
// CPU: call @autopar_cpu_cross_entropy_fwd_f32
// CPU-NEXT: memref.dealloc %[[COPY]]
func.func @strided_logits(%x: memref<2x3x10xf32>, %y: memref<2x3xi64>, %n: memref<2x3xf32>, %l: memref<2x3xf32>) {
  %v = memref.subview %x[0, 0, 0] [2, 3, 5] [1, 1, 2] : memref<2x3x10xf32> to memref<2x3x5xf32, strided<[30, 10, 2]>>
  autopar.softmax_cross_entropy ins(%v, %y : memref<2x3x5xf32, strided<[30, 10, 2]>>, memref<2x3xi64>) outs(%n, %l : memref<2x3xf32>, memref<2x3xf32>) {ignore_index = -100 : i64}
  return
}

// -----

// bf16 logits: a CUDA kernel, none on CPU.
// CUDA-LABEL: func.func @bf16
// CUDA: call @autopar_cuda_cross_entropy_bwd_bf16
func.func @bf16(%x: memref<6x11xbf16>, %y: memref<6xi64>, %l: memref<6xf32>, %g: memref<6xf32>, %d: memref<6x11xbf16>) {
  // expected-error @below {{has no CPU kernel for logits of element type 'bf16' (the kernels take f32)}}
  autopar.softmax_cross_entropy_grad ins(%x, %y saved(%l, %g : memref<6xf32>, memref<6xf32>) : memref<6x11xbf16>, memref<6xi64>) outs(%d : memref<6x11xbf16>) {ignore_index = 3 : i64}
  return
}
