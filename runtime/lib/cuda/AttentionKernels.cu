//===- AttentionKernels.cu - Fused attention, FlashAttention-2 style ------===//
//
// The kernels behind _mlir_ciface_autopar_cuda_attention_{fwd,bwd}_{f32,bf16}
// (CudaAttention.cpp launches them; AttentionParams.h is the parameter and
// the tile sizes). Compiled by nvcc at build time into a fatbin that
// libautopar_cuda.so embeds and loads with the driver API: nothing here may
// need the CUDA runtime library (no cudart calls, no device-side printf).
//
// Semantics (the ABI, FlashAttention-2 with top-left causal masking):
//   s[i,j] = scale * q_i . k_j + mask[i,j];  key j visible to query i unless
//   causal and j > i, or the score is -inf;  P = softmax over visible keys;
//   O = P V;  LSE = log sum exp s.  A row without a visible key gets O = 0,
//   LSE = -inf and zero gradients.
//
// Forward: a block per (b, h, tile of query rows) walks the key tiles with
// the online softmax (running max and sum per row), so S x T is never
// stored. Backward recomputes P = exp(s - LSE): one kernel per (b, kv head,
// key tile) accumulates dK and dV over the query tiles of every query head
// of the group, one per (b, h, query tile) accumulates dQ over the key tiles
// (no atomics: deterministic), after a small kernel wrote rowsum(dO * O) and
// LSE in base 2 to a padded scratch.
//
// bf16: tensor cores through mma.sync.m16n8k16 (f32 accumulation), operands
// fed from shared memory by ldmatrix, tiles double-buffered with cp.async;
// the probabilities and dS go from the accumulators straight into A
// operands (the C fragment of an m16n8 tile is the A fragment layout of half
// a k16 step), so no warp exchanges data through shared memory. A warp owns
// one or two 16-row tiles (AttentionParams.h); the forward and dQ kernels
// have a one-tile variant for calls with a mask, whose addressing needs the
// registers. Masking is applied only to the tiles that need it (ScoreMode).
// Softmax in f32, in base 2 (exp2 of scaled scores).
// f32: the same algorithm with FP32 FMAs on 4 x N register tiles per thread,
// never TF32, so that it matches a float64 reference to ~1e-6.
//
//===----------------------------------------------------------------------===//

#include "AttentionParams.h"

#include <cuda_bf16.h>

#include <stdint.h>

using namespace autopar::runtime::cuda::attention;

namespace {

using bf16 = __nv_bfloat16;

constexpr float Log2e = 1.4426950408889634f;
constexpr float Ln2 = 0.6931471805599453f;

__device__ __forceinline__ float negativeInfinity() {
  return __int_as_float(0xff800000u);
}
__device__ __forceinline__ float positiveInfinity() {
  return __int_as_float(0x7f800000u);
}

//===----------------------------------------------------------------------===//
// Operand addressing
//===----------------------------------------------------------------------===//

template <typename T>
__device__ __forceinline__ T *rowPointer(const TensorView &view, int b, int h,
                                         int64_t row) {
  return static_cast<T *>(view.data) + int64_t(b) * view.batchStride +
         int64_t(h) * view.headStride + row * view.rowStride;
}

__device__ __forceinline__ float maskAt(const Params &p, int b, int h, int i,
                                        int j) {
  return p.mask[int64_t(b) * p.maskStrides[0] + int64_t(h) * p.maskStrides[1] +
                int64_t(i) * p.maskStrides[2] + int64_t(j) * p.maskStrides[3]];
}

/// The base-2 score of one (query, key) pair from the raw dot product: what
/// exp2 turns into an unnormalized probability. -inf when the key is not
/// visible (beyond T, above the causal diagonal, or masked with -inf).
__device__ __forceinline__ float scoreLog2(const Params &p, float dot, int b,
                                           int h, int i, int j) {
  float x = dot * p.scaleLog2;
  if (j >= p.keys || (p.causal && j > i))
    return negativeInfinity();
  if (p.hasMask && i < p.queries)
    x += maskAt(p, b, h, i, j) * Log2e;
  return x;
}

/// How much of scoreLog2 a tile needs, decided once per tile so that the
/// per-element code has no branches (a branch per element splits the
/// unrolled tile into basic blocks that the scheduler cannot interleave).
enum class ScoreMode {
  Plain,   ///< every key visible: just the scale
  Checked, ///< keys beyond T or above the causal diagonal: -inf there
  Masked   ///< the additive mask too
};
template <ScoreMode M> struct ScoreModeTag {
  static constexpr ScoreMode value = M;
};

/// Keeps the compiler from moving memory accesses across this point: the
/// masked score code loads mask elements in groups, instead of hoisting all
/// of a tile's loads (and the registers they need) to the top.
__device__ __forceinline__ void memoryFence() { asm volatile("" ::: "memory"); }

/// Turns a warp's raw dot products, a C tile of rows \p row0 + {g, g + 8}
/// and columns \p col0 + 8 nt + 2 t + {0, 1}, into base-2 scores: scaled,
/// plus the mask (Masked), -inf for keys beyond T or above the causal
/// diagonal (Checked, Masked). Rows are queries and columns keys, or the
/// other way round with \p KeysAreRows (the dK/dV kernel's S^T).
template <ScoreMode M, bool KeysAreRows, int N>
__device__ __forceinline__ void scoreTile(float (&s)[N][4], const Params &p,
                                          int b, int h, int row0, int col0,
                                          int lane) {
  const int g = lane >> 2, t = lane & 3;
  // The mask's row for each of the lane's two rows, and the stride along
  // the columns. Indices are clamped so that every lane loads from within
  // the mask: what the clamp reads for queries beyond S is never used, for
  // keys beyond T it is replaced by -inf.
  const float *maskRow[2] = {p.mask, p.mask};
  int64_t columnStride = 0;
  int lastColumn = 0;
  if (M == ScoreMode::Masked) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      int row = row0 + g + 8 * r;
      int64_t offset =
          KeysAreRows ? int64_t(min(row, p.keys - 1)) * p.maskStrides[3]
                      : int64_t(min(row, p.queries - 1)) * p.maskStrides[2];
      maskRow[r] = p.mask + int64_t(b) * p.maskStrides[0] +
                   int64_t(h) * p.maskStrides[1] + offset;
    }
    columnStride = KeysAreRows ? p.maskStrides[2] : p.maskStrides[3];
    lastColumn = KeysAreRows ? p.queries - 1 : p.keys - 1;
  }
#pragma unroll
  for (int nt = 0; nt < N; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      int row = row0 + g + 8 * (e >> 1);
      int column = col0 + 8 * nt + 2 * t + (e & 1);
      int query = KeysAreRows ? column : row, key = KeysAreRows ? row : column;
      float x = s[nt][e] * p.scaleLog2;
      if (M == ScoreMode::Masked)
        x = fmaf(maskRow[e >> 1][min(column, lastColumn) * columnStride], Log2e,
                 x);
      if (M != ScoreMode::Plain) {
        bool hidden = key >= p.keys || (p.causal && key > query);
        x = hidden ? negativeInfinity() : x;
      }
      s[nt][e] = x;
    }
    // Mask loads in groups of 8 per lane.
    if (M == ScoreMode::Masked && nt % 2 == 1)
      memoryFence();
  }
}

