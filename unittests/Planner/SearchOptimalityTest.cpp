//===- SearchOptimalityTest.cpp - The search against brute force ----------===//
//
// A property of the plan search (docs/planner.md, "How the search is bounded,
// and why it is exact"): on small random models and clusters, the plan it
// returns, and its runner-ups, are as fast as the best plans of the whole
// joint space -- every grid shape, every split of the segments into pipeline
// stages, every micro-batch size, ZeRO stage and recomputation mode -- found
// by pricing each fully pinned plan with the planner's own cost evaluation
// (PinnedPlanPricer). The lower bounds that skip plans and the stage
// boundaries' dynamic program must not lose them.
//
//===----------------------------------------------------------------------===//

#include "PlannerImpl.h"

#include "autopar/Import/OnnxImporter.h"
#include "autopar/Planner/Planner.h"
#include "autopar/Transforms/ShardingModels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"

#include "gtest/gtest.h"

#include <cstdlib>
#include <functional>
#include <map>
#include <random>

using namespace autopar;

namespace {

std::string values(int64_t n) {
  std::string s;
  for (int64_t i = 0; i < n; ++i)
    s += i ? ", 0.5" : "0.5";
  return s;
}

/// A random chain on a batch of `batch`: projections that change the width,
/// activations, and residual blocks (Add(H, Relu(MatMul(H, A)))), about
/// `units` of them. The planner cuts a segment wherever one activation is
/// live: after each of them.
std::string randomModel(std::mt19937 &rng, int64_t batch, int units) {
  static const int64_t widths[] = {8, 16, 24, 32, 48, 64};
  auto pick = [&](int n) { return int(rng() % n); };
  int64_t in = widths[pick(6)], width = in;
  std::string weights, body, last = "X";
  for (int u = 0; u < units; ++u) {
    std::string i = std::to_string(u), out = "H" + i;
    switch (pick(3)) {
    case 0: { // a projection to another width
      int64_t next = widths[pick(6)];
      weights += std::string(weights.empty() ? "" : ", ") + "float[" +
                 std::to_string(width) + ", " + std::to_string(next) + "] W" +
                 i + " = {" + values(width * next) + "}";
      body += "  " + out + " = MatMul(" + last + ", W" + i + ")\n";
      width = next;
      break;
    }
    case 1: // an activation
      body +=
          "  " + out + " = " + (pick(2) ? "Relu" : "Tanh") + "(" + last + ")\n";
      break;
    default: // a residual block
      weights += std::string(weights.empty() ? "" : ", ") + "float[" +
                 std::to_string(width) + ", " + std::to_string(width) + "] A" +
                 i + " = {" + values(width * width) + "}";
      body += "  P" + i + " = MatMul(" + last + ", A" + i + ")\n";
      body += "  R" + i + " = Relu(P" + i + ")\n";
      body += "  " + out + " = Add(" + last + ", R" + i + ")\n";
      break;
    }
    last = out;
  }
  if (weights.empty()) { // at least one parameter
    weights = "float[" + std::to_string(width) + ", " + std::to_string(width) +
              "] W = {" + values(width * width) + "}";
    body += "  HW = MatMul(" + last + ", W)\n";
    last = "HW";
  }
  body += "  Y = Identity(" + last + ")\n";
  return "<ir_version: 8, opset_import: [\"\" : 17]>\n"
         "g (float[" +
         std::to_string(batch) + ", " + std::to_string(in) + "] X) => (float[" +
         std::to_string(batch) + ", " + std::to_string(width) + "] Y)\n  <" +
         weights + "> {\n" + body + "}\n";
}

std::vector<int64_t> divisorsOf(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t i = 1; i <= n; ++i)
    if (n % i == 0)
      d.push_back(i);
  return d;
}

/// Every split of `n` segments into `p` contiguous, non-empty stages.
void forEachSplit(int64_t n, int64_t p,
                  const std::function<void(const plan::StageRanges &)> &f) {
  plan::StageRanges ranges;
  std::function<void(int64_t)> next = [&](int64_t first) {
    int64_t k = ranges.size();
    if (k == p - 1) {
      ranges.push_back({first, n - 1});
      f(ranges);
      ranges.pop_back();
      return;
    }
    for (int64_t last = first; last <= n - (p - k); ++last) {
      ranges.push_back({first, last});
      next(last + 1);
      ranges.pop_back();
    }
  };
  next(0);
}

