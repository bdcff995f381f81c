//===- CudaDevice.cpp - This rank's GPU: context, stream, memory ----------===//

#include "CudaDevice.h"

#include "autopar/runtime/Error.h"
#include "autopar/runtime/Fatal.h"
#include "autopar/runtime/Watchdog.h"

#include <chrono>
#include <climits>
#include <optional>
#include <thread>

namespace autopar::runtime::cuda {

namespace {

CudaDevice *openDevice = nullptr;

/// cuBLASLt's recommended workspace on Hopper.
constexpr size_t GemmWorkspaceBytes = size_t(32) << 20;

/// "sm_90" -> {9, 0}; "sm_90a" -> {9, 0} and \p exact (arch-specific
/// features run on that GPU alone). std::nullopt if not of that form.
std::optional<std::pair<int, int>> parseArch(const std::string &arch,
                                             bool &exact) {
  if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0)
    return std::nullopt;
  std::string digits = arch.substr(3);
  exact = !digits.empty() && (digits.back() == 'a' || digits.back() == 'f');
  if (exact)
    digits.pop_back();
  if (digits.size() < 2 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  int number = std::stoi(digits);
  return std::make_pair(number / 10, number % 10);
}

/// A cubin for sm_XY runs on GPUs of major version X and minor at least Y
/// (exactly XY for arch-specific code).
void checkArchitecture(const std::string &arch, int major, int minor,
                       const std::string &gpu) {
  bool exact = false;
  std::optional<std::pair<int, int>> wanted = parseArch(arch, exact);
  if (!wanted)
    return; // Unknown notation: let the module load decide.
  bool fits = major == wanted->first &&
              (exact ? minor == wanted->second : minor >= wanted->second);
  if (!fits)
    throw Error("this artifact's GPU code targets " + arch + ", but " + gpu +
                " cannot run it; compile the model for this GPU's cluster");
}

/// Memory straight from the driver, for the caching allocator.
std::string freeMemory() {
  size_t free = 0, total = 0;
  if (driver().cuMemGetInfo(&free, &total) != CUDA_SUCCESS)
    return "an unknown amount free";
  return formatBytes(double(free)) + " free of " + formatBytes(double(total));
}

} // namespace

class CudaDevice::DriverMemory : public AllocatorBackend {
public:
  explicit DriverMemory(CUstream stream) : stream(stream) {}

