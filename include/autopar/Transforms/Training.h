//===- Training.h - Training configuration shared by passes and driver ----===//
//
// The enums of `autopar-apply-optimizer`'s typed options, also used by the
// driver when it reads a DeepSpeed-style --train-config.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TRANSFORMS_TRAINING_H
#define AUTOPAR_TRANSFORMS_TRAINING_H

#include "llvm/ADT/StringRef.h"

namespace autopar {

/// The update rule, with PyTorch's arithmetic.
enum class OptimizerKind { SGD, Adam, AdamW };
/// DeepSpeed's learning-rate schedulers (none: a constant rate).
enum class LrSchedule { Constant, Warmup, WarmupDecay, WarmupCosine };
/// How DeepSpeed's Warmup* schedulers rise.
enum class WarmupType { Log, Linear };

/// autopar-mixed-precision's storage type.
enum class LowPrecision { BF16, F16 };

/// autopar-plan's options that may be left to the planner (`Auto`).
enum class PlanModeOption { Infer, Train };
enum class PlanPrecisionOption { Auto, FP32, BF16, FP16 };
enum class PlanRecomputeOption { Auto, None, Selective, Full };

} // namespace autopar

#endif // AUTOPAR_TRANSFORMS_TRAINING_H
