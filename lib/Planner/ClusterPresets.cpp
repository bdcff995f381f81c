//===- ClusterPresets.cpp - Device and node presets with their sources ----===//
//
// Every number here comes from the document its `source` names; the table in
// docs/clusters.md repeats them. Peaks are dense: datasheets print sparsity
// figures (marked *) at twice the dense rate, and those are halved here.
// Links are per device and per direction; datasheets quote NVLink and PCIe
// bidirectionally, so those are halved too.
//
// Latencies are NCCL's own per-step model (NCCL 2.30.7, src/graph/tuning.cc,
// default hwLatencies, ring algorithm, Simple protocol: NVLink 3.4 us, PCIe
// 5.7 us, network 14 us), the protocol that carries the large messages a plan
// is dominated by.
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/Cluster.h"

using namespace autopar;

namespace {
constexpr double kNvlinkLatencyUs = 3.4;
constexpr double kPcieLatencyUs = 5.7;
constexpr double kNetLatencyUs = 14.0;
constexpr const char *kLatencySource =
    "latency: NCCL 2.30.7 src/graph/tuning.cc hwLatencies (ring, Simple)";

const char *kA100Whitepaper =
    "NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020), Table 1; "
    "https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/"
    "nvidia-ampere-architecture-whitepaper.pdf";
const char *kA100Datasheet =
    "NVIDIA A100 Tensor Core GPU datasheet (80GB SXM column); "
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf";
const char *kH100Datasheet =
    "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column, sparsity "
    "figures halved); https://resources.nvidia.com/en-us-tensor-core/"
    "nvidia-tensor-core-gpu-datasheet";
const char *kH200Datasheet =
    "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column, sparsity "
    "figures halved); https://www.nvidia.com/en-us/data-center/h200/";
const char *kH800Datasheet =
    "NVIDIA H800 Tensor Core GPU datasheet (H800 SXM column, sparsity "
    "figures halved); https://www.nvidia.cn/data-center/h800/";
const char *kL40SDatasheet = "NVIDIA L40S datasheet (sparsity figures halved); "
                             "https://www.nvidia.com/en-us/data-center/l40s/";
const char *kAdaWhitepaper =
    "NVIDIA Ada GPU Architecture whitepaper v2.1, Appendix A, Table 2 "
    "(GeForce RTX 4090; fp16/bf16 with fp32 accumulate); "
    "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/"
    "nvidia-ada-gpu-architecture.pdf";
const char *kL4Datasheet = "NVIDIA L4 Tensor Core GPU datasheet (sparsity "
                           "figures halved); "
                           "https://www.nvidia.com/en-us/data-center/l4/";
const char *kT4Datasheet =
    "NVIDIA T4 Tensor Core GPU datasheet; "
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/"
    "tesla-t4/t4-tensor-core-datasheet-951643.pdf";
const char *kV100Datasheet =
    "NVIDIA Tesla V100 datasheet (V100 SXM2 column); "
    "https://images.nvidia.com/content/technologies/volta/pdf/"
    "volta-v100-datasheet-update-us-1165301-r5.pdf";
} // namespace

llvm::ArrayRef<DeviceSpec> autopar::getDevicePresets() {
  // name, GiB, fp32, tf32, bf16, fp16 (dense TFLOP/s), GB/s, arch, source.
  static const DeviceSpec presets[] = {
      {"a100-40gb", 40, 19.5, 156, 312, 312, 1555, "sm_80", kA100Whitepaper},
      {"a100-80gb", 80, 19.5, 156, 312, 312, 2039, "sm_80", kA100Datasheet},
      {"h100-sxm", 80, 67, 494.7, 989.4, 989.4, 3350, "sm_90", kH100Datasheet},
      {"h200-sxm", 141, 67, 494.7, 989.4, 989.4, 4800, "sm_90", kH200Datasheet},
      {"h800-sxm", 80, 67, 494.7, 989.4, 989.4, 3350, "sm_90", kH800Datasheet},
      {"l40s", 48, 91.6, 183, 362.05, 362.05, 864, "sm_89", kL40SDatasheet},
      {"rtx-4090", 24, 82.6, 82.6, 165.2, 165.2, 1008, "sm_89", kAdaWhitepaper},
      {"l4", 24, 30.3, 60, 121, 121, 300, "sm_89", kL4Datasheet},
      // Turing and Volta tensor cores run fp16 only: no tf32, no bf16.
      {"t4", 16, 8.1, 0, 0, 65, 320, "sm_75", kT4Datasheet},
      {"v100-sxm2-32gb", 32, 15.7, 0, 0, 125, 900, "sm_70", kV100Datasheet},
  };
  return presets;
}

