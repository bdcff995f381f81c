//===- PlanSearch.cpp - Grid shapes, ZeRO, micro-batches, stages ----------===//
//
// Enumerates every (dp, tp, pp) grid that uses the cluster, every ZeRO stage,
// micro-batch size and recomputation mode the pins allow, and prices them in
// increasing order of a lower bound, skipping those the bound shows cannot be
// chosen or reported (PlanNeed). A priced plan's stage boundaries are the
// best split of the segments (bestStageSplit, PlanStages.cpp, started from a
// balanced partition), and its step time and peak memory come from the cost
// model. Segment solutions are computed once per (distinct segment, tp) and
// re-evaluated per micro-batch size; balanced partitions are cached per (tp,
// micro-batch, recompute, pp). docs/planner.md says why the search is exact.
//
//===----------------------------------------------------------------------===//

#include "PlannerImpl.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/FormatVariadic.h"

#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>

using namespace mlir;
namespace autopar {

llvm::StringRef recomputeName(Recompute r) {
  switch (r) {
  case Recompute::None:
    return "none";
  case Recompute::Selective:
    return "selective";
  case Recompute::Full:
    return "full";
  }
  return "";
}

bool parseRecompute(llvm::StringRef name, Recompute &r) {
  if (name == "none")
    r = Recompute::None;
  else if (name == "selective")
    r = Recompute::Selective;
  else if (name == "full")
    r = Recompute::Full;
  else
    return false;
  return true;
}

llvm::Expected<PlanRequest> buildPlanRequest(const PlanFlags &flags) {
  auto error = [](const llvm::Twine &m) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), m);
  };
  PlanRequest request;
  auto cluster = parseClusterSpec(flags.cluster);
  if (!cluster)
    return cluster.takeError();
  request.cluster = *cluster;
  if (flags.mode == "train")
    request.mode = PlanMode::Training;
  else if (flags.mode != "infer")
    return error("--mode " + flags.mode + " is not infer or train");
  request.precision = cluster->defaultPrecision();
  if (!flags.precision.empty() &&
      !parsePrecision(flags.precision, request.precision))
    return error("--precision " + flags.precision +
                 " is not one of fp32, bf16, fp16");
  // CPU ranks run fp32; a training step may store its activations in bf16
  // (mixed precision with f32 master weights and f32 arithmetic).
  if (cluster->isLocalCpu() && request.precision != Precision::FP32 &&
      !(request.mode == PlanMode::Training &&
        (request.precision == Precision::BF16 ||
         request.precision == Precision::FP16)))
    return error("--precision " + flags.precision +
                 " is not supported on CPU clusters (local:N); use fp32" +
                 (request.mode == PlanMode::Training ? ", bf16 or fp16" : ""));
  if (flags.dp > 0)
    request.pins.dp = flags.dp;
  if (flags.tp > 0)
    request.pins.tp = flags.tp;
  if (flags.pp > 0)
    request.pins.pp = flags.pp;
  if (flags.zero >= 0)
    request.pins.zeroStage = flags.zero;
  if (flags.microBatchSize > 0)
    request.pins.microBatchSize = flags.microBatchSize;
  if (flags.virtualStages != -1) {
    if (flags.virtualStages < 1)
      return error("--virtual-stages " + llvm::Twine(flags.virtualStages) +
                   " must be at least 1 (the model chunks each pipeline "
                   "stage holds)");
    request.pins.virtualStages = flags.virtualStages;
  }
  if (!flags.recompute.empty()) {
    Recompute r;
    if (!parseRecompute(flags.recompute, r))
      return error("--recompute " + flags.recompute +
                   " is not one of none, selective, full");
    request.pins.recompute = r;
  }
  if (!flags.schedule.empty()) {
    if (flags.schedule == scheduleName(PipelineSchedule::GPipe))
      request.pins.schedule = PipelineSchedule::GPipe;
    else if (flags.schedule == scheduleName(PipelineSchedule::OneFOneB))
      request.pins.schedule = PipelineSchedule::OneFOneB;
    else
      return error("--pipeline-schedule " + flags.schedule +
                   " is not one of gpipe, 1f1b");
  }
  if (!flags.sequenceParallel.empty()) {
    if (flags.sequenceParallel != "on" && flags.sequenceParallel != "off")
      return error("--sequence-parallel " + flags.sequenceParallel +
                   " is not one of on, off");
    request.pins.sequenceParallel = flags.sequenceParallel == "on";
  }
  return request;
}

namespace plan {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

/// Device memory the runtime itself takes besides the plan's tensors: the
/// CUDA context and cuBLASLt/NCCL workspaces, 1 GiB; measured on an H100 as
/// 1019 MiB (autopar-run training GPT-2 small on one GPU: the driver's used
/// memory less the caching allocator's, bench/RESULTS.md, 2026-11-27; NCCL's
/// buffers for several ranks not yet measured). None on CPU ranks.
double runtimeReservedBytes(const ClusterSpec &cluster) {
  return cluster.isLocalCpu() ? 0 : 1.0 * kGiB;
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i * i <= n; ++i)
    if (n % i == 0) {
      d.push_back(i);
      if (i != n / i)
        d.push_back(n / i);
    }
  llvm::sort(d);
  return d;
}

/// One point of the search space but the stage boundaries: a grid shape,
/// a ZeRO stage, a micro-batch size and a recomputation mode.
struct PlanKey {
  int64_t dp = 1, tp = 1, pp = 1;
  int zero = 0;
  int64_t microBatch = 1;
  Recompute recompute = Recompute::None;
  /// Model chunks per pipeline stage (the interleaved 1F1B): 1 without.
  int64_t virtualStages = 1;
};

/// Which of the plans enumerate() covers its caller needs, so that the
/// others may be skipped once a lower bound shows they cannot be among them.
/// Each rule names a key -- a dimension (kDimensionDp...), the grid shape or
/// nothing -- and keeps the best fitting plan of each of the `keep` best
/// values of that key: a plan is needed when some rule could still rank it
/// there. Without rules every plan is priced.
struct PlanNeed {
  static constexpr int kShape = 6, kAny = 7;
  struct Rule {
    int key; ///< a dimension (compareDimensions' order), kShape or kAny
    int keep;
  };
  std::vector<Rule> rules;
  /// Plans whose dimension `skipDimension` has `skipValue` are not wanted.
  int skipDimension = -1;
  int64_t skipValue = 0;
};

/// The planner's state for one request.
class Search {
public:
  Search(const ProgramGraph &graph, const PlanRequest &request)
      : graph(graph), request(request), cluster(request.cluster),
        residualStream(residualStreamBoundaries(graph)) {}

  llvm::Expected<PlanResult> run();
  /// The plan `key` with the stages `ranges`, priced (PinnedPlanPricer).
  PlanCandidate pricePinned(const PlanKey &key, StageRanges ranges) {
    fixChainMicroBatches(request.pins);
    if (ranges.empty())
      ranges.push_back({0, int64_t(graph.segments.size()) - 1});
    return evaluate(key, ranges);
  }

private:
  struct StageSplit {
    std::vector<std::pair<int64_t, int64_t>> ranges; // segment ranges
    std::vector<double> seconds;                     // per micro-batch
  };
  /// What one plan's stages are priced with.
  struct PlanPricing {
    PlanKey key;
    int64_t numMicroBatches = 1;
    CostContext ctx;
    /// Micro-batches in flight per stage (with virtual stages, evaluate()
    /// replaces the activations it prices by peakKeptBytes).
    std::vector<int64_t> inFlight;
  };
  /// Per (tp, micro-batch), what the lower bounds read.
  struct CostSummary {
    double seconds[3] = {0, 0, 0}; ///< per Recompute mode, all segments
    double longest[3] = {0, 0, 0}; ///< the longest segment
    double params = 0;             ///< parameter elements per rank
    double trained = 0;            ///< of which trained
    double boundaryBytes = 0;      ///< the largest activation handed on
  };

  GroupPlacement tpPlacement(int64_t tp) const {
    GroupPlacement g;
    g.size = tp;
    g.ranksPerNode = std::min(tp, cluster.gpusPerNode);
    g.concurrentGroupsPerNode =
        std::max<int64_t>(1, cluster.gpusPerNode / g.ranksPerNode);
    return g;
  }
  GroupPlacement dpPlacement(int64_t dp, int64_t tp) const {
    GroupPlacement g;
    g.size = dp;
    g.ranksPerNode = std::clamp<int64_t>(cluster.gpusPerNode / tp, 1, dp);
    g.concurrentGroupsPerNode = std::min(tp, cluster.gpusPerNode);
    return g;
  }
  CostContext context(int64_t tp, int64_t microBatch) const {
    CostContext ctx;
    ctx.cluster = &cluster;
    ctx.precision = request.precision;
    ctx.mode = request.mode;
    ctx.tpGroup = tpPlacement(tp);
    ctx.batchScale = double(microBatch) / graph.globalBatch;
    ctx.elementScale = activationElementBytes(request.precision) / 4;
    ctx.overlapTensorParallelComm = request.overlapTensorParallelComm;
    return ctx;
  }
  /// Each segment's cost under (tp, micro-batch), pointing into `chains`
  /// and `segmentStore`.
  const std::vector<const SegmentCost *> &segmentCosts(int64_t tp,
                                                       int64_t microBatch);
  std::vector<SegmentCost> solveChain(int64_t tp, const CostContext &ctx);
  /// Whether the activation entering segment `k` is the residual stream
  /// and `tp` ranks can split it along the sequence.
  bool sequenceSplittable(int64_t k, int64_t tp) const;
  /// Whether the residual stream can be split along the sequence over `tp`
  /// ranks (tp > 1 dividing its sequence dim) anywhere.
  bool canSplitSequence(int64_t tp) const;
  /// Whether the shardings chosen for `tp` (segmentCosts has solved them)
  /// split the residual stream along the sequence
  /// (PlanCandidate::sequenceParallel): every residual-stream boundary that
  /// can be split so is.
  bool sequenceParallel(int64_t tp);
  double segmentSeconds(const SegmentCost &c, Recompute r) const;
  const StageSplit &stages(int64_t tp, int64_t microBatch, Recompute r,
                           int64_t pp);
  const CostSummary &summary(int64_t tp, int64_t microBatch);
  /// Every plan `pins` and the request allow, in enumeration order.
  std::vector<PlanKey> legalPlans(const PlanPins &pins) const;
  /// The micro-batch each tp's shardings are solved at (segmentCosts): the
  /// first plan with that tp in enumeration order under `pins`.
  void fixChainMicroBatches(const PlanPins &pins);
  PlanPricing pricing(const PlanKey &key);
  /// Each segment's part of a stage's cost under `key`.
  std::vector<StageTotals> segmentTotals(const PlanKey &key);
  /// The stage `stage` holding `totals`: its step-time parts and memory
  /// (with the breakdown when asked). Stage -1 is a stage of no place: its
  /// memory leaves out the activations held in flight
  /// (StagePrice::keptPerMicroBatch, placeStage).
  StagePrice priceStage(const PlanPricing &pricing, const StageTotals &totals,
                        int64_t stage,
                        MemoryBreakdown *breakdown = nullptr) const;
  /// No split of `key` into stages gives a shorter step than this.
  double lowerBound(const PlanKey &key);
  /// Model chunks per stage of the plan `key` (legalPlans admits more than
  /// one only for pipelines they fit).
  int64_t virtualStages(const PlanKey &key) const {
    return key.pp > 1 ? key.virtualStages : 1;
  }
  /// The plan `key` with the stages `ranges`, priced.
  PlanCandidate evaluate(const PlanKey &key, const StageRanges &ranges);
  /// A plan priced by price(): exact, or known only to take longer than
  /// `stepCap` (its stages are then not the best ones).
  struct PricedPlan {
    PlanCandidate plan;
    bool exact = true;
    double stepCap = std::numeric_limits<double>::infinity();
  };
  /// The plan `key` with its best stages (bestStageSplit), priced. A caller
  /// with no use for plans slower than `stepCap` gets an inexact price for
  /// them sooner: the stage split stops at the cap.
  PricedPlan price(const PlanKey &key,
                   double stepCap = std::numeric_limits<double>::infinity());
  /// The plans `pins` and the request allow that `need` needs, priced, in
  /// enumeration order; the others are counted in `lastPruned`. Every
  /// priced plan is kept and reused by later calls with other pins.
  std::vector<PlanCandidate> enumerate(const PlanPins &pins,
                                       const PlanNeed &need);
  void explain(const PlanCandidate &best, PlanResult &result);
  std::vector<CollectiveVolume> collectiveVolume(const PlanCandidate &c);
  /// Why `pinned` (the plan of least memory under the request's pins) does
  /// not fit, and the smallest sets of pins whose release lets a plan fit.
  PlanInfeasibility infeasibility(const PlanCandidate &pinned);
  /// The choice against the best plan with another value, per dimension;
  /// `all` is every plan under the request's pins, best first.
  /// The best plan with the other sequence parallelism than `best`'s, or
  /// none (with `why`) when no plan can have it.
  /// The best plan of `other` (a request like this one with other pins),
  /// the smallest one when none fits, or none (with `why`).
  std::optional<PlanCandidate> bestPlanOf(PlanRequest other, std::string &why);
  std::optional<PlanCandidate> otherSequenceParallel(const PlanCandidate &best,
                                                     std::string &why);
  /// The best plan with another number of virtual stages than `best`'s
  /// (one without interleaving; two chunks with it, as virtual stages are
  /// not searched), or none (with `why`).
  std::optional<PlanCandidate> otherVirtualStages(const PlanCandidate &best,
                                                  std::string &why);
  std::vector<DimensionComparison>
  compareDimensions(const PlanCandidate &best,
                    const std::vector<PlanCandidate> &all);

