//===- OneDnn.cpp - oneDNN's sgemm, loaded at run time --------------------===//
//
// See OneDnn.h.
//
//===----------------------------------------------------------------------===//

#include "OneDnn.h"

#include "autopar/runtime/CpuBlas.h"

#include <cstdlib>
#include <dlfcn.h>

// The library CMake found (a build without oneDNN never loads one).
#ifndef AUTOPAR_DNNL_LIBRARY_PATH
#define AUTOPAR_DNNL_LIBRARY_PATH "libdnnl.so"
#endif

namespace autopar::runtime::cpu {

namespace {

/// dnnl_version_t's layout (the C API's, stable across oneDNN 2 and 3).
struct DnnlVersion {
  int major, minor, patch;
  const char *hash;
  unsigned cpuRuntime, gpuRuntime;
};

struct Loaded {
  OneDnnSgemm sgemm = nullptr;
  const DnnlVersion *(*version)() = nullptr;
  void (*setThreads)(int) = nullptr;
  std::string failure;
};

const Loaded &loaded() {
  static const Loaded library = [] {
    Loaded l;
    if (cpuGemmLibrary() != CpuGemmLibrary::OneDnn)
      return l;
    // Before libgomp initialises (it comes with libdnnl): threads that
    // sleep between GEMMs leave the cores to the runtime's kernel threads.
    // A user's own setting stands.
    setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0);
    std::string tried;
    void *handle = nullptr;
    for (const char *name :
         {AUTOPAR_DNNL_LIBRARY_PATH, "libdnnl.so.3", "libdnnl.so.2"}) {
      handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (handle)
        break;
      const char *why = dlerror();
      tried += std::string(tried.empty() ? "" : "; ") + (why ? why : name);
    }
    if (!handle) {
      l.failure = tried;
      return l;
    }
    l.sgemm = reinterpret_cast<OneDnnSgemm>(dlsym(handle, "dnnl_sgemm"));
    l.version = reinterpret_cast<const DnnlVersion *(*)()>(
        dlsym(handle, "dnnl_version"));
    // libdnnl's libgomp, found through its dependencies.
    l.setThreads =
        reinterpret_cast<void (*)(int)>(dlsym(handle, "omp_set_num_threads"));
    if (!l.sgemm || !l.version) {
      l.failure = "libdnnl has no dnnl_sgemm or dnnl_version";
      l.sgemm = nullptr;
    }
    return l;
  }();
  return library;
}

} // namespace

OneDnnSgemm oneDnnSgemm() { return loaded().sgemm; }

const std::string &oneDnnLoadFailure() { return loaded().failure; }

std::string oneDnnVersion() {
  const Loaded &l = loaded();
  if (!l.sgemm)
    return "";
  const DnnlVersion *v = l.version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch);
}

void setOneDnnThreads(int threads) {
  if (const Loaded &l = loaded(); l.setThreads)
    l.setThreads(threads);
}

} // namespace autopar::runtime::cpu