/// Calls \p body with the ScoreModeTag a tile of keys [n0, n0 + keys) and
/// queries from \p firstQuery on needs.
template <bool MaySeeMask = true, typename Body>
__device__ __forceinline__ void withScoreMode(const Params &p, int n0, int keys,
                                              int firstQuery, Body body) {
  if (MaySeeMask && p.hasMask)
    body(ScoreModeTag<ScoreMode::Masked>());
  else if (n0 + keys > p.keys || (p.causal && n0 + keys - 1 > firstQuery))
    body(ScoreModeTag<ScoreMode::Checked>());
  else
    body(ScoreModeTag<ScoreMode::Plain>());
}

/// A row's LSE in base 2 for recomputing P = exp2(s - lse): +inf for rows
/// beyond S and for rows without a visible key (LSE -inf), so that their
/// probabilities are exactly 0 instead of exp2(+inf) = inf.
__device__ __forceinline__ float lseLog2(const Params &p, int b, int h,
                                         int row) {
  if (row >= p.queries)
    return positiveInfinity();
  float lse =
      p.lse[int64_t(b) * p.lseBatchStride + int64_t(h) * p.lseHeadStride + row];
  return lse == negativeInfinity() ? positiveInfinity() : lse * Log2e;
}

/// Where row \p row of (b, h) is in the backward scratch (row below
/// paddedQueries).
__device__ __forceinline__ int64_t scratchIndex(const Params &p, int b, int h,
                                                int row) {
  return (int64_t(b) * p.heads + h) * p.paddedQueries + row;
}

//===----------------------------------------------------------------------===//
// PTX wrappers (sm_80+): cp.async, ldmatrix, mma.sync
//===----------------------------------------------------------------------===//

__device__ __forceinline__ uint32_t sharedAddress(const void *pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

/// 2^x through the special function unit, subnormal results flushed to 0
/// (for probabilities that are summed in f32 and rounded to bf16 anyway).
__device__ __forceinline__ float fastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/// Copies 16 bytes global -> shared without going through registers; with
/// \p sourceBytes 0 it writes 16 zero bytes and reads nothing.
__device__ __forceinline__ void copyAsync16(void *shared, const void *global,
                                            int sourceBytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                   sharedAddress(shared)),
               "l"(global), "r"(sourceBytes)
               : "memory");
}
__device__ __forceinline__ void commitCopies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
/// Waits until at most \p Pending committed copy groups are in flight.
template <int Pending> __device__ __forceinline__ void waitCopies() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

/// Four 8x8 b16 matrices; lane l gives the address of row l % 8 of matrix
/// l / 8, and receives in register m the elements (l / 4, 2 (l % 4) + {0,1})
/// of matrix m (with \p Transposed: of its transpose).
template <bool Transposed>
__device__ __forceinline__ void loadMatrices(uint32_t (&r)[4],
                                             const bf16 *address) {
  if (Transposed)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(sharedAddress(address)));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(sharedAddress(address)));
}

/// The A operand (16 x 16, row-major) of rows [m0, m0+16) and columns
/// [k0, k0+16) of a row-major shared tile with row stride \p ld.
__device__ __forceinline__ void loadA(uint32_t (&a)[4], const bf16 *tile,
                                      int ld, int m0, int k0, int lane) {
  // Matrices: (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
  // (rows 8-15, k 8-15) = a0..a3 of the m16n8k16 A fragment.
  loadMatrices<false>(a, tile + (m0 + (lane & 15)) * ld + k0 + (lane >> 4) * 8);
}

/// B operands (k16 x n8, "col") of two n-tiles [n0, n0+8) and [n0+8, n0+16)
/// from a tile stored [n][k] (k contiguous: K for Q K^T): b[0], b[1] for the
/// first n-tile, b[2], b[3] for the second.
__device__ __forceinline__ void loadBFromNK(uint32_t (&b)[4], const bf16 *tile,
                                            int ld, int n0, int k0, int lane) {
  // Matrices: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7),
  // (n 8-15, k 8-15).
  loadMatrices<false>(b, tile + (n0 + (lane & 7) + (lane >> 4) * 8) * ld + k0 +
                             ((lane >> 3) & 1) * 8);
}

/// The same from a tile stored [k][n] (n contiguous: V for P V), through
/// ldmatrix's transpose.
__device__ __forceinline__ void loadBFromKN(uint32_t (&b)[4], const bf16 *tile,
                                            int ld, int k0, int n0, int lane) {
  // Stored matrices: (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15),
  // (k 8-15, n 8-15); transposed, each gives one B register.
  loadMatrices<true>(b, tile + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * ld +
                            n0 + (lane >> 4) * 8);
}

/// c += a * b on a 16x8 f32 tile (m16n8k16, bf16 inputs).
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4],
                                    uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Two floats as a bf16 pair, \p low in the low half (the lower column).
__device__ __forceinline__ uint32_t packBf16(float low, float high) {
  __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<uint32_t *>(&pair);
}

/// The A operand of a k16 step from accumulators: columns [16 kk, 16 kk + 16)
/// of a 16-row C tile are n-tiles 2 kk and 2 kk + 1, whose fragments hold
/// exactly the A fragment's (row, column) pairs.
template <int N>
__device__ __forceinline__ void
accumulatorsAsA(uint32_t (&a)[4], const float (&c)[N][4], int kk) {
  a[0] = packBf16(c[2 * kk][0], c[2 * kk][1]);
  a[1] = packBf16(c[2 * kk][2], c[2 * kk][3]);
  a[2] = packBf16(c[2 * kk + 1][0], c[2 * kk + 1][1]);
  a[3] = packBf16(c[2 * kk + 1][2], c[2 * kk + 1][3]);
}

//===----------------------------------------------------------------------===//
// Tile loads and stores
//===----------------------------------------------------------------------===//

/// Loads rows [0, rows) x columns [0, cols) of a bf16 matrix with row stride
/// \p stride into a Rows x HD shared tile (row stride HD + 8), zero-filling
/// the rest: tensor-core steps over the padding then add nothing, and rows
/// beyond the operand hold no NaN that 0 * NaN could spread. Asynchronous
/// (cp.async) when vectorized; commit and wait are the caller's.
template <int Rows, int HD>
__device__ __forceinline__ void loadTileBf16(bf16 *tile, const bf16 *source,
                                             int64_t stride, int rows, int cols,
                                             bool vectorized) {
  constexpr int LD = bf16Stride(HD), Chunks = HD / 8;
  for (int c = threadIdx.x; c < Rows * Chunks; c += Bf16Threads) {
    int r = c / Chunks, k = (c % Chunks) * 8;
    bf16 *to = tile + r * LD + k;
    bool valid = r < rows && k < cols;
    const bf16 *from = valid ? source + r * stride + k : source;
    if (vectorized) {
      copyAsync16(to, from, valid ? 16 : 0);
    } else {
      uint32_t words[4] = {0, 0, 0, 0};
      if (valid) {
        const uint16_t *bits = reinterpret_cast<const uint16_t *>(from);
#pragma unroll
        for (int e = 0; e < 4; ++e)
          words[e] = uint32_t(bits[2 * e]) | (uint32_t(bits[2 * e + 1]) << 16);
      }
      *reinterpret_cast<uint4 *>(to) =
          make_uint4(words[0], words[1], words[2], words[3]);
    }
  }
}