  const ProgramGraph &graph;
  const PlanRequest &request;
  const ClusterSpec &cluster;
  /// residualStreamBoundaries of the graph.
  const std::vector<bool> residualStream;
  /// Per tp, the chosen boundaries and options of every segment.
  std::map<int64_t, std::vector<SegmentCost>> chains;
  std::map<int64_t, int64_t> chainMicroBatch;
  std::map<std::pair<int64_t, int64_t>, std::vector<const SegmentCost *>> costs;
  /// The distinct segments' costs at other micro-batch sizes than their
  /// chain's, by (tp, micro-batch, distinct segment, boundary): each segment
  /// of `costs` points to one (stable: map nodes do not move).
  std::map<std::tuple<int64_t, int64_t, int64_t, SegmentBoundary>, SegmentCost>
      segmentStore;
  std::map<std::pair<int64_t, int64_t>, CostSummary> summaries;
  std::map<std::tuple<int64_t, int64_t, int, int64_t>, StageSplit> splits;
  /// Priced plans by (tp, pp, ZeRO stage, micro-batch, recompute, virtual
  /// stages), for the searches with pins released that explain a plan.
  std::map<std::tuple<int64_t, int64_t, int, int64_t, int, int64_t>, PricedPlan>
      evaluated;
  int64_t lastEnumerated = 0, lastPruned = 0;
  /// sequenceParallel's answer per tp.
  std::map<int64_t, bool> sequenceParallelByTp;
};

/// The sharding of every op for `tp`: each segment is solved exactly for
/// each pair of shardings at its ends, and a dynamic program along the chain
/// of segments picks the cheapest sequence of boundary shardings, so that a
/// split may run across cuts (Megatron's column-parallel Gemm, activation,
/// row-parallel Gemm) instead of being gathered at every one.
std::vector<SegmentCost> Search::solveChain(int64_t tp,
                                            const CostContext &ctx) {
  int64_t n = graph.segments.size();
  // candidates[k]: shardings of the activation entering segment k.
  std::vector<llvm::SmallVector<TensorSharding>> candidates(n + 1);
  candidates[0] = {kReplicated};
  candidates[n] = {kReplicated};
  for (int64_t k = 1; k < n; ++k) {
    int64_t input = segmentInput(graph, graph.segments[k]);
    candidates[k] = boundaryShardings(graph, input, tp);
    // --sequence-parallel: the residual stream is split along the sequence
    // (on) or whole (off: Megatron-LM's layout without it; the cost would
    // otherwise also weigh a split of its features). Elsewhere (the head's
    // logits) the cheapest sharding wins.
    if (!residualStream[k] || !request.pins.sequenceParallel)
      continue;
    bool on = *request.pins.sequenceParallel;
    if (on && !sequenceSplittable(k, tp))
      continue;
    llvm::erase_if(candidates[k], [&](TensorSharding s) {
      return on ? !isSequenceSplit(graph, input, s) : s != kReplicated;
    });
  }
  std::map<std::pair<int64_t, SegmentBoundary>, SegmentCost> solved;
  auto solve = [&](int64_t k, SegmentBoundary b) -> const SegmentCost & {
    const Segment &seg = graph.segments[k];
    auto key = std::make_pair(seg.distinctId, b);
    auto it = solved.find(key);
    if (it != solved.end())
      return it->second;
    // One dynamic program serves every way of leaving the segment.
    const auto &outs = candidates[k + 1];
    std::vector<SegmentCost> all =
        solveSegmentForOutputs(graph, seg, tp, ctx, b.in, outs);
    for (auto [j, cost] : llvm::enumerate(all))
      solved.emplace(
          std::make_pair(seg.distinctId, SegmentBoundary{b.in, outs[j]}),
          std::move(cost));
    return solved.at(key);
  };
  constexpr double kUnreached = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> best(n + 1);
  std::vector<std::vector<int>> from(n + 1);
  for (int64_t k = 0; k <= n; ++k) {
    best[k].assign(candidates[k].size(), kUnreached);
    from[k].assign(candidates[k].size(), -1);
  }
  best[0][0] = 0;
  for (int64_t k = 0; k < n; ++k)
    for (auto [i, in] : llvm::enumerate(candidates[k])) {
      if (best[k][i] == kUnreached)
        continue;
      for (auto [j, out] : llvm::enumerate(candidates[k + 1])) {
        double cost = best[k][i] + solve(k, {in, out}).objective;
        if (cost < best[k + 1][j]) {
          best[k + 1][j] = cost;
          from[k + 1][j] = int(i);
        }
      }
    }
  std::vector<SegmentCost> result(n);
  for (int64_t k = n, j = 0; k > 0; --k) {
    int i = from[k][j];
    result[k - 1] = solve(k - 1, {candidates[k - 1][i], candidates[k][j]});
    j = i;
  }
  return result;
}

bool Search::sequenceSplittable(int64_t k, int64_t tp) const {
  if (tp <= 1 || !residualStream[k])
    return false;
  int64_t input = segmentInput(graph, graph.segments[k]);
  return llvm::any_of(
      boundaryShardings(graph, input, tp),
      [&](TensorSharding s) { return isSequenceSplit(graph, input, s); });
}

bool Search::canSplitSequence(int64_t tp) const {
  for (int64_t k = 0; k < int64_t(graph.segments.size()); ++k)
    if (sequenceSplittable(k, tp))
      return true;
  return false;
}

bool Search::sequenceParallel(int64_t tp) {
  if (tp <= 1)
    return false;
  // The boundaries are chosen once per tp (segmentCosts), and every plan
  // priced asks: answer once per tp.
  auto known = sequenceParallelByTp.find(tp);
  if (known != sequenceParallelByTp.end())
    return known->second;
  const std::vector<SegmentCost> &chain = chains.at(tp);
  bool any = false, all = true;
  for (auto [k, seg] : llvm::enumerate(graph.segments)) {
    if (!sequenceSplittable(k, tp))
      continue;
    any = true;
    if (!isSequenceSplit(graph, segmentInput(graph, seg),
                         chain[k].boundary.in)) {
      all = false;
      break;
    }
  }
  return sequenceParallelByTp[tp] = any && all;
}

const std::vector<const SegmentCost *> &
Search::segmentCosts(int64_t tp, int64_t microBatch) {
  auto key = std::make_pair(tp, microBatch);
  auto it = costs.find(key);
  if (it != costs.end())
    return it->second;
  // The shardings are chosen once per tp, at the micro-batch of the first
  // plan with that tp in enumeration order (fixChainMicroBatches); other
  // micro-batch sizes re-cost the same choices (cheap), as the batch scales
  // compute and communication alike.
  auto chain = chains.find(tp);
  if (chain == chains.end()) {
    auto at = chainMicroBatch.find(tp);
    int64_t solvedAt = at != chainMicroBatch.end() ? at->second : microBatch;
    chainMicroBatch[tp] = solvedAt;
    chain = chains.emplace(tp, solveChain(tp, context(tp, solvedAt))).first;
    std::vector<const SegmentCost *> &solved = costs[{tp, solvedAt}];
    for (const SegmentCost &c : chain->second)
      solved.push_back(&c);
    if (solvedAt == microBatch)
      return solved;
  }
  // Pointers, not copies: the largest searches re-cost hundreds of segments
  // at dozens of micro-batch sizes per tp, and copying them spent a fifth
  // of the search in the allocator and page faults.
  CostContext ctx = context(tp, microBatch);
  std::vector<const SegmentCost *> result;
  result.reserve(graph.segments.size());
  for (auto [k, seg] : llvm::enumerate(graph.segments)) {
    const SegmentCost &chosen = chain->second[k];
    auto storeKey =
        std::make_tuple(tp, microBatch, seg.distinctId, chosen.boundary);
    auto found = segmentStore.find(storeKey);
    if (found == segmentStore.end()) {
      found = segmentStore
                  .emplace(storeKey,
                           evaluateSegment(graph, seg, tp, ctx, chosen.choice,
                                           chosen.boundary))
                  .first;
      // The choices are the chain's (readers take them from `chains`).
      found->second.choice = {};
    }
    result.push_back(&found->second);
  }
  return costs[key] = std::move(result);
}

double Search::segmentSeconds(const SegmentCost &c, Recompute r) const {
  double t = c.forwardCompute + c.forwardComm;
  if (request.mode == PlanMode::Training)
    t += c.backwardCompute + c.backwardComm + c.recomputeCompute[int(r)];
  return t;
}

