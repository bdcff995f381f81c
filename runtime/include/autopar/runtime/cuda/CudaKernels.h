//===- CudaKernels.h - Library GEMMs called by generated GPU code -*- C++ -*-//
//
// The GPU counterparts of CpuKernels.h: generated host code of a cuda
// program calls them through MLIR's C interface with memref descriptors of
// device memory. Same semantics as the CPU kernels: C += A * B (the
// generated code initializes C), views that are row-major or transposed
// (one of the last two strides is 1) with any leading dimension, batch
// leading for the 3-D form. They run cuBLASLt on the rank's compute stream,
// accumulate in float32 (no TF32 for f32_f32) and return before the GEMM is
// done.
//
// <a>_<c>: A and B have type <a>, C type <c>; one of f32_f32, bf16_f32,
// bf16_bf16, f16_f32, f16_f16. The descriptors' element type below is
// nominal (char): the suffix says what the buffers hold.
//
// Inconsistent shapes or unsupported strides are compiler bugs:
// "autopar-run: error: rank R: autopar_cuda_matmul_<a>_<c>: ...", and every
// rank ends.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_CUDAKERNELS_H
#define AUTOPAR_RUNTIME_CUDA_CUDAKERNELS_H

#include "autopar/runtime/CpuKernels.h" // MemRefDescriptor, AUTOPAR_KERNEL_EXPORT

#define AUTOPAR_DECLARE_CUDA_GEMMS(SUFFIX)                                     \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cuda_matmul_##SUFFIX(        \
      autopar::runtime::MemRefDescriptor<char, 2> *a,                          \
      autopar::runtime::MemRefDescriptor<char, 2> *b,                          \
      autopar::runtime::MemRefDescriptor<char, 2> *c);                         \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cuda_batch_matmul_##SUFFIX(  \
      autopar::runtime::MemRefDescriptor<char, 3> *a,                          \
      autopar::runtime::MemRefDescriptor<char, 3> *b,                          \
      autopar::runtime::MemRefDescriptor<char, 3> *c);                         \
  AUTOPAR_KERNEL_EXPORT void                                                   \
      _mlir_ciface_autopar_cuda_matmul_overwrite_##SUFFIX(                     \
          autopar::runtime::MemRefDescriptor<char, 2> *a,                      \
          autopar::runtime::MemRefDescriptor<char, 2> *b,                      \
          autopar::runtime::MemRefDescriptor<char, 2> *c);                     \
  AUTOPAR_KERNEL_EXPORT void                                                   \
      _mlir_ciface_autopar_cuda_batch_matmul_overwrite_##SUFFIX(               \
          autopar::runtime::MemRefDescriptor<char, 3> *a,                      \
          autopar::runtime::MemRefDescriptor<char, 3> *b,                      \
          autopar::runtime::MemRefDescriptor<char, 3> *c);

extern "C" {
AUTOPAR_DECLARE_CUDA_GEMMS(f32_f32)
AUTOPAR_DECLARE_CUDA_GEMMS(bf16_f32)
AUTOPAR_DECLARE_CUDA_GEMMS(bf16_bf16)
AUTOPAR_DECLARE_CUDA_GEMMS(f16_f32)
AUTOPAR_DECLARE_CUDA_GEMMS(f16_f16)
} // extern "C"

#endif // AUTOPAR_RUNTIME_CUDA_CUDAKERNELS_H
