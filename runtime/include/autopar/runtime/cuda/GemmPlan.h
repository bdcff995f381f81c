//===- GemmPlan.h - C += A * B on strided views, column-major ---*- C++ -*-===//
//
// The GPU GEMM kernels take the same memref views as the CPU ones: row-major
// or transposed matrices with any leading dimension, C += A * B. cuBLASLt
// computes D = op(X) * op(Y) + D on column-major matrices. A row-major C is
// the column-major C^T, and C^T = B^T * A^T; so a row-major C swaps A and B.
// A column-major C (a transposed view) is computed as is. Each operand is
// read in place, transposed by cuBLASLt where needed.
//
// This is pure arithmetic on sizes and strides, kept free of CUDA so that
// it is tested without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_GEMMPLAN_H
#define AUTOPAR_RUNTIME_CUDA_GEMMPLAN_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace autopar::runtime::cuda {

/// A (batch of) matrix view(s): element (i, j) of batch b at byte address
/// data + elementSize * (b * batchStride + i * rowStride + j * colStride).
struct MatrixOperand {
  const char *data = nullptr;
  int64_t rows = 0, cols = 0;
  int64_t rowStride = 0, colStride = 0;
  int64_t batchStride = 0;

  MatrixOperand transposed() const {
    return {data, cols, rows, colStride, rowStride, batchStride};
  }
};

/// One stored column-major matrix as cuBLASLt reads it: `rows` x `cols`,
/// leading dimension `ld`, and `transposed` if the product uses its
/// transpose.
struct StoredMatrix {
  const char *data = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
  int64_t batchStride = 0;
  bool transposed = false;
};

/// D (m x n) += op(X) (m x k) * op(Y) (k x n), column-major, `batch` times.
struct ColumnMajorGemm {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  StoredMatrix x, y, d;
};

/// Plans C += A * B for A [M, K], B [K, N], C [M, N] (each a batch of
/// \p batch with its own batch stride). Sizes must agree (the caller
/// checks). Returns std::nullopt, with \p error saying which operand, for a
/// view that is neither row-major nor transposed (no unit stride among its
/// last two dimensions, or rows that overlap), or for a batched C whose
/// batch stride is not positive.
std::optional<ColumnMajorGemm> planGemm(const MatrixOperand &a,
                                        const MatrixOperand &b,
                                        const MatrixOperand &c, int64_t batch,
                                        std::string &error);

/// When the runtime copies a GEMM's misaligned operands into scratches whose
/// columns start on 16 bytes (AUTOPAR_GEMM_ALIGNMENT_COPIES).
enum class AlignmentCopies {
  Auto,   ///< when the GEMM's work pays for the copies (the default)
  Always, ///< every misaligned operand of every GEMM (tests)
  Never,  ///< none: cuBLASLt's slower kernels for misaligned operands
};

/// Parses AUTOPAR_GEMM_ALIGNMENT_COPIES's value: "auto" (also empty),
/// "always" or "never". Returns std::nullopt for anything else.
std::optional<AlignmentCopies> parseAlignmentCopies(const std::string &text);

/// True if cuBLASLt's fast (16-byte vector) kernels cannot read or write
/// \p m as stored: its address, a column or (with several batches) a batch
/// does not start on 16 bytes.
bool isMisaligned(const StoredMatrix &m, int64_t batch, size_t elementSize);

/// The leading dimension that makes columns of \p rows elements of
/// \p elementSize bytes start on 16 bytes.
int64_t alignedLeadingDimension(int64_t rows, size_t elementSize);

/// A copy of \p m grown to \p rows x \p cols (at least its own sizes) at
/// \p data: same op, aligned leading dimension, batches packed back to back
/// (or still one broadcast matrix).
StoredMatrix alignedLayout(const StoredMatrix &m, int64_t rows, int64_t cols,
                           int64_t batch, size_t elementSize,
                           const char *data = nullptr);

