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
    flags.mode = mode;
    flags.precision = precision;
    flags.recompute = recompute;
    flags.dp = dp;
    flags.tp = tp;
    flags.pp = pp;
    flags.zero = zero;
    flags.microBatchSize = microBatchSize;
    return autopar::buildPlanRequest(flags);
  }
};
} // namespace
