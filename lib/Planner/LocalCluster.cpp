//===- LocalCluster.cpp - local:N, CPU ranks on this machine --------------===//
//
// `local:N` runs N MPI ranks on this machine. The planner needs a peak FLOP
// rate and a memory bandwidth per rank, and no datasheet gives them for an
// arbitrary machine, so they are estimated from what the OS reports:
//
//   peak fp32  = physical cores x max clock x FLOP/cycle of the vector ISA / N
//   bandwidth  = physical cores x 10 GB/s / N
//
// FLOP/cycle assumes two FMA pipes (Intel since Haswell, AMD since Zen 2):
// AVX-512 2 x 16 lanes x 2 = 64, AVX2+FMA 2 x 8 x 2 = 32. CPUs with a single
// 512-bit FMA pipe reach half of that. 10 GB/s per core is the order of a
// STREAM triad per core before the memory channels saturate.
// `bench/bench_host.py` measures both on the machine at hand (bench/RESULTS.md,
// 2026-11-22, on the 2-core development VM: triad 11.8-13.0 GB/s per core,
// close; one-thread OpenBLAS sgemm 19-33 GFLOP/s, 4-7x below this peak
// estimate, so CPU GEMM times are optimistic there).
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/Cluster.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Threading.h"
#include "llvm/TargetParser/Host.h"

#include <thread>
#include <unistd.h>

using namespace autopar;
using llvm::StringRef;

namespace {
/// When the clock cannot be read at all.
constexpr double kFallbackGhz = 2.0;
constexpr double kMemoryGBytesPerSPerCore = 10.0;
/// MPI's shared-memory transport copies once through memory (Open MPI's sm
/// BTL with CMA single-copy); on commodity x86 that is ~10 GB/s and ~1 us
/// per message. `bench/bench_host.py`'s ping-pong measured 8.4-9.6 GB/s and
/// 0.44-0.55 us on the development VM (bench/RESULTS.md, 2026-11-22).
constexpr double kShmGBytesPerS = 10.0;
constexpr double kShmLatencyUs = 1.0;

/// The first line of a small system file, or "".
std::string readFirstLine(StringRef path) {
  auto buffer = llvm::MemoryBuffer::getFileAsStream(path);
  if (!buffer)
    return "";
  return (*buffer)->getBuffer().split('\n').first.trim().str();
}

/// The highest clock the kernel reports, in GHz; 0 when none.
double readMaxGhz() {
  // cpufreq gives the rated maximum (kHz); /proc/cpuinfo only the current
  // clock, which idles low, so it is the second choice.
  uint64_t khz = 0;
  if (!StringRef(readFirstLine(
                     "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"))
           .getAsInteger(10, khz) &&
      khz > 0)
    return khz / 1e6;
  auto cpuinfo = llvm::MemoryBuffer::getFileAsStream("/proc/cpuinfo");
  if (!cpuinfo)
    return 0;
  double maxMhz = 0;
  llvm::SmallVector<StringRef> lines;
  (*cpuinfo)->getBuffer().split(lines, '\n');
  for (StringRef line : lines) {
    auto [key, value] = line.split(':');
    double mhz = 0;
    if (key.trim() == "cpu MHz" && !value.trim().getAsDouble(mhz))
      maxMhz = std::max(maxMhz, mhz);
  }
  return maxMhz / 1e3;
}

/// Physical memory, limited by this process's cgroup (containers), in GiB.
double readRamGiB() {
  double bytes = double(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  uint64_t limit = 0;
  if (!StringRef(readFirstLine("/sys/fs/cgroup/memory.max"))
           .getAsInteger(10, limit) &&
      limit > 0 && limit < bytes)
    bytes = limit;
  return bytes / (1024.0 * 1024 * 1024);
}
} // namespace

HostInfo autopar::detectHost() {
  HostInfo host;
  int cores = llvm::get_physical_cores();
  if (cores <= 0)
    cores = std::max(1u, std::thread::hardware_concurrency());
  host.physicalCores = cores;
  host.ghz = readMaxGhz();
  if (host.ghz <= 0)
    host.ghz = kFallbackGhz;

  llvm::StringMap<bool> features = llvm::sys::getHostCPUFeatures();
  auto has = [&](StringRef f) { return features.lookup(f); };
  if (has("avx512f")) {
    host.isa = "avx512";
    host.fp32FlopsPerCycle = 64;
  } else if (has("avx2") && has("fma")) {
    host.isa = "avx2+fma";
    host.fp32FlopsPerCycle = 32;
  } else if (has("avx")) {
    host.isa = "avx"; // one 8-wide add and one 8-wide multiply per cycle
    host.fp32FlopsPerCycle = 16;
  } else if (has("neon")) {
    host.isa = "neon"; // two 4-wide FMA pipes
    host.fp32FlopsPerCycle = 16;
  } else {
    host.isa = "sse2"; // the x86-64 baseline: 4-wide add + multiply
    host.fp32FlopsPerCycle = 8;
  }
  host.ramGiB = readRamGiB();
  host.memoryGBytesPerSPerCore = kMemoryGBytesPerSPerCore;
  return host;
}

ClusterSpec autopar::makeLocalCluster(int64_t ranks, const HostInfo &host) {
  assert(ranks >= 1 && "a cluster has at least one rank");
  ClusterSpec cluster;
  cluster.name = "local:" + std::to_string(ranks);
  cluster.nodes = 1;
  cluster.gpusPerNode = ranks;

  DeviceSpec &cpu = cluster.device;
  cpu.name = "cpu";
  cpu.arch = "cpu";
  cpu.memoryGiB = host.ramGiB / ranks;
  // Ranks share the cores; with more ranks than cores each gets a fraction.
  double cores = double(host.physicalCores) / ranks;
  cpu.peakTflopsFp32 = cores * host.ghz * host.fp32FlopsPerCycle / 1e3;
  cpu.memoryGBytesPerS = cores * host.memoryGBytesPerSPerCore;
  cpu.cpuCores = cores;
  cpu.source =
      llvm::formatv("estimate (lib/Target/LocalCluster.cpp): {0} "
                    "cores x {1:f2} GHz x {2:f0} FLOP/cycle ({3}), {4:f0} "
                    "GB/s per core, shared by {5} ranks; compare "
                    "with bench/bench_host.py",
                    host.physicalCores, host.ghz, host.fp32FlopsPerCycle,
                    host.isa, host.memoryGBytesPerSPerCore, ranks)
          .str();

  cluster.intraNode = {"shm", kShmGBytesPerS, kShmLatencyUs,
                       "MPI shared memory, one memcpy per message "
                       "(lib/Target/LocalCluster.cpp; measured by "
                       "bench/bench_host.py)"};
  cluster.interNode = {"none", 0, 0, 0, "one machine"};
  return cluster;
}
