//===- Pipeline.cpp - GPipe and 1F1B step time and memory -----------------===//
//
// Stage i takes t_i per micro-batch (forward + backward); m micro-batches;
// c per boundary crossing of one micro-batch's activations (or gradients).
//
//   T = sum_i t_i + (m - 1) * max_i t_i + 2 (p - 1) c
//
// Derivation (docs/cost-model.md): the first micro-batch's forward and the
// last micro-batch's backward must each cross every stage, which puts
// sum_i t_i plus the 2(p-1) boundary crossings on the critical path; the
// other m-1 micro-batches leave the pipeline no faster than its slowest
// stage admits them, max_i t_i each. Steady-state sends overlap compute.
// Balanced (t_i = t, c = 0): T = (m + p - 1) t, the bubble (p - 1) t is
// (p-1)/m of the ideal m t: GPipe (Huang et al., NeurIPS 2019) and 1F1B
// (PipeDream-Flush, Narayanan et al., ICML 2021) alike, as Megatron-LM
// (Narayanan et al., SC 2021, sec. 2.2.1) derives; 1F1B holds fewer
// activations.
//
// The order each stage works in is not restated here: it is the runtime's
// pipelineSchedule() (runtime/lib/PipelineSchedule.cpp, compiled into this
// library), which both microBatchesInFlight and pipelineStageOrder walk.
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/CostModel.h"
#include "autopar/runtime/PipelineSchedule.h"

#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <cassert>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

using namespace autopar;
namespace rt = autopar::runtime;

/// The runtime's ScheduleKind for `s`.
static rt::ScheduleKind runtimeScheduleKind(PipelineSchedule s) {
  switch (s) {
  case PipelineSchedule::GPipe:
    return rt::ScheduleKind::GPipe;
  case PipelineSchedule::OneFOneB:
    return rt::ScheduleKind::OneFOneB;
  }
  llvm_unreachable("unknown pipeline schedule");
}

llvm::StringRef autopar::scheduleName(PipelineSchedule s) {
  switch (s) {
  case PipelineSchedule::GPipe:
    return "gpipe";
  case PipelineSchedule::OneFOneB:
    return "1f1b";
  }
  llvm_unreachable("unknown pipeline schedule");
}

double autopar::bubbleFraction(int64_t stages, int64_t microBatches,
                               int64_t virtualStages) {
  if (stages <= 1 || microBatches <= 0)
    return 0;
  return double(stages - 1) /
         double(microBatches * std::max<int64_t>(1, virtualStages));
}

PipelineTime autopar::pipelineTime(llvm::ArrayRef<double> stageSeconds,
                                   int64_t microBatches, double p2pSeconds,
                                   PipelineSchedule schedule,
                                   int64_t virtualStages) {
  // Both schedules run the same work in the same dependency order: 1F1B only
  // reorders a stage's forwards and backwards so that fewer activations are
  // alive (microBatchesInFlight), so `schedule` does not change the time.
  (void)schedule;
  PipelineTime result;
  if (stageSeconds.empty() || microBatches <= 0)
    return result;
  if (virtualStages > 1) {
    // Interleaved (Narayanan et al., SC 2021, sec. 2.2): a chunk step takes
    // about 1/v of its stage's micro-batch, so filling and draining the
    // pipeline costs (p - 1) / v of a stage's micro-batch instead of p - 1;
    // the first forward and the last backward cross all p v - 1 virtual
    // boundaries.
    size_t p = stageSeconds.size() / size_t(virtualStages);
    std::vector<double> perStage(p, 0.0);
    for (size_t k = 0; k < stageSeconds.size(); ++k)
      perStage[k % p] += stageSeconds[k];
    double sum = 0, slowest = 0;
    for (double t : perStage) {
      sum += t;
      slowest = std::max(slowest, t);
    }
    double v = double(virtualStages), m = double(microBatches);
    result.seconds = sum / v + (m - 1 / v) * slowest +
                     2 * (double(stageSeconds.size()) - 1) * p2pSeconds;
    result.bubbleSeconds = result.seconds - m * slowest;
    return result;
  }
  double sum = 0, slowest = 0;
  for (double t : stageSeconds) {
    sum += t;
    slowest = std::max(slowest, t);
  }
  double p = double(stageSeconds.size());
  double m = double(microBatches);
  result.seconds = sum + (m - 1) * slowest + 2 * (p - 1) * p2pSeconds;
  // The slowest stage works m * slowest; the rest of the step it waits.
  result.bubbleSeconds = result.seconds - m * slowest;
  return result;
}

int64_t autopar::microBatchesInFlight(PipelineSchedule schedule, int64_t stages,
                                      int64_t stage, int64_t microBatches,
                                      int64_t virtualStages) {
  if (microBatches <= 0)
    return 0;
  stages = std::max<int64_t>(stages, 1);
  stage = std::clamp<int64_t>(stage, 0, stages - 1);
  // The search asks for every stage of every candidate plan, but few distinct
  // pipelines occur among them: each stage's order is walked once.
  using Key = std::tuple<PipelineSchedule, int64_t, int64_t, int64_t, int64_t>;
  static std::mutex mutex;
  static std::map<Key, int64_t> memo;
  Key key{schedule, stages, stage, microBatches, virtualStages};
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = memo.find(key);
    if (it != memo.end())
      return it->second;
  }
  // Forwards run whose backward has not: the activations the stage holds.
  int64_t live = 0, most = 0;
  for (const rt::PipelineStep &step : rt::pipelineSchedule(
           runtimeScheduleKind(schedule), stages, stage, microBatches,
           /*withBackward=*/true, virtualStages)) {
    live += step.phase == rt::StepPhase::Forward ? 1 : -1;
    most = std::max(most, live);
  }
  std::lock_guard<std::mutex> lock(mutex);
  memo.emplace(key, most);
  return most;
}

double autopar::peakKeptBytes(PipelineSchedule schedule, int64_t stages,
                              int64_t stage, int64_t microBatches,
                              llvm::ArrayRef<double> keptPerChunk) {
  if (microBatches <= 0 || keptPerChunk.empty())
    return 0;
  double live = 0, most = 0;
  for (const rt::PipelineStep &step : rt::pipelineSchedule(
           runtimeScheduleKind(schedule), std::max<int64_t>(stages, 1),
           std::clamp<int64_t>(stage, 0, std::max<int64_t>(stages, 1) - 1),
           microBatches, /*withBackward=*/true, int64_t(keptPerChunk.size()))) {
    double bytes = keptPerChunk[size_t(step.chunk)];
    live += step.phase == rt::StepPhase::Forward ? bytes : -bytes;
    most = std::max(most, live);
  }
  return most;
}

std::string autopar::pipelineStageOrder(PipelineSchedule schedule,
                                        int64_t stages, int64_t stage,
                                        int64_t microBatches, bool withBackward,
                                        int64_t virtualStages) {
  assert(0 <= stage && stage < stages && "stage outside the pipeline");
  std::string order;
  for (const rt::PipelineStep &step :
       rt::pipelineSchedule(runtimeScheduleKind(schedule), stages, stage,
                            microBatches, withBackward, virtualStages)) {
    if (!order.empty())
      order += ' ';
    order += step.phase == rt::StepPhase::Forward ? 'F' : 'B';
    order += std::to_string(step.microBatch);
    if (virtualStages > 1)
      order += "." + std::to_string(step.chunk);
  }
  return order;
}
