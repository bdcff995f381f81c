//===- Placement.cpp - Which nodes a plan's groups span -------------------===//
//
// The rank order is the runtime's own defaultRankOf (runtime/lib/Grid.cpp,
// compiled into the planner like PipelineSchedule.cpp), so the placement the
// report shows is the one autopar-run makes.
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/Placement.h"

#include "autopar/runtime/Grid.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>
#include <limits>

using namespace autopar;
using runtime::GridAxis;
using runtime::GridVector;

namespace {
constexpr int kDP = int(GridAxis::DP);
constexpr int kTP = int(GridAxis::TP);
constexpr int kPP = int(GridAxis::PP);

/// The groups of `axis`: every choice of the other two coordinates, the
/// ranks along `axis`.
AxisPlacement placeAxis(const GridVector &sizes, int axis,
                        int64_t gpusPerNode) {
  AxisPlacement a;
  a.size = sizes[axis];
  a.groups = sizes[kDP] * sizes[kTP] * sizes[kPP] / a.size;
  a.minNodes = std::numeric_limits<int64_t>::max();
  a.maxNodes = 0;
  int other1 = (axis + 1) % 3, other2 = (axis + 2) % 3;
  // A group's members are evenly spaced ranks (the order is linear in each
  // coordinate), so the nodes it spans depend only on where its first rank
  // sits in its node: at most gpusPerNode distinct groups to walk.
  llvm::DenseMap<int64_t, int64_t> nodesByOffset;
  GridVector coords{};
  for (coords[other1] = 0; coords[other1] < sizes[other1]; ++coords[other1]) {
    for (coords[other2] = 0; coords[other2] < sizes[other2]; ++coords[other2]) {
      coords[axis] = 0;
      int64_t first = runtime::defaultRankOf(sizes, coords);
      auto [it, inserted] =
          nodesByOffset.try_emplace(first % gpusPerNode, int64_t(0));
      if (inserted) {
        // Ranks grow along the axis, so nodes do too: count the changes.
        int64_t lastNode = -1;
        for (int64_t k = 0; k < a.size; ++k) {
          coords[axis] = k;
          int64_t node = runtime::defaultRankOf(sizes, coords) / gpusPerNode;
          if (node != lastNode)
            ++it->second;
          lastNode = node;
        }
      }
      int64_t nodes = it->second;
      a.minNodes = std::min(a.minNodes, nodes);
      a.maxNodes = std::max(a.maxNodes, nodes);
      if (nodes > 1)
        ++a.groupsAcrossNodes;
    }
  }
  return a;
}

std::string nodeRange(int64_t first, int64_t last) {
  if (first == last)
    return llvm::formatv("node {0}", first).str();
  return llvm::formatv("nodes {0}-{1}", first, last).str();
}

/// "tp=8 inside a node", "dp=16 across 16 nodes", "tp=3 across up to 2
/// nodes (2 of 8 groups)".
std::string describeAxis(llvm::StringRef name, const AxisPlacement &a) {
  std::string text = llvm::formatv("{0}={1} ", name, a.size).str();
  if (a.withinNode())
    return text + "inside a node";
  if (a.groupsAcrossNodes < a.groups)
    return text + llvm::formatv("across up to {0} nodes ({1} of {2} groups)",
                                a.maxNodes, a.groupsAcrossNodes, a.groups)
                      .str();
  if (a.minNodes == a.maxNodes)
    return text + llvm::formatv("across {0} nodes", a.maxNodes).str();
  return text +
         llvm::formatv("across {0}-{1} nodes", a.minNodes, a.maxNodes).str();
}
} // namespace

