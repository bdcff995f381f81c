//===- OneDnn.h - oneDNN's sgemm, loaded at run time ------------*- C++ -*-===//
//
// The CPU GEMMs go to oneDNN's sgemm when CMake found libdnnl
// (AUTOPAR_HAVE_ONEDNN) and it loads at run time (CpuBlas.h). It is loaded
// with dlopen rather than linked because it runs on OpenMP's threads, and
// libgomp's threads spin after every parallel region unless
// OMP_WAIT_POLICY=passive is set before libgomp initialises, which a linked
// libgomp does before main: on a 2-core VM, their spinning took the cores
// from the runtime's own kernel threads (mobilenet_v3_small with 2 threads:
// 33 ms a step against 2.6 ms passive). Loading it later lets autopar-run
// set the policy first.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CPU_ONEDNN_H
#define AUTOPAR_RUNTIME_CPU_ONEDNN_H

#include <cstdint>
#include <string>

namespace autopar::runtime::cpu {

/// dnnl_sgemm: C = alpha op(A) op(B) + beta C, row-major, transa/transb 'N'
/// or 'T'; returns dnnl_success (0) or an error status.
using OneDnnSgemm = int (*)(char transa, char transb, int64_t m, int64_t n,
                            int64_t k, float alpha, const float *a, int64_t lda,
                            const float *b, int64_t ldb, float beta, float *c,
                            int64_t ldc);

/// oneDNN's sgemm when the GEMMs go to it (cpuGemmLibrary() is OneDnn),
/// loading libdnnl the first time (setting OMP_WAIT_POLICY=passive first
/// unless the user set it); null when they go to OpenBLAS or libdnnl did not
/// load (oneDnnLoadFailure() says why). Thread-safe.
OneDnnSgemm oneDnnSgemm();

/// Why libdnnl did not load, or "".
const std::string &oneDnnLoadFailure();

/// "2.6.3": the loaded oneDNN's version, or "" when none is.
std::string oneDnnVersion();

/// Sets the OpenMP threads oneDNN runs on (the calling thread's team size).
void setOneDnnThreads(int threads);

} // namespace autopar::runtime::cpu

#endif // AUTOPAR_RUNTIME_CPU_ONEDNN_H