/// The f32 counterpart (row stride HD + 1, so synchronous, 16-byte global
/// loads when vectorized).
template <int Rows, int HD>
__device__ __forceinline__ void loadTileF32(float *tile, const float *source,
                                            int64_t stride, int rows, int cols,
                                            bool vectorized) {
  constexpr int LD = f32Stride(HD), Chunks = HD / 4;
  for (int c = threadIdx.x; c < Rows * Chunks; c += F32Threads) {
    int r = c / Chunks, k = (c % Chunks) * 4;
    float *to = tile + r * LD + k;
    float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (r < rows && k < cols) {
      const float *from = source + r * stride + k;
      if (vectorized)
        value = *reinterpret_cast<const float4 *>(from);
      else
        value = make_float4(from[0], from[1], from[2], from[3]);
    }
    to[0] = value.x;
    to[1] = value.y;
    to[2] = value.z;
    to[3] = value.w;
  }
}

/// Stores two adjacent row elements.
__device__ __forceinline__ void storePair(bf16 *to, float first, float second,
                                          bool vectorized) {
  if (vectorized) {
    *reinterpret_cast<__nv_bfloat162 *>(to) =
        __floats2bfloat162_rn(first, second);
  } else {
    to[0] = __float2bfloat16_rn(first);
    to[1] = __float2bfloat16_rn(second);
  }
}

/// Writes a warp's 16 x HD accumulator tile (rows from \p row0, of which
/// row0 + g and row0 + g + 8 are this lane's) times \p factor, columns below
/// \p cols, rows below \p rows.
template <int HD>
__device__ __forceinline__ void
storeAccumulators(const float (&acc)[HD / 8][4], const TensorView &view, int b,
                  int h, int row0, int rows, int cols, float factor0,
                  float factor1, bool vectorized, int lane) {
  int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    int row = row0 + g + 8 * half;
    if (row >= rows)
      continue;
    float factor = half ? factor1 : factor0;
    bf16 *to = rowPointer<bf16>(view, b, h, row);
#pragma unroll
    for (int nt = 0; nt < HD / 8; ++nt) {
      int col = nt * 8 + 2 * t;
      if (nt * 8 < cols)
        storePair(to + col, acc[nt][2 * half] * factor,
                  acc[nt][2 * half + 1] * factor, vectorized);
    }
  }
}

/// Blocks of a (b, h) x tile grid, flattened into grid.x (gridDim.y would
/// cap B * H at 65535). Tiles of one (b, h) are adjacent, for L2 reuse of
/// its K and V. Under causal masking the longest tiles are scheduled first
/// so that they do not straggle at the end: the last query tiles
/// (\p lastFirst, forward and dQ), the first key tiles (dK/dV).
struct BlockTile {
  int tile, b, h;
};
__device__ __forceinline__ BlockTile blockTile(int tiles, int heads,
                                               bool lastFirst = true) {
  int index = static_cast<int>(blockIdx.x);
  BlockTile result;
  result.tile = lastFirst ? tiles - 1 - index % tiles : index % tiles;
  int bh = index / tiles;
  result.b = bh / heads;
  result.h = bh % heads;
  return result;
}

//===----------------------------------------------------------------------===//
// bf16 forward
//===----------------------------------------------------------------------===//

/// The forward of a tile of 64 MT query rows: every warp owns MT tiles of 16
/// rows, so that each K and V fragment it loads from shared memory feeds MT
/// tensor-core ops. \p Masked: the variant for calls with a mask (MT 1: the
/// mask's addressing needs the registers of the second row tile).
template <int HD, int MT, bool Masked>
__device__ __forceinline__ void forwardBf16(const Params &p) {
  constexpr int BM = 64 * MT, BN = Bf16FwdKeys;
  constexpr int LD = bf16Stride(HD);
  extern __shared__ __align__(128) unsigned char sharedBytes[];
  bf16 *qTile = reinterpret_cast<bf16 *>(sharedBytes);
  bf16 *kTiles = qTile + BM * LD; // [2][BN][LD]
  bf16 *vTiles = kTiles + 2 * BN * LD;

  BlockTile block = blockTile((p.queries + BM - 1) / BM, p.heads);
  const int b = block.b, h = block.h, hk = h / p.group;
  const int m0 = block.tile * BM;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const bool vectorized = p.vectorized;
  // Row tile mt of this warp: rows rowBase + 16 mt + {g, g + 8} are the
  // lane's.
  const int warpRow = warp * 16 * MT, rowBase = m0 + warpRow;

  const bf16 *qBase = rowPointer<bf16>(p.q, b, h, m0);
  const bf16 *kBase = rowPointer<bf16>(p.k, b, hk, 0);
  const bf16 *vBase = rowPointer<bf16>(p.v, b, hk, 0);
  // Keys beyond the block's last row are all above the diagonal.
  const int keyEnd = p.causal ? min(p.keys, m0 + BM) : p.keys;
  const int keyTiles = (keyEnd + BN - 1) / BN;

  if (keyTiles > 0) {
    loadTileBf16<BM, HD>(qTile, qBase, p.q.rowStride, p.queries - m0, p.headDim,
                         vectorized);
    loadTileBf16<BN, HD>(kTiles, kBase, p.k.rowStride, p.keys, p.headDim,
                         vectorized);
    loadTileBf16<BN, HD>(vTiles, vBase, p.v.rowStride, p.keys, p.valueDim,
                         vectorized);
    commitCopies();
  }

  float acc[MT][HD / 8][4];
  // Per row: the running max (base 2) and this lane's part of the sum.
  float rowMax[MT][2], rowSum[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int nt = 0; nt < HD / 8; ++nt)
      acc[mt][nt][0] = acc[mt][nt][1] = acc[mt][nt][2] = acc[mt][nt][3] = 0.0f;
    rowMax[mt][0] = rowMax[mt][1] = negativeInfinity();
    rowSum[mt][0] = rowSum[mt][1] = 0.0f;
  }

  for (int it = 0; it < keyTiles; ++it) {
    const int n0 = it * BN;
    if (it + 1 < keyTiles) {
      // Prefetch the next tile into the other buffer, released by the
      // barrier that ended the previous iteration.
      const int n1 = n0 + BN, buffer = (it + 1) & 1;
      loadTileBf16<BN, HD>(kTiles + buffer * BN * LD,
                           kBase + n1 * p.k.rowStride, p.k.rowStride,
                           p.keys - n1, p.headDim, vectorized);
      loadTileBf16<BN, HD>(vTiles + buffer * BN * LD,
                           vBase + n1 * p.v.rowStride, p.v.rowStride,
                           p.keys - n1, p.valueDim, vectorized);
      commitCopies();
      waitCopies<1>();
    } else {
      waitCopies<0>();
    }
    __syncthreads();
    const bf16 *kTile = kTiles + (it & 1) * BN * LD;
    const bf16 *vTile = vTiles + (it & 1) * BN * LD;

    // S = Q K^T for the warp's rows x BN keys.
    float s[MT][BN / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
        s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      if (kk * 16 >= p.headDim)
        break;
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        loadA(a[mt], qTile, LD, warpRow + 16 * mt, kk * 16, lane);
#pragma unroll
      for (int np = 0; np < BN / 16; ++np) {
        uint32_t bk[4];
        loadBFromNK(bk, kTile, LD, np * 16, kk * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma(s[mt][2 * np], a[mt], bk[0], bk[1]);
          mma(s[mt][2 * np + 1], a[mt], bk[2], bk[3]);
        }
      }
    }

    // Base-2 scores.
    withScoreMode<Masked>(p, n0, BN, m0, [&](auto mode) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        scoreTile<decltype(mode)::value, false>(s[mt], p, b, h,
                                                rowBase + 16 * mt, n0, lane);
    });

    // The online softmax: new row maxima, rescaled sums and accumulators,
    // and the tile's probabilities in place of its scores.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      float tileMax[2] = {negativeInfinity(), negativeInfinity()};
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          tileMax[e >> 1] = fmaxf(tileMax[e >> 1], s[mt][nt][e]);
      float shift[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        // The 4 lanes of a quad hold the row's columns.
        tileMax[r] =
            fmaxf(tileMax[r], __shfl_xor_sync(0xffffffffu, tileMax[r], 1));
        tileMax[r] =
            fmaxf(tileMax[r], __shfl_xor_sync(0xffffffffu, tileMax[r], 2));
        float newMax = fmaxf(rowMax[mt][r], tileMax[r]);
        // While the row has seen no visible key, shift by 0: exp2(-inf - 0)
        // is 0, where exp2(-inf - -inf) would be NaN.
        shift[r] = newMax == negativeInfinity() ? 0.0f : newMax;
        float alpha = fastExp2(rowMax[mt][r] - shift[r]);
        rowMax[mt][r] = newMax;
        rowSum[mt][r] *= alpha;
#pragma unroll
        for (int nt = 0; nt < HD / 8; ++nt) {
          acc[mt][nt][2 * r] *= alpha;
          acc[mt][nt][2 * r + 1] *= alpha;
        }
      }
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[mt][nt][e] = fastExp2(s[mt][nt][e] - shift[e >> 1]);
          rowSum[mt][e >> 1] += s[mt][nt][e];
        }
    }

    // O += P V, P straight from the accumulators.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        accumulatorsAsA(a[mt], s[mt], kk);
