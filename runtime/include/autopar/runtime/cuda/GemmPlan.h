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

} // namespace autopar::runtime::cuda

#endif // AUTOPAR_RUNTIME_CUDA_GEMMPLAN_H
