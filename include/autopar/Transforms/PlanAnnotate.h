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

} // namespace autopar

#endif // AUTOPAR_TRANSFORMS_PLANANNOTATE_H
