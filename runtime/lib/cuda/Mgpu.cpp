//===- Mgpu.cpp - MLIR's GPU runtime ABI on the rank's stream -------------===//
//
// See MgpuAbi.h for what each function does differently from MLIR's own
// wrappers, and why.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/cuda/MgpuAbi.h"

#include "CudaDevice.h"

#include "autopar/runtime/Error.h"

#include <exception>
#include <mutex>
#include <unordered_set>

using namespace autopar::runtime::cuda;

namespace {

/// Runs \p body on the device; an error ends the run, naming \p entry
/// (nothing can be thrown through generated code).
template <typename Fn> auto guarded(const char *entry, Fn body) {
  try {
    return body(deviceFor(entry));
  } catch (const std::exception &error) {
    entryFatal(entry, error.what());
  }
}

/// Events are tokens: with one stream they order nothing.
char eventToken;

/// Managed (host-shared) allocations, which bypass the caching allocator.
std::unordered_set<void *> &managedBlocks() {
  static std::unordered_set<void *> blocks;
  return blocks;
}

} // namespace

extern "C" {

CUmodule mgpuModuleLoad(void *data, size_t /*size*/) {
  // A load error is kept for checkProgramLoaded: this runs in the program
  // library's constructors, inside dlopen.
  return guarded("mgpuModuleLoad", [&](CudaDevice &device) {
    return device.modules().load(data, /*jit=*/false);
  });
}

CUmodule mgpuModuleLoadJIT(void *data, int /*optLevel*/) {
  return guarded("mgpuModuleLoadJIT", [&](CudaDevice &device) {
    return device.modules().load(data, /*jit=*/true);
  });
}

void mgpuModuleUnload(CUmodule) {
  // Modules stay loaded until the device goes (ModuleCache).
}

CUfunction mgpuModuleGetFunction(CUmodule module, const char *name) {
  return guarded("mgpuModuleGetFunction", [&](CudaDevice &device) {
    return device.modules().function(module, name);
  });
}

void mgpuLaunchKernel(CUfunction function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t smem, CUstream, void **params,
                      void **extra, size_t) {
  guarded("mgpuLaunchKernel", [&](CudaDevice &device) {
    device.modules().allowSharedMemory(function, smem);
    AUTOPAR_CU(cuLaunchKernel, function, static_cast<unsigned>(gridX),
               static_cast<unsigned>(gridY), static_cast<unsigned>(gridZ),
               static_cast<unsigned>(blockX), static_cast<unsigned>(blockY),
               static_cast<unsigned>(blockZ), static_cast<unsigned>(smem),
               device.stream(), params, extra);
  });
}

CUstream mgpuStreamCreate() {
  return guarded("mgpuStreamCreate",
                 [](CudaDevice &device) { return device.stream(); });
}

void mgpuStreamDestroy(CUstream) {}

void mgpuStreamSynchronize(CUstream) {}

void mgpuStreamWaitEvent(CUstream, CUevent) {}

CUevent mgpuEventCreate() { return reinterpret_cast<CUevent>(&eventToken); }

void mgpuEventDestroy(CUevent) {}

void mgpuEventSynchronize(CUevent) {
  guarded("mgpuEventSynchronize",
          [](CudaDevice &device) { device.synchronize(); });
}

void mgpuEventRecord(CUevent, CUstream) {}

void *mgpuMemAlloc(uint64_t sizeBytes, CUstream, bool isHostShared) {
  return guarded("mgpuMemAlloc", [&](CudaDevice &device) -> void * {
    if (!isHostShared)
      return device.allocator().allocate(sizeBytes, "a buffer of the program");
    CUdeviceptr pointer = 0;
    AUTOPAR_CU(cuMemAllocManaged, &pointer, sizeBytes ? sizeBytes : 1,
               CU_MEM_ATTACH_GLOBAL);
    managedBlocks().insert(reinterpret_cast<void *>(pointer));
    return reinterpret_cast<void *>(pointer);
  });
}

void mgpuMemFree(void *ptr, CUstream) {
  if (!ptr)
    return;
  guarded("mgpuMemFree", [&](CudaDevice &device) {
    if (managedBlocks().erase(ptr)) {
      // Managed memory goes back at once: wait until no kernel uses it.
      device.synchronize();
      AUTOPAR_CU(cuMemFree, reinterpret_cast<CUdeviceptr>(ptr));
      return;
    }
    device.allocator().free(ptr);
  });
}

void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, CUstream) {
  guarded("mgpuMemcpy", [&](CudaDevice &device) {
    if (sizeBytes)
      AUTOPAR_CU(cuMemcpyAsync, reinterpret_cast<CUdeviceptr>(dst),
                 reinterpret_cast<CUdeviceptr>(src), sizeBytes,
                 device.stream());
  });
}

void mgpuMemset32(void *dst, unsigned int value, size_t count, CUstream) {
  guarded("mgpuMemset32", [&](CudaDevice &device) {
    AUTOPAR_CU(cuMemsetD32Async, reinterpret_cast<CUdeviceptr>(dst), value,
               count, device.stream());
  });
}

void mgpuMemset16(void *dst, unsigned short value, size_t count, CUstream) {
  guarded("mgpuMemset16", [&](CudaDevice &device) {
    AUTOPAR_CU(cuMemsetD16Async, reinterpret_cast<CUdeviceptr>(dst), value,
               count, device.stream());
  });
}

void mgpuSetDefaultDevice(int32_t ordinal) {
  guarded("mgpuSetDefaultDevice", [&](CudaDevice &device) {
    if (ordinal != device.ordinal())
      throw autopar::runtime::Error("the program asks for GPU " +
                                    std::to_string(ordinal) +
                                    ", but autopar-run gave this rank GPU " +
                                    std::to_string(device.ordinal()) +
                                    " (GPUs are chosen by local rank)");
  });
}

} // extern "C"
