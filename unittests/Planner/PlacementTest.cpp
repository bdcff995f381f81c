//===- PlacementTest.cpp - Which nodes a plan's groups span ---------------===//

#include "autopar/Planner/Placement.h"

#include "llvm/Support/FormatVariadic.h"

#include "gtest/gtest.h"

#include <random>
#include <set>

using namespace autopar;

namespace {

ClusterSpec nodesOf(int64_t nodes, int64_t gpusPerNode) {
  ClusterSpec c = llvm::cantFail(parseClusterSpec("dgx-h100:1"));
  c.nodes = nodes;
  c.gpusPerNode = gpusPerNode;
  return c;
}

/// Megatron-LM's order written out independently of the runtime's
/// defaultRankOf: tp fastest, then dp, then pp.
int64_t megatronRank(int64_t d, int64_t t, int64_t p, int64_t dp, int64_t tp) {
  return t + tp * (d + dp * p);
}

TEST(Placement, TensorParallelInsideDataParallelAcross) {
  // 16 DGX nodes, tp=8 dp=16: each tp group is one node, each dp group
  // takes one GPU from every node.
  RankPlacement p = placeRanks(nodesOf(16, 8), 16, 8, 1);
  EXPECT_EQ(p.nodes, 16);
  EXPECT_TRUE(p.tp.withinNode());
  EXPECT_EQ(p.tp.groups, 16);
  EXPECT_FALSE(p.dp.withinNode());
  EXPECT_EQ(p.dp.groups, 8);
  EXPECT_EQ(p.dp.minNodes, 16);
  EXPECT_EQ(p.dp.maxNodes, 16);
  EXPECT_EQ(p.dp.groupsAcrossNodes, 8);
  ASSERT_EQ(p.stages.size(), 1u);
  EXPECT_EQ(p.stages[0].firstNode, 0);
  EXPECT_EQ(p.stages[0].lastNode, 15);
  EXPECT_EQ(describePlacement(p), "tp=8 inside a node; dp=16 across 16 nodes");
}

TEST(Placement, PipelineStagesAcrossNodes) {
  RankPlacement p = placeRanks(nodesOf(4, 8), 1, 8, 4);
  EXPECT_TRUE(p.tp.withinNode());
  EXPECT_EQ(p.pp.maxNodes, 4);
  EXPECT_EQ(describePlacement(p),
            "tp=8 inside a node; pp=4 across 4 nodes: stage 0 on node 0, "
            "stage 1 on node 1, stage 2 on node 2, stage 3 on node 3");
  // Two nodes per stage.
  EXPECT_EQ(describePlacement(placeRanks(nodesOf(4, 8), 2, 8, 2)),
            "tp=8 inside a node; dp=2 across 2 nodes; pp=2 across 2 nodes: "
            "stage 0 on nodes 0-1, stage 1 on nodes 2-3");
  // Many stages: the first two, "...", the last.
  EXPECT_EQ(describePlacement(placeRanks(nodesOf(64, 8), 1, 8, 64)),
            "tp=8 inside a node; pp=64 across 64 nodes: stage 0 on node 0, "
            "stage 1 on node 1, ..., stage 63 on node 63");
}

TEST(Placement, SeveralStagesShareANode) {
  RankPlacement p = placeRanks(nodesOf(2, 8), 2, 2, 4);
  EXPECT_TRUE(p.dp.withinNode());
  EXPECT_TRUE(p.tp.withinNode());
  EXPECT_EQ(p.pp.maxNodes, 2);
  EXPECT_EQ(describePlacement(p),
            "tp=2 inside a node; dp=2 inside a node; pp=4 across 2 nodes: "
            "stages 0-1 on node 0, stages 2-3 on node 1");
  EXPECT_EQ(describePlacement(placeRanks(nodesOf(1, 1), 1, 1, 1)),
            "one rank, on node 0");
}

TEST(Placement, TensorParallelAcrossNodes) {
  // tp=16 on 8-GPU nodes: every tp group spans two nodes.
  RankPlacement wide = placeRanks(nodesOf(4, 8), 2, 16, 1);
  EXPECT_EQ(wide.tp.groupsAcrossNodes, 2);
  EXPECT_EQ(describePlacement(wide),
            "tp=16 across 2 nodes; dp=2 across 2 nodes");
  // tp=3 on 8-GPU nodes: the groups at ranks 6-8 and 15-17 straddle a
  // node boundary, the other six do not.
  RankPlacement odd = placeRanks(nodesOf(3, 8), 8, 3, 1);
  EXPECT_EQ(odd.tp.groups, 8);
  EXPECT_EQ(odd.tp.groupsAcrossNodes, 2);
  EXPECT_EQ(odd.tp.minNodes, 1);
  EXPECT_EQ(odd.tp.maxNodes, 2);
  EXPECT_EQ(describePlacement(odd).substr(0, 42),
            "tp=3 across up to 2 nodes (2 of 8 groups);");
}

TEST(Placement, AgreesWithMegatronOrderEverywhere) {
  // Random meshes on random node sizes against a brute-force placement.
  std::mt19937 rng(17);
  for (int trial = 0; trial < 300; ++trial) {
    int64_t dp = 1 + rng() % 6, tp = 1 + rng() % 6, pp = 1 + rng() % 5;
    int64_t gpn = 1 + rng() % 9;
    int64_t world = dp * tp * pp;
    RankPlacement p =
        placeRanks(nodesOf((world + gpn - 1) / gpn, gpn), dp, tp, pp);
    SCOPED_TRACE(
        llvm::formatv("dp={0} tp={1} pp={2} gpus/node={3}", dp, tp, pp, gpn)
            .str());
    auto check = [&](const AxisPlacement &a, auto member, int64_t size,
                     int64_t groupsA, int64_t groupsB) {
      int64_t lo = INT64_MAX, hi = 0, across = 0;
      for (int64_t i = 0; i < groupsA; ++i)
        for (int64_t j = 0; j < groupsB; ++j) {
          std::set<int64_t> nodes;
          for (int64_t k = 0; k < size; ++k)
            nodes.insert(member(i, j, k) / gpn);
          lo = std::min<int64_t>(lo, nodes.size());
          hi = std::max<int64_t>(hi, nodes.size());
          across += nodes.size() > 1;
        }
      EXPECT_EQ(a.size, size);
      EXPECT_EQ(a.groups, groupsA * groupsB);
      EXPECT_EQ(a.minNodes, lo);
      EXPECT_EQ(a.maxNodes, hi);
      EXPECT_EQ(a.groupsAcrossNodes, across);
    };
    check(
        p.tp,
        [&](int64_t d, int64_t s, int64_t t) {
          return megatronRank(d, t, s, dp, tp);
        },
        tp, dp, pp);
    check(
        p.dp,
        [&](int64_t t, int64_t s, int64_t d) {
          return megatronRank(d, t, s, dp, tp);
        },
        dp, tp, pp);
    check(
        p.pp,
        [&](int64_t d, int64_t t, int64_t s) {
          return megatronRank(d, t, s, dp, tp);
        },
        pp, dp, tp);
    ASSERT_EQ(int64_t(p.stages.size()), pp);
    for (int64_t s = 0; s < pp; ++s) {
      int64_t first = INT64_MAX, last = 0;
      for (int64_t d = 0; d < dp; ++d)
        for (int64_t t = 0; t < tp; ++t) {
          int64_t node = megatronRank(d, t, s, dp, tp) / gpn;
          first = std::min(first, node);
          last = std::max(last, node);
        }
      EXPECT_EQ(p.stages[s].firstNode, first);
      EXPECT_EQ(p.stages[s].lastNode, last);
    }
  }
}

TEST(Placement, ReportObject) {
  llvm::json::Object o = placementJson(placeRanks(nodesOf(4, 8), 2, 8, 2));
  std::string text = llvm::formatv("{0}", llvm::json::Value(std::move(o)));
  EXPECT_EQ(text,
            "{\"dp\":{\"groups\":16,\"groups_across_nodes\":16,"
            "\"max_nodes_per_group\":2,\"min_nodes_per_group\":2,\"size\":2,"
            "\"within_node\":false},\"gpus_per_node\":8,\"nodes\":4,"
            "\"pp\":{\"groups\":16,\"groups_across_nodes\":16,"
            "\"max_nodes_per_group\":2,\"min_nodes_per_group\":2,\"size\":2,"
            "\"within_node\":false},\"rank_order\":[\"tp\",\"dp\",\"pp\"],"
            "\"stages\":[{\"first_node\":0,\"last_node\":1,\"stage\":0},"
            "{\"first_node\":2,\"last_node\":3,\"stage\":1}],"
            "\"summary\":\"tp=8 inside a node; dp=2 across 2 nodes; pp=2 "
            "across 2 nodes: stage 0 on nodes 0-1, stage 1 on nodes 2-3\","
            "\"tp\":{\"groups\":4,\"groups_across_nodes\":0,"
            "\"max_nodes_per_group\":1,\"min_nodes_per_group\":1,\"size\":8,"
            "\"within_node\":true}}");
}

} // namespace
