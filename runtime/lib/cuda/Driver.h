//===- Driver.h - The CUDA driver API, loaded at run time -------*- C++ -*-===//
//
// libautopar_cuda.so does not link libcuda: it loads libcuda.so.1 with
// dlopen and resolves each entry point with cuGetProcAddress, at the version
// of the CUDA headers it was built with. So the library loads, and fails
// with a clear message, on a machine without an NVIDIA driver (a login node,
// CI), instead of failing in the dynamic loader.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_DRIVER_H
#define AUTOPAR_RUNTIME_CUDA_DRIVER_H

#include <cuda.h>

#include <string>

namespace autopar::runtime::cuda {

/// Every driver function the runtime calls. cuda.h maps most names to
/// versioned symbols (cuMemAlloc -> cuMemAlloc_v2); the members follow, so
/// that driver().cuMemAlloc(...) calls the version the headers declare.
#define AUTOPAR_CUDA_DRIVER_FUNCTIONS(X)                                       \
  X(cuGetErrorName)                                                            \
  X(cuGetErrorString)                                                          \
  X(cuInit)                                                                    \
  X(cuDriverGetVersion)                                                        \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetName)                                                           \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDeviceGetUuid)                                                           \
  X(cuDeviceGetPCIBusId)                                                       \
  X(cuDeviceTotalMem)                                                          \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuDevicePrimaryCtxRelease)                                                 \
  X(cuCtxSetCurrent)                                                           \
  X(cuStreamCreate)                                                            \
  X(cuStreamDestroy)                                                           \
  X(cuStreamQuery)                                                             \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamWaitEvent)                                                         \
  X(cuEventCreate)                                                             \
  X(cuEventDestroy)                                                            \
  X(cuEventRecord)                                                             \
  X(cuEventQuery)                                                              \
  X(cuEventSynchronize)                                                        \
  X(cuEventElapsedTime)                                                        \
  X(cuMemAlloc)                                                                \
  X(cuMemAllocManaged)                                                         \
  X(cuMemFree)                                                                 \
  X(cuMemGetInfo)                                                              \
  X(cuMemcpyAsync)                                                             \
  X(cuMemcpyHtoDAsync)                                                         \
  X(cuMemcpyDtoHAsync)                                                         \
  X(cuMemcpy2DAsync)                                                           \
  X(cuMemsetD8Async)                                                           \
  X(cuMemsetD2D8Async)                                                         \
  X(cuMemsetD16Async)                                                          \
  X(cuMemsetD32Async)                                                          \
  X(cuModuleLoadData)                                                          \
  X(cuModuleLoadDataEx)                                                        \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncSetAttribute)                                                        \
  X(cuLaunchKernel)

struct Driver {
#define AUTOPAR_CUDA_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  AUTOPAR_CUDA_DRIVER_FUNCTIONS(AUTOPAR_CUDA_DRIVER_MEMBER)
#undef AUTOPAR_CUDA_DRIVER_MEMBER
  /// The CUDA version the driver supports, e.g. 13000.
  int version = 0;
};

/// Loads the driver once per process and resolves every function. Throws
/// Error saying what is missing: no driver ("no NVIDIA driver found
/// (libcuda.so.1): this artifact targets <arch> GPUs; ..."), a driver too
/// old for the toolkit the runtime was built with, a missing function.
/// \p arch (e.g. "sm_90", may be empty) is only for messages.
const Driver &loadDriver(const std::string &arch);

/// The loaded driver; only after loadDriver succeeded.
const Driver &driver();

/// "out of memory (CUDA_ERROR_OUT_OF_MEMORY)": cuGetErrorString's text and
/// the error's name.
std::string describeCudaError(CUresult result);

/// Throws Error("<call> failed: <describeCudaError>") unless \p result is
/// CUDA_SUCCESS.
void checkCuda(CUresult result, const char *call);

} // namespace autopar::runtime::cuda

/// Calls driver function \p fn and checks its result, naming it in the error.
#define AUTOPAR_CU(fn, ...)                                                    \
  ::autopar::runtime::cuda::checkCuda(                                         \
      ::autopar::runtime::cuda::driver().fn(__VA_ARGS__), #fn)

#endif // AUTOPAR_RUNTIME_CUDA_DRIVER_H