/// The bytes that \p m (with \p batch batches) spans when its batches are
/// packed: what a scratch laid out by alignedLayout needs.
size_t packedBytes(const StoredMatrix &m, int64_t batch, size_t elementSize);

/// One strided copy: \p rows runs of \p width bytes, \p srcPitch bytes apart
/// from \p src and \p dstPitch apart into \p dst (cuMemcpy2D's terms).
struct StridedCopy {
  char *dst = nullptr;
  const char *src = nullptr;
  int64_t dstPitch = 0, srcPitch = 0;
  size_t width = 0, rows = 0;
};

/// The strided copies that copy the matrices of \p from (its rows x cols)
/// into \p to (at least as large): one per batch, or one for all when both
/// pack their batches back to back with the same column count, or one when
/// either broadcasts a single matrix.
std::vector<StridedCopy> matrixCopies(const StoredMatrix &to,
                                      const StoredMatrix &from, int64_t batch,
                                      size_t elementSize);

/// One strided zero fill: \p rows runs of \p width bytes, \p pitch apart.
struct StridedFill {
  char *dst = nullptr;
  int64_t pitch = 0;
  size_t width = 0, rows = 0;
};

/// The fills that zero what \p to (an alignedLayout of \p from) holds beyond
/// \p from's rows and columns, so that a padded reduction adds nothing.
std::vector<StridedFill> paddingFills(const StoredMatrix &to,
                                      const StoredMatrix &from, int64_t batch,
                                      size_t elementSize);

/// How a GEMM runs on aligned copies: which matrices are copied (X and Y in
/// before the product, zero-padded; D out after it, and in before when the
/// product accumulates), and the copies' product sizes.
///
/// cuBLASLt's fast kernels load 16-byte vectors along each matrix's stored
/// rows, so besides aligned addresses and leading dimensions they need the
/// size of that dimension to be a multiple of 16 bytes' elements. A
/// dimension that is not (GPT-2's vocabulary of 50257: m of the LM head's
/// products, k of its input gradient's) is padded: the extra rows of m and n
/// produce outputs that are not copied back, the extra terms of k are zero.
struct AlignmentCopyPlan {
  bool x = false, y = false, d = false;
  int64_t m = 0, n = 0, k = 0;
  bool any() const { return x || y || d; }
};

/// Below this many flops a GEMM runs as stored: each copy is a launch, and
/// the product is too short for the slower kernel to cost more.
constexpr double kAlignmentCopyMinFlops = double(int64_t(1) << 31);
/// A GEMM is computed on copies when its flops are at least this many times
/// the bytes the copies move (read and written). On an H100, cuBLASLt's
/// align-1 bf16 kernels ran GPT-2's LM head at about 115 TFLOP/s against
/// about 600 aligned, and a copy moves about 3 TB/s: the copies pay for
/// themselves from about 50 flops per byte.
constexpr double kAlignmentCopyFlopsPerByte = 128;

/// Plans the aligned copies of \p gemm (element sizes \p abSize for X and
/// Y, \p cSize for D) under \p mode. With Auto the product goes through
/// copies when it has at least kAlignmentCopyMinFlops and
/// kAlignmentCopyFlopsPerByte per byte copied, and runs as stored otherwise
/// (never with some matrices copied: one left misaligned keeps the slow
/// kernel).
AlignmentCopyPlan planAlignmentCopies(const ColumnMajorGemm &gemm,
                                      size_t abSize, size_t cSize,
                                      bool accumulate, AlignmentCopies mode);

/// The padded product \p plan describes: its sizes, and in place of each
/// matrix the plan copies, that copy's layout (alignedLayout grown to the
/// product's sizes, data null until a scratch is given). Matrices not copied
/// are \p gemm's.
ColumnMajorGemm alignedGemm(const ColumnMajorGemm &gemm,
                            const AlignmentCopyPlan &plan, size_t abSize,
                            size_t cSize);

} // namespace autopar::runtime::cuda

#endif // AUTOPAR_RUNTIME_CUDA_GEMMPLAN_H
