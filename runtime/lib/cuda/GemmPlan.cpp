//===- GemmPlan.cpp - C += A * B on strided views, column-major -----------===//

#include "autopar/runtime/cuda/GemmPlan.h"

#include "autopar/runtime/MatrixLayout.h"

namespace autopar::runtime::cuda {

namespace {

/// The stored column-major matrix whose op is \p v^T: a row-major view is
/// its own transpose stored column-major (no op), a column-major view is
/// stored as is (op: transpose).
std::optional<StoredMatrix> transposeOf(const MatrixOperand &v) {
  MatrixLayout layout =
      classifyMatrix(v.rows, v.cols, v.rowStride, v.colStride);
  switch (layout.order) {
  case MatrixOrder::RowMajor:
    return StoredMatrix{v.data,    v.cols,        v.rows,
                        layout.ld, v.batchStride, false};
  case MatrixOrder::ColMajor:
    return StoredMatrix{v.data, v.rows, v.cols, layout.ld, v.batchStride, true};
  case MatrixOrder::None:
    break;
  }
  return std::nullopt;
}

std::string describe(const MatrixOperand &v) {
  return "[" + std::to_string(v.rows) + ", " + std::to_string(v.cols) +
         "] with strides [" + std::to_string(v.rowStride) + ", " +
         std::to_string(v.colStride) + "]";
}

} // namespace

std::optional<ColumnMajorGemm> planGemm(const MatrixOperand &a,
                                        const MatrixOperand &b,
                                        const MatrixOperand &c, int64_t batch,
                                        std::string &error) {
  MatrixLayout layoutC =
      classifyMatrix(c.rows, c.cols, c.rowStride, c.colStride);
  if (layoutC.order == MatrixOrder::ColMajor)
    // C^T = B^T A^T, with C^T row-major.
    return planGemm(b.transposed(), a.transposed(), c.transposed(), batch,
                    error);
  if (layoutC.order == MatrixOrder::None) {
    error = "C " + describe(c) +
            " is neither row-major nor transposed (one of its last two "
            "strides must be 1)";
    return std::nullopt;
  }
  if (batch > 1 && c.batchStride <= 0) {
    // Every batch would add into the same elements at once.
    error = "the batches of C overlap (batch stride " +
            std::to_string(c.batchStride) + ")";
    return std::nullopt;
  }
  // Row-major C [M, N] is column-major C^T [N, M] = B^T [N, K] * A^T [K, M].
  std::optional<StoredMatrix> x = transposeOf(b), y = transposeOf(a);
  if (!x || !y) {
    error = std::string(!x ? "B " + describe(b) : "A " + describe(a)) +
            " is neither row-major nor transposed (one of its last two "
            "strides must be 1)";
    return std::nullopt;
  }
  ColumnMajorGemm gemm;
  gemm.m = c.cols;
  gemm.n = c.rows;
  gemm.k = a.cols;
  gemm.batch = batch;
  gemm.x = *x;
  gemm.y = *y;
  gemm.d =
      StoredMatrix{c.data, c.cols, c.rows, layoutC.ld, c.batchStride, false};
  return gemm;
}

} // namespace autopar::runtime::cuda
