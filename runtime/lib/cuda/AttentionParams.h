//===- AttentionParams.h - What the attention kernels are given -*- C++ -*-===//
//
// Shared by the host side (CudaAttention.cpp, compiled by the host compiler)
// and the kernels (AttentionKernels.cu, compiled by nvcc into the embedded
// fatbin): the one by-value parameter of every attention kernel, the tile
// sizes and the dynamic shared memory each kernel needs. Both sides must
// agree byte for byte, so this header holds only plain types and constexpr
// arithmetic.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_ATTENTIONPARAMS_H
#define AUTOPAR_RUNTIME_CUDA_ATTENTIONPARAMS_H

#include <stdint.h>

// The tile arithmetic is used by kernels too.
#ifdef __CUDACC__
#define AUTOPAR_ATTENTION_HOST_DEVICE __host__ __device__
#else
#define AUTOPAR_ATTENTION_HOST_DEVICE
#endif

namespace autopar::runtime::cuda::attention {

/// A [B, heads, rows, width] operand whose rows are contiguous: element
/// (b, h, i, e) is at data[b * batchStride + h * headStride + i * rowStride
/// + e] (strides in elements; 0 for dims of size 1).
struct TensorView {
  void *data;
  int64_t batchStride, headStride, rowStride;
};

/// The parameter of every attention kernel (passed by value).
struct Params {
  TensorView q, k, v, out, dout, dq, dk, dv;
  /// The additive f32 mask, or null; strides of (b, h, i, j), 0 where the
  /// mask broadcasts.
  const float *mask;
  int64_t maskStrides[4];
  /// LSE [B, H, S] (f32, innermost stride 1).
  float *lse;
  int64_t lseBatchStride, lseHeadStride;
  /// Backward scratch written by the Drow kernel, each a dense
  /// [B, H, paddedQueries] f32: rowsum(dO * O) (0 beyond S), and LSE in base
  /// 2 (+inf beyond S and for rows without a visible key, so that their
  /// recomputed probabilities are 0). Padded and aligned, so that tiles of
  /// them load with 16-byte cp.async and never past the end.
  float *drow, *lseLog2;
  int32_t batch, heads, kvHeads, group; ///< group = heads / kvHeads
  int32_t queries, keys;                ///< S, T
  int32_t headDim, valueDim;            ///< D, E (multiples of 8, <= 128)
  float scale;
  float scaleLog2; ///< scale * log2(e): the kernels work in base 2
  int32_t causal, hasMask;
  /// Every operand's address and outer strides are 16-byte aligned: tiles
  /// load with 16-byte cp.async / vector loads, else element by element.
  int32_t vectorized;
  int32_t paddedQueries; ///< S rounded up to BackwardRowPadding
};

/// What the backward scratch rows are padded to: a multiple of every query
/// tile of a backward kernel.
constexpr int BackwardRowPadding = 128;

// bf16 kernels (tensor cores, mma.sync m16n8k16): 4 warps. HD is the head
// dim the kernel is instantiated for (32, 64 or 128; the real D and E are
// at most HD and the tile columns above them are zero).
constexpr int Bf16Threads = 128;
/// Forward: tiles of 16 query rows per warp (64 per tile per block), keys
/// per tile. Calls with a mask get their own kernel with one row tile per
/// warp (the mask's addressing takes the second tile's registers).
constexpr int Bf16FwdRowTiles = 2, Bf16FwdMaskedRowTiles = 1;
AUTOPAR_ATTENTION_HOST_DEVICE constexpr int bf16FwdRows(bool masked) {
  return 64 * (masked ? Bf16FwdMaskedRowTiles : Bf16FwdRowTiles);
}
constexpr int Bf16FwdKeys = 64;
/// dK/dV: tiles of 16 keys per warp (one at HD 128, where the dK and dV
/// accumulators of one tile already take 128 registers), keys per block,
/// queries per tile.
AUTOPAR_ATTENTION_HOST_DEVICE constexpr int bf16DkdvKeyTiles(int hd) {
  return hd <= 64 ? 2 : 1;
}
AUTOPAR_ATTENTION_HOST_DEVICE constexpr int bf16DkdvKeys(int hd) {
  return 4 * 16 * bf16DkdvKeyTiles(hd);
}
constexpr int Bf16DkdvQueries = 32;
/// dQ: tiles of 16 query rows per warp (64 per tile per block; one for
/// calls with a mask, as in the forward), keys per tile.
constexpr int Bf16DqRowTiles = 2, Bf16DqMaskedRowTiles = 1;
AUTOPAR_ATTENTION_HOST_DEVICE constexpr int bf16DqRows(bool masked) {
  return 64 * (masked ? Bf16DqMaskedRowTiles : Bf16DqRowTiles);
}
AUTOPAR_ATTENTION_HOST_DEVICE constexpr int bf16DqKeys(int hd) {
  return hd <= 32 ? 64 : 32;
}
/// Shared memory rows are padded by 8 elements (16 bytes) so that the 8 rows
/// an ldmatrix reads fall in distinct banks.
AUTOPAR_ATTENTION_HOST_DEVICE constexpr int bf16Stride(int hd) {
  return hd + 8;
}

AUTOPAR_ATTENTION_HOST_DEVICE constexpr int bf16FwdSmem(int hd, bool masked) {
  // Q, double-buffered K and V.
  return (bf16FwdRows(masked) + 4 * Bf16FwdKeys) * bf16Stride(hd) * 2;
}
AUTOPAR_ATTENTION_HOST_DEVICE constexpr int bf16DkdvSmem(int hd) {
  // K, V; double-buffered Q, dO, and their rows' LSE and Drow.
  return (2 * bf16DkdvKeys(hd) + 4 * Bf16DkdvQueries) * bf16Stride(hd) * 2 +
         4 * Bf16DkdvQueries * 4;
}
AUTOPAR_ATTENTION_HOST_DEVICE constexpr int bf16DqSmem(int hd, bool masked) {
  // Q, dO; double-buffered K and V.
  return (2 * bf16DqRows(masked) + 4 * bf16DqKeys(hd)) * bf16Stride(hd) * 2;
}

// f32 kernels (FP32 FMA, no TF32): 256 threads as 16 x 16; each thread owns
// 4 rows and every 16th column of a tile.
constexpr int F32Threads = 256;
constexpr int F32FwdRows = 64, F32FwdKeys = 64;
constexpr int F32DkdvKeys = 64, F32DkdvQueries = 32;
constexpr int F32DqRows = 64, F32DqKeys = 32;
/// Rows padded by one float: column walks by 16 threads hit distinct banks.
AUTOPAR_ATTENTION_HOST_DEVICE constexpr int f32Stride(int hd) { return hd + 1; }

AUTOPAR_ATTENTION_HOST_DEVICE constexpr int f32FwdSmem(int hd) {
  // Q, K, V and the tile's probabilities.
  return ((F32FwdRows + 2 * F32FwdKeys) * f32Stride(hd) +
          F32FwdRows * (F32FwdKeys + 1)) *
         4;
}
AUTOPAR_ATTENTION_HOST_DEVICE constexpr int f32DkdvSmem(int hd) {
  // K, V, Q, dO, P^T, dS^T, and the queries' LSE and Drow.
  return ((2 * F32DkdvKeys + 2 * F32DkdvQueries) * f32Stride(hd) +
          2 * F32DkdvKeys * (F32DkdvQueries + 1) + 2 * F32DkdvQueries) *
         4;
}
AUTOPAR_ATTENTION_HOST_DEVICE constexpr int f32DqSmem(int hd) {
  // Q, dO, K, V and the tile's dS.
  return ((2 * F32DqRows + 2 * F32DqKeys) * f32Stride(hd) +
          F32DqRows * (F32DqKeys + 1)) *
         4;
}

/// Rows of rowsum(dO * O) per block of the Drow kernel (a warp per row).
constexpr int DrowRowsPerBlock = 8;

static_assert(BackwardRowPadding % bf16DqRows(false) == 0 &&
                  BackwardRowPadding % bf16DqRows(true) == 0 &&
                  BackwardRowPadding % Bf16DkdvQueries == 0 &&
                  BackwardRowPadding % F32DqRows == 0 &&
                  BackwardRowPadding % F32DkdvQueries == 0,
              "a backward query tile would read past the padded scratch");

} // namespace autopar::runtime::cuda::attention

#endif // AUTOPAR_RUNTIME_CUDA_ATTENTIONPARAMS_H
