//===- CpuKernels.h - Library kernels called by generated CPU code -*- C++ -*-//
//
// Generated code calls these through MLIR's C interface
// (llvm.emit_c_interface): every memref argument is a pointer to a strided
// descriptor, and `index` scalars are int64_t. Each kernel accumulates into its
// output (the generated code initializes it), and accepts views with any
// strides. autopar-run exports them to the dlopen'ed program.
//
// A kernel that is handed inconsistent shapes (a compiler bug, not a user
// error) prints "autopar-run: error: <kernel>: ..." and exits with status 1:
// it cannot throw through generated code.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPUKERNELS_H
#define AUTOPAR_RUNTIME_CPUKERNELS_H

#include <cstdint>

/// Keeps the kernels visible to dlopen'ed code even if the runtime is built
/// with -fvisibility=hidden.
#define AUTOPAR_KERNEL_EXPORT __attribute__((visibility("default")))

namespace autopar::runtime {

/// MLIR's ranked memref descriptor (StridedMemRefType in CRunnerUtils.h):
/// element (i0, ..., iN-1) is at aligned[offset + sum_k ik * strides[k]].
template <typename T, int Rank> struct MemRefDescriptor {
  T *allocated;
  T *aligned;
  int64_t offset;
  int64_t sizes[Rank];
  int64_t strides[Rank];
};

} // namespace autopar::runtime

