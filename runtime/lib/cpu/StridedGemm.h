//===- StridedGemm.h - Matrix multiply on strided views ---------*- C++ -*-===//

#ifndef AUTOPAR_RUNTIME_CPU_STRIDEDGEMM_H
#define AUTOPAR_RUNTIME_CPU_STRIDEDGEMM_H

#include <cstdint>

namespace autopar::runtime::cpu {

/// A float matrix view: element (i, j) is data[i * rowStride + j * colStride].
struct MatrixView {
  float *data;
  int64_t rows;
  int64_t cols;
  int64_t rowStride;
  int64_t colStride;

  MatrixView transposed() const {
    return {data, cols, rows, colStride, rowStride};
  }
};

/// C = A * B + beta * C, for A [m, k], B [k, n], C [m, n] with matching
/// sizes (the caller checks) and beta 0 (C's old values are not read: the
/// zero fill before a GEMM is not needed) or 1 (accumulate). Views with a
/// unit-stride row or column dimension go to cblas_sgemm as they are (as
/// transposed operands where needed); other views are copied to dense
/// scratch first. \p kernel names the caller in errors.
void gemm(const MatrixView &a, const MatrixView &b, const MatrixView &c,
          float beta, const char *kernel);

/// C += A * B.
inline void gemmAccumulate(const MatrixView &a, const MatrixView &b,
                           const MatrixView &c, const char *kernel) {
  gemm(a, b, c, 1.0f, kernel);
}

} // namespace autopar::runtime::cpu

#endif // AUTOPAR_RUNTIME_CPU_STRIDEDGEMM_H
