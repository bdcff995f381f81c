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
/// does not start on 16 bytes. GPT-2's vocabulary of 50257 leaves every
/// column of its logits, and of its LM head's weight, misaligned.
bool isMisaligned(const StoredMatrix &m, int64_t batch, size_t elementSize);

/// The leading dimension that makes columns of \p rows elements of
/// \p elementSize bytes start on 16 bytes.
int64_t alignedLeadingDimension(int64_t rows, size_t elementSize);

/// The bytes of \p m's copy with aligned columns: one matrix if its batches
/// are broadcast (batch stride 0), else \p batch of them.
size_t alignedCopyBytes(const StoredMatrix &m, int64_t batch,
                        size_t elementSize);

/// \p m as its aligned copy at \p data stores it: same sizes and op, the
/// aligned leading dimension, batches packed (or still broadcast).
StoredMatrix alignedCopyOf(const StoredMatrix &m, int64_t batch,
                           size_t elementSize, const char *data);

/// One strided copy: \p rows runs of \p width bytes, \p srcPitch bytes apart
/// from \p src and \p dstPitch apart into \p dst (cuMemcpy2D's terms).
struct StridedCopy {
  char *dst = nullptr;
  const char *src = nullptr;
  int64_t dstPitch = 0, srcPitch = 0;
  size_t width = 0, rows = 0;
};

/// The strided copies that copy the matrices of \p from into \p to (the
/// same sizes, other leading dimensions and batch strides): one per batch,
/// or one for all when both pack their batches back to back, or one when
/// either broadcasts a single matrix.
std::vector<StridedCopy> matrixCopies(const StoredMatrix &to,
                                      const StoredMatrix &from, int64_t batch,
                                      size_t elementSize);

/// Which stored matrices of a GEMM go through an aligned copy: X and Y are
/// copied in before the product, D out after it (and in before, when the
/// product accumulates into it).
struct AlignmentCopyPlan {
  bool x = false, y = false, d = false;
  bool any() const { return x || y || d; }
};

/// Below this many flops a GEMM runs as stored: each copy is a launch, and
/// the product is too short for the slower kernel to cost more.
constexpr double kAlignmentCopyMinFlops = double(int64_t(1) << 31);
/// A GEMM copies its misaligned operands when its flops are at least this
/// many times the bytes the copies move (read and written). On an H100
/// cuBLASLt's misaligned (align-1) bf16 kernels ran GPT-2's LM head at about
/// 115 TFLOP/s against about 600 aligned, and a copy moves about 3 TB/s:
/// the copies pay for themselves from about 50 flops per byte.
constexpr double kAlignmentCopyFlopsPerByte = 128;

/// Plans the aligned copies of \p gemm (element sizes \p abSize for X and
/// Y, \p cSize for D) under \p mode: with Auto, every misaligned matrix is
/// copied if the product has at least kAlignmentCopyMinFlops and
/// kAlignmentCopyFlopsPerByte per byte copied, else none is (a product with
/// one misaligned operand left runs the slow kernel anyway).
AlignmentCopyPlan planAlignmentCopies(const ColumnMajorGemm &gemm,
                                      size_t abSize, size_t cSize,
                                      bool accumulate, AlignmentCopies mode);

} // namespace autopar::runtime::cuda

#endif // AUTOPAR_RUNTIME_CUDA_GEMMPLAN_H
