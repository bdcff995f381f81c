//===- KernelsTest.cpp - CPU kernels against naive references -------------===//
//
// Every kernel runs on views with assorted memory layouts (row- and
// column-major, padded rows, offsets, non-unit innermost strides that force a
// copy, channels-last images) and must match a double-precision loop nest.
// Outputs start non-zero, since kernels accumulate; the overwrite kernels
// start from NaN, which they must not read.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/CpuKernels.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

using autopar::runtime::MemRefDescriptor;

namespace {

/// How a test tensor is laid out in its storage.
template <int R> struct Layout {
  std::array<int, R> order; // Dimensions from outermost to innermost in memory.
  int64_t pad = 0;          // Extra elements after each inner extent.
  int64_t step = 1;         // Stride of the innermost dimension.
  int64_t offset = 0;       // Elements before the first one.
};

template <int R> std::string describe(const Layout<R> &layout) {
  std::string text = "order";
  for (int d : layout.order)
    text += " " + std::to_string(d);
  return text + " pad " + std::to_string(layout.pad) + " step " +
         std::to_string(layout.step) + " offset " +
         std::to_string(layout.offset);
}

/// A float tensor of rank R in its own storage, seen through a descriptor.
template <int R> struct TestTensor {
  std::vector<float> storage;
  MemRefDescriptor<float, R> desc;

  TestTensor(const std::array<int64_t, R> &sizes, const Layout<R> &layout,
             uint32_t seed) {
    int64_t stride = layout.step;
    int64_t last = 0;
    for (int j = R - 1; j >= 0; --j) {
      int d = layout.order[j];
      desc.sizes[d] = sizes[d];
      desc.strides[d] = stride;
      last += (sizes[d] > 0 ? sizes[d] - 1 : 0) * stride;
      stride = stride * sizes[d] + layout.pad;
    }
    storage.resize(static_cast<size_t>(layout.offset + last + 1));
    for (float &v : storage) { // A small LCG: deterministic and cheap.
      seed = seed * 1664525u + 1013904223u;
      v = static_cast<float>(seed >> 8) / 8388608.0f - 1.0f;
    }
    desc.allocated = storage.data();
    desc.aligned = storage.data();
    desc.offset = layout.offset;
  }

  /// A copy has its own storage, and its descriptor points there.
  TestTensor(const TestTensor &other)
      : storage(other.storage), desc(other.desc) {
    desc.allocated = storage.data();
    desc.aligned = storage.data();
  }

  float &at(const std::array<int64_t, R> &index) {
    int64_t position = desc.offset;
    for (int d = 0; d < R; ++d)
      position += index[d] * desc.strides[d];
    return storage[static_cast<size_t>(position)];
  }
};

/// Accumulates a reference value and the scale of its rounding error.
struct Reference {
  double sum = 0;
  double magnitude = 0;
  void add(double a, double b) {
    sum += a * b;
    magnitude += std::abs(a * b);
  }
  void expectMatches(double initial, float got, const std::string &where) {
    double expected = initial + sum;
    double tolerance = 1e-5 * (magnitude + std::abs(initial)) + 1e-6;
    EXPECT_NEAR(got, expected, tolerance) << where;
  }
};

const Layout<2> MatrixLayouts[] = {
    {{0, 1}},          // Dense row-major.
    {{0, 1}, 3, 1, 5}, // Padded rows, offset.
    {{1, 0}, 2, 1, 1}, // Column-major (a transposed view).
    {{0, 1}, 0, 2, 0}, // Every other element: copied.
    {{1, 0}, 1, 3, 2}, // Transposed and strided: copied.
};

TEST(KernelsTest, MatmulMatchesReferenceForEveryLayout) {
  // m = 1 and n = 1 go to sgemv, the others to sgemm.
  const std::array<int64_t, 3> shapes[] = {
      {3, 5, 4}, {1, 7, 6},   {6, 1, 5},   {4, 3, 1},
      {1, 1, 1}, {1, 40, 30}, {30, 1, 40}, {17, 33, 65}};
  uint32_t seed = 1;
  for (const auto &[m, n, k] : shapes) {
    for (const Layout<2> &la : MatrixLayouts) {
      for (const Layout<2> &lb : MatrixLayouts) {
        for (const Layout<2> &lc : MatrixLayouts) {
          TestTensor<2> a({m, k}, la, ++seed), b({k, n}, lb, ++seed),
              c({m, n}, lc, ++seed);
          TestTensor<2> initial = c;
          _mlir_ciface_autopar_cpu_matmul_f32(&a.desc, &b.desc, &c.desc);
          std::string where = "m,n,k " + std::to_string(m) + "," +
                              std::to_string(n) + "," + std::to_string(k) +
                              " A " + describe(la) + " B " + describe(lb) +
                              " C " + describe(lc);
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              Reference ref;
              for (int64_t p = 0; p < k; ++p)
                ref.add(a.at({i, p}), b.at({p, j}));
              ref.expectMatches(initial.at({i, j}), c.at({i, j}), where);
            }
          }
        }
      }
    }
  }
}

