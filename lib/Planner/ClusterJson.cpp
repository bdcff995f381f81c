//===- ClusterJson.cpp - The JSON cluster file, read and written ----------===//
//
// The format is INTERFACES.md's (docs/clusters.md has the full reference).
// A wrong cluster file silently skews every plan, so the reader accepts
// nothing it does not understand: every error names the file, the key path,
// the value and what was expected. Upper bounds far above any real machine
// catch values given in the wrong unit (bytes/s where GB/s was meant).
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/Cluster.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

using namespace autopar;
using llvm::ArrayRef;
using llvm::StringRef;
namespace json = llvm::json;

namespace {
constexpr int64_t kMaxNodes = 100000;
constexpr int64_t kMaxGpusPerNode = 1024;
constexpr int64_t kMaxNicsPerNode = 64;

/// What a number means, whether 0 is allowed, and its plausible maximum.
struct Quantity {
  StringRef meaning;
  bool allowZero;
  double max;
  StringRef wrongUnitHint;
};

const Quantity kMemoryGiB = {"device memory, GiB", false, 65536,
                             "is it in bytes?"};
const Quantity kFp32Tflops = {"dense peak TFLOP/s", false, 100000,
                              "is it in FLOP/s?"};
const Quantity kOtherTflops = {"dense peak TFLOP/s, 0 when unsupported", true,
                               100000, "is it in FLOP/s?"};
const Quantity kMemoryGBytesPerS = {"device memory bandwidth, GB/s", false,
                                    100000, "is it in bytes/s?"};
const Quantity kLinkGBytesPerS = {"GB/s per GPU per direction", false, 10000,
                                  "is it in bytes/s?"};
const Quantity kNicGbitsPerS = {"Gb/s per NIC per direction", false, 10000,
                                "is it in bits/s?"};
const Quantity kLatencyUs = {"microseconds per message", true, 1e6,
                             "is it in nanoseconds?"};
const Quantity kCpuCores = {"cores one CPU rank owns", false, 4096,
                            "is it the whole machine's thread count?"};

constexpr StringRef kTopKeys[] = {"name", "nodes",      "gpus_per_node",
                                  "gpu",  "intra_node", "inter_node"};
constexpr StringRef kGpuKeys[] = {
    "name", "memory_gib", "peak_tflops", "memory_gbytes_per_s",
    "arch", "cpu_cores",  "source"};
constexpr StringRef kPeakKeys[] = {"fp32", "tf32", "bf16", "fp16"};
constexpr StringRef kIntraKeys[] = {"kind", "gbytes_per_s", "latency_us",
                                    "source"};
constexpr StringRef kInterKeys[] = {"kind", "nic_gbits_per_s", "nics_per_node",
                                    "latency_us", "source"};
/// Keys other tools use to list several kinds of node (Slurm partitions,
/// Kubernetes node pools, ...): a cluster file with one of them describes
/// a heterogeneous cluster, which deserves more than "unknown key".
constexpr StringRef kNodeGroupKeys[] = {"node_groups", "node_types",
                                        "nodegroups",  "partitions",
                                        "node_pools",  "groups"};
constexpr StringRef kIntraKinds[] = {"nvswitch", "nvlink", "pcie", "shm"};
constexpr StringRef kInterKinds[] = {"infiniband", "ethernet", "none"};

std::string show(const json::Value &v) { return llvm::formatv("{0}", v); }

std::string joinKeys(ArrayRef<StringRef> keys) {
  return llvm::join(keys.begin(), keys.end(), ", ");
}

/// Reads one cluster description; `origin` (the file) starts every error.
class Reader {
public:
  explicit Reader(StringRef origin) : origin(origin) {}

  llvm::Expected<ClusterSpec> read(const json::Value &root);

private:
  StringRef origin;

