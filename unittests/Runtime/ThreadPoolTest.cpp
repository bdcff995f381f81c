//===- ThreadPoolTest.cpp - The CPU kernels' threads ----------------------===//

#include "ThreadPool.h"

#include "autopar/runtime/CpuBlas.h"
#include "autopar/runtime/CpuKernels.h"

#include "gtest/gtest.h"

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

using namespace autopar::runtime;
using autopar::runtime::cpu::parallelFor;

namespace {

/// Restores one kernel thread when a test ends, as the other tests expect.
struct KernelThreads {
  explicit KernelThreads(int n) { setKernelThreads(n); }
  ~KernelThreads() { setKernelThreads(1); }
};

TEST(ThreadPoolTest, EveryIndexRunsOnceAcrossTheThreads) {
  KernelThreads threads(3);
  std::vector<std::atomic<int>> runs(1000);
  std::mutex mutex;
  std::set<std::thread::id> seen;
  parallelFor(1000, 1000, [&](int64_t begin, int64_t end) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      seen.insert(std::this_thread::get_id());
    }
    for (int64_t i = begin; i < end; ++i)
      ++runs[i];
  });
  for (int64_t i = 0; i < 1000; ++i)
    ASSERT_EQ(runs[i], 1) << "index " << i;
  EXPECT_EQ(seen.size(), 3u);
  EXPECT_TRUE(seen.count(std::this_thread::get_id()));
}

TEST(ThreadPoolTest, SmallLoopsAndNestedLoopsRunOnTheCaller) {
  KernelThreads threads(4);
  std::thread::id caller = std::this_thread::get_id();
  bool inline_ = true;
  parallelFor(8, 1, [&](int64_t, int64_t) {
    inline_ = inline_ && std::this_thread::get_id() == caller;
  });
  EXPECT_TRUE(inline_) << "8 indices of 1 float each woke the workers";

  std::atomic<int> nestedOnOtherThreads{0};
  parallelFor(4, 1 << 20, [&](int64_t begin, int64_t end) {
    std::thread::id outer = std::this_thread::get_id();
    for (int64_t i = begin; i < end; ++i)
      parallelFor(4, 1 << 20, [&](int64_t, int64_t) {
        if (std::this_thread::get_id() != outer)
          ++nestedOnOtherThreads;
      });
  });
  EXPECT_EQ(nestedOnOtherThreads, 0);
}

TEST(ThreadPoolTest, ManyLoopsInARowAllComplete) {
  KernelThreads threads(2);
  int64_t total = 0;
  for (int round = 0; round < 2000; ++round) {
    std::vector<int64_t> sums(2, 0);
    parallelFor(64, 1024, [&](int64_t begin, int64_t end) {
      sums[begin == 0 ? 0 : 1] += end - begin;
    });
    total += sums[0] + sums[1];
  }
  EXPECT_EQ(total, 2000 * 64);
}

/// What generated code passes autopar_cpu_parallel_for: a range function and
/// its context.
struct LoopContext {
  std::vector<std::atomic<int>> *runs;
};
void markRange(void *context, int64_t first, int64_t last) {
  auto *loop = static_cast<LoopContext *>(context);
  for (int64_t i = first; i < last; ++i)
    ++(*loop->runs)[i];
}

TEST(ThreadPoolTest, GeneratedParallelLoopsCoverEveryIterationOnce) {
  KernelThreads threads(2);
  for (int64_t work : {1, 4096}) { // Inline, then on both threads.
    std::vector<std::atomic<int>> runs(100);
    LoopContext context{&runs};
    autopar_cpu_parallel_for(markRange, &context, 100, work);
    for (int64_t i = 0; i < 100; ++i)
      ASSERT_EQ(runs[i], 1) << "work " << work << ", iteration " << i;
  }
}

TEST(ThreadPoolTest, ConfigureCpuThreadsTakesTheRequestedCount) {
  EXPECT_EQ(configureCpuThreads(3, /*ranksOnNode=*/1), 3);
  EXPECT_EQ(kernelThreads(), 3);
  EXPECT_EQ(configureCpuThreads(1, /*ranksOnNode=*/8), 1);
  EXPECT_EQ(kernelThreads(), 1);
}

