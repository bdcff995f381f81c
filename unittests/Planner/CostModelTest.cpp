//===- CostModelTest.cpp - Hand-computed cost model cases -----------------===//
//
// Each expected value is written out as the formula of docs/cost-model.md
// with the numbers of the test cluster, so a failure shows which term moved.
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/CostModel.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace autopar;

namespace {

constexpr double GiB = 1024.0 * 1024.0 * 1024.0;

/// An H100-SXM-like node, with round link numbers: NVSwitch 300 GB/s and
/// 2 us per GPU; 8 x 200 Gb/s InfiniBand NICs (200 GB/s per node), 5 us.
ClusterSpec testCluster(int64_t nodes) {
  ClusterSpec c;
  c.name = "test";
  c.nodes = nodes;
  c.gpusPerNode = 8;
  c.device.name = "test-gpu";
  c.device.memoryGiB = 80;
  c.device.peakTflopsFp32 = 67;
  c.device.peakTflopsTf32 = 494.7;
  c.device.peakTflopsBf16 = 989.4;
  c.device.peakTflopsFp16 = 989.4;
  c.device.memoryGBytesPerS = 3350;
  c.device.arch = "sm_90";
  c.intraNode.kind = "nvswitch";
  c.intraNode.gbytesPerS = 300;
  c.intraNode.latencyUs = 2;
  c.interNode.kind = "infiniband";
  c.interNode.nicGbitsPerS = 200;
  c.interNode.nicsPerNode = 8;
  c.interNode.latencyUs = 5;
  return c;
}

GroupPlacement placement(int64_t size, int64_t ranksPerNode,
                         int64_t concurrent = 1) {
  GroupPlacement g;
  g.size = size;
  g.ranksPerNode = ranksPerNode;
  g.concurrentGroupsPerNode = concurrent;
  return g;
}

// Relative tolerance: the model sums a handful of doubles.
#define EXPECT_CLOSE(actual, expected)                                         \
  EXPECT_NEAR(actual, expected, 1e-9 * std::abs(expected))

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

// The constants of docs/cost-model.md; changing one must update the doc.
TEST(ComputeTime, CurvesAreTheDocumentedMeasurements) {
  EfficiencyCurve gpu = efficiencyCurve(testCluster(1).device);
  EXPECT_EQ(gpu.gemmMax, 0.745);
  EXPECT_EQ(gpu.gemmHalfDim, 279);
  EXPECT_EQ(gpu.memory, 0.90);
  EfficiencyCurve fp32 =
      efficiencyCurve(testCluster(1).device, Precision::FP32);
  EXPECT_EQ(fp32.gemmMax, 0.77);
  EXPECT_EQ(fp32.gemmHalfDim, 44);
  EXPECT_EQ(fp32.memory, 0.90);
  // A device without bf16 (its peak 0) runs bf16 plans as fp32.
  DeviceSpec noBf16 = testCluster(1).device;
  noBf16.peakTflopsBf16 = 0;
  EXPECT_EQ(efficiencyCurve(noBf16, Precision::BF16).gemmHalfDim, 44);
  DeviceSpec cpu;
  cpu.arch = "cpu";
  EfficiencyCurve cpuCurve = efficiencyCurve(cpu);
  EXPECT_EQ(cpuCurve.gemmMax, 0.70);
  EXPECT_EQ(cpuCurve.gemmHalfDim, 32);
  EXPECT_EQ(cpuCurve.memory, 0.60);
  // Half of the plateau at one half-dimension; the plateau when unknown.
  EXPECT_CLOSE(gemmEfficiency(testCluster(1).device, 279), 0.3725);
  EXPECT_CLOSE(gemmEfficiency(testCluster(1).device, 0), 0.745);
  EXPECT_CLOSE(gemmEfficiency(testCluster(1).device, 44, Precision::FP32),
               0.385);
}

// An 8192^3 bf16 GEMM: 2MNK FLOPs against 3 * 8192^2 * 2 bytes is
// compute-bound, at eff(8192) = 0.745 * 8192 / (8192 + 279).
TEST(ComputeTime, LargeGemmIsComputeBound) {
  double n = 8192;
  double flops = 2 * n * n * n, bytes = 3 * n * n * 2;
  ComputeCost c = computeTime(testCluster(1), Precision::BF16,
                              ComputeKind::Gemm, flops, bytes, n);
  double eff = 0.745 * n / (n + 279);
  EXPECT_FALSE(c.memoryBound);
  EXPECT_CLOSE(c.efficiency, eff);
  EXPECT_CLOSE(c.seconds, flops / (989.4e12 * eff));
  EXPECT_EQ(c.flops, flops);
  EXPECT_EQ(c.bytes, bytes);
}

// Same M and N, K = 16, with an fp32 result (4 bytes an element): little
// work per byte, so the memory roof binds. (With bf16 everywhere the
// measured curve's thin-K penalty, 0.745 * 16 / (16 + 279) of the peak, is
// already slower than streaming the bytes: the sweep's K = 64 ran at 0.118
// of the peak, the curve says 0.139.)
TEST(ComputeTime, ThinGemmIsMemoryBound) {
  double m = 8192, n = 8192, k = 16;
  double flops = 2 * m * n * k, bytes = (m * k + k * n + m * n) * 4;
  ComputeCost c = computeTime(testCluster(1), Precision::BF16,
                              ComputeKind::Gemm, flops, bytes, k);
  EXPECT_TRUE(c.memoryBound);
  EXPECT_CLOSE(c.efficiency, 0.90);
  EXPECT_CLOSE(c.seconds, bytes / (3350e9 * 0.90));
  // The compute roof alone would have been shorter.
  EXPECT_LT(flops / (989.4e12 * 0.745 * k / (k + 279)), c.seconds);
}

// An fp32 add of 1e8 elements reads 8e8 and writes 4e8 bytes.
TEST(ComputeTime, ElementwiseAddIsMemoryBound) {
  double n = 1e8;
  ComputeCost c = computeTime(testCluster(1), Precision::BF16,
                              ComputeKind::Elementwise, n, 12 * n);
  EXPECT_TRUE(c.memoryBound);
  EXPECT_CLOSE(c.seconds, 12 * n / (3350e9 * 0.90));
}

// Elementwise arithmetic runs on the fp32 vector units at full rate, whatever
// the plan's precision.
TEST(ComputeTime, ElementwiseComputeUsesFp32Peak) {
  ComputeCost c = computeTime(testCluster(1), Precision::BF16,
                              ComputeKind::Elementwise, 1e12, 1e6);
  EXPECT_FALSE(c.memoryBound);
  EXPECT_CLOSE(c.seconds, 1e12 / 67e12);
  EXPECT_EQ(c.efficiency, 1.0);
}

// A CPU rank without bf16 units runs a bf16 GEMM at its fp32 peak, on the
// CPU curve.
TEST(ComputeTime, CpuFallsBackToFp32Peak) {
  ClusterSpec c = testCluster(1);
  c.device = DeviceSpec();
  c.device.arch = "cpu";
  c.device.peakTflopsFp32 = 1;
  c.device.memoryGBytesPerS = 20;
  double flops = 2.0 * 1024 * 1024 * 1024, bytes = 3.0 * 1024 * 1024 * 4;
  ComputeCost cost =
      computeTime(c, Precision::BF16, ComputeKind::Gemm, flops, bytes, 1024);
  double eff = 0.70 * 1024 / (1024 + 32);
  EXPECT_FALSE(cost.memoryBound);
  EXPECT_CLOSE(cost.seconds, flops / (1e12 * eff));
}

// A CPU rank with 4 cores: BLAS (GEMMs) uses all of them, autopar's
// generated loops one, so an elementwise op gets a quarter of the rank's
// bandwidth and peak; a device without cpuCores (a GPU) is not divided.
TEST(ComputeTime, CpuLoopsRunOnOneCore) {
  ClusterSpec c = testCluster(1);
  c.device = DeviceSpec();
  c.device.arch = "cpu";
  c.device.peakTflopsFp32 = 1;
  c.device.memoryGBytesPerS = 40;
  c.device.cpuCores = 4;
  double bytes = 64.0 * 1024 * 1024;
  ComputeCost add =
      computeTime(c, Precision::FP32, ComputeKind::Elementwise, 0, bytes, 0);
  EXPECT_CLOSE(add.seconds, bytes / (10e9 * 0.60));
  double flops = 2.0 * 1024 * 1024 * 1024;
  ComputeCost gemm =
      computeTime(c, Precision::FP32, ComputeKind::Gemm, flops, 0, 1024);
  EXPECT_CLOSE(gemm.seconds, flops / (1e12 * 0.70 * 1024 / (1024 + 32)));
  // Half a core (more ranks than cores): the loops get that half.
  c.device.cpuCores = 0.5;
  ComputeCost shared =
      computeTime(c, Precision::FP32, ComputeKind::Elementwise, 0, bytes, 0);
  EXPECT_CLOSE(shared.seconds, bytes / (40e9 * 0.60));
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

TEST(Collectives, BusBandwidthFactors) {
  EXPECT_CLOSE(busBandwidthFactor(Collective::AllReduce, 8), 2.0 * 7 / 8);
  EXPECT_CLOSE(busBandwidthFactor(Collective::AllGather, 8), 7.0 / 8);
  EXPECT_CLOSE(busBandwidthFactor(Collective::ReduceScatter, 8), 7.0 / 8);
  EXPECT_CLOSE(busBandwidthFactor(Collective::AllToAll, 8), 7.0 / 8);
  EXPECT_EQ(busBandwidthFactor(Collective::Broadcast, 8), 1.0);
  EXPECT_EQ(busBandwidthFactor(Collective::SendRecv, 2), 1.0);
  EXPECT_EQ(collectiveName(Collective::ReduceScatter), "reduce_scatter");
}

// 1 GiB over 8 GPUs of one NVSwitch node: 2(n-1)/n S / B + 2(n-1) alpha.
// Transformer Engine's chunked overlap: the first of tp chunks is exposed,
// and of the rest what the GEMMs cannot hide.
TEST(Collectives, TensorParallelOverlapExposesOneChunkAndTheExcess) {
  // Hidden: 8 ms of collectives behind 10 ms of GEMMs over tp 8.
  EXPECT_DOUBLE_EQ(overlappedCommSeconds(8e-3, 10e-3, 8), 1e-3);
  // Longer than the GEMMs: 1 ms + 7/8 of the 6 ms they cannot hide.
  EXPECT_DOUBLE_EQ(overlappedCommSeconds(8e-3, 2e-3, 8), 1e-3 + 7.0 / 8 * 6e-3);
  // No GEMM to hide behind: all of it, as without overlap.
  EXPECT_DOUBLE_EQ(overlappedCommSeconds(8e-3, 0, 8), 8e-3);
  // One rank or nothing to move: unchanged.
  EXPECT_DOUBLE_EQ(overlappedCommSeconds(8e-3, 10e-3, 1), 8e-3);
  EXPECT_DOUBLE_EQ(overlappedCommSeconds(0, 10e-3, 8), 0);
}

// The gradients' reduction hides behind the last backward; the parameters'
// gather, which needs the update, only behind the next forward.
TEST(Collectives, ParameterGatherHidesBehindTheNextForwardOnly) {
  // Both hidden: 2 ms reduction behind 4 ms of backward, 1 ms gather behind
  // 2 ms of forward.
  EXPECT_DOUBLE_EQ(dataParallelExposedSeconds(2e-3, 1e-3, 2e-3, 4e-3), 0);
  // The backward's spare time does not hide the gather: 3 ms of gather
  // against 2 ms of forward leaves 1 ms though the backward has 2 ms idle.
  EXPECT_DOUBLE_EQ(dataParallelExposedSeconds(2e-3, 3e-3, 2e-3, 4e-3), 1e-3);
  // Each longer than what hides it.
  EXPECT_DOUBLE_EQ(dataParallelExposedSeconds(5e-3, 3e-3, 2e-3, 4e-3), 2e-3);
  // ZeRO 0: no gather.
  EXPECT_DOUBLE_EQ(dataParallelExposedSeconds(5e-3, 0, 2e-3, 4e-3), 1e-3);
}

TEST(Collectives, AllReduceInsideOneNode) {
  CollectiveCost c = collectiveTime(testCluster(1), Collective::AllReduce, GiB,
                                    placement(8, 8));
  EXPECT_EQ(c.algorithm, "ring");
  EXPECT_CLOSE(c.busBytes, 2.0 * 7 / 8 * GiB);
  EXPECT_CLOSE(c.latencySeconds, 14 * 2e-6);
  EXPECT_CLOSE(c.seconds, 2.0 * 7 / 8 * GiB / 300e9 + 14 * 2e-6);
}

TEST(Collectives, AllGatherReduceScatterBroadcastInsideOneNode) {
  ClusterSpec cl = testCluster(1);
  double ring = 7.0 / 8 * GiB / 300e9 + 7 * 2e-6;
  EXPECT_CLOSE(
      collectiveTime(cl, Collective::AllGather, GiB, placement(8, 8)).seconds,
      ring);
  EXPECT_CLOSE(
      collectiveTime(cl, Collective::ReduceScatter, GiB, placement(8, 8))
          .seconds,
      ring);
  CollectiveCost a2a =
      collectiveTime(cl, Collective::AllToAll, GiB, placement(8, 8));
  EXPECT_EQ(a2a.algorithm, "p2p");
  EXPECT_CLOSE(a2a.seconds, ring);
  EXPECT_CLOSE(
      collectiveTime(cl, Collective::Broadcast, GiB, placement(8, 8)).seconds,
      GiB / 300e9 + 7 * 2e-6);
}

// 16 ranks, 8 per node on 2 nodes: reduce-scatter in the node, all-reduce of
// the 1/8 share across the nodes at 200 GB/s / 8 ranks = 25 GB/s each, then
// all-gather in the node. Ring and tree have the same latency over 2 nodes;
// the ring moves 2(g-1)/g = 1 share, the tree 2 shares.
TEST(Collectives, HierarchicalAllReduceAcrossTwoNodes) {
  CollectiveCost c = collectiveTime(testCluster(2), Collective::AllReduce, GiB,
                                    placement(16, 8));
  double intraPhase = 7 * 2e-6 + 7.0 / 8 * GiB / 300e9;
  double interPhase = 2 * 5e-6 + (GiB / 8) / 25e9;
  EXPECT_EQ(c.algorithm, "hierarchical");
  EXPECT_EQ(c.interNodeAlgorithm, "ring");
  EXPECT_CLOSE(c.seconds, 2 * intraPhase + interPhase);
  EXPECT_CLOSE(c.latencySeconds, 2 * 7 * 2e-6 + 2 * 5e-6);
  EXPECT_CLOSE(c.busBytes, 2.0 * 15 / 16 * GiB);
}

TEST(Collectives, HierarchicalAllGatherAndReduceScatter) {
  ClusterSpec cl = testCluster(2);
  double expected =
      (5e-6 + 0.5 * (GiB / 8) / 25e9) + (7 * 2e-6 + 7.0 / 8 * GiB / 300e9);
  CollectiveCost ag =
      collectiveTime(cl, Collective::AllGather, GiB, placement(16, 8));
  EXPECT_EQ(ag.algorithm, "hierarchical");
  EXPECT_CLOSE(ag.seconds, expected);
  EXPECT_CLOSE(
      collectiveTime(cl, Collective::ReduceScatter, GiB, placement(16, 8))
          .seconds,
      expected);
}

// The dp groups of a tp=8 layout: 2 ranks, one per node, 8 such groups per
// node share its NICs (25 GB/s each).
TEST(Collectives, DataParallelGroupsShareTheNics) {
  CollectiveCost c = collectiveTime(testCluster(2), Collective::AllReduce, GiB,
                                    placement(2, 1, 8));
  EXPECT_EQ(c.algorithm, "ring");
  EXPECT_CLOSE(c.seconds, 2 * 5e-6 + GiB / 25e9);
}

// One rank per node on 64 nodes: the tree's 2 log2(64) = 12 steps beat the
// ring's 126 for small buffers; the ring's fewer bytes win for large ones.
TEST(Collectives, TreeForSmallRingForLarge) {
  ClusterSpec cl = testCluster(64);
  CollectiveCost small =
      collectiveTime(cl, Collective::AllReduce, 1024, placement(64, 1, 8));
  EXPECT_EQ(small.algorithm, "tree");
  EXPECT_CLOSE(small.seconds, 12 * 5e-6 + 2 * 1024 / 25e9);
  CollectiveCost large =
      collectiveTime(cl, Collective::AllReduce, GiB, placement(64, 1, 8));
  EXPECT_EQ(large.algorithm, "ring");
  EXPECT_CLOSE(large.seconds, 126 * 5e-6 + 2.0 * 63 / 64 * GiB / 25e9);
}

// A lone send between nodes gets its own rail (one 200 Gb/s NIC), not the
// node's eight.
TEST(Collectives, SendRecvUsesOneRail) {
  ClusterSpec cl = testCluster(2);
  CollectiveCost across =
      collectiveTime(cl, Collective::SendRecv, GiB, placement(2, 1, 1));
  EXPECT_EQ(across.algorithm, "p2p");
  EXPECT_CLOSE(across.seconds, 5e-6 + GiB / 25e9);
  CollectiveCost inside =
      collectiveTime(cl, Collective::SendRecv, GiB, placement(2, 2));
  EXPECT_CLOSE(inside.seconds, 2e-6 + GiB / 300e9);
}

TEST(Collectives, AllToAllAcrossNodes) {
  // 16 ranks, 8 per node: 7/16 of the buffer on NVSwitch, 8/16 on the NICs
  // (25 GB/s per rank), at the same time.
  CollectiveCost c = collectiveTime(testCluster(2), Collective::AllToAll, GiB,
                                    placement(16, 8));
  double transfer = std::max(7.0 / 16 * GiB / 300e9, 8.0 / 16 * GiB / 25e9);
  EXPECT_CLOSE(c.seconds, 7 * 2e-6 + 8 * 5e-6 + transfer);
}

TEST(Collectives, GroupOfOneIsFree) {
  CollectiveCost c = collectiveTime(testCluster(1), Collective::AllReduce, GiB,
                                    placement(1, 1));
  EXPECT_EQ(c.seconds, 0);
  EXPECT_EQ(c.algorithm, "none");
}

//===----------------------------------------------------------------------===//
// Pipelines
//===----------------------------------------------------------------------===//

TEST(Pipeline, BubbleFraction) {
  EXPECT_CLOSE(bubbleFraction(4, 8), 3.0 / 8);
  EXPECT_EQ(bubbleFraction(1, 8), 0);
  EXPECT_EQ(scheduleName(PipelineSchedule::OneFOneB), "1f1b");
}

// Balanced: (m + p - 1) t; the bubble is (p-1)/m of the ideal m t.
TEST(Pipeline, BalancedStages) {
  double stages[] = {1, 1, 1, 1};
  PipelineTime t = pipelineTime(stages, 8, 0, PipelineSchedule::OneFOneB);
  EXPECT_CLOSE(t.seconds, 11);
  EXPECT_CLOSE(t.bubbleSeconds, 3);
  EXPECT_CLOSE(t.bubbleSeconds / (8 * 1), bubbleFraction(4, 8));
  // Each of the first micro-batch's 2(p-1) boundary crossings adds c.
  PipelineTime withP2p =
      pipelineTime(stages, 8, 0.01, PipelineSchedule::OneFOneB);
  EXPECT_CLOSE(withP2p.seconds, 11 + 2 * 3 * 0.01);
  // GPipe takes as long; it only holds more activations.
  EXPECT_CLOSE(pipelineTime(stages, 8, 0.01, PipelineSchedule::GPipe).seconds,
               withP2p.seconds);
}

// The slowest stage sets the pace: sum + (m-1) max.
TEST(Pipeline, ImbalancedStages) {
  double stages[] = {1, 2, 1};
  PipelineTime t = pipelineTime(stages, 4, 0, PipelineSchedule::GPipe);
  EXPECT_CLOSE(t.seconds, 4 + 3 * 2);
  EXPECT_CLOSE(t.bubbleSeconds, 10 - 4 * 2);
}

TEST(Pipeline, MicroBatchesInFlight) {
  EXPECT_EQ(microBatchesInFlight(PipelineSchedule::GPipe, 4, 0, 8), 8);
  EXPECT_EQ(microBatchesInFlight(PipelineSchedule::OneFOneB, 4, 0, 8), 4);
  EXPECT_EQ(microBatchesInFlight(PipelineSchedule::OneFOneB, 4, 3, 8), 1);
  EXPECT_EQ(microBatchesInFlight(PipelineSchedule::OneFOneB, 4, 0, 2), 2);
}

// Interleaved over v chunks (Narayanan et al., SC 2021, sec. 2.2): the bubble
// shrinks v-fold, (p-1)/(v m); each micro-batch crosses p v - 1 boundaries.
TEST(Pipeline, InterleavedStages) {
  EXPECT_CLOSE(bubbleFraction(4, 8, 2), 3.0 / 16);
  // Four stages of two chunks, each chunk 0.5: a stage works 1 per
  // micro-batch, as the balanced pipeline above.
  double chunks[] = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
  PipelineTime t =
      pipelineTime(chunks, 8, 0, PipelineSchedule::OneFOneB, /*v=*/2);
  EXPECT_CLOSE(t.seconds, 8 + 3.0 / 2);
  EXPECT_CLOSE(t.bubbleSeconds / 8, bubbleFraction(4, 8, 2));
  EXPECT_CLOSE(
      pipelineTime(chunks, 8, 0.01, PipelineSchedule::OneFOneB, 2).seconds,
      8 + 1.5 + 2 * 7 * 0.01);
  // One chunk per stage is the plain formula.
  double stages[] = {1, 2, 1};
  EXPECT_CLOSE(
      pipelineTime(stages, 4, 0, PipelineSchedule::OneFOneB, 1).seconds,
      pipelineTime(stages, 4, 0, PipelineSchedule::OneFOneB).seconds);
  // Unequal chunks: stage s works the sum of its chunks (s, s + p, ...);
  // stage 1's 3 per micro-batch sets the pace.
  double unequal[] = {1, 2, 1, 1};
  PipelineTime u = pipelineTime(unequal, 4, 0, PipelineSchedule::OneFOneB, 2);
  EXPECT_CLOSE(u.seconds, (2 + 3) / 2.0 + (4 - 0.5) * 3);
}

// Megatron-LM's warm-up, 2 (p - s - 1) + (v - 1) p forwards, plus the steady
// state's one: the chunk micro-batches a stage holds at once.
TEST(Pipeline, InterleavedInFlight) {
  EXPECT_EQ(microBatchesInFlight(PipelineSchedule::OneFOneB, 4, 0, 8, 2), 11);
  EXPECT_EQ(microBatchesInFlight(PipelineSchedule::OneFOneB, 4, 3, 8, 2), 5);
  // Equal chunks: the bytes are the count times one chunk's.
  double equal[] = {10, 10};
  EXPECT_CLOSE(peakKeptBytes(PipelineSchedule::OneFOneB, 4, 0, 8, equal),
               11 * 10);
  // Unequal chunks: the walk weighs each live chunk micro-batch by its
  // chunk. Stage 0 warms up with chunk 0's micro-batches 0-3, chunk 1's
  // 0-3 and chunk 0's 4-5; the steady state's forwards go on through chunk
  // 0 (6, 7) while its backwards start with chunk 1's: at most 8 of chunk
  // 0's and 3 of chunk 1's at once, where the count over v would say 5.5
  // of each.
  double unequal[] = {100, 1};
  EXPECT_CLOSE(peakKeptBytes(PipelineSchedule::OneFOneB, 4, 0, 8, unequal),
               8 * 100 + 3 * 1);
  // One chunk: the count times its bytes, as microBatchesInFlight.
  double one[] = {7};
  EXPECT_CLOSE(peakKeptBytes(PipelineSchedule::OneFOneB, 4, 1, 8, one),
               7 * microBatchesInFlight(PipelineSchedule::OneFOneB, 4, 1, 8));
  EXPECT_CLOSE(peakKeptBytes(PipelineSchedule::GPipe, 4, 1, 8, one), 7 * 8);
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

// 7B parameters, mixed precision, dp = 8: 2 + 2 + 12 bytes per parameter,
// ZeRO-1 shards the 12, ZeRO-2 also the gradients' 2, ZeRO-3 everything.
TEST(Memory, ZeroStagesFor7BOnDp8) {
  double p = 7e9;
  auto total = [](TrainingStateBytes s) {
    return s.parameters + s.gradients + s.optimizerStates;
  };
  TrainingStateBytes z0 = trainingStateBytes(p, Precision::BF16, 8, 0);
  EXPECT_CLOSE(z0.parameters, 14e9);
  EXPECT_CLOSE(z0.gradients, 14e9);
  EXPECT_CLOSE(z0.optimizerStates, 84e9);
  EXPECT_CLOSE(total(z0), 112e9);
  TrainingStateBytes z1 = trainingStateBytes(p, Precision::BF16, 8, 1);
  EXPECT_CLOSE(z1.optimizerStates, 10.5e9);
  EXPECT_CLOSE(total(z1), 38.5e9);
  TrainingStateBytes z2 = trainingStateBytes(p, Precision::BF16, 8, 2);
  EXPECT_CLOSE(z2.gradients, 1.75e9);
  EXPECT_CLOSE(total(z2), 26.25e9);
  TrainingStateBytes z3 = trainingStateBytes(p, Precision::BF16, 8, 3);
  EXPECT_CLOSE(z3.parameters, 1.75e9);
  EXPECT_CLOSE(total(z3), 14e9);
}

// fp32: 4 + 4 + 8 (the parameters are their own master copy).
TEST(Memory, Fp32TrainingState) {
  TrainingStateBytes s = trainingStateBytes(1e9, Precision::FP32, 4, 1);
  EXPECT_CLOSE(s.parameters, 4e9);
  EXPECT_CLOSE(s.gradients, 4e9);
  EXPECT_CLOSE(s.optimizerStates, 8e9 / 4);
}

// The optimizer's state count: SGD with momentum keeps one fp32 tensor per
// parameter (plus the master copy under mixed precision), plain SGD none.
TEST(Memory, OptimizerStatesFollowTheOptimizer) {
  EXPECT_CLOSE(
      trainingStateBytes(1e9, Precision::FP32, 1, 0, 1).optimizerStates, 4e9);
  EXPECT_CLOSE(
      trainingStateBytes(1e9, Precision::FP32, 1, 0, 0).optimizerStates, 0);
  EXPECT_CLOSE(
      trainingStateBytes(1e9, Precision::BF16, 1, 0, 1).optimizerStates, 8e9);
  EXPECT_CLOSE(
      trainingStateBytes(1e9, Precision::BF16, 2, 1, 0).optimizerStates, 2e9);
}

TEST(Memory, InferenceAndActivations) {
  EXPECT_CLOSE(inferenceParameterBytes(7e9, Precision::BF16), 14e9);
  EXPECT_CLOSE(inferenceParameterBytes(7e9, Precision::FP32), 28e9);
  EXPECT_EQ(activationElementBytes(Precision::FP16), 2);
  EXPECT_EQ(activationElementBytes(Precision::TF32), 4);
}

} // namespace
