//===- CrossEntropyKernelTest.cpp - The CPU cross-entropy kernels ---------===//
//
// _mlir_ciface_autopar_cpu_cross_entropy_{fwd,bwd}_f32 against a float64
// reference (lse, nll, the logits' gradient) on logits that are large enough
// to overflow a naive exp, with ignored positions and a label outside the
// classes; strided views; the gradient against central finite differences
// of the kernel's own nll; and the message sizes that disagree end the run
// with.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/CpuKernels.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

using autopar::runtime::MemRefDescriptor;

namespace {

constexpr int64_t Ignore = -100;

/// Row-major [rows, cols] floats viewed with a column stride (a stride of 2
/// views every other element of a buffer twice as wide).
struct Matrix {
  Matrix(int64_t rows, int64_t cols, int64_t colStride = 1)
      : rows(rows), cols(cols), colStride(colStride),
        data(static_cast<size_t>(rows * cols * colStride),
             std::numeric_limits<float>::quiet_NaN()) {}
  float &at(int64_t r, int64_t c) {
    return data[static_cast<size_t>((r * cols + c) * colStride)];
  }
  MemRefDescriptor<float, 2> desc() {
    return {data.data(),
            data.data(),
            0,
            {rows, cols},
            {cols * colStride, colStride}};
  }
  int64_t rows, cols, colStride;
  std::vector<float> data;
};

template <typename T> MemRefDescriptor<T, 1> vectorDesc(std::vector<T> &v) {
  return {v.data(), v.data(), 0, {static_cast<int64_t>(v.size())}, {1}};
}

struct Reference {
  std::vector<double> lse, nll;
  std::vector<std::vector<double>> grad;
};

Reference reference(Matrix &x, const std::vector<int64_t> &labels,
                    const std::vector<float> &dNll) {
  Reference ref;
  for (int64_t n = 0; n < x.rows; ++n) {
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < x.cols; ++c)
      m = std::max(m, double(x.at(n, c)));
    double sum = 0;
    for (int64_t c = 0; c < x.cols; ++c)
      sum += std::exp(double(x.at(n, c)) - m);
    double lse = m + std::log(sum);
    int64_t y = labels[n];
    bool inRange = y >= 0 && y < x.cols;
    ref.lse.push_back(lse);
    ref.nll.push_back(y == Ignore ? 0.0
                      : inRange   ? lse - double(x.at(n, y))
                                  : lse);
    std::vector<double> g(static_cast<size_t>(x.cols), 0.0);
    if (y != Ignore)
      for (int64_t c = 0; c < x.cols; ++c)
        g[c] = dNll[n] *
               (std::exp(double(x.at(n, c)) - lse) - (c == y ? 1.0 : 0.0));
    ref.grad.push_back(g);
  }
  return ref;
}

void fill(Matrix &x, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  for (int64_t r = 0; r < x.rows; ++r)
    for (int64_t c = 0; c < x.cols; ++c)
      x.at(r, c) = normal(rng);
}

class CrossEntropyKernelTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(CrossEntropyKernelTest, MatchesFloat64Reference) {
  const int64_t colStride = GetParam();
  const int64_t rows = 9, classes = 37;
  Matrix x(rows, classes, colStride), d(rows, classes, colStride);
  fill(x, 7, 30.0f); // exp(x) overflows f32 without the max subtracted
  std::vector<int64_t> labels = {0, 36, Ignore, 5, 40, 12, Ignore, 1, 20};
  std::vector<float> dNll = {1.0f, 0.5f, 3.0f, -2.0f, 0.25f,
                             1.0f, 1.0f, 0.1f, 7.0f};
  std::vector<float> nll(rows, NAN), lse(rows, NAN);
  auto xd = x.desc(), dd = d.desc();
  auto yd = vectorDesc(labels);
  auto nd = vectorDesc(nll), ld = vectorDesc(lse), gd = vectorDesc(dNll);
  _mlir_ciface_autopar_cpu_cross_entropy_fwd_f32(&xd, &yd, &nd, &ld, Ignore);
  _mlir_ciface_autopar_cpu_cross_entropy_bwd_f32(&xd, &yd, &ld, &gd, &dd,
                                                 Ignore);
  Reference want = reference(x, labels, dNll);
  for (int64_t n = 0; n < rows; ++n) {
    double scale = std::max(1.0, std::abs(want.lse[n]));
    EXPECT_NEAR(lse[n], want.lse[n], 1e-6 * scale) << "row " << n;
    EXPECT_NEAR(nll[n], want.nll[n], 1e-5 * scale) << "row " << n;
    for (int64_t c = 0; c < classes; ++c)
      // exp(x - lse) carries lse's rounding: an f32 ulp of |lse|, relative.
      EXPECT_NEAR(d.at(n, c), want.grad[n][c],
                  1e-6 * std::abs(dNll[n]) * scale + 1e-7)
          << "row " << n << " class " << c;
  }
  // Ignored rows: zero loss and an all-zero gradient; the label outside the
  // classes picks nothing.
  EXPECT_EQ(nll[2], 0.0f);
  for (int64_t c = 0; c < classes; ++c)
    EXPECT_EQ(d.at(6, c), 0.0f);
  EXPECT_FLOAT_EQ(nll[4], lse[4]);
}

INSTANTIATE_TEST_SUITE_P(Strides, CrossEntropyKernelTest,
                         ::testing::Values(1, 2));

TEST(CrossEntropyKernelTest, GradientMatchesFiniteDifferences) {
  const int64_t rows = 3, classes = 6;
  Matrix x(rows, classes), d(rows, classes);
  fill(x, 11, 1.0f);
  std::vector<int64_t> labels = {2, 5, 0};
  std::vector<float> dNll = {1.0f, -0.5f, 2.0f};
  std::vector<float> nll(rows), lse(rows);
  auto yd = vectorDesc(labels);
  auto nd = vectorDesc(nll), ld = vectorDesc(lse), gd = vectorDesc(dNll);
  auto weighted = [&] {
    auto xd = x.desc();
    _mlir_ciface_autopar_cpu_cross_entropy_fwd_f32(&xd, &yd, &nd, &ld, Ignore);
    double total = 0;
    for (int64_t n = 0; n < rows; ++n)
      total += double(dNll[n]) * nll[n];
    return total;
  };
  weighted();
  auto xd = x.desc(), dd = d.desc();
  _mlir_ciface_autopar_cpu_cross_entropy_bwd_f32(&xd, &yd, &ld, &gd, &dd,
                                                 Ignore);
  const float h = 1e-2f;
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t c = 0; c < classes; ++c) {
      float saved = x.at(n, c);
      x.at(n, c) = saved + h;
      double up = weighted();
      x.at(n, c) = saved - h;
      double down = weighted();
      x.at(n, c) = saved;
      EXPECT_NEAR(d.at(n, c), (up - down) / (2 * h), 2e-3)
          << "row " << n << " class " << c;
    }
}

TEST(CrossEntropyKernelDeathTest, SizesThatDisagreeEndTheRun) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Matrix x(4, 5), d(4, 6);
  std::vector<int64_t> labels(4, 0);
  std::vector<float> nll(3), lse(4);
  auto xd = x.desc(), dd = d.desc();
  auto yd = vectorDesc(labels);
  auto nd = vectorDesc(nll), ld = vectorDesc(lse);
  EXPECT_EXIT(
      _mlir_ciface_autopar_cpu_cross_entropy_fwd_f32(&xd, &yd, &nd, &ld,
                                                     Ignore),
      ::testing::ExitedWithCode(1),
      "autopar_cpu_cross_entropy_fwd_f32: operand sizes do not agree: logits "
      "\\[4, 5\\], labels \\[4\\], nll \\[3\\], lse \\[4\\]");
  EXPECT_EXIT(_mlir_ciface_autopar_cpu_cross_entropy_bwd_f32(&xd, &yd, &ld, &ld,
                                                             &dd, Ignore),
              ::testing::ExitedWithCode(1),
              "autopar_cpu_cross_entropy_bwd_f32: operand sizes do not "
              "agree: .*d_logits \\[4, 6\\]");
}

} // namespace