#pragma unroll
      for (int np = 0; np < HD / 16; ++np) {
        if (np * 16 >= p.valueDim)
          break;
        uint32_t bv[4];
        loadBFromKN(bv, vTile, LD, kk * 16, np * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma(acc[mt][2 * np], a[mt], bv[0], bv[1]);
          mma(acc[mt][2 * np + 1], a[mt], bv[2], bv[3]);
        }
      }
    }
    // The next iteration's prefetch overwrites this buffer.
    __syncthreads();
  }

#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    float inverse[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = rowSum[mt][r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      // No visible key: O = 0 and LSE = -inf.
      inverse[r] = sum > 0.0f ? 1.0f / sum : 0.0f;
      int row = rowBase + 16 * mt + g + 8 * r;
      if (t == 0 && row < p.queries)
        p.lse[int64_t(b) * p.lseBatchStride + int64_t(h) * p.lseHeadStride +
              row] = sum > 0.0f ? (rowMax[mt][r] + log2f(sum)) * Ln2
                                : negativeInfinity();
    }
    storeAccumulators<HD>(acc[mt], p.out, b, h, rowBase + 16 * mt, p.queries,
                          p.valueDim, inverse[0], inverse[1], vectorized, lane);
  }
}

//===----------------------------------------------------------------------===//
// bf16 backward
//===----------------------------------------------------------------------===//