extern "C" {

/// Runs \p loop(context, first, last) on ranges covering [0, iterations),
/// split among the kernel threads (autopar-run --threads) when the work
/// (iterations times \p work, in elements) pays for them: the parallel
/// loops of generated code (autopar-parallel-loop-calls).
AUTOPAR_KERNEL_EXPORT void
autopar_cpu_parallel_for(void (*loop)(void *, int64_t, int64_t), void *context,
                         int64_t iterations, int64_t work);

/// C[m,n] += sum_k A[m,k] * B[k,n].
AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_matmul_f32(
    autopar::runtime::MemRefDescriptor<float, 2> *a,
    autopar::runtime::MemRefDescriptor<float, 2> *b,
    autopar::runtime::MemRefDescriptor<float, 2> *c);

/// For each batch b: C[b,m,n] += sum_k A[b,m,k] * B[b,k,n].
AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_batch_matmul_f32(
    autopar::runtime::MemRefDescriptor<float, 3> *a,
    autopar::runtime::MemRefDescriptor<float, 3> *b,
    autopar::runtime::MemRefDescriptor<float, 3> *c);

/// O[n,f,y,x] += sum_{c,ky,kx} I[n,c,y*sh+ky*dh,x*sw+kx*dw] * F[f,c,ky,kx].
/// The input is already padded.
AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_conv2d_nchw_f32(
    autopar::runtime::MemRefDescriptor<float, 4> *input,
    autopar::runtime::MemRefDescriptor<float, 4> *filter,
    autopar::runtime::MemRefDescriptor<float, 4> *output, int64_t sh,
    int64_t sw, int64_t dh, int64_t dw);

/// Grouped convolution: I[n,g,c,h,w], F[g,f,c,kh,kw], O[n,g,f,y,x]; for each
/// group g, as conv2d_nchw on the group's slices.
AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_conv2d_ngchw_f32(
    autopar::runtime::MemRefDescriptor<float, 5> *input,
    autopar::runtime::MemRefDescriptor<float, 5> *filter,
    autopar::runtime::MemRefDescriptor<float, 5> *output, int64_t sh,
    int64_t sw, int64_t dh, int64_t dw);

// The `_overwrite_` kernels compute the same sums but store them (C = A * B,
// O = the convolution): they do not read their output, so the zero fill a
// fresh output would otherwise need is left out (LowerContractionsToKernels
// calls them when the fill comes right before).

AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_matmul_overwrite_f32(
    autopar::runtime::MemRefDescriptor<float, 2> *a,
    autopar::runtime::MemRefDescriptor<float, 2> *b,
    autopar::runtime::MemRefDescriptor<float, 2> *c);

AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_batch_matmul_overwrite_f32(
    autopar::runtime::MemRefDescriptor<float, 3> *a,
    autopar::runtime::MemRefDescriptor<float, 3> *b,
    autopar::runtime::MemRefDescriptor<float, 3> *c);

AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_conv2d_nchw_overwrite_f32(
    autopar::runtime::MemRefDescriptor<float, 4> *input,
    autopar::runtime::MemRefDescriptor<float, 4> *filter,
    autopar::runtime::MemRefDescriptor<float, 4> *output, int64_t sh,
    int64_t sw, int64_t dh, int64_t dw);

AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_conv2d_ngchw_overwrite_f32(
    autopar::runtime::MemRefDescriptor<float, 5> *input,
    autopar::runtime::MemRefDescriptor<float, 5> *filter,
    autopar::runtime::MemRefDescriptor<float, 5> *output, int64_t sh,
    int64_t sw, int64_t dh, int64_t dw);

// Fused attention (FlashAttention-2). Unlike the kernels above, these
// OVERWRITE their outputs. Shapes: Q [B, H, S, D], K [B, Hkv, T, D],
// V [B, Hkv, T, E] with H a multiple of Hkv (query head h reads key/value
// head h / (H / Hkv)), O and dO [B, H, S, E], LSE [B, H, S]. flags: bit 0
// causal (key j visible to query i only if j <= i, top-left aligned), bit 1
// the mask operand is present (otherwise it is not read at all). The mask is
// additive and f32, rank 4, each dim either the full size of [B, H, S, T] or
// 1 (broadcast). Memory beyond the operands is a few hundred KiB of
// per-thread scratch: no S x T matrix is formed.

/// O[b,h,i,:] = sum_j P[i,j] V[b,h/g,j,:] with P = softmax over the visible
/// keys j of s[i,j] = scale * Q[b,h,i,:] . K[b,h/g,j,:] + mask, and
/// LSE[b,h,i] = log(sum_j exp(s[i,j])). A query row that sees no key (all
/// -inf) gets O = 0 and LSE = -inf.
AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_attention_fwd_f32(
    autopar::runtime::MemRefDescriptor<float, 4> *q,
    autopar::runtime::MemRefDescriptor<float, 4> *k,
    autopar::runtime::MemRefDescriptor<float, 4> *v,
    autopar::runtime::MemRefDescriptor<float, 4> *mask,
    autopar::runtime::MemRefDescriptor<float, 4> *out,
    autopar::runtime::MemRefDescriptor<float, 3> *lse, float scale,
    int32_t flags);

/// The gradients of the forward's O given dO = dL/dO, from the forward's O
/// and LSE (P is recomputed as exp(s - LSE)): with D_i = sum_e dO[i,e] O[i,e]
/// and dS = P * (dO V^T - D), dQ = scale * dS K, dK = scale * dS^T Q and
/// dV = P^T dO, dK and dV summed over the query heads sharing a key/value
/// head. The mask gets no gradient; rows with LSE -inf get zero gradients.
AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_attention_bwd_f32(
    autopar::runtime::MemRefDescriptor<float, 4> *q,
    autopar::runtime::MemRefDescriptor<float, 4> *k,
    autopar::runtime::MemRefDescriptor<float, 4> *v,
    autopar::runtime::MemRefDescriptor<float, 4> *mask,
    autopar::runtime::MemRefDescriptor<float, 4> *out,
    autopar::runtime::MemRefDescriptor<float, 3> *lse,
    autopar::runtime::MemRefDescriptor<float, 4> *dout,
    autopar::runtime::MemRefDescriptor<float, 4> *dq,
    autopar::runtime::MemRefDescriptor<float, 4> *dk,
    autopar::runtime::MemRefDescriptor<float, 4> *dv, float scale,
    int32_t flags);

/// Merges a partial attention into another in place (the log-sum-exp merge
/// of docs/design/attention.md): with (out, lse) the attention over some
/// keys and (part_out, part_lse) over others, (out, lse) becomes the
/// attention over both. out [B, H, S, E], lse [B, H, S]; a part whose rows
/// saw no key (lse -inf) leaves them as they are. What ring attention does
/// with each block of keys.
AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_attention_merge_f32(
    autopar::runtime::MemRefDescriptor<float, 4> *out,
    autopar::runtime::MemRefDescriptor<float, 3> *lse,
    autopar::runtime::MemRefDescriptor<float, 4> *partOut,
    autopar::runtime::MemRefDescriptor<float, 3> *partLse);

// Fused softmax cross-entropy (docs/design/cross-entropy.md): logits and
// their gradient [N, C] (any strides), labels, nll, lse and d_nll [N]. These
// OVERWRITE their outputs. A label equal to ignore_index gives nll 0 and a
// zero gradient row; a label outside [0, C) otherwise picks no logit
// (nll = lse), as the unfused one-hot pick.

/// lse[n] = log(sum_c exp(x[n, c])), nll[n] = lse[n] - x[n, labels[n]].
AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_cross_entropy_fwd_f32(
    autopar::runtime::MemRefDescriptor<float, 2> *logits,
    autopar::runtime::MemRefDescriptor<int64_t, 1> *labels,
    autopar::runtime::MemRefDescriptor<float, 1> *nll,
    autopar::runtime::MemRefDescriptor<float, 1> *lse, int64_t ignoreIndex);

/// d_logits[n, c] = d_nll[n] * (exp(x[n, c] - lse[n]) - [c == labels[n]]).
AUTOPAR_KERNEL_EXPORT void _mlir_ciface_autopar_cpu_cross_entropy_bwd_f32(
    autopar::runtime::MemRefDescriptor<float, 2> *logits,
    autopar::runtime::MemRefDescriptor<int64_t, 1> *labels,
    autopar::runtime::MemRefDescriptor<float, 1> *lse,
    autopar::runtime::MemRefDescriptor<float, 1> *dNll,
    autopar::runtime::MemRefDescriptor<float, 2> *dLogits, int64_t ignoreIndex);

} // extern "C"

#endif // AUTOPAR_RUNTIME_CPUKERNELS_H
