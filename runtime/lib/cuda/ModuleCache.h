//===- ModuleCache.h - GPU modules of the program, loaded once --*- C++ -*-===//
//
// Generated host code loads its GPU modules in the program library's
// constructors (mgpuModuleLoad, emitted by MLIR's gpu.binary translation)
// and looks each kernel up before each launch (mgpuModuleGetFunction).
// Modules are loaded once per process, keyed by the address of their
// embedded binary, and stay loaded until the device goes; kernel lookups
// are cached.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_MODULECACHE_H
#define AUTOPAR_RUNTIME_CUDA_MODULECACHE_H

#include <cuda.h>

#include <map>
#include <string>
#include <unordered_map>
#include <utility>

namespace autopar::runtime::cuda {

class ModuleCache {
public:
  /// \p target names the artifact's architecture in messages ("sm_90"), and
  /// \p device the GPU ("NVIDIA H100 (sm_90)").
  ModuleCache(std::string target, std::string device)
      : target(std::move(target)), device(std::move(device)) {}
  /// Unloads every module (the device's context must still exist).
  ~ModuleCache();

  /// The module of the binary at \p data (a cubin, or PTX when \p jit),
  /// loading it the first time. On failure returns null and keeps the error
  /// for checkLoaded: this runs in library constructors, which can neither
  /// throw nor usefully end the run.
  CUmodule load(const void *data, bool jit);
  /// Throws Error for the first module that failed to load since the last
  /// call, naming \p program.
  void checkLoaded(const std::string &program);

  /// Kernel \p name of \p module; throws Error if there is none.
  CUfunction function(CUmodule module, const char *name);
  /// Allows \p function \p bytes of dynamic shared memory (needed above
  /// 48 KiB), once per function and size.
  void allowSharedMemory(CUfunction function, int32_t bytes);

private:
  std::string target, device;
  std::unordered_map<const void *, CUmodule> modules;
  /// Keyed by the name's address (a constant of the program library) too,
  /// so that a hit costs no string comparison.
  std::map<std::pair<CUmodule, const char *>, CUfunction> functions;
  std::unordered_map<CUfunction, int32_t> sharedMemory;
  std::string loadError;
};

} // namespace autopar::runtime::cuda

#endif // AUTOPAR_RUNTIME_CUDA_MODULECACHE_H
