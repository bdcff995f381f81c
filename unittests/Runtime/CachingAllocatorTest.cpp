//===- CachingAllocatorTest.cpp - The GPU caching allocator, without a GPU ===//

#include "autopar/runtime/cuda/CachingAllocator.h"
#include "autopar/runtime/Error.h"

#include "gtest/gtest.h"

#include <cstdlib>
#include <map>

using namespace autopar::runtime;
using namespace autopar::runtime::cuda;

namespace {

/// Host memory standing in for cuMemAlloc, with a capacity.
class FakeBackend : public AllocatorBackend {
public:
  explicit FakeBackend(size_t capacity) : capacity(capacity) {}
  ~FakeBackend() override { EXPECT_TRUE(live.empty()) << "leaked blocks"; }

  void *allocate(size_t bytes) override {
    ++allocations;
    if (used + bytes > capacity)
      return nullptr;
    void *block = std::malloc(bytes);
    live[block] = bytes;
    used += bytes;
    return block;
  }
  void release(void *data) override {
    auto it = live.find(data);
    ASSERT_NE(it, live.end()) << "released an unknown block";
    used -= it->second;
    live.erase(it);
    std::free(data);
    ++releases;
  }
  void synchronize() override { ++synchronizations; }
  std::string describeFreeMemory() override { return "0 bytes free of 1 KiB"; }

  size_t capacity, used = 0;
  std::map<void *, size_t> live;
  int allocations = 0, releases = 0, synchronizations = 0;
};

TEST(CachingAllocatorTest, SizeClassesAreCoarseButTight) {
  EXPECT_EQ(CachingAllocator::sizeClass(0), 512u);
  EXPECT_EQ(CachingAllocator::sizeClass(1), 512u);
  EXPECT_EQ(CachingAllocator::sizeClass(512), 512u);
  EXPECT_EQ(CachingAllocator::sizeClass(513), 1024u);
  EXPECT_EQ(CachingAllocator::sizeClass(4096), 4096u);
  EXPECT_EQ(CachingAllocator::sizeClass(4097), 4608u); // 4 KiB + 4 KiB / 8
  EXPECT_EQ(CachingAllocator::sizeClass(1000000), 1048576u);
  for (size_t bytes = 1; bytes < (size_t(1) << 34); bytes = bytes * 3 + 7) {
    size_t size = CachingAllocator::sizeClass(bytes);
    EXPECT_GE(size, bytes);
    EXPECT_EQ(size % CachingAllocator::MinBlock, 0u) << bytes;
    if (bytes > 4096) {
      EXPECT_LE(size - bytes, bytes / 8) << bytes; // At most 12.5% slack.
    }
    EXPECT_EQ(CachingAllocator::sizeClass(size), size) << "classes are stable";
  }
}

TEST(CachingAllocatorTest, ReusesFreedBlocksAfterTheFirstStep) {
  FakeBackend backend(size_t(1) << 30);
  {
    CachingAllocator allocator(backend);
    // Two "steps" with the same temporaries: the second allocates nothing.
    for (int step = 0; step < 2; ++step) {
      void *a = allocator.allocate(1000, "a");
      void *b = allocator.allocate(70000, "b");
      void *c = allocator.allocate(1000, "c");
      EXPECT_NE(a, c);
      allocator.free(a);
      void *d = allocator.allocate(900, "d"); // Same class as a: a's block.
      EXPECT_EQ(d, a);
      allocator.free(b);
      allocator.free(c);
      allocator.free(d);
    }
    EXPECT_EQ(allocator.backendAllocations(), 3);
    EXPECT_EQ(backend.allocations, 3);
    EXPECT_EQ(allocator.bytesInUse(), 0u);
    EXPECT_EQ(allocator.peakBytesInUse(), 1024u + 73728u + 1024u);
    EXPECT_EQ(allocator.peakBytesReserved(), 1024u + 73728u + 1024u);

    // An exact block is rounded to MinBlock only.
    void *weights = allocator.allocate(100000, "weights", /*exact=*/true);
    EXPECT_EQ(allocator.bytesInUse(), 100352u);
    allocator.free(weights);
    EXPECT_EQ(backend.synchronizations, 0) << "reuse needs no wait";
  }
  EXPECT_EQ(backend.releases, 4) << "the allocator gives everything back";
}

TEST(CachingAllocatorTest, TemporariesTakeAFreeBlockUpToTwiceTheirClass) {
  FakeBackend backend(size_t(1) << 30);
  CachingAllocator allocator(backend);
  void *big = allocator.allocate(70000, "big"); // class 73728
  allocator.free(big);
  // Class 40960: the free 73728-byte block is within twice that.
  void *smaller = allocator.allocate(40000, "smaller");
  EXPECT_EQ(smaller, big);
  EXPECT_EQ(allocator.bytesInUse(), 73728u) << "the block keeps its size";
  EXPECT_EQ(backend.allocations, 1);
  allocator.free(smaller);
  // Class 30720: twice that is below 73728, so a block of its own.
  void *small = allocator.allocate(30000, "small");
  EXPECT_NE(small, big);
  EXPECT_EQ(backend.allocations, 2);
  // A block for the whole run takes only its own size.
  void *weights = allocator.allocate(70000, "weights", /*exact=*/true);
  EXPECT_NE(weights, big);
  EXPECT_EQ(backend.allocations, 3);
  // The big block went back to its own class: a request of that class
  // takes it.
  void *again = allocator.allocate(73000, "again");
  EXPECT_EQ(again, big);
  EXPECT_EQ(backend.allocations, 3);
  allocator.free(small);
  allocator.free(weights);
  allocator.free(again);
}

TEST(CachingAllocatorTest, GivesTheCacheBackWhenMemoryRunsOut) {
  FakeBackend backend(4096 + 2048);
  CachingAllocator allocator(backend);
  void *small = allocator.allocate(4096, "small");
  allocator.free(small); // Cached, not returned.
  // 2 KiB more fit; 4 KiB + 512 do not until the cached 4 KiB go back.
  void *big = allocator.allocate(4096 + 512, "big");
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(backend.releases, 1);
  EXPECT_EQ(backend.synchronizations, 1)
      << "queued work may still use a cached block: wait before releasing";
  allocator.free(big);
}

TEST(CachingAllocatorTest, ReportsOutOfMemoryAndBadFrees) {
  FakeBackend backend(1024);
  CachingAllocator allocator(backend);
  try {
    allocator.allocate(size_t(3) << 20, "parameter 'fc.weight'");
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_EQ(std::string(error.what()),
              "out of GPU memory allocating 3.0 MiB for parameter "
              "'fc.weight' (0 bytes in use by this rank; the device has 0 "
              "bytes free of 1 KiB)");
  }
  int local = 0;
  try {
    allocator.free(&local);
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find("which is not a block in use"),
              std::string::npos)
        << error.what();
  }
  EXPECT_EQ(formatBytes(512), "512 bytes");
  EXPECT_EQ(formatBytes(1536), "1.5 KiB");
  EXPECT_EQ(formatBytes(double(size_t(80) << 30)), "80.0 GiB");
}

} // namespace