llvm::ArrayRef<NodePreset> autopar::getNodePresets() {
  auto nvswitch = [](double gbytesPerS, const char *source) {
    return IntraNodeLink{"nvswitch", gbytesPerS, kNvlinkLatencyUs,
                         std::string(source) + "; " + kLatencySource};
  };
  auto pcie = [](double gbytesPerS, const char *source) {
    return IntraNodeLink{"pcie", gbytesPerS, kPcieLatencyUs,
                         std::string(source) + "; " + kLatencySource};
  };
  auto net = [](const char *kind, double gbits, int64_t nics,
                const char *source) {
    return InterNodeLink{kind, gbits, nics, kNetLatencyUs,
                         std::string(source) + "; " + kLatencySource};
  };
  const char *dgxA100Link =
      "NVIDIA DGX A100 datasheet: 6 NVSwitches; NVLink3 600 GB/s "
      "bidirectional per GPU (A100 datasheet); "
      "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/"
      "nvidia-dgx-a100-datasheet.pdf";
  const char *dgxA100Net =
      "NVIDIA DGX A100 datasheet: 8x single-port ConnectX-6 VPI, 200 Gb/s "
      "HDR InfiniBand; https://www.nvidia.com/content/dam/en-zz/Solutions/"
      "Data-Center/nvidia-dgx-a100-datasheet.pdf";
  const char *hopperLink =
      "NVIDIA DGX BasePOD reference architecture, Core Components: DGX "
      "H100/H200 have four NVSwitch chips; NVLink4 900 GB/s bidirectional per "
      "GPU (H100 and H200 datasheets)";
  const char *hopperNet =
      "NVIDIA DGX BasePOD reference architecture, Core Components (DGX "
      "H100/H200): eight single-port ConnectX-7 VPI, 400 Gb/s InfiniBand; "
      "https://docs.nvidia.com/dgx-basepod/reference-architecture-"
      "infrastructure-foundation-enterprise-ai/latest/core-components.html";
  const char *h800Link = "NVIDIA H800 datasheet: NVLink 400 GB/s "
                         "bidirectional per GPU; https://www.nvidia.cn/"
                         "data-center/h800/";
  const char *h800Net =
      "DeepSeek-V3 Technical Report (arXiv:2412.19437) sec. 3.1: H800 nodes, "
      "one 400 Gb/s InfiniBand NIC per GPU (50 GB/s)";
  const char *gen4 = "PCIe Gen4 x16: 64 GB/s bidirectional (L40S and L4 "
                     "datasheets)";
  const char *gen3 = "PCIe Gen3 x16: 32 GB/s bidirectional (V100 PCIe "
                     "datasheet); T4 datasheet: x16 PCIe Gen3";
  const char *nvlink2 =
      "NVIDIA DGX-1 with Tesla V100 System Architecture whitepaper: hybrid "
      "cube-mesh, 6 NVLink2 links per GPU, 300 GB/s bidirectional (V100 "
      "datasheet); not every pair is linked";
  const char *dgx1Net = "NVIDIA DGX-1 with Tesla V100 System Architecture "
                        "whitepaper: 4x 100 Gb/s EDR InfiniBand";

  static const NodePreset presets[] = {
      {"dgx-a100-40gb", "a100-40gb", 8, nvswitch(300, dgxA100Link),
       net("infiniband", 200, 8, dgxA100Net)},
      {"dgx-a100-80gb", "a100-80gb", 8, nvswitch(300, dgxA100Link),
       net("infiniband", 200, 8, dgxA100Net)},
      {"dgx-h100", "h100-sxm", 8, nvswitch(450, hopperLink),
       net("infiniband", 400, 8, hopperNet)},
      {"hgx-h200", "h200-sxm", 8, nvswitch(450, hopperLink),
       net("infiniband", 400, 8, hopperNet)},
      {"hgx-h800", "h800-sxm", 8, nvswitch(200, h800Link),
       net("infiniband", 400, 8, h800Net)},
      {"l40s-x8", "l40s", 8, pcie(32, gen4),
       net("ethernet", 400, 1,
           "AWS EC2 g6e.48xlarge (8x L40S): 400 Gbps; "
           "https://aws.amazon.com/ec2/instance-types/g6e/")},
      {"pcie-4090x8", "rtx-4090", 8, pcie(32, gen4),
       net("ethernet", 100, 1,
           "assumption: one 100 Gb/s Ethernet NIC, common in 8-GPU "
           "consumer-card servers; no vendor reference design")},
      {"l4-x8", "l4", 8, pcie(32, gen4),
       net("ethernet", 100, 1,
           "AWS EC2 g6.48xlarge (8x L4): 100 Gbps; "
           "https://aws.amazon.com/ec2/instance-types/g6/")},
      {"t4-x4", "t4", 4, pcie(16, gen3),
       net("ethernet", 50, 1,
           "AWS EC2 g4dn.12xlarge (4x T4): 50 Gbps; "
           "https://aws.amazon.com/ec2/instance-types/g4/")},
      {"dgx1-v100", "v100-sxm2-32gb", 8,
       IntraNodeLink{"nvlink", 150, kNvlinkLatencyUs,
                     std::string(nvlink2) + "; " + kLatencySource},
       net("infiniband", 100, 4, dgx1Net)},
  };
  return presets;
}

const DeviceSpec *autopar::lookupDevicePreset(llvm::StringRef name) {
  for (const DeviceSpec &d : getDevicePresets())
    if (d.name == name)
      return &d;
  return nullptr;
}

const NodePreset *autopar::lookupNodePreset(llvm::StringRef name) {
  for (const NodePreset &n : getNodePresets())
    if (n.name == name)
      return &n;
  return nullptr;
}