TEST(KernelsTest, MatmulHandlesBroadcastAndEmptyOperands) {
  // A zero row stride (one row broadcast to all) cannot go to BLAS as is.
  TestTensor<2> a({4, 3}, {{0, 1}}, 1), b({3, 2}, {{0, 1}}, 2),
      c({4, 2}, {{0, 1}}, 3);
  a.desc.strides[0] = 0;
  TestTensor<2> initial = c;
  _mlir_ciface_autopar_cpu_matmul_f32(&a.desc, &b.desc, &c.desc);
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 2; ++j) {
      Reference ref;
      for (int64_t p = 0; p < 3; ++p)
        ref.add(a.at({0, p}), b.at({p, j}));
      ref.expectMatches(initial.at({i, j}), c.at({i, j}), "broadcast");
    }
  }
  // k = 0: C is unchanged.
  TestTensor<2> e({4, 0}, {{0, 1}}, 4), f({0, 2}, {{0, 1}}, 5);
  TestTensor<2> before = c;
  _mlir_ciface_autopar_cpu_matmul_f32(&e.desc, &f.desc, &c.desc);
  EXPECT_EQ(before.storage, c.storage);
}

TEST(KernelsTest, BatchMatmulMatchesReference) {
  const Layout<3> layouts[] = {
      {{0, 1, 2}},          // Dense.
      {{1, 0, 2}, 1, 1, 3}, // Batch in the middle, as heads of [s, h, d].
      {{0, 2, 1}},          // Each matrix transposed.
      {{2, 0, 1}, 0, 2, 1}, // Strided innermost: copied.
  };
  uint32_t seed = 100;
  for (const Layout<3> &la : layouts) {
    for (const Layout<3> &lb : layouts) {
      for (const Layout<3> &lc : layouts) {
        const int64_t batches = 3, m = 4, n = 5, k = 6;
        TestTensor<3> a({batches, m, k}, la, ++seed),
            b({batches, k, n}, lb, ++seed), c({batches, m, n}, lc, ++seed);
        TestTensor<3> initial = c;
        _mlir_ciface_autopar_cpu_batch_matmul_f32(&a.desc, &b.desc, &c.desc);
        std::string where =
            "A " + describe(la) + " B " + describe(lb) + " C " + describe(lc);
        for (int64_t t = 0; t < batches; ++t) {
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              Reference ref;
              for (int64_t p = 0; p < k; ++p)
                ref.add(a.at({t, i, p}), b.at({t, p, j}));
              ref.expectMatches(initial.at({t, i, j}), c.at({t, i, j}), where);
            }
          }
        }
      }
    }
  }
}

struct ConvCase {
  int64_t n, c, h, w, f, kh, kw, sh, sw, dh, dw;
  int64_t outH() const { return (h - (kh - 1) * dh - 1) / sh + 1; }
  int64_t outW() const { return (w - (kw - 1) * dw - 1) / sw + 1; }
  std::string describe() const {
    return "N" + std::to_string(n) + " C" + std::to_string(c) + " H" +
           std::to_string(h) + " W" + std::to_string(w) + " F" +
           std::to_string(f) + " K" + std::to_string(kh) + "x" +
           std::to_string(kw) + " s" + std::to_string(sh) + "x" +
           std::to_string(sw) + " d" + std::to_string(dh) + "x" +
           std::to_string(dw);
  }
};

