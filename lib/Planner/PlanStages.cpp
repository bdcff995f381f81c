//===- PlanStages.cpp - Exact pipeline stage boundaries -------------------===//
//
// bestStageSplit (PlannerImpl.h): the contiguous split of the segments into
// pipeline stages that gives the least step time among those that fit.
//
// The step time takes the slowest stage times (m - 1) plus the largest, over
// the stages, of the exposed gradient synchronization, of ZeRO-3's exposed
// collectives and of the optimizer step; each stage must fit in memory. A
// balanced partition (least slowest stage) need not be the best: it may not
// fit where another does, or put more parameters (a slower optimizer step,
// more to synchronize) in one stage than another split of the same slowest
// stage. So the split is searched exactly:
//
//   - a dynamic program over (stage k, last segment i of stage k) whose value
//     is the set of splits of the prefix that no other beats on all five maxes
//     the step time and the memory take (slowest stage, dp exposure, ZeRO-3
//     exposure, optimizer, memory): every max only grows as stages are added,
//     so a split of the prefix beaten on all five cannot end a better whole;
//   - pruned by an incumbent (the balanced split, or the first split that fits
//     when it does not): a partial split whose lower bound -- its maxes so far
//     against the rest of the chain spread evenly over the stages left (its
//     seconds, ZeRO-3 exposure and parameters; a stage is never shorter than
//     its longest segment) -- exceeds the incumbent's step is dropped, and a
//     stage stops growing once it alone is over (its memory, or its own
//     slowest-stage, ZeRO-3 and optimizer terms). With many micro-batches the
//     slowest stage dominates and only cuts within a few segments of the
//     balanced ones survive.
//
//===----------------------------------------------------------------------===//

#include "PlannerImpl.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <limits>
#include <optional>

namespace autopar::plan {

namespace {

/// The maxes over a split's stages that the step time and memory take.
struct Maxes {
  double seconds = 0, dpExposed = 0, zero3Exposed = 0, optimizer = 0,
         memory = 0;

