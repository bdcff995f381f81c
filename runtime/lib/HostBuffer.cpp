//===- HostBuffer.cpp - Aligned host memory -------------------------------===//

#include "autopar/runtime/HostBuffer.h"

#include "autopar/runtime/Error.h"

#include <cstring>

namespace autopar::runtime {

HostBuffer::HostBuffer(size_t bytes) : bytes(bytes) {
  // aligned_alloc wants a multiple of the alignment, and a non-zero size so
  // that even an empty tensor has a valid, distinct address.
  size_t rounded = (bytes + Alignment - 1) / Alignment * Alignment;
  if (rounded == 0)
    rounded = Alignment;
  if (rounded < bytes)
    throw Error("cannot allocate " + std::to_string(bytes) + " bytes");
  storage.reset(std::aligned_alloc(Alignment, rounded));
  if (!storage)
    throw Error("out of memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(storage.get(), 0, rounded);
}

} // namespace autopar::runtime
