//===- PlanReport.cpp - Plan report JSON, plan table, --explain -----------===//

#include "PlannerImpl.h"

#include "autopar/Planner/Placement.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace autopar {

static llvm::json::Object memoryJson(const MemoryBreakdown &m) {
  return llvm::json::Object{{"parameters", m.parameters},
                            {"gradients", m.gradients},
                            {"optimizer_states", m.optimizerStates},
                            {"activations", m.activations},
                            {"working_set", m.workingSet},
                            {"communication", m.communication},
                            {"other", m.other}};
}

static llvm::json::Object predictedJson(const PlanCandidate &c) {
  return llvm::json::Object{
      {"step_time_s", c.stepSeconds},
      {"tokens_per_s", c.tokensPerSecond},
      {"tflops_per_gpu", c.tflopsPerGpu},
      {"mfu", c.mfu},
      {"bubble_fraction", c.bubbleFraction},
      {"step_time_breakdown_s",
       llvm::json::Object{
           {"compute", c.time.compute},
           {"exposed_communication", c.time.exposedCommunication},
           {"bubble", c.time.bubble},
           {"optimizer", c.time.optimizer}}},
      {"memory_per_gpu_bytes", c.memory.total()},
      {"memory_breakdown_bytes", memoryJson(c.memory)},
      {"fits", c.fits}};
}

/// {axis: {op: {calls, bus_bytes}}}: what `autopar-run --comm-stats-json`
/// measures, in the same shape.
static llvm::json::Object collectivesJson(const PlanCandidate &c) {
  llvm::json::Object axes;
  for (const CollectiveVolume &v : c.collectives) {
    llvm::json::Value &axis = axes[v.axis];
    if (!axis.getAsObject())
      axis = llvm::json::Object{};
    (*axis.getAsObject())[v.op] =
        llvm::json::Object{{"calls", v.calls}, {"bus_bytes", v.busBytes}};
  }
  return axes;
}

static llvm::json::Object meshJson(const PlanCandidate &c) {
  return llvm::json::Object{{"dp", c.dp}, {"tp", c.tp}, {"pp", c.pp}};
}

/// A plan's settings and prediction, as the report's alternatives give them.
static llvm::json::Object planJson(const PlanCandidate &c) {
  return llvm::json::Object{{"mesh", meshJson(c)},
                            {"zero_stage", c.zeroStage},
                            {"micro_batch_size", c.microBatchSize},
                            {"num_micro_batches", c.numMicroBatches},
                            {"recompute", recomputeName(c.recompute)},
                            {"virtual_stages", c.virtualStages},
                            {"sequence_parallel", c.sequenceParallel},
                            {"predicted", predictedJson(c)}};
}

/// Why the pinned plan does not fit and what would: the bytes over, the
/// pins, those to change and the nearest plan that fits.
static llvm::json::Object infeasibleJson(const PlanInfeasibility &inf,
                                         const PlanCandidate &best) {
  llvm::json::Object pins;
  for (const auto &[name, value] : inf.pins) {
    int64_t number;
    if (llvm::to_integer(value, number))
      pins[name] = number;
    else
      pins[name] = value;
  }
  llvm::json::Array fitting;
  for (const PlanInfeasibility::Release &r : inf.releases) {
    llvm::json::Object plan = planJson(r.plan);
    plan["released_pins"] = llvm::json::Array(r.pins);
    fitting.push_back(std::move(plan));
  }
  llvm::json::Value nearest = nullptr;
  llvm::json::Array change;
  if (!inf.releases.empty()) {
    nearest = fitting.front();
    change = llvm::json::Array(inf.releases.front().pins);
  }
  return llvm::json::Object{{"message", inf.message},
                            {"memory_per_gpu_bytes", best.memory.total()},
                            {"device_memory_bytes", inf.deviceMemoryBytes},
                            {"bytes_over", inf.bytesOver},
                            {"pins", std::move(pins)},
                            {"pins_to_change", std::move(change)},
                            {"nearest_fitting_plan", std::move(nearest)},
                            {"fitting_plans", std::move(fitting)}};
}

