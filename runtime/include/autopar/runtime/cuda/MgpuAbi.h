//===- MgpuAbi.h - MLIR's GPU runtime ABI, as autopar provides it -*- C++ -*-//
//
// The functions host code lowered by MLIR 22's gpu-to-llvm and gpu.binary
// translation calls (the signatures of mlir/lib/ExecutionEngine/
// CudaRuntimeWrappers.cpp, release/22.x). libautopar_cuda.so implements them
// on the rank's one compute stream and caching allocator instead of MLIR's
// libmlir_cuda_runtime (docs/design/gpu-backend.md says why):
//
// - every stream is the compute stream: mgpuStreamCreate returns it, and
//   mgpuStreamDestroy and mgpuStreamSynchronize of it do nothing (the host
//   never reads device memory inside a step; autopar-run waits for the
//   stream at its end);
// - events order nothing on one stream: they are tokens, and
//   mgpuEventSynchronize waits for the whole stream;
// - mgpuMemAlloc/mgpuMemFree go to the caching allocator (stream-ordered
//   reuse), except host-shared (managed) memory;
// - modules are loaded once per process and kernel lookups are cached.
//
// An error ends the run with "autopar-run: error: rank R: mgpu<Name>: ...".
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_MGPUABI_H
#define AUTOPAR_RUNTIME_CUDA_MGPUABI_H

#include "autopar/runtime/CpuKernels.h" // AUTOPAR_KERNEL_EXPORT

#include <cstddef>
#include <cstdint>

// The driver's handle types, without cuda.h.
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;

extern "C" {
AUTOPAR_KERNEL_EXPORT CUmodule mgpuModuleLoad(void *data, size_t size);
AUTOPAR_KERNEL_EXPORT CUmodule mgpuModuleLoadJIT(void *data, int optLevel);
AUTOPAR_KERNEL_EXPORT void mgpuModuleUnload(CUmodule module);
AUTOPAR_KERNEL_EXPORT CUfunction mgpuModuleGetFunction(CUmodule module,
                                                       const char *name);
AUTOPAR_KERNEL_EXPORT void mgpuLaunchKernel(CUfunction function, intptr_t gridX,
                                            intptr_t gridY, intptr_t gridZ,
                                            intptr_t blockX, intptr_t blockY,
                                            intptr_t blockZ, int32_t smem,
                                            CUstream stream, void **params,
                                            void **extra, size_t paramsCount);
AUTOPAR_KERNEL_EXPORT CUstream mgpuStreamCreate();
AUTOPAR_KERNEL_EXPORT void mgpuStreamDestroy(CUstream stream);
AUTOPAR_KERNEL_EXPORT void mgpuStreamSynchronize(CUstream stream);
AUTOPAR_KERNEL_EXPORT void mgpuStreamWaitEvent(CUstream stream, CUevent event);
AUTOPAR_KERNEL_EXPORT CUevent mgpuEventCreate();
AUTOPAR_KERNEL_EXPORT void mgpuEventDestroy(CUevent event);
AUTOPAR_KERNEL_EXPORT void mgpuEventSynchronize(CUevent event);
AUTOPAR_KERNEL_EXPORT void mgpuEventRecord(CUevent event, CUstream stream);
AUTOPAR_KERNEL_EXPORT void *mgpuMemAlloc(uint64_t sizeBytes, CUstream stream,
                                         bool isHostShared);
AUTOPAR_KERNEL_EXPORT void mgpuMemFree(void *ptr, CUstream stream);
AUTOPAR_KERNEL_EXPORT void mgpuMemcpy(void *dst, void *src, size_t sizeBytes,
                                      CUstream stream);
AUTOPAR_KERNEL_EXPORT void mgpuMemset32(void *dst, unsigned int value,
                                        size_t count, CUstream stream);
AUTOPAR_KERNEL_EXPORT void mgpuMemset16(void *dst, unsigned short value,
                                        size_t count, CUstream stream);
/// The device is the runtime's choice (local rank modulo GPUs); asking for
/// another one is an error.
AUTOPAR_KERNEL_EXPORT void mgpuSetDefaultDevice(int32_t device);
} // extern "C"

#endif // AUTOPAR_RUNTIME_CUDA_MGPUABI_H