  llvm::Error error(const llvm::Twine &msg) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   origin + ": " + msg);
  }
  llvm::Error keyError(StringRef path, const llvm::Twine &msg) const {
    return error("key '" + path + "': " + msg);
  }
  static std::string join(StringRef path, StringRef key) {
    return path.empty() ? key.str() : (path + "." + key).str();
  }

  llvm::Error heterogeneous(const json::Object &top) const;
  llvm::Error checkKeys(const json::Object &obj, StringRef path,
                        ArrayRef<StringRef> known) const;
  llvm::Expected<const json::Value *> require(const json::Object &obj,
                                              StringRef path, StringRef key,
                                              StringRef meaning) const;
  llvm::Expected<const json::Object *> object(const json::Object &obj,
                                              StringRef path, StringRef key,
                                              StringRef meaning) const;
  llvm::Expected<double> number(const json::Value &v, StringRef path,
                                const Quantity &q) const;
  llvm::Expected<double> number(const json::Object &obj, StringRef path,
                                StringRef key, const Quantity &q) const;
  llvm::Expected<int64_t> integer(const json::Value &v, StringRef path,
                                  int64_t max, StringRef meaning) const;
  llvm::Expected<int64_t> integer(const json::Object &obj, StringRef path,
                                  StringRef key, int64_t max,
                                  StringRef meaning) const;
  llvm::Expected<std::string> string(const json::Value &v,
                                     StringRef path) const;
  llvm::Expected<std::string> kind(const json::Object &obj, StringRef path,
                                   ArrayRef<StringRef> kinds) const;
  llvm::Error optionalSource(const json::Object &obj, StringRef path,
                             std::string &source) const;

  llvm::Expected<DeviceSpec> device(const json::Value &v) const;
  llvm::Expected<IntraNodeLink> intraNode(const json::Object &top) const;
  llvm::Expected<InterNodeLink> interNode(const json::Object &top,
                                          int64_t nodes) const;
};
} // namespace

/// What a heterogeneous description is told.
constexpr const char *kIdenticalNodes =
    "autopar plans for identical nodes (\"nodes\": a count of nodes that "
    "have the same \"gpus_per_node\", \"gpu\", \"intra_node\" and "
    "\"inter_node\"); describe one node type: the partition the job runs "
    "in, or the smaller node type (fewer GPUs, less memory) with all the "
    "nodes, whose plan runs on the larger ones too";

/// A file that lists several node types (groups of nodes, several GPUs or
/// GPU counts or links) is one autopar cannot plan for: the search prices
/// every rank alike. Checked before unknown keys and types, whose messages
/// would not say what is wrong.
llvm::Error Reader::heterogeneous(const json::Object &top) const {
  StringRef key;
  std::string what;
  for (StringRef group : kNodeGroupKeys)
    if (top.get(group)) {
      key = group;
      what = "groups of nodes";
      break;
    }
  if (key.empty()) {
    // A list (or a map of names to counts) where one value belongs.
    static constexpr std::pair<StringRef, StringRef> kOneValue[] = {
        {"nodes", "several groups of nodes"},
        {"gpus_per_node", "several GPU counts per node"},
        {"gpu", "several GPU types"},
        {"intra_node", "several intra-node links"},
        {"inter_node", "several networks"}};
    for (auto [candidate, meaning] : kOneValue) {
      const json::Value *v = top.get(candidate);
      if (!v)
        continue;
      bool several = v->getAsArray() ||
                     (candidate == "nodes" && v->getAsObject()) ||
                     (candidate == "gpus_per_node" && v->getAsObject());
      if (several) {
        key = candidate;
        what = meaning.str();
        break;
      }
    }
  }
  if (key.empty())
    return llvm::Error::success();
  return keyError(key, what + ": " + kIdenticalNodes);
}

llvm::Error Reader::checkKeys(const json::Object &obj, StringRef path,
                              ArrayRef<StringRef> known) const {
  // Report in key order so the first error is stable.
  llvm::SmallVector<StringRef> keys;
  for (const auto &entry : obj)
    keys.push_back(entry.first);
  llvm::sort(keys);
  for (StringRef key : keys) {
    if (llvm::is_contained(known, key))
      continue;
    std::string msg = "unknown key '" + join(path, key) + "'";
    // A typo is the usual cause; name the key it was probably meant to be.
    StringRef closest;
    unsigned best = 3;
    for (StringRef candidate : known) {
      unsigned d = key.edit_distance(candidate, true, best);
      if (d < best) {
        best = d;
        closest = candidate;
      }
    }
    if (!closest.empty())
      msg += "; did you mean '" + join(path, closest) + "'?";
    else
      msg += "; expected one of: " + joinKeys(known);
    return error(msg);
  }
  return llvm::Error::success();
}

llvm::Expected<const json::Value *> Reader::require(const json::Object &obj,
                                                    StringRef path,
                                                    StringRef key,
                                                    StringRef meaning) const {
  if (const json::Value *v = obj.get(key))
    return v;
  return error("missing key '" + join(path, key) + "' (" + meaning + ")");
}

