//===- Scratch.cpp - Reusable per-thread kernel buffers -------------------===//

#include "Scratch.h"

#include "KernelError.h"

#include <cstdlib>
#include <memory>

namespace autopar::runtime::cpu {

namespace {
struct Free {
  void operator()(float *p) const { std::free(p); }
};

struct Buffer {
  std::unique_ptr<float, Free> data;
  size_t capacity = 0;
};

thread_local Buffer buffers[static_cast<size_t>(ScratchSlot::Count)];
} // namespace

float *scratch(ScratchSlot slot, size_t count) {
  Buffer &buffer = buffers[static_cast<size_t>(slot)];
  if (count > buffer.capacity) {
    // Grow geometrically so that a sequence of growing requests stays cheap.
    size_t capacity = count > 2 * buffer.capacity ? count : 2 * buffer.capacity;
    size_t bytes = (capacity * sizeof(float) + 63) / 64 * 64;
    buffer.data.reset(static_cast<float *>(std::aligned_alloc(64, bytes)));
    if (!buffer.data)
      kernelFatal("scratch", "out of memory allocating " +
                                 std::to_string(bytes) + " bytes");
    buffer.capacity = capacity;
  }
  return buffer.data.get();
}

} // namespace autopar::runtime::cpu
