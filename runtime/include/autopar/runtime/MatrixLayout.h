//===- MatrixLayout.h - How BLAS libraries can read a matrix view -*- C++ -*-//
//
// The GEMM kernels (CPU: OpenBLAS, GPU: cuBLASLt) take strided views; BLAS
// libraries read a matrix row-major or column-major with a leading
// dimension. Both backends classify their operands the same way.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_MATRIXLAYOUT_H
#define AUTOPAR_RUNTIME_MATRIXLAYOUT_H

#include <cstdint>

namespace autopar::runtime {

enum class MatrixOrder { RowMajor, ColMajor, None };

/// How a BLAS library can read a view without copying it: in `order` with
/// leading dimension `ld` (in elements), or not at all (None).
struct MatrixLayout {
  MatrixOrder order;
  int64_t ld;
};

/// Classifies the view of \p rows x \p cols elements where element (i, j) is
/// at i * rowStride + j * colStride. A dimension of size one may have any
/// stride, so it never disqualifies a layout, and the leading dimension is
/// then the smallest BLAS accepts. Row-major is preferred when both fit.
MatrixLayout classifyMatrix(int64_t rows, int64_t cols, int64_t rowStride,
                            int64_t colStride);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_MATRIXLAYOUT_H
