//===- CpuBlas.h - The BLAS behind the CPU kernels --------------*- C++ -*-===//
//
// OpenBLAS picks its kernels for the CPU at load time. OpenBLAS 0.3.21
// (Debian 12) does not know CPUs newer than itself, e.g. Emerald Rapids
// (family 6, model 0xCF), and then falls back to its SSE3 "Prescott" kernels,
// four to five times slower than its AVX-512 ones. The CPU kernels
// dominate run time, so autopar-run corrects that (see
// preferredOpenBlasCoreType).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPUBLAS_H
#define AUTOPAR_RUNTIME_CPUBLAS_H

#include <cstdint>
#include <optional>
#include <string>

namespace autopar::runtime {

/// The OPENBLAS_CORETYPE to run with when OpenBLAS fell back to pre-AVX2
/// kernels on a CPU with AVX2 and FMA: "SkylakeX" with AVX-512, else
/// "Haswell". std::nullopt when OpenBLAS's own choice stands. OpenBLAS reads
/// the variable only when it is loaded, so using the answer takes a fresh
/// process (autopar-run re-executes itself).
std::optional<std::string> preferredOpenBlasCoreType();

/// Sets how many threads this rank's CPU kernels use: OpenBLAS's, and the
/// runtime's own kernel threads (its convolutions, and oneDNN's GEMMs split
/// over them). \p requested (autopar-run --threads) wins; else
/// OPENBLAS_NUM_THREADS or OMP_NUM_THREADS, when set, stand (the user chose);
/// else the node's cores divided among its \p ranksOnNode ranks, at least one,
/// so that ranks sharing a node do not oversubscribe it. Returns the count.
int configureCpuThreads(std::optional<int64_t> requested, int64_t ranksOnNode);

/// The threads of the runtime's own kernels (configureCpuThreads; 1 until
/// it is called).
int kernelThreads();
void setKernelThreads(int threads);

/// Where the CPU kernels' matrix products (GEMMs with more than one row and
/// column) go: oneDNN's sgemm when the runtime is built with it (about twice
/// OpenBLAS 0.3.21's speed on CPUs with AVX-512, which Debian's OpenBLAS
/// serves with its AVX2 kernels), else OpenBLAS. Matrix-vector products stay
/// with OpenBLAS's sgemv either way.
enum class CpuGemmLibrary { OpenBlas, OneDnn };

/// The library the GEMMs use: OneDnn when built with it, unless
/// AUTOPAR_CPU_GEMM=openblas (to compare the two in one run); Error on
/// another value, or on "onednn" in a build without it.
CpuGemmLibrary cpuGemmLibrary();

/// "OpenBLAS <core>, <n> threads", or with oneDNN "oneDNN <version> GEMMs,
/// OpenBLAS <core>, <n> threads", for autopar-run's banner.
std::string describeBlas();

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_CPUBLAS_H
