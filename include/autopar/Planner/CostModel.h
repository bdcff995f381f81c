//===- CostModel.h - Time and memory of parallel execution ------*- C++ -*-===//
//
// The explicit, honest cost model of ARCHITECTURE.md principle 4:
// - compute: a roofline (FLOPs vs bytes) with an efficiency curve for small
//   problems;
// - collectives: alpha-beta per link level with the ring/tree bus-bandwidth
//   factors of nccl-tests (doc/PERFORMANCE.md), hierarchical when a group
//   spans nodes;
// - pipelines: GPipe and 1F1B, bubble (p-1)/m, stage imbalance;
// - memory: parameters, gradients and AdamW states under mixed precision and
//   ZeRO 0-3, activations in flight per schedule and recomputation.
// Every constant names its source in lib/Planner/*.cpp and
// docs/cost-model.md.
// This header has no MLIR dependency: the planner extracts FLOPs and bytes
// from linalg ops (OpCost.h) and asks these functions for times.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PLANNER_COSTMODEL_H
#define AUTOPAR_PLANNER_COSTMODEL_H

#include "autopar/Planner/Cluster.h"

#include "llvm/ADT/ArrayRef.h"

#include <string>

namespace autopar {

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

/// The kind of work, which selects the efficiency curve.
enum class ComputeKind {
  Gemm,        ///< contractions (matmul, convolution): tensor cores / BLAS
  Elementwise, ///< memory-bound kernels: elementwise, reductions, copies
  /// Fused attention (FlashAttention): both products and the softmax in one
  /// kernel, priced at the published kernels' fraction of peak; `minDim` is
  /// the key length, which short sequences leave short of work.
  Attention,
};

/// The fraction of the dense peak a FlashAttention-class kernel reaches for
/// `keys` keys per query (the forward; its backward is priced at
/// kAttentionBackwardTime times the forward's time).
double attentionEfficiency(const DeviceSpec &device, double keys, Precision p);

/// Time of an attention backward over its forward's time: 2.5x the FLOPs
/// (five products against two, P recomputed) at about 0.8x the forward's
/// efficiency (FlashAttention-2, Dao 2023, Fig. 6-7).
constexpr double kAttentionBackwardTime = 2.5 / 0.8;

struct ComputeCost {
  double seconds = 0;
  double flops = 0;
  double bytes = 0;
  /// Fraction of peak achieved for this problem size (from the curve), of
  /// the roof that binds: eff(minDim) of the FLOP/s peak, or the memory
  /// efficiency when `memoryBound`.
  double efficiency = 0;
  bool memoryBound = false;
};

/// Time of one kernel doing `flops` and moving `bytes` of device memory, on
/// one device of `cluster` in precision `p`. For GEMMs `minDim` is the
/// smallest of M, N, K (small dims underuse the tensor cores); 0 if unknown.
ComputeCost computeTime(const ClusterSpec &cluster, Precision p,
                        ComputeKind kind, double flops, double bytes,
                        double minDim = 0);

/// The efficiency constants of one class of device (GPU or CPU) at one
/// class of precision: measured by `bench/gpu/gemm_sweep.py` for GPUs, an
/// assumption for CPUs (docs/cost-model.md says which, with the run).
struct EfficiencyCurve {
  /// Fraction of the dense peak that large GEMMs reach.
  double gemmMax = 0;
  /// The smallest GEMM dimension at which half of `gemmMax` is reached.
  double gemmHalfDim = 0;
  /// Fraction of the memory bandwidth that streaming kernels reach.
  double memory = 0;
  /// Where the numbers come from.
  const char *source = "";
};
/// The curve of `device`'s GEMMs at precision `p` (on GPUs, tensor-core
/// types and fp32 differ: fp32's FMA GEMMs saturate at much smaller sizes).
EfficiencyCurve efficiencyCurve(const DeviceSpec &device,
                                Precision p = Precision::BF16);

/// gemmMax * minDim / (minDim + gemmHalfDim); gemmMax when minDim is 0
/// (unknown).
double gemmEfficiency(const DeviceSpec &device, double minDim,
                      Precision p = Precision::BF16);

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

enum class Collective {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  Broadcast,
  SendRecv,
};
/// "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
/// "send_recv" (the names of the shard dialect's collectives).
llvm::StringRef collectiveName(Collective c);

/// Where the ranks of one communication group sit.
struct GroupPlacement {
  int64_t size = 1;         ///< ranks in the group
  int64_t ranksPerNode = 1; ///< of them, how many share one node
  /// Groups of this size run concurrently on the same node and share its
  /// NICs (e.g. the dp groups of the tp ranks of one node).
  int64_t concurrentGroupsPerNode = 1;
};

struct CollectiveCost {
  double seconds = 0;
  /// Bytes one rank sends (nccl-tests' "bus bytes" = size * bus factor).
  double busBytes = 0;
  /// "ring", "tree", "hierarchical", "p2p"; "none" for a group of one rank.
  /// A string literal: the search prices millions of collectives, and a
  /// std::string here cost it an allocation each.
  llvm::StringRef algorithm;
  /// For "hierarchical": the algorithm of the inter-node phase, "ring" or
  /// "tree"; empty otherwise.
  llvm::StringRef interNodeAlgorithm;
  /// Of `seconds`, the part that does not depend on the size (the alpha
  /// terms).
  double latencySeconds = 0;
};

/// nccl-tests' bus-bandwidth factor of `kind` over `n` ranks
/// (doc/PERFORMANCE.md): 2(n-1)/n all-reduce, (n-1)/n all-gather,
/// reduce-scatter and all-to-all, 1 broadcast and send/recv.
double busBandwidthFactor(Collective kind, int64_t n);

/// Time of one collective over a group. `bytes` is the size of the full
/// buffer as nccl-tests counts it: the all-reduce buffer, the all-gather
/// output, the reduce-scatter input, the all-to-all buffer, the broadcast
/// buffer, the message of a send/recv. For a send/recv, `group` is the pair
/// (size 2; ranksPerNode 2 when both share a node) and
/// concurrentGroupsPerNode the sends leaving a node at once.
CollectiveCost collectiveTime(const ClusterSpec &cluster, Collective kind,
                              double bytes, const GroupPlacement &group);

/// The exposed part of `commSeconds` of tensor-parallel collectives run
/// overlapped with `gemmSeconds` of the GEMMs they feed or drain, in `tp`
/// chunks as Transformer Engine's userbuffers do (Megatron-LM's
/// --tp-comm-overlap): chunk i's GEMM runs while chunk i+1 moves, so the
/// first chunk's transfer is exposed, and of the rest whatever the GEMMs
/// cannot hide: c / tp + (tp - 1) / tp * max(0, c - g).
double overlappedCommSeconds(double commSeconds, double gemmSeconds,
                             int64_t tp);

/// The exposed part of a step's data-parallel synchronization: the
/// gradients' reduction (`reduceSeconds`) overlaps the last micro-batch's
/// backward (`backwardSeconds`); the gather of the updated parameters
/// (`gatherSeconds`, ZeRO 1-2) needs the optimizer's update, so only the next
/// step's first forward (`forwardSeconds`) can hide it.
double dataParallelExposedSeconds(double reduceSeconds, double gatherSeconds,
                                  double forwardSeconds,
                                  double backwardSeconds);

//===----------------------------------------------------------------------===//
// Pipelines
//===----------------------------------------------------------------------===//

enum class PipelineSchedule { GPipe, OneFOneB };
llvm::StringRef scheduleName(PipelineSchedule s); ///< "gpipe", "1f1b"

/// The ideal bubble fraction (p-1)/m of a balanced pipeline; (p-1)/(v m)
/// with `virtualStages` v model chunks per stage (the interleaved 1F1B).
double bubbleFraction(int64_t stages, int64_t microBatches,
                      int64_t virtualStages = 1);

struct PipelineTime {
  double seconds = 0;       ///< whole step, all micro-batches
  double bubbleSeconds = 0; ///< idle time of the slowest stage
};

/// Time of `microBatches` micro-batches through stages whose per-micro-batch
/// times (forward + backward) are `stageSeconds`, plus `p2pSeconds` per
/// boundary crossing. With imbalance the slowest stage sets the pace.
/// With `virtualStages` v > 1, `stageSeconds` lists the p * v virtual stages
/// in order (virtual stage c * p + s is chunk c of stage s): stage s works
/// T_s, the sum of its chunks, per micro-batch, and the step takes
/// sum_s T_s / v + (m - 1/v) max_s T_s + 2 (p v - 1) c (docs/cost-model.md,
/// "Interleaved 1F1B").
PipelineTime pipelineTime(llvm::ArrayRef<double> stageSeconds,
                          int64_t microBatches, double p2pSeconds,
                          PipelineSchedule schedule, int64_t virtualStages = 1);

/// Micro-batches whose activations one stage holds at its peak: the most
/// forwards that stage has run whose backward it has not, along its training
/// order (pipelineStageOrder with backward steps). That is m for GPipe and
/// min(m, p - stage) for 1F1B; 0 when `microBatches` <= 0. `stages` below 1
/// counts as 1 and `stage` is clamped into [0, stages). Each distinct
/// pipeline's order is walked once and remembered (thread-safe), so the
/// search may call this for every stage of every candidate.
/// With `virtualStages` v > 1, the chunk micro-batches (a micro-batch's
/// forward through one chunk) along the interleaved order.
int64_t microBatchesInFlight(PipelineSchedule schedule, int64_t stages,
                             int64_t stage, int64_t microBatches,
                             int64_t virtualStages = 1);

/// The most bytes stage `stage` holds at once along its training order when
/// a micro-batch's forward through chunk c keeps `keptPerChunk[c]` until its
/// backward (one entry per chunk: `virtualStages` of them, the
/// interleaved schedule with more than one). The exact peak where chunks
/// keep unequal activations, which microBatchesInFlight's count over v
/// prices only for equal ones.
double peakKeptBytes(PipelineSchedule schedule, int64_t stages, int64_t stage,
                     int64_t microBatches, llvm::ArrayRef<double> keptPerChunk);

/// The order in which stage `stage` (0 <= stage < stages) of a `stages`-stage
/// pipeline runs its `microBatches` micro-batches, e.g. "F0 F1 B0 F2 B1 B2":
/// F (forward) or B (backward), then the micro-batch index, space separated;
/// forwards only when `withBackward` is false (inference). This is the
/// runtime's pipelineSchedule() (runtime/lib/PipelineSchedule.cpp, compiled
/// into the planner), the order autopar-run executes: the plan report lists
/// it per stage as "stage_orders", which the plan picture draws.
/// With `virtualStages` v > 1 each step names its chunk too: "F0.1" is
/// micro-batch 0's forward through chunk 1.
std::string pipelineStageOrder(PipelineSchedule schedule, int64_t stages,
                               int64_t stage, int64_t microBatches,
                               bool withBackward, int64_t virtualStages = 1);

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

/// Bytes of training state per rank for `parameters` parameters held by the
/// rank before ZeRO (after tensor and pipeline splitting).
struct TrainingStateBytes {
  double parameters = 0;
  double gradients = 0;
  double optimizerStates = 0;
};

/// Mixed precision (bf16/fp16): 2-byte parameters and gradients, fp32 master
/// weights and `statesPerParameter` fp32 optimizer states (AdamW's two
/// moments: 12 bytes); fp32: 4 + 4 + 4 per state (the parameters are their
/// own master copy). ZeRO-1 shards optimizer states over `dp`, ZeRO-2 also
/// gradients, ZeRO-3 also parameters.
TrainingStateBytes trainingStateBytes(double parameters, Precision p,
                                      int64_t dp, int zeroStage,
                                      int statesPerParameter = 2);

/// Bytes of inference weights per rank.
double inferenceParameterBytes(double parameters, Precision p);

/// Bytes per element of activations in precision `p`.
double activationElementBytes(Precision p);

} // namespace autopar

#endif // AUTOPAR_PLANNER_COSTMODEL_H
