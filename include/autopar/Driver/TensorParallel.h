//===- TensorParallel.h - A program partitioned over a tp group -*- C++ -*-===//
//
// A data-parallel replica's (or a pipeline stage's) program split over the
// `tp` ranks of its tensor-parallel group: planned for the group, annotated,
// partitioned by upstream `sharding-propagation` + `shard-partition`, and
// its collectives lowered to runtime calls. Every step is a pass; the whole
// is registered as `autopar-tp-partition-pipeline` so that autopar-opt
// reproduces what autopar-compile does.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DRIVER_TENSORPARALLEL_H
#define AUTOPAR_DRIVER_TENSORPARALLEL_H

#include "autopar/Driver/TrainingStep.h"
#include "autopar/Planner/Planner.h"
#include "autopar/Target/Artifact.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <vector>

namespace autopar {

/// `request` narrowed to one tp group of its devices: `tp` devices on one
/// node, every dimension pinned (dp = pp = 1).
PlanRequest tensorParallelGroupRequest(const PlanRequest &request, int64_t tp);

/// The `autopar-plan` pass for a tp group of `tp` CPU ranks (`local:tp`),
/// for autopar-opt's pipelines.
std::unique_ptr<mlir::Pass> createLocalTensorParallelPlan(int64_t tp);

/// The passes that plan and annotate a program for a tp group:
/// `autopar-expose-projection-parts`, `planPass` (an `autopar-plan`), and
/// `autopar-replicate-graph-io`.
void addTensorParallelAnnotation(mlir::OpPassManager &pm,
                                 std::unique_ptr<mlir::Pass> planPass);

/// The passes that partition an annotated program: `sharding-propagation`,
/// `autopar-check-partitionable`, `shard-partition`,
/// `autopar-lower-embeddings` and `autopar-merge-projection-parts`.
void addTensorParallelPartitioning(mlir::OpPassManager &pm);

/// The passes that turn the partitioned program's `shard` collectives into
/// runtime calls: `autopar-lower-collectives-to-runtime`, canonicalize.
void addCollectiveLowering(mlir::OpPassManager &pm);

/// Registers `autopar-tp-partition-pipeline{tp=N}`: the three above, with
/// the group planned as `local:N` (autopar-compile plans it on the user's
/// cluster's devices).
void registerTensorParallelPipeline();

/// Partitions `module` (its `@main`) over `tp` ranks with the plan the
/// planner chooses for one tp group of `request`'s devices. Records in
/// `arguments` each parameter's local block (split dim and axis), and in
/// `predicted`, if given, the collectives the group's plan predicts.
/// `dumpIR(name, module)` sees the annotated and the partitioned program.
/// Fails, with diagnostics reported, when the program cannot be
/// partitioned.
mlir::LogicalResult partitionTensorParallel(
    mlir::ModuleOp module, int64_t tp, const PlanRequest &request,
    std::vector<ArtifactArgument> &arguments,
    std::vector<CollectiveVolume> *predicted,
    llvm::function_ref<void(llvm::StringRef, mlir::ModuleOp)> dumpIR);

/// \p v annotated whole (replicated) on every rank of @autopar_grid.
mlir::Value annotateWhole(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::Value v);

/// Partitions the differentiated program \p f of \p module over its
/// tensor-parallel group (the plan annotated its forward before autodiff,
/// whose shard rule lays out each cotangent as its value, so the backward
/// gets Megatron's conjugate collectives), folding the collectives as they
/// will run. A parameter the plan splits becomes this rank's block and is
/// marked `autopar.tp_split` (its dim). Its other arguments, and the results
/// for which \p resultMayBeBlock is false, must stay whole. \p what names
/// the program in errors ("pipeline stage 1", "the training step").
llvm::Error
partitionDifferentiated(mlir::ModuleOp module, mlir::func::FuncOp f,
                        llvm::StringRef what,
                        llvm::function_ref<bool(unsigned)> resultMayBeBlock);

/// Partitions a training step that `buildTrainingStepPipeline` planned and
/// annotated for a tp group (TrainingStepOptions::tensorParallel), leaving
/// its `shard` collectives (for stepCollectives; addCollectiveLowering
/// lowers them). Records in `splits`, for each argument then each result
/// of @main, the whole shape and the dim split over tp of those that each
/// rank holds a block of (parameters, optimizer states, updates); inputs,
/// the loss and the metrics must stay whole. Fails, with diagnostics
/// reported, when the step cannot be partitioned.
mlir::LogicalResult
partitionTrainingStep(mlir::ModuleOp module,
                      std::vector<TensorParallelSplit> &splits);

} // namespace autopar

#endif // AUTOPAR_DRIVER_TENSORPARALLEL_H
