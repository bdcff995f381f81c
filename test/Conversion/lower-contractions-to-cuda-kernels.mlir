// autopar-lower-contractions-to-cuda-kernels: matmul and batch_matmul on
// memrefs become calls to the cuBLASLt kernel named by the A/B and C types (B
// transposed as a view), the _overwrite_ one after a zero fill; convolutions,
// integer GEMMs and mixed or unsupported type pairs stay linalg.
// RUN: autopar-opt %s --autopar-lower-contractions-to-cuda-kernels --split-input-file | FileCheck %s

// An f32 matmul becomes a call to the cuBLASLt-backed kernel named by its
// operand types (A/B f32, C f32); operands are cast to fully dynamic
// strided memrefs so that one declaration serves every shape and view.
// CHECK-LABEL: func.func private @autopar_cuda_matmul_f32_f32
// CHECK-SAME: (memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>, memref<?x?xf32, strided<[?, ?], offset: ?>>)
// CHECK-SAME: attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[A:.*]]: memref<4x8xf32>, %[[B:.*]]: memref<8x16xf32>, %[[C:.*]]: memref<4x16xf32>)
// CHECK-DAG: %[[CA:.*]] = memref.cast %[[A]]
// CHECK-DAG: %[[CB:.*]] = memref.cast %[[B]]
// CHECK-DAG: %[[CC:.*]] = memref.cast %[[C]]
// CHECK: call @autopar_cuda_matmul_f32_f32(%[[CA]], %[[CB]], %[[CC]])
// CHECK-NOT: linalg.matmul
func.func @matmul(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %c: memref<4x16xf32>) {
  linalg.matmul ins(%a, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  return
}

// -----

// Batched products go to the batched kernel.
// CHECK-LABEL: func.func @batch_matmul
// CHECK: call @autopar_cuda_batch_matmul_f32_f32
func.func @batch_matmul(%a: memref<2x4x8xf32>, %b: memref<2x8x16xf32>, %c: memref<2x4x16xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<2x4x8xf32>, memref<2x8x16xf32>) outs(%c : memref<2x4x16xf32>)
  return
}

// -----

// Half-precision operands with an fp32 result (mixed precision: fp32
// accumulation), and with a result of their own type.
// CHECK-LABEL: func.func @mixed
// CHECK: call @autopar_cuda_matmul_bf16_f32
// CHECK: call @autopar_cuda_matmul_bf16_bf16
// CHECK: call @autopar_cuda_batch_matmul_f16_f32
// CHECK: call @autopar_cuda_batch_matmul_f16_f16
func.func @mixed(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %c: memref<4x16xf32>, %d: memref<4x16xbf16>,
                 %e: memref<2x4x8xf16>, %f: memref<2x8x16xf16>, %g: memref<2x4x16xf32>, %h: memref<2x4x16xf16>) {
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%d : memref<4x16xbf16>)
  linalg.batch_matmul ins(%e, %f : memref<2x4x8xf16>, memref<2x8x16xf16>) outs(%g : memref<2x4x16xf32>)
  linalg.batch_matmul ins(%e, %f : memref<2x4x8xf16>, memref<2x8x16xf16>) outs(%h : memref<2x4x16xf16>)
  return
}

// -----

// A transposed B (a Gemm with transB=1) is passed as a transposed view.
// CHECK-LABEL: func.func @matmul_transpose_b
// CHECK-SAME: (%[[A:.*]]: memref<4x8xf32>, %[[B:.*]]: memref<16x8xf32>, %[[C:.*]]: memref<4x16xf32>)
// CHECK: %[[BT:.*]] = memref.transpose %[[B]] (d0, d1) -> (d1, d0) : memref<16x8xf32> to memref<8x16xf32, strided<[1, 8]>>
// CHECK: %[[CBT:.*]] = memref.cast %[[BT]]
// CHECK: call @autopar_cuda_matmul_f32_f32(%{{.*}}, %[[CBT]], %{{.*}})
func.func @matmul_transpose_b(%a: memref<4x8xf32>, %b: memref<16x8xf32>, %c: memref<4x16xf32>) {
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
    ins(%a, %b : memref<4x8xf32>, memref<16x8xf32>) outs(%c : memref<4x16xf32>)
  return
}

