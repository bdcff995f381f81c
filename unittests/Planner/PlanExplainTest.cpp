//===- PlanExplainTest.cpp - Layers, infeasible plans, --explain-plan -----===//
//
// What the planner says about its plans: the model layers each pipeline
// stage holds (a repeated block of segments is one layer), why a pinned plan
// that does not fit in memory fails and what would fit (the report's
// "infeasible"), and why each dimension of a plan beat its runner-up
// (--explain-plan).
//
//===----------------------------------------------------------------------===//

#include "PlannerImpl.h"

#include "autopar/Import/OnnxImporter.h"
#include "autopar/Planner/Planner.h"
#include "autopar/Transforms/ShardingModels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

using namespace autopar;

namespace {

//===----------------------------------------------------------------------===//
// Layers
//===----------------------------------------------------------------------===//

using Layers = std::vector<int64_t>;

// A transformer: an embedding segment, blocks of an attention and an MLP
// segment, a head. Each block is one layer, not two.
TEST(SegmentLayers, ABlockOfTwoSegmentsIsOneLayer) {
  EXPECT_EQ(plan::segmentLayers({0, 1, 2, 1, 2, 1, 2, 3}),
            (Layers{-1, 0, 0, 1, 1, 2, 2, -1}));
}

TEST(SegmentLayers, ABlockOfOneSegment) {
  EXPECT_EQ(plan::segmentLayers({0, 1, 1, 1, 2}), (Layers{-1, 0, 1, 2, -1}));
}

// A block whose segments repeat inside it (A B B) is still one layer.
TEST(SegmentLayers, TheBlockIsTheRepeatThatCoversMost) {
  EXPECT_EQ(plan::segmentLayers({1, 2, 2, 1, 2, 2, 1, 2, 2}),
            (Layers{0, 0, 0, 1, 1, 1, 2, 2, 2}));
}

// A last block that stops early (its MLP merged into the head) still counts,
// and so does a first block that differs in its first segment.
TEST(SegmentLayers, APartialBlockAtAnEndIsALayer) {
  EXPECT_EQ(plan::segmentLayers({1, 2, 1, 2, 1, 3}),
            (Layers{0, 0, 1, 1, 2, -1}));
  EXPECT_EQ(plan::segmentLayers({0, 4, 2, 1, 2, 1, 2, 3}),
            (Layers{-1, -1, 0, 0, 1, 1, 2, -1}));
  // Where blocks could start at either segment, the earliest repeat wins.
  EXPECT_EQ(plan::segmentLayers({2, 1, 2, 1, 2}), (Layers{0, 0, 1, 1, 2}));
}

// An encoder's and a decoder's stacks: both are layers, numbered in program
// order.
TEST(SegmentLayers, SeveralStacks) {
  EXPECT_EQ(plan::segmentLayers({0, 1, 1, 1, 2, 3, 4, 3, 4, 5}),
            (Layers{-1, 0, 1, 2, -1, 3, 3, 4, 4, -1}));
}

// Chains of thousands of segments (a model without residuals cuts after
// every op) are grouped in about n^2 / 2 comparisons, not n^3.
TEST(SegmentLayers, LongChains) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 3000; ++i)
    ids.insert(ids.end(), {i, i});
  std::vector<int64_t> layers = plan::segmentLayers(ids);
  ASSERT_EQ(layers.size(), ids.size());
  for (auto [k, layer] : llvm::enumerate(layers))
    EXPECT_EQ(layer, int64_t(k));
}

TEST(SegmentLayers, NoRepeatNoLayers) {
  EXPECT_EQ(plan::segmentLayers({0, 1, 2}), (Layers{-1, -1, -1}));
  EXPECT_EQ(plan::segmentLayers({}), Layers{});
}

std::string values(int64_t n) {
  std::string s;
  for (int64_t i = 0; i < n; ++i)
    s += i ? ", 0.5" : "0.5";
  return s;
}

