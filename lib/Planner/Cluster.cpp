//===- Cluster.cpp - Precisions, peaks and the --cluster flag -------------===//
//
// `--cluster` is a JSON file when it names one, otherwise a preset: `local:N`,
// a node type with a node count (`dgx-h100:4`) or a node type whose count
// comes from the Slurm allocation this runs in (`slurm:dgx-h100`). The
// presets live in ClusterPresets.cpp, the JSON reader in ClusterJson.cpp and
// `local:N` in LocalCluster.cpp.
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/Cluster.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdlib>
#include <optional>

using namespace autopar;
using llvm::StringRef;

namespace {
/// Larger than any machine built; a bigger count is a typo.
constexpr int64_t kMaxNodes = 100000;
/// More CPU ranks than this on one machine is a typo, not a plan.
constexpr int64_t kMaxLocalRanks = 1024;

llvm::Error specError(StringRef spec, const llvm::Twine &msg) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 "--cluster '" + spec + "': " + msg);
}

/// "local:N, dgx-a100-40gb:NODES, ..., slurm:NODE, or the path of a JSON
/// file".
std::string presetList() {
  std::string list = "local:N";
  for (const NodePreset &node : getNodePresets())
    list += ", " + node.name + ":NODES";
  return list + ", slurm:NODE (a Slurm allocation of NODE nodes), or the "
                "path of a JSON cluster file (docs/clusters.md)";
}

/// "dgx-a100-40gb, dgx-a100-80gb, ...".
std::string nodePresetNames() {
  llvm::SmallVector<StringRef> names;
  for (const NodePreset &node : getNodePresets())
    names.push_back(node.name);
  return llvm::join(names, ", ");
}

/// A Slurm count: decimal digits only (Slurm writes no sign, space or unit),
/// from `min` to `max`; nullopt otherwise.
std::optional<int64_t> slurmCount(StringRef text, int64_t min, int64_t max) {
  int64_t n = 0;
  if (text.empty() || !llvm::all_of(text, llvm::isDigit) ||
      text.getAsInteger(10, n) || n < min || n > max)
    return std::nullopt;
  return n;
}

ClusterSpec makeNodeCluster(const NodePreset &node, int64_t nodes) {
  ClusterSpec cluster;
  cluster.name = node.name + ":" + std::to_string(nodes);
  cluster.nodes = nodes;
  cluster.gpusPerNode = node.gpusPerNode;
  const DeviceSpec *device = lookupDevicePreset(node.device);
  assert(device && "node preset names an unknown device preset");
  cluster.device = *device;
  cluster.intraNode = node.intraNode;
  cluster.interNode = node.interNode;
  return cluster;
}
} // namespace

llvm::StringRef autopar::precisionName(Precision p) {
  switch (p) {
  case Precision::FP32:
    return "fp32";
  case Precision::TF32:
    return "tf32";
  case Precision::BF16:
    return "bf16";
  case Precision::FP16:
    return "fp16";
  }
  llvm_unreachable("unknown precision");
}

bool autopar::parsePrecision(StringRef name, Precision &p) {
  for (Precision candidate :
       {Precision::FP32, Precision::TF32, Precision::BF16, Precision::FP16}) {
    if (name == precisionName(candidate)) {
      p = candidate;
      return true;
    }
  }
  return false;
}

double DeviceSpec::peakFlops(Precision p) const {
  double tflops = 0;
  switch (p) {
  case Precision::FP32:
    tflops = peakTflopsFp32;
    break;
  case Precision::TF32:
    tflops = peakTflopsTf32;
    break;
  case Precision::BF16:
    tflops = peakTflopsBf16;
    break;
  case Precision::FP16:
    tflops = peakTflopsFp16;
    break;
  }
  return tflops * 1e12;
}

Precision ClusterSpec::defaultPrecision() const {
  if (isLocalCpu())
    return Precision::FP32;
  if (device.peakTflopsBf16 > 0)
    return Precision::BF16;
  if (device.peakTflopsFp16 > 0)
    return Precision::FP16;
  return Precision::FP32;
}

llvm::Expected<ClusterSpec> autopar::parseClusterSpec(StringRef spec) {
  return parseClusterSpec(
      spec, [](const char *name) -> const char * { return std::getenv(name); });
}

