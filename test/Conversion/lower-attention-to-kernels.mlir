// autopar-lower-attention-to-kernels: bufferized attention ops become calls
// of the runtime's FlashAttention kernels, with the scale and the flags
// (bit 0 causal, bit 1 mask) as scalars and a view of lse standing in for a
// missing mask; the CUDA library gets contiguous rows; a type without a
// kernel is an error.
// RUN: autopar-opt %s --autopar-lower-attention-to-kernels=library=cpu --split-input-file -verify-diagnostics | FileCheck %s --check-prefix=CPU
// RUN: autopar-opt %s --autopar-lower-attention-to-kernels=library=cuda --split-input-file | FileCheck %s --check-prefix=CUDA

// CPU-LABEL: func.func private @autopar_cpu_attention_fwd_f32(memref<?x?x?x?xf32, strided<[?, ?, ?, ?], offset: ?>>, {{.*}}, memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>, f32, i32) attributes {llvm.emit_c_interface}
// CPU-LABEL: func.func @causal_no_mask
// CPU-SAME: (%[[Q:.*]]: memref<1x2x4x8xf32>, %[[O:.*]]: memref<1x2x4x8xf32>, %[[L:.*]]: memref<1x2x4xf32>)
// CPU: %[[STANDIN:.*]] = memref.expand_shape %[[L]] {{\[\[}}0], [1], [2, 3]] output_shape [1, 2, 4, 1]
// CPU-DAG: %[[SCALE:.*]] = arith.constant 0.353553385 : f32
// CPU-DAG: %[[FLAGS:.*]] = arith.constant 1 : i32
// CPU: call @autopar_cpu_attention_fwd_f32({{.*}}, %[[SCALE]], %[[FLAGS]])
// CUDA-LABEL: func.func @causal_no_mask
// CUDA: call @autopar_cuda_attention_fwd_f32
func.func @causal_no_mask(%q: memref<1x2x4x8xf32>, %o: memref<1x2x4x8xf32>, %l: memref<1x2x4xf32>) {
  autopar.attention ins(%q, %q, %q : memref<1x2x4x8xf32>, memref<1x2x4x8xf32>, memref<1x2x4x8xf32>) outs(%o, %l : memref<1x2x4x8xf32>, memref<1x2x4xf32>) {scale = 0.35355339059327373 : f64, causal}
  return
}

// -----

// The gradient with a mask: flags 2, operands in the ABI's order.
// CPU-LABEL: func.func @grad_with_mask
// CPU-SAME: (%[[Q:.*]]: memref<1x2x4x8xf32>, %[[M:.*]]: memref<1x1x1x4xf32>, %[[O:.*]]: memref<1x2x4x8xf32>, %[[L:.*]]: memref<1x2x4xf32>, %[[DO:.*]]: memref<1x2x4x8xf32>, %[[DQ:.*]]: memref<1x2x4x8xf32>)
// CPU-DAG: %[[FLAGS:.*]] = arith.constant 2 : i32
// CPU-DAG: %[[CQ:.*]] = memref.cast %[[Q]]
// CPU-DAG: %[[CM:.*]] = memref.cast %[[M]]
// CPU-DAG: %[[CL:.*]] = memref.cast %[[L]]
// CPU-DAG: %[[CDQ:.*]] = memref.cast %[[DQ]]
// CPU: call @autopar_cpu_attention_bwd_f32(%[[CQ]], %{{.*}}, %{{.*}}, %[[CM]], %{{.*}}, %[[CL]], %{{.*}}, %[[CDQ]], %{{.*}}, %{{.*}}, %{{.*}}, %[[FLAGS]])
func.func @grad_with_mask(%q: memref<1x2x4x8xf32>, %m: memref<1x1x1x4xf32>, %o: memref<1x2x4x8xf32>, %l: memref<1x2x4xf32>, %do: memref<1x2x4x8xf32>, %dq: memref<1x2x4x8xf32>) {
  autopar.attention_grad ins(%q, %q, %q mask %m saved(%o, %l, %do : memref<1x2x4x8xf32>, memref<1x2x4xf32>, memref<1x2x4x8xf32>) : memref<1x2x4x8xf32>, memref<1x2x4x8xf32>, memref<1x2x4x8xf32>, memref<1x1x1x4xf32>) outs(%dq, %dq, %dq : memref<1x2x4x8xf32>, memref<1x2x4x8xf32>, memref<1x2x4x8xf32>) {scale = 1.0 : f64}
  return
}

// -----

// bf16: a CUDA kernel; a key whose head dim is strided (a transposed view)
// is copied to contiguous rows first, and the copy freed after the call. The
// CPU kernels are f32 only.
// CUDA-LABEL: func.func @bf16_strided_key
// CUDA-SAME: (%[[Q:.*]]: memref<1x2x4x8xbf16>, %[[KT:.*]]: memref<1x2x8x4xbf16>
// CUDA: %[[K:.*]] = memref.transpose %[[KT]]
// CUDA: %[[COPY:.*]] = memref.alloc() : memref<1x2x4x8xbf16>
// CUDA: memref.copy %[[K]], %[[COPY]]
// CUDA: %[[CK:.*]] = memref.cast %[[COPY]]
// CUDA: call @autopar_cuda_attention_fwd_bf16(%{{.*}}, %[[CK]],
// CUDA-NEXT: memref.dealloc %[[COPY]]
func.func @bf16_strided_key(%q: memref<1x2x4x8xbf16>, %kt: memref<1x2x8x4xbf16>, %o: memref<1x2x4x8xbf16>, %l: memref<1x2x4xf32>) {
  %k = memref.transpose %kt (d0, d1, d2, d3) -> (d0, d1, d3, d2) : memref<1x2x8x4xbf16> to memref<1x2x4x8xbf16, strided<[64, 32, 1, 4]>>
  // expected-error @below {{has no CPU kernel for element type 'bf16' (the kernels take f32)}}
  autopar.attention ins(%q, %k, %q : memref<1x2x4x8xbf16>, memref<1x2x4x8xbf16, strided<[64, 32, 1, 4]>>, memref<1x2x4x8xbf16>) outs(%o, %l : memref<1x2x4x8xbf16>, memref<1x2x4xf32>) {scale = 1.0 : f64}
  return
}