/// Contiguous segment ranges for `pp` stages minimizing the slowest stage
/// (binary search on the bottleneck, greedy fill).
const Search::StageSplit &Search::stages(int64_t tp, int64_t microBatch,
                                         Recompute r, int64_t pp) {
  auto key = std::make_tuple(tp, microBatch, int(r), pp);
  auto it = splits.find(key);
  if (it != splits.end())
    return it->second;
  const std::vector<const SegmentCost *> &segs = segmentCosts(tp, microBatch);
  int64_t n = segs.size();
  std::vector<double> t(n);
  double total = 0, largest = 0;
  for (int64_t i = 0; i < n; ++i) {
    t[i] = segmentSeconds(*segs[i], r);
    total += t[i];
    largest = std::max(largest, t[i]);
  }
  auto fill = [&](double cap, StageSplit *out) {
    int64_t used = 0, first = 0;
    double acc = 0;
    for (int64_t i = 0; i < n; ++i) {
      // Leave at least one segment for each remaining stage.
      bool mustCut = n - i == pp - used - 1 && used < pp - 1;
      if (i > first && (acc + t[i] > cap || mustCut) && used < pp - 1) {
        if (out) {
          out->ranges.push_back({first, i - 1});
          out->seconds.push_back(acc);
        }
        ++used;
        first = i;
        acc = 0;
      }
      acc += t[i];
      if (acc > cap && i == first && cap < t[i])
        return false;
    }
    if (out) {
      out->ranges.push_back({first, n - 1});
      out->seconds.push_back(acc);
    }
    return acc <= cap * (1 + 1e-9);
  };
  double lo = std::max(largest, total / pp), hi = total;
  for (int iter = 0; iter < 40 && hi - lo > 1e-6 * hi; ++iter) {
    double mid = (lo + hi) / 2;
    if (fill(mid, nullptr))
      hi = mid;
    else
      lo = mid;
  }
  StageSplit split;
  fill(hi, &split);
  return splits[key] = std::move(split);
}

const Search::CostSummary &Search::summary(int64_t tp, int64_t microBatch) {
  auto key = std::make_pair(tp, microBatch);
  auto it = summaries.find(key);
  if (it != summaries.end())
    return it->second;
  CostSummary s;
  for (const SegmentCost *cost : segmentCosts(tp, microBatch)) {
    const SegmentCost &c = *cost;
    for (int r = 0; r < 3; ++r) {
      double t = segmentSeconds(c, Recompute(r));
      s.seconds[r] += t;
      s.longest[r] = std::max(s.longest[r], t);
    }
    s.params += c.parameterElementsPerRank;
    s.trained += c.trainedElementsPerRank;
    s.boundaryBytes =
        std::max(s.boundaryBytes, c.savedActivationBytes[int(Recompute::Full)]);
  }
  return summaries[key] = s;
}

Search::PlanPricing Search::pricing(const PlanKey &key) {
  PlanPricing p;
  p.key = key;
  p.numMicroBatches = graph.globalBatch / key.dp / key.microBatch;
  p.ctx = context(key.tp, key.microBatch);
  // The schedule the plan runs (GPipe holds every micro-batch's
  // activations until its backwards).
  PipelineSchedule schedule =
      request.pins.schedule.value_or(PipelineSchedule::OneFOneB);
  for (int64_t s = 0; s < key.pp; ++s)
    p.inFlight.push_back(
        microBatchesInFlight(schedule, key.pp, s, p.numMicroBatches));
  return p;
}

std::vector<StageTotals> Search::segmentTotals(const PlanKey &key) {
  const std::vector<const SegmentCost *> &segs =
      segmentCosts(key.tp, key.microBatch);
  const std::vector<SegmentCost> &chain = chains.at(key.tp);
  bool training = request.mode == PlanMode::Training;
  bool zero3 = training && key.dp > 1 && key.zero == 3;
  double elementBytes = request.precision == Precision::FP32 ? 4 : 2;
  GroupPlacement dpGroup = dpPlacement(key.dp, key.tp);
  auto t = [&](Collective k, double b) {
    return collectiveTime(cluster, k, b, dpGroup).seconds;
  };
  int r = int(key.recompute);
  const CostContext ctx = context(key.tp, key.microBatch);
  std::vector<StageTotals> totals(segs.size());
  for (auto [i, cost] : llvm::enumerate(segs)) {
    const SegmentCost &c = *cost;
    StageTotals &s = totals[i];
    s.seconds = segmentSeconds(c, key.recompute);
    s.params = c.parameterElementsPerRank;
    s.trained = c.trainedElementsPerRank;
    s.tpGradBytes = c.tpGradientSyncBytes;
    // Without pipeline stages the step reads its data where the runtime
    // holds the batch for the whole step, whatever the plan: not an
    // activation (a stage keeps each micro-batch's own copy).
    auto kept = [&](int mode) {
      return c.savedActivationBytes[mode] -
             (key.pp == 1 ? c.savedInputBytes[mode] : 0.0);
    };
    s.saved = kept(r);
    if (key.recompute == Recompute::Full && key.pp == 1) {
      // Without pipeline stages, full recomputation keeps the segment
      // boundaries the backward reads (per segment: segments alike may
      // differ, the last block's output feeding the final norm), each as
      // its op lays it out (a tp rank keeps its block of a split one;
      // segments alike are solved alike, op for op).
      const Segment &segment = graph.segments[i];
      s.saved = 0;
      for (int64_t opIndex : segment.keptUnderFull) {
        const PlanOp &op = graph.ops[opIndex];
        const OpOption &option =
            op.options[chain[i].choice[opIndex - segment.first]];
        s.saved += ctx.keptBytes(graph.values[op.result]) /
                   (option.result >= 0 ? key.tp : 1);
      }
    }
    // While the segment's backward runs, what recomputation made of it is
    // live beside what was kept, and so is the gradient of its largest
    // value (the LM head's logits; the value itself is kept or recomputed,
    // counted either way). An upper bound of sorts: recomputed values die
    // as the backward passes their last use.
    s.unrecomputed = kept(int(Recompute::None));
    s.workingSet =
        std::max(0.0, s.unrecomputed - s.saved) + c.peakLiveBytes / 2;
    s.received = c.receivedBytes;
    s.dataInputs = c.dataInputBytes;
    s.segments = 1;
    s.backward = c.backwardCompute;
    s.forward = c.forwardCompute;
    s.peakLive = c.peakLiveBytes;
    s.message = c.largestMessageBytes;
    // ZeRO-3 keeps only its shard of parameters and gradients, so every
    // layer's parameters are gathered before its forward and again before
    // its backward, and its gradients reduce-scattered after it, in every
    // micro-batch: each prefetched while the layer before computes, so
    // only what a layer's compute cannot hide is exposed, and every
    // collective pays its latency.
    double bytes = c.parameterElementsPerRank * elementBytes;
    double gradientBytes = c.trainedElementsPerRank * elementBytes;
    if (zero3 && bytes > 0) {
      double gather = t(Collective::AllGather, bytes);
      double scatter =
          gradientBytes > 0 ? t(Collective::ReduceScatter, gradientBytes) : 0;
      s.zero3PerMicroBatch =
          std::max(0.0, gather - c.forwardCompute) +
          std::max(0.0, gather + scatter - c.backwardCompute -
                            c.recomputeCompute[r]);
      s.largestLayerBytes = bytes;
    }
  }
  return totals;
}

StagePrice Search::priceStage(const PlanPricing &pricing,
                              const StageTotals &totals, int64_t stage,
                              MemoryBreakdown *breakdown) const {
  const PlanKey &key = pricing.key;
  StagePrice price;
  MemoryBreakdown m;
  m.other = runtimeReservedBytes(cluster);
  m.communication = 2 * totals.message;
  if (request.mode == PlanMode::Training) {
    // Every parameter is held; only the trained ones have gradients and
    // optimizer states.
    TrainingStateBytes state =
        trainingStateBytes(totals.params, request.precision, key.dp, key.zero,
                           request.optimizerStatesPerParameter);
    TrainingStateBytes trainedState =
        trainingStateBytes(totals.trained, request.precision, key.dp, key.zero,
                           request.optimizerStatesPerParameter);
    m.parameters = state.parameters;
    m.gradients = trainedState.gradients;
    m.optimizerStates = trainedState.optimizerStates;
    // A pipeline stage under full recomputation recomputes its whole
    // forward from what it receives (and the data it reads), as the stage's
    // backward program does; without pipeline stages, from the segment
    // boundaries.
    double saved = key.pp > 1 && key.recompute == Recompute::Full
                       ? totals.received + totals.dataInputs
                       : totals.saved;
    price.keptPerMicroBatch = saved;
    // A stage of no place (-1) is placed by the stage split (placeStage).
    if (stage >= 0)
      m.activations = saved * pricing.inFlight[stage];
    // One backward runs at a time. A stage under full recomputation makes
    // its whole forward again first (its backward program's recomputation).
    m.workingSet = key.pp > 1 && key.recompute == Recompute::Full
                       ? totals.unrecomputed + totals.peakLive / 2
                       : totals.workingSet;
    // Gradients are reduced over dp: ZeRO 0 all-reduces them once per
    // step, ZeRO 1-2 reduce-scatter them and all-gather the updated
    // parameters. The reduction overlaps the last micro-batch's backward
    // (each bucket leaves as its gradients are done). The gather needs the
    // optimizer's update, so no backward can hide it: it is prefetched
    // layer by layer while the next step's first micro-batch runs forward
    // (Megatron-LM's --overlap-param-gather, FSDP's forward prefetch).
    // ZeRO-3's collectives are per layer and micro-batch (segmentTotals).
    double elementBytes = request.precision == Precision::FP32 ? 4 : 2;
    double gradBytes = totals.trained * elementBytes;
    GroupPlacement dpGroup = dpPlacement(key.dp, key.tp);
    double dpComm = 0, gatherComm = 0;
    if (key.dp > 1) {
      auto t = [&](Collective k, double b) {
        return collectiveTime(cluster, k, b, dpGroup).seconds;
      };
      if (key.zero == 0) {
        dpComm = t(Collective::AllReduce, gradBytes);
      } else if (key.zero == 1) {
        // DeepSpeed's stage 1 as autopar executes it: the whole gradient
        // all-reduced, the updated blocks all-gathered.
        dpComm = t(Collective::AllReduce, gradBytes);
        gatherComm = t(Collective::AllGather, gradBytes);
        m.communication += gradBytes / key.dp; // bucket
      } else if (key.zero == 2) {
        dpComm = t(Collective::ReduceScatter, gradBytes);
        gatherComm = t(Collective::AllGather, gradBytes);
        m.communication += gradBytes / key.dp; // bucket
      } else {
        price.zero3Exposed =
            totals.zero3PerMicroBatch * pricing.numMicroBatches;
        // The layer in use and the one being prefetched, gathered whole.
        m.communication += 2 * totals.largestLayerBytes;
      }
    }
    if (key.tp > 1 && totals.tpGradBytes > 0)
      dpComm += collectiveTime(cluster, Collective::AllReduce,
                               totals.tpGradBytes, tpPlacement(key.tp))
                    .seconds;
    price.dpExposed = dataParallelExposedSeconds(
        dpComm, gatherComm, totals.forward, totals.backward);
    double owned = totals.trained / (key.zero >= 1 ? key.dp : 1);
    price.optimizer = optimizerSeconds(pricing.ctx, owned);
  } else {
    m.parameters = inferenceParameterBytes(totals.params, request.precision);
    m.activations = totals.peakLive;
  }
  price.memory = m.total();
  if (breakdown)
    *breakdown = m;
  return price;
}

