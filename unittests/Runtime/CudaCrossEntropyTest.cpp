//===- CudaCrossEntropyTest.cpp - The fused cross-entropy kernels on a GPU ===//
//
// _mlir_ciface_autopar_cuda_cross_entropy_{fwd,bwd}_{f32,bf16} against a
// float64 reference: lse and nll within 1e-5 relative, the logits' gradient
// within 1e-6 of |d_nll| |lse| (f32: the probabilities carry lse's rounding)
// or bf16's rounding (bf16; the reference starts from the bf16-rounded
// logits), over one class, a few hundred and GPT-2's 50257
// (no multiple of anything), rows padded apart (a row stride beyond the
// classes), ignored positions and a label outside the classes. Outputs start
// as NaN, so whatever the kernels fail to write shows.
//
// CudaCrossEntropyTiming runs only with AUTOPAR_ATTENTION_TIMING=1 (the GPU
// round trip's `attention` part): the bf16 forward and forward + backward at
// GPT-2 small's training shape (8 x 1024 positions, 50257 classes), one JSON
// line ("cross-entropy-timing {...}") with the bytes moved per second.
//
//===----------------------------------------------------------------------===//

#include "CudaTestBackend.h"

#include "autopar/runtime/CpuKernels.h"
#include "autopar/runtime/DType.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

using namespace autopar::runtime;