/// A dense row-major descriptor of \p data with these sizes.
template <int R>
MemRefDescriptor<float, R> descriptor(std::vector<float> &data,
                                      const std::array<int64_t, R> &sizes) {
  MemRefDescriptor<float, R> d;
  d.allocated = d.aligned = data.data();
  d.offset = 0;
  int64_t stride = 1;
  for (int i = R - 1; i >= 0; --i) {
    d.sizes[i] = sizes[i];
    d.strides[i] = stride;
    stride *= sizes[i];
  }
  return d;
}

/// A depthwise convolution split over 3 threads stores exactly what one
/// thread does: each channel is computed whole by one thread.
TEST(ThreadPoolTest, DepthwiseConvolutionOnThreadsMatchesOneThread) {
  const int64_t groups = 96, h = 30, w = 31, k = 3;
  const int64_t oh = h - k + 1, ow = w - k + 1;
  std::vector<float> in(groups * h * w), filter(groups * k * k);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<float>((i * 7919) % 1000) / 500.0f - 1.0f;
  for (size_t i = 0; i < filter.size(); ++i)
    filter[i] = static_cast<float>((i * 104729) % 1000) / 500.0f - 1.0f;
  auto convolve = [&](int threads) {
    KernelThreads scope(threads);
    std::vector<float> out(groups * oh * ow, -7.0f);
    auto i = descriptor<5>(in, {1, groups, 1, h, w});
    auto f = descriptor<5>(filter, {groups, 1, 1, k, k});
    auto o = descriptor<5>(out, {1, groups, 1, oh, ow});
    _mlir_ciface_autopar_cpu_conv2d_ngchw_overwrite_f32(&i, &f, &o, 1, 1, 1, 1);
    return out;
  };
  std::vector<float> one = convolve(1), three = convolve(3);
  ASSERT_EQ(one.size(), three.size());
  for (size_t i = 0; i < one.size(); ++i)
    ASSERT_EQ(one[i], three[i]) << "at " << i;
  EXPECT_NE(one[0], -7.0f);
}

/// A convolution through im2col + GEMM unfolds its channels on 3 threads:
/// the same columns, so the same output as on one.
TEST(ThreadPoolTest, Im2colOnThreadsMatchesOneThread) {
  const int64_t c = 16, f = 8, h = 30, w = 31, k = 3;
  const int64_t oh = h - k + 1, ow = w - k + 1;
  std::vector<float> in(c * h * w), filter(f * c * k * k);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<float>((i * 7919) % 1000) / 500.0f - 1.0f;
  for (size_t i = 0; i < filter.size(); ++i)
    filter[i] = static_cast<float>((i * 104729) % 1000) / 500.0f - 1.0f;
  auto convolve = [&](int threads) {
    KernelThreads scope(threads);
    std::vector<float> out(f * oh * ow, -7.0f);
    auto i = descriptor<4>(in, {1, c, h, w});
    auto fl = descriptor<4>(filter, {f, c, k, k});
    auto o = descriptor<4>(out, {1, f, oh, ow});
    _mlir_ciface_autopar_cpu_conv2d_nchw_overwrite_f32(&i, &fl, &o, 1, 1, 1, 1);
    return out;
  };
  // Three threads first: the caller's scratch then holds no columns of a
  // one-thread run that could hide a channel the threads left out.
  std::vector<float> three = convolve(3), one = convolve(1);
  for (int64_t o = 0; o < f; ++o)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t x = 0; x < ow; ++x) {
        double sum = 0;
        for (int64_t ci = 0; ci < c; ++ci)
          for (int64_t ky = 0; ky < k; ++ky)
            for (int64_t kx = 0; kx < k; ++kx)
              sum += double(in[(ci * h + y + ky) * w + x + kx]) *
                     filter[((o * c + ci) * k + ky) * k + kx];
        size_t at = (o * oh + y) * ow + x;
        ASSERT_NEAR(three[at], sum, 1e-4) << "at " << at;
        ASSERT_EQ(one[at], three[at]) << "at " << at;
      }
}

} // namespace
