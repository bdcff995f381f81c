//===- Cluster.h - The machines a plan runs on ------------------*- C++ -*-===//
//
// A cluster is `nodes` identical nodes of `gpusPerNode` devices joined by an
// intra-node link (NVLink/NVSwitch or PCIe) and an inter-node network
// (InfiniBand or Ethernet). Presets name real node types; every number in
// them cites its datasheet (docs/clusters.md). `local:N` is N CPU ranks on
// this machine.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PLANNER_CLUSTER_H
#define AUTOPAR_PLANNER_CLUSTER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <functional>
#include <string>

namespace autopar {

/// Numeric precision of a plan's compute.
enum class Precision { FP32, TF32, BF16, FP16 };
/// "fp32", "tf32", "bf16", "fp16".
llvm::StringRef precisionName(Precision p);
/// Parses a precision name; false when unknown.
bool parsePrecision(llvm::StringRef name, Precision &p);

/// One accelerator (or, for local clusters, one CPU rank).
struct DeviceSpec {
  std::string name;     ///< e.g. "h100-sxm"
  double memoryGiB = 0; ///< usable device memory
  /// Dense (no sparsity) peak TFLOP/s per precision; 0 when unsupported.
  double peakTflopsFp32 = 0, peakTflopsTf32 = 0, peakTflopsBf16 = 0,
         peakTflopsFp16 = 0;
  double memoryGBytesPerS = 0; ///< device memory bandwidth
  std::string arch;            ///< "sm_80", "sm_89", "sm_90"; "cpu" for local
  std::string source;          ///< where the numbers come from (datasheet URL)
  /// CPU ranks: the cores one rank owns (a fraction when ranks outnumber
  /// cores). The peak and bandwidth above are for all of them, which BLAS
  /// uses (autopar-run gives it that many threads); autopar's generated
  /// loops run on one thread, so they get min(1, cpuCores) of it. 0: not a
  /// CPU (or unknown; everything then uses the whole device).
  double cpuCores = 0;

  /// Dense peak for `p` in FLOP/s (not TFLOP/s).
  double peakFlops(Precision p) const;
  bool isCpu() const { return llvm::StringRef(arch) == "cpu"; }
};

/// A link inside a node: per device, per direction.
struct IntraNodeLink {
  std::string kind;      ///< "nvswitch", "nvlink", "pcie", "shm"
  double gbytesPerS = 0; ///< GB/s per device per direction
  double latencyUs = 0;
  std::string source;
};

/// The network between nodes.
struct InterNodeLink {
  std::string kind;        ///< "infiniband", "ethernet", "none"
  double nicGbitsPerS = 0; ///< per NIC per direction, gigabits
  int64_t nicsPerNode = 0;
  double latencyUs = 0;
  std::string source;
  /// Aggregate bandwidth of one node, bytes/s per direction.
  double nodeBytesPerS() const { return nicGbitsPerS * 1e9 / 8 * nicsPerNode; }
};

/// A whole cluster.
struct ClusterSpec {
  std::string name;
  int64_t nodes = 1;
  int64_t gpusPerNode = 1;
  DeviceSpec device;
  IntraNodeLink intraNode;
  InterNodeLink interNode;

  int64_t worldSize() const { return nodes * gpusPerNode; }
  bool isLocalCpu() const { return device.isCpu(); }
  /// Default compute precision: bf16 on GPUs, fp32 on CPUs (INTERFACES.md).
  /// GPUs without bf16 (V100, T4) default to fp16, the precision their
  /// tensor cores run.
  Precision defaultPrecision() const;
};

/// Looks up an environment variable; nullptr when unset. The same shape as
/// the runtime's EnvLookup, so that tests can give a made-up environment.
using EnvLookup = std::function<const char *(const char *)>;

/// Parses `--cluster`: a preset `NAME:COUNT` (`local:N` ranks, or a node type
/// such as `dgx-h100:4` nodes), `slurm:NODE` (the Slurm allocation this runs
/// in, of node type NODE: makeSlurmCluster) or the path of a JSON file
/// (INTERFACES.md). Errors name the key, the value and why it is wrong.
/// Environment variables are read through `getEnv`.
llvm::Expected<ClusterSpec> parseClusterSpec(llvm::StringRef spec,
                                             const EnvLookup &getEnv);
/// parseClusterSpec on the process environment.
llvm::Expected<ClusterSpec> parseClusterSpec(llvm::StringRef spec);

/// The Slurm allocation this process runs in (an sbatch script or an salloc
/// shell) as `nodePreset` nodes: the node count from SLURM_JOB_NUM_NODES (or
/// the older SLURM_NNODES), the GPUs per node from SLURM_GPUS_ON_NODE, else
/// SLURM_GPUS_PER_NODE (`[type:]count`), else the IDs in SLURM_JOB_GPUS;
/// the device and links from the preset. Errors (naming `spec`, the
/// variable and its value) when not inside an allocation, when a variable is
/// malformed, when the allocation has no GPUs or more per node than the
/// preset's node, and for heterogeneous jobs (SLURM_HET_SIZE).
llvm::Expected<ClusterSpec> makeSlurmCluster(llvm::StringRef spec,
                                             llvm::StringRef nodePreset,
                                             const EnvLookup &getEnv);

/// Parses a cluster from JSON text; `origin` names it in errors.
llvm::Expected<ClusterSpec> parseClusterJson(llvm::StringRef json,
                                             llvm::StringRef origin);

/// The device presets (`"gpu": "a100-80gb"` in JSON) and node presets
/// (`dgx-a100-80gb:NODES`), for listings and docs.
llvm::ArrayRef<DeviceSpec> getDevicePresets();
struct NodePreset {
  std::string name;   ///< e.g. "dgx-h100"
  std::string device; ///< a device preset name
  int64_t gpusPerNode;
  IntraNodeLink intraNode;
  InterNodeLink interNode;
};
llvm::ArrayRef<NodePreset> getNodePresets();

/// The preset named `name`, or null.
const DeviceSpec *lookupDevicePreset(llvm::StringRef name);
const NodePreset *lookupNodePreset(llvm::StringRef name);

/// The cluster as JSON in the `--cluster` file format, the device spelled out
/// as an object (with its `arch` and `source`), so that
/// `parseClusterJson(clusterToJson(c))` gives `c` back.
llvm::json::Value clusterToJson(const ClusterSpec &cluster);

/// What `local:N` assumes about this machine. The FLOP rate and memory
/// bandwidth are estimates from the core count, clock and vector ISA, to be
/// replaced by what `bench/` measures.
struct HostInfo {
  int64_t physicalCores = 1;    ///< usable by this process (affinity)
  double ghz = 0;               ///< maximum core clock
  double fp32FlopsPerCycle = 0; ///< per core, from the vector ISA
  std::string isa;              ///< "avx512", "avx2+fma", ...
  double ramGiB = 0;            ///< physical memory
  double memoryGBytesPerSPerCore = 0;
};
/// Reads this machine's cores, clock, ISA and memory.
HostInfo detectHost();
/// `ranks` CPU ranks sharing `host` evenly: one node, "shm" links, no network.
ClusterSpec makeLocalCluster(int64_t ranks, const HostInfo &host);

} // namespace autopar

#endif // AUTOPAR_PLANNER_CLUSTER_H
