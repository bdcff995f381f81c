//===- CpuBlas.cpp - The BLAS behind the CPU kernels ----------------------===//

#include "autopar/runtime/CpuBlas.h"

#include "OneDnn.h"

#include "autopar/runtime/Error.h"

#include <cblas.h>
#include <cstdio>

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace autopar::runtime {

namespace {
std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return text;
}
} // namespace

std::optional<std::string> preferredOpenBlasCoreType() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
    return std::nullopt;
  const char *name = openblas_get_corename();
  std::string core = lower(name ? name : "");
  // OpenBLAS's cores without AVX2 kernels: what it falls back to when it does
  // not recognize a CPU. Any other choice was deliberate and stands.
  const char *const fallbacks[] = {
      "prescott",    "core2",   "penryn",  "dunnington", "nehalem",
      "sandybridge", "atom",    "katmai",  "coppermine", "northwood",
      "banias",      "generic", "unknown", "barcelona",  "opteron"};
  if (std::find(std::begin(fallbacks), std::end(fallbacks), core) ==
      std::end(fallbacks))
    return std::nullopt;
  bool avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  return std::string(avx512 ? "SkylakeX" : "Haswell");
#else
  return std::nullopt;
#endif
}

int configureCpuThreads(std::optional<int64_t> requested, int64_t ranksOnNode) {
  // A bad AUTOPAR_CPU_GEMM, or one naming a library that does not load, is
  // an error here, before any kernel runs.
  if (cpuGemmLibrary() == CpuGemmLibrary::OneDnn && !cpu::oneDnnSgemm()) {
    std::string why =
        "oneDNN could not be loaded (" + cpu::oneDnnLoadFailure() + ")";
    if (std::getenv("AUTOPAR_CPU_GEMM"))
      throw Error("AUTOPAR_CPU_GEMM=onednn, but " + why);
    static bool warned = false;
    if (!warned)
      std::fprintf(stderr,
                   "autopar-run: warning: %s; the CPU GEMMs run on OpenBLAS\n",
                   why.c_str());
    warned = true;
  }
  int threads;
  if (requested)
    threads = static_cast<int>(std::max<int64_t>(1, *requested));
  else if (std::getenv("OPENBLAS_NUM_THREADS") ||
           std::getenv("OMP_NUM_THREADS"))
    threads = openblas_get_num_threads();
  else
    threads =
        std::max(1, openblas_get_num_threads() /
                        static_cast<int>(std::max<int64_t>(1, ranksOnNode)));
  openblas_set_num_threads(threads);
  // oneDNN's GEMMs run on the kernel threads, each with an OpenMP team of
  // one (StridedGemm.cpp), so they need no thread count of their own.
  setKernelThreads(threads);
  return threads;
}

CpuGemmLibrary cpuGemmLibrary() {
  static const CpuGemmLibrary library = [] {
    const char *chosen = std::getenv("AUTOPAR_CPU_GEMM");
    std::string name = lower(chosen ? chosen : "");
#if AUTOPAR_HAVE_ONEDNN
    const bool built = true;
#else
    const bool built = false;
#endif
    if (name.empty())
      return built ? CpuGemmLibrary::OneDnn : CpuGemmLibrary::OpenBlas;
    if (name == "openblas")
      return CpuGemmLibrary::OpenBlas;
    if (name == "onednn" && built)
      return CpuGemmLibrary::OneDnn;
    if (name == "onednn")
      throw Error("AUTOPAR_CPU_GEMM=onednn, but this autopar-run was built "
                  "without oneDNN (install libdnnl-dev and rebuild)");
    throw Error("AUTOPAR_CPU_GEMM expects 'onednn' or 'openblas', got '" +
                std::string(chosen) + "'");
  }();
  return library;
}

std::string describeBlas() {
  const char *name = openblas_get_corename();
  int threads = openblas_get_num_threads();
  std::string gemms;
  if (std::string version = cpu::oneDnnVersion(); !version.empty())
    gemms = "oneDNN " + version + " GEMMs, ";
  return gemms + "OpenBLAS " + std::string(name ? name : "?") + ", " +
         std::to_string(threads) + (threads == 1 ? " thread" : " threads");
}

} // namespace autopar::runtime