struct BruteForce {
  PlanCandidate best;
  bool any = false;
  int64_t plans = 0;
  std::vector<double> memory; ///< of every plan
  /// The best plan of each grid shape (dp, tp, pp), best first.
  std::vector<PlanCandidate> bestOfEachShape;
};

/// The search's order of plans: those that fit first, then the faster; of
/// plans that do not fit, the smaller.
bool better(const PlanCandidate &a, const PlanCandidate &b) {
  if (a.fits != b.fits)
    return a.fits;
  return a.fits ? a.stepSeconds < b.stepSeconds
                : a.memory.total() < b.memory.total();
}

/// The best plan of the joint space, as the search ranks plans: those that
/// fit first, then the faster; of plans that do not fit, the smaller.
BruteForce bruteForce(const plan::ProgramGraph &graph,
                      const PlanRequest &request) {
  plan::PinnedPlanPricer pricer(graph, request);
  bool training = request.mode == PlanMode::Training;
  int64_t world = request.cluster.worldSize(), batch = graph.globalBatch;
  int64_t segments = graph.segments.size();
  BruteForce result;
  std::map<std::tuple<int64_t, int64_t, int64_t>, PlanCandidate> shapes;
  auto consider = [&](const PlanCandidate &c) {
    ++result.plans;
    result.memory.push_back(c.memory.total());
    if (!result.any || better(c, result.best)) {
      result.best = c;
      result.any = true;
    }
    auto [it, first] = shapes.try_emplace({c.dp, c.tp, c.pp}, c);
    if (!first && better(c, it->second))
      it->second = c;
  };
  for (int64_t tp : divisorsOf(world))
    for (int64_t pp : divisorsOf(world / tp)) {
      int64_t dp = world / tp / pp;
      if (batch % dp != 0 || pp > segments)
        continue;
      for (int64_t mb : divisorsOf(batch / dp)) {
        if (!training && pp == 1 && mb != batch / dp)
          continue;
        for (Recompute r :
             {Recompute::None, Recompute::Selective, Recompute::Full}) {
          if (!training && r != Recompute::None)
            continue;
          for (int zero = 0; zero <= (training && dp > 1 ? 3 : 0); ++zero)
            forEachSplit(segments, pp, [&](const plan::StageRanges &split) {
              plan::PinnedPlan pinned;
              pinned.dp = dp;
              pinned.tp = tp;
              pinned.pp = pp;
              pinned.zeroStage = zero;
              pinned.microBatchSize = mb;
              pinned.recompute = r;
              pinned.stages = split;
              consider(pricer.price(pinned));
            });
        }
      }
    }
  for (auto &[shape, c] : shapes)
    result.bestOfEachShape.push_back(c);
  llvm::stable_sort(result.bestOfEachShape, better);
  return result;
}

class SearchOptimalityTest : public ::testing::Test {
protected:
  SearchOptimalityTest() {
    mlir::DialectRegistry registry;
    registerShardingModels(registry);
    mlir::registerAllDialects(registry);
    context.appendDialectRegistry(registry);
  }
  mlir::MLIRContext context;
};

std::string describe(const PlanCandidate &c) {
  std::string s = "dp=" + std::to_string(c.dp) + " tp=" + std::to_string(c.tp) +
                  " pp=" + std::to_string(c.pp) +
                  " zero=" + std::to_string(c.zeroStage) +
                  " mb=" + std::to_string(c.microBatchSize) + " recompute " +
                  recomputeName(c.recompute).str() + " stages";
  for (const StagePlan &stage : c.stages)
    s += " " + std::to_string(stage.firstSegment) + "-" +
         std::to_string(stage.lastSegment);
  return s + (c.fits ? "" : " (does not fit)");
}

