//===- PlanPass.cpp - autopar-plan ----------------------------------------===//

#include "autopar/Transforms/Passes.h"
#include "autopar/Transforms/PlanAnnotate.h"

#include "llvm/Support/FormatVariadic.h"

namespace autopar {
#define GEN_PASS_DEF_AUTOPARPLAN
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace autopar {

llvm::StringRef planOptionSpelling(PlanModeOption mode) {
  return mode == PlanModeOption::Train ? "train" : "infer";
}

llvm::StringRef planOptionSpelling(PlanPrecisionOption precision) {
  switch (precision) {
  case PlanPrecisionOption::Auto:
    return "";
  case PlanPrecisionOption::FP32:
    return "fp32";
  case PlanPrecisionOption::BF16:
    return "bf16";
  case PlanPrecisionOption::FP16:
    return "fp16";
  }
  llvm_unreachable("unknown precision option");
}

llvm::StringRef planOptionSpelling(PlanRecomputeOption recompute) {
  switch (recompute) {
  case PlanRecomputeOption::Auto:
    return "";
  case PlanRecomputeOption::None:
    return "none";
  case PlanRecomputeOption::Selective:
    return "selective";
  case PlanRecomputeOption::Full:
    return "full";
  }
  llvm_unreachable("unknown recompute option");
}

} // namespace autopar

namespace {
struct AutoparPlanPass : autopar::impl::AutoparPlanBase<AutoparPlanPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError("autopar-plan: no func.func @main to plan");
      return signalPassFailure();
    }
    auto request = buildRequest();
    if (!request) {
      module.emitError("autopar-plan: ") << llvm::toString(request.takeError());
      return signalPassFailure();
    }
    if (auto name = module->getAttrOfType<StringAttr>("autopar.model"))
      request->modelName = name.str();
    auto result = autopar::planProgram(main, *request);
    if (!result) {
      module.emitError("autopar-plan: ") << llvm::toString(result.takeError());
      return signalPassFailure();
    }
    autopar::annotateModuleWithPlan(module, *result);
    if (onPlanned)
      onPlanned(*result);
  }

  /// Set by createAutoparPlanPass: the request the caller built (instead of
  /// the options), and who receives the plan.
  std::optional<autopar::PlanRequest> fixedRequest;
  std::function<void(const autopar::PlanResult &)> onPlanned;

  llvm::Expected<autopar::PlanRequest> buildRequest() {
    if (fixedRequest)
      return *fixedRequest;
    autopar::PlanFlags flags;
    flags.cluster = cluster;
    // PlanFlags holds the CLI's spellings (autopar-compile's flags).
    flags.mode = autopar::planOptionSpelling(mode).str();
    flags.precision = autopar::planOptionSpelling(precision).str();
    flags.recompute = autopar::planOptionSpelling(recompute).str();
    flags.dp = dp;
    flags.tp = tp;
    flags.pp = pp;
    flags.zero = zero;
    flags.microBatchSize = microBatchSize;
    flags.sequenceParallel = sequenceParallel;
    return autopar::buildPlanRequest(flags);
  }
};
} // namespace

std::unique_ptr<Pass> autopar::createAutoparPlanPass(
    PlanRequest request, std::function<void(const PlanResult &)> onPlanned) {
  auto pass = std::make_unique<AutoparPlanPass>();
  pass->fixedRequest = std::move(request);
  pass->onPlanned = std::move(onPlanned);
  return pass;
}