/// dK and dV of a tile of keys of one kv head: every warp owns MT tiles of
/// 16 keys and walks the query tiles of the group's query heads (under
/// causal masking only those at or below the tile's first key), computing
/// with its keys as the M dimension: S^T = K Q^T, P^T, dV += P^T dO,
/// dP^T = V dO^T, dS^T = P^T (dP^T - Drow), dK += dS^T Q.
template <int HD> __device__ __forceinline__ void dkdvBf16(const Params &p) {
  constexpr int MT = bf16DkdvKeyTiles(HD), BN = bf16DkdvKeys(HD),
                BM = Bf16DkdvQueries, LD = bf16Stride(HD);
  extern __shared__ __align__(128) unsigned char sharedBytes[];
  bf16 *kTile = reinterpret_cast<bf16 *>(sharedBytes);
  bf16 *vTile = kTile + BN * LD;
  bf16 *qTiles = vTile + BN * LD;       // [2][BM][LD]
  bf16 *doTiles = qTiles + 2 * BM * LD; // [2][BM][LD]
  float *lseTiles = reinterpret_cast<float *>(doTiles + 2 * BM * LD); // [2][BM]
  float *drowTiles = lseTiles + 2 * BM;                               // [2][BM]

  BlockTile block = blockTile((p.keys + BN - 1) / BN, p.kvHeads, false);
  const int b = block.b, hk = block.h;
  const int n0 = block.tile * BN;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int t = lane & 3;
  const bool vectorized = p.vectorized;
  // Key tile mt of this warp: keys keyBase + 16 mt + {g, g + 8} are the
  // lane's.
  const int warpKey = warp * 16 * MT, keyBase = n0 + warpKey;

  const int queryTiles = (p.queries + BM - 1) / BM;
  // Under causal masking query i sees key j only if i >= j.
  const int firstTile = p.causal ? min(n0 / BM, queryTiles) : 0;
  const int tilesPerHead = queryTiles - firstTile;
  const int steps = tilesPerHead * p.group;

  auto prefetch = [&](int step, int buffer) {
    int h = hk * p.group + step / tilesPerHead;
    int m0 = (firstTile + step % tilesPerHead) * BM;
    loadTileBf16<BM, HD>(qTiles + buffer * BM * LD,
                         rowPointer<bf16>(p.q, b, h, m0), p.q.rowStride,
                         p.queries - m0, p.headDim, vectorized);
    loadTileBf16<BM, HD>(doTiles + buffer * BM * LD,
                         rowPointer<bf16>(p.dout, b, h, m0), p.dout.rowStride,
                         p.queries - m0, p.valueDim, vectorized);
    // The rows' LSE and Drow from the scratch, asynchronously too (a
    // synchronous load here would stall the loading warp for a global
    // memory latency every step).
    const int64_t first = scratchIndex(p, b, h, m0);
    for (int c = threadIdx.x; c < BM / 2; c += Bf16Threads) {
      bool isLse = c < BM / 4;
      int k = (isLse ? c : c - BM / 4) * 4;
      copyAsync16((isLse ? lseTiles : drowTiles) + buffer * BM + k,
                  (isLse ? p.lseLog2 : p.drow) + first + k, 16);
    }
  };

  if (steps > 0) {
    loadTileBf16<BN, HD>(kTile, rowPointer<bf16>(p.k, b, hk, n0), p.k.rowStride,
                         p.keys - n0, p.headDim, vectorized);
    loadTileBf16<BN, HD>(vTile, rowPointer<bf16>(p.v, b, hk, n0), p.v.rowStride,
                         p.keys - n0, p.valueDim, vectorized);
    prefetch(0, 0);
    commitCopies();
  }

  float dk[MT][HD / 8][4], dv[MT][HD / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < HD / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        dk[mt][nt][e] = dv[mt][nt][e] = 0.0f;

  for (int step = 0; step < steps; ++step) {
    if (step + 1 < steps) {
      prefetch(step + 1, (step + 1) & 1);
      commitCopies();
      waitCopies<1>();
    } else {
      waitCopies<0>();
    }
    __syncthreads();
    const int buffer = step & 1;
    const int h = hk * p.group + step / tilesPerHead;
    const int m0 = (firstTile + step % tilesPerHead) * BM;
    const bf16 *qTile = qTiles + buffer * BM * LD;
    const bf16 *doTile = doTiles + buffer * BM * LD;
    const float *lseTile = lseTiles + buffer * BM;
    const float *drowTile = drowTiles + buffer * BM;

    // S^T = K Q^T and dP^T = V dO^T (the warp's keys x BM queries) in one
    // k loop: twice the independent accumulator chains per step, which the
    // tensor cores' latency needs. Steps beyond D (or E) add the tiles'
    // zero padding.
    float pt[MT][BM / 8][4], ds[MT][BM / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < BM / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          pt[mt][nt][e] = ds[mt][nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      if (kk * 16 >= p.headDim && kk * 16 >= p.valueDim)
        break;
      uint32_t ak[MT][4], av[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        loadA(ak[mt], kTile, LD, warpKey + 16 * mt, kk * 16, lane);
        loadA(av[mt], vTile, LD, warpKey + 16 * mt, kk * 16, lane);
      }
#pragma unroll
      for (int np = 0; np < BM / 16; ++np) {
        uint32_t bq[4], bo[4];
        loadBFromNK(bq, qTile, LD, np * 16, kk * 16, lane);
        loadBFromNK(bo, doTile, LD, np * 16, kk * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma(pt[mt][2 * np], ak[mt], bq[0], bq[1]);
          mma(pt[mt][2 * np + 1], ak[mt], bq[2], bq[3]);
          mma(ds[mt][2 * np], av[mt], bo[0], bo[1]);
          mma(ds[mt][2 * np + 1], av[mt], bo[2], bo[3]);
        }
      }
    }
    // P^T = exp2(s - lse).
    withScoreMode(p, n0, BN, m0, [&](auto mode) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        scoreTile<decltype(mode)::value, true>(pt[mt], p, b, h,
                                               keyBase + 16 * mt, m0, lane);
    });
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < BM / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          pt[mt][nt][e] =
              fastExp2(pt[mt][nt][e] - lseTile[nt * 8 + 2 * t + (e & 1)]);

          // dV += P^T dO.
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        accumulatorsAsA(a[mt], pt[mt], kk);
#pragma unroll
      for (int np = 0; np < HD / 16; ++np) {
        if (np * 16 >= p.valueDim)
          break;
        uint32_t bo[4];
        loadBFromKN(bo, doTile, LD, kk * 16, np * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma(dv[mt][2 * np], a[mt], bo[0], bo[1]);
          mma(dv[mt][2 * np + 1], a[mt], bo[2], bo[3]);
        }
      }
    }

    // dS^T = P^T (dP^T - Drow) in place.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < BM / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          ds[mt][nt][e] = pt[mt][nt][e] *
                          (ds[mt][nt][e] - drowTile[nt * 8 + 2 * t + (e & 1)]);

          // dK += dS^T Q (scaled at the end).
#pragma unroll
    for (int kk = 0; kk < BM / 16; ++kk) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        accumulatorsAsA(a[mt], ds[mt], kk);
#pragma unroll
      for (int np = 0; np < HD / 16; ++np) {
        if (np * 16 >= p.headDim)
          break;
        uint32_t bq[4];
        loadBFromKN(bq, qTile, LD, kk * 16, np * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma(dk[mt][2 * np], a[mt], bq[0], bq[1]);
          mma(dk[mt][2 * np + 1], a[mt], bq[2], bq[3]);
        }
      }
    }
    // The next iteration's prefetch overwrites this buffer.
    __syncthreads();
  }

#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    storeAccumulators<HD>(dk[mt], p.dk, b, hk, keyBase + 16 * mt, p.keys,
                          p.headDim, p.scale, p.scale, vectorized, lane);
    storeAccumulators<HD>(dv[mt], p.dv, b, hk, keyBase + 16 * mt, p.keys,
                          p.valueDim, 1.0f, 1.0f, vectorized, lane);
  }
}