llvm::Expected<const json::Object *> Reader::object(const json::Object &obj,
                                                    StringRef path,
                                                    StringRef key,
                                                    StringRef meaning) const {
  auto v = require(obj, path, key, meaning);
  if (!v)
    return v.takeError();
  if (const json::Object *o = (*v)->getAsObject())
    return o;
  return keyError(join(path, key),
                  show(**v) + " is not an object (" + meaning + ")");
}

llvm::Expected<double> Reader::number(const json::Value &v, StringRef path,
                                      const Quantity &q) const {
  std::optional<double> d = v.getAsNumber();
  if (!d || *d < 0 || (*d == 0 && !q.allowZero) || std::isnan(*d))
    return keyError(path, show(v) + " is not a " +
                              (q.allowZero ? "non-negative" : "positive") +
                              " number (" + q.meaning + ")");
  if (*d > q.max)
    return keyError(path, llvm::formatv("{0} is implausibly large for {1} "
                                        "(at most {2}); {3}",
                                        show(v), q.meaning, int64_t(q.max),
                                        q.wrongUnitHint)
                              .str());
  return *d;
}

llvm::Expected<double> Reader::number(const json::Object &obj, StringRef path,
                                      StringRef key, const Quantity &q) const {
  auto v = require(obj, path, key, q.meaning);
  if (!v)
    return v.takeError();
  return number(**v, join(path, key), q);
}

llvm::Expected<int64_t> Reader::integer(const json::Value &v, StringRef path,
                                        int64_t max, StringRef meaning) const {
  std::optional<int64_t> i = v.getAsInteger();
  if (!i || *i < 1 || *i > max)
    return keyError(path, show(v) + " is not a whole number from 1 to " +
                              llvm::Twine(max) + " (" + meaning + ")");
  return *i;
}

llvm::Expected<int64_t> Reader::integer(const json::Object &obj, StringRef path,
                                        StringRef key, int64_t max,
                                        StringRef meaning) const {
  auto v = require(obj, path, key, meaning);
  if (!v)
    return v.takeError();
  return integer(**v, join(path, key), max, meaning);
}

llvm::Expected<std::string> Reader::string(const json::Value &v,
                                           StringRef path) const {
  std::optional<StringRef> s = v.getAsString();
  if (!s || s->trim().empty())
    return keyError(path, show(v) + " is not a non-empty string");
  return s->str();
}

llvm::Expected<std::string> Reader::kind(const json::Object &obj,
                                         StringRef path,
                                         ArrayRef<StringRef> kinds) const {
  std::string meaning = "one of: " + joinKeys(kinds);
  auto v = require(obj, path, "kind", meaning);
  if (!v)
    return v.takeError();
  std::optional<StringRef> s = (*v)->getAsString();
  if (!s || !llvm::is_contained(kinds, *s))
    return keyError(join(path, "kind"), show(**v) + " is not " + meaning);
  return s->str();
}

llvm::Error Reader::optionalSource(const json::Object &obj, StringRef path,
                                   std::string &source) const {
  const json::Value *v = obj.get("source");
  if (!v)
    return llvm::Error::success();
  auto s = string(*v, join(path, "source"));
  if (!s)
    return s.takeError();
  source = *s;
  return llvm::Error::success();
}

