//===- Compute.cpp - Roofline time of one kernel --------------------------===//
//
// time = max(flops / (peak * eff(minDim)), bytes / (memoryBandwidth * memEff))
//
// The two efficiencies are the only constants here. None of them has been
// measured by this project yet: each is an assumption, marked as such, that
// bench/gpu/gemm_sweep.py calibrates (it prints the table these constants
// should be read from). docs/cost-model.md explains the choices.
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/CostModel.h"

#include <algorithm>

using namespace autopar;

namespace {

/// GPUs running cuBLAS(Lt) GEMMs and fused elementwise kernels.
/// - gemmMax 0.75: ASSUMPTION. Large bf16/fp16 cuBLAS GEMMs run below the
///   dense datasheet peak (clock throttling under tensor-core load, epilogue,
///   tile/wave quantization); 0.75 is a round guess to be replaced by the
///   plateau of `bench/gpu/gemm_sweep.py` (M=N=K=8192..16384).
/// - gemmHalfDim 128: ASSUMPTION. cuBLAS tiles are 64..256 on a side (NVIDIA,
///   "Matrix Multiplication Background User's Guide", DU-09799-001, sec. 2.3
///   "Typical Tile Dimensions in cuBLAS"); a dimension of about one tile
///   leaves most of each tile or most SMs idle, so we put the half point
///   there. Calibrate with the sweep's small sizes (256..2048).
/// - memory 0.80: ASSUMPTION. Streaming kernels do not reach the datasheet
///   HBM bandwidth (refresh, row switches, launch tail); calibrate with the
///   sweep's device-to-device copy.
constexpr EfficiencyCurve kGpuCurve = {
    0.75, 128, 0.80,
    "assumption, calibrate with bench/gpu/gemm_sweep.py (docs/cost-model.md)"};

/// CPU ranks (`local:N`) running OpenBLAS sgemm and generated loops.
/// - gemmMax 0.70, gemmHalfDim 32, memory 0.60: ASSUMPTIONS (BLAS register
///   blocks are 4..16 wide, so small GEMMs saturate earlier than on GPUs;
///   one core rarely streams at the socket's DRAM bandwidth). Calibrate with
///   `bench/gpu/gemm_sweep.py --device cpu`.
constexpr EfficiencyCurve kCpuCurve = {
    0.70, 32, 0.60,
    "assumption, calibrate with bench/gpu/gemm_sweep.py --device cpu "
    "(docs/cost-model.md)"};

/// Dense peak in FLOP/s for `p`. A precision the device lacks (0 in its
/// spec: bf16 on a V100, on most CPUs) falls back to fp32, which every device
/// has: data is converted and the arithmetic runs in fp32.
double peakFor(const DeviceSpec &device, Precision p) {
  double peak = device.peakFlops(p);
  return peak > 0 ? peak : device.peakFlops(Precision::FP32);
}

} // namespace

EfficiencyCurve autopar::efficiencyCurve(const DeviceSpec &device) {
  return device.isCpu() ? kCpuCurve : kGpuCurve;
}

double autopar::gemmEfficiency(const DeviceSpec &device, double minDim) {
  EfficiencyCurve curve = efficiencyCurve(device);
  if (minDim <= 0)
    return curve.gemmMax;
  return curve.gemmMax * minDim / (minDim + curve.gemmHalfDim);
}

ComputeCost autopar::computeTime(const ClusterSpec &cluster, Precision p,
                                 ComputeKind kind, double flops, double bytes,
                                 double minDim) {
  const DeviceSpec &device = cluster.device;
  EfficiencyCurve curve = efficiencyCurve(device);
  ComputeCost cost;
  cost.flops = std::max(0.0, flops);
  cost.bytes = std::max(0.0, bytes);

  // GEMMs run on the tensor cores (or the BLAS's FMA units) at the plan's
  // precision. Elementwise arithmetic runs on the fp32 vector units whatever
  // the storage type (bf16 is widened to fp32 in registers), at full rate:
  // those kernels are memory-bound, and their memory roof carries the
  // efficiency.
  double computeEff = 1.0, peak = 0;
  // On a CPU rank only BLAS uses all the rank's cores; the generated loops
  // (everything but GEMMs) run on one thread: one core's share of the peak
  // and of the bandwidth.
  double share = 1.0;
  if (device.isCpu() && kind != ComputeKind::Gemm && device.cpuCores > 1)
    share = 1.0 / device.cpuCores;
  if (kind == ComputeKind::Gemm) {
    computeEff = gemmEfficiency(device, minDim);
    peak = peakFor(device, p);
  } else {
    peak = peakFor(device, Precision::FP32) * share;
  }
  double computeSeconds =
      peak > 0 && cost.flops > 0 ? cost.flops / (peak * computeEff) : 0;

  double bandwidth = device.memoryGBytesPerS * 1e9 * share;
  double memorySeconds = bandwidth > 0 && cost.bytes > 0
                             ? cost.bytes / (bandwidth * curve.memory)
                             : 0;

  cost.memoryBound = memorySeconds > computeSeconds;
  cost.seconds = std::max(computeSeconds, memorySeconds);
  cost.efficiency = cost.memoryBound ? curve.memory : computeEff;
  return cost;
}
