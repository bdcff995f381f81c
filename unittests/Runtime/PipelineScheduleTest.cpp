//===- PipelineScheduleTest.cpp - The order a pipeline stage works in -----===//

#include "autopar/runtime/PipelineSchedule.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>

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

/// "F0c0 F1c0 F0c1 ...": the steps with their chunks.
std::string formatChunks(const std::vector<PipelineStep> &steps) {
  std::string text;
  for (const PipelineStep &step : steps)
    text += (text.empty() ? "" : " ") +
            std::string(step.phase == StepPhase::Forward ? "F" : "B") +
            std::to_string(step.microBatch) + "c" + std::to_string(step.chunk);
  return text;
}

TEST(PipelineScheduleTest, InterleavedIsMegatronsOrder) {
  // 2 ranks of 2 chunks, 4 micro-batches (Megatron-LM's schedules.py):
  // forwards in runs of 2 micro-batches through chunk 0 then chunk 1,
  // backwards through chunk 1 first; rank 0 warms up with 2 (2 - 0 - 1) +
  // (2 - 1) 2 = 4 forwards, rank 1 with 2.
  ScheduleKind k = ScheduleKind::OneFOneB;
  EXPECT_EQ(formatChunks(pipelineSchedule(k, 2, 0, 4, true, 2)),
            "F0c0 F1c0 F0c1 F1c1 F2c0 B0c1 F3c0 B1c1 F2c1 B0c0 F3c1 B1c0 "
            "B2c1 B3c1 B2c0 B3c0");
  EXPECT_EQ(formatChunks(pipelineSchedule(k, 2, 1, 4, true, 2)),
            "F0c0 F1c0 F0c1 B0c1 F1c1 B1c1 F2c0 B0c0 F3c0 B1c0 F2c1 B2c1 "
            "F3c1 B3c1 B2c0 B3c0");
  // As many micro-batches as stages: every forward first.
  EXPECT_EQ(formatChunks(pipelineSchedule(k, 2, 1, 2, true, 2)),
            "F0c0 F1c0 F0c1 F1c1 B0c1 B1c1 B0c0 B1c0");
  // Forward only: the forwards in the same order.
  EXPECT_EQ(formatChunks(pipelineSchedule(k, 2, 0, 4, false, 2)),
            "F0c0 F1c0 F0c1 F1c1 F2c0 F3c0 F2c1 F3c1");
  // One chunk is the plain schedule.
  EXPECT_EQ(pipelineSchedule(k, 4, 1, 8, true, 1),
            pipelineSchedule(k, 4, 1, 8, true));
}

TEST(PipelineScheduleTest, InterleavedNeedsGroupsOfStages) {
  ScheduleKind k = ScheduleKind::OneFOneB;
  EXPECT_EQ(pipelineScheduleError(k, 4, 6, 2),
            "the interleaved schedule runs micro-batches in groups of the 4 "
            "pipeline stages; 6 micro-batches are not a multiple");
  EXPECT_EQ(pipelineScheduleError(ScheduleKind::GPipe, 4, 8, 2),
            "virtual stages (the interleaved schedule) need the 1f1b "
            "schedule, not gpipe");
  EXPECT_EQ(pipelineScheduleError(k, 1, 8, 2),
            "virtual stages (the interleaved schedule) need at least 2 "
            "pipeline stages, got 1");
  EXPECT_EQ(pipelineScheduleError(k, 4, 8, 0),
            "virtual stages must be at least 1, got 0");
  EXPECT_EQ(pipelineScheduleError(k, 4, 6, 1), std::nullopt);
  EXPECT_EQ(pipelineScheduleError(k, 4, 8, 3), std::nullopt);
  EXPECT_TRUE(pipelineSchedule(k, 4, 0, 6, true, 2).empty());
}

/// A message between virtual stages: (forward?, micro-batch, from, to).
using Message = std::tuple<bool, int64_t, int64_t, int64_t>;

