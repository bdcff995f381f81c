//===- MemorySpace.cpp - Host memory as a MemorySpace ---------------------===//

#include "autopar/runtime/MemorySpace.h"

#include "autopar/runtime/Error.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace autopar::runtime {

namespace {

class HostMemory : public MemorySpace {
public:
  bool isHost() const override { return true; }

  void *allocate(size_t bytes) override {
    // 64 bytes, as HostBuffer: enough for any vector access.
    size_t rounded = (bytes + 63) / 64 * 64;
    void *data = std::aligned_alloc(64, rounded ? rounded : 64);
    if (!data)
      throw Error("out of memory allocating " + std::to_string(bytes) +
                  " bytes");
    return data;
  }

  void release(void *data) override { std::free(data); }

  void copy2D(void *dst, int64_t dstPitch, const void *src, int64_t srcPitch,
              size_t width, size_t rows) const override {
    hostCopier().copy2D(dst, dstPitch, src, srcPitch, width, rows);
  }

  void copyToHost(void *host, const void *from, size_t bytes) override {
    if (bytes)
      std::memmove(host, from, bytes);
  }

  void copyFromHost(void *to, const void *host, size_t bytes) override {
    if (bytes)
      std::memmove(to, host, bytes);
  }
};

} // namespace

MemorySpace &hostMemory() {
  static HostMemory memory;
  return memory;
}

} // namespace autopar::runtime
