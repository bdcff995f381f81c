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
#include <string>
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

/// One run of a stage's program: which micro-batch, in which direction, and
/// with virtual stages which of the rank's model chunks (chunk c of pipeline
/// rank s is virtual stage c * stages + s).
struct PipelineStep {
  int64_t microBatch = 0;
  StepPhase phase = StepPhase::Forward;
  int64_t chunk = 0;
  /// The next step runs before this one's messages go: their sends and the
  /// receives of the steps after them make one exchange. The interleaved
  /// schedule's steady state pairs each forward with the backward after it
  /// so (Megatron-LM's send_forward_backward_recv_forward_backward); one
  /// exchange per step there would deadlock two neighbours each sending what
  /// the other receives only a step later. Elsewhere each step exchanges
  /// its sends with the next step's receives.
  bool pairedWithNext = false;
  bool operator==(const PipelineStep &other) const {
    return microBatch == other.microBatch && phase == other.phase &&
           chunk == other.chunk && pairedWithNext == other.pairedWithNext;
  }
};

/// Why \p kind cannot run \p microBatches through \p stages ranks of
/// \p virtualStages model chunks each, or nullopt if it can. One chunk per
/// rank is always fine; more (the interleaved schedule) need 1F1B, at least
/// two stages and micro-batches in groups of `stages`, as Megatron-LM's
/// interleaved schedule does.
std::optional<std::string> pipelineScheduleError(ScheduleKind kind,
                                                 int64_t stages,
                                                 int64_t microBatches,
                                                 int64_t virtualStages);

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
///
/// With \p virtualStages v > 1 (no steps where pipelineScheduleError() is
/// not nullopt), the rank holds v model chunks and runs Megatron-LM's
/// interleaved 1F1B (Narayanan et al., SC 2021, sec. 2.2): the m * v chunk
/// steps go in groups of stages * v; within a group the forwards take
/// micro-batches in runs of `stages` through chunk 0, then chunk 1, ..., and
/// the backwards through chunk v - 1 first. Rank s warms up with 2 (stages - s
/// - 1) + (v - 1) * stages forwards (all of them when m == stages), then
/// alternates one forward and one backward, then drains. The bubble shrinks
/// v-fold; each chunk step holds 1/v of a stage's activations. Forward only,
/// the chunks' forwards run in that same order.
std::vector<PipelineStep> pipelineSchedule(ScheduleKind kind, int64_t stages,
                                           int64_t stage, int64_t microBatches,
                                           bool withBackward,
                                           int64_t virtualStages = 1);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_PIPELINESCHEDULE_H