/// dQ of a tile of 64 MT query rows: every warp owns MT tiles of 16 rows
/// and walks the key tiles: S = Q K^T, P, dP = dO V^T, dS = P (dP - Drow),
/// dQ += dS K. \p Masked: the variant for calls with a mask.
template <int HD, int MT, bool Masked>
__device__ __forceinline__ void dqBf16(const Params &p) {
  constexpr int BM = 64 * MT, BN = bf16DqKeys(HD), LD = bf16Stride(HD);
  extern __shared__ __align__(128) unsigned char sharedBytes[];
  bf16 *qTile = reinterpret_cast<bf16 *>(sharedBytes);
  bf16 *doTile = qTile + BM * LD;
  bf16 *kTiles = doTile + BM * LD;     // [2][BN][LD]
  bf16 *vTiles = kTiles + 2 * BN * LD; // [2][BN][LD]

  BlockTile block = blockTile((p.queries + BM - 1) / BM, p.heads);
  const int b = block.b, h = block.h, hk = h / p.group;
  const int m0 = block.tile * BM;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2;
  const bool vectorized = p.vectorized;
  const int warpRow = warp * 16 * MT, rowBase = m0 + warpRow;

  const bf16 *kBase = rowPointer<bf16>(p.k, b, hk, 0);
  const bf16 *vBase = rowPointer<bf16>(p.v, b, hk, 0);
  const int keyEnd = p.causal ? min(p.keys, m0 + BM) : p.keys;
  const int keyTiles = (keyEnd + BN - 1) / BN;

  if (keyTiles > 0) {
    loadTileBf16<BM, HD>(qTile, rowPointer<bf16>(p.q, b, h, m0), p.q.rowStride,
                         p.queries - m0, p.headDim, vectorized);
    loadTileBf16<BM, HD>(doTile, rowPointer<bf16>(p.dout, b, h, m0),
                         p.dout.rowStride, p.queries - m0, p.valueDim,
                         vectorized);
    loadTileBf16<BN, HD>(kTiles, kBase, p.k.rowStride, p.keys, p.headDim,
                         vectorized);
    loadTileBf16<BN, HD>(vTiles, vBase, p.v.rowStride, p.keys, p.valueDim,
                         vectorized);
    commitCopies();
  }
  float lse[MT][2], drow[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      int64_t index = scratchIndex(p, b, h, rowBase + 16 * mt + g + 8 * r);
      lse[mt][r] = p.lseLog2[index];
      drow[mt][r] = p.drow[index];
    }

  float dq[MT][HD / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int nt = 0; nt < HD / 8; ++nt)
      dq[mt][nt][0] = dq[mt][nt][1] = dq[mt][nt][2] = dq[mt][nt][3] = 0.0f;

  for (int it = 0; it < keyTiles; ++it) {
    const int n0 = it * BN;
    if (it + 1 < keyTiles) {
      const int n1 = n0 + BN, buffer = (it + 1) & 1;
      loadTileBf16<BN, HD>(kTiles + buffer * BN * LD,
                           kBase + n1 * p.k.rowStride, p.k.rowStride,
                           p.keys - n1, p.headDim, vectorized);
      loadTileBf16<BN, HD>(vTiles + buffer * BN * LD,
                           vBase + n1 * p.v.rowStride, p.v.rowStride,
                           p.keys - n1, p.valueDim, vectorized);
      commitCopies();
      waitCopies<1>();
    } else {
      waitCopies<0>();
    }
    __syncthreads();
    const bf16 *kTile = kTiles + (it & 1) * BN * LD;
    const bf16 *vTile = vTiles + (it & 1) * BN * LD;

    // S = Q K^T and dP = dO V^T in one k loop (as in dkdvBf16).
    float ps[MT][BN / 8][4], ds[MT][BN / 8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          ps[mt][nt][e] = ds[mt][nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < HD / 16; ++kk) {
      if (kk * 16 >= p.headDim && kk * 16 >= p.valueDim)
        break;
      uint32_t aq[MT][4], ao[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        loadA(aq[mt], qTile, LD, warpRow + 16 * mt, kk * 16, lane);
        loadA(ao[mt], doTile, LD, warpRow + 16 * mt, kk * 16, lane);
      }
#pragma unroll
      for (int np = 0; np < BN / 16; ++np) {
        uint32_t bk[4], bv[4];
        loadBFromNK(bk, kTile, LD, np * 16, kk * 16, lane);
        loadBFromNK(bv, vTile, LD, np * 16, kk * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma(ps[mt][2 * np], aq[mt], bk[0], bk[1]);
          mma(ps[mt][2 * np + 1], aq[mt], bk[2], bk[3]);
          mma(ds[mt][2 * np], ao[mt], bv[0], bv[1]);
          mma(ds[mt][2 * np + 1], ao[mt], bv[2], bv[3]);
        }
      }
    }
    // P = exp2(s - lse).
    withScoreMode<Masked>(p, n0, BN, m0, [&](auto mode) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        scoreTile<decltype(mode)::value, false>(ps[mt], p, b, h,
                                                rowBase + 16 * mt, n0, lane);
    });
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          ps[mt][nt][e] = fastExp2(ps[mt][nt][e] - lse[mt][e >> 1]);

          // dS = P (dP - Drow) in place.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < BN / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          ds[mt][nt][e] = ps[mt][nt][e] * (ds[mt][nt][e] - drow[mt][e >> 1]);

          // dQ += dS K (scaled at the end).
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        accumulatorsAsA(a[mt], ds[mt], kk);
#pragma unroll
      for (int np = 0; np < HD / 16; ++np) {
        if (np * 16 >= p.headDim)
          break;
        uint32_t bk[4];
        loadBFromKN(bk, kTile, LD, kk * 16, np * 16, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma(dq[mt][2 * np], a[mt], bk[0], bk[1]);
          mma(dq[mt][2 * np + 1], a[mt], bk[2], bk[3]);
        }
      }
    }
    __syncthreads();
  }

#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
    storeAccumulators<HD>(dq[mt], p.dq, b, h, rowBase + 16 * mt, p.queries,
                          p.headDim, p.scale, p.scale, vectorized, lane);
}

//===----------------------------------------------------------------------===//
// f32 (FP32 FMA)
//===----------------------------------------------------------------------===//
//
// 256 threads as ty (16) x tx (16), the 16 tx of a ty in one half-warp: a
// thread owns rows 4 ty + {0..3} of the tile and columns tx + 16 c, so a row
// is reduced with shuffles inside the half-warp, and column walks of the 16
// threads over padded rows hit 16 distinct banks.

/// acc[a][c] += sum_d A[row0 + a][d] * B[tx + 16 c][d] over d < length: a
/// 4 x C block of A B^T from two row-major shared tiles.
template <int C>
__device__ __forceinline__ void dotTile(float (&acc)[4][C], const float *aTile,
                                        int lda, int row0, const float *bTile,
                                        int ldb, int tx, int length) {
#pragma unroll 4
  for (int d = 0; d < length; ++d) {
    float av[4], bv[C];
#pragma unroll
    for (int a = 0; a < 4; ++a)
      av[a] = aTile[(row0 + a) * lda + d];
#pragma unroll
    for (int c = 0; c < C; ++c)
      bv[c] = bTile[(tx + 16 * c) * ldb + d];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int c = 0; c < C; ++c)
        acc[a][c] = fmaf(av[a], bv[c], acc[a][c]);
  }
}

/// acc[a][c] += sum_j W[row0 + a][j] * X[j][tx + 16 c] over j < length: a
/// 4 x C block of W X, W and X row-major in shared memory.
template <int C>
__device__ __forceinline__ void
productTile(float (&acc)[4][C], const float *wTile, int ldw, int row0,
            const float *xTile, int ldx, int tx, int length) {
#pragma unroll 4
  for (int j = 0; j < length; ++j) {
    float wv[4], xv[C];
#pragma unroll
    for (int a = 0; a < 4; ++a)
      wv[a] = wTile[(row0 + a) * ldw + j];
#pragma unroll
    for (int c = 0; c < C; ++c)
      xv[c] = xTile[j * ldx + tx + 16 * c];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int c = 0; c < C; ++c)
        acc[a][c] = fmaf(wv[a], xv[c], acc[a][c]);
  }
}

/// Reduces over the 16 threads of a half-warp (one tile row).
__device__ __forceinline__ float rowMaxOf(float x) {
#pragma unroll
  for (int offset = 1; offset < 16; offset <<= 1)
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}
__device__ __forceinline__ float rowSumOf(float x) {
#pragma unroll
  for (int offset = 1; offset < 16; offset <<= 1)
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

/// Writes rows row0 + {0..3} (below \p rows) of a 4 x HD/16 block, columns
/// tx + 16 c below \p cols, each row times its factor.
template <int HD>
__device__ __forceinline__ void
storeF32(const float (&acc)[4][HD / 16], const TensorView &view, int b, int h,
         int row0, int rows, int cols, const float (&factor)[4], int tx) {
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    if (row0 + a >= rows)
      continue;
    float *to = rowPointer<float>(view, b, h, row0 + a);
#pragma unroll
    for (int c = 0; c < HD / 16; ++c)
      if (tx + 16 * c < cols)
        to[tx + 16 * c] = acc[a][c] * factor[a];
  }
}

