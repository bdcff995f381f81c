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

/// A parsed --train-config. Absent or "auto" values are std::nullopt (the
/// planner decides).
struct TrainConfig {
  std::optional<int64_t> trainBatchSize, microBatchSize, accumulationSteps;
  std::optional<int64_t> zeroStage;
  double gradientClipping = 0.0;
  /// "bf16" when `bf16.enabled` is true (mixed precision with f32 master
  /// weights), "" for fp32.
  std::string precision;

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
