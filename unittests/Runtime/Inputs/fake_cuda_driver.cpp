//===- fake_cuda_driver.cpp - A libcuda.so.1 without a GPU, for tests -----===//
//
// Built as libcuda.so.1 in a directory that tests put on LD_LIBRARY_PATH, so
// that libautopar_cuda.so runs on a machine without an NVIDIA driver:
// "device" memory is host memory, every operation completes at once, and
// a "kernel" is a host function. It serves what the CUDA runtime's own code
// calls (Driver.h), not cuBLASLt or NCCL, which need the real driver.
//
// Behaviour is steered by environment variables:
//   FAKE_CUDA_DEVICES=N     N GPUs (default 1), UUIDs differing by ordinal
//   FAKE_CUDA_SM=XY         compute capability X.Y (default 90)
//   FAKE_CUDA_NO_DEVICE=1   cuInit fails with CUDA_ERROR_NO_DEVICE
//   FAKE_CUDA_MEMORY=BYTES  device memory (default 1 GiB)
//   FAKE_CUDA_FAULT=1       the stream reports an illegal address
//
// A module image is a FakeModule (below): a magic string and a table of
// host functions standing for kernels; anything else is an invalid image.
//
//===----------------------------------------------------------------------===//

#include <cuda.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

namespace {

/// What a test stage embeds as its "cubin".
struct FakeKernel {
  const char *name;
  void (*run)(void **params);
};
struct FakeModule {
  char magic[16]; // "fake-cubin"
  const FakeKernel *kernels;
};

size_t envNumber(const char *name, size_t fallback) {
  const char *text = std::getenv(name);
  return text && *text ? std::strtoull(text, nullptr, 10) : fallback;
}

std::map<void *, size_t> &blocks() {
  static std::map<void *, size_t> live;
  return live;
}
size_t allocated = 0;
char token; // Handles of contexts, streams and events.

/// The errors the fake reports, with the driver's names and texts.
struct ErrorText {
  CUresult code;
  const char *name, *text;
};
constexpr ErrorText Errors[] = {
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE",
     "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE",
     "device kernel image is invalid"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
};

const ErrorText &errorText(CUresult code) {
  static const ErrorText unknown{CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN",
                                 "fake driver error"};
  for (const ErrorText &error : Errors)
    if (error.code == code)
      return error;
  return unknown;
}

CUresult fake_cuGetErrorName(CUresult error, const char **name) {
  *name = errorText(error).name;
  return CUDA_SUCCESS;
}
CUresult fake_cuGetErrorString(CUresult error, const char **text) {
  *text = errorText(error).text;
  return CUDA_SUCCESS;
}
CUresult fake_cuInit(unsigned) {
  return envNumber("FAKE_CUDA_NO_DEVICE", 0) ? CUDA_ERROR_NO_DEVICE
                                             : CUDA_SUCCESS;
}
CUresult fake_cuDriverGetVersion(int *version) {
  *version = CUDA_VERSION;
  return CUDA_SUCCESS;
}
CUresult fake_cuDeviceGetCount(int *count) {
  *count = static_cast<int>(envNumber("FAKE_CUDA_DEVICES", 1));
  return CUDA_SUCCESS;
}
CUresult fake_cuDeviceGet(CUdevice *device, int ordinal) {
  *device = ordinal;
  return CUDA_SUCCESS;
}
CUresult fake_cuDeviceGetName(char *name, int length, CUdevice) {
  std::strncpy(name, "Fake GPU", static_cast<size_t>(length));
  return CUDA_SUCCESS;
}
CUresult fake_cuDeviceGetAttribute(int *value, CUdevice_attribute attribute,
                                   CUdevice) {
  int sm = static_cast<int>(envNumber("FAKE_CUDA_SM", 90));
  *value = attribute == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR   ? sm / 10
           : attribute == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR ? sm % 10
                                                                       : 0;
  return CUDA_SUCCESS;
}
CUresult fake_cuDeviceGetUuid(CUuuid *uuid, CUdevice device) {
  std::memset(uuid, 0, sizeof(*uuid));
  uuid->bytes[0] = static_cast<char>(device + 1);
  return CUDA_SUCCESS;
}
CUresult fake_cuDeviceGetPCIBusId(char *id, int length, CUdevice device) {
  std::snprintf(id, static_cast<size_t>(length), "0000:%02x:00.0", device);
  return CUDA_SUCCESS;
}
CUresult fake_cuDeviceTotalMem(size_t *bytes, CUdevice) {
  *bytes = envNumber("FAKE_CUDA_MEMORY", size_t(1) << 30);
  return CUDA_SUCCESS;
}
CUresult fake_cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice) {
  *context = reinterpret_cast<CUcontext>(&token);
  return CUDA_SUCCESS;
}
CUresult fake_cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult fake_cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult fake_cuStreamCreate(CUstream *stream, unsigned) {
  *stream = reinterpret_cast<CUstream>(&token);
  return CUDA_SUCCESS;
}
CUresult fake_cuStreamDestroy(CUstream) { return CUDA_SUCCESS; }
// Everything runs in call order on the host: there is nothing to wait for.
CUresult fake_cuStreamWaitEvent(CUstream, CUevent, unsigned) {
  return CUDA_SUCCESS;
}
CUresult fake_cuStreamQuery(CUstream) {
  return envNumber("FAKE_CUDA_FAULT", 0) ? CUDA_ERROR_ILLEGAL_ADDRESS
                                         : CUDA_SUCCESS;
}
CUresult fake_cuStreamSynchronize(CUstream stream) {
  return fake_cuStreamQuery(stream);
}
CUresult fake_cuEventCreate(CUevent *event, unsigned) {
  *event = reinterpret_cast<CUevent>(&token);
  return CUDA_SUCCESS;
}
CUresult fake_cuEventDestroy(CUevent) { return CUDA_SUCCESS; }
CUresult fake_cuEventRecord(CUevent, CUstream) { return CUDA_SUCCESS; }
CUresult fake_cuEventQuery(CUevent) { return CUDA_SUCCESS; }
CUresult fake_cuEventSynchronize(CUevent) { return CUDA_SUCCESS; }
CUresult fake_cuEventElapsedTime(float *ms, CUevent, CUevent) {
  *ms = 0;
  return CUDA_SUCCESS;
}
CUresult fake_cuMemAlloc(CUdeviceptr *pointer, size_t bytes) {
  if (allocated + bytes > envNumber("FAKE_CUDA_MEMORY", size_t(1) << 30))
    return CUDA_ERROR_OUT_OF_MEMORY;
  void *block = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  // Not zeroed, as cuMemAlloc's is not: the runtime must clear what it
  // promises to be zero.
  std::memset(block, 0xA5, (bytes + 255) / 256 * 256);
  blocks()[block] = bytes;
  allocated += bytes;
  *pointer = reinterpret_cast<CUdeviceptr>(block);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemAllocManaged(CUdeviceptr *pointer, size_t bytes, unsigned) {
  return fake_cuMemAlloc(pointer, bytes);
}
CUresult fake_cuMemFree(CUdeviceptr pointer) {
  void *block = reinterpret_cast<void *>(pointer);
  auto it = blocks().find(block);
  if (it == blocks().end())
    return CUDA_ERROR_INVALID_VALUE;
  allocated -= it->second;
  blocks().erase(it);
  std::free(block);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemGetInfo(size_t *free, size_t *total) {
  *total = envNumber("FAKE_CUDA_MEMORY", size_t(1) << 30);
  *free = *total - allocated;
  return CUDA_SUCCESS;
}
CUresult fake_cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                            CUstream) {
  std::memmove(reinterpret_cast<void *>(dst), reinterpret_cast<void *>(src),
               bytes);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes,
                                CUstream) {
  std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes,
                                CUstream) {
  std::memcpy(dst, reinterpret_cast<void *>(src), bytes);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemcpy2DAsync(const CUDA_MEMCPY2D *copy, CUstream) {
  if (copy->srcPitch < copy->WidthInBytes ||
      copy->dstPitch < copy->WidthInBytes)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t row = 0; row < copy->Height; ++row)
    std::memcpy(
        reinterpret_cast<char *>(copy->dstDevice) + row * copy->dstPitch,
        reinterpret_cast<const char *>(copy->srcDevice) + row * copy->srcPitch,
        copy->WidthInBytes);
  return CUDA_SUCCESS;
}
template <typename T> CUresult fill(CUdeviceptr dst, T value, size_t count) {
  T *to = reinterpret_cast<T *>(dst);
  for (size_t i = 0; i < count; ++i)
    to[i] = value;
  return CUDA_SUCCESS;
}
CUresult fake_cuMemsetD8Async(CUdeviceptr dst, unsigned char value,
                              size_t count, CUstream) {
  return fill(dst, value, count);
}
CUresult fake_cuMemsetD2D8Async(CUdeviceptr dst, size_t pitch,
                                unsigned char value, size_t width,
                                size_t height, CUstream) {
  for (size_t row = 0; row < height; ++row)
    fill(dst + row * pitch, value, width);
  return CUDA_SUCCESS;
}
CUresult fake_cuMemsetD16Async(CUdeviceptr dst, unsigned short value,
                               size_t count, CUstream) {
  return fill(dst, value, count);
}
CUresult fake_cuMemsetD32Async(CUdeviceptr dst, unsigned value, size_t count,
                               CUstream) {
  return fill(dst, value, count);
}
CUresult fake_cuModuleLoadData(CUmodule *module, const void *image) {
  const FakeModule *fake = static_cast<const FakeModule *>(image);
  if (std::strcmp(fake->magic, "fake-cubin") != 0)
    return CUDA_ERROR_INVALID_IMAGE;
  *module = reinterpret_cast<CUmodule>(const_cast<FakeModule *>(fake));
  return CUDA_SUCCESS;
}
CUresult fake_cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned,
                                 CUjit_option *, void **) {
  return fake_cuModuleLoadData(module, image);
}
CUresult fake_cuModuleUnload(CUmodule) { return CUDA_SUCCESS; }
CUresult fake_cuModuleGetFunction(CUfunction *function, CUmodule module,
                                  const char *name) {
  const FakeModule *fake = reinterpret_cast<const FakeModule *>(module);
  for (const FakeKernel *k = fake->kernels; k->name; ++k)
    if (std::strcmp(k->name, name) == 0) {
      *function = reinterpret_cast<CUfunction>(const_cast<FakeKernel *>(k));
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}
CUresult fake_cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) {
  return CUDA_SUCCESS;
}
CUresult fake_cuLaunchKernel(CUfunction function, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, unsigned, CUstream,
                             void **params, void **) {
  reinterpret_cast<const FakeKernel *>(function)->run(params);
  return CUDA_SUCCESS;
}

