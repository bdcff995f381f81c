//===- DeviceBackend.h - A GPU, as the runtime sees it ----------*- C++ -*-===//
//
// autopar-run links no GPU library: an artifact whose manifest says
// `"target": {"kind": "cuda"}` makes it load libautopar_cuda.so (with
// RTLD_GLOBAL, so that the program library finds the mgpu* and GEMM symbols
// there) and create a DeviceBackend through the library's one factory,
// autopar_cuda_create_backend. Everything device-specific (driver, context,
// stream, allocator, NCCL) stays behind this interface.
// docs/design/gpu-backend.md is the contract.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_DEVICEBACKEND_H
#define AUTOPAR_RUNTIME_DEVICEBACKEND_H

#include "autopar/runtime/Communicator.h"
#include "autopar/runtime/Manifest.h"
#include "autopar/runtime/World.h"

#include <cstddef>
#include <memory>
#include <string>

namespace autopar::runtime {

/// Bumped whenever DeviceBackend or DeviceBackendConfig change, so that a
/// libautopar_cuda.so of another build is refused rather than misused.
constexpr int DeviceBackendAbiVersion = 1;

/// What the backend needs to know to pick and set up this rank's device.
struct DeviceBackendConfig {
  int abiVersion = DeviceBackendAbiVersion;
  int64_t worldRank = 0;
  int64_t worldSize = 1;
  NodePlacement node;
  TargetDesc target;
};

/// One rank's GPU: its memory and its one compute stream, on which the
/// program's kernels, the runtime's copies and the collectives are ordered.
/// Errors throw Error.
class DeviceBackend {
public:
  virtual ~DeviceBackend();

  /// "NVIDIA H100 80GB HBM3 (device 0 of 8, sm_90)", for the banner.
  virtual std::string describe() const = 0;

  /// Device memory for an argument, for the backend's lifetime, zeroed and at
  /// least 256-byte aligned. \p what names it in errors.
  virtual void *allocate(size_t bytes, const std::string &what) = 0;
  virtual void free(void *data) = 0;
  /// Copies on the stream, after the work queued before; \p host may be
  /// reused as soon as copyToDevice returns.
  virtual void copyToDevice(void *device, const void *host, size_t bytes) = 0;
  /// Waits for the stream, then copies.
  virtual void copyToHost(void *host, const void *device, size_t bytes) = 0;
  /// Waits until all work queued on the stream has finished, under the
  /// watchdog of the device communicator (naming a pending collective), and
  /// reports an error of a kernel or a collective as Error.
  virtual void synchronize() = 0;

  /// Throws Error if a device module of the program library just loaded (its
  /// constructors call mgpuModuleLoad) failed to load.
  virtual void checkProgramLoaded(const std::string &program) = 0;

  /// The communicator the program's collectives use, over device buffers:
  /// NCCL, or \p host (MPI) with staging copies when ranks share a GPU, when
  /// AUTOPAR_COLLECTIVES=mpi, or for a world of one. Collective over all
  /// ranks. \p host must outlive it.
  virtual std::unique_ptr<Communicator>
  createCommunicator(Communicator &host) = 0;
  /// How the communicator made by createCommunicator communicates, for the
  /// banner ("NCCL 2.28.9", "MPI, staged through host memory: ...").
  virtual std::string describeCommunicator() const = 0;

  /// The most device memory in use at once (arguments, workspace and the
  /// program's temporaries), and what the allocator held from the driver.
  virtual size_t peakBytesInUse() const = 0;
  virtual size_t peakBytesReserved() const = 0;
  /// What the driver reports in use on the device now (total minus free):
  /// every context's memory, this process's CUDA context, library
  /// workspaces and the allocator's blocks included; 0 if it cannot say.
  virtual size_t deviceBytesUsed() const = 0;
};

/// Loads libautopar_cuda.so (AUTOPAR_CUDA_RUNTIME, else lib/ beside the
/// directory of the running executable) with RTLD_NOW | RTLD_GLOBAL and
/// creates its backend. Throws Error saying what is missing: the library, the
/// driver, a GPU.
std::unique_ptr<DeviceBackend>
loadDeviceBackend(const DeviceBackendConfig &config,
                  const std::string &manifestPath);

/// The factory libautopar_cuda.so exports: a new backend, or null with
/// *error set. Never throws.
using CreateDeviceBackendFn =
    DeviceBackend *(*)(const DeviceBackendConfig *config, std::string *error);
constexpr const char *CreateDeviceBackendSymbol = "autopar_cuda_create_backend";

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_DEVICEBACKEND_H