// An embedding-like projection, then `blocks` residual blocks of two halves
// (the planner cuts a segment after each residual Add, as after a
// transformer's attention and its MLP), width 16; the input rows are
// `rows` (a batch of 8, or "2, 8" for a batch of 2 sequences of 8).
std::string blocksText(int blocks, const std::string &rows = "8") {
  std::string weights = "float[16, 16] E = {" + values(256) + "}";
  std::string body = "  H0 = MatMul(X, E)\n";
  for (int b = 0; b < blocks; ++b) {
    std::string i = std::to_string(b), next = std::to_string(b + 1);
    for (const char *w : {"A", "B", "C"})
      weights +=
          ", float[16, 16] " + std::string(w) + i + " = {" + values(256) + "}";
    body += "  PA" + i + " = MatMul(H" + i + ", A" + i + ")\n";
    body += "  RA" + i + " = Relu(PA" + i + ")\n";
    body += "  M" + i + " = Add(H" + i + ", RA" + i + ")\n";
    body += "  PB" + i + " = MatMul(M" + i + ", B" + i + ")\n";
    body += "  TB" + i + " = Tanh(PB" + i + ")\n";
    body += "  PC" + i + " = MatMul(TB" + i + ", C" + i + ")\n";
    body += "  H" + next + " = Add(M" + i + ", PC" + i + ")\n";
  }
  body += "  Y = Identity(H" + std::to_string(blocks) + ")\n";
  return "<ir_version: 8, opset_import: [\"\" : 17]>\n"
         "g (float[" +
         rows + ", 16] X) => (float[" + rows + ", 16] Y)\n  <" + weights +
         "> {\n" + body + "}\n";
}

class PlanExplainTest : public ::testing::Test {
protected:
  PlanExplainTest() {
    mlir::DialectRegistry registry;
    registerShardingModels(registry);
    mlir::registerAllDialects(registry);
    context.appendDialectRegistry(registry);
  }

  void import(const std::string &text) {
    module = importOnnxBuffer(&context, text, "model.onnxtxt",
                              /*isText=*/true, ImportOptions());
    ASSERT_TRUE(module);
  }

  mlir::func::FuncOp main() {
    return module->lookupSymbol<mlir::func::FuncOp>("main");
  }