TEST_F(SearchOptimalityTest, TheSearchFindsTheBruteForceOptimum) {
  std::mt19937 rng(20261126);
  auto pick = [&](int n) { return int(rng() % n); };
  static const int64_t batches[] = {2, 4, 6, 8, 12, 16};
  static const int64_t gpusPerNode[] = {1, 2, 4, 8};
  const int trials = 48;
  int fitting = 0, pipelined = 0, memoryDecided = 0, unfit = 0;
  for (int trial = 0; trial < trials; ++trial) {
    // A model of at least three segments.
    std::string text;
    mlir::OwningOpRef<mlir::ModuleOp> module;
    std::optional<plan::ProgramGraph> graph;
    mlir::func::FuncOp main;
    int64_t batch = batches[pick(6)];
    while (!graph || graph->segments.size() < 3) {
      text = randomModel(rng, batch, 3 + pick(8));
      module = importOnnxBuffer(&context, text, "random.onnxtxt",
                                /*isText=*/true, ImportOptions());
      ASSERT_TRUE(module) << text;
      main = module->lookupSymbol<mlir::func::FuncOp>("main");
      auto built = plan::buildProgramGraph(main, cudaAttentionKernelLimits());
      ASSERT_TRUE(succeeded(built));
      graph = std::move(*built);
    }

    // A small GPU cluster, sometimes of two nodes, in training or inference.
    auto cluster = parseClusterSpec(pick(2) ? "dgx-h100:1" : "dgx-a100-80gb:1");
    ASSERT_TRUE(bool(cluster));
    cluster->gpusPerNode = gpusPerNode[pick(4)];
    cluster->nodes = cluster->gpusPerNode <= 4 && pick(2) ? 2 : 1;
    PlanRequest request;
    request.cluster = *cluster;
    request.mode = pick(4) ? PlanMode::Training : PlanMode::Inference;
    request.precision = cluster->defaultPrecision();
    // Device memory: from more than any plan needs down to less than most
    // need (a quantile of every plan's memory), so that memory decides
    // between plans and between stage boundaries.
    request.cluster.device.memoryGiB = 1e9;
    std::vector<double> memory = bruteForce(*graph, request).memory;
    llvm::sort(memory);
    static const double quantiles[] = {0, 0.02, 0.1, 0.3, 0.5, 0.8, 1.0};
    double q = quantiles[pick(7)];
    // Quantile 0: just less than the smallest plan needs.
    double cap = q > 0 ? memory[size_t(q * (memory.size() - 1))]
                       : memory.front() * 0.999;
    request.cluster.device.memoryGiB = cap / (1024.0 * 1024 * 1024);

    BruteForce expected = bruteForce(*graph, request);
    ASSERT_TRUE(expected.any);
    auto result = planProgram(main, request);
    std::string context =
        "trial " + std::to_string(trial) + ": " +
        std::to_string(graph->segments.size()) + " segments, " +
        std::to_string(expected.plans) + " plans on " +
        std::to_string(request.cluster.nodes) + " x " +
        std::to_string(request.cluster.gpusPerNode) + " " +
        request.cluster.device.name + " (memory quantile " + std::to_string(q) +
        "), " +
        (request.mode == PlanMode::Training ? "training" : "inference") +
        "; brute force: " + describe(expected.best) + "\n" + text;
    if (!expected.best.fits) {
      // Nothing fits: the search says so.
      ++unfit;
      EXPECT_FALSE(bool(result)) << context;
      if (!result)
        llvm::consumeError(result.takeError());
      continue;
    }
    ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError()) << "\n"
                              << context;
    ++fitting;
    pipelined += expected.best.pp > 1;
    memoryDecided += q < 1.0;
    if (getenv("SEARCH_OPTIMALITY_VERBOSE"))
      llvm::errs() << context.substr(0, context.find('\n')) << "\n";
    EXPECT_TRUE(result->best.fits) << context;
    EXPECT_NEAR(result->best.stepSeconds, expected.best.stepSeconds,
                1e-9 * expected.best.stepSeconds)
        << "search: " << describe(result->best) << "\n"
        << context;
    // The runner-ups are the best plans of the next best grid shapes: the
    // plans a lower bound skipped could not be among them.
    const std::vector<PlanCandidate> &shapes = expected.bestOfEachShape;
    size_t listed =
        std::min<size_t>(request.maxAlternatives, shapes.size() - 1);
    ASSERT_GE(result->alternatives.size(), listed) << context;
    for (size_t i = 0; i < listed; ++i) {
      const PlanCandidate &got = result->alternatives[i], &want = shapes[i + 1];
      EXPECT_EQ(got.fits, want.fits) << "runner-up " << i << "\n" << context;
      if (got.fits && want.fits) {
        EXPECT_NEAR(got.stepSeconds, want.stepSeconds, 1e-9 * want.stepSeconds)
            << "runner-up " << i << ": " << describe(got) << ", brute force "
            << describe(want) << "\n"
            << context;
      }
    }
  }
  if (getenv("SEARCH_OPTIMALITY_VERBOSE"))
    llvm::errs() << fitting << " fit, " << pipelined << " pipelined, "
                 << memoryDecided << " decided by memory, " << unfit
                 << " fit nowhere\n";
  // The random cases cover what they should.
  EXPECT_GE(fitting, trials * 3 / 4);
  EXPECT_GE(pipelined, 4);
  EXPECT_GE(memoryDecided, 10);
  EXPECT_GE(unfit, 1);
}

} // namespace
