//===- CudaDevice.h - This rank's GPU: context, stream, memory --*- C++ -*-===//
//
// One per process: the GPU a rank uses (its local rank modulo the node's
// GPUs), the device's primary context (current on the main thread, and
// shared with the CUDA runtime API that cuBLASLt and NCCL use inside), the
// one compute stream on which everything of the rank is ordered, and the
// caching allocator behind mgpuMemAlloc.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CUDA_CUDADEVICE_H
#define AUTOPAR_RUNTIME_CUDA_CUDADEVICE_H

#include "Driver.h"
#include "ModuleCache.h"

#include "autopar/runtime/DeviceBackend.h"
#include "autopar/runtime/MemorySpace.h"
#include "autopar/runtime/cuda/CachingAllocator.h"

#include <cublasLt.h>

#include <memory>
#include <string>

namespace autopar::runtime {
class Watchdog;
} // namespace autopar::runtime

namespace autopar::runtime::cuda {

/// Work queued on the stream by someone other than the program (the NCCL
/// communicator), which the device consults while it waits for the stream.
class StreamObserver {
public:
  virtual ~StreamObserver() = default;
  /// The queued operation the wait is likely for ("all_reduce on axis tp
  /// (NCCL)"), or empty when nothing of the observer's is pending.
  virtual std::string pendingOperation() = 0;
  /// Throws Error for an error detected while the stream runs (an NCCL peer
  /// that failed).
  virtual void checkAsyncErrors() = 0;
  /// The watchdog the wait runs under (may be null).
  virtual Watchdog *watchdog() = 0;
};

class CudaDevice : public MemorySpace {
public:
  /// Loads the driver, picks the rank's GPU, checks it against the target
  /// architecture, and sets up context, stream and cuBLASLt. Throws Error.
  static std::unique_ptr<CudaDevice> open(const DeviceBackendConfig &config);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice &) = delete;
  CudaDevice &operator=(const CudaDevice &) = delete;

  /// The open device, or null.
  static CudaDevice *current();

  CUstream stream() const { return computeStream; }
  /// The stream collectives run on, ordered against the compute stream by
  /// events (NcclCommunicator).
  CUstream communicationStream() const { return commStream; }
  int ordinal() const { return deviceOrdinal; }
  const CUuuid &uuid() const { return deviceUuid; }
  /// "NVIDIA H100 80GB HBM3 (GPU 0 of 8, sm_90, 79.1 GiB)".
  std::string describe() const;
  CachingAllocator &allocator() { return *memory; }
  /// cuBLASLt, set up by the first GEMM (a program without GEMMs never
  /// pays for it).
  cublasLtHandle_t blas();
  ModuleCache &modules() { return *moduleCache; }
  /// Scratch for cuBLASLt, allocated once.
  void *gemmWorkspace(size_t &bytes);

  /// Consulted while waiting for the stream (null: none).
  void setObserver(StreamObserver *observer) { streamObserver = observer; }

  // MemorySpace: device memory, copies on the compute stream.
  bool isHost() const override { return false; }
  void *allocate(size_t bytes) override;
  void release(void *data) override;
  void copy2D(void *dst, int64_t dstPitch, const void *src, int64_t srcPitch,
              size_t width, size_t rows) const override;
  void copyToHost(void *host, const void *from, size_t bytes) override;
  void copyFromHost(void *to, const void *host, size_t bytes) override;
  /// Waits until the stream is idle: polls, so that the NCCL observer can
  /// report a failed peer and the watchdog names a pending collective.
  /// Throws Error for a fault of queued work.
  void synchronize() override;

private:
  CudaDevice() = default;
  [[noreturn]] void streamFailed(CUresult result) const;

  int deviceOrdinal = 0, deviceCount = 0;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream computeStream = nullptr;
  CUstream commStream = nullptr;
  CUuuid deviceUuid{};
  std::string name;
  int major = 0, minor = 0;
  size_t totalMemory = 0;
  cublasLtHandle_t blasHandle = nullptr;
  class DriverMemory;
  std::unique_ptr<DriverMemory> driverMemory;
  std::unique_ptr<CachingAllocator> memory;
  std::unique_ptr<ModuleCache> moduleCache;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  StreamObserver *streamObserver = nullptr;
};

/// Reports an error inside an mgpu* or GEMM entry point, which generated
/// code calls and nothing can be thrown through: "autopar-run: error: rank
/// R: <entry>: <message>", ending every rank (fatalError).
[[noreturn]] void entryFatal(const char *entry, const std::string &message);

/// The open device, or entryFatal naming \p entry if there is none.
CudaDevice &deviceFor(const char *entry);

} // namespace autopar::runtime::cuda

#endif // AUTOPAR_RUNTIME_CUDA_CUDADEVICE_H