double Search::lowerBound(const PlanKey &key) {
  const CostSummary &s = summary(key.tp, key.microBatch);
  int r = int(key.recompute);
  int64_t m = graph.globalBatch / key.dp / key.microBatch;
  // The pipeline: every stage's seconds once and the slowest m - 1 more
  // times; the slowest no faster than an even share or the longest segment.
  // Interleaved over v chunks: the sum once over v, the slowest m - 1/v
  // more times (pipelineTime).
  double slowest = std::max(s.longest[r], s.seconds[r] / double(key.pp));
  double v = double(virtualStages(key));
  double bound = s.seconds[r] / v + (double(m) - 1 / v) * slowest;
  if (key.pp > 1) {
    GroupPlacement pair;
    pair.size = 2;
    pair.ranksPerNode = key.dp * key.tp < cluster.gpusPerNode ? 2 : 1;
    bound +=
        2 * (double(key.pp) * v - 1) *
        collectiveTime(cluster, Collective::SendRecv, s.boundaryBytes, pair)
            .seconds;
  }
  // The optimizer step of the stage with the most parameters, at least an
  // even share of them.
  if (request.mode == PlanMode::Training)
    bound += optimizerSeconds(context(key.tp, key.microBatch),
                              s.trained / double(key.pp) /
                                  double(key.zero >= 1 ? key.dp : 1));
  // Sums in another order round differently.
  return bound * (1 - 1e-9);
}

Search::PricedPlan Search::price(const PlanKey &key, double stepCap) {
  PricedPlan priced;
  priced.stepCap = stepCap;
  if (key.pp == 1) {
    priced.plan = evaluate(key, {{0, int64_t(graph.segments.size()) - 1}});
    return priced;
  }
  if (int64_t v = virtualStages(key); v > 1) {
    // Interleaved: the segments split evenly (by time) into pp * v virtual
    // stages, chunk c of stage s at c * pp + s, as Megatron-LM splits the
    // layers evenly over the virtual stages.
    priced.plan = evaluate(
        key, stages(key.tp, key.microBatch, key.recompute, key.pp * v).ranges);
    return priced;
  }
  const StageSplit &balanced =
      stages(key.tp, key.microBatch, key.recompute, key.pp);
  StageSplitProblem problem;
  problem.segments = segmentTotals(key);
  problem.stages = key.pp;
  problem.microBatches = graph.globalBatch / key.dp / key.microBatch;
  problem.memoryCap = cluster.device.memoryGiB * kGiB;
  PlanPricing p = pricing(key);
  problem.price = [&](const StageTotals &totals) {
    return priceStage(p, totals, /*stage=*/-1);
  };
  problem.inFlight = p.inFlight;
  // The step is every stage's seconds once plus the objective (and the
  // point-to-point transfers, which no split avoids): a cap on the step caps
  // the objective.
  double chainSeconds = 0;
  for (const StageTotals &t : problem.segments)
    chainSeconds += t.seconds;
  problem.objectiveCap = stepCap - chainSeconds;
  bool training = request.mode == PlanMode::Training;
  problem.optimizerSeconds = [&](double params) {
    return training
               ? optimizerSeconds(p.ctx, params / (key.zero >= 1 ? key.dp : 1))
               : 0.0;
  };
  StageSplitChoice split = bestStageSplit(problem, balanced.ranges);
  priced.exact = split.exact;
  priced.plan = evaluate(key, split.ranges);
  return priced;
}

PlanCandidate Search::evaluate(const PlanKey &key, const StageRanges &ranges) {
  PlanCandidate c;
  c.dp = key.dp;
  c.tp = key.tp;
  c.pp = key.pp;
  c.zeroStage = key.zero;
  c.microBatchSize = key.microBatch;
  c.numMicroBatches = graph.globalBatch / key.dp / key.microBatch;
  c.recompute = key.recompute;
  c.schedule = request.pins.schedule.value_or(PipelineSchedule::OneFOneB);
  c.virtualStages = virtualStages(key);
  Recompute r = key.recompute;
  int64_t pp = key.pp;
  // Virtual stage k is chunk k / pp of stage k % pp; each stage holds the
  // sum of its chunks (one chunk without interleaving).
  int64_t chunkStages = int64_t(ranges.size());
  int64_t ranks = std::min(pp, chunkStages);
  bool training = request.mode == PlanMode::Training;
  const std::vector<const SegmentCost *> &segs =
      segmentCosts(key.tp, key.microBatch);
  std::vector<StageTotals> totals = segmentTotals(key);
  c.sequenceParallel = sequenceParallel(key.tp);
  PlanPricing pricing = this->pricing(key);

  // Pipeline boundaries: the activation handed on, point to point. Stages
  // are dp*tp ranks apart, so they cross nodes once dp*tp fills a node.
  double p2p = 0;
  if (pp > 1) {
    double bytes = 0;
    for (const auto &range : ranges)
      for (int64_t i = range.first; i <= range.second; ++i)
        bytes = std::max(bytes,
                         segs[i]->savedActivationBytes[int(Recompute::Full)]);
    GroupPlacement pair;
    pair.size = 2;
    pair.ranksPerNode = key.dp * key.tp < cluster.gpusPerNode ? 2 : 1;
    p2p = collectiveTime(cluster, Collective::SendRecv, bytes, pair).seconds;
  }

  // Memory and data-parallel synchronization per stage; the most loaded
  // stage is reported.
  std::vector<double> seconds;
  std::vector<StageTotals> stageTotals(static_cast<size_t>(ranks));
  std::vector<StageTotals> chunkTotals(static_cast<size_t>(chunkStages));
  double worstMemory = -1, dpExposed = 0, zero3Exposed = 0, optimizer = 0;
  for (int64_t s = 0; s < chunkStages; ++s) {
    StagePlan stage;
    stage.firstSegment = ranges[s].first;
    stage.lastSegment = ranges[s].second;
    StageTotals &t = chunkTotals[s];
    int64_t firstLayer = -1, lastLayer = -1;
    for (int64_t i = stage.firstSegment; i <= stage.lastSegment; ++i) {
      t.add(totals[i]);
      stage.onnxNodes += graph.segments[i].onnxNodes;
      int64_t layer = graph.segments[i].layerIndex;
      if (layer >= 0) {
        if (firstLayer < 0)
          firstLayer = layer;
        lastLayer = layer;
      }
    }
    if (firstLayer >= 0)
      // Not formatv: this runs for every stage of every candidate.
      stage.layers =
          std::to_string(firstLayer) + "-" + std::to_string(lastLayer);
    stage.secondsPerMicroBatch = t.seconds;
    seconds.push_back(t.seconds);
    stageTotals[s % ranks].add(t);
    c.stages.push_back(std::move(stage));
  }
  for (int64_t s = 0; s < ranks; ++s) {
    MemoryBreakdown memory;
    StagePrice price = priceStage(pricing, stageTotals[s], s, &memory);
    if (c.virtualStages > 1 && training) {
      // The chunks keep unequal activations: the peak of the interleaved
      // order's walk over what each keeps, for priceStage's count of plain
      // 1F1B's micro-batches in flight.
      std::vector<double> kept;
      for (int64_t k = s; k < chunkStages; k += ranks)
        kept.push_back(
            priceStage(pricing, chunkTotals[k], -1).keptPerMicroBatch);
      memory.activations =
          peakKeptBytes(c.schedule, pp, s, c.numMicroBatches, kept);
    }
    dpExposed = std::max(dpExposed, price.dpExposed);
    zero3Exposed = std::max(zero3Exposed, price.zero3Exposed);
    optimizer = std::max(optimizer, price.optimizer);
    if (memory.total() > worstMemory) {
      worstMemory = memory.total();
      c.memory = memory;
    }
    for (int64_t k = s; k < chunkStages; k += ranks)
      c.stages[k].memory = memory;
  }
  PipelineTime pipe = pipelineTime(seconds, c.numMicroBatches, p2p, c.schedule,
                                   c.virtualStages);

  // The crossings of the first forward and the last backward are in the
  // pipeline's time and counted as exposed communication below: the bubble
  // is the rest of the slowest stage's idle time, so that the parts add up
  // to the step.
  double crossings = pp > 1 ? 2 * double(chunkStages - 1) * p2p : 0;
  c.time.bubble = std::max(0.0, pipe.bubbleSeconds - crossings);
  double perMicroBatchComm = 0, perMicroBatchCompute = 0;
  for (int64_t s = 0; s < ranks; ++s) {
    double comm = 0, comp = 0;
    for (int64_t k = s; k < chunkStages; k += ranks)
      for (int64_t i = ranges[k].first; i <= ranges[k].second; ++i) {
        comm += segs[i]->forwardComm + (training ? segs[i]->backwardComm : 0);
        comp += segs[i]->forwardCompute +
                (training ? segs[i]->backwardCompute +
                                segs[i]->recomputeCompute[int(r)]
                          : 0);
      }
    if (comm + comp >= perMicroBatchComm + perMicroBatchCompute) {
      perMicroBatchComm = comm;
      perMicroBatchCompute = comp;
    }
  }
  c.time.compute = perMicroBatchCompute * c.numMicroBatches;
  c.time.exposedCommunication = perMicroBatchComm * c.numMicroBatches +
                                dpExposed + zero3Exposed + crossings;
  c.time.optimizer = optimizer;
  c.stepSeconds = pipe.seconds + dpExposed + zero3Exposed + optimizer;
  c.bubbleFraction = bubbleFraction(pp, c.numMicroBatches, c.virtualStages);
  c.fits = c.memory.total() <= cluster.device.memoryGiB * kGiB;
  double modelFlops = graph.forwardFlops * (training ? 3 : 1);
  c.tokensPerSecond = graph.tokensPerStep / c.stepSeconds;
  c.tflopsPerGpu = modelFlops / c.stepSeconds / cluster.worldSize() / 1e12;
  double peak = cluster.device.peakFlops(request.precision);
  c.mfu = peak > 0 ? c.tflopsPerGpu * 1e12 / peak : 0;
  return c;
}

/// Says why `loser` lost to `best`.
} // namespace
} // namespace plan

void keepBusiest(std::vector<CollectiveVolume> &volumes,
                 const CollectiveVolume &v) {
  if (v.calls <= 0)
    return;
  auto same = llvm::find_if(volumes, [&](const CollectiveVolume &w) {
    return w.axis == v.axis && w.op == v.op;
  });
  if (same == volumes.end()) {
    volumes.push_back(v);
    return;
  }
  same->calls = std::max(same->calls, v.calls);
  same->busBytes = std::max(same->busBytes, v.busBytes);
}

