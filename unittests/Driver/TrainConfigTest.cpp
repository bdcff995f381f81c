//===- TrainConfigTest.cpp - --train-config: DeepSpeed names and defaults -===//

#include "autopar/Driver/TrainConfig.h"

#include "gtest/gtest.h"

using namespace autopar;

namespace {

TrainConfig parse(llvm::StringRef text) {
  auto config = parseTrainConfig(text, "cfg.json");
  EXPECT_TRUE(bool(config)) << llvm::toString(config.takeError());
  return config ? *config : TrainConfig();
}

std::string error(llvm::StringRef text) {
  auto config = parseTrainConfig(text, "cfg.json");
  if (config)
    return "";
  return llvm::toString(config.takeError());
}

TEST(TrainConfig, DeepSpeedAdamIsAdamWUnlessAdamWModeIsFalse) {
  EXPECT_EQ(parse(R"({"optimizer": {"type": "Adam"}})").optimizer,
            OptimizerKind::AdamW);
  EXPECT_EQ(parse(R"({"optimizer": {"type": "Adam",
                                    "params": {"adam_w_mode": false}}})")
                .optimizer,
            OptimizerKind::Adam);
  EXPECT_EQ(parse(R"({"optimizer": {"type": "AdamW"}})").optimizer,
            OptimizerKind::AdamW);
}

TEST(TrainConfig, AdamDefaultsAreDeepSpeeds) {
  TrainConfig c = parse(R"({"optimizer": {"type": "AdamW"}})");
  EXPECT_DOUBLE_EQ(c.lr, 1e-3);
  EXPECT_DOUBLE_EQ(c.beta1, 0.9);
  EXPECT_DOUBLE_EQ(c.beta2, 0.999);
  EXPECT_DOUBLE_EQ(c.eps, 1e-8);
  // FusedAdam's default, not torch.optim.AdamW's 0.01.
  EXPECT_DOUBLE_EQ(c.weightDecay, 0.0);
}

TEST(TrainConfig, SgdWithMomentum) {
  TrainConfig c = parse(R"({"optimizer": {"type": "SGD", "params": {
      "lr": 0.1, "momentum": 0.9, "nesterov": true, "weight_decay": 1e-4}}})");
  EXPECT_EQ(c.optimizer, OptimizerKind::SGD);
  EXPECT_DOUBLE_EQ(c.lr, 0.1);
  EXPECT_DOUBLE_EQ(c.momentum, 0.9);
  EXPECT_TRUE(c.nesterov);
  EXPECT_DOUBLE_EQ(c.weightDecay, 1e-4);
}

TEST(TrainConfig, WarmupSchedulersDefaultToLogWarmup) {
  TrainConfig warmup = parse(R"({"scheduler": {"type": "WarmupLR"}})");
  EXPECT_EQ(warmup.schedule, LrSchedule::Warmup);
  EXPECT_EQ(warmup.warmupType, WarmupType::Log);
  EXPECT_DOUBLE_EQ(warmup.warmupMinLr, 0.0);
  EXPECT_DOUBLE_EQ(warmup.warmupMaxLr, 0.001);
  EXPECT_EQ(warmup.warmupSteps, 1000);
  TrainConfig cosine = parse(R"({"scheduler": {"type": "WarmupCosineLR",
      "params": {"total_num_steps": 100, "warmup_num_steps": 10,
                 "warmup_type": "linear"}}})");
  EXPECT_EQ(cosine.schedule, LrSchedule::WarmupCosine);
  EXPECT_EQ(cosine.warmupType, WarmupType::Linear);
  EXPECT_EQ(cosine.totalSteps, 100);
  EXPECT_DOUBLE_EQ(cosine.cosMinRatio, 0.0001);
}

TEST(TrainConfig, AutoMeansUnpinned) {
  TrainConfig c = parse(R"({"train_batch_size": 8,
      "train_micro_batch_size_per_gpu": "auto",
      "gradient_accumulation_steps": "auto",
      "zero_optimization": {"stage": "auto"}})");
  EXPECT_EQ(c.trainBatchSize, 8);
  EXPECT_FALSE(c.microBatchSize);
  EXPECT_FALSE(c.accumulationSteps);
  EXPECT_FALSE(c.zeroStage);
}

