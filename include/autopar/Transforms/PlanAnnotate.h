//===- PlanAnnotate.h - The chosen plan written into the IR -----*- C++ -*-===//
//
// The IR side of planning: the planner (autopar/Planner) chooses a plan and
// rewrites nothing; these functions write its decisions into the module for
// partitioning and pipeline splitting.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TRANSFORMS_PLANANNOTATE_H
#define AUTOPAR_TRANSFORMS_PLANANNOTATE_H

#include "autopar/Planner/Planner.h"
#include "autopar/Transforms/Training.h"

#include "mlir/Pass/Pass.h"

#include <functional>
#include <memory>

namespace autopar {

/// Annotates `module` with the plan: a `shard.grid @autopar_grid` of shape
/// dp x tp (x pp), `shard.shard` ops carrying each op's chosen sharding (for
/// upstream `sharding-propagation` and `shard-partition`), the batch split of
/// the inputs over dp, and `autopar.stage` on every op.
void annotateModuleWithPlan(mlir::ModuleOp module, const PlanResult &result);

/// Sets `autopar.stage` on every op of `main` to the stage `plan` gives the
/// op's segment. `main` may be another import of the planned model, for one
/// micro-batch instead of the global batch, as long as it cuts into the same
/// segments; an error says when it does not.
llvm::Error assignPipelineStages(mlir::func::FuncOp main,
                                 const PlanCandidate &plan);

/// `autopar-plan` planning with `request` as the caller built it (a tensor-
/// parallel group's cluster, the model's name) instead of its options;
/// `onPlanned`, if given, receives the plan the module is annotated with.
std::unique_ptr<mlir::Pass>
createAutoparPlanPass(PlanRequest request,
                      std::function<void(const PlanResult &)> onPlanned = {});

/// The spellings of the typed plan options in PlanFlags (autopar-compile's
/// flags): "infer"/"train"; "", "fp32", "bf16", "fp16"; "", "none",
/// "selective", "full" ("" is Auto: the planner's choice).
llvm::StringRef planOptionSpelling(PlanModeOption mode);
llvm::StringRef planOptionSpelling(PlanPrecisionOption precision);
llvm::StringRef planOptionSpelling(PlanRecomputeOption recompute);

} // namespace autopar

#endif // AUTOPAR_TRANSFORMS_PLANANNOTATE_H