namespace plan {
namespace {

/// Adds up, per stage, the collectives the plan's programs issue in one
/// step, and keeps for each axis and operation the busiest stage's figures
/// (every rank of a stage issues the same ones).
std::vector<CollectiveVolume> Search::collectiveVolume(const PlanCandidate &c) {
  bool training = request.mode == PlanMode::Training;
  const std::vector<const SegmentCost *> &segs =
      segmentCosts(c.tp, c.microBatchSize);
  StageRanges ranges;
  for (const StagePlan &stage : c.stages)
    ranges.push_back({stage.firstSegment, stage.lastSegment});
  std::vector<CollectiveVolume> busiest;
  auto keep = [&](llvm::StringRef axis, llvm::StringRef op, double calls,
                  double busBytes) {
    keepBusiest(busiest, {axis.str(), op.str(), calls, busBytes});
  };
  auto keepTally = [&](llvm::StringRef axis, const CollectiveTally &t,
                       int64_t n) {
    for (int k = 0; k < CollectiveTally::kKinds; ++k)
      keep(axis, collectiveName(Collective(k)), t.calls[k],
           t.bytes[k] * busBandwidthFactor(Collective(k), n));
  };
  double elementBytes = request.precision == Precision::FP32 ? 4 : 2;
  // Per stage, over its chunks (virtual stages s, s + pp, ...).
  int64_t chunkStages = int64_t(ranges.size());
  int64_t ranks = std::min<int64_t>(c.pp, chunkStages);
  for (int64_t s = 0; s < ranks; ++s) {
    SmallVector<int64_t> mine;
    for (int64_t k = s; k < chunkStages; k += ranks)
      for (int64_t i = ranges[k].first; i <= ranges[k].second; ++i)
        mine.push_back(i);
    CollectiveTally tp, dp;
    double trained = 0, tpGradBytes = 0;
    for (int64_t i : mine) {
      tp.add(segs[i]->forwardCollectives, double(c.numMicroBatches));
      if (training)
        tp.add(segs[i]->backwardCollectives, double(c.numMicroBatches));
      trained += segs[i]->trainedElementsPerRank;
      tpGradBytes += segs[i]->tpGradientSyncBytes;
    }
    if (training && c.tp > 1 && tpGradBytes > 0)
      tp.add(Collective::AllReduce, tpGradBytes);
    keepTally("tp", tp, c.tp);
    // Gradient synchronization over dp, as the step time models it.
    if (training && c.dp > 1) {
      double gradBytes = trained * elementBytes;
      if (c.zeroStage == 0) {
        dp.add(Collective::AllReduce, gradBytes);
      } else if (c.zeroStage == 1) {
        dp.add(Collective::AllReduce, gradBytes);
        dp.add(Collective::AllGather, gradBytes);
      } else if (c.zeroStage == 2) {
        dp.add(Collective::ReduceScatter, gradBytes);
        dp.add(Collective::AllGather, gradBytes);
      } else {
        // Per layer and micro-batch: gather for the forward and for the
        // backward, reduce-scatter the gradients.
        for (int64_t i : mine) {
          double bytes = segs[i]->parameterElementsPerRank * elementBytes;
          double gradientBytes = segs[i]->trainedElementsPerRank * elementBytes;
          if (bytes <= 0)
            continue;
          for (int64_t m = 0; m < c.numMicroBatches; ++m) {
            dp.add(Collective::AllGather, bytes);
            dp.add(Collective::AllGather, bytes);
            if (gradientBytes > 0)
              dp.add(Collective::ReduceScatter, gradientBytes);
          }
        }
      }
      keepTally("dp", dp, c.dp);
    }
    // Pipeline boundaries: the activation handed to the next stage per
    // micro-batch (and its gradient back when training).
    if (c.pp > 1) {
      auto boundary = [&](int64_t stage) {
        int64_t lastSegment = ranges[stage].second;
        return segs[lastSegment]->savedActivationBytes[int(Recompute::Full)];
      };
      double m = double(c.numMicroBatches);
      double sends = 0, recvs = 0, sent = 0, received = 0;
      for (int64_t k = s; k < chunkStages; k += ranks) {
        double out = k + 1 < chunkStages ? boundary(k) : 0;
        double in = k > 0 ? boundary(k - 1) : 0;
        sends += (out > 0 ? m : 0) + (training && in > 0 ? m : 0);
        recvs += (in > 0 ? m : 0) + (training && out > 0 ? m : 0);
        sent += m * (out + (training ? in : 0));
        received += m * (in + (training ? out : 0));
      }
      keep("pp", "send", sends, sent);
      keep("pp", "recv", recvs, received);
    }
  }
  return busiest;
}

/// A part of the step time and how much longer it is in one plan than in
/// another.
struct TermDifference {
  const char *term;        ///< "compute", "exposed communication", ...
  const char *description; ///< how a runner-up's why-not names it
  double delta;
};

/// The parts of `a`'s step time minus `b`'s.
std::array<TermDifference, 4> termDifferences(const PlanCandidate &a,
                                              const PlanCandidate &b) {
  return {{
      {"compute",
       "more compute per GPU (less parallel work, recomputation or "
       "small-GEMM efficiency)",
       a.time.compute - b.time.compute},
      {"exposed communication", "more exposed communication",
       a.time.exposedCommunication - b.time.exposedCommunication},
      {"pipeline bubble", "a larger pipeline bubble",
       a.time.bubble - b.time.bubble},
      {"optimizer", "a slower optimizer step",
       a.time.optimizer - b.time.optimizer},
  }};
}

/// The part of `a`'s step time that is the most longer than `b`'s.
TermDifference largestDifference(const PlanCandidate &a,
                                 const PlanCandidate &b) {
  std::array<TermDifference, 4> parts = termDifferences(a, b);
  const TermDifference *worst = &parts[0];
  for (const TermDifference &p : parts)
    if (p.delta > worst->delta)
      worst = &p;
  return *worst;
}

std::string whyNot(const PlanCandidate &loser, const PlanCandidate &best,
                   const ClusterSpec &cluster) {
  if (!loser.fits)
    return llvm::formatv("does not fit: needs {0:F1} GiB per GPU, {1:F1} GiB "
                         "available",
                         loser.memory.total() / kGiB, cluster.device.memoryGiB)
        .str();
  double slower = loser.stepSeconds / best.stepSeconds - 1;
  // A tie (the sort then prefers less memory): no part of the step is
  // slower, so naming one would mislead.
  if (!(slower > 1e-3))
    return llvm::formatv("predicted as fast ({0} per step, within 0.1%); "
                         "the chosen plan needs no more memory per GPU "
                         "({1:F2} vs {2:F2} GiB)",
                         formatSeconds(loser.stepSeconds),
                         best.memory.total() / kGiB,
                         loser.memory.total() / kGiB)
        .str();
  TermDifference worst = largestDifference(loser, best);
  return llvm::formatv("predicted {0:P1} slower ({1} vs {2} per step), "
                       "mostly {3} (+{4})",
                       slower, formatSeconds(loser.stepSeconds),
                       formatSeconds(best.stepSeconds), worst.description,
                       formatSeconds(worst.delta))
      .str();
}

/// Ranks plans: those that fit first, then the faster, then the smaller; of
/// plans that do not fit, the smaller first.
bool betterPlan(const PlanCandidate &a, const PlanCandidate &b) {
  if (a.fits != b.fits)
    return a.fits;
  if (!a.fits)
    return a.memory.total() < b.memory.total();
  if (a.stepSeconds != b.stepSeconds)
    return a.stepSeconds < b.stepSeconds;
  return a.memory.total() < b.memory.total();
}

/// "dp=1 tp=4 pp=1 zero=0 micro-batch 1, recompute full".
std::string planSummary(const PlanCandidate &c) {
  return llvm::formatv("dp={0} tp={1} pp={2} zero={3} micro-batch {4}, "
                       "recompute {5}",
                       c.dp, c.tp, c.pp, c.zeroStage, c.microBatchSize,
                       recomputeName(c.recompute))
      .str();
}

/// The pins given, as (flag name without "--", value), in flag order.
std::vector<std::pair<std::string, std::string>> pinList(const PlanPins &pins) {
  std::vector<std::pair<std::string, std::string>> list;
  if (pins.dp)
    list.push_back({"dp", std::to_string(*pins.dp)});
  if (pins.tp)
    list.push_back({"tp", std::to_string(*pins.tp)});
  if (pins.pp)
    list.push_back({"pp", std::to_string(*pins.pp)});
  if (pins.zeroStage)
    list.push_back({"zero", std::to_string(*pins.zeroStage)});
  if (pins.microBatchSize)
    list.push_back({"micro-batch-size", std::to_string(*pins.microBatchSize)});
  if (pins.recompute)
    list.push_back({"recompute", recomputeName(*pins.recompute).str()});
  return list;
}

/// `pins` without the ones named (pinList's names).
PlanPins releasePins(PlanPins pins, llvm::ArrayRef<std::string> names) {
  for (llvm::StringRef name : names) {
    if (name == "dp")
      pins.dp.reset();
    else if (name == "tp")
      pins.tp.reset();
    else if (name == "pp")
      pins.pp.reset();
    else if (name == "zero")
      pins.zeroStage.reset();
    else if (name == "micro-batch-size")
      pins.microBatchSize.reset();
    else if (name == "recompute")
      pins.recompute.reset();
  }
  return pins;
}

/// "--tp=1 and --zero=0": the named pins as given.
std::string pinFlags(const PlanInfeasibility &inf,
                     llvm::ArrayRef<std::string> names) {
  std::string text;
  for (auto [name, value] : inf.pins)
    if (llvm::is_contained(names, name))
      text += (text.empty() ? "--" : " and --") + name + "=" + value;
  return text;
}

PlanInfeasibility Search::infeasibility(const PlanCandidate &pinned) {
  PlanInfeasibility inf;
  inf.deviceMemoryBytes = cluster.device.memoryGiB * kGiB;
  inf.bytesOver = pinned.memory.total() - inf.deviceMemoryBytes;
  inf.pins = pinList(request.pins);
  // The smallest sets of pins whose release lets a plan fit: one pin at a
  // time, then pairs, ... (at most 63 sets, each a filter of the same
  // evaluated plans).
  int n = inf.pins.size();
  for (int k = 1; k <= n && inf.releases.empty(); ++k)
    for (unsigned mask = 1; mask < (1u << n); ++mask) {
      if (llvm::popcount(mask) != k)
        continue;
      std::vector<std::string> names;
      for (int i = 0; i < n; ++i)
        if ((mask >> i) & 1)
          names.push_back(inf.pins[i].first);
      std::optional<PlanCandidate> fastest;
      PlanNeed onlyTheBest{{{PlanNeed::kAny, 1}}};
      for (PlanCandidate &c :
           enumerate(releasePins(request.pins, names), onlyTheBest))
        if (c.fits && (!fastest || betterPlan(c, *fastest)))
          fastest = std::move(c);
      if (fastest)
        inf.releases.push_back({std::move(names), std::move(*fastest)});
    }
  llvm::stable_sort(inf.releases, [](const PlanInfeasibility::Release &a,
                                     const PlanInfeasibility::Release &b) {
    return betterPlan(a.plan, b.plan);
  });

  const MemoryBreakdown &m = pinned.memory;
  std::string breakdown =
      llvm::formatv("parameters {0:F2}, gradients {1:F2}, optimizer states "
                    "{2:F2}, activations {3:F2}, communication {4:F2}, other "
                    "{5:F2} GiB",
                    m.parameters / kGiB, m.gradients / kGiB,
                    m.optimizerStates / kGiB, m.activations / kGiB,
                    m.communication / kGiB, m.other / kGiB)
          .str();
  if (inf.pins.empty()) {
    inf.message =
        llvm::formatv("the model fits on no plan for this cluster: the "
                      "smallest plan ({0}) needs {1:F2} GiB per GPU but {2} "
                      "has {3:F1} GiB ({4}); use more or larger GPUs, a "
                      "smaller batch, or --mode infer",
                      planSummary(pinned), m.total() / kGiB,
                      cluster.device.name, cluster.device.memoryGiB, breakdown)
            .str();
    return inf;
  }
  std::string pins;
  for (auto [name, value] : inf.pins)
    pins += (pins.empty() ? "--" : " --") + name + "=" + value;
  inf.message =
      llvm::formatv("the model fits on no plan with the pins {0}: the "
                    "smallest ({1}) needs {2:F2} GiB per GPU but {3} has "
                    "{4:F1} GiB, "
                    "{5:F2} GiB ({6} bytes) over ({7})",
                    pins, planSummary(pinned), m.total() / kGiB,
                    cluster.device.name, cluster.device.memoryGiB,
                    inf.bytesOver / kGiB, int64_t(std::ceil(inf.bytesOver)),
                    breakdown)
          .str();
  if (inf.releases.empty()) {
    inf.message += "; no plan fits even without the pins: use more or larger "
                   "GPUs or a smaller batch";
    if (request.mode == PlanMode::Training)
      inf.message += ", or --mode infer";
    return inf;
  }
  for (auto [i, release] : llvm::enumerate(inf.releases)) {
    const PlanCandidate &c = release.plan;
    if (i == 0)
      inf.message +=
          llvm::formatv("; change {0}: the nearest plan that fits, with {1} "
                        "released, is {2}, predicted {3} per step in {4:F2} "
                        "GiB per GPU",
                        pinFlags(inf, release.pins),
                        release.pins.size() == 1 ? "it" : "them",
                        planSummary(c), formatSeconds(c.stepSeconds),
                        c.memory.total() / kGiB)
              .str();
    else
      inf.message += llvm::formatv("; or change {0} ({1}, {2} per step)",
                                   pinFlags(inf, release.pins), planSummary(c),
                                   formatSeconds(c.stepSeconds))
                         .str();
  }
  return inf;
}

/// The value of dimension `d` (compareDimensions' order) of `c`.
std::string dimensionValue(int d, const PlanCandidate &c) {
  switch (d) {
  case 0:
    return std::to_string(c.dp);
  case 1:
    return std::to_string(c.tp);
  case 2:
    return std::to_string(c.pp);
  case 3:
    return std::to_string(c.zeroStage);
  case 4:
    return std::to_string(c.microBatchSize);
  case 5:
    return recomputeName(c.recompute).str();
  case 6:
    return c.sequenceParallel ? "on" : "off";
  default:
    return std::to_string(c.virtualStages);
  }
}

/// The value of dimension `d` (compareDimensions' order) of `c`, as a
/// number (PlanNeed's keys).
int64_t dimensionNumber(int d, const PlanCandidate &c) {
  switch (d) {
  case 0:
    return c.dp;
  case 1:
    return c.tp;
  case 2:
    return c.pp;
  case 3:
    return c.zeroStage;
  case 4:
    return c.microBatchSize;
  default:
    return int64_t(c.recompute);
  }
}

std::optional<PlanCandidate> Search::bestPlanOf(PlanRequest other,
                                                std::string &why) {
  other.compareDimensions = false;
  llvm::Expected<PlanResult> found = Search(graph, other).run();
  if (found)
    return found->best;
  // A plan that does not fit is compared as one; a value no plan can have
  // says why, as the planner would.
  std::optional<PlanCandidate> unfit;
  llvm::handleAllErrors(
      found.takeError(),
      [&](const InfeasiblePlanError &e) { unfit = e.result().best; },
      [&](const llvm::ErrorInfoBase &e) { why = e.message(); });
  return unfit;
}

std::optional<PlanCandidate>
Search::otherSequenceParallel(const PlanCandidate &best, std::string &why) {
  // The residual stream's layout is fixed for each tp when a search solves
  // its chain, so the other value takes a search of its own.
  PlanRequest other = request;
  other.pins.sequenceParallel = !best.sequenceParallel;
  return bestPlanOf(std::move(other), why);
}

std::optional<PlanCandidate>
Search::otherVirtualStages(const PlanCandidate &best, std::string &why) {
  PlanRequest other = request;
  if (best.virtualStages > 1)
    other.pins.virtualStages.reset();
  else
    other.pins.virtualStages = 2;
  return bestPlanOf(std::move(other), why);
}

std::vector<DimensionComparison>
Search::compareDimensions(const PlanCandidate &best,
                          const std::vector<PlanCandidate> &all) {
  static const char *const names[] = {"dp",
                                      "tp",
                                      "pp",
                                      "zero",
                                      "micro-batch",
                                      "recompute",
                                      "sequence-parallel",
                                      "virtual-stages"};
  bool training = request.mode == PlanMode::Training;
  std::vector<DimensionComparison> result;
  for (int d = 0; d < 8; ++d) {
    DimensionComparison cmp;
    cmp.dimension = names[d];
    cmp.chosen = dimensionValue(d, best);
    if (d == 7) {
      // Only a training pipeline (or a pin) can interleave.
      cmp.pinned = request.pins.virtualStages.has_value();
      if (!training || (best.pp == 1 && !cmp.pinned))
        continue;
      std::string why;
      cmp.runnerUp = otherVirtualStages(best, why);
      if (!cmp.runnerUp) {
        cmp.why = "the only value possible: " + why;
        result.push_back(std::move(cmp));
        continue;
      }
    } else if (d == 6) {
      cmp.pinned = request.pins.sequenceParallel.has_value();
      std::string why;
      cmp.runnerUp = otherSequenceParallel(best, why);
      if (!cmp.runnerUp) {
        cmp.why = "the only value possible: " + why;
        result.push_back(std::move(cmp));
        continue;
      }
    } else {
      PlanPins without = request.pins;
      std::optional<int64_t> *size[] = {&without.dp, &without.tp, &without.pp,
                                        nullptr, &without.microBatchSize};
      if (d == 3) {
        cmp.pinned = without.zeroStage.has_value();
        without.zeroStage.reset();
      } else if (d == 5) {
        cmp.pinned = without.recompute.has_value();
        without.recompute.reset();
      } else {
        cmp.pinned = size[d]->has_value();
        size[d]->reset();
      }
      // A pinned dimension: the best plan without its pin.
      std::vector<PlanCandidate> unpinned;
      if (cmp.pinned) {
        // Only plans with another value are wanted, and only the best.
        PlanNeed other{{{PlanNeed::kAny, 1}}, d, dimensionNumber(d, best)};
        unpinned = enumerate(without, other);
        llvm::stable_sort(unpinned, betterPlan);
      }
      for (const PlanCandidate &c : cmp.pinned ? unpinned : all)
        if (dimensionValue(d, c) != cmp.chosen) {
          cmp.runnerUp = c;
          break;
        }
    }

    if (!cmp.runnerUp) {
      cmp.why = "the only value possible";
      if (!training && (d == 3 || d == 5))
        cmp.why += d == 3 ? " (inference keeps no gradients or optimizer "
                            "states to shard)"
                          : " (inference has no backward pass)";
      else if (cluster.worldSize() == 1 && d < 3)
        cmp.why += " (one rank)";
      else
        cmp.why += " for this model, batch, cluster and pins";
      result.push_back(std::move(cmp));
      continue;
    }
    const PlanCandidate &o = *cmp.runnerUp;
    cmp.runnerUpValue = dimensionValue(d, o);
    std::string head =
        llvm::formatv("{0} {1}={2} (dp={3} tp={4} pp={5} zero {6} mb {7} "
                      "recompute {8}): ",
                      cmp.pinned ? "pinned; against the best plan without the "
                                   "pin,"
                                 : "over",
                      cmp.dimension, cmp.runnerUpValue, o.dp, o.tp, o.pp,
                      o.zeroStage, o.microBatchSize, recomputeName(o.recompute))
            .str();
    double change = best.stepSeconds / o.stepSeconds - 1;
    cmp.stepTimeChange = change;
    if (!o.fits) {
      cmp.dominantTerm = "memory";
      cmp.why = head + llvm::formatv("{0}={1} does not fit (needs {2:F1} GiB "
                                     "per GPU, {3:F1} GiB available)",
                                     cmp.dimension, cmp.runnerUpValue,
                                     o.memory.total() / kGiB,
                                     cluster.device.memoryGiB)
                           .str();
      result.push_back(std::move(cmp));
      continue;
    }
    std::string times =
        llvm::formatv("({0} vs {1} per step)", formatSeconds(best.stepSeconds),
                      formatSeconds(o.stepSeconds))
            .str();
    if (!(std::fabs(change) > 1e-3)) {
      cmp.dominantTerm = "tie";
      bool smaller = best.memory.total() <= o.memory.total();
      cmp.why = head + llvm::formatv("as fast (within 0.1%: {0} vs {1} per "
                                     "step); the chosen plan needs {2} memory "
                                     "per GPU ({3:F2} vs {4:F2} GiB)",
                                     formatSeconds(best.stepSeconds),
                                     formatSeconds(o.stepSeconds),
                                     smaller ? "no more" : "more",
                                     best.memory.total() / kGiB,
                                     o.memory.total() / kGiB)
                           .str();
      result.push_back(std::move(cmp));
      continue;
    }
    // The part of the step that moved the most in the direction the step
    // moved.
    bool faster = change < 0;
    TermDifference term =
        faster ? largestDifference(o, best) : largestDifference(best, o);
    cmp.dominantTerm = term.term;
    cmp.why = head + llvm::formatv("{0}{1:F1}% step time {2}, mostly {3} {4} "
                                   "({0}{5})",
                                   faster ? "-" : "+", std::fabs(change) * 100,
                                   times, faster ? "less" : "more", term.term,
                                   formatSeconds(term.delta))
                         .str();
    // The search does not try virtual stages (docs/planner.md): say how to
    // have the faster plan.
    if (d == 7 && !cmp.pinned && !faster)
      cmp.why += "; virtual stages are not searched: pin --virtual-stages " +
                 cmp.runnerUpValue + " for that plan";
    // Where tensor parallelism leaves a node, its collectives take the
    // network instead of the node's link.
    if (cmp.dominantTerm == "exposed communication") {
      int64_t node = cluster.gpusPerNode;
      const PlanCandidate &inside = faster ? best : o;
      const PlanCandidate &across = faster ? o : best;
      if (inside.tp <= node && across.tp > node) {
        cmp.why += "; ";
        if (inside.tp > 1)
          cmp.why += llvm::formatv("tp={0}'s collectives stay inside a node "
                                   "({1}), ",
                                   inside.tp, cluster.intraNode.kind)
                         .str();
        cmp.why += llvm::formatv("tp={0}'s collectives cross nodes ({1})",
                                 across.tp, cluster.interNode.kind)
                       .str();
      }
    }
    result.push_back(std::move(cmp));
  }
  return result;
}

void Search::explain(const PlanCandidate &best, PlanResult &result) {
  const std::vector<const SegmentCost *> &segs =
      segmentCosts(best.tp, best.microBatchSize);
  CostContext ctx = context(best.tp, best.microBatchSize);
  std::vector<int64_t> stageOfSegment(graph.segments.size(), 0);
  for (auto [k, stage] : llvm::enumerate(best.stages))
    for (int64_t s = stage.firstSegment; s <= stage.lastSegment; ++s)
      stageOfSegment[s] = k;
  for (auto [s, seg] : llvm::enumerate(graph.segments)) {
    for (int64_t i = seg.first; i <= seg.last; ++i) {
      const PlanOp &op = graph.ops[i];
      result.opStages.push_back({op.op, stageOfSegment[s]});
      // Ops on inputs and constants alone adapt to their users for free.
      if (op.result < 0 || !graph.values[op.result].isActivation)
        continue;
      const OpOption &option =
          op.options[chains.at(best.tp)[s].choice[i - seg.first]];
      OpDecision d;
      d.op = op.op;
      d.name = decisionNodeName(op.op);
      d.signature = opSignature(graph, op);
      d.free = op.free;
      d.splitLoop = option.splitLoop;
      d.operandShardings.assign(option.operands.begin(), option.operands.end());
      d.resultSharding = option.result;
      const ValueInfo &v = graph.values[op.result];
      if (v.lastUse > seg.last || v.isResult) {
        d.segmentLast = graph.ops[seg.last].op;
        d.leavingSharding =
            leavingSharding(graph, seg, segs[s]->boundary, op.result);
      }
      if (option.splitLoop < 0) {
        d.sharding = "replicated over tp";
      } else {
        d.sharding =
            llvm::formatv("split loop d{0} over tp (result: {1})",
                          option.splitLoop, shardingName(option.result))
                .str();
      }
      d.computeSeconds = opComputeSeconds(graph, op, option, best.tp, ctx);
      result.decisions.push_back(std::move(d));
    }
  }
}

llvm::Expected<PlanResult> Search::run() {
  auto start = std::chrono::steady_clock::now();
  int64_t world = cluster.worldSize();
  int64_t batch = graph.globalBatch;
  const PlanPins &pins = request.pins;
  bool training = request.mode == PlanMode::Training;
  auto error = [](const llvm::Twine &msg) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), msg);
  };

  // Pins that can never work, with the reason.
  for (auto [name, value] :
       {std::pair<const char *, std::optional<int64_t>>{"dp", pins.dp},
        {"tp", pins.tp},
        {"pp", pins.pp}})
    if (value && (*value < 1 || world % *value != 0))
      return error(llvm::formatv("--{0}={1} does not divide the world size "
                                 "{2} of the cluster",
                                 name, *value, world)
                       .str());
  if (pins.sequenceParallel.value_or(false)) {
    if (pins.tp && *pins.tp == 1)
      return error("--sequence-parallel=on splits the sequence over the "
                   "tensor-parallel group, and --tp=1 has none: pin --tp "
                   "above 1 or leave tp to the planner");
    if (llvm::none_of(residualStream, [](bool b) { return b; }))
      return error("--sequence-parallel=on: the model hands on no "
                   "activation of tokens by features ([batch, sequence, "
                   "hidden] or [tokens, hidden]) between its segments, so "
                   "there is no residual stream to split along the sequence "
                   "(sequence parallelism is for transformer stacks)");
    if (llvm::none_of(divisors(world),
                      [&](int64_t tp) { return canSplitSequence(tp); })) {
      std::string shapes;
      for (auto [k, seg] : llvm::enumerate(graph.segments))
        if (residualStream[k]) {
          const ValueInfo &v = graph.values[segmentInput(graph, seg)];
          shapes = llvm::join(
              llvm::map_range(v.shape,
                              [](int64_t d) { return std::to_string(d); }),
              "x");
          break;
        }
      return error(llvm::formatv(
                       "--sequence-parallel=on: no tensor-parallel size of the "
                       "cluster's {0} devices (above 1) divides a non-batch, "
                       "non-feature dim of the residual stream ({1}); choose a "
                       "sequence length "
                       "that tp divides, or --sequence-parallel=off",
                       world, shapes)
                       .str());
    }
    if (pins.tp && !canSplitSequence(*pins.tp))
      return error(llvm::formatv("--sequence-parallel=on: --tp={0} does not "
                                 "divide the sequence of the residual "
                                 "stream",
                                 *pins.tp)
                       .str());
  }
  if (pins.dp && batch % *pins.dp != 0)
    return error(llvm::formatv("--dp={0} does not divide the global batch "
                               "{1} (the leading dim of the first input)",
                               *pins.dp, batch)
                     .str());
  // Inference concatenates the parts' outputs: only a batch whose outputs
  // lead with it can be cut (training returns the loss, summed over parts).
  bool batchCuttable = training || graph.batchCutProblem.empty();
  if (!batchCuttable && pins.dp && *pins.dp > 1)
    return error(
        llvm::formatv("--dp={0}: {1}", *pins.dp, graph.batchCutProblem).str());
  if (!batchCuttable && pins.microBatchSize &&
      *pins.microBatchSize != batch / pins.dp.value_or(1))
    return error(llvm::formatv("--micro-batch-size={0}: {1}",
                               *pins.microBatchSize, graph.batchCutProblem)
                     .str());
  if (pins.pp && *pins.pp > int64_t(graph.segments.size()))
    return error(llvm::formatv("--pp={0}: the model has only {1} segments "
                               "that can start a pipeline stage",
                               *pins.pp, graph.segments.size())
                     .str());
  if (int64_t v = pins.virtualStages.value_or(1); v > 1) {
    if (!training)
      return error("--virtual-stages applies to training (--mode train): "
                   "the interleaved 1F1B schedule interleaves the chunks' "
                   "forwards with their backwards, and inference runs each "
                   "stage's forwards in order");
    if (pins.schedule == PipelineSchedule::GPipe)
      return error("--virtual-stages " + llvm::Twine(v) +
                   " runs the interleaved 1F1B schedule, not "
                   "--pipeline-schedule gpipe: drop one of them");
    if (pins.pp && *pins.pp == 1)
      return error("--virtual-stages " + llvm::Twine(v) +
                   " gives each pipeline stage several model chunks, and "
                   "--pp=1 has no pipeline: pin --pp above 1 or leave pp to "
                   "the planner");
    if (pins.pp && pins.dp && pins.microBatchSize && *pins.pp > 1 &&
        batch % (*pins.dp * *pins.microBatchSize) == 0 &&
        batch / *pins.dp / *pins.microBatchSize % *pins.pp != 0)
      return error(
          llvm::formatv("--virtual-stages {0}: the interleaved schedule runs "
                        "the micro-batches in groups of the {1} pipeline "
                        "stages, and {2} micro-batches of {3} per replica "
                        "(global batch {4} over dp {5}) are not a multiple; "
                        "choose another --micro-batch-size or --pp",
                        v, *pins.pp, batch / *pins.dp / *pins.microBatchSize,
                        *pins.microBatchSize, batch, *pins.dp)
              .str());
    if (pins.pp && *pins.pp * v > int64_t(graph.segments.size()))
      return error(llvm::formatv("--pp={0} x --virtual-stages={1}: the model "
                                 "has only {2} segments that can start a "
                                 "pipeline stage, fewer than {3} virtual "
                                 "stages",
                                 *pins.pp, v, graph.segments.size(),
                                 *pins.pp * v)
                       .str());
  }
  if (pins.zeroStage && (*pins.zeroStage < 0 || *pins.zeroStage > 3))
    return error("--zero must be 0, 1, 2 or 3");
  if (pins.zeroStage && *pins.zeroStage > 0 && !training)
    return error("--zero applies to training (--mode train); inference keeps "
                 "no gradients or optimizer states");
  if (pins.recompute && *pins.recompute != Recompute::None && !training)
    return error("--recompute applies to training (--mode train)");
  if (pins.microBatchSize &&
      (*pins.microBatchSize < 1 || batch % *pins.microBatchSize != 0))
    return error(llvm::formatv("--micro-batch-size={0} does not divide the "
                               "global batch {1}",
                               *pins.microBatchSize, batch)
                     .str());
  if (pins.dp && pins.tp && pins.pp && *pins.dp * *pins.tp * *pins.pp != world)
    return error(llvm::formatv("--dp={0} x --tp={1} x --pp={2} = {3}, but the "
                               "cluster has {4} ranks",
                               *pins.dp, *pins.tp, *pins.pp,
                               *pins.dp * *pins.tp * *pins.pp, world)
                     .str());

  // The plans the report needs: the best of each of the best grid shapes
  // (the runner-ups) and, for --explain-plan, the best of the two best
  // values of each dimension the pins leave free (its runner-up).
  PlanNeed need;
  need.rules.push_back(
      {PlanNeed::kShape, std::max(1, request.maxAlternatives + 1)});
  if (request.compareDimensions) {
    std::optional<int64_t> sizes[] = {pins.dp, pins.tp, pins.pp};
    for (int d = 0; d < 6; ++d) {
      bool pinned = d < 3    ? sizes[d].has_value()
                    : d == 3 ? pins.zeroStage.has_value()
                    : d == 4 ? pins.microBatchSize.has_value()
                             : pins.recompute.has_value();
      if (!pinned)
        need.rules.push_back({d, 2});
    }
  }
  std::vector<PlanCandidate> all = enumerate(pins, need);
  if (all.empty())
    return error(llvm::formatv(
                     "no plan matches the request: the global batch {0} must "
                     "divide among the data-parallel ranks, the world size {1} "
                     "must factor as dp x tp x pp with the pins given{2}",
                     batch, world,
                     pins.virtualStages.value_or(1) > 1
                         ? ", and --virtual-stages needs pp > 1 with the "
                           "micro-batches per replica a multiple of pp (the "
                           "interleaved schedule runs them in groups of pp)"
                         : "")
                     .str());
  int64_t candidates = lastEnumerated, pruned = lastPruned;
  llvm::sort(all, betterPlan);

  PlanResult result;
  result.best = all.front();
  // Runner-ups: the best plan of each other grid shape first, so the list
  // shows real alternatives rather than near-copies of the winner. A plan
  // that does not fit has none (its report says what would fit).
  int maxAlternatives = result.best.fits ? request.maxAlternatives : 0;
  std::set<std::tuple<int64_t, int64_t, int64_t>> shapes = {
      {result.best.dp, result.best.tp, result.best.pp}};
  for (size_t i = 1;
       i < all.size() && int(result.alternatives.size()) < maxAlternatives;
       ++i) {
    auto shape = std::make_tuple(all[i].dp, all[i].tp, all[i].pp);
    if (!shapes.insert(shape).second)
      continue;
    PlanCandidate alt = all[i];
    alt.whyNot = whyNot(alt, result.best, cluster);
    result.alternatives.push_back(std::move(alt));
  }
  for (size_t i = 1;
       i < all.size() && int(result.alternatives.size()) < maxAlternatives;
       ++i) {
    bool listed = false;
    for (const PlanCandidate &a : result.alternatives)
      listed |= a.dp == all[i].dp && a.tp == all[i].tp && a.pp == all[i].pp &&
                a.zeroStage == all[i].zeroStage &&
                a.microBatchSize == all[i].microBatchSize &&
                a.recompute == all[i].recompute;
    if (listed)
      continue;
    PlanCandidate alt = all[i];
    alt.whyNot = whyNot(alt, result.best, cluster);
    result.alternatives.push_back(std::move(alt));
  }
  explain(result.best, result);
  result.best.collectives = collectiveVolume(result.best);
  result.globalBatch = batch;
  result.tokensPerStep = graph.tokensPerStep;
  result.parameters = graph.parameterElements;
  result.flopsPerStep = graph.forwardFlops * (training ? 3 : 1);
  result.segments = graph.segments.size();
  result.distinctSegments = graph.distinctSegments;
  result.candidatesEvaluated = candidates;
  result.candidatesPruned = pruned;
  // Nothing the pins allow fits: the error carries the smallest plan, what
  // it lacks and what would fit, for the report.
  if (!result.best.fits)
    result.infeasible = infeasibility(result.best);
  else if (request.compareDimensions)
    result.dimensions = compareDimensions(result.best, all);
  result.searchSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  if (result.infeasible)
    return llvm::make_error<InfeasiblePlanError>(std::move(result));
  return result;
}

