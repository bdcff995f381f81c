//===- PlanPass.cpp - autopar-plan ----------------------------------------===//

#include "autopar/Transforms/Passes.h"
#include "autopar/Transforms/Planner.h"

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
    auto error = [](const llvm::Twine &m) {
      return llvm::createStringError(llvm::inconvertibleErrorCode(), m);
    };
    autopar::PlanRequest request;
    auto spec = autopar::parseClusterSpec(cluster);
    if (!spec)
      return spec.takeError();
    request.cluster = *spec;
    if (mode == "train")
      request.mode = autopar::PlanMode::Training;
    else if (mode != "infer")
      return error("mode '" + mode + "' is not infer or train");
    request.precision = request.cluster.defaultPrecision();
    if (!precision.empty() &&
        !autopar::parsePrecision(precision, request.precision))
      return error("precision '" + precision + "' is not fp32, bf16 or fp16");
    if (dp > 0)
      request.pins.dp = dp;
    if (tp > 0)
      request.pins.tp = tp;
    if (pp > 0)
      request.pins.pp = pp;
    if (zero >= 0)
      request.pins.zeroStage = zero;
    if (microBatchSize > 0)
      request.pins.microBatchSize = microBatchSize;
    if (!recompute.empty()) {
      autopar::Recompute r;
      if (!autopar::parseRecompute(recompute, r))
        return error("recompute '" + recompute +
                     "' is not none, selective or full");
      request.pins.recompute = r;
    }
    return request;
  }
};
} // namespace