namespace {

using Desc2 = MemRefDescriptor<char, 2>;
using Desc1 = MemRefDescriptor<char, 1>;
using ForwardFn = void (*)(Desc2 *, Desc1 *, Desc1 *, Desc1 *, int64_t);
using BackwardFn = void (*)(Desc2 *, Desc1 *, Desc1 *, Desc1 *, Desc2 *,
                            int64_t);

constexpr int64_t Ignore = -100;

template <typename Fn> Fn entry(const char *name) {
  cudaTestBackend(); // loads libautopar_cuda.so
  void *symbol = dlsym(RTLD_DEFAULT, name);
  if (!symbol)
    throw std::runtime_error(std::string("libautopar_cuda.so lacks ") + name);
  return reinterpret_cast<Fn>(symbol);
}

ForwardFn forwardFor(bool bf16) {
  return entry<ForwardFn>(
      bf16 ? "_mlir_ciface_autopar_cuda_cross_entropy_fwd_bf16"
           : "_mlir_ciface_autopar_cuda_cross_entropy_fwd_f32");
}
BackwardFn backwardFor(bool bf16) {
  return entry<BackwardFn>(
      bf16 ? "_mlir_ciface_autopar_cuda_cross_entropy_bwd_bf16"
           : "_mlir_ciface_autopar_cuda_cross_entropy_bwd_f32");
}

/// Device memory of `count` elements of `bytes` each, freed with it.
class DeviceBuffer {
public:
  DeviceBuffer(size_t count, size_t bytes)
      : size(std::max<size_t>(count, 1) * bytes) {
    data = cudaTestBackend().allocate(size, "a test buffer");
  }
  ~DeviceBuffer() { cudaTestBackend().free(data); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  void upload(const void *from, size_t bytes) {
    cudaTestBackend().copyToDevice(data, from, bytes);
  }
  void download(void *to, size_t bytes) const {
    cudaTestBackend().copyToHost(to, data, bytes);
  }
  char *pointer() const { return static_cast<char *>(data); }

private:
  size_t size;
  void *data;
};

/// `values` as the device holds them: f32 as they are, or bf16 bits (and
/// `values` rounded to what those bits are).
std::vector<char> encode(std::vector<float> &values, bool bf16) {
  std::vector<char> bytes(values.size() * (bf16 ? 2 : 4));
  if (!bf16) {
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
  }
  convertFromFloat32(values.data(), static_cast<int64_t>(values.size()),
                     DType::BFloat16, bytes.data());
  convertToFloat32(bytes.data(), DType::BFloat16,
                   static_cast<int64_t>(values.size()), values.data());
  return bytes;
}

std::vector<float> decode(const std::vector<char> &bytes, bool bf16) {
  std::vector<float> values(bytes.size() / (bf16 ? 2 : 4));
  if (bf16)
    convertToFloat32(bytes.data(), DType::BFloat16,
                     static_cast<int64_t>(values.size()), values.data());
  else
    std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

Desc2 matrixDesc(const DeviceBuffer &b, int64_t rows, int64_t cols,
                 int64_t rowStride) {
  return {b.pointer(), b.pointer(), 0, {rows, cols}, {rowStride, 1}};
}
Desc1 vectorDesc(const DeviceBuffer &b, int64_t n) {
  return {b.pointer(), b.pointer(), 0, {n}, {1}};
}

struct Case {
  int64_t rows, classes, rowStride;
};

class CudaCrossEntropyTest
    : public ::testing::TestWithParam<std::tuple<Case, bool>> {};

TEST_P(CudaCrossEntropyTest, MatchesFloat64Reference) {
  auto [c, bf16] = GetParam();
  const int64_t N = c.rows, C = c.classes, stride = c.rowStride;
  std::mt19937 rng(static_cast<uint32_t>(N * 131 + C));
  std::normal_distribution<float> normal(0.0f, 4.0f);
  // Logits in a [N, stride] buffer, NaN in the padding (never read).
  std::vector<float> logits(static_cast<size_t>(N * stride), NAN);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < C; ++k)
      logits[n * stride + k] = normal(rng);
  std::vector<int64_t> labels(static_cast<size_t>(N));
  std::uniform_int_distribution<int64_t> pick(0, C - 1);
  for (int64_t n = 0; n < N; ++n)
    labels[n] = n % 5 == 3 ? Ignore : n % 7 == 4 ? C + 3 : pick(rng);
  std::vector<float> dNll(static_cast<size_t>(N));
  for (float &g : dNll)
    g = normal(rng) / 4.0f;

  std::vector<char> logitBytes = encode(logits, bf16);
  const size_t element = bf16 ? 2 : 4;
  DeviceBuffer x(logits.size(), element), y(labels.size(), 8), nll(N, 4),
      lse(N, 4), g(N, 4), d(logits.size(), element);
  x.upload(logitBytes.data(), logitBytes.size());
  y.upload(labels.data(), labels.size() * 8);
  g.upload(dNll.data(), dNll.size() * 4);
  std::vector<float> nan(static_cast<size_t>(N * stride), NAN);
  std::vector<char> nanBytes = encode(nan, bf16);
  d.upload(nanBytes.data(), nanBytes.size());
  nll.upload(nan.data(), N * 4);
  lse.upload(nan.data(), N * 4);

  Desc2 xd = matrixDesc(x, N, C, stride), dd = matrixDesc(d, N, C, stride);
  Desc1 yd = vectorDesc(y, N), nd = vectorDesc(nll, N), ld = vectorDesc(lse, N),
        gd = vectorDesc(g, N);
  forwardFor(bf16)(&xd, &yd, &nd, &ld, Ignore);
  backwardFor(bf16)(&xd, &yd, &ld, &gd, &dd, Ignore);
  cudaTestBackend().synchronize();

  std::vector<float> gotNll(N), gotLse(N);
  nll.download(gotNll.data(), N * 4);
  lse.download(gotLse.data(), N * 4);
  std::vector<char> gradBytes(logitBytes.size());
  d.download(gradBytes.data(), gradBytes.size());
  std::vector<float> grad = decode(gradBytes, bf16);

  double worstGrad = 0, largestGrad = 0;
  for (int64_t n = 0; n < N; ++n) {
    const float *row = &logits[n * stride];
    double m = *std::max_element(row, row + C), sum = 0;
    for (int64_t k = 0; k < C; ++k)
      sum += std::exp(double(row[k]) - m);
    double wantLse = m + std::log(sum);
    int64_t label = labels[n];
    bool inRange = label >= 0 && label < C;
    double wantNll = label == Ignore ? 0.0
                     : inRange       ? wantLse - row[label]
                                     : wantLse;
    double tol = 1e-5 * std::max(1.0, std::abs(wantLse));
    EXPECT_NEAR(gotLse[n], wantLse, tol) << "row " << n;
    EXPECT_NEAR(gotNll[n], wantNll, tol) << "row " << n;
    for (int64_t k = 0; k < C; ++k) {
      double want = label == Ignore
                        ? 0.0
                        : dNll[n] * (std::exp(double(row[k]) - wantLse) -
                                     (k == label ? 1.0 : 0.0));
      double got = grad[n * stride + k];
      ASSERT_FALSE(std::isnan(got)) << "row " << n << " class " << k;
      if (label == Ignore) {
        ASSERT_EQ(got, 0.0) << "row " << n << " class " << k;
      }
      if (!bf16) { // exp(x - lse) carries lse's f32 rounding, relative
        EXPECT_NEAR(
            got, want,
            1e-6 * std::abs(dNll[n]) * std::max(1.0, std::abs(wantLse)) + 1e-9)
            << "row " << n << " class " << k;
      }
      worstGrad = std::max(worstGrad, std::abs(got - want));
      largestGrad = std::max(largestGrad, std::abs(want));
    }
  }
  // bf16 keeps 8 bits of mantissa: each element within 2^-8 of its size.
  if (bf16) {
    EXPECT_LE(worstGrad, largestGrad / 128)
        << "largest |gradient| " << largestGrad;
  }
  std::printf("cross-entropy %s N %lld C %lld: worst gradient error %.3g "
              "(largest %.3g)\n",
              bf16 ? "bf16" : "f32", static_cast<long long>(N),
              static_cast<long long>(C), worstGrad, largestGrad);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CudaCrossEntropyTest,
    ::testing::Combine(::testing::Values(Case{5, 1, 1}, Case{37, 255, 260},
                                         Case{19, 50257, 50257}),
                       ::testing::Bool()));

TEST(CudaCrossEntropyDeathTest, RejectsStridedClasses) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  DeviceBuffer x(64, 4), y(4, 8), n(4, 4);
  Desc2 xd = matrixDesc(x, 4, 8, 16);
  xd.strides[1] = 2;
  Desc1 yd = vectorDesc(y, 4), nd = vectorDesc(n, 4);
  EXPECT_DEATH(forwardFor(false)(&xd, &yd, &nd, &nd, Ignore),
               "autopar_cuda_cross_entropy_fwd_f32: the classes must be "
               "contiguous \\(innermost stride 1, not 2");
  Desc1 shortLabels = vectorDesc(y, 3);
  EXPECT_DEATH(forwardFor(false)(&xd, &shortLabels, &nd, &nd, Ignore),
               "operand sizes disagree \\(logits \\[4, 8\\], labels \\[3\\]");
}

/// The round trip's timing: bf16 at GPT-2 small's training shape.
TEST(CudaCrossEntropyTiming, Bf16Gpt2Small) {
  const char *enabled = std::getenv("AUTOPAR_ATTENTION_TIMING");
  if (!enabled || !*enabled || std::strcmp(enabled, "0") == 0)
    GTEST_SKIP() << "set AUTOPAR_ATTENTION_TIMING=1 to time the kernels";
  const int64_t N = 8 * 1024, C = 50257;
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(static_cast<size_t>(N * C));
  for (float &v : logits)
    v = normal(rng);
  std::vector<char> bytes = encode(logits, true);
  std::vector<int64_t> labels(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; ++n)
    labels[n] = (n * 7919) % C;
  std::vector<float> dNll(static_cast<size_t>(N), 1.0f / float(N));
  DeviceBuffer x(logits.size(), 2), d(logits.size(), 2), y(N, 8), nll(N, 4),
      lse(N, 4), g(N, 4);
  x.upload(bytes.data(), bytes.size());
  y.upload(labels.data(), labels.size() * 8);
  g.upload(dNll.data(), dNll.size() * 4);
  Desc2 xd = matrixDesc(x, N, C, C), dd = matrixDesc(d, N, C, C);
  Desc1 yd = vectorDesc(y, N), nd = vectorDesc(nll, N), ld = vectorDesc(lse, N),
        gd = vectorDesc(g, N);
  ForwardFn forward = forwardFor(true);
  BackwardFn backward = backwardFor(true);
  auto time = [&](auto body) {
    for (int i = 0; i < 3; ++i)
      body();
    cudaTestBackend().synchronize();
    const int iterations = 20;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iterations; ++i)
      body();
    cudaTestBackend().synchronize();
    std::chrono::duration<double, std::milli> elapsed =
        std::chrono::steady_clock::now() - start;
    return elapsed.count() / iterations;
  };
  double forwardMs = time([&] { forward(&xd, &yd, &nd, &ld, Ignore); });
  double bothMs = time([&] {
    forward(&xd, &yd, &nd, &ld, Ignore);
    backward(&xd, &yd, &ld, &gd, &dd, Ignore);
  });
  // Bytes of logits moved: the forward reads them, the backward reads them
  // and writes their gradient.
  double logitBytes = double(N) * C * 2;
  std::printf("cross-entropy-timing {\"dtype\": \"bf16\", \"N\": %lld, "
              "\"C\": %lld, \"fwd_ms\": %.4f, \"fwdbwd_ms\": %.4f, "
              "\"fwd_gbs\": %.1f, \"fwdbwd_gbs\": %.1f}\n",
              static_cast<long long>(N), static_cast<long long>(C), forwardMs,
              bothMs, logitBytes / forwardMs / 1e6,
              3 * logitBytes / bothMs / 1e6);
}

} // namespace
