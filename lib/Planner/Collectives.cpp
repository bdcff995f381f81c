//===- Collectives.cpp - Alpha-beta time of NCCL-style collectives --------===//
//
// One phase over n ranks on one link level costs
//     steps * alpha + bytes * busFactor(n) / B
// where B is one rank's bandwidth on that level, per direction.
// - Bus factors: NVIDIA/nccl-tests doc/PERFORMANCE.md ("Summary").
// - Ring steps and the tree's latency and bandwidth: NVIDIA/nccl
//   src/graph/tuning.cc (ncclTopoTuneModel: ring nsteps 2(n-1) for
//   all-reduce and n-1 for all-gather/reduce-scatter; tree latency
//   2 * log2(nNodes) * interLat; tree algorithm bandwidth = busBw * 0.5,
//   i.e. each rank moves 2 * bytes, against the ring's 2(n-1)/n * bytes).
// A group inside one node uses the intra-node link (per GPU). A group that
// spans nodes is hierarchical: the ranks of a node split the buffer, each
// moves its share over the network on its part of the node's NICs. See
// docs/cost-model.md for the derivations.
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/CostModel.h"

#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace autopar;

namespace {

/// One level of the network as one rank sees it.
struct Link {
  double bytesPerS = 0; ///< this rank's bandwidth, per direction
  double alpha = 0;     ///< seconds per step
};

/// The alpha and beta parts of one or more phases.
struct Time {
  double latency = 0;
  double transfer = 0;
  double total() const { return latency + transfer; }
  Time &operator+=(const Time &o) {
    latency += o.latency;
    transfer += o.transfer;
    return *this;
  }
};

constexpr double kInf = std::numeric_limits<double>::infinity();

double seconds(double bytes, double bytesPerS) {
  if (bytes <= 0)
    return 0;
  return bytesPerS > 0 ? bytes / bytesPerS : kInf;
}

Link intraNodeLink(const ClusterSpec &cluster) {
  return {cluster.intraNode.gbytesPerS * 1e9,
          cluster.intraNode.latencyUs * 1e-6};
}

/// One rank's share of the node's NICs when `ranksPerNode` ranks of each of
/// `concurrentGroups` groups use the network at once. A rank reaches the
/// network through its own rail (NCCL pairs each GPU with its nearest NIC),
/// so it never gets more than nicsPerNode / gpusPerNode NICs (at least one),
/// however idle the other NICs are.
Link interNodeLink(const ClusterSpec &cluster, int64_t ranksPerNode,
                   int64_t concurrentGroups) {
  const InterNodeLink &net = cluster.interNode;
  double share = net.nodeBytesPerS() /
                 double(std::max<int64_t>(1, concurrentGroups)) /
                 double(std::max<int64_t>(1, ranksPerNode));
  double nicsPerRank =
      std::max(1.0, double(net.nicsPerNode) /
                        double(std::max<int64_t>(1, cluster.gpusPerNode)));
  double rail = net.nicGbitsPerS * 1e9 / 8 * nicsPerRank;
  return {std::min(share, rail), net.latencyUs * 1e-6};
}

/// Ring steps of `kind` over n ranks (nccl tuning.cc's nsteps; a pipelined
/// broadcast and the n-1 pairwise rounds of an all-to-all likewise take n-1).
double ringSteps(Collective kind, int64_t n) {
  switch (kind) {
  case Collective::AllReduce:
    return 2.0 * double(n - 1);
  case Collective::AllGather:
  case Collective::ReduceScatter:
  case Collective::AllToAll:
  case Collective::Broadcast:
    return double(n - 1);
  case Collective::SendRecv:
    return 1;
  }
  llvm_unreachable("unknown collective");
}

/// A ring (or pairwise exchange) over n ranks on one link level.
Time ring(Collective kind, double bytes, int64_t n, Link link) {
  if (n <= 1)
    return {};
  return {ringSteps(kind, n) * link.alpha,
          seconds(bytes * busBandwidthFactor(kind, n), link.bytesPerS)};
}

/// NCCL's double binary tree all-reduce over n ranks: up and down a tree of
/// depth ceil(log2 n); every rank sends and receives 2 * bytes.
Time tree(double bytes, int64_t n, Link link) {
  if (n <= 1)
    return {};
  double depth = std::ceil(std::log2(double(n)));
  return {2 * depth * link.alpha, seconds(2 * bytes, link.bytesPerS)};
}

/// The faster of ring and tree for an all-reduce over `n` nodes.
Time bestAllReduce(double bytes, int64_t n, Link link, llvm::StringRef &algo) {
  Time r = ring(Collective::AllReduce, bytes, n, link);
  Time t = tree(bytes, n, link);
  // Ties go to the ring: it moves fewer bytes, its latency is the same.
  if (t.total() < r.total()) {
    algo = "tree";
    return t;
  }
  algo = "ring";
  return r;
}

} // namespace