/// Runs every rank's schedule as autopar-run's PipelineTrainer does: the
/// receives of the first step, then after each step one exchange of its
/// sends with the next step's receives (after a step paired with the next,
/// the exchange after that one holds both steps' sends, and the receives of
/// the step or pair after them). An exchange ends only when each of
/// its messages is posted by both ends at once (no buffering: the strictest
/// MPI semantics). Returns "" when every rank finishes, with each pair of
/// ranks posting their messages in the same order (so that MPI matches
/// them right with one tag), else what went wrong.
/// \p unpaired exchanges after every step, ignoring pairedWithNext.
/// Without \p withBackward, the forward-only order (--eval-data's).
std::string simulate(int64_t stages, int64_t chunks, int64_t microBatches,
                     bool unpaired = false, bool withBackward = true) {
  int64_t last = stages * chunks - 1;
  // Per rank: its exchanges, each a set of (message, sending?).
  std::vector<std::vector<std::set<std::pair<Message, bool>>>> exchanges(
      static_cast<size_t>(stages));
  std::map<std::pair<int64_t, int64_t>, std::vector<Message>> sent, received;
  for (int64_t s = 0; s < stages; ++s) {
    std::vector<PipelineStep> order = pipelineSchedule(
        ScheduleKind::OneFOneB, stages, s, microBatches, withBackward, chunks);
    auto messages = [&](const PipelineStep &step, bool sends) {
      std::set<std::pair<Message, bool>> list;
      int64_t v = step.chunk * stages + s;
      bool forward = step.phase == StepPhase::Forward;
      // A forward receives from v - 1 and sends to v + 1; a backward the
      // other way round. The ends of the pipeline have no neighbour there.
      int64_t peer = forward == sends ? v + 1 : v - 1;
      if (peer < 0 || peer > last)
        return list;
      Message m{forward, step.microBatch, sends ? v : peer, sends ? peer : v};
      list.insert({m, sends});
      auto pair =
          std::make_pair(std::get<2>(m) % stages, std::get<3>(m) % stages);
      (sends ? sent : received)[pair].push_back(m);
      return list;
    };
    // The steps in groups that exchange together.
    std::vector<std::vector<PipelineStep>> groups;
    for (size_t k = 0; k < order.size(); ++k) {
      if (k == 0 || unpaired || !order[k - 1].pairedWithNext)
        groups.emplace_back();
      groups.back().push_back(order[k]);
    }
    auto &mine = exchanges[static_cast<size_t>(s)];
    auto add = [&](std::set<std::pair<Message, bool>> &exchange,
                   const std::vector<PipelineStep> &group, bool sends) {
      for (const PipelineStep &step : group)
        for (const auto &m : messages(step, sends))
          exchange.insert(m);
    };
    mine.emplace_back();
    add(mine.back(), groups.front(), false);
    for (size_t g = 0; g < groups.size(); ++g) {
      std::set<std::pair<Message, bool>> exchange;
      add(exchange, groups[g], true);
      if (g + 1 < groups.size())
        add(exchange, groups[g + 1], false);
      mine.push_back(exchange);
    }
  }
  for (const auto &[pair, list] : sent)
    if (received[pair] != list)
      return "ranks " + std::to_string(pair.first) + " and " +
             std::to_string(pair.second) + " post their messages in " +
             "different orders";
  std::vector<size_t> at(static_cast<size_t>(stages), 0);
  std::set<Message> done;
  for (bool progress = true; progress;) {
    progress = false;
    // The messages both ends post now complete.
    for (int64_t s = 0; s < stages; ++s) {
      if (at[s] >= exchanges[s].size())
        continue;
      for (const auto &[m, sends] : exchanges[s][at[s]]) {
        int64_t peer = (sends ? std::get<3>(m) : std::get<2>(m)) % stages;
        if (at[peer] < exchanges[peer].size() &&
            exchanges[peer][at[peer]].count({m, !sends}))
          done.insert(m);
      }
    }
    for (int64_t s = 0; s < stages; ++s)
      if (at[s] < exchanges[s].size() &&
          std::all_of(exchanges[s][at[s]].begin(), exchanges[s][at[s]].end(),
                      [&](const auto &m) { return done.count(m.first); })) {
        ++at[s];
        progress = true;
      }
  }
  for (int64_t s = 0; s < stages; ++s)
    if (at[s] < exchanges[s].size())
      return "rank " + std::to_string(s) + " waits forever in exchange " +
             std::to_string(at[s]);
  return "";
}

TEST(PipelineScheduleTest, InterleavedRunsWithoutDeadlock) {
  for (int64_t stages : {2, 3, 4})
    for (int64_t chunks : {1, 2, 3})
      for (int64_t groups : {1, 2, 3})
        EXPECT_EQ(simulate(stages, chunks, groups * stages), "")
            << stages << " stages of " << chunks << " chunks, "
            << groups * stages << " micro-batches";
  // Exchanging after every step, two neighbours each send what the other
  // receives only after its next step.
  EXPECT_EQ(simulate(2, 2, 4, /*unpaired=*/true),
            "rank 0 waits forever in exchange 6");
}

// --eval-data walks the forwards alone (PipelineEvaluator), each step's sends
// with the next step's receives: the interleaved forward order finishes too.
TEST(PipelineScheduleTest, InterleavedForwardsRunWithoutDeadlock) {
  for (int64_t stages : {2, 3, 4})
    for (int64_t chunks : {1, 2, 3})
      for (int64_t groups : {1, 2, 3})
        EXPECT_EQ(simulate(stages, chunks, groups * stages, /*unpaired=*/true,
                           /*withBackward=*/false),
                  "")
            << stages << " stages of " << chunks << " chunks, "
            << groups * stages << " micro-batches, forwards only";
}

TEST(PipelineScheduleTest, InterleavedRunsEveryChunkStepOnce) {
  for (int64_t stages : {2, 4})
    for (int64_t chunks : {2, 3})
      for (int64_t stage = 0; stage < stages; ++stage) {
        int64_t m = 2 * stages;
        std::vector<PipelineStep> order = pipelineSchedule(
            ScheduleKind::OneFOneB, stages, stage, m, true, chunks);
        ASSERT_EQ(order.size(), static_cast<size_t>(2 * m * chunks));
        std::set<std::tuple<int64_t, int64_t, bool>> seen;
        int64_t live = 0, peak = 0;
        for (const PipelineStep &step : order) {
          bool forward = step.phase == StepPhase::Forward;
          EXPECT_TRUE(
              seen.insert({step.microBatch, step.chunk, forward}).second);
          // A chunk's backward after its forward.
          if (!forward) {
            EXPECT_TRUE(seen.count({step.microBatch, step.chunk, true}));
          }
          live += forward ? 1 : -1;
          peak = std::max(peak, live);
        }
        // Megatron-LM's warm-up plus the steady state's one forward.
        EXPECT_EQ(peak,
                  std::min(2 * (stages - stage - 1) + (chunks - 1) * stages + 1,
                           m * chunks))
            << stage << " of " << stages << ", " << chunks << " chunks";
      }
}

TEST(PipelineScheduleTest, NamesRoundTrip) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
    EXPECT_EQ(parseScheduleKind(scheduleKindName(kind)), kind);
  EXPECT_EQ(parseScheduleKind("interleaved"), std::nullopt);
}

} // namespace