llvm::json::Value planReportJson(const PlanResult &result,
                                 const PlanRequest &request) {
  const PlanCandidate &best = result.best;
  // With virtual stages, one entry per virtual stage (chunk c of stage s),
  // each with its stage's memory.
  llvm::json::Array stages;
  bool chunked = best.virtualStages > 1;
  for (auto [i, s] : llvm::enumerate(best.stages)) {
    llvm::json::Object stage{
        {"stage", chunked ? int64_t(i) % best.pp : int64_t(i)},
        {"layers", s.layers},
        {"segments",
         llvm::formatv("{0}-{1}", s.firstSegment, s.lastSegment).str()},
        {"onnx_nodes", s.onnxNodes},
        {"seconds_per_micro_batch", s.secondsPerMicroBatch},
        {"memory_bytes", s.memory.total()},
        {"memory_breakdown_bytes", memoryJson(s.memory)}};
    if (chunked) {
      stage["chunk"] = int64_t(i) / best.pp;
      stage["virtual_stage"] = int64_t(i);
    }
    stages.push_back(std::move(stage));
  }
  llvm::json::Array alternatives;
  for (const PlanCandidate &a : result.alternatives) {
    llvm::json::Object alternative = planJson(a);
    alternative["why_not"] = a.whyNot;
    alternatives.push_back(std::move(alternative));
  }
  // The order each stage runs its micro-batches in, as autopar-run executes
  // it (pipelineSchedule()): what the plan picture draws.
  bool training = request.mode == PlanMode::Training;
  llvm::json::Array stageOrders;
  for (int64_t s = 0; s < best.pp; ++s)
    stageOrders.push_back(pipelineStageOrder(best.schedule, best.pp, s,
                                             best.numMicroBatches, training,
                                             best.virtualStages));
  const ClusterSpec &cluster = request.cluster;
  llvm::json::Object report{
      {"model", request.modelName},
      {"mode", request.mode == PlanMode::Training ? "train" : "infer"},
      {"precision", precisionName(request.precision)},
      {"cluster", cluster.name},
      // The machine model the plan was made for, in the cluster file format
      // (a local:N cluster's estimates included).
      {"cluster_spec", clusterToJson(cluster)},
      {"device", cluster.device.name},
      {"device_memory_bytes", cluster.device.memoryGiB * 1024.0 * 1024 * 1024},
      {"world_size", cluster.worldSize()},
      {"global_batch", result.globalBatch},
      {"tokens_per_step", result.tokensPerStep},
      {"parameters", result.parameters},
      {"model_flops_per_step", result.flopsPerStep},
      {"mesh", meshJson(best)},
      {"zero_stage", best.zeroStage},
      {"micro_batch_size", best.microBatchSize},
      {"num_micro_batches", best.numMicroBatches},
      {"recompute", recomputeName(best.recompute)},
      {"schedule", scheduleName(best.schedule)},
      {"virtual_stages", best.virtualStages},
      {"sequence_parallel", best.sequenceParallel},
      {"stage_orders", std::move(stageOrders)},
      {"stages", std::move(stages)},
      {"predicted", predictedJson(best)},
      {"predicted_collectives", collectivesJson(best)},
      {"search_time_s", result.searchSeconds},
      {"search",
       llvm::json::Object{{"segments", result.segments},
                          {"distinct_segments", result.distinctSegments},
                          {"candidates_evaluated", result.candidatesEvaluated},
                          {"candidates_pruned", result.candidatesPruned}}},
      {"alternatives", std::move(alternatives)}};
  // Which nodes each tp group, dp group and stage spans, as autopar-run
  // numbers the ranks (Placement.h).
  if (best.dp >= 1 && best.tp >= 1 && best.pp >= 1)
    report["placement"] =
        placementJson(placeRanks(cluster, best.dp, best.tp, best.pp));
  if (result.infeasible)
    report["infeasible"] = infeasibleJson(*result.infeasible, best);
  return report;
}

static std::string gib(double bytes) {
  return llvm::formatv("{0:F2} GiB", bytes / (1024.0 * 1024 * 1024)).str();
}

std::string plan::formatSeconds(double s) {
  if (s >= 1)
    return llvm::formatv("{0:F3} s", s).str();
  if (s >= 1e-3)
    return llvm::formatv("{0:F3} ms", s * 1e3).str();
  return llvm::formatv("{0:F1} us", s * 1e6).str();
}

/// A count with a unit that keeps it readable: "1.01T", "124.4M", "8.4K".
static std::string formatCount(double n) {
  for (auto [scale, unit] :
       {std::pair{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "K"}})
    if (n >= scale)
      return llvm::formatv("{0:F2}{1}", n / scale, unit).str();
  return llvm::formatv("{0}", int64_t(n)).str();
}

