//===- ClusterTest.cpp - Presets, local:N, the JSON cluster file ----------===//

#include "autopar/Planner/Cluster.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <functional>
#include <map>

using namespace autopar;
namespace json = llvm::json;

namespace {

/// INTERFACES.md's example.
constexpr const char *kExample = R"({
  "name": "my-cluster",
  "nodes": 16,
  "gpus_per_node": 8,
  "gpu": "a100-80gb",
  "intra_node": { "kind": "nvswitch", "gbytes_per_s": 300, "latency_us": 2 },
  "inter_node": { "kind": "infiniband", "nic_gbits_per_s": 200,
                  "nics_per_node": 8, "latency_us": 5 }
})";

/// A GPU spelled out instead of named.
constexpr const char *kCustomGpu = R"({
  "nodes": 2,
  "gpus_per_node": 4,
  "gpu": { "name": "my-gpu", "memory_gib": 64,
           "peak_tflops": { "fp32": 50, "tf32": 0, "bf16": 400, "fp16": 400 },
           "memory_gbytes_per_s": 2000, "arch": "sm_90" },
  "intra_node": { "kind": "pcie", "gbytes_per_s": 32, "latency_us": 5.7 },
  "inter_node": { "kind": "ethernet", "nic_gbits_per_s": 100,
                  "nics_per_node": 1, "latency_us": 14 }
})";

std::string message(llvm::Error err) { return llvm::toString(std::move(err)); }

ClusterSpec parseOk(llvm::StringRef spec) {
  llvm::Expected<ClusterSpec> cluster = parseClusterSpec(spec);
  if (!cluster) {
    ADD_FAILURE() << spec.str() << ": " << message(cluster.takeError());
    return {};
  }
  return *cluster;
}

/// The error parsing `text` gives; a failure when it parses.
std::string jsonError(llvm::StringRef text) {
  llvm::Expected<ClusterSpec> cluster = parseClusterJson(text, "c.json");
  if (cluster) {
    ADD_FAILURE() << "parsed: " << text.str();
    return "";
  }
  return message(cluster.takeError());
}

std::string specError(llvm::StringRef spec) {
  llvm::Expected<ClusterSpec> cluster = parseClusterSpec(spec);
  if (cluster) {
    ADD_FAILURE() << "parsed: " << spec.str();
    return "";
  }
  return message(cluster.takeError());
}

/// `base` with `edit` applied, as text.
std::string edited(const char *base,
                   const std::function<void(json::Object &)> &edit) {
  json::Value v = llvm::cantFail(json::parse(base));
  edit(*v.getAsObject());
  return llvm::formatv("{0}", v).str();
}

json::Object &sub(json::Object &o, llvm::StringRef key) {
  return *o.getObject(key);
}

void expectSame(const ClusterSpec &a, const ClusterSpec &b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_EQ(a.gpusPerNode, b.gpusPerNode);
  EXPECT_EQ(a.device.name, b.device.name);
  EXPECT_EQ(a.device.arch, b.device.arch);
  EXPECT_EQ(a.device.source, b.device.source);
  EXPECT_EQ(a.device.memoryGiB, b.device.memoryGiB);
  EXPECT_EQ(a.device.memoryGBytesPerS, b.device.memoryGBytesPerS);
  EXPECT_EQ(a.device.cpuCores, b.device.cpuCores);
  for (Precision p :
       {Precision::FP32, Precision::TF32, Precision::BF16, Precision::FP16})
    EXPECT_EQ(a.device.peakFlops(p), b.device.peakFlops(p));
  EXPECT_EQ(a.intraNode.kind, b.intraNode.kind);
  EXPECT_EQ(a.intraNode.gbytesPerS, b.intraNode.gbytesPerS);
  EXPECT_EQ(a.intraNode.latencyUs, b.intraNode.latencyUs);
  EXPECT_EQ(a.intraNode.source, b.intraNode.source);
  EXPECT_EQ(a.interNode.kind, b.interNode.kind);
  EXPECT_EQ(a.interNode.nicGbitsPerS, b.interNode.nicGbitsPerS);
  EXPECT_EQ(a.interNode.nicsPerNode, b.interNode.nicsPerNode);
  EXPECT_EQ(a.interNode.latencyUs, b.interNode.latencyUs);
  EXPECT_EQ(a.interNode.source, b.interNode.source);
}

HostInfo fakeHost() {
  HostInfo host;
  host.physicalCores = 8;
  host.ghz = 3.0;
  host.fp32FlopsPerCycle = 32;
  host.isa = "avx2+fma";
  host.ramGiB = 64;
  host.memoryGBytesPerSPerCore = 10;
  return host;
}

//===----------------------------------------------------------------------===//
// Precisions and peaks
//===----------------------------------------------------------------------===//

