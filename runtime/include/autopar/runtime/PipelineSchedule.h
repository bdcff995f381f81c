//===- PipelineSchedule.h - The order a pipeline stage works in -*- C++ -*-===//
//
// A pipeline stage runs its program once per micro-batch per direction. The
// schedule is the explicit list of those steps for one stage, computed from
// the manifest's `pipeline` key, so that the runtime only walks a list and a
// training runtime can add backward steps without changing the walk.
//
// This is the one definition of the pipeline schedule: the planner compiles
// PipelineSchedule.cpp too (lib/Planner/CMakeLists.txt), for the cost model's
// activations in flight and the plan report's "stage_orders", which the plan
// picture draws. Keep it free of anything but the standard library.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_PIPELINESCHEDULE_H
#define AUTOPAR_RUNTIME_PIPELINESCHEDULE_H

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace autopar::runtime {

/// GPipe (all forwards, then all backwards) or 1F1B (PipeDream-Flush, as in
/// Megatron-LM: after a warm-up, one forward and one backward in turn).
enum class ScheduleKind { GPipe, OneFOneB };

/// "gpipe" or "1f1b".
std::string_view scheduleKindName(ScheduleKind kind);
std::optional<ScheduleKind> parseScheduleKind(std::string_view name);

enum class StepPhase { Forward, Backward };

/// One run of a stage's program: which micro-batch, in which direction.
struct PipelineStep {
  int64_t microBatch = 0;
  StepPhase phase = StepPhase::Forward;
  bool operator==(const PipelineStep &other) const {
    return microBatch == other.microBatch && phase == other.phase;
  }
};

/// The steps stage \p stage (0-based) of \p stages runs for \p microBatches
/// micro-batches, in order.
///
/// Forward only (inference, \p withBackward false) both schedules are the
/// forwards of micro-batches 0, 1, ... in order: nothing waits for a
/// backward pass, so there is nothing to interleave. With backward steps,
/// GPipe runs every forward, then every backward (micro-batches in order);
/// 1F1B runs min(stages - stage - 1, microBatches) forwards to fill the
/// pipeline, then alternates one forward and one backward, then drains the
/// remaining backwards, so that at most stages - stage micro-batches are in
/// flight on the stage.
std::vector<PipelineStep> pipelineSchedule(ScheduleKind kind, int64_t stages,
                                           int64_t stage, int64_t microBatches,
                                           bool withBackward);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_PIPELINESCHEDULE_H