template <int HD> __device__ __forceinline__ void forwardF32(const Params &p) {
  constexpr int BM = F32FwdRows, BN = F32FwdKeys, LD = f32Stride(HD);
  constexpr int PLD = BN + 1, C = BN / 16, CO = HD / 16;
  extern __shared__ __align__(128) unsigned char sharedBytes[];
  float *qTile = reinterpret_cast<float *>(sharedBytes);
  float *kTile = qTile + BM * LD;
  float *vTile = kTile + BN * LD;
  float *pTile = vTile + BN * LD; // [BM][PLD]

  BlockTile block = blockTile((p.queries + BM - 1) / BM, p.heads);
  const int b = block.b, h = block.h, hk = h / p.group;
  const int m0 = block.tile * BM;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const bool vectorized = p.vectorized;
  const int keyEnd = p.causal ? min(p.keys, m0 + BM) : p.keys;

  loadTileF32<BM, HD>(qTile, rowPointer<float>(p.q, b, h, m0), p.q.rowStride,
                      p.queries - m0, p.headDim, vectorized);

  float acc[4][CO];
  float rowMax[4], rowSum[4];
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    rowMax[a] = negativeInfinity();
    rowSum[a] = 0.0f;
#pragma unroll
    for (int c = 0; c < CO; ++c)
      acc[a][c] = 0.0f;
  }

  for (int n0 = 0; n0 < keyEnd; n0 += BN) {
    loadTileF32<BN, HD>(kTile, rowPointer<float>(p.k, b, hk, n0), p.k.rowStride,
                        p.keys - n0, p.headDim, vectorized);
    loadTileF32<BN, HD>(vTile, rowPointer<float>(p.v, b, hk, n0), p.v.rowStride,
                        p.keys - n0, p.valueDim, vectorized);
    __syncthreads();

    float s[4][C];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int c = 0; c < C; ++c)
        s[a][c] = 0.0f;
    dotTile<C>(s, qTile, LD, 4 * ty, kTile, LD, tx, p.headDim);

#pragma unroll
    for (int a = 0; a < 4; ++a) {
      int row = m0 + 4 * ty + a;
      float tileMax = negativeInfinity();
#pragma unroll
      for (int c = 0; c < C; ++c) {
        s[a][c] = scoreLog2(p, s[a][c], b, h, row, n0 + tx + 16 * c);
        tileMax = fmaxf(tileMax, s[a][c]);
      }
      float newMax = fmaxf(rowMax[a], rowMaxOf(tileMax));
      float shift = newMax == negativeInfinity() ? 0.0f : newMax;
      float alpha = exp2f(rowMax[a] - shift);
      rowMax[a] = newMax;
      rowSum[a] *= alpha;
#pragma unroll
      for (int c = 0; c < CO; ++c)
        acc[a][c] *= alpha;
#pragma unroll
      for (int c = 0; c < C; ++c) {
        float probability = exp2f(s[a][c] - shift);
        rowSum[a] += probability;
        pTile[(4 * ty + a) * PLD + tx + 16 * c] = probability;
      }
    }
    __syncthreads();

    productTile<CO>(acc, pTile, PLD, 4 * ty, vTile, LD, tx,
                    min(BN, p.keys - n0));
    // The next tile's loads overwrite K, V and P.
    __syncthreads();
  }

  float inverse[4];
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    float sum = rowSumOf(rowSum[a]);
    inverse[a] = sum > 0.0f ? 1.0f / sum : 0.0f;
    int row = m0 + 4 * ty + a;
    if (tx == 0 && row < p.queries)
      p.lse[int64_t(b) * p.lseBatchStride + int64_t(h) * p.lseHeadStride +
            row] =
          sum > 0.0f ? (rowMax[a] + log2f(sum)) * Ln2 : negativeInfinity();
  }
  storeF32<HD>(acc, p.out, b, h, m0 + 4 * ty, p.queries, p.valueDim, inverse,
               tx);
}

template <int HD> __device__ __forceinline__ void dkdvF32(const Params &p) {
  constexpr int BN = F32DkdvKeys, BM = F32DkdvQueries, LD = f32Stride(HD);
  constexpr int PLD = BM + 1, C = BM / 16, CO = HD / 16;
  extern __shared__ __align__(128) unsigned char sharedBytes[];
  float *kTile = reinterpret_cast<float *>(sharedBytes);
  float *vTile = kTile + BN * LD;
  float *qTile = vTile + BN * LD;
  float *doTile = qTile + BM * LD;
  float *pTile = doTile + BM * LD;  // P^T [BN][PLD]
  float *dsTile = pTile + BN * PLD; // dS^T [BN][PLD]
  float *lseTile = dsTile + BN * PLD;
  float *drowTile = lseTile + BM;

  BlockTile block = blockTile((p.keys + BN - 1) / BN, p.kvHeads, false);
  const int b = block.b, hk = block.h;
  const int n0 = block.tile * BN;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const bool vectorized = p.vectorized;

  const int queryTiles = (p.queries + BM - 1) / BM;
  const int firstTile = p.causal ? min(n0 / BM, queryTiles) : 0;
  const int tilesPerHead = queryTiles - firstTile;
  const int steps = tilesPerHead * p.group;

  loadTileF32<BN, HD>(kTile, rowPointer<float>(p.k, b, hk, n0), p.k.rowStride,
                      p.keys - n0, p.headDim, vectorized);
  loadTileF32<BN, HD>(vTile, rowPointer<float>(p.v, b, hk, n0), p.v.rowStride,
                      p.keys - n0, p.valueDim, vectorized);

  float dk[4][CO], dv[4][CO];
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int c = 0; c < CO; ++c)
      dk[a][c] = dv[a][c] = 0.0f;

  for (int step = 0; step < steps; ++step) {
    const int h = hk * p.group + step / tilesPerHead;
    const int m0 = (firstTile + step % tilesPerHead) * BM;
    loadTileF32<BM, HD>(qTile, rowPointer<float>(p.q, b, h, m0), p.q.rowStride,
                        p.queries - m0, p.headDim, vectorized);
    loadTileF32<BM, HD>(doTile, rowPointer<float>(p.dout, b, h, m0),
                        p.dout.rowStride, p.queries - m0, p.valueDim,
                        vectorized);
    for (int i = threadIdx.x; i < BM; i += F32Threads) {
      lseTile[i] = p.lseLog2[scratchIndex(p, b, h, m0 + i)];
      drowTile[i] = p.drow[scratchIndex(p, b, h, m0 + i)];
    }
    __syncthreads();

    float st[4][C], dpt[4][C];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int c = 0; c < C; ++c)
        st[a][c] = dpt[a][c] = 0.0f;
    dotTile<C>(st, kTile, LD, 4 * ty, qTile, LD, tx, p.headDim);
    dotTile<C>(dpt, vTile, LD, 4 * ty, doTile, LD, tx, p.valueDim);
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int c = 0; c < C; ++c) {
        int key = n0 + 4 * ty + a, column = tx + 16 * c;
        float x = scoreLog2(p, st[a][c], b, h, m0 + column, key);
        float probability = exp2f(x - lseTile[column]);
        pTile[(4 * ty + a) * PLD + column] = probability;
        dsTile[(4 * ty + a) * PLD + column] =
            probability * (dpt[a][c] - drowTile[column]);
      }
    __syncthreads();

    int length = min(BM, p.queries - m0);
    productTile<CO>(dv, pTile, PLD, 4 * ty, doTile, LD, tx, length);
    productTile<CO>(dk, dsTile, PLD, 4 * ty, qTile, LD, tx, length);
    // The next step's loads overwrite Q, dO, P^T and dS^T.
    __syncthreads();
  }

  const float scale[4] = {p.scale, p.scale, p.scale, p.scale};
  const float one[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  storeF32<HD>(dk, p.dk, b, hk, n0 + 4 * ty, p.keys, p.headDim, scale, tx);
  storeF32<HD>(dv, p.dv, b, hk, n0 + 4 * ty, p.keys, p.valueDim, one, tx);
}

