//===- PipelineScheduleTest.cpp - The order a pipeline stage works in -----===//

#include "autopar/runtime/PipelineSchedule.h"

#include "gtest/gtest.h"

#include <string>

using namespace autopar::runtime;

namespace {

/// "F0 F1 B0 ...": the steps as the papers draw them.
std::string format(const std::vector<PipelineStep> &steps) {
  std::string text;
  for (const PipelineStep &step : steps)
    text += (text.empty() ? "" : " ") +
            std::string(step.phase == StepPhase::Forward ? "F" : "B") +
            std::to_string(step.microBatch);
  return text;
}

TEST(PipelineScheduleTest, ForwardOnlySchedulesCoincide) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
    for (int64_t stage = 0; stage < 4; ++stage)
      EXPECT_EQ(format(pipelineSchedule(kind, 4, stage, 4, false)),
                "F0 F1 F2 F3");
}

TEST(PipelineScheduleTest, GPipeRunsAllForwardsThenAllBackwards) {
  EXPECT_EQ(format(pipelineSchedule(ScheduleKind::GPipe, 2, 0, 3, true)),
            "F0 F1 F2 B0 B1 B2");
}

TEST(PipelineScheduleTest, OneFOneBWarmsUpThenAlternates) {
  // Megatron-LM's order: stage s warms up with stages - s - 1 forwards.
  ScheduleKind k = ScheduleKind::OneFOneB;
  EXPECT_EQ(format(pipelineSchedule(k, 4, 0, 6, true)),
            "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(format(pipelineSchedule(k, 4, 2, 6, true)),
            "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(format(pipelineSchedule(k, 4, 3, 3, true)), "F0 B0 F1 B1 F2 B2");
  // Fewer micro-batches than the warm-up: forwards, then backwards.
  EXPECT_EQ(format(pipelineSchedule(k, 4, 0, 2, true)), "F0 F1 B0 B1");
}

TEST(PipelineScheduleTest, NamesRoundTrip) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
    EXPECT_EQ(parseScheduleKind(scheduleKindName(kind)), kind);
  EXPECT_EQ(parseScheduleKind("interleaved"), std::nullopt);
}

} // namespace
