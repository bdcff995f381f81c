//===- DeviceBackendLoader.cpp - Load libautopar_cuda.so ------------------===//

#include "autopar/runtime/DeviceBackend.h"

#include "autopar/runtime/Error.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

namespace fs = std::filesystem;

namespace autopar::runtime {

DeviceBackend::~DeviceBackend() = default;

namespace {

constexpr const char *LibraryName = "libautopar_cuda.so";

/// AUTOPAR_CUDA_RUNTIME, else ../lib/libautopar_cuda.so from the directory
/// of the running executable (build/bin/autopar-run -> build/lib, and the
/// same in an installation).
std::string libraryPath() {
  if (const char *path = std::getenv("AUTOPAR_CUDA_RUNTIME"); path && *path)
    return path;
  std::error_code error;
  fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (error)
    return LibraryName; // The loader's search path, as a last resort.
  return (exe.parent_path().parent_path() / "lib" / LibraryName).string();
}

} // namespace

std::unique_ptr<DeviceBackend>
loadDeviceBackend(const DeviceBackendConfig &config,
                  const std::string &manifestPath) {
  std::string path = libraryPath();
  std::string why = manifestPath + " says \"target\": {\"kind\": \"" +
                    std::string(targetKindName(config.target.kind)) + "\"}";
  dlerror();
  // RTLD_GLOBAL: the program library, loaded next, resolves the mgpu* and
  // autopar_cuda_* symbols against it. RTLD_NOW: a missing symbol is an
  // error here, not a crash later.
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle) {
    const char *message = dlerror();
    throw Error("this artifact runs on NVIDIA GPUs (" + why +
                "), but the CUDA runtime cannot be loaded: " +
                (message ? message : path) +
                " (build autopar with the CUDA toolkit, AUTOPAR_ENABLE_CUDA, "
                "or point AUTOPAR_CUDA_RUNTIME at libautopar_cuda.so)");
  }
  // The library stays loaded for the life of the process: the backend's
  // code, and the mgpu* symbols of the program, live in it.
  auto create = reinterpret_cast<CreateDeviceBackendFn>(
      dlsym(handle, CreateDeviceBackendSymbol));
  if (!create)
    throw Error(path + " has no " + CreateDeviceBackendSymbol +
                ": it is not autopar's CUDA runtime");
  std::string error;
  DeviceBackend *backend = create(&config, &error);
  if (!backend)
    throw Error(error.empty() ? "the CUDA runtime failed without a message"
                              : error);
  return std::unique_ptr<DeviceBackend>(backend);
}

} // namespace autopar::runtime