std::vector<PlanKey> Search::legalPlans(const PlanPins &pins) const {
  int64_t world = cluster.worldSize();
  int64_t batch = graph.globalBatch;
  bool training = request.mode == PlanMode::Training;
  // Inference concatenates the parts' outputs: only a batch whose outputs
  // lead with it can be cut (training returns the loss, summed over parts).
  bool batchCuttable = training || graph.batchCutProblem.empty();
  std::vector<PlanKey> keys;
  for (int64_t tp : divisors(world)) {
    if (pins.tp && tp != *pins.tp)
      continue;
    // Sequence parallelism needs a tp group that divides the sequence.
    if (request.pins.sequenceParallel.value_or(false) && !canSplitSequence(tp))
      continue;
    for (int64_t pp : divisors(world / tp)) {
      if (pins.pp && pp != *pins.pp)
        continue;
      if (pp > 1 && pp > int64_t(graph.segments.size()))
        continue;
      // Virtual stages: the pin's, where a pipeline of pp * v segments
      // admits it. Not searched: trying 1, 2 and 4 chunks tripled the
      // search on the largest published rows (530B: 0.40 to 1.23 s, 1T:
      // 0.44 to 1.90 s) and changed none of their plans
      // (docs/planner.md, "Virtual stages").
      int64_t chunks = pins.virtualStages.value_or(1);
      if (chunks > 1 &&
          (pp == 1 || pp * chunks > int64_t(graph.segments.size())))
        continue;
      int64_t dp = world / tp / pp;
      if (pins.dp && dp != *pins.dp)
        continue;
      if (batch % dp != 0 || (dp > 1 && !batchCuttable))
        continue;
      for (int64_t mb : divisors(batch / dp)) {
        if (pins.microBatchSize && mb != *pins.microBatchSize)
          continue;
        if (!batchCuttable && mb != batch / dp)
          continue;
        if (!pins.microBatchSize && request.wholeReplicaBatch &&
            mb != batch / dp)
          continue;
        // Without a pipeline, micro-batching only adds steps (inference).
        if (pp == 1 && !training && mb != batch / dp)
          continue;
        for (Recompute r :
             {Recompute::None, Recompute::Selective, Recompute::Full}) {
          if (!training && r != Recompute::None)
            continue;
          if (pins.recompute && r != *pins.recompute)
            continue;
          for (int zero = 0; zero <= 3; ++zero) {
            if ((!training || dp == 1) && zero > 0)
              continue;
            if (pins.zeroStage && zero != *pins.zeroStage &&
                !(dp == 1 && zero == 0))
              continue;
            // The interleaved schedule runs micro-batches in groups of pp.
            if (chunks == 1 || (batch / dp / mb) % pp == 0)
              keys.push_back({dp, tp, pp, zero, mb, r, chunks});
          }
        }
      }
    }
  }
  return keys;
}