const ConvCase ConvCases[] = {
    {2, 3, 9, 10, 5, 3, 3, 1, 1, 1, 1},   // im2col + GEMM.
    {1, 4, 11, 9, 6, 3, 2, 2, 3, 2, 1},   // Strides and dilations.
    {2, 8, 5, 6, 7, 1, 1, 1, 1, 1, 1},    // Pointwise: no unfolding.
    {1, 8, 7, 7, 4, 1, 1, 2, 2, 1, 1},    // 1x1 with stride 2.
    {1, 1, 8, 9, 1, 3, 3, 1, 1, 1, 1},    // Direct (depthwise-like).
    {2, 2, 8, 9, 2, 3, 3, 2, 1, 1, 2},    // Direct with stride and dilation.
    {1, 2, 9, 17, 2, 2, 5, 1, 3, 1, 1},   // Direct, 5 taps, x stride 3.
    {1, 64, 66, 66, 8, 3, 3, 1, 1, 1, 1}, // Several output bands.
    // Depthwise kernels (one channel, square filter, unit-stride rows in the
    // NCHW and padded-row layouts), narrow planes in one wide loop:
    {2, 1, 11, 19, 1, 3, 3, 2, 2, 1, 1}, // 3x3 stride 2, odd width.
    {1, 1, 13, 21, 1, 5, 5, 1, 1, 1, 1}, // 5x5.
    {2, 1, 14, 24, 1, 5, 5, 2, 2, 1, 1}, // 5x5 stride 2, even width.
    {1, 1, 13, 13, 1, 7, 7, 1, 1, 1, 1}, // 7x7.
    {1, 1, 16, 15, 1, 7, 7, 2, 2, 1, 1}, // 7x7 stride 2.
    {1, 1, 9, 9, 1, 3, 3, 1, 2, 1, 1},   // Stride 1 down, 2 across.
    {1, 1, 11, 10, 1, 3, 3, 2, 1, 1, 1}, // Stride 2 down, 1 across.
    // ... and row by row where the rows are a multiple of the vector width:
    {1, 1, 20, 70, 1, 7, 7, 1, 1, 1, 1},
    {1, 1, 10, 34, 1, 3, 3, 2, 2, 1, 1},
    // Kernels larger than the output (filter gradients): per position.
    {6, 4, 12, 12, 5, 10, 10, 1, 1, 1, 1},   // One GEMM for all positions.
    {3, 2, 13, 14, 4, 5, 4, 2, 3, 2, 1},     // Strided, dilated.
    {40, 16, 20, 20, 8, 18, 18, 1, 1, 1, 1}, // Positions in several groups.
};

TEST(KernelsTest, Conv2dNchwMatchesReference) {
  const Layout<4> layouts[] = {
      {{0, 1, 2, 3}},          // NCHW.
      {{0, 2, 3, 1}, 0, 1, 7}, // Channels last (NHWC memory).
      {{0, 1, 2, 3}, 2, 1, 3}, // Padded rows.
      {{0, 1, 2, 3}, 0, 2, 0}, // Strided innermost.
  };
  uint32_t seed = 1000;
  for (const ConvCase &cc : ConvCases) {
    for (size_t li = 0; li < std::size(layouts); ++li) {
      // The big case once per layout is plenty; skip the slowest combos.
      const Layout<4> &lin = layouts[li];
      const Layout<4> &lf = layouts[(li + 1) % std::size(layouts)];
      const Layout<4> &lo = layouts[(li + 2) % std::size(layouts)];
      int64_t oh = cc.outH(), ow = cc.outW();
      TestTensor<4> in({cc.n, cc.c, cc.h, cc.w}, lin, ++seed),
          filter({cc.f, cc.c, cc.kh, cc.kw}, lf, ++seed),
          out({cc.n, cc.f, oh, ow}, lo, ++seed);
      TestTensor<4> initial = out;
      _mlir_ciface_autopar_cpu_conv2d_nchw_f32(
          &in.desc, &filter.desc, &out.desc, cc.sh, cc.sw, cc.dh, cc.dw);
      std::string where = cc.describe() + " I " + describe(lin) + " F " +
                          describe(lf) + " O " + describe(lo);
      for (int64_t n = 0; n < cc.n; ++n)
        for (int64_t f = 0; f < cc.f; ++f)
          for (int64_t y = 0; y < oh; ++y)
            for (int64_t x = 0; x < ow; ++x) {
              Reference ref;
              for (int64_t c = 0; c < cc.c; ++c)
                for (int64_t ky = 0; ky < cc.kh; ++ky)
                  for (int64_t kx = 0; kx < cc.kw; ++kx)
                    ref.add(in.at({n, c, y * cc.sh + ky * cc.dh,
                                   x * cc.sw + kx * cc.dw}),
                            filter.at({f, c, ky, kx}));
              ref.expectMatches(initial.at({n, f, y, x}), out.at({n, f, y, x}),
                                where);
            }
    }
  }
}

