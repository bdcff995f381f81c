//===- CachingAllocator.cpp - Device memory reused across steps -----------===//

#include "autopar/runtime/cuda/CachingAllocator.h"

#include "autopar/runtime/Error.h"

#include <algorithm>
#include <cstdio>

namespace autopar::runtime::cuda {

std::string formatBytes(double bytes) {
  const char *units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), unit ? "%.1f %s" : "%.0f %s", bytes,
                units[unit]);
  return text;
}

size_t CachingAllocator::sizeClass(size_t bytes) {
  if (bytes <= MinBlock)
    return MinBlock;
  // The largest power of two not above bytes; classes are an eighth of it
  // apart (never less than MinBlock).
  size_t power = size_t(1) << (63 - __builtin_clzll(bytes));
  size_t step = std::max(MinBlock, power / 8);
  return (bytes + step - 1) / step * step;
}

CachingAllocator::~CachingAllocator() {
  for (auto &[size, blocks] : cached)
    for (void *block : blocks)
      backend.release(block);
  for (auto &[block, size] : used)
    backend.release(block);
}

void *CachingAllocator::allocate(size_t bytes, const std::string &what,
                                 bool exact) {
  size_t size =
      exact ? std::max(MinBlock, (bytes + MinBlock - 1) / MinBlock * MinBlock)
            : sizeClass(bytes);
  void *block = nullptr;
  // A free block of the class, else (for temporaries) the smallest free one
  // of a larger class up to twice the size: a step's temporaries come in
  // many sizes, and blocks of one class only taken by that class left the
  // GPT-2 step's allocator holding 13.1 GB for a 10.2 GB peak. A block keeps
  // its size: it returns to its own class when freed.
  auto free = cached.end();
  for (auto it = cached.lower_bound(size);
       it != cached.end() &&
       (it->first == size || (!exact && it->first <= 2 * size));
       ++it)
    if (!it->second.empty()) {
      free = it;
      break;
    }
  if (free != cached.end()) {
    size = free->first;
    block = free->second.back();
    free->second.pop_back();
  } else {
    block = allocateFromBackend(size, bytes, what);
  }
  used.emplace(block, size);
  inUse += size;
  peakInUse = std::max(peakInUse, inUse);
  return block;
}

void *CachingAllocator::allocateFromBackend(size_t size, size_t requested,
                                            const std::string &what) {
  ++allocations;
  void *block = backend.allocate(size);
  if (!block && reserved > inUse) {
    // Out of memory, but the cache holds blocks of other sizes: give them
    // back and try once more.
    releaseCached();
    ++allocations;
    block = backend.allocate(size);
  }
  if (!block)
    throw Error("out of GPU memory allocating " +
                formatBytes(double(requested)) + " for " + what + " (" +
                formatBytes(double(inUse)) +
                " in use by this rank; the device has " +
                backend.describeFreeMemory() + ")");
  reserved += size;
  peakReserved = std::max(peakReserved, reserved);
  return block;
}

void CachingAllocator::free(void *data) {
  auto it = used.find(data);
  if (it == used.end()) {
    char address[32];
    std::snprintf(address, sizeof(address), "%p", data);
    throw Error(std::string("freeing device memory at ") + address +
                ", which is not a block in use (allocated by mgpuMemAlloc "
                "and not yet freed)");
  }
  size_t size = it->second;
  used.erase(it);
  inUse -= size;
  cached[size].push_back(data);
}

void CachingAllocator::releaseCached() {
  if (cached.empty())
    return;
  // Queued work may still read a block freed in stream order.
  backend.synchronize();
  for (auto &[size, blocks] : cached) {
    for (void *block : blocks) {
      backend.release(block);
      reserved -= size;
    }
  }
  cached.clear();
}

} // namespace autopar::runtime::cuda
