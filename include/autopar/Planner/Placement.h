//===- Placement.h - Which nodes a plan's groups span -----------*- C++ -*-===//
//
// autopar-run numbers the ranks of a dp x tp x pp plan tp fastest, then dp,
// then pp (the runtime's defaultRankOf, Megatron-LM's order), and a launcher
// that fills each node before the next (srun's default block distribution,
// the --ntasks-per-node of --emit-sbatch) puts rank r on node
// r / gpusPerNode. This says where that puts each tensor-parallel group,
// each data-parallel group and each pipeline stage: what the cost model
// assumes when it prices tp inside a node and pp across nodes.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PLANNER_PLACEMENT_H
#define AUTOPAR_PLANNER_PLACEMENT_H

#include "autopar/Planner/Cluster.h"

#include "llvm/Support/JSON.h"

#include <cstdint>
#include <string>
#include <vector>

namespace autopar {

/// Where the groups of one grid axis sit: a group is the ranks that differ
/// only in that axis' coordinate (the ranks one of its collectives spans).
struct AxisPlacement {
  int64_t size = 1;   ///< ranks per group
  int64_t groups = 1; ///< groups of this axis
  /// The fewest and the most nodes one group spans.
  int64_t minNodes = 1, maxNodes = 1;
  /// Groups that span more than one node.
  int64_t groupsAcrossNodes = 0;
  bool withinNode() const { return groupsAcrossNodes == 0; }
};

/// The nodes a pipeline stage's dp x tp ranks occupy.
struct StagePlacement {
  int64_t firstNode = 0, lastNode = 0;
};

/// A plan's ranks on the cluster's nodes.
struct RankPlacement {
  int64_t gpusPerNode = 1;
  int64_t nodes = 1; ///< nodes the plan's ranks occupy
  AxisPlacement dp, tp, pp;
  std::vector<StagePlacement> stages; ///< one per pipeline stage
};

/// Places the ranks of a dp x tp x pp plan on `cluster`'s nodes as
/// autopar-run numbers them (see the file comment).
RankPlacement placeRanks(const ClusterSpec &cluster, int64_t dp, int64_t tp,
                         int64_t pp);

/// One line: "tp=8 inside a node; dp=16 across 16 nodes; pp=2 across
/// nodes: stage 0 on nodes 0-15, stage 1 on nodes 16-31". Axes of size 1
/// are left out; more than four runs of stages are shortened with "...".
std::string describePlacement(const RankPlacement &placement);

/// The report's "placement" object (docs/planner.md#rank-placement).
llvm::json::Object placementJson(const RankPlacement &placement);

} // namespace autopar

#endif // AUTOPAR_PLANNER_PLACEMENT_H
