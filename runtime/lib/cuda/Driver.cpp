//===- Driver.cpp - The CUDA driver API, loaded at run time ---------------===//

#include "Driver.h"

#include "autopar/runtime/Error.h"

#include <dlfcn.h>

#include <mutex>

namespace autopar::runtime::cuda {

namespace {

Driver loaded;
bool isLoaded = false;

std::string versionText(int version) {
  return std::to_string(version / 1000) + "." +
         std::to_string(version % 1000 / 10);
}

void load(const std::string &arch) {
  std::string targets = arch.empty() ? "NVIDIA" : arch;
  dlerror();
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!library) {
    // A missing library is the common case and needs no detail; a library
    // that exists but cannot load does.
    const char *why = dlerror();
    std::string detail =
        why && std::string(why).find("No such file") == std::string::npos
            ? std::string(" (") + why + ")"
            : "";
    throw Error("no NVIDIA driver found (libcuda.so.1): this artifact "
                "targets " +
                targets +
                " GPUs; run it on a machine with an NVIDIA GPU, or compile "
                "for --cluster local:N" +
                detail);
  }
  // cuGetProcAddress hands out each function at the ABI of the headers we
  // were compiled with, whatever newer versions the driver also has.
  using GetProcAddress = CUresult (*)(const char *, void **, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult *);
  auto getProcAddress =
      reinterpret_cast<GetProcAddress>(dlsym(library, "cuGetProcAddress_v2"));
  auto driverGetVersion = reinterpret_cast<decltype(&::cuDriverGetVersion)>(
      dlsym(library, "cuDriverGetVersion"));
  if (!getProcAddress || !driverGetVersion ||
      driverGetVersion(&loaded.version) != CUDA_SUCCESS)
    throw Error("the NVIDIA driver is too old for autopar's CUDA runtime, "
                "which needs one for CUDA " +
                versionText(CUDA_VERSION) + " or newer");
  if (loaded.version < CUDA_VERSION)
    throw Error("the NVIDIA driver supports CUDA " +
                versionText(loaded.version) +
                ", but autopar's CUDA runtime was built with CUDA " +
                versionText(CUDA_VERSION) + "; update the driver");
  auto resolve = [&](const char *name, void **slot) {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult result = getProcAddress(name, slot, CUDA_VERSION,
                                     CU_GET_PROC_ADDRESS_DEFAULT, &status);
    if (result != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS ||
        !*slot)
      throw Error("the NVIDIA driver (CUDA " + versionText(loaded.version) +
                  ") lacks " + name + " at CUDA " + versionText(CUDA_VERSION));
  };
  // #name is the unversioned name cuGetProcAddress expects; the member is
  // the versioned one the headers declare.
#define AUTOPAR_CUDA_DRIVER_RESOLVE(name)                                      \
  resolve(#name, reinterpret_cast<void **>(&loaded.name));
  AUTOPAR_CUDA_DRIVER_FUNCTIONS(AUTOPAR_CUDA_DRIVER_RESOLVE)
#undef AUTOPAR_CUDA_DRIVER_RESOLVE
  isLoaded = true;
}

} // namespace

const Driver &loadDriver(const std::string &arch) {
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  if (!isLoaded)
    load(arch);
  return loaded;
}

const Driver &driver() { return loaded; }

std::string describeCudaError(CUresult result) {
  const char *text = nullptr, *name = nullptr;
  if (isLoaded) {
    loaded.cuGetErrorString(result, &text);
    loaded.cuGetErrorName(result, &name);
  }
  std::string description = text ? text : "unknown error";
  return description + " (" +
         (name ? std::string(name) : "CUresult " + std::to_string(result)) +
         ")";
}

void checkCuda(CUresult result, const char *call) {
  if (result != CUDA_SUCCESS)
    throw Error(std::string(call) + " failed: " + describeCudaError(result));
}

} // namespace autopar::runtime::cuda
