//===- TrainConfig.h - --train-config: DeepSpeed's JSON schema -*- C++ -*-===//
//
// Reads the subset of DeepSpeed's configuration that autopar implements
// (docs/interfaces.md, "Training config"), with DeepSpeed's meanings and
// defaults, and turns it into `autopar-apply-optimizer` options.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DRIVER_TRAINCONFIG_H
#define AUTOPAR_DRIVER_TRAINCONFIG_H

#include "autopar/Transforms/Training.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>

namespace autopar {

/// DeepSpeed's fp16 loss scaling (its `fp16` section and meanings).
struct LossScaling {
  /// `loss_scale`: 0 for dynamic scaling, else the fixed scale.
  double staticScale = 0.0;
  /// The dynamic scale starts at 2^initial_scale_power.
  int64_t initialScalePower = 16;
  /// `loss_scale_window`: steps without overflow before the scale doubles.
  int64_t window = 1000;
  /// `hysteresis`: overflows tolerated before the scale halves.
  int64_t hysteresis = 2;
  bool consecutiveHysteresis = false;
  /// `min_loss_scale`: the scale never goes below it.
  double minScale = 1.0;
};

/// A parsed --train-config. Absent or "auto" values are std::nullopt (the
/// planner decides).
struct TrainConfig {
  std::optional<int64_t> trainBatchSize, microBatchSize, accumulationSteps;
  std::optional<int64_t> zeroStage;
  double gradientClipping = 0.0;
  /// "bf16" or "fp16" when `bf16.enabled` or `fp16.enabled` is true (mixed
  /// precision with f32 master weights), "" for fp32.
  std::string precision;
  /// fp16's loss scaling.
  LossScaling lossScaling;

  OptimizerKind optimizer = OptimizerKind::AdamW;
  double lr = 1e-3, momentum = 0.0, dampening = 0.0, weightDecay = 0.0;
  bool nesterov = false;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;

  LrSchedule schedule = LrSchedule::Constant;
  WarmupType warmupType = WarmupType::Log;
  double warmupMinLr = 0.0, warmupMaxLr = 0.001;
  int64_t warmupSteps = 1000, totalSteps = 0;
  double warmupMinRatio = 0.0, cosMinRatio = 0.0001;

  /// The resolved optimizer and scheduler, as the manifest records them.
  llvm::json::Object optimizerJson() const;
  llvm::json::Object schedulerJson() const;
  /// `autopar-apply-optimizer`'s options for this configuration.
  std::string applyOptimizerOptions() const;
};

/// Parses the JSON text of a --train-config (`path` names it in errors).
/// Every unknown key, wrong type or impossible value is reported, all at
/// once, each naming its key path.
llvm::Expected<TrainConfig> parseTrainConfig(llvm::StringRef text,
                                             llvm::StringRef path);

/// Reads and parses the file at `path`.
llvm::Expected<TrainConfig> readTrainConfig(llvm::StringRef path);

/// A configuration without a file: AdamW with DeepSpeed's defaults, constant
/// learning rate.
TrainConfig defaultTrainConfig();

} // namespace autopar

#endif // AUTOPAR_DRIVER_TRAINCONFIG_H
