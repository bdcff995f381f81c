//===- ScheduleAgreementTest.cpp - The cost model follows the runtime -----===//
//
// The runtime's pipelineSchedule() (runtime/lib/PipelineSchedule.cpp) is the
// order autopar-run executes. The cost model prices memory with a closed form
// of the same schedules (microBatchesInFlight, lib/Planner/Pipeline.cpp),
// since walking the step list for every candidate plan would slow the search.
// This test holds the closed form to the runtime's order: for every small
// pipeline, the most micro-batches a stage holds activations for (forwards
// run whose backward has not) is what the cost model says.
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/CostModel.h"
#include "autopar/runtime/PipelineSchedule.h"

#include "gtest/gtest.h"

#include <algorithm>

namespace {

using autopar::runtime::PipelineStep;
using autopar::runtime::ScheduleKind;
using autopar::runtime::StepPhase;

int64_t mostInFlight(const std::vector<PipelineStep> &steps) {
  int64_t live = 0, most = 0;
  for (const PipelineStep &step : steps) {
    live += step.phase == StepPhase::Forward ? 1 : -1;
    most = std::max(most, live);
  }
  return most;
}

TEST(ScheduleAgreement, MicroBatchesInFlightMatchTheRuntimeSchedule) {
  for (auto [runtime, model] :
       {std::pair{ScheduleKind::GPipe, autopar::PipelineSchedule::GPipe},
        std::pair{ScheduleKind::OneFOneB, autopar::PipelineSchedule::OneFOneB}})
    for (int64_t stages = 1; stages <= 8; ++stages)
      for (int64_t stage = 0; stage < stages; ++stage)
        for (int64_t microBatches = 1; microBatches <= 16; ++microBatches) {
          auto steps = autopar::runtime::pipelineSchedule(
              runtime, stages, stage, microBatches, /*withBackward=*/true);
          ASSERT_EQ(int64_t(steps.size()), 2 * microBatches);
          EXPECT_EQ(
              autopar::microBatchesInFlight(model, stages, stage, microBatches),
              mostInFlight(steps))
              << autopar::runtime::scheduleKindName(runtime) << ", stage "
              << stage << " of " << stages << ", " << microBatches
              << " micro-batches";
        }
}

} // namespace