TEST(Precision, NamesRoundTrip) {
  for (Precision p :
       {Precision::FP32, Precision::TF32, Precision::BF16, Precision::FP16}) {
    Precision parsed = Precision::FP32;
    ASSERT_TRUE(parsePrecision(precisionName(p), parsed));
    EXPECT_EQ(parsed, p);
  }
  Precision p;
  EXPECT_FALSE(parsePrecision("int8", p));
  EXPECT_FALSE(parsePrecision("BF16", p));
}

TEST(DevicePresets, DenseDatasheetNumbers) {
  const DeviceSpec *h100 = lookupDevicePreset("h100-sxm");
  ASSERT_TRUE(h100);
  EXPECT_DOUBLE_EQ(h100->peakFlops(Precision::FP32), 67e12);
  EXPECT_DOUBLE_EQ(h100->peakFlops(Precision::TF32), 494.7e12);
  EXPECT_DOUBLE_EQ(h100->peakFlops(Precision::BF16), 989.4e12);
  EXPECT_DOUBLE_EQ(h100->peakFlops(Precision::FP16), 989.4e12);
  EXPECT_EQ(h100->memoryGiB, 80);
  EXPECT_EQ(h100->arch, "sm_90");

  const DeviceSpec *a100 = lookupDevicePreset("a100-80gb");
  ASSERT_TRUE(a100);
  EXPECT_DOUBLE_EQ(a100->peakFlops(Precision::BF16), 312e12);
  EXPECT_EQ(a100->memoryGBytesPerS, 2039);

  // The L4 datasheet prints only sparsity figures: 120 tf32, 242 bf16.
  const DeviceSpec *l4 = lookupDevicePreset("l4");
  ASSERT_TRUE(l4);
  EXPECT_DOUBLE_EQ(l4->peakFlops(Precision::TF32), 60e12);
  EXPECT_DOUBLE_EQ(l4->peakFlops(Precision::BF16), 121e12);

  const DeviceSpec *h200 = lookupDevicePreset("h200-sxm");
  ASSERT_TRUE(h200);
  EXPECT_EQ(h200->peakTflopsBf16, h100->peakTflopsBf16);
  EXPECT_EQ(h200->memoryGiB, 141);
  EXPECT_EQ(h200->memoryGBytesPerS, 4800);

  EXPECT_FALSE(lookupDevicePreset("b300"));
}

TEST(DevicePresets, EveryPresetIsComplete) {
  EXPECT_EQ(getDevicePresets().size(), 10u);
  for (const DeviceSpec &d : getDevicePresets()) {
    SCOPED_TRACE(d.name);
    EXPECT_GT(d.memoryGiB, 0);
    EXPECT_GT(d.memoryGBytesPerS, 0);
    EXPECT_GT(d.peakTflopsFp32, 0);
    EXPECT_GT(d.peakTflopsFp16, d.peakTflopsFp32)
        << "fp16 runs on tensor cores";
    EXPECT_TRUE(llvm::StringRef(d.arch).starts_with("sm_"));
    EXPECT_FALSE(d.isCpu());
    EXPECT_NE(d.source.find("NVIDIA"), std::string::npos);
  }
}

TEST(DevicePresets, NoBf16MeansFp16Default) {
  ClusterSpec v100 = parseOk("dgx1-v100:2");
  EXPECT_EQ(v100.device.peakFlops(Precision::BF16), 0);
  EXPECT_EQ(v100.device.peakFlops(Precision::TF32), 0);
  EXPECT_EQ(v100.defaultPrecision(), Precision::FP16);
  EXPECT_EQ(parseOk("t4-x4").defaultPrecision(), Precision::FP16);
  EXPECT_EQ(parseOk("dgx-h100").defaultPrecision(), Precision::BF16);
}

//===----------------------------------------------------------------------===//
// Node presets and --cluster
//===----------------------------------------------------------------------===//

TEST(NodePresets, EveryPresetParsesWithNodeCount) {
  EXPECT_EQ(getNodePresets().size(), 10u);
  for (const NodePreset &node : getNodePresets()) {
    SCOPED_TRACE(node.name);
    ClusterSpec c = parseOk(node.name + ":3");
    EXPECT_EQ(c.name, node.name + ":3");
    EXPECT_EQ(c.nodes, 3);
    EXPECT_EQ(c.gpusPerNode, node.gpusPerNode);
    EXPECT_EQ(c.worldSize(), 3 * node.gpusPerNode);
    EXPECT_EQ(c.device.name, node.device);
    EXPECT_GT(c.intraNode.gbytesPerS, 0);
    EXPECT_GT(c.intraNode.latencyUs, 0);
    EXPECT_GT(c.interNode.nodeBytesPerS(), 0);
    EXPECT_FALSE(c.intraNode.source.empty());
    EXPECT_FALSE(c.interNode.source.empty());
    EXPECT_FALSE(c.isLocalCpu());
    // A bare name is one node.
    EXPECT_EQ(parseOk(node.name).nodes, 1);
  }
}

