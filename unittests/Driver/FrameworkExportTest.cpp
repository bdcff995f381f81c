//===- FrameworkExportTest.cpp - Plans as Megatron/DeepSpeed/torchtitan ---===//

#include "autopar/Driver/FrameworkExport.h"

#include "llvm/ADT/StringExtras.h"
#include "gtest/gtest.h"

using namespace autopar;

namespace {

/// 16 GPUs (2 nodes of 8), dp=2 tp=4 pp=2, ZeRO-1, 8 micro-batches of 2 per
/// replica, full recomputation, bf16, 24 layers in two stages of 12.
struct KnownPlan {
  PlanResult result;
  PlanRequest request;

  KnownPlan() {
    request.cluster.name = "dgx-h100:2";
    request.cluster.nodes = 2;
    request.cluster.gpusPerNode = 8;
    request.mode = PlanMode::Training;
    request.precision = Precision::BF16;
    request.modelName = "gpt.onnx";
    PlanCandidate &b = result.best;
    b.dp = 2;
    b.tp = 4;
    b.pp = 2;
    b.zeroStage = 1;
    b.microBatchSize = 2;
    b.numMicroBatches = 8;
    b.recompute = Recompute::Full;
    StagePlan first, second;
    first.firstSegment = 0;
    first.lastSegment = 12; // the embedding and layers 0-11
    first.layers = "0-11";
    second.firstSegment = 13;
    second.lastSegment = 25;
    second.layers = "12-23";
    b.stages = {first, second};
    result.globalBatch = 32;
  }

  /// The plan on one node of 8 without tensor or pipeline parallelism.
  KnownPlan &dataParallelOnly(int zero) {
    request.cluster.nodes = 1;
    result.best.dp = 8;
    result.best.tp = 1;
    result.best.pp = 1;
    result.best.zeroStage = zero;
    result.best.numMicroBatches = 2;
    result.best.stages.resize(1);
    result.best.stages[0].lastSegment = 25;
    result.best.stages[0].layers = "0-23";
    return *this;
  }
};

/// The lines of `text` that are neither empty nor comments.
std::vector<std::string> argumentLines(llvm::StringRef text) {
  llvm::SmallVector<llvm::StringRef> lines;
  text.split(lines, '\n', -1, false);
  std::vector<std::string> out;
  for (llvm::StringRef line : lines)
    if (!line.starts_with("#"))
      out.push_back(line.str());
  return out;
}

llvm::json::Object parseObject(llvm::StringRef text) {
  auto parsed = llvm::json::parse(text);
  EXPECT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError()) << "\n"
                            << text.str();
  if (!parsed || !parsed->getAsObject())
    return {};
  return std::move(*parsed->getAsObject());
}

bool anyContains(const std::vector<std::string> &warnings,
                 llvm::StringRef part) {
  return llvm::any_of(warnings, [&](const std::string &w) {
    return llvm::StringRef(w).contains(part);
  });
}

TEST(FrameworkExport, MegatronArguments) {
  KnownPlan plan;
  FrameworkExport e = exportMegatron(plan.result, plan.request);
  EXPECT_EQ(
      argumentLines(e.text),
      (std::vector<std::string>{
          "--tensor-model-parallel-size 4 \\",
          "--pipeline-model-parallel-size 2 \\", "--micro-batch-size 2 \\",
          "--global-batch-size 32 \\", "--recompute-granularity full \\",
          "--recompute-method uniform \\", "--recompute-num-layers 1 \\",
          "--use-distributed-optimizer \\", "--bf16 \\"}));
  // The data parallelism Megatron-LM derives, with the world size.
  EXPECT_TRUE(llvm::StringRef(e.text).starts_with("# "));
  EXPECT_TRUE(llvm::StringRef(e.text).contains(
      "# World size 16: Megatron-LM derives the data parallelism, 16 / (tp 4 "
      "x pp 2) = dp 2"));
  EXPECT_TRUE(e.warnings.empty());
}

// A sequence-parallel plan asks Megatron-LM for --sequence-parallel, after the
// parallel sizes; the plan line says so.
TEST(FrameworkExport, MegatronSequenceParallel) {
  KnownPlan plan;
  plan.result.best.sequenceParallel = true;
  FrameworkExport e = exportMegatron(plan.result, plan.request);
  std::vector<std::string> lines = argumentLines(e.text);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines[2], "--sequence-parallel \\");
  EXPECT_TRUE(llvm::StringRef(e.text).contains("precision bf16, sequence "
                                               "parallel."));
  EXPECT_TRUE(e.warnings.empty());
}