  void *allocate(size_t bytes) override {
    CUdeviceptr pointer = 0;
    CUresult result = driver().cuMemAlloc(&pointer, bytes);
    if (result == CUDA_ERROR_OUT_OF_MEMORY)
      return nullptr;
    checkCuda(result, "cuMemAlloc");
    return reinterpret_cast<void *>(pointer);
  }
  void release(void *data) override {
    // Also called while the device shuts down: nothing to report then.
    driver().cuMemFree(reinterpret_cast<CUdeviceptr>(data));
  }
  void synchronize() override { AUTOPAR_CU(cuStreamSynchronize, stream); }
  std::string describeFreeMemory() override { return freeMemory(); }

private:
  CUstream stream;
};

std::unique_ptr<CudaDevice>
CudaDevice::open(const DeviceBackendConfig &config) {
  if (openDevice)
    throw Error("internal error: a second CUDA device in one process");
  const std::string &arch = config.target.arch;
  const Driver &d = loadDriver(arch);
  std::string targets = arch.empty() ? "NVIDIA" : arch;
  CUresult init = d.cuInit(0);
  if (init != CUDA_SUCCESS)
    throw Error("no usable NVIDIA GPU: cuInit failed: " +
                describeCudaError(init) + "; this artifact targets " + targets +
                " GPUs (run it where one is visible, or compile for "
                "--cluster local:N)");
  std::unique_ptr<CudaDevice> self(new CudaDevice());
  AUTOPAR_CU(cuDeviceGetCount, &self->deviceCount);
  if (self->deviceCount == 0)
    throw Error("no usable NVIDIA GPU: the driver sees none (check "
                "CUDA_VISIBLE_DEVICES); this artifact targets " +
                targets + " GPUs");
  // Ranks of a node take the node's GPUs in turn.
  self->deviceOrdinal =
      static_cast<int>(config.node.localRank % self->deviceCount);
  AUTOPAR_CU(cuDeviceGet, &self->device, self->deviceOrdinal);
  char name[256] = {0};
  AUTOPAR_CU(cuDeviceGetName, name, sizeof(name) - 1, self->device);
  self->name = name;
  AUTOPAR_CU(cuDeviceGetAttribute, &self->major,
             CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, self->device);
  AUTOPAR_CU(cuDeviceGetAttribute, &self->minor,
             CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, self->device);
  AUTOPAR_CU(cuDeviceTotalMem, &self->totalMemory, self->device);
  AUTOPAR_CU(cuDeviceGetUuid, &self->deviceUuid, self->device);
  checkArchitecture(arch, self->major, self->minor, self->describe());

  // The primary context is the one the CUDA runtime API (inside cuBLASLt
  // and NCCL) uses for this device: with it current, both APIs share it.
  AUTOPAR_CU(cuDevicePrimaryCtxRetain, &self->context, self->device);
  AUTOPAR_CU(cuCtxSetCurrent, self->context);
  AUTOPAR_CU(cuStreamCreate, &self->computeStream, CU_STREAM_NON_BLOCKING);
  AUTOPAR_CU(cuStreamCreate, &self->commStream, CU_STREAM_NON_BLOCKING);
  self->driverMemory = std::make_unique<DriverMemory>(self->computeStream);
  self->memory = std::make_unique<CachingAllocator>(*self->driverMemory);
  self->moduleCache = std::make_unique<ModuleCache>(arch, self->describe());
  openDevice = self.get();
  return self;
}

CudaDevice::~CudaDevice() {
  if (openDevice == this)
    openDevice = nullptr;
  if (computeStream)
    driver().cuStreamSynchronize(computeStream); // Errors: nothing to do.
  if (commStream)
    driver().cuStreamSynchronize(commStream);
  if (blasHandle)
    cublasLtDestroy(blasHandle);
  moduleCache.reset();
  memory.reset(); // Gives every block back, before the context goes.
  driverMemory.reset();
  if (computeStream)
    driver().cuStreamDestroy(computeStream);
  if (commStream)
    driver().cuStreamDestroy(commStream);
  if (context)
    driver().cuDevicePrimaryCtxRelease(device);
}

CudaDevice *CudaDevice::current() { return openDevice; }

std::string CudaDevice::describe() const {
  return name + " (GPU " + std::to_string(deviceOrdinal) + " of " +
         std::to_string(deviceCount) + ", sm_" + std::to_string(major) +
         std::to_string(minor) + ", " + formatBytes(double(totalMemory)) + ")";
}

cublasLtHandle_t CudaDevice::blas() {
  if (!blasHandle) {
    cublasStatus_t status = cublasLtCreate(&blasHandle);
    if (status != CUBLAS_STATUS_SUCCESS)
      throw Error(std::string("cublasLtCreate failed: ") +
                  cublasLtGetStatusString(status));
  }
  return blasHandle;
}

void *CudaDevice::gemmWorkspace(size_t &bytes) {
  if (!workspace) {
    workspace = memory->allocate(GemmWorkspaceBytes, "the cuBLASLt workspace",
                                 /*exact=*/true);
    workspaceBytes = GemmWorkspaceBytes;
  }
  bytes = workspaceBytes;
  return workspace;
}

void *CudaDevice::allocate(size_t bytes) {
  return memory->allocate(bytes, "a collective's staging buffer");
}

void CudaDevice::release(void *data) { memory->free(data); }

void CudaDevice::copy2D(void *dst, int64_t dstPitch, const void *src,
                        int64_t srcPitch, size_t width, size_t rows) const {
  if (rows == 0 || width == 0)
    return;
  bool contiguous =
      rows == 1 || (dstPitch == int64_t(width) && srcPitch == int64_t(width));
  if (contiguous) {
    AUTOPAR_CU(cuMemcpyAsync, reinterpret_cast<CUdeviceptr>(dst),
               reinterpret_cast<CUdeviceptr>(src), width * rows, computeStream);
    return;
  }
  if (dstPitch < int64_t(width) || srcPitch < int64_t(width) ||
      dstPitch > INT_MAX || srcPitch > INT_MAX) {
    // cuMemcpy2D needs pitches of at least the width (and not huge):
    // one copy per row otherwise.
    for (size_t r = 0; r < rows; ++r)
      AUTOPAR_CU(cuMemcpyAsync,
                 reinterpret_cast<CUdeviceptr>(dst) + r * dstPitch,
                 reinterpret_cast<CUdeviceptr>(src) + r * srcPitch, width,
                 computeStream);
    return;
  }
  CUDA_MEMCPY2D copy{};
  copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.srcDevice = reinterpret_cast<CUdeviceptr>(src);
  copy.srcPitch = static_cast<size_t>(srcPitch);
  copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.dstDevice = reinterpret_cast<CUdeviceptr>(dst);
  copy.dstPitch = static_cast<size_t>(dstPitch);
  copy.WidthInBytes = width;
  copy.Height = rows;
  AUTOPAR_CU(cuMemcpy2DAsync, &copy, computeStream);
}

void CudaDevice::copyToHost(void *host, const void *from, size_t bytes) {
  // Wait first (polling, under the watchdog), so that the copy itself does
  // not block on queued work.
  synchronize();
  if (bytes == 0)
    return;
  AUTOPAR_CU(cuMemcpyDtoHAsync, host, reinterpret_cast<CUdeviceptr>(from),
             bytes, computeStream);
  synchronize();
}

void CudaDevice::copyFromHost(void *to, const void *host, size_t bytes) {
  // From pageable memory the driver stages the bytes before it returns, so
  // the caller may reuse \p host at once.
  if (bytes)
    AUTOPAR_CU(cuMemcpyHtoDAsync, reinterpret_cast<CUdeviceptr>(to), host,
               bytes, computeStream);
}

void CudaDevice::streamFailed(CUresult result) const {
  throw Error("the GPU failed while running this rank's work: " +
              describeCudaError(result) +
              " (a fault in generated GPU code is a compiler bug; "
              "CUDA_LAUNCH_BLOCKING=1 makes the failing kernel report "
              "itself)");
}

void CudaDevice::synchronize() {
  using Clock = std::chrono::steady_clock;
  CUresult result = driver().cuStreamQuery(computeStream);
  if (result == CUDA_ERROR_NOT_READY) {
    std::optional<Watchdog::Scope> waiting;
    if (streamObserver) {
      std::string pending = streamObserver->pendingOperation();
      if (!pending.empty())
        waiting.emplace(streamObserver->watchdog(), pending,
                        /*waiting=*/true);
    }
    // Spin briefly (a step's tail is usually short), then sleep between
    // queries; look for NCCL errors every millisecond.
    Clock::time_point start = Clock::now(), checked = start;
    while ((result = driver().cuStreamQuery(computeStream)) ==
           CUDA_ERROR_NOT_READY) {
      Clock::time_point now = Clock::now();
      if (streamObserver && now - checked > std::chrono::milliseconds(1)) {
        streamObserver->checkAsyncErrors();
        checked = now;
      }
      if (now - start > std::chrono::microseconds(200))
        std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  if (result != CUDA_SUCCESS)
    streamFailed(result);
  if (streamObserver)
    streamObserver->checkAsyncErrors();
}

void entryFatal(const char *entry, const std::string &message) {
  fatalError(std::string(entry) + ": " + message);
}

CudaDevice &deviceFor(const char *entry) {
  CudaDevice *device = CudaDevice::current();
  if (!device)
    entryFatal(entry, "no GPU is set up: the program must run under "
                      "autopar-run, with a manifest whose target is cuda");
  return *device;
}

} // namespace autopar::runtime::cuda
