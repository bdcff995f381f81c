//===- PlanPass.cpp - autopar-plan ----------------------------------------===//

#include "autopar/Transforms/Passes.h"
#include "autopar/Transforms/PlanAnnotate.h"

#include "llvm/Support/FormatVariadic.h"

namespace autopar {
#define GEN_PASS_DEF_AUTOPARPLAN
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

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
  }

  llvm::Expected<autopar::PlanRequest> buildRequest() {
    autopar::PlanFlags flags;
    flags.cluster = cluster;
    // PlanFlags holds the CLI's spellings (autopar-compile's flags); the
    // typed options map onto them.
    flags.mode = mode == autopar::PlanModeOption::Train ? "train" : "infer";
    switch (precision) {
    case autopar::PlanPrecisionOption::Auto:
      break;
    case autopar::PlanPrecisionOption::FP32:
      flags.precision = "fp32";
      break;
    case autopar::PlanPrecisionOption::BF16:
      flags.precision = "bf16";
      break;
    case autopar::PlanPrecisionOption::FP16:
      flags.precision = "fp16";
      break;
    }
    switch (recompute) {
    case autopar::PlanRecomputeOption::Auto:
      break;
    case autopar::PlanRecomputeOption::None:
      flags.recompute = "none";
      break;
    case autopar::PlanRecomputeOption::Selective:
      flags.recompute = "selective";
      break;
    case autopar::PlanRecomputeOption::Full:
      flags.recompute = "full";
      break;
    }
    flags.dp = dp;
    flags.tp = tp;
    flags.pp = pp;
    flags.zero = zero;
    flags.microBatchSize = microBatchSize;
    return autopar::buildPlanRequest(flags);
  }
};
} // namespace