TEST(FrameworkExport, MegatronSelectiveFp16WithoutZero) {
  KnownPlan plan;
  plan.dataParallelOnly(0);
  plan.result.best.recompute = Recompute::Selective;
  plan.request.precision = Precision::FP16;
  FrameworkExport e = exportMegatron(plan.result, plan.request);
  EXPECT_EQ(argumentLines(e.text),
            (std::vector<std::string>{
                "--tensor-model-parallel-size 1 \\",
                "--pipeline-model-parallel-size 1 \\",
                "--micro-batch-size 2 \\", "--global-batch-size 32 \\",
                "--recompute-granularity selective \\", "--fp16 \\"}));
}

TEST(FrameworkExport, MegatronZero3NeedsMegatronFsdp) {
  KnownPlan plan;
  plan.result.best.zeroStage = 3;
  plan.result.best.recompute = Recompute::None;
  plan.request.precision = Precision::FP32;
  FrameworkExport e = exportMegatron(plan.result, plan.request);
  EXPECT_EQ(argumentLines(e.text).back(), "--use-distributed-optimizer \\");
  EXPECT_FALSE(llvm::StringRef(e.text).contains("--recompute"));
  EXPECT_FALSE(llvm::is_contained(argumentLines(e.text), "--bf16 \\"));
  ASSERT_EQ(e.warnings.size(), 1u);
  EXPECT_TRUE(llvm::StringRef(e.warnings[0])
                  .contains("--data-parallel-sharding-strategy "
                            "optim_grads_params"));
}

TEST(FrameworkExport, DeepSpeedConfig) {
  KnownPlan plan;
  FrameworkExport e = exportDeepSpeed(plan.result, plan.request, nullptr);
  llvm::json::Object c = parseObject(e.text);
  EXPECT_EQ(c.getInteger("train_batch_size"), 32);
  EXPECT_EQ(c.getInteger("train_micro_batch_size_per_gpu"), 2);
  EXPECT_EQ(c.getInteger("gradient_accumulation_steps"), 8);
  ASSERT_TRUE(c.getObject("zero_optimization"));
  EXPECT_EQ(c.getObject("zero_optimization")->getInteger("stage"), 1);
  ASSERT_TRUE(c.getObject("bf16"));
  EXPECT_EQ(c.getObject("bf16")->getBoolean("enabled"), true);
  EXPECT_FALSE(c.get("fp16"));
  const llvm::json::Object *ac = c.getObject("activation_checkpointing");
  ASSERT_TRUE(ac);
  EXPECT_EQ(ac->getBoolean("partition_activations"), false);
  EXPECT_EQ(ac->getBoolean("contiguous_memory_optimization"), false);
  // One checkpoint per layer of a stage.
  EXPECT_EQ(ac->getInteger("number_checkpoints"), 12);
  EXPECT_FALSE(c.get("optimizer"));
  // tp and pp are not DeepSpeed keys: said in the file and as a warning.
  ASSERT_TRUE(c.getString("_comment"));
  EXPECT_TRUE(c.getString("_comment")
                  ->contains("--tensor-model-parallel-size 4 "
                             "--pipeline-model-parallel-size 2"));
  ASSERT_EQ(e.warnings.size(), 1u);
  EXPECT_TRUE(llvm::StringRef(e.warnings[0]).contains("tp=4 pp=2"));
}

TEST(FrameworkExport, DeepSpeedCarriesTheUsersHyperparameters) {
  KnownPlan plan;
  plan.dataParallelOnly(2);
  plan.result.best.recompute = Recompute::None;
  plan.request.precision = Precision::FP16;
  llvm::json::Object user = parseObject(R"({
      "train_batch_size": 32, "gradient_clipping": 1.0,
      "optimizer": {"type": "AdamW", "params": {"lr": 0.003}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 5}},
      "fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 12},
      "activation_checkpointing": {"policy": "auto"}})");
  FrameworkExport e = exportDeepSpeed(plan.result, plan.request, &user);
  llvm::json::Object c = parseObject(e.text);
  EXPECT_EQ(c.getNumber("gradient_clipping"), 1.0);
  ASSERT_TRUE(c.getObject("optimizer"));
  EXPECT_EQ(*c.getObject("optimizer"), *user.getObject("optimizer"));
  // As the user wrote it, not 0.0030000000000000001.
  EXPECT_TRUE(llvm::StringRef(e.text).contains("\"lr\": 0.003\n"));
  ASSERT_TRUE(c.getObject("scheduler"));
  EXPECT_EQ(*c.getObject("scheduler"), *user.getObject("scheduler"));
  const llvm::json::Object *fp16 = c.getObject("fp16");
  ASSERT_TRUE(fp16);
  EXPECT_EQ(fp16->getBoolean("enabled"), true);
  EXPECT_EQ(fp16->getInteger("initial_scale_power"), 12);
  EXPECT_FALSE(c.get("bf16"));
  // autopar's own policy key is not DeepSpeed's: no recomputation here.
  EXPECT_FALSE(c.get("activation_checkpointing"));
  EXPECT_EQ(c.getObject("zero_optimization")->getInteger("stage"), 2);
  EXPECT_EQ(c.getInteger("gradient_accumulation_steps"), 2);
  EXPECT_TRUE(e.warnings.empty());
}

