//===- ThreadPool.h - Threads the CPU kernels share ------------*- C++ -*-===//
//
// The runtime's own kernels (convolutions over groups and channels,
// attention over batch and heads) and the generated loops
// (autopar_cpu_parallel_for) split their outer loop over the threads
// autopar-run was given (--threads, by default the node's cores divided
// among its ranks); OpenBLAS runs its GEMMs on as many of its own threads.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_THREADPOOL_H
#define AUTOPAR_RUNTIME_CPU_THREADPOOL_H

#include <cstdint>
#include <functional>

namespace autopar::runtime::cpu {

/// Calls \p body(begin, end) on disjoint ranges that together cover
/// [0, \p count), each on one of the kernel threads (the caller's included),
/// and returns when all are done. Ranges are contiguous and in order of
/// thread, so a body that writes only its own indices gives the same result
/// with any thread count. Runs inline with one thread, or when \p count or
/// the work per index (\p costPerIndex, in floats touched) is too small to
/// pay for waking the others.
void parallelFor(int64_t count, int64_t costPerIndex,
                 const std::function<void(int64_t, int64_t)> &body);

} // namespace autopar::runtime::cpu

#endif // AUTOPAR_RUNTIME_CPU_THREADPOOL_H