void printPlanTable(llvm::raw_ostream &os, const PlanResult &result,
                    const PlanRequest &request) {
  const PlanCandidate &b = result.best;
  const ClusterSpec &c = request.cluster;
  os << llvm::formatv("autopar plan for {0} on {1} ({2} x {3} {4})\n",
                      request.modelName, c.name, c.nodes, c.gpusPerNode,
                      c.device.name);
  os << llvm::formatv("  mode {0}, precision {1}, global batch {2} ({3} "
                      "tokens), {4} parameters\n",
                      request.mode == PlanMode::Training ? "train" : "infer",
                      precisionName(request.precision), result.globalBatch,
                      result.tokensPerStep, formatCount(result.parameters));
  os << llvm::formatv(
      "  mesh          dp={0} tp={1} pp={2}   zero {3}   "
      "micro-batch {4} x {5}   recompute {6}   schedule {7}"
      "{8}{9}\n",
      b.dp, b.tp, b.pp, b.zeroStage, b.microBatchSize, b.numMicroBatches,
      recomputeName(b.recompute), scheduleName(b.schedule),
      b.virtualStages > 1 ? " interleaved x" + std::to_string(b.virtualStages)
                          : std::string(),
      b.sequenceParallel ? "   sequence-parallel" : "");
  if (b.dp >= 1 && b.tp >= 1 && b.pp >= 1)
    os << "  placement     "
       << describePlacement(placeRanks(c, b.dp, b.tp, b.pp)) << "\n";
  os << llvm::formatv("  step time     {0}  (compute {1}, exposed comm {2}, "
                      "bubble {3}, optimizer {4})\n",
                      plan::formatSeconds(b.stepSeconds),
                      plan::formatSeconds(b.time.compute),
                      plan::formatSeconds(b.time.exposedCommunication),
                      plan::formatSeconds(b.time.bubble),
                      plan::formatSeconds(b.time.optimizer));
  os << llvm::formatv("  throughput    {0:F1} tokens/s, {1:F1} TFLOP/s per "
                      "device, MFU {2:P1}\n",
                      b.tokensPerSecond, b.tflopsPerGpu, b.mfu);
  const MemoryBreakdown &m = b.memory;
  os << llvm::formatv("  memory/device {0} of {1:F1} GiB (params {2}, grads "
                      "{3}, optimizer {4}, activations {5}, working set {6}, "
                      "comm {7}, other {8})\n",
                      gib(m.total()), c.device.memoryGiB, gib(m.parameters),
                      gib(m.gradients), gib(m.optimizerStates),
                      gib(m.activations), gib(m.workingSet),
                      gib(m.communication), gib(m.other));
  // With virtual stages, "stage 1.0": chunk 0 of stage 1.
  for (auto [i, s] : llvm::enumerate(b.stages))
    os << llvm::formatv(
        "  stage {0,-3}    segments {1}-{2}{3}, {4} ONNX "
        "nodes, {5} per micro-batch, {6}\n",
        b.virtualStages > 1 ? std::to_string(int64_t(i) % b.pp) + "." +
                                  std::to_string(int64_t(i) / b.pp)
                            : std::to_string(i),
        s.firstSegment, s.lastSegment,
        s.layers.empty() ? "" : " (layers " + s.layers + ")", s.onnxNodes,
        plan::formatSeconds(s.secondsPerMicroBatch), gib(s.memory.total()));
  os << llvm::formatv("  searched      {0} plans over {1} segments ({2} "
                      "distinct) in {3}\n",
                      result.candidatesEvaluated, result.segments,
                      result.distinctSegments,
                      plan::formatSeconds(result.searchSeconds));
  if (!result.alternatives.empty())
    os << "  runner-ups:\n";
  for (const PlanCandidate &a : result.alternatives)
    os << llvm::formatv("    dp={0} tp={1} pp={2}{7} zero {3} mb {4} recompute "
                        "{5}: {6}\n",
                        a.dp, a.tp, a.pp, a.zeroStage, a.microBatchSize,
                        recomputeName(a.recompute), a.whyNot,
                        a.virtualStages > 1
                            ? " x" + std::to_string(a.virtualStages) + " chunks"
                            : std::string());
}

void printPlanDimensions(llvm::raw_ostream &os, const PlanResult &result) {
  os << "why this plan, per dimension (against the best plan with another "
        "value):\n";
  for (const DimensionComparison &d : result.dimensions)
    os << llvm::formatv("  {0,-22} {1}\n", d.dimension + "=" + d.chosen, d.why);
}

void printPlanExplanation(llvm::raw_ostream &os, const PlanResult &result) {
  os << "per-op decisions (tp=" << result.best.tp << ", micro-batch "
     << result.best.microBatchSize << "):\n";
  for (const OpDecision &d : result.decisions) {
    if (d.free)
      continue;
    os << llvm::formatv("  {0,-40} {1,-24} {2,-44} compute {3}\n",
                        d.name.empty() ? "<unnamed>" : d.name,
                        d.op->getName().getStringRef(), d.sharding,
                        plan::formatSeconds(d.computeSeconds));
  }
}

} // namespace autopar