void Search::fixChainMicroBatches(const PlanPins &pins) {
  for (const PlanKey &key : legalPlans(pins))
    chainMicroBatch.try_emplace(key.tp, key.microBatch);
}

namespace {

/// The value of PlanNeed key `key` (a dimension, the grid shape or
/// nothing) of `k`.
int64_t needKey(int key, const PlanKey &k, int64_t world) {
  switch (key) {
  case 0:
    return k.dp;
  case 1:
    return k.tp;
  case 2:
    return k.pp;
  case 3:
    return k.zero;
  case 4:
    return k.microBatch;
  case 5:
    return int64_t(k.recompute);
  case PlanNeed::kShape:
    return (k.dp * (world + 1) + k.tp) * (world + 1) + k.pp;
  default:
    return 0;
  }
}

/// The best fitting step time of each value of one PlanNeed rule's key, and
/// the `keep`-th best of them: plans whose lower bound exceeds it cannot be
/// among those the rule keeps.
struct RuleState {
  PlanNeed::Rule rule;
  std::map<int64_t, double> best;
  double threshold = std::numeric_limits<double>::infinity();

  void add(int64_t value, double step) {
    auto [it, inserted] = best.try_emplace(value, step);
    if (!inserted) {
      if (step >= it->second)
        return;
      it->second = step;
    }
    if (int64_t(best.size()) < rule.keep)
      return;
    std::vector<double> steps;
    for (auto [v, t] : best)
      steps.push_back(t);
    std::nth_element(steps.begin(), steps.begin() + (rule.keep - 1),
                     steps.end());
    threshold = steps[rule.keep - 1];
  }
};

} // namespace