llvm::Expected<DeviceSpec> Reader::device(const json::Value &v) const {
  if (std::optional<StringRef> name = v.getAsString()) {
    if (const DeviceSpec *preset = lookupDevicePreset(*name))
      return *preset;
    llvm::SmallVector<StringRef> names;
    for (const DeviceSpec &d : getDevicePresets())
      names.push_back(d.name);
    return keyError("gpu", show(v) + " is not a device preset; presets: " +
                               joinKeys(names) +
                               "; or give an object {name, memory_gib, "
                               "peak_tflops, memory_gbytes_per_s}");
  }
  const json::Object *obj = v.getAsObject();
  if (!obj)
    return keyError("gpu", show(v) + " is neither a device preset name nor "
                                     "an object");
  if (auto err = checkKeys(*obj, "gpu", kGpuKeys))
    return std::move(err);

  DeviceSpec d;
  auto name = require(*obj, "gpu", "name", "the device's name");
  if (!name)
    return name.takeError();
  auto nameText = string(**name, "gpu.name");
  if (!nameText)
    return nameText.takeError();
  d.name = *nameText;

  auto memory = number(*obj, "gpu", "memory_gib", kMemoryGiB);
  if (!memory)
    return memory.takeError();
  d.memoryGiB = *memory;

  auto peaks = object(*obj, "gpu", "peak_tflops",
                      "dense TFLOP/s per precision: fp32, tf32, bf16, fp16");
  if (!peaks)
    return peaks.takeError();
  if (auto err = checkKeys(**peaks, "gpu.peak_tflops", kPeakKeys))
    return std::move(err);
  double *fields[] = {&d.peakTflopsFp32, &d.peakTflopsTf32, &d.peakTflopsBf16,
                      &d.peakTflopsFp16};
  for (auto [key, field] : llvm::zip_equal(kPeakKeys, fields)) {
    auto peak = number(**peaks, "gpu.peak_tflops", key,
                       key == "fp32" ? kFp32Tflops : kOtherTflops);
    if (!peak)
      return peak.takeError();
    *field = *peak;
  }

  auto bandwidth =
      number(*obj, "gpu", "memory_gbytes_per_s", kMemoryGBytesPerS);
  if (!bandwidth)
    return bandwidth.takeError();
  d.memoryGBytesPerS = *bandwidth;

  if (const json::Value *arch = obj->get("arch")) {
    std::optional<StringRef> s = arch->getAsString();
    unsigned cc = 0;
    if (!s || (*s != "cpu" && (!s->starts_with("sm_") ||
                               s->drop_front(3).getAsInteger(10, cc))))
      return keyError("gpu.arch", show(*arch) +
                                      " is not \"sm_NN\" (the CUDA compute "
                                      "capability, e.g. \"sm_90\") or \"cpu\"");
    d.arch = s->str();
  }
  if (obj->get("cpu_cores")) {
    if (d.arch != "cpu")
      return keyError("gpu.cpu_cores",
                      "is only for CPU ranks (\"arch\": \"cpu\")");
    auto cores = number(*obj, "gpu", "cpu_cores", kCpuCores);
    if (!cores)
      return cores.takeError();
    d.cpuCores = *cores;
  }
  if (auto err = optionalSource(*obj, "gpu", d.source))
    return std::move(err);
  return d;
}

llvm::Expected<IntraNodeLink> Reader::intraNode(const json::Object &top) const {
  auto obj = object(top, "", "intra_node",
                    "the link between devices of a node: kind, gbytes_per_s, "
                    "latency_us");
  if (!obj)
    return obj.takeError();
  if (auto err = checkKeys(**obj, "intra_node", kIntraKeys))
    return std::move(err);
  IntraNodeLink link;
  auto kindText = kind(**obj, "intra_node", kIntraKinds);
  if (!kindText)
    return kindText.takeError();
  link.kind = *kindText;
  auto bandwidth = number(**obj, "intra_node", "gbytes_per_s", kLinkGBytesPerS);
  if (!bandwidth)
    return bandwidth.takeError();
  link.gbytesPerS = *bandwidth;
  auto latency = number(**obj, "intra_node", "latency_us", kLatencyUs);
  if (!latency)
    return latency.takeError();
  link.latencyUs = *latency;
  if (auto err = optionalSource(**obj, "intra_node", link.source))
    return std::move(err);
  return link;
}

llvm::Expected<InterNodeLink> Reader::interNode(const json::Object &top,
                                                int64_t nodes) const {
  auto obj = object(top, "", "inter_node",
                    "the network between nodes: kind, nic_gbits_per_s, "
                    "nics_per_node, latency_us");
  if (!obj)
    return obj.takeError();
  if (auto err = checkKeys(**obj, "inter_node", kInterKeys))
    return std::move(err);
  InterNodeLink link;
  auto kindText = kind(**obj, "inter_node", kInterKinds);
  if (!kindText)
    return kindText.takeError();
  link.kind = *kindText;
  if (auto err = optionalSource(**obj, "inter_node", link.source))
    return std::move(err);

  if (link.kind == "none") {
    // One machine: nothing to describe, and anything described must be 0.
    if (nodes != 1)
      return keyError(
          "inter_node.kind",
          llvm::formatv("\"none\" needs \"nodes\": 1, not {0}", nodes).str());
    for (StringRef key : {"nic_gbits_per_s", "nics_per_node", "latency_us"}) {
      const json::Value *v = (*obj)->get(key);
      std::optional<double> d = v ? v->getAsNumber() : std::nullopt;
      if (v && (!d || *d != 0))
        return keyError(join("inter_node", key),
                        show(*v) + " must be 0 or absent when inter_node.kind "
                                   "is \"none\"");
    }
    return link;
  }

  auto nic = number(**obj, "inter_node", "nic_gbits_per_s", kNicGbitsPerS);
  if (!nic)
    return nic.takeError();
  link.nicGbitsPerS = *nic;
  auto nics = integer(**obj, "inter_node", "nics_per_node", kMaxNicsPerNode,
                      "network cards per node");
  if (!nics)
    return nics.takeError();
  link.nicsPerNode = *nics;
  auto latency = number(**obj, "inter_node", "latency_us", kLatencyUs);
  if (!latency)
    return latency.takeError();
  link.latencyUs = *latency;
  return link;
}

