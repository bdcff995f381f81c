//===- Cluster.cpp - Precisions, peaks and the --cluster flag -------------===//
//
// `--cluster` is a JSON file when it names one, otherwise a preset: `local:N`
// or a node type with a node count (`dgx-h100:4`). The presets live in
// ClusterPresets.cpp, the JSON reader in ClusterJson.cpp and `local:N` in
// LocalCluster.cpp.
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/Cluster.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

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

/// "local:N, dgx-a100-40gb:NODES, ..., or the path of a JSON file".
std::string presetList() {
  std::string list = "local:N";
  for (const NodePreset &node : getNodePresets())
    list += ", " + node.name + ":NODES";
  return list + ", or the path of a JSON cluster file (docs/clusters.md)";
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
