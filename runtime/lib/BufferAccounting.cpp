//===- BufferAccounting.cpp - Counted allocation for generated code -------===//
//
// Every buffer carries a 16-byte header just below the address handed out:
// the address malloc or aligned_alloc returned (what free takes) and the
// size asked for (what is counted), so that `_mlir_memref_to_llvm_free`,
// which gets the pointer alone, knows both. Counters are atomics: generated
// loop nests may run on several threads.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/BufferAccounting.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

namespace {

constexpr uint64_t kHeaderBytes = 16;

struct Header {
  void *base;
  uint64_t size;
};
static_assert(sizeof(Header) == kHeaderBytes);

std::atomic<int64_t> live{0};
std::atomic<int64_t> liveBuffers{0};
std::atomic<int64_t> peak{0};
std::atomic<int64_t> forwardBegan{-1}; // live bytes then; -1: none yet
std::atomic<int64_t> buffersAtForward{0};
std::atomic<int64_t> keptForBackward{0};
std::atomic<int64_t> buffersKeptForBackward{0};
std::atomic<int64_t> backwards{0};

/// AUTOPAR_TRACE_BUFFERS=1: every buffer is remembered (address -> its
/// allocation's index and size), and the first backward's mark lists those
/// the forward allocated and still holds, in allocation order, on stderr:
/// what to compare with the IR when the measured activations and the
/// plan's disagree.
struct Trace {
  bool enabled = std::getenv("AUTOPAR_TRACE_BUFFERS") != nullptr;
  std::mutex mutex;
  std::map<void *, std::pair<uint64_t, uint64_t>> live;
  uint64_t allocations = 0, forwardBegan = 0;
  bool printed = false;
};

Trace &trace() {
  static Trace t;
  return t;
}

void raise(std::atomic<int64_t> &maximum, int64_t value) {
  int64_t seen = maximum.load(std::memory_order_relaxed);
  while (value > seen &&
         !maximum.compare_exchange_weak(seen, value, std::memory_order_relaxed))
    ;
}

void *record(void *base, char *user, uint64_t size) {
  Header header{base, size};
  std::memcpy(user - kHeaderBytes, &header, sizeof header);
  liveBuffers.fetch_add(1, std::memory_order_relaxed);
  int64_t now =
      live.fetch_add(static_cast<int64_t>(size), std::memory_order_relaxed) +
      static_cast<int64_t>(size);
  raise(peak, now);
  if (Trace &t = trace(); t.enabled) {
    std::lock_guard<std::mutex> lock(t.mutex);
    t.live[user] = {t.allocations++, size};
  }
  return user;
}

} // namespace

namespace autopar::runtime {

BufferStats bufferStats() {
  BufferStats stats;
  stats.live = live.load();
  stats.peak = peak.load();
  stats.keptForBackward = keptForBackward.load();
  stats.buffersKeptForBackward = buffersKeptForBackward.load();
  stats.backwards = backwards.load();
  return stats;
}

void resetBufferPeaks() {
  peak.store(live.load());
  forwardBegan.store(-1);
  keptForBackward.store(0);
  buffersKeptForBackward.store(0);
  backwards.store(0);
}

} // namespace autopar::runtime

extern "C" {

void *_mlir_memref_to_llvm_alloc(uint64_t size) {
  // malloc's alignment (16 on x86-64 and AArch64) survives the header.
  char *base = static_cast<char *>(std::malloc(size + kHeaderBytes));
  if (!base)
    return nullptr;
  return record(base, base + kHeaderBytes, size);
}

void *_mlir_memref_to_llvm_aligned_alloc(uint64_t alignment, uint64_t size) {
  // The header takes a whole alignment unit below the buffer.
  uint64_t unit = std::max<uint64_t>(alignment, kHeaderBytes);
  uint64_t total = (size + unit + unit - 1) / unit * unit;
  char *base = static_cast<char *>(std::aligned_alloc(unit, total));
  if (!base)
    return nullptr;
  return record(base, base + unit, size);
}

void _mlir_memref_to_llvm_free(void *ptr) {
  if (!ptr)
    return;
  Header header;
  std::memcpy(&header, static_cast<char *>(ptr) - kHeaderBytes, sizeof header);
  live.fetch_sub(static_cast<int64_t>(header.size), std::memory_order_relaxed);
  liveBuffers.fetch_sub(1, std::memory_order_relaxed);
  if (Trace &t = trace(); t.enabled) {
    std::lock_guard<std::mutex> lock(t.mutex);
    t.live.erase(ptr);
  }
  std::free(header.base);
}

void autopar_rt_step_phase(int32_t phase) {
  int64_t now = live.load(), buffers = liveBuffers.load();
  if (Trace &t = trace(); t.enabled) {
    std::lock_guard<std::mutex> lock(t.mutex);
    if (phase == 0) {
      t.forwardBegan = t.allocations;
    } else if (!t.printed) {
      t.printed = true;
      std::map<uint64_t, uint64_t> kept;
      for (auto &[ptr, entry] : t.live)
        if (entry.first >= t.forwardBegan)
          kept[entry.first - t.forwardBegan] = entry.second;
      for (auto [index, size] : kept)
        std::fprintf(stderr,
                     "autopar-run: kept for the backward: the forward's "
                     "allocation %llu, %llu B\n",
                     static_cast<unsigned long long>(index),
                     static_cast<unsigned long long>(size));
    }
  }
  if (phase == 0) {
    forwardBegan.store(now);
    buffersAtForward.store(buffers);
    return;
  }
  int64_t began = forwardBegan.load();
  if (began < 0)
    return;
  if (now - began > keptForBackward.load())
    buffersKeptForBackward.store(buffers - buffersAtForward.load());
  raise(keptForBackward, now - began);
  backwards.fetch_add(1);
}

} // extern "C"
