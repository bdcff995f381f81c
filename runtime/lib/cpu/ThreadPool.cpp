//===- ThreadPool.cpp - Threads the CPU kernels share ---------------------===//
//
// A fixed set of workers parked on a condition variable. One parallelFor at
// a time: the kernels are called from the program's one thread, and a
// parallelFor from inside a body runs inline.
//
//===----------------------------------------------------------------------===//

#include "ThreadPool.h"

#include "autopar/runtime/CpuBlas.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace autopar::runtime {
namespace cpu {
namespace {

/// Below this many floats touched in all, a loop runs on the caller: waking
/// the workers costs a few microseconds.
constexpr int64_t MinParallelWork = 32 * 1024;

class Pool {
public:
  explicit Pool(int threads) {
    for (int i = 1; i < threads; ++i)
      workers.emplace_back([this, i] { work(i); });
  }

  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    for (std::thread &t : workers)
      t.join();
  }

  int size() const { return static_cast<int>(workers.size()) + 1; }

  void run(int64_t count, const std::function<void(int64_t, int64_t)> &body) {
    int parts = static_cast<int>(std::min<int64_t>(size(), count));
    {
      std::lock_guard<std::mutex> lock(mutex);
      job = &body;
      jobCount = count;
      jobParts = parts;
      pending = parts - 1;
      ++generation;
    }
    wake.notify_all();
    inBody = true;
    runPart(0, count, parts, body);
    inBody = false;
    std::unique_lock<std::mutex> lock(mutex);
    done.wait(lock, [&] { return pending == 0; });
    job = nullptr;
  }

  /// True on a thread running a body (a nested parallelFor runs inline).
  static thread_local bool inBody;

private:
  static void runPart(int part, int64_t count, int parts,
                      const std::function<void(int64_t, int64_t)> &body) {
    int64_t begin = count * part / parts, end = count * (part + 1) / parts;
    if (begin < end)
      body(begin, end);
  }

  void work(int index) {
    inBody = true;
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int64_t, int64_t)> *body;
      int64_t count;
      int parts;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return stopping || generation != seen; });
        if (stopping)
          return;
        seen = generation;
        body = job;
        count = jobCount;
        parts = jobParts;
      }
      if (index >= parts)
        continue;
      runPart(index, count, parts, *body);
      std::lock_guard<std::mutex> lock(mutex);
      if (--pending == 0)
        done.notify_one();
    }
  }

  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable wake, done;
  const std::function<void(int64_t, int64_t)> *job = nullptr;
  int64_t jobCount = 0;
  int jobParts = 0;
  int pending = 0;
  uint64_t generation = 0;
  bool stopping = false;
};

thread_local bool Pool::inBody = false;

std::mutex poolMutex;
std::unique_ptr<Pool> pool;
std::atomic<int> requestedThreads{1};

/// The pool for the current thread count, made on first use.
Pool *currentPool() {
  int threads = requestedThreads.load(std::memory_order_relaxed);
  if (threads <= 1)
    return nullptr;
  std::lock_guard<std::mutex> lock(poolMutex);
  if (!pool || pool->size() != threads)
    pool = std::make_unique<Pool>(threads);
  return pool.get();
}

} // namespace

void parallelFor(int64_t count, int64_t costPerIndex,
                 const std::function<void(int64_t, int64_t)> &body) {
  if (count <= 0)
    return;
  Pool *p = Pool::inBody || count < 2 ||
                    count * std::max<int64_t>(costPerIndex, 1) < MinParallelWork
                ? nullptr
                : currentPool();
  if (!p) {
    body(0, count);
    return;
  }
  p->run(count, body);
}

} // namespace cpu

void setKernelThreads(int threads) {
  cpu::requestedThreads.store(std::max(1, threads), std::memory_order_relaxed);
}

int kernelThreads() {
  return cpu::requestedThreads.load(std::memory_order_relaxed);
}

} // namespace autopar::runtime