TEST(TrainConfig, EveryProblemIsReportedWithItsKey) {
  std::string e = error(R"({"train_batch_size": "eight", "learning_rate": 1,
      "optimizer": {"type": "AdamW", "params": {"betas": [0.9]}},
      "scheduler": {"type": "WarmupDecayLR"}})");
  EXPECT_NE(e.find("cfg.json:"), std::string::npos) << e;
  EXPECT_NE(e.find("train_batch_size: expected an integer or \"auto\""),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("learning_rate: unknown key"), std::string::npos) << e;
  EXPECT_NE(e.find("optimizer.params.betas: expected two numbers"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("scheduler.params.total_num_steps: WarmupDecayLR needs "
                   "the total number of steps"),
            std::string::npos)
      << e;
}

TEST(TrainConfig, RejectsWhatIsNotImplemented) {
  EXPECT_NE(error(R"({"optimizer": {"type": "Lamb"}})")
                .find("optimizer.type: 'Lamb' is not supported; supported: "
                      "SGD, Adam, AdamW"),
            std::string::npos);
  EXPECT_NE(error(R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})")
                .find("fp16.enabled: bf16 and fp16 cannot both be enabled"),
            std::string::npos);
  std::string fp16 = error(R"({"fp16": {"enabled": true, "loss_scale": -1,
      "initial_scale_power": 99, "loss_scale_window": 0, "hysteresis": 0,
      "min_loss_scale": 0, "auto_cast": true}})");
  for (const char *message :
       {"fp16.loss_scale: must be 0 (dynamic) or positive",
        "fp16.initial_scale_power: must be between 0 and 60",
        "fp16.loss_scale_window: must be positive",
        "fp16.hysteresis: must be positive",
        "fp16.min_loss_scale: must be positive", "fp16.auto_cast: unknown key"})
    EXPECT_NE(fp16.find(message), std::string::npos) << message << "\n" << fp16;
  EXPECT_NE(error(R"({"bf16": {"enabled": "yes"}})")
                .find("bf16.enabled: expected true or false"),
            std::string::npos);
  EXPECT_NE(
      error(R"({"bf16": {"enabled": true, "immediate_grad_update": true}})")
          .find("bf16.immediate_grad_update: unknown key"),
      std::string::npos);
  EXPECT_NE(error(R"({"optimizer": {"type": "SGD"}})")
                .find("optimizer.params.lr: SGD needs a learning rate"),
            std::string::npos);
  EXPECT_NE(error("{not json").find("cfg.json: not valid JSON"),
            std::string::npos);
}

TEST(TrainConfig, OptionsRoundTripEveryDigit) {
  TrainConfig c = parse(R"({"optimizer": {"type": "AdamW",
      "params": {"lr": 0.000123456789012345}}})");
  // autopar-apply-optimizer reads back exactly the double the file gave.
  std::string options = c.applyOptimizerOptions();
  size_t at = options.find(" lr=");
  ASSERT_NE(at, std::string::npos) << options;
  EXPECT_EQ(std::stod(options.substr(at + 4)), c.lr) << options;
  EXPECT_NE(options.find("optimizer=adamw "), std::string::npos) << options;
}

} // namespace

TEST(TrainConfig, Fp16LossScaling) {
  // DeepSpeed's defaults: dynamic, 2^16, window 1000, hysteresis 2, min 1.
  TrainConfig c = parse(R"({"fp16": {"enabled": true}})");
  EXPECT_EQ(c.precision, "fp16");
  EXPECT_EQ(c.lossScaling.staticScale, 0.0);
  EXPECT_EQ(c.lossScaling.initialScalePower, 16);
  EXPECT_EQ(c.lossScaling.window, 1000);
  EXPECT_EQ(c.lossScaling.hysteresis, 2);
  EXPECT_FALSE(c.lossScaling.consecutiveHysteresis);
  EXPECT_EQ(c.lossScaling.minScale, 1.0);
  c = parse(R"({"fp16": {"enabled": true, "loss_scale": 128,
      "initial_scale_power": 8, "loss_scale_window": 50, "hysteresis": 1,
      "consecutive_hysteresis": true, "min_loss_scale": 0.5}})");
  EXPECT_EQ(c.lossScaling.staticScale, 128.0);
  EXPECT_EQ(c.lossScaling.initialScalePower, 8);
  EXPECT_EQ(c.lossScaling.window, 50);
  EXPECT_EQ(c.lossScaling.hysteresis, 1);
  EXPECT_TRUE(c.lossScaling.consecutiveHysteresis);
  EXPECT_EQ(c.lossScaling.minScale, 0.5);
}

TEST(TrainConfig, Precision) {
  EXPECT_EQ(parse("{}").precision, "");
  EXPECT_EQ(parse(R"({"bf16": {"enabled": true}})").precision, "bf16");
  EXPECT_EQ(parse(R"({"bf16": {"enabled": false}, "fp16": {"enabled": false}})")
                .precision,
            "");
}