llvm::Expected<ClusterSpec> autopar::makeSlurmCluster(StringRef spec,
                                                      StringRef nodePreset,
                                                      const EnvLookup &getEnv) {
  const NodePreset *node = lookupNodePreset(nodePreset);
  if (!node) {
    if (lookupDevicePreset(nodePreset))
      return specError(spec, "'" + nodePreset +
                                 "' is a GPU, not a node type; the links "
                                 "come from a node preset: slurm:NODE with "
                                 "NODE one of " +
                                 nodePresetNames());
    std::string what = nodePreset.empty()
                           ? std::string("no node type")
                           : "unknown node preset '" + nodePreset.str() + "'";
    return specError(spec, what + "; give slurm:NODE with NODE one of " +
                               nodePresetNames());
  }
  auto env = [&](const char *name) -> std::optional<StringRef> {
    if (const char *value = getEnv(name))
      return StringRef(value);
    return std::nullopt;
  };
  auto badVariable = [&](StringRef name, StringRef value,
                         const llvm::Twine &expected) {
    return specError(spec, name + "='" + value + "' is not " + expected);
  };

  // The node count says we are inside an allocation; SLURM_NNODES is the
  // older spelling, still set by every Slurm release.
  StringRef nodesVar = "SLURM_JOB_NUM_NODES";
  std::optional<StringRef> nodesText = env("SLURM_JOB_NUM_NODES");
  if (!nodesText) {
    nodesVar = "SLURM_NNODES";
    nodesText = env("SLURM_NNODES");
  }
  if (!nodesText)
    return specError(spec, "not inside a Slurm allocation (neither "
                           "SLURM_JOB_NUM_NODES nor SLURM_NNODES is set); "
                           "run autopar-compile in the sbatch script or "
                           "salloc shell of the job, or give the node "
                           "count: " +
                               node->name + ":NODES");
  std::optional<int64_t> nodes = slurmCount(*nodesText, 1, kMaxNodes);
  if (!nodes)
    return badVariable(nodesVar, *nodesText,
                       "a whole number of nodes from 1 to " +
                           llvm::Twine(kMaxNodes));

  // A heterogeneous job (sbatch A : B) has components with their own node
  // types; the variables above describe only one of them.
  if (std::optional<StringRef> het = env("SLURM_HET_SIZE"))
    if (*het != "1")
      return specError(spec, "SLURM_HET_SIZE='" + *het +
                                 "': a heterogeneous job (several node "
                                 "types); autopar plans for identical "
                                 "nodes: plan for one component, or for "
                                 "the smaller node type with all the nodes");

  // GPUs per node: what this node was given (SLURM_GPUS_ON_NODE), else what
  // was asked for per node (--gpus-per-node=[type:]N), else the IDs of the
  // job's GPUs on this node.
  std::string gpusFrom;
  int64_t gpus = 0;
  if (std::optional<StringRef> text = env("SLURM_GPUS_ON_NODE")) {
    gpusFrom = ("SLURM_GPUS_ON_NODE='" + *text + "'").str();
    std::optional<int64_t> n = slurmCount(*text, 0, 1024);
    if (!n)
      return badVariable("SLURM_GPUS_ON_NODE", *text,
                         "a whole number of GPUs from 0 to 1024");
    gpus = *n;
  } else if (std::optional<StringRef> text = env("SLURM_GPUS_PER_NODE")) {
    gpusFrom = ("SLURM_GPUS_PER_NODE='" + *text + "'").str();
    if (text->contains(','))
      return specError(spec, gpusFrom +
                                 " asks for several GPU types per node; "
                                 "autopar plans for identical GPUs: request "
                                 "one type (--gpus-per-node=TYPE:N)");
    StringRef count = text->contains(':') ? text->rsplit(':').second : *text;
    std::optional<int64_t> n = slurmCount(count, 0, 1024);
    if (!n)
      return badVariable("SLURM_GPUS_PER_NODE", *text,
                         "[type:]count with a count from 0 to 1024 "
                         "(--gpus-per-node's form, e.g. 'h100:8' or '8')");
    gpus = *n;
  } else if (std::optional<StringRef> text = env("SLURM_JOB_GPUS")) {
    gpusFrom = ("SLURM_JOB_GPUS='" + *text + "'").str();
    // Comma-separated GPU IDs ("0,1,2,3"); a range "0-3" counts as 4.
    llvm::SmallVector<StringRef> ids;
    text->split(ids, ',');
    for (StringRef id : ids) {
      auto [first, last] = id.split('-');
      std::optional<int64_t> lo = slurmCount(first, 0, 1 << 20);
      std::optional<int64_t> hi =
          id.contains('-') ? slurmCount(last, 0, 1 << 20) : lo;
      if (!lo || !hi || *hi < *lo)
        return badVariable("SLURM_JOB_GPUS", *text,
                           "a comma-separated list of GPU IDs (e.g. "
                           "'0,1,2,3')");
      gpus += *hi - *lo + 1;
    }
  } else {
    return specError(spec,
                     "the Slurm allocation has no GPUs (none of "
                     "SLURM_GPUS_ON_NODE, SLURM_GPUS_PER_NODE, "
                     "SLURM_JOB_GPUS is set); request them (--gpus-per-node=" +
                         llvm::Twine(node->gpusPerNode) +
                         " or --gres=gpu:" + llvm::Twine(node->gpusPerNode) +
                         "), or give the node count: " + node->name + ":NODES");
  }
  if (gpus == 0)
    return specError(spec, gpusFrom + ": the allocation has no GPUs; request "
                                      "them (--gpus-per-node=N)");
  if (gpus > node->gpusPerNode)
    return specError(spec, gpusFrom + ": " + llvm::Twine(gpus) +
                               " GPUs per node, but a " + node->name +
                               " node has " + llvm::Twine(node->gpusPerNode) +
                               "; name the node preset of the allocation's "
                               "nodes, or describe them in a JSON cluster "
                               "file (docs/clusters.md)");

  ClusterSpec cluster = makeNodeCluster(*node, *nodes);
  // Fewer GPUs than the node has: the plan uses those; the node's links and
  // network are the preset's.
  cluster.gpusPerNode = gpus;
  cluster.name = "slurm:" + node->name;
  if (std::optional<StringRef> job = env("SLURM_JOB_ID"))
    cluster.name += ", job " + job->str();
  return cluster;
}