TEST(KernelsTest, Conv2dNgchwMatchesReference) {
  struct GroupCase {
    int64_t groups;
    ConvCase conv;
  } cases[] = {
      {3, {2, 2, 7, 8, 3, 3, 3, 1, 1, 1, 1}},   // Grouped, im2col.
      {4, {1, 1, 9, 9, 1, 3, 3, 2, 2, 1, 1}},   // Depthwise, stride 2.
      {5, {2, 1, 10, 9, 2, 3, 3, 1, 1, 2, 2}},  // Depth multiplier 2, dilated.
      {6, {2, 1, 12, 13, 1, 5, 5, 2, 2, 1, 1}}, // Depthwise kernel, 5x5.
  };
  const Layout<5> layouts[] = {
      {{0, 1, 2, 3, 4}}, {{0, 3, 4, 1, 2}, 1, 1, 2}, // Channels last.
  };
  uint32_t seed = 5000;
  for (const GroupCase &gc : cases) {
    for (const Layout<5> &layout : layouts) {
      const ConvCase &cc = gc.conv;
      int64_t g = gc.groups, oh = cc.outH(), ow = cc.outW();
      TestTensor<5> in({cc.n, g, cc.c, cc.h, cc.w}, layout, ++seed),
          filter({g, cc.f, cc.c, cc.kh, cc.kw}, {{0, 1, 2, 3, 4}}, ++seed),
          out({cc.n, g, cc.f, oh, ow}, layout, ++seed);
      TestTensor<5> initial = out;
      _mlir_ciface_autopar_cpu_conv2d_ngchw_f32(
          &in.desc, &filter.desc, &out.desc, cc.sh, cc.sw, cc.dh, cc.dw);
      std::string where = "G" + std::to_string(g) + " " + cc.describe() + " " +
                          describe(layout);
      for (int64_t n = 0; n < cc.n; ++n)
        for (int64_t gi = 0; gi < g; ++gi)
          for (int64_t f = 0; f < cc.f; ++f)
            for (int64_t y = 0; y < oh; ++y)
              for (int64_t x = 0; x < ow; ++x) {
                Reference ref;
                for (int64_t c = 0; c < cc.c; ++c)
                  for (int64_t ky = 0; ky < cc.kh; ++ky)
                    for (int64_t kx = 0; kx < cc.kw; ++kx)
                      ref.add(in.at({n, gi, c, y * cc.sh + ky * cc.dh,
                                     x * cc.sw + kx * cc.dw}),
                              filter.at({gi, f, c, ky, kx}));
                ref.expectMatches(initial.at({n, gi, f, y, x}),
                                  out.at({n, gi, f, y, x}), where);
              }
    }
  }
}

/// Sets every element of `t`'s storage to `value`.
template <int R> void fillStorage(TestTensor<R> &t, float value) {
  std::fill(t.storage.begin(), t.storage.end(), value);
}

/// Expects the overwrite kernel's output (started as NaN: it must not read
/// it) to equal the accumulating kernel's on zeros, element by element.
template <int R>
void expectSameOutputs(TestTensor<R> &overwritten, TestTensor<R> &accumulated,
                       const std::string &where) {
  std::array<int64_t, R> index{};
  int64_t total = 1;
  for (int d = 0; d < R; ++d)
    total *= overwritten.desc.sizes[d];
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rest = flat;
    for (int d = R - 1; d >= 0; --d) {
      index[d] = rest % overwritten.desc.sizes[d];
      rest /= overwritten.desc.sizes[d];
    }
    ASSERT_FLOAT_EQ(overwritten.at(index), accumulated.at(index))
        << where << " at flat index " << flat;
  }
}

