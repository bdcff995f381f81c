//===- GemmPlanTest.cpp - Strided GEMMs mapped to cuBLASLt's terms --------===//
//
// Checks the plan by evaluating it: a column-major GEMM on the plan's stored
// matrices, computed on the host, must give the row-major C += A * B of the
// views, for every mix of row-major and transposed operands.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/cuda/GemmPlan.h"

#include "gtest/gtest.h"

#include <cstring>
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
/// leading dimension padded by \p pad and \p batchGap elements between
/// batches.
MatrixOperand view(std::vector<float> &storage, int64_t rows, int64_t cols,
                   bool transposed, int64_t pad, int64_t batch = 1,
                   int64_t batchGap = 0) {
  int64_t ld = (transposed ? rows : cols) + pad;
  int64_t matrix = ld * (transposed ? cols : rows) + batchGap;
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

/// A 16-byte aligned address standing for a device buffer (never read).
const char *fakeDevice(uintptr_t offset = 0) {
  return reinterpret_cast<const char *>(uintptr_t(1) << 32) + offset;
}

TEST(GemmPlanTest, MisalignedColumnsBatchesAndAddresses) {
  StoredMatrix logits{fakeDevice(), 50257, 8192, 50257, 0, false};
  EXPECT_TRUE(isMisaligned(logits, 1, 2)); // 100514-byte columns
  EXPECT_TRUE(isMisaligned(logits, 1, 4)); // 201028-byte columns
  StoredMatrix hidden{fakeDevice(), 768, 8192, 768, 0, false};
  EXPECT_FALSE(isMisaligned(hidden, 1, 2));
  // One column is read as one run: its leading dimension does not matter.
  StoredMatrix column{fakeDevice(), 5, 1, 5, 0, false};
  EXPECT_FALSE(isMisaligned(column, 1, 4));
  StoredMatrix offset = hidden;
  offset.data = fakeDevice(4);
  EXPECT_TRUE(isMisaligned(offset, 1, 2));
  StoredMatrix batched{fakeDevice(), 8, 8, 8, 65, false};
  EXPECT_FALSE(isMisaligned(batched, 1, 4)); // one batch: no stride read
  EXPECT_TRUE(isMisaligned(batched, 2, 4));
  batched.batchStride = 0; // broadcast
  EXPECT_FALSE(isMisaligned(batched, 2, 4));

  EXPECT_EQ(alignedLeadingDimension(50257, 2), 50264);
  EXPECT_EQ(alignedLeadingDimension(50257, 4), 50260);
  EXPECT_EQ(alignedLeadingDimension(768, 2), 768);
  EXPECT_EQ(alignedLeadingDimension(0, 4), 4);
}

/// GPT-2 small's LM head in a bf16 training step (8192 tokens, vocabulary
/// 50257), planned as the runtime plans it.
ColumnMajorGemm lmHead(const char *which) {
  const int64_t T = 8192, E = 768, V = 50257;
  ColumnMajorGemm g;
  if (std::strcmp(which, "forward") == 0) {
    // logits [T, V] f32 = x [T, E] * w [E, V] (the weight's bf16 copy).
    g.m = V, g.n = T, g.k = E;
    g.x = {fakeDevice(), V, E, V, 0, false};
    g.y = {fakeDevice(), E, T, E, 0, false};
    g.d = {fakeDevice(), V, T, V, 0, false};
  } else if (std::strcmp(which, "input gradient") == 0) {
    // dx [T, E] f32 = dlogits [T, V] * w^T.
    g.m = E, g.n = T, g.k = V;
    g.x = {fakeDevice(), V, E, V, 0, true};
    g.y = {fakeDevice(), V, T, V, 0, false};
    g.d = {fakeDevice(), E, T, E, 0, false};
  } else {
    // dw [E, V] f32 = x^T * dlogits.
    g.m = V, g.n = E, g.k = T;
    g.x = {fakeDevice(), V, T, V, 0, false};
    g.y = {fakeDevice(), E, T, E, 0, true};
    g.d = {fakeDevice(), V, E, V, 0, false};
  }
  return g;
}

TEST(GemmPlanTest, LargeProductsRunOnPaddedCopies) {
  // The vocabulary is m: the weight's and the logits' rows grow to 50264.
  AlignmentCopyPlan forward = planAlignmentCopies(lmHead("forward"), 2, 4,
                                                  false, AlignmentCopies::Auto);
  EXPECT_TRUE(forward.x);  // the weight
  EXPECT_FALSE(forward.y); // the hidden states: 768 rows, aligned
  EXPECT_TRUE(forward.d);  // the logits
  EXPECT_EQ(forward.m, 50264);
  EXPECT_EQ(forward.n, 8192);
  EXPECT_EQ(forward.k, 768);
  // The vocabulary is the reduction: both operands grow, zero-padded.
  AlignmentCopyPlan input = planAlignmentCopies(lmHead("input gradient"), 2, 4,
                                                false, AlignmentCopies::Auto);
  EXPECT_TRUE(input.x && input.y);
  EXPECT_FALSE(input.d);
  EXPECT_EQ(input.k, 50264);
  EXPECT_EQ(input.m, 768);
  AlignmentCopyPlan weight = planAlignmentCopies(
      lmHead("weight gradient"), 2, 4, true, AlignmentCopies::Auto);
  EXPECT_TRUE(weight.x && weight.d);
  EXPECT_FALSE(weight.y);
  EXPECT_EQ(weight.m, 50264);
  EXPECT_EQ(weight.k, 8192);

  // Never turns them off.
  AlignmentCopyPlan never = planAlignmentCopies(lmHead("forward"), 2, 4, false,
                                                AlignmentCopies::Never);
  EXPECT_FALSE(never.any());
  EXPECT_EQ(never.m, 50257);
  // Aligned products have nothing to copy, whatever the mode.
  ColumnMajorGemm aligned = lmHead("forward");
  aligned.m = 50264;
  aligned.x.rows = aligned.x.ld = aligned.d.rows = aligned.d.ld = 50264;
  EXPECT_FALSE(
      planAlignmentCopies(aligned, 2, 4, false, AlignmentCopies::Always).any());
  // An aligned leading dimension is not enough: the rows' count must be
  // whole vectors too (the ld-only padding of before kept cuBLASLt on its
  // align-1 kernels).
  ColumnMajorGemm paddedLd = lmHead("forward");
  paddedLd.x.ld = paddedLd.d.ld = 50264;
  AlignmentCopyPlan still =
      planAlignmentCopies(paddedLd, 2, 4, false, AlignmentCopies::Auto);
  EXPECT_TRUE(still.x && still.d);
  EXPECT_EQ(still.m, 50264);
}

TEST(GemmPlanTest, SmallOrThinProductsRunAsStored) {
  // A 4 x 3 x 5 product: far too little work for the copies' launches.
  ColumnMajorGemm tiny;
  tiny.m = 4, tiny.n = 3, tiny.k = 5;
  tiny.x = {fakeDevice(), 4, 5, 4, 0, false};
  tiny.y = {fakeDevice(), 5, 3, 5, 0, false}; // 20-byte columns
  tiny.d = {fakeDevice(), 4, 3, 4, 0, false};
  AlignmentCopyPlan automatic =
      planAlignmentCopies(tiny, 4, 4, false, AlignmentCopies::Auto);
  EXPECT_FALSE(automatic.any());
  EXPECT_EQ(automatic.k, 5);
  // k (5) is Y's rows: padded to 8, which X's columns follow.
  AlignmentCopyPlan forced =
      planAlignmentCopies(tiny, 4, 4, false, AlignmentCopies::Always);
  EXPECT_TRUE(forced.x && forced.y);
  EXPECT_FALSE(forced.d);
  EXPECT_EQ(forced.k, 8);
  EXPECT_EQ(forced.m, 4);
  EXPECT_EQ(forced.n, 3);
  // [1024, 1025] f32 = [1024, 64] * [64, 1025]: 134 Mflop over 8 MiB of
  // output, about 8 flops per byte copied; the copy would cost more than
  // the faster kernel saves.
  ColumnMajorGemm thin;
  thin.m = 1025, thin.n = 1024, thin.k = 64;
  thin.x = {fakeDevice(), 1025, 64, 1025, 0, false};
  thin.y = {fakeDevice(), 64, 1024, 64, 0, false};
  thin.d = {fakeDevice(), 1025, 1024, 1025, 0, false};
  EXPECT_FALSE(
      planAlignmentCopies(thin, 4, 4, false, AlignmentCopies::Auto).any());
}

TEST(GemmPlanTest, ParsesTheAlignmentCopiesSetting) {
  EXPECT_EQ(parseAlignmentCopies(""), AlignmentCopies::Auto);
  EXPECT_EQ(parseAlignmentCopies("auto"), AlignmentCopies::Auto);
  EXPECT_EQ(parseAlignmentCopies("always"), AlignmentCopies::Always);
  EXPECT_EQ(parseAlignmentCopies("never"), AlignmentCopies::Never);
  EXPECT_FALSE(parseAlignmentCopies("yes"));
}

/// Runs \p fills on host memory, as cuMemsetD2D8 would on the device.
void runFills(const std::vector<StridedFill> &fills) {
  for (const StridedFill &f : fills)
    for (size_t r = 0; r < f.rows; ++r)
      std::memset(f.dst + int64_t(r) * f.pitch, 0, f.width);
}

/// Runs \p copies on host memory, as cuMemcpy2D would on the device.
void runCopies(const std::vector<StridedCopy> &copies) {
  for (const StridedCopy &c : copies)
    for (size_t r = 0; r < c.rows; ++r)
      std::memcpy(c.dst + int64_t(r) * c.dstPitch,
                  c.src + int64_t(r) * c.srcPitch, c.width);
}

/// The aligned copies, run on the host, then the product on them and the
/// output copied back, give the product of the matrices as stored: for
/// packed, strided (a copy per batch) and broadcast batches, plain and
/// transposed operands.
TEST(GemmPlanTest, AlignedCopiesComputeTheSameProduct) {
  struct Case {
    const char *name;
    bool ta, tb, tc;
    int64_t padA, padB, batch;
    bool broadcastB;
    int64_t batchGap = 0; // of A and C
  };
  const Case cases[] = {{"plain", false, false, false, 2, 3, 1, false},
                        {"transposed", true, true, true, 2, 2, 1, false},
                        {"batched", false, true, false, 2, 2, 3, false},
                        {"broadcast", true, false, false, 2, 2, 2, true},
                        {"strided", false, false, true, 2, 2, 2, false, 3}};
  const int64_t M = 5, K = 3, N = 7;
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<float> sa, sb, sc;
    MatrixOperand a = view(sa, M, K, c.ta, c.padA, c.batch, c.batchGap);
    MatrixOperand b = view(sb, K, N, c.tb, c.padB, c.broadcastB ? 1 : c.batch);
    if (c.broadcastB)
      b.batchStride = 0;
    MatrixOperand out = view(sc, M, N, c.tc, 1, c.batch, c.batchGap);
    for (int64_t bt = 0; bt < c.batch; ++bt)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t p = 0; p < K; ++p)
          element(a, bt, i, p) = float(i * 7 - p + bt);
    for (int64_t bt = 0; bt < (c.broadcastB ? 1 : c.batch); ++bt)
      for (int64_t p = 0; p < K; ++p)
        for (int64_t j = 0; j < N; ++j)
          element(b, bt, p, j) = float(p * 3 + j - bt);
    for (int64_t bt = 0; bt < c.batch; ++bt)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j)
          element(out, bt, i, j) = float(i - j); // accumulated into
    std::string error;
    std::optional<ColumnMajorGemm> gemm = planGemm(a, b, out, c.batch, error);
    ASSERT_TRUE(gemm) << error;
    AlignmentCopyPlan plan =
        planAlignmentCopies(*gemm, 4, 4, true, AlignmentCopies::Always);
    // Every case has misaligned A and B (odd leading dimensions) and pads
    // its sizes (5, 3, 7) to whole vectors of 4 floats.
    ASSERT_TRUE(plan.x && plan.y);
    EXPECT_TRUE(plan.m % 4 == 0 || plan.k % 4 == 0 || plan.n % 4 == 0);

    // Scratches on the host (std::vector<float> is 16-byte aligned here),
    // filled with garbage that only the padding fills may hide.
    std::vector<std::vector<float>> scratches;
    ColumnMajorGemm aligned = alignedGemm(*gemm, plan, 4, 4);
    auto stage = [&](bool copied, const StoredMatrix &m, StoredMatrix &into,
                     bool input) {
      if (!copied)
        return;
      scratches.emplace_back(packedBytes(into, gemm->batch, 4) / 4, -7.0f);
      into.data = reinterpret_cast<const char *>(scratches.back().data());
      EXPECT_FALSE(isMisaligned(into, gemm->batch, 4));
      EXPECT_EQ(into.rows % 4, 0);
      if (input)
        runFills(paddingFills(into, m, gemm->batch, 4));
      runCopies(matrixCopies(into, m, gemm->batch, 4));
    };
    stage(plan.x, gemm->x, aligned.x, true);
    stage(plan.y, gemm->y, aligned.y, true);
    stage(plan.d, gemm->d, aligned.d, false);
    evaluate(aligned);
    if (plan.d)
      runCopies(matrixCopies(gemm->d, aligned.d, gemm->batch, 4));

    for (int64_t bt = 0; bt < c.batch; ++bt)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          float expected = float(i - j);
          int64_t bb = c.broadcastB ? 0 : bt;
          for (int64_t p = 0; p < K; ++p)
            expected += float(i * 7 - p + bt) * float(p * 3 + j - bb);
          ASSERT_EQ(element(out, bt, i, j), expected)
              << "batch " << bt << " at " << i << "," << j;
        }
  }
}

} // namespace
