//===- CachingAllocator.h - Device memory reused across steps ---*- C++ -*-===//
//
// Generated GPU code allocates every temporary with mgpuMemAlloc and frees
// it with mgpuMemFree, in every step. cuMemAlloc and cuMemFree synchronize
// and cost tens of microseconds to milliseconds each; a step of a large
// model makes thousands of such calls. The allocator keeps freed blocks in
// free lists by size class and hands them out again, so after the first step
// no call reaches the driver.
//
// All work of a rank is ordered on its one compute stream, so a block freed
// by a kernel launch that is still queued may be handed out at once: whatever
// uses it next is queued behind that launch (stream-ordered reuse). Only
// giving blocks back to the driver needs the stream to be idle.
//
// The driver is reached through an AllocatorBackend, so that the size-class
// logic is tested without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_CACHINGALLOCATOR_H
#define AUTOPAR_RUNTIME_CUDA_CACHINGALLOCATOR_H

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace autopar::runtime::cuda {

/// Where the allocator gets its memory (cuMemAlloc on a GPU).
class AllocatorBackend {
public:
  virtual ~AllocatorBackend() = default;
  /// \p bytes of fresh memory, or null when the device is out of memory.
  /// Other failures throw Error.
  virtual void *allocate(size_t bytes) = 0;
  virtual void release(void *data) = 0;
  /// Waits until no queued work can still use a freed block.
  virtual void synchronize() = 0;
  /// "1.2 GiB of 79.1 GiB free", for out-of-memory messages.
  virtual std::string describeFreeMemory() = 0;
};

class CachingAllocator {
public:
  /// The smallest block, and the alignment of every block's size.
  static constexpr size_t MinBlock = 512;

  explicit CachingAllocator(AllocatorBackend &backend) : backend(backend) {}
  /// Gives every block, used or cached, back to the backend.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator &) = delete;
  CachingAllocator &operator=(const CachingAllocator &) = delete;

  /// The size of the block that serves a request of \p bytes: a multiple of
  /// MinBlock, and at most 1/8 above \p bytes beyond that (eight classes per
  /// power of two), so that similar sizes share blocks.
  static size_t sizeClass(size_t bytes);

  /// A block of at least \p bytes (0 is served too), from the cache if one of
  /// its class is free (or, unless \p exact, the smallest free one up to
  /// twice the class), else from the backend. When the backend is out of
  /// memory, the cache is given back to it and the request tried again;
  /// if that fails too, throws Error naming \p what and the sizes involved.
  /// \p exact: a block of \p bytes rounded up to MinBlock only, for buffers
  /// that live for the whole run (parameters), where a size class's slack
  /// would be wasted for good.
  void *allocate(size_t bytes, const std::string &what, bool exact = false);
  /// Returns a block to the cache. Throws Error for a pointer that is not a
  /// block in use.
  void free(void *data);
  /// Gives the cached (free) blocks back to the backend, after waiting for
  /// the stream.
  void releaseCached();

  /// Bytes of blocks in use (by size class), now and at most so far.
  size_t bytesInUse() const { return inUse; }
  size_t peakBytesInUse() const { return peakInUse; }
  /// Bytes obtained from the backend and not given back, now and at most.
  size_t bytesReserved() const { return reserved; }
  size_t peakBytesReserved() const { return peakReserved; }
  /// How many times the backend was asked for memory.
  int64_t backendAllocations() const { return allocations; }

private:
  void *allocateFromBackend(size_t size, size_t requested,
                            const std::string &what);

  AllocatorBackend &backend;
  /// Free blocks by size class.
  std::map<size_t, std::vector<void *>> cached;
  /// Blocks in use and their size class.
  std::unordered_map<void *, size_t> used;
  size_t inUse = 0, peakInUse = 0, reserved = 0, peakReserved = 0;
  int64_t allocations = 0;
};

/// "1.5 MiB", "3.2 GiB", "512 bytes".
std::string formatBytes(double bytes);

} // namespace autopar::runtime::cuda

#endif // AUTOPAR_RUNTIME_CUDA_CACHINGALLOCATOR_H