const std::map<std::string, void *> &functions() {
#define FAKE(name)                                                             \
  { #name, reinterpret_cast < void *>(&fake_##name) }
  static const std::map<std::string, void *> table = {
      FAKE(cuGetErrorName),
      FAKE(cuGetErrorString),
      FAKE(cuInit),
      FAKE(cuDriverGetVersion),
      FAKE(cuDeviceGetCount),
      FAKE(cuDeviceGet),
      FAKE(cuDeviceGetName),
      FAKE(cuDeviceGetAttribute),
      FAKE(cuDeviceGetUuid),
      FAKE(cuDeviceGetPCIBusId),
      FAKE(cuDeviceTotalMem),
      FAKE(cuDevicePrimaryCtxRetain),
      FAKE(cuDevicePrimaryCtxRelease),
      FAKE(cuCtxSetCurrent),
      FAKE(cuStreamCreate),
      FAKE(cuStreamDestroy),
      FAKE(cuStreamQuery),
      FAKE(cuStreamSynchronize),
      FAKE(cuStreamWaitEvent),
      FAKE(cuEventCreate),
      FAKE(cuEventDestroy),
      FAKE(cuEventRecord),
      FAKE(cuEventQuery),
      FAKE(cuEventSynchronize),
      FAKE(cuEventElapsedTime),
      FAKE(cuMemAlloc),
      FAKE(cuMemAllocManaged),
      FAKE(cuMemFree),
      FAKE(cuMemGetInfo),
      FAKE(cuMemcpyAsync),
      FAKE(cuMemcpyHtoDAsync),
      FAKE(cuMemcpyDtoHAsync),
      FAKE(cuMemcpy2DAsync),
      FAKE(cuMemsetD8Async),
      FAKE(cuMemsetD2D8Async),
      FAKE(cuMemsetD16Async),
      FAKE(cuMemsetD32Async),
      FAKE(cuModuleLoadData),
      FAKE(cuModuleLoadDataEx),
      FAKE(cuModuleUnload),
      FAKE(cuModuleGetFunction),
      FAKE(cuFuncSetAttribute),
      FAKE(cuLaunchKernel),
  };
#undef FAKE
  return table;
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) CUresult
cuGetProcAddress_v2(const char *symbol, void **pfn, int, cuuint64_t,
                    CUdriverProcAddressQueryResult *status) {
  auto it = functions().find(symbol);
  *pfn = it == functions().end() ? nullptr : it->second;
  if (status)
    *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS
                   : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *pfn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

__attribute__((visibility("default"))) CUresult
cuDriverGetVersion(int *version) {
  return fake_cuDriverGetVersion(version);
}

} // extern "C"