std::vector<PlanCandidate> Search::enumerate(const PlanPins &pins,
                                             const PlanNeed &need) {
  int64_t world = cluster.worldSize();
  fixChainMicroBatches(pins);
  std::vector<PlanKey> keys = legalPlans(pins);
  if (need.skipDimension >= 0)
    llvm::erase_if(keys, [&](const PlanKey &k) {
      return needKey(need.skipDimension, k, world) == need.skipValue;
    });
  lastEnumerated = keys.size();
  lastPruned = 0;
  // Best first: the plans of least lower bound are priced first, so that the
  // bounds of the rules fall fast; once a plan's bound exceeds every rule's,
  // so do those of every plan after it.
  std::vector<double> bounds(keys.size());
  bool prune = !need.rules.empty();
  for (auto [i, k] : llvm::enumerate(keys))
    bounds[i] = prune ? lowerBound(k) : 0;
  std::vector<size_t> order(keys.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  llvm::stable_sort(order,
                    [&](size_t a, size_t b) { return bounds[a] < bounds[b]; });
  std::vector<RuleState> rules;
  for (const PlanNeed::Rule &rule : need.rules)
    rules.push_back({rule});
  std::vector<std::pair<size_t, PlanCandidate>> priced;
  int64_t overTheCap = 0;
  for (auto [n, i] : llvm::enumerate(order)) {
    if (prune && llvm::all_of(rules, [&](const RuleState &r) {
          return bounds[i] > r.threshold;
        })) {
      lastPruned = keys.size() - n;
      break;
    }
    const PlanKey &k = keys[i];
    // A plan slower than every rule's threshold is needed by none: its stage
    // split may stop there.
    double stepCap = 0;
    for (const RuleState &r : rules)
      stepCap = std::max(stepCap, r.threshold);
    if (!prune)
      stepCap = std::numeric_limits<double>::infinity();
    auto memoKey = std::make_tuple(k.tp, k.pp, k.zero, k.microBatch,
                                   int(k.recompute), k.virtualStages);
    auto it = evaluated.find(memoKey);
    if (it == evaluated.end())
      it = evaluated.emplace(memoKey, price(k, stepCap)).first;
    else if (!it->second.exact && it->second.stepCap < stepCap)
      it->second = price(k, stepCap);
    if (!it->second.exact) {
      ++overTheCap; // as good as pruned
      continue;
    }
    const PlanCandidate &c = it->second.plan;
    if (c.fits)
      for (RuleState &r : rules)
        r.add(needKey(r.rule.key, k, world), c.stepSeconds);
    priced.push_back({i, c});
  }
  lastPruned += overTheCap;
  // In enumeration order: ties between plans keep the order they had.
  llvm::sort(priced,
             [](const auto &a, const auto &b) { return a.first < b.first; });
  std::vector<PlanCandidate> all;
  for (auto &[i, c] : priced)
    all.push_back(std::move(c));
  return all;
}

} // namespace

struct PinnedPlanPricer::Impl {
  Search search;
};

PinnedPlanPricer::PinnedPlanPricer(const ProgramGraph &graph,
                                   const PlanRequest &request)
    : impl(new Impl{Search(graph, request)}) {}

PinnedPlanPricer::~PinnedPlanPricer() = default;

PlanCandidate PinnedPlanPricer::price(const PinnedPlan &plan) {
  PlanKey key{
      plan.dp,       plan.tp, plan.pp, plan.zeroStage, plan.microBatchSize,
      plan.recompute};
  return impl->search.pricePinned(key, plan.stages);
}

} // namespace plan

char InfeasiblePlanError::ID = 0;

void InfeasiblePlanError::log(llvm::raw_ostream &os) const {
  if (planResult.infeasible)
    os << planResult.infeasible->message;
  else
    os << "no plan fits in memory";
}

std::vector<PinnedOpSharding> pinnedOpShardingsOf(const PlanResult &result) {
  std::vector<PinnedOpSharding> pins;
  for (const OpDecision &d : result.decisions) {
    if (d.name.empty())
      continue;
    PinnedOpSharding pin;
    pin.node = d.name;
    pin.signature = d.signature;
    pin.operandShardings = d.operandShardings;
    pin.resultSharding = d.resultSharding;
    pins.push_back(std::move(pin));
  }
  return pins;
}

llvm::Expected<PlanResult> planProgram(func::FuncOp main,
                                       const PlanRequest &request) {
  auto start = std::chrono::steady_clock::now();
  // On GPUs only the head dims the CUDA kernels take are fused.
  std::optional<AttentionPatternOptions> fused;
  if (request.fusedAttention)
    fused = request.cluster.device.isCpu() ? AttentionPatternOptions()
                                           : cudaAttentionKernelLimits();
  SmallVector<llvm::GlobPattern> frozen;
  for (const std::string &glob : request.frozenParameters) {
    auto pattern = llvm::GlobPattern::create(glob);
    if (!pattern)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "--freeze " + glob + ": " +
                                         llvm::toString(pattern.takeError()));
    frozen.push_back(std::move(*pattern));
  }
  bool training = request.mode == PlanMode::Training;
  auto graph = plan::buildProgramGraph(
      main, fused, frozen,
      training ? std::optional<llvm::StringRef>(request.lossOutput)
               : std::nullopt,
      training && request.fusedCrossEntropy);
  if (failed(graph))
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot analyse the program for planning");
  plan::followPinnedShardings(*graph, request.pinnedOpShardings);
  plan::Search search(*graph, request);
  auto result = search.run();
  if (result)
    result->searchSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  return result;
}

} // namespace autopar
