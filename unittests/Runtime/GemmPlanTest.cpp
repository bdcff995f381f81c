//===- GemmPlanTest.cpp - Strided GEMMs mapped to cuBLASLt's terms --------===//
//
// Checks the plan by evaluating it: a column-major GEMM on the plan's stored
// matrices, computed on the host, must give the row-major C += A * B of the
// views, for every mix of row-major and transposed operands.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/cuda/GemmPlan.h"

#include "gtest/gtest.h"

#include <vector>

using namespace autopar::runtime::cuda;

namespace {

/// Element (i, j) of op(stored), column-major.
float at(const StoredMatrix &s, int64_t batch, int64_t i, int64_t j) {
  const float *base =
      reinterpret_cast<const float *>(s.data) + batch * s.batchStride;
  return s.transposed ? base[j + i * s.ld] : base[i + j * s.ld];
}

/// D += op(X) op(Y), as cuBLASLt would compute the plan.
void evaluate(const ColumnMajorGemm &g) {
  for (int64_t b = 0; b < g.batch; ++b)
    for (int64_t i = 0; i < g.m; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        float sum = 0;
        for (int64_t p = 0; p < g.k; ++p)
          sum += at(g.x, b, i, p) * at(g.y, b, p, j);
        float *d = const_cast<float *>(
            reinterpret_cast<const float *>(g.d.data) + b * g.d.batchStride);
        d[i + j * g.d.ld] += sum;
      }
}

/// A [rows, cols] view of \p storage, row-major or transposed, with a
/// leading dimension padded by \p pad.
MatrixOperand view(std::vector<float> &storage, int64_t rows, int64_t cols,
                   bool transposed, int64_t pad, int64_t batch = 1) {
  int64_t ld = (transposed ? rows : cols) + pad;
  int64_t matrix = ld * (transposed ? cols : rows);
  storage.assign(static_cast<size_t>(matrix * batch), 0.0f);
  MatrixOperand v;
  v.data = reinterpret_cast<const char *>(storage.data());
  v.rows = rows;
  v.cols = cols;
  v.rowStride = transposed ? 1 : ld;
  v.colStride = transposed ? ld : 1;
  v.batchStride = matrix;
  return v;
}

float &element(const MatrixOperand &v, int64_t b, int64_t i, int64_t j) {
  return const_cast<float *>(reinterpret_cast<const float *>(
      v.data))[b * v.batchStride + i * v.rowStride + j * v.colStride];
}

TEST(GemmPlanTest, EveryMixOfRowMajorAndTransposedViews) {
  const int64_t M = 3, K = 4, N = 5, batch = 2;
  for (int mask = 0; mask < 8; ++mask) {
    bool ta = mask & 1, tb = mask & 2, tc = mask & 4;
    SCOPED_TRACE("A " + std::string(ta ? "T" : "N") + ", B " +
                 (tb ? "T" : "N") + ", C " + (tc ? "T" : "N"));
    std::vector<float> sa, sb, sc;
    MatrixOperand a = view(sa, M, K, ta, 1, batch);
    MatrixOperand b = view(sb, K, N, tb, 2, batch);
    MatrixOperand c = view(sc, M, N, tc, 0, batch);
    for (int64_t bt = 0; bt < batch; ++bt) {
      for (int64_t i = 0; i < M; ++i)
        for (int64_t p = 0; p < K; ++p)
          element(a, bt, i, p) = float(i * 10 + p + bt);
      for (int64_t p = 0; p < K; ++p)
        for (int64_t j = 0; j < N; ++j)
          element(b, bt, p, j) = float(p - j * 2 + bt);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j)
          element(c, bt, i, j) = float(i + j); // C += A * B keeps this.
    }
    std::string error;
    std::optional<ColumnMajorGemm> plan = planGemm(a, b, c, batch, error);
    ASSERT_TRUE(plan) << error;
    EXPECT_EQ(plan->k, K);
    EXPECT_EQ(plan->m * plan->n, M * N);
    evaluate(*plan);
    for (int64_t bt = 0; bt < batch; ++bt)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          float expected = float(i + j);
          for (int64_t p = 0; p < K; ++p)
            expected += float(i * 10 + p + bt) * float(p - j * 2 + bt);
          ASSERT_EQ(element(c, bt, i, j), expected)
              << "batch " << bt << " at " << i << "," << j;
        }
  }
}

TEST(GemmPlanTest, RowMajorCSwapsTheOperands) {
  std::vector<float> sa, sb, sc;
  MatrixOperand a = view(sa, 2, 3, false, 0), b = view(sb, 3, 4, false, 0),
                c = view(sc, 2, 4, false, 0);
  std::string error;
  std::optional<ColumnMajorGemm> plan = planGemm(a, b, c, 1, error);
  ASSERT_TRUE(plan);
  // C^T [4, 2] = B^T [4, 3] * A^T [3, 2]: no transposes, B first.
  EXPECT_EQ(plan->m, 4);
  EXPECT_EQ(plan->n, 2);
  EXPECT_EQ(plan->x.data, b.data);
  EXPECT_FALSE(plan->x.transposed);
  EXPECT_EQ(plan->x.ld, 4);
  EXPECT_EQ(plan->y.data, a.data);
  EXPECT_EQ(plan->y.ld, 3);
  EXPECT_EQ(plan->d.ld, 4);
}

TEST(GemmPlanTest, RefusesViewsWithoutAUnitStride) {
  std::vector<float> storage(64);
  MatrixOperand good{
      reinterpret_cast<const char *>(storage.data()), 2, 2, 2, 1, 0};
  MatrixOperand strided = good;
  strided.rowStride = 4;
  strided.colStride = 2;
  std::string error;
  EXPECT_FALSE(planGemm(strided, good, good, 1, error));
  EXPECT_NE(error.find("A [2, 2] with strides [4, 2] is neither row-major "
                       "nor transposed"),
            std::string::npos)
      << error;
  EXPECT_FALSE(planGemm(good, good, strided, 1, error));
  EXPECT_NE(error.find("C [2, 2]"), std::string::npos) << error;
  MatrixOperand shared = good;
  shared.batchStride = 0;
  EXPECT_FALSE(planGemm(good, good, shared, 3, error));
  EXPECT_NE(error.find("the batches of C overlap"), std::string::npos) << error;
  // Size-1 dimensions may have any stride.
  MatrixOperand row{
      reinterpret_cast<const char *>(storage.data()), 1, 2, 99, 1, 0};
  MatrixOperand column{
      reinterpret_cast<const char *>(storage.data()), 2, 1, 1, 77, 0};
  EXPECT_TRUE(planGemm(row, good, row, 1, error)) << error;
  EXPECT_TRUE(planGemm(good, column, column, 1, error)) << error;
}

} // namespace
