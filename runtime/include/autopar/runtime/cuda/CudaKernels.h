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
// The fused attention kernels (CudaAttention.cpp, AttentionKernels.cu) take
// the same kind of descriptors; their buffers hold f32 or bfloat16 (the
// suffix), and LSE and the mask are always f32.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_CUDAKERNELS_H
#define AUTOPAR_RUNTIME_CUDA_CUDAKERNELS_H

#include "autopar/runtime/CpuKernels.h" // MemRefDescriptor, AUTOPAR_KERNEL_EXPORT

/// Fused attention (FlashAttention-2), TYPE f32 or bf16: Q [B, H, S, D],
/// K [B, Hkv, T, D], V [B, Hkv, T, E] (H a multiple of Hkv, query head h
/// reads kv head h / (H / Hkv)), an optional additive f32 mask of rank 4
/// whose dims are each full or 1 (flags bit 1; else the descriptor is a
/// dummy), causal top-left masking (flags bit 0). Forward writes O
/// [B, H, S, E] and LSE [B, H, S] (f32, natural log); backward recomputes
/// P from LSE and overwrites dQ, dK, dV (dK, dV summed over the query heads
/// of a kv head). A row without a visible key gets O = 0, LSE = -inf and
/// zero gradients. D and E must be multiples of 8 up to 128, and every
/// operand but the mask must have innermost stride 1; anything else ends the
/// run naming the kernel and the sizes. Accumulation and softmax in f32;
/// f32 uses no TF32.
#define AUTOPAR_DECLARE_CUDA_ATTENTION(TYPE)                                   \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cuda_attention_fwd_##TYPE(   \
      autopar::runtime::MemRefDescriptor<char, 4> *q,                          \
      autopar::runtime::MemRefDescriptor<char, 4> *k,                          \
      autopar::runtime::MemRefDescriptor<char, 4> *v,                          \
      autopar::runtime::MemRefDescriptor<char, 4> *mask,                       \
      autopar::runtime::MemRefDescriptor<char, 4> *out,                        \
      autopar::runtime::MemRefDescriptor<char, 3> *lse, float scale,           \
      int32_t flags);                                                          \
  AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cuda_attention_bwd_##TYPE(   \
      autopar::runtime::MemRefDescriptor<char, 4> *q,                          \
      autopar::runtime::MemRefDescriptor<char, 4> *k,                          \
      autopar::runtime::MemRefDescriptor<char, 4> *v,                          \
      autopar::runtime::MemRefDescriptor<char, 4> *mask,                       \
      autopar::runtime::MemRefDescriptor<char, 4> *out,                        \
      autopar::runtime::MemRefDescriptor<char, 3> *lse,                        \
      autopar::runtime::MemRefDescriptor<char, 4> *dout,                       \
      autopar::runtime::MemRefDescriptor<char, 4> *dq,                         \
      autopar::runtime::MemRefDescriptor<char, 4> *dk,                         \
      autopar::runtime::MemRefDescriptor<char, 4> *dv, float scale,            \
      int32_t flags);

/// Fused softmax cross-entropy, TYPE f32 or bf16 (the logits and their
/// gradient; labels i64, nll, lse and d_nll f32), as the CPU kernels
/// (CpuKernels.h): logits and d_logits [N, C] with contiguous classes,
/// labels, nll, lse, d_nll [N]. Forward writes nll and lse, backward
/// overwrites d_logits; arithmetic in f32. A block per row; anything that
/// does not fit ends the run naming the kernel and the sizes.
#define AUTOPAR_DECLARE_CUDA_CROSS_ENTROPY(TYPE)                               \
  AUTOPAR_KERNEL_EXPORT void                                                   \
      _mlir_ciface_autopar_cuda_cross_entropy_fwd_##TYPE(                      \
          autopar::runtime::MemRefDescriptor<char, 2> *logits,                 \
          autopar::runtime::MemRefDescriptor<char, 1> *labels,                 \
          autopar::runtime::MemRefDescriptor<char, 1> *nll,                    \
          autopar::runtime::MemRefDescriptor<char, 1> *lse,                    \
          int64_t ignoreIndex);                                                \
  AUTOPAR_KERNEL_EXPORT void                                                   \
      _mlir_ciface_autopar_cuda_cross_entropy_bwd_##TYPE(                      \
          autopar::runtime::MemRefDescriptor<char, 2> *logits,                 \
          autopar::runtime::MemRefDescriptor<char, 1> *labels,                 \
          autopar::runtime::MemRefDescriptor<char, 1> *lse,                    \
          autopar::runtime::MemRefDescriptor<char, 1> *dNll,                   \
          autopar::runtime::MemRefDescriptor<char, 2> *dLogits,                \
          int64_t ignoreIndex);

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
AUTOPAR_DECLARE_CUDA_ATTENTION(f32)
AUTOPAR_DECLARE_CUDA_ATTENTION(bf16)
AUTOPAR_DECLARE_CUDA_CROSS_ENTROPY(f32)
AUTOPAR_DECLARE_CUDA_CROSS_ENTROPY(bf16)
} // extern "C"

#endif // AUTOPAR_RUNTIME_CUDA_CUDAKERNELS_H