TEST(FrameworkExport, TorchtitanConfig) {
  KnownPlan plan;
  plan.result.best.sequenceParallel = true;
  FrameworkExport e = exportTorchtitan(plan.result, plan.request);
  EXPECT_EQ(
      argumentLines(e.text),
      (std::vector<std::string>{
          "[parallelism]", "data_parallel_replicate_degree = 1",
          "data_parallel_shard_degree = 2",
          "fsdp_reshard_after_forward = \"never\"",
          "tensor_parallel_degree = 4", "pipeline_parallel_degree = 2",
          "pipeline_parallel_schedule = \"1F1B\"",
          "pipeline_parallel_microbatch_size = 2",
          "context_parallel_degree = 1", "[training]", "local_batch_size = 16",
          "global_batch_size = 32", "mixed_precision_param = \"bfloat16\"",
          "[activation_checkpoint]", "mode = \"full\""}));
  // ZeRO-1 as FSDP2 is explained where it is written.
  EXPECT_TRUE(llvm::StringRef(e.text).contains(
      "# ZeRO-1: torchtitan's FSDP2 (data_parallel_shard_degree)"));
  EXPECT_TRUE(e.warnings.empty());

  // torchtitan's tp always runs the norms sequence-parallel: a tp plan
  // without it is written with a comment and a warning saying so.
  plan.result.best.sequenceParallel = false;
  e = exportTorchtitan(plan.result, plan.request);
  EXPECT_TRUE(llvm::StringRef(e.text).contains(
      "# Sequence parallelism: torchtitan's tensor parallelism always"));
  EXPECT_TRUE(anyContains(e.warnings, "sequence-parallel"));
}

TEST(FrameworkExport, TorchtitanZeroStages) {
  // ZeRO-0 without tp or pp: replication (DDP), micro-batches accumulated.
  KnownPlan ddp;
  ddp.dataParallelOnly(0);
  FrameworkExport e = exportTorchtitan(ddp.result, ddp.request);
  std::vector<std::string> lines = argumentLines(e.text);
  EXPECT_TRUE(llvm::is_contained(lines, "data_parallel_replicate_degree = 8"));
  EXPECT_TRUE(llvm::is_contained(lines, "data_parallel_shard_degree = 1"));
  EXPECT_FALSE(llvm::StringRef(e.text).contains("fsdp_reshard_after_forward"));
  EXPECT_FALSE(llvm::StringRef(e.text).contains("pipeline_parallel_micro"));
  EXPECT_TRUE(llvm::is_contained(lines, "local_batch_size = 2"));
  EXPECT_TRUE(llvm::is_contained(lines, "global_batch_size = 32"));
  EXPECT_TRUE(e.warnings.empty());

  // ZeRO-0 with tp: torchtitan's DDP does not combine with it.
  KnownPlan withTp;
  withTp.result.best.zeroStage = 0;
  e = exportTorchtitan(withTp.result, withTp.request);
  EXPECT_TRUE(llvm::is_contained(argumentLines(e.text),
                                 "data_parallel_shard_degree = 2"));
  EXPECT_TRUE(anyContains(e.warnings, "DDP"));

  // ZeRO-3: FSDP2 resharding after the forward; fp16 is not torchtitan's.
  KnownPlan zero3;
  zero3.dataParallelOnly(3);
  zero3.request.precision = Precision::FP16;
  zero3.result.best.recompute = Recompute::Selective;
  e = exportTorchtitan(zero3.result, zero3.request);
  lines = argumentLines(e.text);
  EXPECT_TRUE(llvm::is_contained(lines, "data_parallel_shard_degree = 8"));
  EXPECT_TRUE(
      llvm::is_contained(lines, "fsdp_reshard_after_forward = \"always\""));
  EXPECT_TRUE(llvm::is_contained(lines, "mixed_precision_param = \"float32\""));
  EXPECT_TRUE(llvm::is_contained(lines, "mode = \"selective\""));
  EXPECT_TRUE(llvm::is_contained(lines, "selective_ac_option = \"op\""));
  EXPECT_TRUE(anyContains(e.warnings, "fp16"));
}

TEST(FrameworkExport, InferencePlansAreSaidToBe) {
  KnownPlan plan;
  plan.request.mode = PlanMode::Inference;
  plan.result.best.recompute = Recompute::None;
  plan.result.best.zeroStage = 0;
  for (const FrameworkExport &e :
       {exportMegatron(plan.result, plan.request),
        exportDeepSpeed(plan.result, plan.request, nullptr),
        exportTorchtitan(plan.result, plan.request)})
    EXPECT_TRUE(anyContains(e.warnings, "--mode infer"));
}

} // namespace