  PlanRequest request(PlanFlags flags) {
    auto built = buildPlanRequest(flags);
    EXPECT_TRUE(bool(built)) << llvm::toString(built.takeError());
    built->modelName = "model.onnxtxt";
    return *built;
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

// Three blocks of two segments each: the report and the table count three
// layers, 0-2, not six.
TEST_F(PlanExplainTest, StagesCountModelLayers) {
  ASSERT_NO_FATAL_FAILURE(import(blocksText(3)));
  auto result = planProgram(main(), request(PlanFlags()));
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  ASSERT_EQ(result->best.stages.size(), 1u);
  EXPECT_EQ(result->best.stages[0].layers, "0-2");
  EXPECT_EQ(result->segments, 7); // the projection, then 2 per block
  std::string table;
  llvm::raw_string_ostream os(table);
  printPlanTable(os, *result, request(PlanFlags()));
  EXPECT_NE(table.find("segments 0-6 (layers 0-2)"), std::string::npos)
      << table;
  llvm::json::Value report = planReportJson(*result, request(PlanFlags()));
  const llvm::json::Array *stages = report.getAsObject()->getArray("stages");
  ASSERT_TRUE(stages);
  EXPECT_EQ((*stages)[0].getAsObject()->getString("layers"), "0-2");
}

// Sequence parallelism: the residual stream (every activation handed from
// block to block, [2, 8, 16]) is split along the sequence over tp when
// pinned on, kept whole when off; rows of a batch alone ([8, 16]) have no
// sequence to split, which is an error naming what is missing.
TEST_F(PlanExplainTest, SequenceParallelSplitsTheResidualStream) {
  ASSERT_NO_FATAL_FAILURE(import(blocksText(3, "2, 8")));
  auto graph = plan::buildProgramGraph(main());
  ASSERT_TRUE(succeeded(graph));
  std::vector<bool> residual = plan::residualStreamBoundaries(*graph);
  ASSERT_EQ(residual.size(), 7u);
  EXPECT_FALSE(residual[0]); // nothing enters the first segment
  for (size_t k = 1; k < residual.size(); ++k)
    EXPECT_TRUE(residual[k]) << "boundary " << k;

  PlanFlags flags;
  flags.cluster = "local:2";
  flags.mode = "train";
  flags.tp = 2;
  for (const char *value : {"on", "off"}) {
    flags.sequenceParallel = value;
    auto result = planProgram(main(), request(flags));
    ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
    EXPECT_EQ(result->best.sequenceParallel, std::string(value) == "on")
        << value;
    llvm::json::Value report = planReportJson(*result, request(flags));
    EXPECT_EQ(report.getAsObject()->getBoolean("sequence_parallel"),
              std::optional<bool>(std::string(value) == "on"));
  }

  ASSERT_NO_FATAL_FAILURE(import(blocksText(3)));
  auto rows = plan::buildProgramGraph(main());
  ASSERT_TRUE(succeeded(rows));
  EXPECT_TRUE(llvm::none_of(plan::residualStreamBoundaries(*rows),
                            [](bool b) { return b; }));
  flags.sequenceParallel = "on";
  auto refused = planProgram(main(), request(flags));
  ASSERT_FALSE(bool(refused));
  std::string message = llvm::toString(refused.takeError());
  EXPECT_NE(message.find("no activation of tokens by features"),
            std::string::npos)
      << message;
}

// Two stages of a 4-layer model hold 4 layers between them, each counted
// once (a stage cut inside a layer counts it in both).
TEST_F(PlanExplainTest, PipelineStagesSplitTheLayers) {
  ASSERT_NO_FATAL_FAILURE(import(blocksText(4)));
  PlanFlags flags;
  flags.cluster = "local:2";
  flags.pp = 2;
  auto result = planProgram(main(), request(flags));
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  ASSERT_EQ(result->best.stages.size(), 2u);
  auto [first0, last0] =
      llvm::StringRef(result->best.stages[0].layers).split('-');
  auto [first1, last1] =
      llvm::StringRef(result->best.stages[1].layers).split('-');
  EXPECT_EQ(first0, "0");
  EXPECT_EQ(last1, "3");
  int64_t end0 = -1, start1 = -1;
  ASSERT_FALSE(last0.getAsInteger(10, end0));
  ASSERT_FALSE(first1.getAsInteger(10, start1));
  EXPECT_TRUE(start1 == end0 || start1 == end0 + 1)
      << result->best.stages[0].layers << " / "
      << result->best.stages[1].layers;
}

//===----------------------------------------------------------------------===//
// Plans that do not fit
//===----------------------------------------------------------------------===//

// Two linear layers of width 256, trained on 4 CPU ranks: with dp=4 and
// ZeRO-0 every rank holds all parameters, gradients and optimizer states.
std::string mlpText() {
  return "<ir_version: 8, opset_import: [\"\" : 17]>\n"
         "g (float[32, 256] X) => (float[32, 256] Y)\n"
         "  <float[256, 256] W1 = {" +
         values(256 * 256) + "}, float[256] B1 = {" + values(256) +
         "}, float[256, 256] W2 = {" + values(256 * 256) +
         "}, float[256] B2 = {" + values(256) +
         "}> {\n"
         "  H = Gemm<transB = 1>(X, W1, B1)\n"
         "  R = Relu(H)\n"
         "  Y = Gemm<transB = 1>(R, W2, B2)\n"
         "}\n";
}

class InfeasiblePlanTest : public PlanExplainTest {
protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(import(mlpText())); }

  PlanFlags pinnedFlags() {
    PlanFlags flags;
    flags.cluster = "local:4";
    flags.mode = "train";
    flags.dp = 4;
    flags.zero = 0;
    return flags;
  }

  /// Memory per rank of the best plan under `flags`, with memory to spare.
  double memoryOf(PlanFlags flags) {
    auto result = planProgram(main(), request(flags));
    EXPECT_TRUE(bool(result)) << llvm::toString(result.takeError());
    return result ? result->best.memory.total() : 0;
  }

  /// Plans `flags` on ranks of `bytes` of memory; the error it must fail
  /// with.
  PlanResult infeasible(PlanFlags flags, double bytes,
                        std::string *message = nullptr) {
    PlanRequest r = request(flags);
    r.cluster.device.memoryGiB = bytes / (1024.0 * 1024 * 1024);
    auto result = planProgram(main(), r);
    EXPECT_FALSE(bool(result));
    PlanResult carried;
    if (result)
      return carried;
    llvm::handleAllErrors(
        result.takeError(),
        [&](const InfeasiblePlanError &e) {
          carried = e.result();
          if (message)
            *message = e.message();
        },
        [&](const llvm::ErrorInfoBase &e) {
          ADD_FAILURE() << "not an InfeasiblePlanError: " << e.message();
        });
    return carried;
  }
};

// The pinned plan of least memory is reported with how much it lacks; each
// pin alone can be changed to fit (ZeRO shards the states over dp, or the
// ranks split the model instead of the batch), and the nearest plan is the
// fastest of those.
TEST_F(InfeasiblePlanTest, SaysBytesOverPinsToChangeAndTheNearestPlan) {
  double pinned = memoryOf(pinnedFlags());
  PlanFlags zero3 = pinnedFlags();
  zero3.zero = 3;
  double sharded = memoryOf(zero3);
  ASSERT_LT(sharded, 0.7 * pinned);
  double device = (pinned + sharded) / 2;

  std::string message;
  PlanResult result = infeasible(pinnedFlags(), device, &message);
  ASSERT_TRUE(result.infeasible);
  const PlanInfeasibility &inf = *result.infeasible;
  EXPECT_FALSE(result.best.fits);
  EXPECT_EQ(result.best.dp, 4);
  EXPECT_EQ(result.best.zeroStage, 0);
  EXPECT_NEAR(inf.deviceMemoryBytes, device, 1);
  EXPECT_NEAR(inf.bytesOver, result.best.memory.total() - device, 1);
  EXPECT_GT(inf.bytesOver, 0);
  ASSERT_EQ(inf.pins.size(), 2u);
  EXPECT_EQ(inf.pins[0], std::make_pair(std::string("dp"), std::string("4")));
  EXPECT_EQ(inf.pins[1], std::make_pair(std::string("zero"), std::string("0")));
  ASSERT_FALSE(inf.releases.empty());
  for (const PlanInfeasibility::Release &r : inf.releases) {
    EXPECT_EQ(r.pins.size(), 1u);
    EXPECT_TRUE(r.plan.fits);
    EXPECT_LE(r.plan.memory.total(), device);
    EXPECT_GE(r.plan.stepSeconds, inf.releases.front().plan.stepSeconds);
  }
  // Releasing ZeRO keeps dp=4 and shards the states.
  auto zero = llvm::find_if(inf.releases, [](const auto &r) {
    return r.pins == std::vector<std::string>{"zero"};
  });
  ASSERT_NE(zero, inf.releases.end());
  EXPECT_EQ(zero->plan.dp, 4);
  EXPECT_GT(zero->plan.zeroStage, 0);

  EXPECT_EQ(message, inf.message);
  for (const char *part :
       {"the model fits on no plan with the pins --dp=4 --zero=0:",
        "dp=4 tp=1 pp=1 zero=0", "bytes) over (parameters", "; change --",
        "the nearest plan that fits, with it released, is", "per step in"})
    EXPECT_NE(message.find(part), std::string::npos) << part << "\n" << message;

  // The report: fits false, the memory, the bytes over, the pins, what to
  // change and the nearest plan that fits.
  llvm::json::Value value = planReportJson(result, request(pinnedFlags()));
  const llvm::json::Object &report = *value.getAsObject();
  EXPECT_EQ(report.getObject("predicted")->getBoolean("fits"), false);
  EXPECT_TRUE(
      report.getObject("predicted")->getObject("memory_breakdown_bytes"));
  const llvm::json::Object *json = report.getObject("infeasible");
  ASSERT_TRUE(json);
  EXPECT_EQ(json->getString("message"), message);
  EXPECT_NEAR(*json->getNumber("bytes_over"), inf.bytesOver, 1);
  EXPECT_NEAR(*json->getNumber("device_memory_bytes"), device, 1);
  EXPECT_EQ(json->getObject("pins")->getInteger("dp"), 4);
  EXPECT_EQ(json->getObject("pins")->getInteger("zero"), 0);
  ASSERT_TRUE(json->getArray("pins_to_change"));
  EXPECT_EQ(json->getArray("pins_to_change")->size(), 1u);
  const llvm::json::Object *nearest = json->getObject("nearest_fitting_plan");
  ASSERT_TRUE(nearest);
  EXPECT_EQ(nearest->getObject("predicted")->getBoolean("fits"), true);
  EXPECT_EQ(nearest->getObject("mesh")->getInteger("dp"),
            inf.releases.front().plan.dp);
  EXPECT_EQ(json->getArray("fitting_plans")->size(), inf.releases.size());
}

// dp, tp and pp pinned together: no one of them can change alone (the
// others fix it), so the pins to change come in pairs.
TEST_F(InfeasiblePlanTest, PinsThatFixEachOtherAreChangedTogether) {
  PlanFlags flags = pinnedFlags();
  flags.tp = 1;
  flags.pp = 1;
  flags.zero = 0;
  PlanFlags zero3 = pinnedFlags();
  zero3.zero = 3;
  double device = (memoryOf(pinnedFlags()) + memoryOf(zero3)) / 2;
  PlanResult result = infeasible(flags, device);
  ASSERT_TRUE(result.infeasible);
  ASSERT_FALSE(result.infeasible->releases.empty());
  for (const PlanInfeasibility::Release &r : result.infeasible->releases) {
    if (r.pins.size() == 1) {
      // Only ZeRO can change alone.
      EXPECT_EQ(r.pins.front(), "zero");
      continue;
    }
    EXPECT_EQ(r.pins.size(), 2u);
  }
}

// Nothing fits, pinned or not: the message says so; no plan is offered.
TEST_F(InfeasiblePlanTest, NothingFitsEvenWithoutThePins) {
  std::string message;
  PlanResult result = infeasible(pinnedFlags(), 1000, &message);
  ASSERT_TRUE(result.infeasible);
  EXPECT_TRUE(result.infeasible->releases.empty());
  EXPECT_NE(message.find("no plan fits even without the pins"),
            std::string::npos)
      << message;
  llvm::json::Value value = planReportJson(result, request(pinnedFlags()));
  const llvm::json::Object *json = value.getAsObject()->getObject("infeasible");
  ASSERT_TRUE(json);
  EXPECT_EQ(*json->get("nearest_fitting_plan"), llvm::json::Value(nullptr));
}

// Without pins the message is the one of a model that fits nowhere.
TEST_F(InfeasiblePlanTest, WithoutPinsTheSmallestPlanIsReported) {
  PlanFlags flags;
  flags.cluster = "local:4";
  flags.mode = "train";
  std::string message;
  PlanResult result = infeasible(flags, 1000, &message);
  ASSERT_TRUE(result.infeasible);
  EXPECT_TRUE(result.infeasible->pins.empty());
  EXPECT_EQ(message.rfind("the model fits on no plan for this cluster: the "
                          "smallest plan (",
                          0),
            0u)
      << message;
}

//===----------------------------------------------------------------------===//
// --explain-plan
//===----------------------------------------------------------------------===//

// Each dimension against the best plan with another value of it: never
// faster than the chosen plan, and the part of the step that decides named.
TEST_F(InfeasiblePlanTest, EachDimensionAgainstItsRunnerUp) {
  PlanFlags flags;
  flags.cluster = "local:4";
  flags.mode = "train";
  PlanRequest r = request(flags);
  r.compareDimensions = true;
  auto result = planProgram(main(), r);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  ASSERT_EQ(result->dimensions.size(), 7u);
  const char *names[] = {"dp",
                         "tp",
                         "pp",
                         "zero",
                         "micro-batch",
                         "recompute",
                         "sequence-parallel"};
  for (auto [d, cmp] : llvm::enumerate(result->dimensions)) {
    EXPECT_EQ(cmp.dimension, names[d]);
    EXPECT_FALSE(cmp.pinned);
    EXPECT_FALSE(cmp.why.empty());
    if (!cmp.runnerUp)
      continue;
    EXPECT_NE(cmp.runnerUpValue, cmp.chosen);
    EXPECT_LE(cmp.stepTimeChange, 1e-3) << cmp.why;
    EXPECT_TRUE(
        llvm::is_contained({"compute", "exposed communication",
                            "pipeline bubble", "optimizer", "memory", "tie"},
                           cmp.dominantTerm))
        << cmp.dominantTerm;
    if (cmp.dominantTerm != "tie" && cmp.dominantTerm != "memory") {
      EXPECT_NE(cmp.why.find("% step time"), std::string::npos) << cmp.why;
    }
  }
  // The recompute runner-up recomputes, which costs compute.
  const DimensionComparison &recompute = result->dimensions[5];
  ASSERT_TRUE(recompute.runnerUp);
  EXPECT_EQ(recompute.chosen, "none");
  EXPECT_EQ(recompute.dominantTerm, "compute");

  std::string text;
  llvm::raw_string_ostream os(text);
  printPlanDimensions(os, *result);
  EXPECT_NE(text.find("  recompute=none"), std::string::npos) << text;
  EXPECT_NE(text.find("over recompute="), std::string::npos) << text;
  // This MLP has no residual stream: sequence parallelism has one value.
  const DimensionComparison &sequence = result->dimensions[6];
  EXPECT_EQ(sequence.chosen, "off");
  EXPECT_FALSE(sequence.runnerUp);
  EXPECT_NE(sequence.why.find("the only value possible: "), std::string::npos)
      << sequence.why;
}

// A pinned dimension is compared with the best plan without its pin.
TEST_F(InfeasiblePlanTest, APinnedDimensionAgainstTheBestWithoutThePin) {
  PlanFlags flags;
  flags.cluster = "local:4";
  flags.mode = "train";
  flags.tp = 4;
  PlanRequest r = request(flags);
  r.compareDimensions = true;
  auto result = planProgram(main(), r);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  const DimensionComparison &tp = result->dimensions[1];
  EXPECT_TRUE(tp.pinned);
  EXPECT_EQ(tp.chosen, "4");
  ASSERT_TRUE(tp.runnerUp);
  EXPECT_NE(tp.runnerUp->tp, 4);
  EXPECT_EQ(tp.why.rfind("pinned; against the best plan without the pin, "
                         "tp=",
                         0),
            0u)
      << tp.why;
  // Inference has no ZeRO stage or recomputation to choose.
  PlanFlags infer;
  infer.cluster = "local:4";
  PlanRequest ri = request(infer);
  ri.compareDimensions = true;
  auto inferred = planProgram(main(), ri);
  ASSERT_TRUE(bool(inferred)) << llvm::toString(inferred.takeError());
  EXPECT_FALSE(inferred->dimensions[3].runnerUp);
  EXPECT_NE(inferred->dimensions[3].why.find("the only value possible"),
            std::string::npos);
}

} // namespace