// -----

// There are no CUDA convolution kernels (convolutions reach the GEMMs
// through im2col before bufferization), no integer GEMMs, no mixed A/B
// types and no fp32 operands with a half-precision result: all stay linalg.
// CHECK-LABEL: func.func @no_kernel
// CHECK: linalg.conv_2d_nchw_fchw
// CHECK: linalg.matmul
// CHECK: linalg.matmul
// CHECK: linalg.matmul
// CHECK-NOT: call
func.func @no_kernel(%i: memref<1x3x9x9xf32>, %f: memref<4x3x3x3xf32>, %o: memref<1x4x4x4xf32>,
                     %ia: memref<4x8xi32>, %ib: memref<8x16xi32>, %ic: memref<4x16xi32>,
                     %a: memref<4x8xbf16>, %b: memref<8x16xf32>, %c: memref<4x16xf32>,
                     %d: memref<4x8xf32>, %e: memref<4x16xbf16>) {
  linalg.conv_2d_nchw_fchw {strides = dense<2> : tensor<2xi64>, dilations = dense<1> : tensor<2xi64>}
    ins(%i, %f : memref<1x3x9x9xf32>, memref<4x3x3x3xf32>) outs(%o : memref<1x4x4x4xf32>)
  linalg.matmul ins(%ia, %ib : memref<4x8xi32>, memref<8x16xi32>) outs(%ic : memref<4x16xi32>)
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xf32>) outs(%c : memref<4x16xf32>)
  linalg.matmul ins(%d, %b : memref<4x8xf32>, memref<8x16xf32>) outs(%e : memref<4x16xbf16>)
  return
}

// -----

// A zero fill right before a product becomes the overwrite kernel (cuBLASLt
// with beta 0) and disappears: no fill kernel, and the GEMM does not read
// its output. A fill of another value, or one that something reads between
// it and the product, stays and the product accumulates.
// CHECK-LABEL: func.func @overwrite
// CHECK-SAME: (%[[A:.*]]: memref<4x8xbf16>, %[[B:.*]]: memref<8x16xbf16>, %[[C:.*]]: memref<4x16xf32>, %[[D:.*]]: memref<2x4x16xf32>, %[[E:.*]]: memref<2x4x8xbf16>, %[[F:.*]]: memref<2x8x16xbf16>, %[[G:.*]]: memref<4x16xf32>)
// CHECK-NOT: linalg.fill ins(%cst
// CHECK: call @autopar_cuda_matmul_overwrite_bf16_f32(
// CHECK: call @autopar_cuda_batch_matmul_overwrite_bf16_f32(
// CHECK: linalg.fill ins(%[[ONE:.*]] : f32) outs(%[[G]]
// CHECK: call @autopar_cuda_matmul_bf16_f32(
func.func @overwrite(%a: memref<4x8xbf16>, %b: memref<8x16xbf16>, %c: memref<4x16xf32>,
                     %d: memref<2x4x16xf32>, %e: memref<2x4x8xbf16>, %f: memref<2x8x16xbf16>,
                     %g: memref<4x16xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%c : memref<4x16xf32>)
  linalg.fill ins(%zero : f32) outs(%d : memref<2x4x16xf32>)
  linalg.batch_matmul ins(%e, %f : memref<2x4x8xbf16>, memref<2x8x16xbf16>) outs(%d : memref<2x4x16xf32>)
  linalg.fill ins(%one : f32) outs(%g : memref<4x16xf32>)
  linalg.matmul ins(%a, %b : memref<4x8xbf16>, memref<8x16xbf16>) outs(%g : memref<4x16xf32>)
  return
}
