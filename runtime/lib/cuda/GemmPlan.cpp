//===- GemmPlan.cpp - C += A * B on strided views, column-major -----------===//

#include "autopar/runtime/cuda/GemmPlan.h"

#include "autopar/runtime/MatrixLayout.h"

#include <algorithm>

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

std::optional<AlignmentCopies> parseAlignmentCopies(const std::string &text) {
  if (text.empty() || text == "auto")
    return AlignmentCopies::Auto;
  if (text == "always")
    return AlignmentCopies::Always;
  if (text == "never")
    return AlignmentCopies::Never;
  return std::nullopt;
}

bool isMisaligned(const StoredMatrix &m, int64_t batch, size_t elementSize) {
  auto offBy16 = [](uint64_t bytes) { return bytes % 16 != 0; };
  // A single column is read as a run: only its start matters.
  bool columns = m.cols > 1 && offBy16(uint64_t(m.ld) * elementSize);
  bool batches = batch > 1 && offBy16(uint64_t(m.batchStride) * elementSize);
  return offBy16(reinterpret_cast<uintptr_t>(m.data)) || columns || batches;
}

namespace {

/// \p value rounded up to a multiple of \p multiple.
int64_t roundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

} // namespace

int64_t alignedLeadingDimension(int64_t rows, size_t elementSize) {
  return roundUp(std::max<int64_t>(rows, 1),
                 static_cast<int64_t>(16 / elementSize));
}

StoredMatrix alignedLayout(const StoredMatrix &m, int64_t rows, int64_t cols,
                           int64_t batch, size_t elementSize,
                           const char *data) {
  StoredMatrix copy = m;
  copy.data = data;
  copy.rows = rows;
  copy.cols = cols;
  copy.ld = alignedLeadingDimension(rows, elementSize);
  copy.batchStride = batch > 1 && m.batchStride != 0 ? copy.ld * cols : 0;
  return copy;
}

size_t packedBytes(const StoredMatrix &m, int64_t batch, size_t elementSize) {
  int64_t matrices = batch > 1 && m.batchStride != 0 ? batch : 1;
  return static_cast<size_t>(m.ld) * static_cast<size_t>(m.cols) *
         static_cast<size_t>(matrices) * elementSize;
}

std::vector<StridedCopy> matrixCopies(const StoredMatrix &to,
                                      const StoredMatrix &from, int64_t batch,
                                      size_t elementSize) {
  auto bytes = [&](int64_t elements) {
    return elements * static_cast<int64_t>(elementSize);
  };
  bool broadcast = batch > 1 && (from.batchStride == 0 || to.batchStride == 0);
  int64_t matrices = batch > 1 && !broadcast ? batch : 1;
  // Batches back to back, column after column: one copy of all columns.
  bool packed = from.cols == to.cols &&
                from.batchStride == from.ld * from.cols &&
                to.batchStride == to.ld * to.cols;
  StridedCopy copy;
  copy.dst = const_cast<char *>(to.data);
  copy.src = from.data;
  copy.dstPitch = bytes(to.ld);
  copy.srcPitch = bytes(from.ld);
  copy.width = static_cast<size_t>(bytes(std::min(from.rows, to.rows)));
  copy.rows = static_cast<size_t>(std::min(from.cols, to.cols));
  if (matrices == 1 || packed) {
    copy.rows *= static_cast<size_t>(matrices);
    return {copy};
  }
  std::vector<StridedCopy> copies;
  for (int64_t b = 0; b < matrices; ++b) {
    StridedCopy one = copy;
    one.dst += bytes(b * to.batchStride);
    one.src += bytes(b * from.batchStride);
    copies.push_back(one);
  }
  return copies;
}

std::vector<StridedFill> paddingFills(const StoredMatrix &to,
                                      const StoredMatrix &from, int64_t batch,
                                      size_t elementSize) {
  auto bytes = [&](int64_t elements) {
    return elements * static_cast<int64_t>(elementSize);
  };
  int64_t matrices = batch > 1 && to.batchStride != 0 ? batch : 1;
  std::vector<StridedFill> fills;
  if (to.rows > from.rows) {
    // The extra rows of every column: to's columns follow each other ld
    // apart across its packed batches, so one fill covers them all.
    StridedFill rows;
    rows.dst = const_cast<char *>(to.data) + bytes(from.rows);
    rows.pitch = bytes(to.ld);
    rows.width = static_cast<size_t>(bytes(to.rows - from.rows));
    rows.rows = static_cast<size_t>(to.cols * matrices);
    fills.push_back(rows);
  }
  if (to.cols > from.cols)
    for (int64_t b = 0; b < matrices; ++b) {
      StridedFill columns;
      columns.dst = const_cast<char *>(to.data) +
                    bytes(b * to.batchStride + from.cols * to.ld);
      columns.pitch = bytes(to.ld);
      columns.width = static_cast<size_t>(bytes(from.rows));
      columns.rows = static_cast<size_t>(to.cols - from.cols);
      fills.push_back(columns);
    }
  return fills;
}