llvm::Expected<ClusterSpec> Reader::read(const json::Value &root) {
  const json::Object *top = root.getAsObject();
  const json::Array *list = root.getAsArray();
  if (list && !list->empty() &&
      llvm::all_of(*list, [](const json::Value &v) { return v.getAsObject(); }))
    return error(llvm::formatv("a list of {0} cluster descriptions: {1}",
                               list->size(), kIdenticalNodes)
                     .str());
  if (!top)
    return error("a cluster description is a JSON object, not " + show(root));
  if (auto err = heterogeneous(*top))
    return std::move(err);
  if (auto err = checkKeys(*top, "", kTopKeys))
    return std::move(err);

  ClusterSpec cluster;
  if (const json::Value *name = top->get("name")) {
    auto text = string(*name, "name");
    if (!text)
      return text.takeError();
    cluster.name = *text;
  } else {
    cluster.name = origin.str();
  }

  auto nodes = integer(*top, "", "nodes", kMaxNodes, "number of nodes");
  if (!nodes)
    return nodes.takeError();
  cluster.nodes = *nodes;
  auto gpus =
      integer(*top, "", "gpus_per_node", kMaxGpusPerNode, "devices per node");
  if (!gpus)
    return gpus.takeError();
  cluster.gpusPerNode = *gpus;

  auto gpu = require(*top, "", "gpu", "a device preset name or an object");
  if (!gpu)
    return gpu.takeError();
  auto dev = device(**gpu);
  if (!dev)
    return dev.takeError();
  cluster.device = std::move(*dev);

  auto intra = intraNode(*top);
  if (!intra)
    return intra.takeError();
  cluster.intraNode = std::move(*intra);
  auto inter = interNode(*top, cluster.nodes);
  if (!inter)
    return inter.takeError();
  cluster.interNode = std::move(*inter);
  return cluster;
}

llvm::Expected<ClusterSpec> autopar::parseClusterJson(StringRef text,
                                                      StringRef origin) {
  llvm::Expected<json::Value> root = json::parse(text);
  if (!root)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        origin + ": invalid JSON: " + llvm::toString(root.takeError()));
  return Reader(origin).read(*root);
}

json::Value autopar::clusterToJson(const ClusterSpec &c) {
  const DeviceSpec &d = c.device;
  json::Object gpu{
      {"name", d.name},
      {"memory_gib", d.memoryGiB},
      {"peak_tflops", json::Object{{"fp32", d.peakTflopsFp32},
                                   {"tf32", d.peakTflopsTf32},
                                   {"bf16", d.peakTflopsBf16},
                                   {"fp16", d.peakTflopsFp16}}},
      {"memory_gbytes_per_s", d.memoryGBytesPerS},
  };
  if (!d.arch.empty())
    gpu["arch"] = d.arch;
  if (d.cpuCores > 0)
    gpu["cpu_cores"] = d.cpuCores;
  if (!d.source.empty())
    gpu["source"] = d.source;

  json::Object intra{{"kind", c.intraNode.kind},
                     {"gbytes_per_s", c.intraNode.gbytesPerS},
                     {"latency_us", c.intraNode.latencyUs}};
  if (!c.intraNode.source.empty())
    intra["source"] = c.intraNode.source;

  json::Object inter{{"kind", c.interNode.kind}};
  if (c.interNode.kind != "none") {
    inter["nic_gbits_per_s"] = c.interNode.nicGbitsPerS;
    inter["nics_per_node"] = c.interNode.nicsPerNode;
    inter["latency_us"] = c.interNode.latencyUs;
  }
  if (!c.interNode.source.empty())
    inter["source"] = c.interNode.source;

  return json::Object{{"name", c.name},
                      {"nodes", c.nodes},
                      {"gpus_per_node", c.gpusPerNode},
                      {"gpu", std::move(gpu)},
                      {"intra_node", std::move(intra)},
                      {"inter_node", std::move(inter)}};
}