TEST(KernelsTest, OverwriteKernelsStoreTheSumWithoutReadingTheOutput) {
  const float nan = std::nanf("");
  uint32_t seed = 7000;
  // GEMM: sgemm, both sgemv cases, a copied (strided) output, k = 0.
  const std::array<int64_t, 3> shapes[] = {
      {3, 5, 4}, {1, 7, 6}, {6, 1, 5}, {17, 33, 65}, {2, 3, 0}};
  for (const auto &[m, n, k] : shapes) {
    for (const Layout<2> &lc : MatrixLayouts) {
      TestTensor<2> a({m, k}, MatrixLayouts[1], ++seed),
          b({k, n}, MatrixLayouts[2], ++seed), c({m, n}, lc, ++seed);
      TestTensor<2> zeros = c;
      fillStorage(c, nan);
      fillStorage(zeros, 0.0f);
      _mlir_ciface_autopar_cpu_matmul_overwrite_f32(&a.desc, &b.desc, &c.desc);
      _mlir_ciface_autopar_cpu_matmul_f32(&a.desc, &b.desc, &zeros.desc);
      expectSameOutputs(c, zeros,
                        "matmul m,n,k " + std::to_string(m) + "," +
                            std::to_string(n) + "," + std::to_string(k) +
                            " C " + describe(lc));
    }
  }
  {
    TestTensor<3> a({3, 4, 6}, {{0, 1, 2}}, ++seed),
        b({3, 6, 5}, {{0, 2, 1}}, ++seed), c({3, 4, 5}, {{1, 0, 2}}, ++seed);
    TestTensor<3> zeros = c;
    fillStorage(c, nan);
    fillStorage(zeros, 0.0f);
    _mlir_ciface_autopar_cpu_batch_matmul_overwrite_f32(&a.desc, &b.desc,
                                                        &c.desc);
    _mlir_ciface_autopar_cpu_batch_matmul_f32(&a.desc, &b.desc, &zeros.desc);
    expectSameOutputs(c, zeros, "batch_matmul");
  }
  // Convolutions: im2col, pointwise, direct, several bands.
  for (const ConvCase &cc : ConvCases) {
    TestTensor<4> in({cc.n, cc.c, cc.h, cc.w}, {{0, 1, 2, 3}}, ++seed),
        filter({cc.f, cc.c, cc.kh, cc.kw}, {{0, 1, 2, 3}}, ++seed),
        out({cc.n, cc.f, cc.outH(), cc.outW()}, {{0, 1, 2, 3}, 2, 1, 3},
            ++seed);
    TestTensor<4> zeros = out;
    fillStorage(out, nan);
    fillStorage(zeros, 0.0f);
    _mlir_ciface_autopar_cpu_conv2d_nchw_overwrite_f32(
        &in.desc, &filter.desc, &out.desc, cc.sh, cc.sw, cc.dh, cc.dw);
    _mlir_ciface_autopar_cpu_conv2d_nchw_f32(
        &in.desc, &filter.desc, &zeros.desc, cc.sh, cc.sw, cc.dh, cc.dw);
    expectSameOutputs(out, zeros, "conv2d_nchw " + cc.describe());
  }
  {
    const ConvCase cc{2, 2, 7, 8, 3, 3, 3, 1, 1, 1, 1};
    const int64_t g = 3;
    TestTensor<5> in({cc.n, g, cc.c, cc.h, cc.w}, {{0, 1, 2, 3, 4}}, ++seed),
        filter({g, cc.f, cc.c, cc.kh, cc.kw}, {{0, 1, 2, 3, 4}}, ++seed),
        out({cc.n, g, cc.f, cc.outH(), cc.outW()}, {{0, 1, 2, 3, 4}}, ++seed);
    TestTensor<5> zeros = out;
    fillStorage(out, nan);
    fillStorage(zeros, 0.0f);
    _mlir_ciface_autopar_cpu_conv2d_ngchw_overwrite_f32(
        &in.desc, &filter.desc, &out.desc, cc.sh, cc.sw, cc.dh, cc.dw);
    _mlir_ciface_autopar_cpu_conv2d_ngchw_f32(
        &in.desc, &filter.desc, &zeros.desc, cc.sh, cc.sw, cc.dh, cc.dw);
    expectSameOutputs(out, zeros, "conv2d_ngchw");
  }
}

TEST(KernelsDeathTest, MismatchedShapesExitWithAMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TestTensor<2> a({2, 3}, {{0, 1}}, 1), b({4, 5}, {{0, 1}}, 2),
      c({2, 5}, {{0, 1}}, 3);
  EXPECT_EXIT(_mlir_ciface_autopar_cpu_matmul_f32(&a.desc, &b.desc, &c.desc),
              ::testing::ExitedWithCode(1),
              "autopar-run: error: autopar_cpu_matmul_f32: operand sizes do "
              "not agree: A \\[2, 3\\] x B \\[4, 5\\] -> C \\[2, 5\\]");
  // A window that reaches past the padded input.
  TestTensor<4> in({1, 1, 4, 4}, {{0, 1, 2, 3}}, 4),
      filter({1, 1, 3, 3}, {{0, 1, 2, 3}}, 5),
      out({1, 1, 3, 3}, {{0, 1, 2, 3}}, 6);
  EXPECT_EXIT(_mlir_ciface_autopar_cpu_conv2d_nchw_f32(&in.desc, &filter.desc,
                                                       &out.desc, 1, 1, 1, 1),
              ::testing::ExitedWithCode(1),
              "autopar_cpu_conv2d_nchw_f32: windows reach outside");
}

} // namespace
