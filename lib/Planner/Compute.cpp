//===- Compute.cpp - Roofline time of one kernel --------------------------===//
//
// time = max(flops / (peak * eff(minDim)), bytes / (memoryBandwidth * memEff))
//
// The two efficiencies are the only constants here. The GPU ones were
// measured on an H100 by bench/gpu/gemm_sweep.py (bench/RESULTS.md has the
// tables and the command); the CPU ones are still assumptions, marked as
// such. docs/cost-model.md explains the choices.
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/CostModel.h"

#include <algorithm>

using namespace autopar;

namespace {

/// GPUs running cuBLAS(Lt) GEMMs on the tensor cores (bf16, fp16; tf32 is
/// assumed to follow them) and fused elementwise kernels. MEASURED on one
/// H100 SXM 80GB (driver 580.159, torch 2.11 + CUDA 13.0 cuBLAS), 2026-11-25:
/// - gemmMax 0.745: the plateau of M=N=K=8192 and 16384 (743 and 741 of the
///   989.4 dense TFLOP/s) and the fit over the compute-bound thin-K GEMMs.
/// - gemmHalfDim 279: least squares over M=N=8192, K=512..4096 and the large
///   squares (K=64..256 are memory-bound there and modelled by the other
///   roof); wider than one cuBLAS tile, because a thin K also leaves the
///   tensor-core pipeline short of work per output tile.
/// - memory 0.90: a 4 GiB device-to-device copy moved 3000 GB/s (read +
///   write) of the datasheet's 3350.
/// Other GPUs use the same fractions of their own datasheet numbers until
/// they are measured.
constexpr EfficiencyCurve kGpuTensorCoreCurve = {
    0.745, 279, 0.90,
    "measured: H100 SXM, bf16 cuBLASLt, 2026-11-25 (bench/gpu/gemm_sweep.py, "
    "bench/RESULTS.md)"};

/// The same GPUs running fp32 GEMMs on the FMA units (autopar does not use
/// TF32 for fp32). MEASURED with the bf16 curve: plateau 51.9 of 66.9
/// TFLOP/s (0.775; fit 0.77), half point at 44 (fp32 GEMMs saturate early).
constexpr EfficiencyCurve kGpuFp32Curve = {
    0.77, 44, 0.90,
    "measured: H100 SXM, fp32 cuBLASLt without TF32, 2026-11-25 "
    "(bench/gpu/gemm_sweep.py, bench/RESULTS.md)"};

/// CPU ranks (`local:N`) running OpenBLAS sgemm and generated loops.
/// - gemmMax 0.70, gemmHalfDim 32, memory 0.60: ASSUMPTIONS (BLAS register
///   blocks are 4..16 wide, so small GEMMs saturate earlier than on GPUs;
///   one core rarely streams at the socket's DRAM bandwidth). Calibrate with
///   `bench/gpu/gemm_sweep.py --device cpu`.
constexpr EfficiencyCurve kCpuCurve = {
    0.70, 32, 0.60,
    "assumption, calibrate with bench/gpu/gemm_sweep.py --device cpu "
    "(docs/cost-model.md)"};

/// FlashAttention-class kernels on tensor cores, PUBLISHED: FlashAttention-2
/// (Dao 2023) reaches 50-73% of an A100's peak forward, rising with the
/// sequence (hdim 128: ~0.54 at 512 keys, ~0.73 at 16k); FlashAttention-3
/// (Shah et al. 2024) 75% of an H100's forward in bf16. Modelled as
/// max * keys / (keys + halfKeys). autopar's own kernels measured 11-17% on
/// an H200 (bench/RESULTS.md): the model prices the kernel class the plans
/// are compared with (Megatron-LM's published runs use it), not today's
/// autopar kernel.
constexpr double kAttentionMax = 0.75;
constexpr double kAttentionHalfKeys = 192;

/// Dense peak in FLOP/s for `p`. A precision the device lacks (0 in its
/// spec: bf16 on a V100, on most CPUs) falls back to fp32, which every device
/// has: data is converted and the arithmetic runs in fp32.
double peakFor(const DeviceSpec &device, Precision p) {
  double peak = device.peakFlops(p);
  return peak > 0 ? peak : device.peakFlops(Precision::FP32);
}

} // namespace

EfficiencyCurve autopar::efficiencyCurve(const DeviceSpec &device,
                                         Precision p) {
  if (device.isCpu())
    return kCpuCurve;
  // A precision the device lacks runs as fp32 (peakFor), on the FMA units.
  return p == Precision::FP32 || device.peakFlops(p) <= 0 ? kGpuFp32Curve
                                                          : kGpuTensorCoreCurve;
}

double autopar::gemmEfficiency(const DeviceSpec &device, double minDim,
                               Precision p) {
  EfficiencyCurve curve = efficiencyCurve(device, p);
  if (minDim <= 0)
    return curve.gemmMax;
  return curve.gemmMax * minDim / (minDim + curve.gemmHalfDim);
}

double autopar::attentionEfficiency(const DeviceSpec &device, double keys,
                                    Precision p) {
  // On CPUs and without tensor cores the kernel's tile products run like a
  // GEMM's inner loops.
  if (device.isCpu() || p == Precision::FP32 || device.peakFlops(p) <= 0)
    return efficiencyCurve(device, p).gemmMax;
  keys = std::max(1.0, keys);
  return kAttentionMax * keys / (keys + kAttentionHalfKeys);
}

ComputeCost autopar::computeTime(const ClusterSpec &cluster, Precision p,
                                 ComputeKind kind, double flops, double bytes,
                                 double minDim) {
  const DeviceSpec &device = cluster.device;
  EfficiencyCurve curve = efficiencyCurve(device, p);
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
    computeEff = gemmEfficiency(device, minDim, p);
    peak = peakFor(device, p);
  } else if (kind == ComputeKind::Attention) {
    // The CPU kernel runs on one thread, like the generated loops.
    computeEff = attentionEfficiency(device, minDim, p);
    peak = peakFor(device, p) * share;
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
