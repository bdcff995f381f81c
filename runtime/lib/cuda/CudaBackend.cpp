//===- CudaBackend.cpp - The DeviceBackend of libautopar_cuda.so ----------===//
//
// What autopar-run gets from autopar_cuda_create_backend: the rank's
// CudaDevice, and the choice of communicator for the program's collectives:
//
// - NCCL, when every rank has a GPU of its own;
// - MPI with host staging (StagingCommunicator) when two ranks share a GPU
//   (more ranks on a node than GPUs; NCCL refuses that), when
//   AUTOPAR_COLLECTIVES=mpi, or for a world of one (no peers: the
//   "collectives" are copies);
// - AUTOPAR_COLLECTIVES=nccl insists on NCCL (an error if GPUs are shared).
//
//===----------------------------------------------------------------------===//

#include "CudaDevice.h"
#include "NcclCommunicator.h"

#include "autopar/runtime/CpuKernels.h" // AUTOPAR_KERNEL_EXPORT
#include "autopar/runtime/DeviceBackend.h"
#include "autopar/runtime/Error.h"
#include "autopar/runtime/StagingCommunicator.h"

#include <cstdlib>
#include <cstring>

using namespace autopar::runtime;
using namespace autopar::runtime::cuda;

namespace {

enum class CollectivesChoice { Auto, Nccl, Mpi };

/// AUTOPAR_COLLECTIVES: "nccl", "mpi", or unset / "auto".
CollectivesChoice collectivesChoice() {
  const char *value = std::getenv("AUTOPAR_COLLECTIVES");
  if (!value || !*value || std::strcmp(value, "auto") == 0)
    return CollectivesChoice::Auto;
  if (std::strcmp(value, "nccl") == 0)
    return CollectivesChoice::Nccl;
  if (std::strcmp(value, "mpi") == 0)
    return CollectivesChoice::Mpi;
  throw Error(std::string("AUTOPAR_COLLECTIVES='") + value +
              "': expected 'nccl', 'mpi' or 'auto'");
}

/// What each rank brings to the choice of communicator.
struct RankGpu {
  CUuuid uuid;
  int32_t wantsMpi;
};

class CudaBackend : public DeviceBackend {
public:
  explicit CudaBackend(const DeviceBackendConfig &config)
      : worldSize(config.worldSize), choice(collectivesChoice()),
        device(CudaDevice::open(config)) {}

  std::string describe() const override { return device->describe(); }

  void *allocate(size_t bytes, const std::string &what) override {
    void *data = device->allocator().allocate(bytes, what, /*exact=*/true);
    if (bytes)
      AUTOPAR_CU(cuMemsetD8Async, reinterpret_cast<CUdeviceptr>(data), 0, bytes,
                 device->stream());
    return data;
  }
  void free(void *data) override { device->allocator().free(data); }
  void copyToDevice(void *to, const void *host, size_t bytes) override {
    device->copyFromHost(to, host, bytes);
  }
  void copyToHost(void *host, const void *from, size_t bytes) override {
    device->copyToHost(host, from, bytes);
  }
  void synchronize() override { device->synchronize(); }
  void checkProgramLoaded(const std::string &program) override {
    device->modules().checkLoaded(program);
  }

  std::unique_ptr<Communicator>
  createCommunicator(Communicator &host) override {
    std::string reason = reasonForStaging(host);
    if (reason.empty()) {
      std::unique_ptr<Communicator> nccl =
          NcclCommunicator::create(*device, host);
      description = ncclVersionText();
      return nccl;
    }
    description = worldSize == 1
                      ? "none between ranks (a single rank)"
                      : "MPI, staged through host memory (" + reason + ")";
    return std::make_unique<StagingCommunicator>(host, *device);
  }
  std::string describeCommunicator() const override { return description; }

  size_t peakBytesInUse() const override {
    return device->allocator().peakBytesInUse();
  }
  size_t peakBytesReserved() const override {
    return device->allocator().peakBytesReserved();
  }
  size_t deviceBytesUsed() const override {
    size_t free = 0, total = 0;
    if (driver().cuMemGetInfo(&free, &total) != CUDA_SUCCESS)
      return 0;
    return total - free;
  }

private:
  /// Why the program's collectives cannot use NCCL, or empty if they can.
  /// Collective: every rank learns every rank's GPU.
  std::string reasonForStaging(Communicator &host) {
    if (worldSize == 1 && choice != CollectivesChoice::Nccl)
      return "a single rank";
    std::vector<RankGpu> all(static_cast<size_t>(worldSize));
    RankGpu mine{device->uuid(), choice == CollectivesChoice::Mpi};
    if (worldSize > 1) {
      // Through the host communicator, as every byte between ranks goes:
      // the backend needs no MPI of its own.
      host.allGather(&mine, all.data(), sizeof(mine), DType::UInt8,
                     CommScope::World);
    } else {
      all[0] = mine;
    }
    for (size_t r = 0; r < all.size(); ++r)
      if (all[r].wantsMpi)
        return "AUTOPAR_COLLECTIVES=mpi on rank " + std::to_string(r);
    for (size_t r = 0; r < all.size(); ++r)
      for (size_t s = r + 1; s < all.size(); ++s)
        if (std::memcmp(&all[r].uuid, &all[s].uuid, sizeof(CUuuid)) == 0) {
          std::string shared = "ranks " + std::to_string(r) + " and " +
                               std::to_string(s) + " share a GPU";
          if (choice == CollectivesChoice::Nccl)
            throw Error("AUTOPAR_COLLECTIVES=nccl, but " + shared +
                        ", which NCCL does not allow; start at most one rank "
                        "per GPU, or unset AUTOPAR_COLLECTIVES");
          return shared;
        }
    return "";
  }

  int64_t worldSize;
  CollectivesChoice choice;
  std::unique_ptr<CudaDevice> device;
  std::string description = "none created";
};

} // namespace

extern "C" AUTOPAR_KERNEL_EXPORT DeviceBackend *
autopar_cuda_create_backend(const DeviceBackendConfig *config,
                            std::string *error) {
  try {
    if (config->abiVersion != DeviceBackendAbiVersion)
      throw Error("libautopar_cuda.so is from another build of autopar (ABI " +
                  std::to_string(DeviceBackendAbiVersion) +
                  ", autopar-run has " + std::to_string(config->abiVersion) +
                  "); use the library built with this autopar-run");
    return new CudaBackend(*config);
  } catch (const std::exception &failure) {
    *error = failure.what();
  } catch (...) {
    *error = "unknown failure creating the CUDA backend";
  }
  return nullptr;
}
