//===- StageSplitTest.cpp - Pipeline stage boundaries against brute force -===//
//
// bestStageSplit (PlanStages.cpp) on random chains of segments: its split is
// as good as the best of every contiguous split, whichever incumbent it
// starts from (one that fits or not); a cap on the objective at or above the
// optimum changes nothing, and one below it says the result is inexact
// rather than returning a split that only looks best. The prices are
// synthetic, with the properties StageSplitProblem asks for: every part
// grows with the stage, and a stage's activations depend on its place.
//
//===----------------------------------------------------------------------===//

#include "PlannerImpl.h"

#include "gtest/gtest.h"

#include <functional>
#include <limits>
#include <random>

using namespace autopar;
using namespace autopar::plan;

namespace {

/// Every split of `n` segments into `p` contiguous stages.
void forEachSplit(int64_t n, int64_t p,
                  const std::function<void(const StageRanges &)> &f) {
  StageRanges ranges;
  std::function<void(int64_t)> extend = [&](int64_t first) {
    int64_t k = ranges.size();
    if (k == p - 1) {
      ranges.push_back({first, n - 1});
      f(ranges);
      ranges.pop_back();
      return;
    }
    // Leave a segment for each stage after this one.
    for (int64_t last = first; last <= n - (p - k); ++last) {
      ranges.push_back({first, last});
      extend(last + 1);
      ranges.pop_back();
    }
  };
  extend(0);
}

struct RandomProblem {
  StageSplitProblem problem;
  StageRanges balanced;
};

RandomProblem randomProblem(std::mt19937 &rng) {
  std::uniform_real_distribution<double> unit(0.1, 1.0);
  RandomProblem r;
  StageSplitProblem &problem = r.problem;
  int64_t n = 3 + rng() % 8;
  problem.stages = 2 + rng() % std::min<int64_t>(4, n - 1);
  problem.microBatches = 1 + rng() % 8;
  for (int64_t i = 0; i < n; ++i) {
    StageTotals t;
    t.segments = 1;
    t.seconds = unit(rng);
    t.params = t.trained = 1000 * unit(rng);
    t.saved = 100 * unit(rng);
    t.zero3PerMicroBatch = rng() % 2 ? 0.05 * unit(rng) : 0;
    problem.segments.push_back(t);
  }
  // 1F1B: stage k holds min(p - k, m) micro-batches.
  for (int64_t k = 0; k < problem.stages; ++k)
    problem.inFlight.push_back(
        std::min<int64_t>(problem.stages - k, problem.microBatches));
  double optimizerPerParam = 1e-4 * unit(rng);
  problem.optimizerSeconds = [=](double params) {
    return params * optimizerPerParam;
  };
  double dpPerParam = 1e-3 * unit(rng);
  int64_t m = problem.microBatches;
  problem.price = [=](const StageTotals &t) {
    StagePrice price;
    price.dpExposed = std::max(0.0, t.trained * dpPerParam - 0.5 * t.seconds);
    price.zero3Exposed = double(m) * t.zero3PerMicroBatch;
    price.optimizer = t.trained * optimizerPerParam;
    price.memory = 2 * t.params;
    price.keptPerMicroBatch = t.saved;
    return price;
  };
  // Sometimes tight enough that the balanced split, or every split, does not
  // fit.
  double total = 0;
  for (const StageTotals &t : problem.segments)
    total += 2 * t.params + t.saved * double(problem.inFlight[0]);
  problem.memoryCap = total / double(problem.stages) * (0.6 + unit(rng));
  // Equal segment counts, the last stage taking the rest.
  int64_t per = n / problem.stages;
  for (int64_t k = 0; k < problem.stages; ++k)
    r.balanced.push_back(
        {k * per, k == problem.stages - 1 ? n - 1 : (k + 1) * per - 1});
  return r;
}

/// The least objective of the splits that fit, or nullopt.
std::optional<double> bruteForce(const StageSplitProblem &problem) {
  std::optional<double> best;
  forEachSplit(problem.segments.size(), problem.stages,
               [&](const StageRanges &ranges) {
                 StageSplitChoice c = priceStageSplit(problem, ranges);
                 if (c.fits && (!best || c.objective < *best))
                   best = c.objective;
               });
  return best;
}

TEST(StageSplitTest, TheBestSplitIsTheBruteForceOptimum) {
  std::mt19937 rng(20261207);
  int checked = 0, noneFit = 0;
  for (int trial = 0; trial < 400; ++trial) {
    RandomProblem r = randomProblem(rng);
    SCOPED_TRACE("trial " + std::to_string(trial));
    std::optional<double> optimum = bruteForce(r.problem);
    StageSplitChoice got = bestStageSplit(r.problem, r.balanced);
    EXPECT_TRUE(got.exact);
    if (!optimum) {
      EXPECT_FALSE(got.fits);
      ++noneFit;
      continue;
    }
    ASSERT_TRUE(got.fits);
    EXPECT_NEAR(got.objective, *optimum, 1e-9 * *optimum);
    ++checked;
  }
  // The random problems cover both cases.
  EXPECT_GT(checked, 150);
  EXPECT_GT(noneFit, 0);
}

TEST(StageSplitTest, ACapBelowTheOptimumMakesTheResultInexact) {
  std::mt19937 rng(7);
  int capped = 0;
  for (int trial = 0; trial < 400; ++trial) {
    RandomProblem r = randomProblem(rng);
    SCOPED_TRACE("trial " + std::to_string(trial));
    std::optional<double> optimum = bruteForce(r.problem);
    if (!optimum)
      continue;
    // At or above the optimum: the same, exact answer.
    r.problem.objectiveCap = *optimum * (1 + 1e-9);
    StageSplitChoice atCap = bestStageSplit(r.problem, r.balanced);
    EXPECT_TRUE(atCap.exact);
    EXPECT_TRUE(atCap.fits);
    EXPECT_NEAR(atCap.objective, *optimum, 1e-9 * *optimum);
    // Below it no split is under the cap: the result is the optimum when
    // the search knows it without searching (the incumbent meets the lower
    // bound, or there is one split), else marked inexact.
    r.problem.objectiveCap = *optimum * 0.99;
    StageSplitChoice below = bestStageSplit(r.problem, r.balanced);
    if (below.exact)
      EXPECT_NEAR(below.objective, *optimum, 1e-9 * *optimum);
    else
      ++capped;
    EXPECT_GE(below.objective, *optimum * (1 - 1e-9));
  }
  EXPECT_GT(capped, 100);
}

} // namespace