template <int HD> __device__ __forceinline__ void dqF32(const Params &p) {
  constexpr int BM = F32DqRows, BN = F32DqKeys, LD = f32Stride(HD);
  constexpr int SLD = BN + 1, C = BN / 16, CO = HD / 16;
  extern __shared__ __align__(128) unsigned char sharedBytes[];
  float *qTile = reinterpret_cast<float *>(sharedBytes);
  float *doTile = qTile + BM * LD;
  float *kTile = doTile + BM * LD;
  float *vTile = kTile + BN * LD;
  float *dsTile = vTile + BN * LD; // [BM][SLD]

  BlockTile block = blockTile((p.queries + BM - 1) / BM, p.heads);
  const int b = block.b, h = block.h, hk = h / p.group;
  const int m0 = block.tile * BM;
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const bool vectorized = p.vectorized;
  const int keyEnd = p.causal ? min(p.keys, m0 + BM) : p.keys;

  loadTileF32<BM, HD>(qTile, rowPointer<float>(p.q, b, h, m0), p.q.rowStride,
                      p.queries - m0, p.headDim, vectorized);
  loadTileF32<BM, HD>(doTile, rowPointer<float>(p.dout, b, h, m0),
                      p.dout.rowStride, p.queries - m0, p.valueDim, vectorized);
  float lse[4], drow[4], dq[4][CO];
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    lse[a] = p.lseLog2[scratchIndex(p, b, h, m0 + 4 * ty + a)];
    drow[a] = p.drow[scratchIndex(p, b, h, m0 + 4 * ty + a)];
#pragma unroll
    for (int c = 0; c < CO; ++c)
      dq[a][c] = 0.0f;
  }

  for (int n0 = 0; n0 < keyEnd; n0 += BN) {
    loadTileF32<BN, HD>(kTile, rowPointer<float>(p.k, b, hk, n0), p.k.rowStride,
                        p.keys - n0, p.headDim, vectorized);
    loadTileF32<BN, HD>(vTile, rowPointer<float>(p.v, b, hk, n0), p.v.rowStride,
                        p.keys - n0, p.valueDim, vectorized);
    __syncthreads();

    float s[4][C], dp[4][C];
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int c = 0; c < C; ++c)
        s[a][c] = dp[a][c] = 0.0f;
    dotTile<C>(s, qTile, LD, 4 * ty, kTile, LD, tx, p.headDim);
    dotTile<C>(dp, doTile, LD, 4 * ty, vTile, LD, tx, p.valueDim);
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int c = 0; c < C; ++c) {
        int row = m0 + 4 * ty + a, column = tx + 16 * c;
        float x = scoreLog2(p, s[a][c], b, h, row, n0 + column);
        float probability = exp2f(x - lse[a]);
        dsTile[(4 * ty + a) * SLD + column] =
            probability * (dp[a][c] - drow[a]);
      }
    __syncthreads();

    productTile<CO>(dq, dsTile, SLD, 4 * ty, kTile, LD, tx,
                    min(BN, p.keys - n0));
    __syncthreads();
  }

  const float scale[4] = {p.scale, p.scale, p.scale, p.scale};
  storeF32<HD>(dq, p.dq, b, h, m0 + 4 * ty, p.queries, p.headDim, scale, tx);
}

//===----------------------------------------------------------------------===//
// Drow = rowsum(dO * O)
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float toFloat(float x) { return x; }
__device__ __forceinline__ float toFloat(bf16 x) { return __bfloat162float(x); }

/// The backward scratch: a warp per row of [B, H, paddedQueries].
template <typename T> __device__ __forceinline__ void drow(const Params &p) {
  int64_t row = int64_t(blockIdx.x) * DrowRowsPerBlock + (threadIdx.x >> 5);
  int lane = threadIdx.x & 31;
  int64_t rows = int64_t(p.batch) * p.heads * p.paddedQueries;
  if (row >= rows)
    return;
  int i = static_cast<int>(row % p.paddedQueries);
  int bh = static_cast<int>(row / p.paddedQueries);
  int b = bh / p.heads, h = bh % p.heads;
  float sum = 0.0f;
  if (i < p.queries) {
    const T *dout = rowPointer<T>(p.dout, b, h, i);
    const T *out = rowPointer<T>(p.out, b, h, i);
    for (int e = lane; e < p.valueDim; e += 32)
      sum = fmaf(toFloat(dout[e]), toFloat(out[e]), sum);
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (lane == 0) {
    p.drow[row] = sum;
    p.lseLog2[row] = lseLog2(p, b, h, i);
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Entry points (unmangled: CudaAttention.cpp looks them up by name)
//===----------------------------------------------------------------------===//

#define AUTOPAR_ATTENTION_KERNELS(HD)                                          \
  extern "C" __global__ void __launch_bounds__(Bf16Threads)                    \
      autopar_attention_fwd_bf16_hd##HD(Params p) {                            \
    forwardBf16<HD, Bf16FwdRowTiles, false>(p);                                \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(Bf16Threads)                    \
      autopar_attention_fwd_masked_bf16_hd##HD(Params p) {                     \
    forwardBf16<HD, Bf16FwdMaskedRowTiles, true>(p);                           \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(Bf16Threads)                    \
      autopar_attention_dkdv_bf16_hd##HD(Params p) {                           \
    dkdvBf16<HD>(p);                                                           \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(Bf16Threads)                    \
      autopar_attention_dq_bf16_hd##HD(Params p) {                             \
    dqBf16<HD, Bf16DqRowTiles, false>(p);                                      \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(Bf16Threads)                    \
      autopar_attention_dq_masked_bf16_hd##HD(Params p) {                      \
    dqBf16<HD, Bf16DqMaskedRowTiles, true>(p);                                 \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(F32Threads)                     \
      autopar_attention_fwd_f32_hd##HD(Params p) {                             \
    forwardF32<HD>(p);                                                         \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(F32Threads)                     \
      autopar_attention_dkdv_f32_hd##HD(Params p) {                            \
    dkdvF32<HD>(p);                                                            \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(F32Threads)                     \
      autopar_attention_dq_f32_hd##HD(Params p) {                              \
    dqF32<HD>(p);                                                              \
  }

AUTOPAR_ATTENTION_KERNELS(32)
AUTOPAR_ATTENTION_KERNELS(64)
AUTOPAR_ATTENTION_KERNELS(128)

extern "C" __global__ void __launch_bounds__(DrowRowsPerBlock * 32)
    autopar_attention_drow_bf16(Params p) {
  drow<bf16>(p);
}
extern "C" __global__ void __launch_bounds__(DrowRowsPerBlock * 32)
    autopar_attention_drow_f32(Params p) {
  drow<float>(p);
}
