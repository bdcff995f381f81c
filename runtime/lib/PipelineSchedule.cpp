//===- PipelineSchedule.cpp - The order a pipeline stage works in ---------===//

#include "autopar/runtime/PipelineSchedule.h"

#include <algorithm>

namespace autopar::runtime {

std::string_view scheduleKindName(ScheduleKind kind) {
  return kind == ScheduleKind::GPipe ? "gpipe" : "1f1b";
}

std::optional<ScheduleKind> parseScheduleKind(std::string_view name) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
    if (scheduleKindName(kind) == name)
      return kind;
  return std::nullopt;
}

std::optional<std::string> pipelineScheduleError(ScheduleKind kind,
                                                 int64_t stages,
                                                 int64_t microBatches,
                                                 int64_t virtualStages) {
  if (virtualStages < 1)
    return "virtual stages must be at least 1, got " +
           std::to_string(virtualStages);
  if (virtualStages == 1)
    return std::nullopt;
  if (kind != ScheduleKind::OneFOneB)
    return "virtual stages (the interleaved schedule) need the 1f1b "
           "schedule, not " +
           std::string(scheduleKindName(kind));
  if (stages < 2)
    return "virtual stages (the interleaved schedule) need at least 2 "
           "pipeline stages, got " +
           std::to_string(stages);
  if (microBatches < 1 || microBatches % stages != 0)
    return "the interleaved schedule runs micro-batches in groups of the " +
           std::to_string(stages) + " pipeline stages; " +
           std::to_string(microBatches) + " micro-batches are not a multiple";
  return std::nullopt;
}

namespace {

/// Megatron-LM's interleaved 1F1B (schedules.py,
/// forward_backward_pipelining_with_interleaving) for rank \p stage.
std::vector<PipelineStep> interleavedSchedule(int64_t stages, int64_t stage,
                                              int64_t microBatches,
                                              int64_t chunks,
                                              bool withBackward) {
  int64_t total = microBatches * chunks, group = stages * chunks;
  // The k-th chunk step of a direction: its micro-batch and chunk.
  auto at = [&](int64_t k, StepPhase phase) {
    int64_t inGroup = k % group;
    int64_t chunk = inGroup / stages;
    if (phase == StepPhase::Backward)
      chunk = chunks - 1 - chunk;
    return PipelineStep{k / group * stages + inGroup % stages, phase, chunk};
  };
  std::vector<PipelineStep> steps;
  int64_t warmup = total;
  if (withBackward && microBatches != stages)
    warmup = std::min(total, 2 * (stages - stage - 1) + (chunks - 1) * stages);
  for (int64_t k = 0; k < warmup; ++k)
    steps.push_back(at(k, StepPhase::Forward));
  if (!withBackward)
    return steps;
  for (int64_t k = warmup; k < total; ++k) {
    steps.push_back(at(k, StepPhase::Forward));
    steps.back().pairedWithNext = true;
    steps.push_back(at(k - warmup, StepPhase::Backward));
  }
  for (int64_t k = total - warmup; k < total; ++k)
    steps.push_back(at(k, StepPhase::Backward));
  return steps;
}

} // namespace

std::vector<PipelineStep> pipelineSchedule(ScheduleKind kind, int64_t stages,
                                           int64_t stage, int64_t microBatches,
                                           bool withBackward,
                                           int64_t virtualStages) {
  if (virtualStages != 1)
    return pipelineScheduleError(kind, stages, microBatches, virtualStages)
               ? std::vector<PipelineStep>{}
               : interleavedSchedule(stages, stage, microBatches, virtualStages,
                                     withBackward);
  std::vector<PipelineStep> steps;
  auto forward = [&](int64_t m) { steps.push_back({m, StepPhase::Forward}); };
  auto backward = [&](int64_t m) { steps.push_back({m, StepPhase::Backward}); };
  if (!withBackward || kind == ScheduleKind::GPipe) {
    for (int64_t m = 0; m < microBatches; ++m)
      forward(m);
    if (withBackward)
      for (int64_t m = 0; m < microBatches; ++m)
        backward(m);
    return steps;
  }
  int64_t warmup = std::min(stages - stage - 1, microBatches);
  for (int64_t m = 0; m < warmup; ++m)
    forward(m);
  for (int64_t m = warmup; m < microBatches; ++m) {
    forward(m);
    backward(m - warmup);
  }
  for (int64_t m = microBatches - warmup; m < microBatches; ++m)
    backward(m);
  return steps;
}

} // namespace autopar::runtime