llvm::Expected<ClusterSpec> autopar::parseClusterSpec(StringRef spec,
                                                      const EnvLookup &getEnv) {
  if (spec.trim().empty())
    return specError(spec, "empty; give one of " + presetList());

  // A file wins over a preset of the same spelling: the user pointed at it.
  if (llvm::sys::fs::is_regular_file(spec)) {
    auto buffer = llvm::MemoryBuffer::getFile(spec, /*IsText=*/true);
    if (!buffer)
      return specError(spec, "cannot read: " + buffer.getError().message());
    return parseClusterJson((*buffer)->getBuffer(), spec);
  }
  if (llvm::sys::fs::is_directory(spec))
    return specError(spec, "is a directory, not a JSON cluster file");
  if (spec.ends_with(".json") || spec.contains('/'))
    return specError(spec, "no such file");

  auto [name, countText] = spec.split(':');
  // The node count and GPUs come from the allocation, the node type from
  // the preset after the colon.
  if (name == "slurm")
    return makeSlurmCluster(spec, countText, getEnv);
  bool isLocal = name == "local";
  int64_t maxCount = isLocal ? kMaxLocalRanks : kMaxNodes;
  int64_t count = 1;
  if (spec.contains(':') &&
      (countText.getAsInteger(10, count) || count < 1 || count > maxCount))
    return specError(spec, "'" + countText +
                               "' is not a whole number from 1 "
                               "to " +
                               llvm::Twine(maxCount) + " (" +
                               (isLocal ? "CPU ranks" : "nodes") + ")");

  if (isLocal)
    return makeLocalCluster(count, detectHost());
  if (const NodePreset *node = lookupNodePreset(name))
    return makeNodeCluster(*node, count);
  if (lookupDevicePreset(name))
    return specError(spec, "'" + name +
                               "' is a GPU, not a node type; give a node "
                               "preset: " +
                               presetList());
  return specError(spec,
                   "unknown preset '" + name + "'; presets: " + presetList());
}