ColumnMajorGemm alignedGemm(const ColumnMajorGemm &gemm,
                            const AlignmentCopyPlan &plan, size_t abSize,
                            size_t cSize) {
  ColumnMajorGemm aligned = gemm;
  aligned.m = plan.m;
  aligned.n = plan.n;
  aligned.k = plan.k;
  auto grow = [&](bool copied, StoredMatrix &m, int64_t rows, int64_t cols,
                  size_t size) {
    if (copied)
      m = alignedLayout(m, rows, cols, gemm.batch, size);
  };
  const StoredMatrix &x = gemm.x, &y = gemm.y;
  grow(plan.x, aligned.x, x.transposed ? plan.k : plan.m,
       x.transposed ? plan.m : plan.k, abSize);
  grow(plan.y, aligned.y, y.transposed ? plan.n : plan.k,
       y.transposed ? plan.k : plan.n, abSize);
  grow(plan.d, aligned.d, plan.m, plan.n, cSize);
  return aligned;
}

AlignmentCopyPlan planAlignmentCopies(const ColumnMajorGemm &gemm,
                                      size_t abSize, size_t cSize,
                                      bool accumulate, AlignmentCopies mode) {
  AlignmentCopyPlan asStored;
  asStored.m = gemm.m;
  asStored.n = gemm.n;
  asStored.k = gemm.k;
  if (mode == AlignmentCopies::Never)
    return asStored;
  // Each dimension padded to whole vectors of every matrix that stores it
  // as its rows (the dimension its vectors run along).
  int64_t inputVector = static_cast<int64_t>(16 / abSize);
  int64_t outputVector = static_cast<int64_t>(16 / cSize);
  auto pad = [](int64_t size, int64_t vector, bool storedAsRows) {
    return storedAsRows && size % vector ? roundUp(size, vector) : size;
  };
  AlignmentCopyPlan plan = asStored;
  plan.m =
      pad(pad(gemm.m, inputVector, !gemm.x.transposed), outputVector, true);
  plan.k = pad(gemm.k, inputVector, gemm.x.transposed || !gemm.y.transposed);
  plan.n = pad(gemm.n, inputVector, gemm.y.transposed);
  // A matrix is copied if it is misaligned or the padded sizes grow it.
  plan.x = plan.y = plan.d = true;
  ColumnMajorGemm grown = alignedGemm(gemm, plan, abSize, cSize);
  auto copied = [&](const StoredMatrix &m, const StoredMatrix &grownM,
                    size_t size) {
    return isMisaligned(m, gemm.batch, size) || m.rows != grownM.rows ||
           m.cols != grownM.cols;
  };
  const StoredMatrix &x = gemm.x, &y = gemm.y, &d = gemm.d;
  plan.x = copied(x, grown.x, abSize);
  plan.y = copied(y, grown.y, abSize);
  plan.d = copied(d, grown.d, cSize);
  if (!plan.any())
    return asStored;
  if (mode == AlignmentCopies::Always)
    return plan;
  // Bytes each copy reads and writes: X and Y are copied in, D out (and in
  // too when the product adds to it).
  auto moved = [&](bool copied, const StoredMatrix &m, size_t size,
                   double passes) {
    return copied ? passes * double(packedBytes(m, gemm.batch, size)) : 0;
  };
  double bytes = moved(plan.x, x, abSize, 2) + moved(plan.y, y, abSize, 2) +
                 moved(plan.d, d, cSize, accumulate ? 4 : 2);
  double flops = 2.0 * double(gemm.m) * double(gemm.n) * double(gemm.k) *
                 double(gemm.batch);
  if (flops < kAlignmentCopyMinFlops ||
      flops < kAlignmentCopyFlopsPerByte * bytes)
    return asStored;
  return plan;
}

} // namespace autopar::runtime::cuda
