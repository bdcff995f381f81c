//===- ScheduleAgreementTest.cpp - The planner's pipeline schedules -------===//
//
// The pipeline schedule is defined once, by the runtime's pipelineSchedule()
// (runtime/lib/PipelineSchedule.cpp), the order autopar-run executes. The
// planner compiles that same file: the cost model's activations in flight
// (microBatchesInFlight) and the plan report's "stage_orders"
// (pipelineStageOrder) both walk its steps, so they cannot disagree with the
// runtime. These tests hold what the planner reads from it to the figures of
// the literature: GPipe (Huang et al., NeurIPS 2019) keeps all m
// micro-batches' activations until its backwards; 1F1B (PipeDream-Flush,
// Narayanan et al., ICML 2021, as Megatron-LM runs it, Narayanan et al.,
// SC 2021, sec. 2.2.1) warms stage s up with p - s - 1 forwards and then
// alternates, so stage s holds min(m, p - s), stage 0 min(p, m).
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/CostModel.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

using namespace autopar;

namespace {

/// "F0 F1 B0" as (is forward, micro-batch) pairs.
std::vector<std::pair<bool, int64_t>> parse(const std::string &order) {
  std::vector<std::pair<bool, int64_t>> steps;
  std::istringstream in(order);
  std::string token;
  while (in >> token)
    steps.push_back({token[0] == 'F', std::stoll(token.substr(1))});
  return steps;
}

TEST(ScheduleAgreement, MicroBatchesInFlightAreTheLiteraturesFigures) {
  // Twice: the second pass reads what the first remembered.
  for (int pass = 0; pass < 2; ++pass)
    for (int64_t stages = 1; stages <= 16; ++stages)
      for (int64_t stage = 0; stage < stages; ++stage)
        for (int64_t microBatches = 1; microBatches <= 32; ++microBatches) {
          EXPECT_EQ(microBatchesInFlight(PipelineSchedule::GPipe, stages, stage,
                                         microBatches),
                    microBatches);
          EXPECT_EQ(microBatchesInFlight(PipelineSchedule::OneFOneB, stages,
                                         stage, microBatches),
                    std::min(microBatches, stages - stage))
              << "1f1b, stage " << stage << " of " << stages << ", "
              << microBatches << " micro-batches";
        }
  // A deep pipeline, as the search meets them.
  EXPECT_EQ(microBatchesInFlight(PipelineSchedule::OneFOneB, 64, 0, 512), 64);
  EXPECT_EQ(microBatchesInFlight(PipelineSchedule::OneFOneB, 64, 63, 512), 1);
  EXPECT_EQ(microBatchesInFlight(PipelineSchedule::GPipe, 64, 63, 512), 512);
}

TEST(ScheduleAgreement, MicroBatchesInFlightOutsideThePipeline) {
  EXPECT_EQ(microBatchesInFlight(PipelineSchedule::OneFOneB, 4, 0, 0), 0);
  EXPECT_EQ(microBatchesInFlight(PipelineSchedule::GPipe, 4, 0, -1), 0);
  // A stage past the last counts as the last, a pipeline of no stages as one.
  EXPECT_EQ(microBatchesInFlight(PipelineSchedule::OneFOneB, 4, 9, 8), 1);
  EXPECT_EQ(microBatchesInFlight(PipelineSchedule::OneFOneB, 4, -1, 8), 4);
  EXPECT_EQ(microBatchesInFlight(PipelineSchedule::OneFOneB, 0, 0, 8), 1);
}

TEST(ScheduleAgreement, StageOrdersAreMegatronsOrders) {
  auto order = [](PipelineSchedule s, int64_t p, int64_t stage, int64_t m) {
    return pipelineStageOrder(s, p, stage, m, /*withBackward=*/true);
  };
  PipelineSchedule k = PipelineSchedule::OneFOneB;
  EXPECT_EQ(order(k, 2, 0, 3), "F0 F1 B0 F2 B1 B2");
  EXPECT_EQ(order(k, 4, 0, 6), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(order(k, 4, 2, 6), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(order(k, 4, 3, 3), "F0 B0 F1 B1 F2 B2");
  EXPECT_EQ(order(k, 4, 0, 2), "F0 F1 B0 B1");
  EXPECT_EQ(order(PipelineSchedule::GPipe, 2, 0, 3), "F0 F1 F2 B0 B1 B2");
  EXPECT_EQ(order(k, 1, 0, 1), "F0 B0");
}

TEST(ScheduleAgreement, StageOrdersRunEveryStepOnce) {
  for (PipelineSchedule s :
       {PipelineSchedule::GPipe, PipelineSchedule::OneFOneB})
    for (int64_t stages = 1; stages <= 8; ++stages)
      for (int64_t stage = 0; stage < stages; ++stage)
        for (int64_t m = 1; m <= 16; ++m) {
          auto steps = parse(pipelineStageOrder(s, stages, stage, m, true));
          ASSERT_EQ(int64_t(steps.size()), 2 * m);
          // Each micro-batch's forward once, in order; its backward once,
          // after it, in order. Before the first backward: GPipe every
          // forward, 1F1B Megatron's p - s - 1 warm-up forwards and one more.
          int64_t forwards = 0, backwards = 0, beforeFirstBackward = -1;
          for (auto [forward, mb] : steps) {
            if (forward) {
              EXPECT_EQ(mb, forwards++);
              continue;
            }
            if (beforeFirstBackward < 0)
              beforeFirstBackward = forwards;
            EXPECT_EQ(mb, backwards++);
            EXPECT_LT(mb, forwards);
          }
          EXPECT_EQ(beforeFirstBackward, s == PipelineSchedule::GPipe
                                             ? m
                                             : std::min(stages - stage, m));
          // Inference: the forwards alone, in order, whatever the schedule.
          auto forwardOnly = parse(pipelineStageOrder(s, stages, stage, m,
                                                      /*withBackward=*/false));
          ASSERT_EQ(int64_t(forwardOnly.size()), m);
          for (int64_t i = 0; i < m; ++i)
            EXPECT_EQ(forwardOnly[i], std::make_pair(true, i));
        }
}

} // namespace