TEST(NodePresets, DgxH100) {
  ClusterSpec c = parseOk("dgx-h100:4");
  EXPECT_EQ(c.worldSize(), 32);
  EXPECT_EQ(c.device.name, "h100-sxm");
  EXPECT_EQ(c.intraNode.kind, "nvswitch");
  EXPECT_EQ(c.intraNode.gbytesPerS, 450); // 900 GB/s bidirectional
  EXPECT_EQ(c.interNode.kind, "infiniband");
  EXPECT_DOUBLE_EQ(c.interNode.nodeBytesPerS(), 8 * 400e9 / 8);
}

TEST(NodePresets, LinksArePerDirection) {
  EXPECT_EQ(parseOk("dgx-a100-80gb").intraNode.gbytesPerS, 300);
  EXPECT_EQ(parseOk("hgx-h800").intraNode.gbytesPerS, 200);
  EXPECT_EQ(parseOk("dgx1-v100").intraNode.gbytesPerS, 150);
  EXPECT_EQ(parseOk("l40s-x8").intraNode.gbytesPerS, 32);
  EXPECT_EQ(parseOk("t4-x4").intraNode.gbytesPerS, 16);
}

TEST(ClusterSpecFlag, Errors) {
  EXPECT_NE(specError("").find("empty"), std::string::npos);
  std::string unknown = specError("foo:3");
  EXPECT_NE(unknown.find("--cluster 'foo:3': unknown preset 'foo'"),
            std::string::npos)
      << unknown;
  EXPECT_NE(unknown.find("local:N, dgx-a100-40gb:NODES"), std::string::npos)
      << unknown;
  EXPECT_NE(unknown.find("hgx-h200:NODES"), std::string::npos) << unknown;
  EXPECT_NE(specError("h100-sxm:2").find("'h100-sxm' is a GPU, not a node"),
            std::string::npos);
  EXPECT_EQ(specError("dgx-h100:0"),
            "--cluster 'dgx-h100:0': '0' is not a whole number from 1 to "
            "100000 (nodes)");
  EXPECT_NE(specError("dgx-h100:100001").find("from 1 to 100000"),
            std::string::npos);
  EXPECT_NE(specError("dgx-h100:two").find("'two' is not a whole number"),
            std::string::npos);
  EXPECT_NE(specError("dgx-h100:").find("'' is not a whole number"),
            std::string::npos);
  EXPECT_EQ(specError("local:0"), "--cluster 'local:0': '0' is not a whole "
                                  "number from 1 to 1024 (CPU ranks)");
  EXPECT_NE(specError("local:-2").find("(CPU ranks)"), std::string::npos);
  EXPECT_EQ(specError("no-such-cluster.json"),
            "--cluster 'no-such-cluster.json': no such file");
  EXPECT_NE(specError("/nonexistent/dir/c").find("no such file"),
            std::string::npos);
}

TEST(ClusterSpecFlag, ReadsJsonFiles) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("cluster-test", dir));
  llvm::SmallString<128> path(dir);
  llvm::sys::path::append(path, "cluster.json");
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << kExample;
  }
  ClusterSpec c = parseOk(path);
  EXPECT_EQ(c.name, "my-cluster");
  EXPECT_EQ(c.worldSize(), 128);
  EXPECT_EQ(c.device.name, "a100-80gb");
  EXPECT_EQ(c.intraNode.gbytesPerS, 300);
  EXPECT_EQ(c.interNode.latencyUs, 5);
  EXPECT_DOUBLE_EQ(c.interNode.nodeBytesPerS(), 200e9);

  // Errors name the file.
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    os << "{}";
  }
  EXPECT_EQ(specError(path).rfind(path.str().str() + ": missing key", 0), 0u)
      << specError(path);
  EXPECT_NE(specError(dir).find("is a directory"), std::string::npos);

  llvm::sys::fs::remove_directories(dir);
}

//===----------------------------------------------------------------------===//
// slurm:NODE
//===----------------------------------------------------------------------===//

