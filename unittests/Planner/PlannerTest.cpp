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
#include "autopar/Planner/CostModel.h"
#include "autopar/Transforms/ShardingModels.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"

#include "gtest/gtest.h"

using namespace autopar;

namespace {

// `n` copies of `value`, comma-separated: an initializer's values in the
// textual syntax (the planner does not read them, the syntax needs them).
std::string values(int64_t n, const char *value = "0.5") {
  std::string s;
  for (int64_t i = 0; i < n; ++i)
    s += std::string(i ? ", " : "") + value;
  return s;
}

// Two linear layers of width 256 on a batch of 32: large enough that
// splitting it pays on 4 ranks.
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

// A tp group planned again (a replica's or a stage's program) follows the
// cluster plan's choices: its own pins give the same plan back, a pin that
// asks for another option is obeyed, and a pin whose op is not there (another
// lowering) is ignored.
TEST_F(PlannerTest, PinnedOpShardingsAreFollowed) {
  PlanFlags flags;
  flags.cluster = "local:4";
  flags.dp = 1;
  flags.tp = 4;
  auto request = buildPlanRequest(flags);
  ASSERT_TRUE(bool(request)) << llvm::toString(request.takeError());
  auto free = planProgram(main(), *request);
  ASSERT_TRUE(bool(free)) << llvm::toString(free.takeError());
  std::vector<PinnedOpSharding> pins = pinnedOpShardingsOf(*free);
  ASSERT_FALSE(pins.empty());
  auto split = llvm::find_if(
      free->decisions, [](const OpDecision &d) { return d.splitLoop >= 0; });
  ASSERT_NE(split, free->decisions.end()) << "the plan splits nothing";
  EXPECT_NE(split->signature.find("linalg."), std::string::npos)
      << split->signature;

  request->pinnedOpShardings = pins;
  auto same = planProgram(main(), *request);
  ASSERT_TRUE(bool(same)) << llvm::toString(same.takeError());
  ASSERT_EQ(same->decisions.size(), free->decisions.size());
  for (auto [a, b] : llvm::zip_equal(same->decisions, free->decisions)) {
    EXPECT_EQ(a.splitLoop, b.splitLoop) << a.name;
    EXPECT_EQ(a.resultSharding, b.resultSharding) << a.name;
  }

  // The split op held whole (every op has that option).
  size_t index = split - free->decisions.begin();
  auto whole = llvm::find_if(request->pinnedOpShardings, [&](auto &pin) {
    return pin.node == split->name && pin.signature == split->signature;
  });
  ASSERT_NE(whole, request->pinnedOpShardings.end());
  whole->resultSharding = -1;
  llvm::for_each(whole->operandShardings, [](int &s) { s = -1; });
  auto held = planProgram(main(), *request);
  ASSERT_TRUE(bool(held)) << llvm::toString(held.takeError());
  EXPECT_EQ(held->decisions[index].splitLoop, -1);
  EXPECT_EQ(held->decisions[index].resultSharding, -1);

  // Another lowering's op: its pin is not applied.
  whole->signature = "linalg.matmul(?x7,?x7,_)->?x7";
  auto other = planProgram(main(), *request);
  ASSERT_TRUE(bool(other)) << llvm::toString(other.takeError());
  EXPECT_EQ(other->decisions[index].splitLoop, split->splitLoop);
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

// --tp-comm-overlap prices tensor-parallel collectives as hidden behind
// their GEMMs chunk by chunk: less exposed communication for a tp plan, never
// less than one chunk's worth, and the same compute; a plan without tp is
// unchanged.
TEST_F(PlannerTest, TensorParallelCommOverlapHidesCollectivesBehindGemms) {
  auto price = [&](int64_t tp, bool overlap) {
    PlanFlags flags;
    flags.cluster = "local:4";
    flags.mode = "train";
    flags.tp = tp;
    flags.dp = 4 / tp;
    flags.zero = 0;
    flags.microBatchSize = 32 / flags.dp;
    auto request = buildPlanRequest(flags);
    EXPECT_TRUE(bool(request)) << llvm::toString(request.takeError());
    request->overlapTensorParallelComm = overlap;
    auto result = planProgram(main(), *request);
    EXPECT_TRUE(bool(result)) << llvm::toString(result.takeError());
    return result->best;
  };
  PlanCandidate exposed = price(4, false), overlapped = price(4, true);
  ASSERT_EQ(exposed.tp, 4);
  ASSERT_GT(exposed.time.exposedCommunication, 0);
  EXPECT_DOUBLE_EQ(overlapped.time.compute, exposed.time.compute);
  EXPECT_LT(overlapped.time.exposedCommunication,
            exposed.time.exposedCommunication);
  EXPECT_GE(overlapped.time.exposedCommunication,
            exposed.time.exposedCommunication / 4 * (1 - 1e-12));
  PlanCandidate dpOnly = price(1, false), dpOnlyOverlap = price(1, true);
  EXPECT_DOUBLE_EQ(dpOnlyOverlap.stepSeconds, dpOnly.stepSeconds);
}

// Frozen parameters (--freeze) are held but have no gradient or optimizer
// state; SGD with momentum keeps one state per trained parameter.
TEST_F(PlannerTest, FrozenParametersAndTheOptimizerSetTheTrainingState) {
  PlanFlags flags;
  flags.cluster = "local:1";
  flags.mode = "train";
  auto request = buildPlanRequest(flags);
  ASSERT_TRUE(bool(request)) << llvm::toString(request.takeError());
  auto all = planProgram(main(), *request);
  ASSERT_TRUE(bool(all)) << llvm::toString(all.takeError());
  request->frozenParameters = {"W1", "B1"};
  auto frozen = planProgram(main(), *request);
  ASSERT_TRUE(bool(frozen)) << llvm::toString(frozen.takeError());
  // fp32: 4 bytes per element held, 4 per gradient, 8 of AdamW's states.
  double first = 256 * 256 + 256, second = 256 * 256 + 256;
  EXPECT_DOUBLE_EQ(all->best.memory.parameters, 4 * (first + second));
  EXPECT_DOUBLE_EQ(frozen->best.memory.parameters, 4 * (first + second));
  EXPECT_DOUBLE_EQ(all->best.memory.gradients, 4 * (first + second));
  EXPECT_DOUBLE_EQ(frozen->best.memory.gradients, 4 * second);
  EXPECT_DOUBLE_EQ(frozen->best.memory.optimizerStates, 8 * second);
  request->optimizerStatesPerParameter = 1;
  auto sgd = planProgram(main(), *request);
  ASSERT_TRUE(bool(sgd)) << llvm::toString(sgd.takeError());
  EXPECT_DOUBLE_EQ(sgd->best.memory.optimizerStates, 4 * second);
  // A glob that does not parse is an error, not an empty match.
  request->frozenParameters = {"W["};
  auto bad = planProgram(main(), *request);
  EXPECT_FALSE(bool(bad));
  if (!bad)
    llvm::consumeError(bad.takeError());
}

// Two heads on one input: a training plan trains only the parameters the
// loss's output depends on, as autopar-differentiate differentiates only
// those.
TEST(PlannerLossTest, ParametersTheLossDoesNotReadAreNotTrained) {
  mlir::DialectRegistry registry;
  registerShardingModels(registry);
  mlir::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  std::string values;
  for (int i = 0; i < 64 * 64; ++i)
    values += i ? ", 0.5" : "0.5";
  std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                     "g (float[8, 64] X) => (float[8, 64] Y, float[8, 64] Z)\n"
                     "  <float[64, 64] W1 = {" +
                     values + "}, float[64, 64] W2 = {" + values +
                     "}> {\n"
                     "  Y = MatMul(X, W1)\n"
                     "  Z = MatMul(X, W2)\n"
                     "}\n";
  auto module = importOnnxBuffer(&context, text, "heads.onnxtxt",
                                 /*isText=*/true, ImportOptions());
  ASSERT_TRUE(module);
  auto main = module->lookupSymbol<mlir::func::FuncOp>("main");
  PlanFlags flags;
  flags.mode = "train";
  auto request = buildPlanRequest(flags);
  ASSERT_TRUE(bool(request)) << llvm::toString(request.takeError());
  const double weight = 4.0 * 64 * 64; // fp32 bytes
  // No scalar output and no name: every parameter is trained.
  auto all = planProgram(main, *request);
  ASSERT_TRUE(bool(all)) << llvm::toString(all.takeError());
  EXPECT_DOUBLE_EQ(all->best.memory.gradients, 2 * weight);
  request->lossOutput = "Y";
  auto first = planProgram(main, *request);
  ASSERT_TRUE(bool(first)) << llvm::toString(first.takeError());
  EXPECT_DOUBLE_EQ(first->best.memory.parameters, 2 * weight);
  EXPECT_DOUBLE_EQ(first->best.memory.gradients, weight);
  EXPECT_DOUBLE_EQ(first->best.memory.optimizerStates, 2 * weight);
  // A name that is no output: the compiler reports it; nothing changes.
  request->lossOutput = "nothing";
  auto unknown = planProgram(main, *request);
  ASSERT_TRUE(bool(unknown)) << llvm::toString(unknown.takeError());
  EXPECT_DOUBLE_EQ(unknown->best.memory.gradients, 2 * weight);
}

// A pipeline's stage holds the activations of the micro-batches between
// their forwards and backwards: all M under GPipe, P - k on stage k under
// 1F1B (the schedule the runtime walks, pinned or not).
TEST_F(PlannerTest, PipelineActivationsFollowThePinnedSchedule) {
  PlanFlags flags;
  flags.cluster = "local:2";
  flags.mode = "train";
  flags.pp = 2;
  flags.dp = 1;
  flags.microBatchSize = 8; // 4 micro-batches of the batch of 32
  flags.recompute = "none"; // the same saved activations under both
  auto oneF = plan(flags);
  ASSERT_TRUE(bool(oneF)) << llvm::toString(oneF.takeError());
  flags.schedule = "gpipe";
  auto gpipe = plan(flags);
  ASSERT_TRUE(bool(gpipe)) << llvm::toString(gpipe.takeError());
  ASSERT_EQ(oneF->best.numMicroBatches, 4);
  ASSERT_EQ(oneF->best.stages.size(), 2u);
  ASSERT_EQ(gpipe->best.stages.size(), 2u);
  // The two may split the stages differently; one micro-batch's saved
  // activations, summed over the stages, are the model's either way.
  double oneFSaved = 0, gpipeSaved = 0;
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_GT(oneF->best.stages[k].memory.activations, 0) << "stage " << k;
    oneFSaved +=
        oneF->best.stages[k].memory.activations / double(2 - int64_t(k));
    gpipeSaved += gpipe->best.stages[k].memory.activations / 4;
  }
  EXPECT_DOUBLE_EQ(gpipeSaved, oneFSaved);
}

// The activations a step keeps are what the adjoints read (autodiff's
// residuals), each once: the ReLU's input H and the second GEMM's input R,
// 32 x 256 floats each; not the output Y, which nothing reads, nor the bias
// adds' inputs. The first GEMM's input X (for W1's gradient) is read too,
// but a step without pipeline stages reads it where the runtime holds the
// batch: not an activation.
TEST_F(PlannerTest, TheActivationsKeptAreWhatTheAdjointsRead) {
  PlanFlags flags;
  flags.cluster = "local:1";
  flags.mode = "train";
  flags.recompute = "selective";
  auto selective = plan(flags);
  ASSERT_TRUE(bool(selective)) << llvm::toString(selective.takeError());
  flags.recompute = "none";
  auto none = plan(flags);
  ASSERT_TRUE(bool(none)) << llvm::toString(none.takeError());
  double activation = 32.0 * 256 * 4;
  EXPECT_DOUBLE_EQ(none->best.memory.activations, 2 * activation);
  // Selective: the first GEMM's output, from which the ReLU's input and
  // output are made again. The two GEMM segments look alike but keep
  // different values: their costs are not shared.
  EXPECT_DOUBLE_EQ(selective->best.memory.activations, 1 * activation);
}

// Mixed precision stores elementwise kernels' outputs in bf16 but leaves a
// GEMM's result, and the loss head autocast runs in f32, in f32
// (autopar-mixed-precision): what the backward keeps is priced so.
TEST_F(PlannerTest, MixedPrecisionKeepsWhatItLeavesInF32AtFourBytes) {
  PlanFlags flags;
  flags.cluster = "local:1";
  flags.mode = "train";
  flags.recompute = "none";
  auto fp32 = plan(flags);
  ASSERT_TRUE(bool(fp32)) << llvm::toString(fp32.takeError());
  flags.precision = "bf16";
  auto bf16 = plan(flags);
  ASSERT_TRUE(bool(bf16)) << llvm::toString(bf16.takeError());
  // The MLP keeps the bias add's and the ReLU's outputs: elementwise.
  EXPECT_DOUBLE_EQ(bf16->best.memory.activations,
                   fp32->best.memory.activations / 2);

  // A GEMM whose result the loss squares and sums: the square's adjoint
  // reads the GEMM's f32 result.
  std::string values;
  for (int i = 0; i < 64 * 64; ++i)
    values += i ? ", 0.5" : "0.5";
  module = importOnnxBuffer(&context,
                            "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                            "g (float[8, 64] X) => (float L)\n"
                            "  <float[64, 64] W = {" +
                                values +
                                "}> {\n"
                                "  Y = MatMul(X, W)\n"
                                "  S = Mul(Y, Y)\n"
                                "  L = ReduceSum<keepdims = 0>(S)\n"
                                "}\n",
                            "square.onnxtxt", /*isText=*/true, ImportOptions());
  ASSERT_TRUE(module);
  flags.microBatchSize = 8; // the whole batch, in both precisions
  flags.precision = "fp32";
  auto squareFp32 = plan(flags);
  ASSERT_TRUE(bool(squareFp32)) << llvm::toString(squareFp32.takeError());
  flags.precision = "bf16";
  auto squareBf16 = plan(flags);
  ASSERT_TRUE(bool(squareBf16)) << llvm::toString(squareBf16.takeError());
  EXPECT_GT(squareFp32->best.memory.activations, 0);
  EXPECT_DOUBLE_EQ(squareBf16->best.memory.activations,
                   squareFp32->best.memory.activations);
}

// A training step's BatchNorm returns its running statistics' new values:
// results no later op reads, which the stage that computes them returns. They
// must not keep every later boundary from being a segment's (a pipeline could
// then cut only before the first BatchNorm).
TEST_F(PlannerTest, StateUpdatesDoNotBlockLaterSegments) {
  std::string text =
      "<ir_version: 8, opset_import: [\"\" : 15]>\n"
      "g (float[32, 64] X) => (float L)\n"
      "  <float[64, 64] W1 = {" +
      values(64 * 64, "0.5") + "}, float[64] S = {" + values(64, "1.0") +
      "}, float[64] B = {" + values(64, "0.0") + "}, float[64] M = {" +
      values(64, "0.0") + "}, float[64] V = {" + values(64, "1.0") +
      "}, float[64, 64] W2 = {" + values(64 * 64, "0.5") +
      "}, float[64, 64] W3 = {" + values(64 * 64, "0.5") +
      "}> {\n"
      "  H = MatMul(X, W1)\n"
      "  N, RM, RV = BatchNormalization<training_mode = 1>(H, S, B, M, V)\n"
      "  R = Relu(N)\n"
      "  H2 = MatMul(R, W2)\n"
      "  R2 = Relu(H2)\n"
      "  H3 = MatMul(R2, W3)\n"
      "  L = ReduceMean<keepdims = 0>(H3)\n"
      "}\n";
  ImportOptions options;
  options.trainingStateUpdates = true;
  auto bn =
      importOnnxBuffer(&context, text, "bn.onnxtxt", /*isText=*/true, options);
  ASSERT_TRUE(bn);
  auto main = bn->lookupSymbol<mlir::func::FuncOp>("main");
  ASSERT_GT(main.getNumResults(), 1u) << "no state updates imported";
  PlanFlags flags;
  flags.cluster = "local:2";
  flags.mode = "train";
  flags.pp = 2;
  flags.dp = 1;
  auto request = buildPlanRequest(flags);
  ASSERT_TRUE(bool(request)) << llvm::toString(request.takeError());
  auto result = planProgram(main, *request);
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  // Cuts after the BatchNorm too (after its ReLU, the second MatMul and its
  // ReLU), not only before it.
  EXPECT_GE(result->segments, 4);
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

//===----------------------------------------------------------------------===//
// Fused attention (docs/design/attention.md)
//===----------------------------------------------------------------------===//

// softmax(Q K^T / 8 + M) V over [1, 8, 512, 64], the mask built as exporters
// build it: Where(Trilu(ones), 0, -1e9) with the lower triangle kept (the
// causal mask) or the upper (not causal). A parameter W (Q = X * W) makes
// it a trainable model.
std::string attentionText(bool causal, int64_t headDim = 64) {
  std::string t = "float[1, 8, 512, " + std::to_string(headDim) + "]";
  return "<ir_version: 8, opset_import: [\"\" : 17]>\n"
         "g (" +
         t + " X, " + t + " K, " + t + " V) => (" + t +
         " Y)\n"
         "  <float[1] W = {0.5}> {\n"
         "  shape = Constant <value = int64[2] {512, 512}> ()\n"
         "  ones = ConstantOfShape <value = float[1] {1}> (shape)\n"
         "  tri = Trilu <upper = " +
         (causal ? "0" : "1") +
         "> (ones)\n"
         "  keep = Cast <to = 9> (tri)\n"
         "  zero = Constant <value = float {0}> ()\n"
         "  neg = Constant <value = float {-1e9}> ()\n"
         "  M = Where (keep, zero, neg)\n"
         "  D = Constant <value = float {8}> ()\n"
         "  Q = Mul(X, W)\n"
         "  KT = Transpose<perm = [0, 1, 3, 2]>(K)\n"
         "  S = MatMul(Q, KT)\n"
         "  T = Div(S, D)\n"
         "  A = Add(T, M)\n"
         "  P = Softmax<axis = -1>(A)\n"
         "  Y = MatMul(P, V)\n"
         "}\n";
}

class FusedAttentionPlanTest : public ::testing::Test {
protected:
  FusedAttentionPlanTest() {
    mlir::DialectRegistry registry;
    registerShardingModels(registry);
    mlir::registerAllDialects(registry);
    context.appendDialectRegistry(registry);
  }

  PlanCandidate plan(bool causal, std::string cluster = "dgx-h100:1",
                     int64_t headDim = 64) {
    module = importOnnxBuffer(&context, attentionText(causal, headDim),
                              "attn.onnxtxt",
                              /*isText=*/true, ImportOptions());
    EXPECT_TRUE(module);
    PlanFlags flags;
    flags.cluster = cluster;
    flags.mode = "train";
    flags.precision = "bf16";
    flags.recompute = "none";
    auto request = buildPlanRequest(flags);
    EXPECT_TRUE(bool(request)) << llvm::toString(request.takeError());
    auto result =
        planProgram(module->lookupSymbol<mlir::func::FuncOp>("main"), *request);
    EXPECT_TRUE(bool(result)) << llvm::toString(result.takeError());
    return result->best;
  }

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

// The fused kernel keeps no S x S tensor for the backward: one is
// 8 * 512 * 512 bf16 = 4 MiB; the saved activations are the O(S) tensors
// (Q, the output), well under one.
TEST_F(FusedAttentionPlanTest, NoScoresAreSavedForTheBackward) {
  PlanCandidate best = plan(/*causal=*/true);
  double scores = 8.0 * 512 * 512 * 2;
  EXPECT_GT(best.memory.activations, 0);
  EXPECT_LT(best.memory.activations, scores);
}

// A causal mask lets the kernel skip the tiles above the diagonal: half the
// FLOPs of any other mask, so a compute-bound step takes less time.
TEST_F(FusedAttentionPlanTest, CausalMasksHalveTheKernel) {
  double causal = plan(/*causal=*/true).time.compute;
  double other = plan(/*causal=*/false).time.compute;
  EXPECT_LT(causal, 0.75 * other);
  EXPECT_GT(causal, 0.4 * other);
}

// On GPUs the planner fuses what the CUDA kernels take (head dims up to 128):
// a head dim of 160 keeps its S x S activations there (the softmax's input,
// its exponentials, the probabilities), not on CPU ranks. Fused, a head dim
// of 128 keeps five O(S) tensors (X for W's gradient, Q, K, V, the output)
// and the softmax's statistics: more than one S x S tensor, under two.
TEST_F(FusedAttentionPlanTest, GpuClustersFuseOnlyTheKernelsHeadDims) {
  double scores = 8.0 * 512 * 512 * 2;
  EXPECT_GT(plan(/*causal=*/true, "dgx-h100:1", 160).memory.activations,
            2 * scores);
  EXPECT_LT(plan(/*causal=*/true, "dgx-h100:1", 128).memory.activations,
            2 * scores);
  EXPECT_LT(plan(/*causal=*/true, "local:1", 160).memory.activations,
            2 * 8.0 * 512 * 512 * 4); // f32 on CPU ranks
}

// attentionEfficiency is FlashAttention's published curve on tensor cores,
// and the GEMM plateau on CPUs.
TEST(AttentionEfficiency, FollowsThePublishedKernels) {
  DeviceSpec h100;
  h100.name = "h100";
  h100.peakTflopsBf16 = 989.4;
  h100.peakTflopsFp32 = 66.9;
  h100.memoryGBytesPerS = 3350;
  h100.arch = "sm_90";
  EXPECT_NEAR(attentionEfficiency(h100, 1e9, Precision::BF16), 0.75, 1e-6);
  EXPECT_NEAR(attentionEfficiency(h100, 192, Precision::BF16), 0.375, 1e-9);
  EXPECT_LT(attentionEfficiency(h100, 512, Precision::BF16),
            attentionEfficiency(h100, 4096, Precision::BF16));
}

} // namespace

// The backward holds, beside what the forward kept, the gradient of the value
// it differentiates (the largest of a segment: here every value is 32 x 256
// floats) and what recomputation made again of the segment.
TEST_F(PlannerTest, TheBackwardsWorkingSetIsPriced) {
  PlanFlags flags;
  flags.cluster = "local:1";
  flags.mode = "train";
  double activation = 32.0 * 256 * 4;
  auto memory = [&](const char *mode) {
    flags.recompute = mode;
    auto result = plan(flags);
    EXPECT_TRUE(bool(result)) << llvm::toString(result.takeError());
    const MemoryBreakdown &m = result->best.memory;
    EXPECT_DOUBLE_EQ(m.total(), m.parameters + m.gradients + m.optimizerStates +
                                    m.activations + m.workingSet +
                                    m.communication + m.other)
        << mode;
    return m;
  };
  // Without recomputation: the two values the adjoints read are kept, and
  // the backward adds one gradient.
  MemoryBreakdown none = memory("none");
  EXPECT_DOUBLE_EQ(none.activations, 2 * activation);
  EXPECT_DOUBLE_EQ(none.workingSet, activation);
  // Selective keeps the first GEMM's output and makes the ReLU's again
  // while the backward runs: the same peak, one value moved.
  MemoryBreakdown selective = memory("selective");
  EXPECT_DOUBLE_EQ(selective.activations, activation);
  EXPECT_DOUBLE_EQ(selective.workingSet, 2 * activation);
  // Full keeps both GEMM outputs (each a segment boundary an adjoint reads)
  // and never prices less than that peak; it counts the second segment's
  // boundary once more (a value is attributed to the segment that reads it
  // without recomputation, kept by the one that makes it under full): an
  // upper bound by one value.
  MemoryBreakdown full = memory("full");
  EXPECT_DOUBLE_EQ(full.activations, 2 * activation);
  EXPECT_GE(full.activations + full.workingSet, 3 * activation);
  EXPECT_LE(full.activations + full.workingSet, 4 * activation);
  // Inference has no backward: its activations are the largest live set.
  flags.mode = "infer";
  flags.recompute.clear();
  auto inference = plan(flags);
  ASSERT_TRUE(bool(inference)) << llvm::toString(inference.takeError());
  EXPECT_EQ(inference->best.memory.workingSet, 0);
}

// A linear head and the model's own SoftmaxCrossEntropyLoss: 64 positions,
// 1024 classes, fp32.
std::string crossEntropyText() {
  return "<ir_version: 8, opset_import: [\"\" : 17]>\n"
         "g (float[64, 128] X, int64[64] L) => (float loss)\n"
         "  <float[128, 1024] W = {" +
         values(128 * 1024) +
         "}> {\n"
         "  logits = MatMul(X, W)\n"
         "  loss = SoftmaxCrossEntropyLoss(logits, L)\n"
         "}\n";
}

// Plans of models given as ONNX text, each imported into the fixture's
// context.
class OnnxTextPlanTest : public ::testing::Test {
protected:
  OnnxTextPlanTest() {
    mlir::DialectRegistry registry;
    registerShardingModels(registry);
    mlir::registerAllDialects(registry);
    context.appendDialectRegistry(registry);
  }

  /// `main` of \p text imported (kept alive by the fixture), or null.
  mlir::func::FuncOp import(const std::string &text) {
    modules.push_back(importOnnxBuffer(&context, text, "model.onnxtxt",
                                       /*isText=*/true, ImportOptions()));
    return modules.back()
               ? modules.back()->lookupSymbol<mlir::func::FuncOp>("main")
               : nullptr;
  }

  mlir::MLIRContext context;
  std::vector<mlir::OwningOpRef<mlir::ModuleOp>> modules;
};

class FusedCrossEntropyPlanTest : public OnnxTextPlanTest {};
class TrainingResultsPlanTest : public OnnxTextPlanTest {};

// Fused (autopar-fuse-cross-entropy), the backward keeps the logits and one
// log-sum-exp per position where the unfused loss keeps the
// log-probabilities and its reductions' results (a max and a sum per
// position), and the log-softmax's passes over [64, 1024] are one: less
// time, less memory. (X, an input, is counted with the data, not here.)
TEST_F(FusedCrossEntropyPlanTest, TheLogitsAndTheirLogSumExpAreKept) {
  auto main = import(crossEntropyText());
  ASSERT_TRUE(main);
  PlanFlags flags;
  flags.mode = "train";
  flags.recompute = "none";
  // One micro-batch of the 64 positions: what local:1's search picks
  // depends on the machine's caches.
  flags.microBatchSize = 64;
  auto request = buildPlanRequest(flags);
  ASSERT_TRUE(bool(request)) << llvm::toString(request.takeError());
  auto fused = planProgram(main, *request);
  ASSERT_TRUE(bool(fused)) << llvm::toString(fused.takeError());
  request->fusedCrossEntropy = false;
  auto unfused = planProgram(main, *request);
  ASSERT_TRUE(bool(unfused)) << llvm::toString(unfused.takeError());
  const double logits = 64.0 * 1024 * 4, perPosition = 64.0 * 4;
  // Both keep what the mean over the valid positions reads (a value per
  // position and the count); beyond it, the fused loss keeps the logits and
  // their log-sum-exp, the unfused one the log-probabilities and at least
  // two per position more.
  double shared = fused->best.memory.activations - logits - perPosition;
  EXPECT_GE(shared, 0);
  EXPECT_LT(shared, 2 * perPosition);
  EXPECT_GE(unfused->best.memory.activations,
            logits + 2 * perPosition + shared);
  EXPECT_LT(fused->best.time.compute, unfused->best.time.compute);
}

// An MLP (Megatron's column- then row-parallel pair) and its own loss,
// returning the hidden activation `h` [64, 512] beside the loss or not.
static std::string mlpWithLossText(bool returnHidden) {
  return std::string("<ir_version: 8, opset_import: [\"\" : 17]>\n"
                     "g (float[64, 128] X, int64[64] L) => (") +
         (returnHidden ? "float[64, 512] h, " : "") +
         "float loss)\n"
         "  <float[128, 512] W1 = {" +
         values(128 * 512, "0.01") + "}, float[512, 16] W2 = {" +
         values(512 * 16, "0.02") +
         "}> {\n"
         "  a = MatMul(X, W1)\n"
         "  h = Relu(a)\n"
         "  logits = MatMul(h, W2)\n"
         "  loss = SoftmaxCrossEntropyLoss(logits, L)\n"
         "}\n";
}

// A training step returns the loss and the state updates; the model's other
// outputs are dropped (autopar-differentiate). So a training plan neither
// gathers such an output under tp nor keeps it live to the end: the MLP
// returning (h, loss) is planned as the one returning the loss alone (h
// split over tp between the pair, no all-gather of it). An inference plan
// returns h whole, and pays for it.
TEST_F(TrainingResultsPlanTest, OutputsBesideTheLossCostNothingToTrain) {
  auto plan = [&](bool returnHidden,
                  const char *mode) -> std::optional<PlanResult> {
    auto main = import(mlpWithLossText(returnHidden));
    EXPECT_TRUE(main);
    if (!main)
      return std::nullopt;
    PlanFlags flags;
    flags.cluster = "local:2";
    flags.mode = mode;
    flags.tp = 2;
    flags.microBatchSize = 64;
    if (std::string(mode) == "train")
      flags.recompute = "none";
    auto request = buildPlanRequest(flags);
    EXPECT_TRUE(bool(request)) << llvm::toString(request.takeError());
    if (!request)
      return std::nullopt;
    if (std::string(mode) == "train")
      request->lossOutput = "loss";
    auto result = planProgram(main, *request);
    EXPECT_TRUE(bool(result)) << llvm::toString(result.takeError());
    if (!result)
      return std::nullopt;
    return std::move(*result);
  };
  auto lossOnly = plan(false, "train");
  auto both = plan(true, "train");
  ASSERT_TRUE(lossOnly && both);
  EXPECT_DOUBLE_EQ(both->best.stepSeconds, lossOnly->best.stepSeconds);
  EXPECT_DOUBLE_EQ(both->best.memory.total(), lossOnly->best.memory.total());
  auto inferLossOnly = plan(false, "infer");
  auto inferBoth = plan(true, "infer");
  ASSERT_TRUE(inferLossOnly && inferBoth);
  EXPECT_GT(inferBoth->best.stepSeconds, inferLossOnly->best.stepSeconds);
}