llvm::StringRef autopar::collectiveName(Collective c) {
  switch (c) {
  case Collective::AllReduce:
    return "all_reduce";
  case Collective::AllGather:
    return "all_gather";
  case Collective::ReduceScatter:
    return "reduce_scatter";
  case Collective::AllToAll:
    return "all_to_all";
  case Collective::Broadcast:
    return "broadcast";
  case Collective::SendRecv:
    return "send_recv";
  }
  llvm_unreachable("unknown collective");
}

double autopar::busBandwidthFactor(Collective kind, int64_t n) {
  if (n <= 1)
    return kind == Collective::SendRecv ? 1.0 : 0.0;
  double nn = double(n);
  switch (kind) {
  case Collective::AllReduce:
    return 2 * (nn - 1) / nn;
  case Collective::AllGather:
  case Collective::ReduceScatter:
  case Collective::AllToAll:
    return (nn - 1) / nn;
  case Collective::Broadcast:
  case Collective::SendRecv:
    return 1;
  }
  llvm_unreachable("unknown collective");
}

CollectiveCost autopar::collectiveTime(const ClusterSpec &cluster,
                                       Collective kind, double bytes,
                                       const GroupPlacement &group) {
  CollectiveCost cost;
  int64_t n = group.size;
  if (n <= 1 || bytes <= 0) {
    cost.algorithm = "none";
    return cost;
  }
  cost.busBytes = bytes * busBandwidthFactor(kind, n);

  // r ranks of the group per node, on g nodes.
  int64_t r = std::clamp<int64_t>(group.ranksPerNode, 1, n);
  int64_t g = (n + r - 1) / r;
  Link intra = intraNodeLink(cluster);
  Link inter = interNodeLink(cluster, r, group.concurrentGroupsPerNode);
  auto finish = [&](Time t, llvm::StringRef algo) {
    cost.seconds = t.total();
    cost.latencySeconds = t.latency;
    cost.algorithm = algo;
    return cost;
  };

  if (kind == Collective::SendRecv) {
    Link link = g == 1 ? intra : inter;
    return finish({link.alpha, seconds(bytes, link.bytesPerS)}, "p2p");
  }
  if (kind == Collective::AllToAll) {
    // Every rank sends bytes/n to each peer: r-1 of them on its node, n-r
    // elsewhere; both links carry their part at the same time.
    double nn = double(n);
    Time t{double(r - 1) * intra.alpha + double(n - r) * inter.alpha,
           std::max(seconds(bytes * double(r - 1) / nn, intra.bytesPerS),
                    seconds(bytes * double(n - r) / nn, inter.bytesPerS))};
    return finish(t, "p2p");
  }
  if (g == 1)
    return finish(ring(kind, bytes, n, intra), "ring");

  if (kind == Collective::Broadcast) {
    // NCCL broadcasts along a pipelined ring, one ring per channel; the
    // node's r ranks carry r channels across the network, so the slowest
    // hop is min(B_intra, r * B_inter).
    Link link = inter;
    if (r > 1)
      link.bytesPerS = std::min(intra.bytesPerS, double(r) * inter.bytesPerS);
    Time t{double(n - g) * intra.alpha + double(g - 1) * inter.alpha,
           seconds(bytes, link.bytesPerS)};
    return finish(t, "ring");
  }

  if (r == 1) {
    // One rank per node: a flat ring (or tree) over the network.
    if (kind != Collective::AllReduce)
      return finish(ring(kind, bytes, n, inter), "ring");
    llvm::StringRef algo;
    Time t = bestAllReduce(bytes, n, inter, algo);
    return finish(t, algo);
  }

  // Hierarchical: inside each node the buffer is split r ways; each of the r
  // ranks runs the inter-node phase on its 1/r share with its share of the
  // NICs, all r at once.
  double share = bytes / double(r);
  Time t;
  switch (kind) {
  case Collective::AllReduce:
    t += ring(Collective::ReduceScatter, bytes, r, intra);
    t += bestAllReduce(share, g, inter, cost.interNodeAlgorithm);
    t += ring(Collective::AllGather, bytes, r, intra);
    break;
  case Collective::AllGather:
    // Gather the shares across nodes first, then the full buffer per node.
    t += ring(Collective::AllGather, share, g, inter);
    t += ring(Collective::AllGather, bytes, r, intra);
    cost.interNodeAlgorithm = "ring";
    break;
  case Collective::ReduceScatter:
    t += ring(Collective::ReduceScatter, bytes, r, intra);
    t += ring(Collective::ReduceScatter, share, g, inter);
    cost.interNodeAlgorithm = "ring";
    break;
  default:
    llvm_unreachable("handled above");
  }
  return finish(t, "hierarchical");
}

double autopar::overlappedCommSeconds(double commSeconds, double gemmSeconds,
                                      int64_t tp) {
  if (tp <= 1 || commSeconds <= 0)
    return commSeconds;
  double n = double(tp);
  return commSeconds / n +
         (n - 1) / n * std::max(0.0, commSeconds - gemmSeconds);
}

double autopar::dataParallelExposedSeconds(double reduceSeconds,
                                           double gatherSeconds,
                                           double forwardSeconds,
                                           double backwardSeconds) {
  return std::max(0.0, reduceSeconds - backwardSeconds) +
         std::max(0.0, gatherSeconds - forwardSeconds);
}