/// A made-up environment: what the Slurm allocation would set.
EnvLookup fakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char *name) -> const char * {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

ClusterSpec slurmOk(llvm::StringRef spec,
                    std::map<std::string, std::string> vars) {
  llvm::Expected<ClusterSpec> cluster =
      parseClusterSpec(spec, fakeEnv(std::move(vars)));
  if (!cluster) {
    ADD_FAILURE() << spec.str() << ": " << message(cluster.takeError());
    return {};
  }
  return *cluster;
}

std::string slurmError(llvm::StringRef spec,
                       std::map<std::string, std::string> vars) {
  llvm::Expected<ClusterSpec> cluster =
      parseClusterSpec(spec, fakeEnv(std::move(vars)));
  if (cluster) {
    ADD_FAILURE() << "parsed: " << spec.str();
    return "";
  }
  return message(cluster.takeError());
}

TEST(SlurmCluster, NodesAndGpusFromTheAllocation) {
  // sbatch --nodes=4 --gpus-per-node=8: the preset's node, 4 of them.
  ClusterSpec c = slurmOk("slurm:dgx-h100", {{"SLURM_JOB_NUM_NODES", "4"},
                                             {"SLURM_GPUS_ON_NODE", "8"},
                                             {"SLURM_JOB_ID", "1234"}});
  EXPECT_EQ(c.name, "slurm:dgx-h100, job 1234");
  EXPECT_EQ(c.nodes, 4);
  EXPECT_EQ(c.gpusPerNode, 8);
  ClusterSpec preset = parseOk("dgx-h100:4");
  preset.name = c.name;
  expectSame(c, preset);

  // Fewer GPUs than the node has: the plan uses those, over the same links.
  ClusterSpec half =
      slurmOk("slurm:dgx-a100-80gb",
              {{"SLURM_NNODES", "2"}, {"SLURM_GPUS_ON_NODE", "4"}});
  EXPECT_EQ(half.name, "slurm:dgx-a100-80gb");
  EXPECT_EQ(half.worldSize(), 8);
  EXPECT_EQ(half.device.name, "a100-80gb");
  EXPECT_EQ(half.intraNode.gbytesPerS, 300);
}

TEST(SlurmCluster, GpuVariablesInOrder) {
  // SLURM_GPUS_ON_NODE (what this node got) wins over the request.
  EXPECT_EQ(slurmOk("slurm:dgx-h100", {{"SLURM_JOB_NUM_NODES", "2"},
                                       {"SLURM_GPUS_ON_NODE", "2"},
                                       {"SLURM_GPUS_PER_NODE", "h100:8"}})
                .gpusPerNode,
            2);
  // --gpus-per-node=[type:]N.
  EXPECT_EQ(slurmOk("slurm:dgx-h100", {{"SLURM_JOB_NUM_NODES", "2"},
                                       {"SLURM_GPUS_PER_NODE", "h100:4"}})
                .gpusPerNode,
            4);
  EXPECT_EQ(slurmOk("slurm:dgx-h100", {{"SLURM_JOB_NUM_NODES", "2"},
                                       {"SLURM_GPUS_PER_NODE", "6"}})
                .gpusPerNode,
            6);
  // The job's GPU IDs on this node.
  EXPECT_EQ(slurmOk("slurm:dgx-h100", {{"SLURM_JOB_NUM_NODES", "1"},
                                       {"SLURM_JOB_GPUS", "0,1,2,5"}})
                .gpusPerNode,
            4);
  EXPECT_EQ(slurmOk("slurm:dgx-h100",
                    {{"SLURM_JOB_NUM_NODES", "1"}, {"SLURM_JOB_GPUS", "0-3,6"}})
                .gpusPerNode,
            5);
  // SLURM_JOB_NUM_NODES wins over the older SLURM_NNODES.
  EXPECT_EQ(slurmOk("slurm:dgx-h100", {{"SLURM_JOB_NUM_NODES", "3"},
                                       {"SLURM_NNODES", "5"},
                                       {"SLURM_GPUS_ON_NODE", "8"}})
                .nodes,
            3);
}

TEST(SlurmCluster, Errors) {
  EXPECT_EQ(slurmError("slurm:dgx-h100", {}),
            "--cluster 'slurm:dgx-h100': not inside a Slurm allocation "
            "(neither SLURM_JOB_NUM_NODES nor SLURM_NNODES is set); run "
            "autopar-compile in the sbatch script or salloc shell of the job, "
            "or give the node count: dgx-h100:NODES");
  EXPECT_EQ(slurmError("slurm:dgx-h100", {{"SLURM_JOB_NUM_NODES", "four"},
                                          {"SLURM_GPUS_ON_NODE", "8"}}),
            "--cluster 'slurm:dgx-h100': SLURM_JOB_NUM_NODES='four' is not a "
            "whole number of nodes from 1 to 100000");
  EXPECT_NE(slurmError("slurm:dgx-h100",
                       {{"SLURM_NNODES", "0"}, {"SLURM_GPUS_ON_NODE", "8"}})
                .find("SLURM_NNODES='0' is not a whole number of nodes"),
            std::string::npos);
  EXPECT_NE(slurmError("slurm:dgx-h100", {{"SLURM_JOB_NUM_NODES", " 2"},
                                          {"SLURM_GPUS_ON_NODE", "8"}})
                .find("SLURM_JOB_NUM_NODES=' 2' is not"),
            std::string::npos);
  EXPECT_EQ(slurmError("slurm:dgx-h100", {{"SLURM_JOB_NUM_NODES", "2"},
                                          {"SLURM_GPUS_ON_NODE", "8(x2)"}}),
            "--cluster 'slurm:dgx-h100': SLURM_GPUS_ON_NODE='8(x2)' is not a "
            "whole number of GPUs from 0 to 1024");
  EXPECT_NE(slurmError("slurm:dgx-h100", {{"SLURM_JOB_NUM_NODES", "2"},
                                          {"SLURM_GPUS_PER_NODE", "h100:"}})
                .find("SLURM_GPUS_PER_NODE='h100:' is not [type:]count"),
            std::string::npos);
  EXPECT_NE(
      slurmError("slurm:dgx-h100", {{"SLURM_JOB_NUM_NODES", "2"},
                                    {"SLURM_GPUS_PER_NODE", "h100:4,a100:4"}})
          .find("asks for several GPU types per node; autopar plans "
                "for identical GPUs"),
      std::string::npos);
  EXPECT_NE(slurmError("slurm:dgx-h100", {{"SLURM_JOB_NUM_NODES", "1"},
                                          {"SLURM_JOB_GPUS", "0,,1"}})
                .find("SLURM_JOB_GPUS='0,,1' is not a comma-separated list"),
            std::string::npos);
  EXPECT_EQ(slurmError("slurm:dgx-h100", {{"SLURM_JOB_NUM_NODES", "2"}}),
            "--cluster 'slurm:dgx-h100': the Slurm allocation has no GPUs "
            "(none of SLURM_GPUS_ON_NODE, SLURM_GPUS_PER_NODE, SLURM_JOB_GPUS "
            "is set); request them (--gpus-per-node=8 or --gres=gpu:8), or "
            "give the node count: dgx-h100:NODES");
  EXPECT_NE(slurmError("slurm:dgx-h100", {{"SLURM_JOB_NUM_NODES", "2"},
                                          {"SLURM_GPUS_ON_NODE", "0"}})
                .find("the allocation has no GPUs"),
            std::string::npos);
  EXPECT_EQ(slurmError("slurm:t4-x4", {{"SLURM_JOB_NUM_NODES", "2"},
                                       {"SLURM_GPUS_ON_NODE", "8"}}),
            "--cluster 'slurm:t4-x4': SLURM_GPUS_ON_NODE='8': 8 GPUs per "
            "node, but a t4-x4 node has 4; name the node preset of the "
            "allocation's nodes, or describe them in a JSON cluster file "
            "(docs/clusters.md)");
  EXPECT_NE(slurmError("slurm:dgx-h100", {{"SLURM_JOB_NUM_NODES", "2"},
                                          {"SLURM_GPUS_ON_NODE", "8"},
                                          {"SLURM_HET_SIZE", "2"}})
                .find("SLURM_HET_SIZE='2': a heterogeneous job (several node "
                      "types); autopar plans for identical nodes"),
            std::string::npos);
  // The node type is checked first: no allocation needed to see the typo.
  EXPECT_NE(slurmError("slurm:dgx-h10", {})
                .find("unknown node preset 'dgx-h10'; give slurm:NODE with "
                      "NODE one of dgx-a100-40gb, dgx-a100-80gb"),
            std::string::npos);
  EXPECT_NE(slurmError("slurm", {}).find("no node type; give slurm:NODE"),
            std::string::npos);
  EXPECT_NE(slurmError("slurm:h100-sxm", {})
                .find("'h100-sxm' is a GPU, not a node type"),
            std::string::npos);
  // The list of spellings names it.
  EXPECT_NE(specError("foo:3").find("slurm:NODE"), std::string::npos);
}

//===----------------------------------------------------------------------===//
// local:N
//===----------------------------------------------------------------------===//

TEST(LocalCluster, SharesTheHostEvenly) {
  ClusterSpec c = makeLocalCluster(2, fakeHost());
  EXPECT_EQ(c.name, "local:2");
  EXPECT_EQ(c.nodes, 1);
  EXPECT_EQ(c.gpusPerNode, 2);
  EXPECT_EQ(c.worldSize(), 2);
  EXPECT_TRUE(c.isLocalCpu());
  EXPECT_EQ(c.device.arch, "cpu");
  EXPECT_EQ(c.defaultPrecision(), Precision::FP32);
  // 8 cores x 3 GHz x 32 FLOP/cycle, halved.
  EXPECT_DOUBLE_EQ(c.device.peakFlops(Precision::FP32), 384e9);
  EXPECT_EQ(c.device.peakFlops(Precision::BF16), 0);
  EXPECT_DOUBLE_EQ(c.device.memoryGiB, 32);
  EXPECT_DOUBLE_EQ(c.device.memoryGBytesPerS, 40);
  EXPECT_DOUBLE_EQ(c.device.cpuCores, 4);
  // More ranks than cores: each owns a fraction of one.
  EXPECT_DOUBLE_EQ(makeLocalCluster(16, fakeHost()).device.cpuCores, 0.5);
  EXPECT_EQ(c.intraNode.kind, "shm");
  EXPECT_EQ(c.interNode.kind, "none");
  EXPECT_EQ(c.interNode.nodeBytesPerS(), 0);
  EXPECT_NE(c.device.source.find("8 cores x 3.00 GHz x 32 FLOP/cycle"),
            std::string::npos)
      << c.device.source;
}

TEST(LocalCluster, DetectsThisMachine) {
  HostInfo host = detectHost();
  EXPECT_GE(host.physicalCores, 1);
  EXPECT_GT(host.ghz, 0);
  EXPECT_GT(host.fp32FlopsPerCycle, 0);
  EXPECT_GT(host.ramGiB, 0);

  ClusterSpec one = parseOk("local");
  EXPECT_EQ(one.worldSize(), 1);
  ClusterSpec four = parseOk("local:4");
  EXPECT_EQ(four.worldSize(), 4);
  EXPECT_EQ(four.nodes, 1);
  EXPECT_TRUE(four.isLocalCpu());
  EXPECT_NEAR(four.device.memoryGiB * 4, one.device.memoryGiB, 1e-6);
  EXPECT_GT(four.device.peakFlops(Precision::FP32), 0);
}

//===----------------------------------------------------------------------===//
// The JSON file
//===----------------------------------------------------------------------===//

TEST(ClusterJson, CustomGpuObject) {
  ClusterSpec c = llvm::cantFail(parseClusterJson(kCustomGpu, "c.json"));
  EXPECT_EQ(c.name, "c.json"); // no "name": the file names it
  EXPECT_EQ(c.device.name, "my-gpu");
  EXPECT_EQ(c.device.arch, "sm_90");
  EXPECT_DOUBLE_EQ(c.device.peakFlops(Precision::BF16), 400e12);
  EXPECT_EQ(c.device.peakFlops(Precision::TF32), 0);
  EXPECT_EQ(c.worldSize(), 8);
  EXPECT_EQ(c.intraNode.kind, "pcie");
  EXPECT_EQ(c.interNode.nicsPerNode, 1);
}

TEST(ClusterJson, RoundTripsEveryPreset) {
  std::vector<ClusterSpec> clusters;
  for (const NodePreset &node : getNodePresets())
    clusters.push_back(parseOk(node.name + ":2"));
  clusters.push_back(makeLocalCluster(3, fakeHost()));
  clusters.push_back(llvm::cantFail(parseClusterJson(kCustomGpu, "c.json")));
  for (const ClusterSpec &c : clusters) {
    SCOPED_TRACE(c.name);
    std::string text = llvm::formatv("{0:2}", clusterToJson(c)).str();
    llvm::Expected<ClusterSpec> back = parseClusterJson(text, "rt.json");
    ASSERT_TRUE(!!back) << message(back.takeError()) << "\n" << text;
    expectSame(c, *back);
  }
}

TEST(ClusterJson, SyntaxAndShape) {
  EXPECT_EQ(jsonError("{").rfind("c.json: invalid JSON: ", 0), 0u);
  EXPECT_EQ(jsonError("[]"),
            "c.json: a cluster description is a JSON object, not []");
}

TEST(ClusterJson, UnknownAndMissingKeys) {
  EXPECT_EQ(jsonError(edited(kExample,
                             [](json::Object &o) {
                               o["gpus_per_nodes"] = 8;
                               o.erase("gpus_per_node");
                             })),
            "c.json: unknown key 'gpus_per_nodes'; did you mean "
            "'gpus_per_node'?");
  EXPECT_EQ(
      jsonError(edited(kExample, [](json::Object &o) { o["extra"] = 1; })),
      "c.json: unknown key 'extra'; expected one of: name, nodes, "
      "gpus_per_node, gpu, intra_node, inter_node");
  EXPECT_EQ(jsonError(edited(kExample,
                             [](json::Object &o) {
                               sub(o, "intra_node")["bandwidth"] = 300;
                             })),
            "c.json: unknown key 'intra_node.bandwidth'; expected one of: "
            "kind, gbytes_per_s, latency_us, source");
  EXPECT_EQ(
      jsonError(edited(kExample, [](json::Object &o) { o.erase("nodes"); })),
      "c.json: missing key 'nodes' (number of nodes)");
  EXPECT_EQ(jsonError(edited(kExample,
                             [](json::Object &o) {
                               sub(o, "intra_node").erase("latency_us");
                             })),
            "c.json: missing key 'intra_node.latency_us' (microseconds per "
            "message)");
  EXPECT_NE(jsonError(edited(kExample,
                             [](json::Object &o) {
                               sub(o, "inter_node").erase("nic_gbits_per_s");
                             }))
                .find("missing key 'inter_node.nic_gbits_per_s'"),
            std::string::npos);
  EXPECT_NE(jsonError(edited(kExample, [](json::Object &o) { o.erase("gpu"); }))
                .find("missing key 'gpu'"),
            std::string::npos);
  EXPECT_NE(jsonError(edited(kExample,
                             [](json::Object &o) { o.erase("inter_node"); }))
                .find("missing key 'inter_node'"),
            std::string::npos);
}

TEST(ClusterJson, HeterogeneousNodesAreOneError) {
  const std::string tail =
      ": autopar plans for identical nodes (\"nodes\": a count of nodes "
      "that have the same \"gpus_per_node\", \"gpu\", \"intra_node\" "
      "and \"inter_node\"); describe one node type: the partition the job "
      "runs in, or the smaller node type (fewer GPUs, less memory) with all "
      "the nodes, whose plan runs on the larger ones too";
  auto top = [](llvm::StringRef key, json::Value v) {
    return jsonError(
        edited(kExample, [&](json::Object &o) { o[key] = std::move(v); }));
  };
  // "nodes" as a list of groups, or a map of node type to count.
  EXPECT_EQ(top("nodes",
                json::Array{json::Object{{"count", 4}, {"gpu", "a100-80gb"}},
                            json::Object{{"count", 2}, {"gpu", "h100-sxm"}}}),
            "c.json: key 'nodes': several groups of nodes" + tail);
  EXPECT_EQ(top("nodes", json::Object{{"a100", 4}, {"h100", 2}}),
            "c.json: key 'nodes': several groups of nodes" + tail);
  EXPECT_EQ(top("gpu", json::Array{"a100-80gb", "h100-sxm"}),
            "c.json: key 'gpu': several GPU types" + tail);
  EXPECT_EQ(top("gpus_per_node", json::Array{8, 4}),
            "c.json: key 'gpus_per_node': several GPU counts per node" + tail);
  EXPECT_EQ(top("intra_node", json::Array{}),
            "c.json: key 'intra_node': several intra-node links" + tail);
  EXPECT_EQ(top("inter_node", json::Array{}),
            "c.json: key 'inter_node': several networks" + tail);
  // Keys other tools use for groups of nodes, even beside a valid file.
  for (const char *key : {"partitions", "node_groups", "node_types"})
    EXPECT_EQ(top(key, json::Array{}),
              "c.json: key '" + std::string(key) + "': groups of nodes" + tail);
  // A list of whole cluster descriptions.
  EXPECT_EQ(jsonError("[" + std::string(kExample) + ", " + kCustomGpu + "]"),
            "c.json: a list of 2 cluster descriptions: " + tail.substr(2));
  // Not a list of descriptions: the usual shape error.
  EXPECT_EQ(jsonError("[1]"),
            "c.json: a cluster description is a JSON object, not [1]");
}

TEST(ClusterJson, WrongTypesAndUnits) {
  auto intra = [](json::Value v) {
    return jsonError(edited(kExample, [&](json::Object &o) {
      sub(o, "intra_node")["gbytes_per_s"] = v;
    }));
  };
  EXPECT_EQ(intra("300GB/s"),
            "c.json: key 'intra_node.gbytes_per_s': \"300GB/s\" is not a "
            "positive number (GB/s per GPU per direction)");
  EXPECT_EQ(intra(-5), "c.json: key 'intra_node.gbytes_per_s': -5 is not a "
                       "positive number (GB/s per GPU per direction)");
  EXPECT_NE(intra(0).find("0 is not a positive number"), std::string::npos);
  EXPECT_NE(intra(nullptr).find("null is not a positive number"),
            std::string::npos);
  EXPECT_NE(intra(3e11).find("implausibly large for GB/s per GPU per "
                             "direction (at most 10000); is it in bytes/s?"),
            std::string::npos);

  auto top = [](llvm::StringRef key, json::Value v) {
    return jsonError(
        edited(kExample, [&](json::Object &o) { o[key] = std::move(v); }));
  };
  EXPECT_EQ(top("nodes", 0), "c.json: key 'nodes': 0 is not a whole number "
                             "from 1 to 100000 (number of nodes)");
  EXPECT_NE(top("nodes", 100001).find("100001 is not a whole number"),
            std::string::npos);
  EXPECT_NE(top("nodes", 2.5).find("2.5 is not a whole number"),
            std::string::npos);
  EXPECT_NE(top("nodes", "4").find("\"4\" is not a whole number"),
            std::string::npos);
  EXPECT_EQ(top("gpus_per_node", 0),
            "c.json: key 'gpus_per_node': 0 is not a whole number from 1 to "
            "1024 (devices per node)");
  EXPECT_EQ(top("name", ""), "c.json: key 'name': \"\" is not a non-empty "
                             "string");
  EXPECT_NE(top("intra_node", 300)
                .find("key 'intra_node': 300 is not an "
                      "object"),
            std::string::npos);
  std::string gpu = top("gpu", "b300");
  EXPECT_NE(gpu.find("key 'gpu': \"b300\" is not a device preset; presets: "
                     "a100-40gb, a100-80gb"),
            std::string::npos)
      << gpu;
  EXPECT_NE(top("gpu", 5).find("neither a device preset name nor an object"),
            std::string::npos);

  EXPECT_EQ(jsonError(edited(kExample,
                             [](json::Object &o) {
                               sub(o, "intra_node")["kind"] = "ethernet";
                             })),
            "c.json: key 'intra_node.kind': \"ethernet\" is not one of: "
            "nvswitch, nvlink, pcie, shm");
  EXPECT_NE(jsonError(edited(kExample,
                             [](json::Object &o) {
                               sub(o, "inter_node")["nics_per_node"] = 0;
                             }))
                .find("key 'inter_node.nics_per_node': 0 is not a whole "
                      "number from 1 to 64 (network cards per node)"),
            std::string::npos);
  EXPECT_NE(jsonError(edited(kExample,
                             [](json::Object &o) {
                               sub(o, "inter_node")["latency_us"] = -1;
                             }))
                .find("-1 is not a non-negative number (microseconds"),
            std::string::npos);
  EXPECT_NE(jsonError(edited(kExample,
                             [](json::Object &o) {
                               sub(o, "inter_node")["source"] = 5;
                             }))
                .find("key 'inter_node.source': 5 is not a non-empty string"),
            std::string::npos);
}

TEST(ClusterJson, GpuObjectErrors) {
  auto gpu = [](const std::function<void(json::Object &)> &edit) {
    return jsonError(
        edited(kCustomGpu, [&](json::Object &o) { edit(sub(o, "gpu")); }));
  };
  EXPECT_EQ(gpu([](json::Object &g) { g["memory_gib"] = 0; }),
            "c.json: key 'gpu.memory_gib': 0 is not a positive number "
            "(device memory, GiB)");
  EXPECT_NE(gpu([](json::Object &g) { g["memory_gib"] = 80e9; })
                .find("is implausibly large for device memory, GiB (at most "
                      "65536); is it in bytes?"),
            std::string::npos);
  EXPECT_EQ(gpu([](json::Object &g) { sub(g, "peak_tflops").erase("bf16"); }),
            "c.json: missing key 'gpu.peak_tflops.bf16' (dense peak TFLOP/s, "
            "0 when unsupported)");
  EXPECT_EQ(gpu([](json::Object &g) { sub(g, "peak_tflops")["fp32"] = 0; }),
            "c.json: key 'gpu.peak_tflops.fp32': 0 is not a positive number "
            "(dense peak TFLOP/s)");
  EXPECT_NE(gpu([](json::Object &g) { sub(g, "peak_tflops")["fp8"] = 1; })
                .find("unknown key 'gpu.peak_tflops.fp8'; did you mean "
                      "'gpu.peak_tflops.fp32'?"),
            std::string::npos);
  EXPECT_EQ(gpu([](json::Object &g) {
              g["memory_gb"] = 64;
              g.erase("memory_gib");
            }),
            "c.json: unknown key 'gpu.memory_gb'; did you mean "
            "'gpu.memory_gib'?");
  EXPECT_NE(gpu([](json::Object &g) {
              g["arch"] = "ampere";
            }).find("key 'gpu.arch': \"ampere\" is not \"sm_NN\""),
            std::string::npos);
  EXPECT_NE(gpu([](json::Object &g) {
              g.erase("name");
            }).find("missing key 'gpu.name'"),
            std::string::npos);
  EXPECT_NE(gpu([](json::Object &g) {
              g["peak_tflops"] = 312;
            }).find("key 'gpu.peak_tflops': 312 is not an object"),
            std::string::npos);
  EXPECT_EQ(gpu([](json::Object &g) { g["cpu_cores"] = 4; }),
            "c.json: key 'gpu.cpu_cores': is only for CPU ranks (\"arch\": "
            "\"cpu\")");
  EXPECT_EQ(gpu([](json::Object &g) {
              g["arch"] = "cpu";
              g["cpu_cores"] = 0;
            }),
            "c.json: key 'gpu.cpu_cores': 0 is not a positive number (cores "
            "one CPU rank owns)");
  EXPECT_NE(gpu([](json::Object &g) { g["memory_gbytes_per_s"] = "2 TB/s"; })
                .find("\"2 TB/s\" is not a positive number (device memory "
                      "bandwidth, GB/s)"),
            std::string::npos);
}

TEST(ClusterJson, NoNetwork) {
  auto single = [](const std::function<void(json::Object &)> &edit) {
    return edited(kExample, [&](json::Object &o) {
      o["inter_node"] = json::Object{{"kind", "none"}};
      edit(o);
    });
  };
  EXPECT_EQ(jsonError(single([](json::Object &) {})),
            "c.json: key 'inter_node.kind': \"none\" needs \"nodes\": 1, not "
            "16");
  ClusterSpec c = llvm::cantFail(parseClusterJson(
      single([](json::Object &o) { o["nodes"] = 1; }), "c.json"));
  EXPECT_EQ(c.interNode.kind, "none");
  EXPECT_EQ(c.interNode.nodeBytesPerS(), 0);
  EXPECT_EQ(jsonError(single([](json::Object &o) {
              o["nodes"] = 1;
              sub(o, "inter_node")["nic_gbits_per_s"] = 200;
            })),
            "c.json: key 'inter_node.nic_gbits_per_s': 200 must be 0 or "
            "absent when inter_node.kind is \"none\"");
}

} // namespace