RankPlacement autopar::placeRanks(const ClusterSpec &cluster, int64_t dp,
                                  int64_t tp, int64_t pp) {
  assert(dp >= 1 && tp >= 1 && pp >= 1 && cluster.gpusPerNode >= 1);
  GridVector sizes{};
  sizes[kDP] = dp;
  sizes[kTP] = tp;
  sizes[kPP] = pp;
  RankPlacement p;
  p.gpusPerNode = cluster.gpusPerNode;
  int64_t world = dp * tp * pp;
  p.nodes = (world + p.gpusPerNode - 1) / p.gpusPerNode;
  p.dp = placeAxis(sizes, kDP, p.gpusPerNode);
  p.tp = placeAxis(sizes, kTP, p.gpusPerNode);
  p.pp = placeAxis(sizes, kPP, p.gpusPerNode);
  // pp varies slowest: a stage's ranks are contiguous, from its (dp 0, tp 0)
  // rank to its (dp-1, tp-1) rank.
  for (int64_t s = 0; s < pp; ++s) {
    GridVector first{}, last{};
    first[kPP] = last[kPP] = s;
    last[kDP] = dp - 1;
    last[kTP] = tp - 1;
    p.stages.push_back({runtime::defaultRankOf(sizes, first) / p.gpusPerNode,
                        runtime::defaultRankOf(sizes, last) / p.gpusPerNode});
  }
  return p;
}

std::string autopar::describePlacement(const RankPlacement &p) {
  llvm::SmallVector<std::string> parts;
  if (p.tp.size > 1)
    parts.push_back(describeAxis("tp", p.tp));
  if (p.dp.size > 1)
    parts.push_back(describeAxis("dp", p.dp));
  if (p.pp.size > 1) {
    // Runs of stages on the same nodes: "stages 0-3 on node 0".
    struct Run {
      int64_t firstStage, lastStage;
      StagePlacement nodes;
    };
    llvm::SmallVector<Run> runs;
    for (auto [s, stage] : llvm::enumerate(p.stages)) {
      if (!runs.empty() && runs.back().nodes.firstNode == stage.firstNode &&
          runs.back().nodes.lastNode == stage.lastNode)
        runs.back().lastStage = s;
      else
        runs.push_back({int64_t(s), int64_t(s), stage});
    }
    auto show = [](const Run &r) {
      std::string stages =
          r.firstStage == r.lastStage
              ? llvm::formatv("stage {0}", r.firstStage).str()
              : llvm::formatv("stages {0}-{1}", r.firstStage, r.lastStage)
                    .str();
      return stages + " on " + nodeRange(r.nodes.firstNode, r.nodes.lastNode);
    };
    llvm::SmallVector<std::string> shown;
    for (auto [i, run] : llvm::enumerate(runs)) {
      if (runs.size() > 4 && i == 2)
        shown.push_back("...");
      if (runs.size() <= 4 || i < 2 || i + 1 == runs.size())
        shown.push_back(show(run));
    }
    parts.push_back(describeAxis("pp", p.pp) + ": " + llvm::join(shown, ", "));
  }
  if (parts.empty())
    return "one rank, on node 0";
  return llvm::join(parts, "; ");
}

llvm::json::Object autopar::placementJson(const RankPlacement &p) {
  auto axis = [](const AxisPlacement &a) {
    return llvm::json::Object{{"size", a.size},
                              {"groups", a.groups},
                              {"within_node", a.withinNode()},
                              {"min_nodes_per_group", a.minNodes},
                              {"max_nodes_per_group", a.maxNodes},
                              {"groups_across_nodes", a.groupsAcrossNodes}};
  };
  llvm::json::Array stages;
  for (auto [s, stage] : llvm::enumerate(p.stages))
    stages.push_back(llvm::json::Object{{"stage", int64_t(s)},
                                        {"first_node", stage.firstNode},
                                        {"last_node", stage.lastNode}});
  return llvm::json::Object{{"rank_order", llvm::json::Array{"tp", "dp", "pp"}},
                            {"gpus_per_node", p.gpusPerNode},
                            {"nodes", p.nodes},
                            {"tp", axis(p.tp)},
                            {"dp", axis(p.dp)},
                            {"pp", axis(p.pp)},
                            {"stages", std::move(stages)},
                            {"summary", describePlacement(p)}};
}
