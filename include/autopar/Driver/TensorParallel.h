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

#include "autopar/Planner/Planner.h"
#include "autopar/Target/Artifact.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <memory>
#include <vector>

namespace autopar {

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

} // namespace autopar

#endif // AUTOPAR_DRIVER_TENSORPARALLEL_H
