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

std::vector<PipelineStep> pipelineSchedule(ScheduleKind kind, int64_t stages,
                                           int64_t stage, int64_t microBatches,
                                           bool withBackward) {
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