  void include(const StageTotals &t, const StagePrice &p) {
    seconds = std::max(seconds, t.seconds);
    dpExposed = std::max(dpExposed, p.dpExposed);
    zero3Exposed = std::max(zero3Exposed, p.zero3Exposed);
    optimizer = std::max(optimizer, p.optimizer);
    memory = std::max(memory, p.memory);
  }
  bool dominates(const Maxes &o) const {
    return seconds <= o.seconds && dpExposed <= o.dpExposed &&
           zero3Exposed <= o.zero3Exposed && optimizer <= o.optimizer &&
           memory <= o.memory;
  }
};

double objectiveOf(const Maxes &x, int64_t microBatches) {
  return double(microBatches - 1) * x.seconds + x.dpExposed + x.zero3Exposed +
         x.optimizer;
}

/// A split whose every stage fits in `cap`, or nullopt when none does. A
/// stage's memory only grows as it takes segments, but it depends on the
/// stage's place too (earlier 1F1B stages hold more micro-batches), so no
/// greedy fill is sure to find one: the reachable stage ends are searched
/// stage by stage, each stage growing from each reachable start until it no
/// longer fits.
std::optional<StageRanges> fillWithin(const StageSplitProblem &problem,
                                      double cap) {
  int64_t n = problem.segments.size(), p = problem.stages;
  // start[k][i]: where stage k - 1 starts in a fitting split of segments
  // 0..i-1 into stages 0..k-1; -1 where there is none.
  std::vector<std::vector<int64_t>> start(p + 1,
                                          std::vector<int64_t>(n + 1, -1));
  start[0][0] = 0;
  // By the segment i a stage starts at, so that each range of segments is
  // priced once for every stage k that can start there (only its
  // activations depend on k). Starts before i decide which stages can start
  // at i, so those are all known by then.
  std::vector<int64_t> open;
  for (int64_t i = 0; i < n; ++i) {
    open.clear();
    for (int64_t k = 0; k < p; ++k)
      if (start[k][i] >= 0)
        open.push_back(k);
    StageTotals t;
    for (int64_t j = i; j < n && !open.empty(); ++j) {
      t.add(problem.segments[j]);
      StagePrice anywhere = problem.price(t);
      for (size_t o = 0; o < open.size();) {
        int64_t k = open[o];
        // Stage k leaves a segment for each stage after it.
        if (j > n - (p - k) || placeStage(problem, anywhere, k).memory > cap) {
          open.erase(open.begin() + o);
          continue;
        }
        ++o;
        if (start[k + 1][j + 1] < 0)
          start[k + 1][j + 1] = i;
      }
    }
  }
  if (start[p][n] < 0)
    return std::nullopt;
  StageRanges ranges(p);
  for (int64_t k = p, end = n; k > 0; --k) {
    int64_t first = start[k][end];
    ranges[k - 1] = {first, end - 1};
    end = first;
  }
  return ranges;
}

} // namespace

StagePrice placeStage(const StageSplitProblem &problem, StagePrice price,
                      int64_t stage) {
  price.memory += price.keptPerMicroBatch * double(problem.inFlight[stage]);
  return price;
}

StageSplitChoice priceStageSplit(const StageSplitProblem &problem,
                                 const StageRanges &ranges) {
  Maxes x;
  for (auto [s, range] : llvm::enumerate(ranges)) {
    StageTotals t;
    for (int64_t i = range.first; i <= range.second; ++i)
      t.add(problem.segments[i]);
    x.include(t, placeStage(problem, problem.price(t), s));
  }
  StageSplitChoice c;
  c.ranges = ranges;
  c.fits = x.memory <= problem.memoryCap;
  c.objective = objectiveOf(x, problem.microBatches);
  c.memory = x.memory;
  return c;
}

StageSplitChoice bestStageSplit(const StageSplitProblem &problem,
                                const StageRanges &incumbent) {
  int64_t n = problem.segments.size(), p = problem.stages;
  int64_t m = problem.microBatches;
  StageSplitChoice best = priceStageSplit(problem, incumbent);
  // One stage, or one segment per stage: a single split.
  if (p <= 1 || p >= n)
    return best;
  if (!best.fits) {
    std::optional<StageRanges> fitted = fillWithin(problem, problem.memoryCap);
    if (!fitted)
      return best; // no split fits
    best = priceStageSplit(problem, *fitted);
  }

  // The rest of the chain from segment i on, for the lower bounds.
  std::vector<double> restSeconds(n + 1, 0), restLongest(n + 1, 0),
      restParams(n + 1, 0), restZero3(n + 1, 0);
  for (int64_t i = n - 1; i >= 0; --i) {
    const StageTotals &t = problem.segments[i];
    restSeconds[i] = restSeconds[i + 1] + t.seconds;
    restLongest[i] = std::max(restLongest[i + 1], t.seconds);
    restParams[i] = restParams[i + 1] + t.trained;
    restZero3[i] = restZero3[i + 1] + t.zero3PerMicroBatch;
  }
  // The least step a split can reach from `x` over stages 0..k ending at
  // segment i: the stages left share the rest of the chain, so the largest
  // of them is at least its average (and its longest segment). The rest's
  // terms depend on (i, k) only: `restFloor` prices them once for all the
  // partial splits that end there (the optimizer term alone took a third of
  // the search on the largest published rows when priced per split).
  struct RestFloor {
    bool last = false;
    double seconds = 0, zero3 = 0, optimizer = 0;
  };
  auto restFloor = [&](int64_t i, int64_t k) {
    RestFloor f;
    int64_t left = p - 1 - k;
    f.last = left == 0;
    if (f.last)
      return f;
    double l = double(left);
    f.seconds = std::max(restSeconds[i + 1] / l, restLongest[i + 1]);
    f.zero3 = double(m) * restZero3[i + 1] / l;
    f.optimizer = problem.optimizerSeconds(restParams[i + 1] / l);
    return f;
  };
  auto lowerBound = [&](const Maxes &x, const RestFloor &f) {
    if (f.last)
      return objectiveOf(x, m);
    return double(m - 1) * std::max(x.seconds, f.seconds) + x.dpExposed +
           std::max(x.zero3Exposed, f.zero3) +
           std::max(x.optimizer, f.optimizer);
  };
  double bound = best.objective + 1e-12 * std::fabs(best.objective);
  if (lowerBound(Maxes(), restFloor(-1, -1)) >= best.objective)
    return best; // the incumbent meets the bound: nothing is better
  // Past the caller's cap no split matters; if none is under it, the
  // incumbent stands in, marked inexact.
  bool capped = problem.objectiveCap < bound;
  bound = std::min(bound, problem.objectiveCap);
  auto overTheCap = [&] {
    best.exact = !(best.objective > problem.objectiveCap);
    return best;
  };
  if (capped && lowerBound(Maxes(), restFloor(-1, -1)) > bound)
    return overTheCap();

  struct Entry {
    Maxes x;
    int64_t previousEnd; ///< last segment of the stage before
    int previousEntry;   ///< its entry in that position's front
  };
  // fronts[k][i - k]: the splits of segments 0..i into stages 0..k that no
  // other beats on every max. Stage k ends between k and n - p + k.
  int64_t width = n - p + 1;
  std::vector<std::vector<std::vector<Entry>>> fronts(
      p, std::vector<std::vector<Entry>>(width));
  auto insert = [](std::vector<Entry> &front, const Entry &e) {
    for (const Entry &o : front)
      if (o.x.dominates(e.x))
        return;
    llvm::erase_if(front, [&](const Entry &o) { return e.x.dominates(o.x); });
    front.push_back(e);
  };
  // The stage's own terms, each non-decreasing as it takes segments: once
  // they alone exceed the bound, longer stages do too.
  auto stageOver = [&](const StageTotals &t, const StagePrice &price) {
    return price.memory > problem.memoryCap ||
           double(m - 1) * t.seconds + price.zero3Exposed + price.optimizer >
               bound;
  };

  // By the end j of the stage before (-1: none), so that a range of segments
  // is priced once for all the stages k that could hold it (only its
  // activations depend on k). The splits ending at j are all known by then:
  // they come from stages starting before j.
  std::vector<int64_t> open;
  for (int64_t j = -1; j <= n - 2; ++j) {
    // The stages that can start at segment j + 1.
    open.clear();
    if (j < 0) {
      open.push_back(0);
    } else {
      for (int64_t k = 1; k < p; ++k) {
        int64_t at = j - (k - 1);
        if (at >= 0 && at < width && !fronts[k - 1][at].empty())
          open.push_back(k);
      }
    }
    StageTotals t;
    for (int64_t i = j + 1; i <= n - 1 && !open.empty(); ++i) {
      t.add(problem.segments[i]);
      StagePrice anywhere = problem.price(t);
      for (size_t o = 0; o < open.size();) {
        int64_t k = open[o];
        // Stage k ends by n - p + k, leaving a segment for each stage after
        // it; the last stage ends with the chain.
        int64_t lastEnd = k == p - 1 ? n - 1 : n - p + k;
        StagePrice price = placeStage(problem, anywhere, k);
        if (i > lastEnd || stageOver(t, price)) {
          open.erase(open.begin() + o);
          continue;
        }
        ++o;
        if (k == p - 1 && i != n - 1)
          continue; // the last stage takes every segment left
        RestFloor floor = restFloor(i, k);
        if (k == 0) {
          Maxes x;
          x.include(t, price);
          if (lowerBound(x, floor) <= bound)
            insert(fronts[0][i], {x, -1, -1});
          continue;
        }
        const std::vector<Entry> &before = fronts[k - 1][j - (k - 1)];
        for (auto [q, e] : llvm::enumerate(before)) {
          Maxes x = e.x;
          x.include(t, price);
          if (lowerBound(x, floor) <= bound)
            insert(fronts[k][i - k], {x, j, int(q)});
        }
      }
    }
  }

  const std::vector<Entry> &last = fronts[p - 1][n - 1 - (p - 1)];
  int chosen = -1;
  double chosenObjective = best.objective, chosenMemory = best.memory;
  for (auto [q, e] : llvm::enumerate(last)) {
    double objective = objectiveOf(e.x, m);
    if (objective < chosenObjective ||
        (objective == chosenObjective && e.x.memory < chosenMemory)) {
      chosen = int(q);
      chosenObjective = objective;
      chosenMemory = e.x.memory;
    }
  }
  if (chosen < 0)
    return capped ? overTheCap() : best;
  StageRanges ranges(p);
  int64_t end = n - 1;
  int entry = chosen;
  for (int64_t k = p - 1; k >= 0; --k) {
    const Entry &e = fronts[k][end - k][entry];
    ranges[k] = {e.previousEnd + 1, end};
    end = e.previousEnd;
    entry = e.previousEntry;
  }
  return priceStageSplit(problem, ranges);
}

} // namespace autopar::plan
