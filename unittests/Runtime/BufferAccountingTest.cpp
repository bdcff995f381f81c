//===- BufferAccountingTest.cpp - The generated code's counted buffers ----===//

#include "autopar/runtime/BufferAccounting.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <cstring>

using namespace autopar::runtime;

namespace {

TEST(BufferAccountingTest, CountsTheBytesAskedForUntilFreed) {
  resetBufferPeaks();
  const int64_t before = bufferStats().live;
  void *a = _mlir_memref_to_llvm_alloc(100);
  void *b = _mlir_memref_to_llvm_aligned_alloc(64, 256);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 16, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
  // The buffers are usable whole (the header sits below them).
  std::memset(a, 0xab, 100);
  std::memset(b, 0xcd, 256);
  EXPECT_EQ(bufferStats().live - before, 356);
  _mlir_memref_to_llvm_free(a);
  EXPECT_EQ(bufferStats().live - before, 256);
  _mlir_memref_to_llvm_free(b);
  _mlir_memref_to_llvm_free(nullptr);
  BufferStats stats = bufferStats();
  EXPECT_EQ(stats.live, before);
  EXPECT_EQ(stats.peak - before, 356);
}

TEST(BufferAccountingTest, KeptForTheBackwardIsWhatTheForwardStillHolds) {
  resetBufferPeaks();
  // Two micro-batches: each forward allocates three buffers, frees one
  // before its backward begins, the backward frees the rest.
  for (uint64_t kept : {64u, 192u}) {
    autopar_rt_step_phase(0);
    void *temporary = _mlir_memref_to_llvm_aligned_alloc(64, 512);
    void *residual = _mlir_memref_to_llvm_aligned_alloc(64, kept);
    void *loss = _mlir_memref_to_llvm_aligned_alloc(64, 64);
    _mlir_memref_to_llvm_free(temporary);
    autopar_rt_step_phase(1);
    void *gradient = _mlir_memref_to_llvm_aligned_alloc(64, 1024);
    _mlir_memref_to_llvm_free(gradient);
    _mlir_memref_to_llvm_free(residual);
    _mlir_memref_to_llvm_free(loss);
  }
  BufferStats stats = bufferStats();
  EXPECT_EQ(stats.backwards, 2);
  EXPECT_EQ(stats.keptForBackward, 192 + 64);
  EXPECT_EQ(stats.buffersKeptForBackward, 2);
  resetBufferPeaks();
  EXPECT_EQ(bufferStats().keptForBackward, 0);
  EXPECT_EQ(bufferStats().backwards, 0);
}

TEST(BufferAccountingTest, ABackwardWithoutAForwardMarkCountsNothing) {
  resetBufferPeaks();
  autopar_rt_step_phase(1);
  EXPECT_EQ(bufferStats().backwards, 0);
  EXPECT_EQ(bufferStats().keptForBackward, 0);
}

} // namespace
