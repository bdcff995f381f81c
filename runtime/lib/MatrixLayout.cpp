//===- MatrixLayout.cpp - How BLAS libraries can read a matrix view -------===//

#include "autopar/runtime/MatrixLayout.h"

#include <algorithm>

namespace autopar::runtime {

MatrixLayout classifyMatrix(int64_t rows, int64_t cols, int64_t rowStride,
                            int64_t colStride) {
  int64_t minRowLd = std::max<int64_t>(cols, 1);
  if (cols <= 1 || colStride == 1) {
    int64_t ld = rows <= 1 ? minRowLd : rowStride;
    if (ld >= minRowLd)
      return {MatrixOrder::RowMajor, ld};
  }
  int64_t minColLd = std::max<int64_t>(rows, 1);
  if (rows <= 1 || rowStride == 1) {
    int64_t ld = cols <= 1 ? minColLd : colStride;
    if (ld >= minColLd)
      return {MatrixOrder::ColMajor, ld};
  }
  return {MatrixOrder::None, 0};
}

} // namespace autopar::runtime
