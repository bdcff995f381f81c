//===- PlannerTest.cpp - The plan search on small imported programs -------===//
//
// The planner on an MLP imported from ONNX's textual syntax: pins are obeyed
// or refused with the pin named, training adds gradients and optimizer state
// that ZeRO shards, and the search's choice is never predicted slower than a
// runner-up it reports.
//
//===----------------------------------------------------------------------===//

#include "autopar/Planner/Planner.h"
#include "autopar/Import/OnnxImporter.h"
#include "autopar/Transforms/ShardingModels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"

#include "gtest/gtest.h"

using namespace autopar;

namespace {

// Two linear layers of width 256 on a batch of 32: large enough that
// splitting it pays on 4 ranks. The weights' values do not matter to the
// planner; the textual syntax needs them written out.
std::string mlpText() {
  auto values = [](int64_t n) {
    std::string s;
    for (int64_t i = 0; i < n; ++i)
      s += i ? ", 0.5" : "0.5";
    return s;
  };
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

class PlannerTest : public ::testing::Test {
protected:
  PlannerTest() {
    mlir::DialectRegistry registry;
    registerShardingModels(registry);
    mlir::registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    module = importOnnxBuffer(&context, mlpText(), "mlp.onnxtxt",
                              /*isText=*/true, ImportOptions());
  }

  mlir::func::FuncOp main() {
    return module->lookupSymbol<mlir::func::FuncOp>("main");
  }

  llvm::Expected<PlanResult> plan(PlanFlags flags) {
    auto request = buildPlanRequest(flags);
    if (!request)
      return request.takeError();
    return planProgram(main(), *request);
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

TEST_F(PlannerTest, OneRankIsTheTrivialPlan) {
  ASSERT_TRUE(module);
  PlanFlags flags;
  auto result = plan(flags);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  EXPECT_EQ(result->best.dp * result->best.tp * result->best.pp, 1);
  EXPECT_TRUE(result->best.fits);
  EXPECT_EQ(result->globalBatch, 32);
  EXPECT_DOUBLE_EQ(result->parameters, 2 * 256 * 256 + 2 * 256);
  EXPECT_DOUBLE_EQ(result->best.memory.gradients, 0);
  EXPECT_DOUBLE_EQ(result->best.memory.optimizerStates, 0);
}

TEST_F(PlannerTest, PinsAreObeyed) {
  PlanFlags flags;
  flags.cluster = "local:4";
  flags.dp = 2;
  flags.tp = 2;
  auto result = plan(flags);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  EXPECT_EQ(result->best.dp, 2);
  EXPECT_EQ(result->best.tp, 2);
  EXPECT_EQ(result->best.pp, 1);
  for (const PlanCandidate &other : result->alternatives) {
    EXPECT_EQ(other.dp, 2);
    EXPECT_EQ(other.tp, 2);
  }
}

TEST_F(PlannerTest, ImpossiblePinsAreRefusedWithThePinNamed) {
  PlanFlags flags;
  flags.cluster = "local:4";
  flags.dp = 3; // 3 does not divide 4 ranks
  auto result = plan(flags);
  ASSERT_FALSE(bool(result));
  std::string message = llvm::toString(result.takeError());
  EXPECT_NE(message.find("dp"), std::string::npos) << message;
}

TEST_F(PlannerTest, TrainingHoldsGradientsAndOptimizerStateThatZeroShards) {
  PlanFlags flags;
  flags.cluster = "local:4";
  flags.mode = "train";
  flags.dp = 4;
  flags.zero = 0;
  auto zero0 = plan(flags);
  ASSERT_TRUE(bool(zero0)) << llvm::toString(zero0.takeError());
  EXPECT_GT(zero0->best.memory.gradients, 0);
  EXPECT_GT(zero0->best.memory.optimizerStates, 0);
  flags.zero = 1;
  auto zero1 = plan(flags);
  ASSERT_TRUE(bool(zero1)) << llvm::toString(zero1.takeError());
  // ZeRO-1 splits the optimizer state over the 4 data-parallel ranks.
  EXPECT_NEAR(zero1->best.memory.optimizerStates,
              zero0->best.memory.optimizerStates / 4,
              zero0->best.memory.optimizerStates * 1e-6);
  EXPECT_DOUBLE_EQ(zero1->best.memory.parameters,
                   zero0->best.memory.parameters);
}

TEST_F(PlannerTest, TheChoiceIsNeverSlowerThanARunnerUp) {
  PlanFlags flags;
  flags.cluster = "local:4";
  flags.mode = "train";
  auto result = plan(flags);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  ASSERT_TRUE(result->best.fits);
  EXPECT_GT(result->candidatesEvaluated, 1);
  for (const PlanCandidate &other : result->alternatives) {
    EXPECT_GE(other.stepSeconds, result->best.stepSeconds);
    EXPECT_FALSE(other.whyNot.empty());
  }
}

} // namespace
