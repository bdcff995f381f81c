//===- PipelineStages.h - The programs of a pipeline plan -------*- C++ -*-===//
//
// A plan with pipeline stages runs one program per stage, each compiled for
// one micro-batch: the model is imported again at the micro-batch size, its
// ops are marked with the plan's stages, and `autopar-split-pipeline-stages`
// cuts it into one module per stage.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DRIVER_PIPELINESTAGES_H
#define AUTOPAR_DRIVER_PIPELINESTAGES_H

#include "autopar/Import/OnnxImporter.h"
#include "autopar/Planner/Planner.h"
#include "autopar/Target/Artifact.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <vector>

namespace autopar {

/// One stage's program (its module's `@main`) and the entry's arguments.
struct StageProgram {
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<ArtifactArgument> arguments;
};

/// Builds the stage programs of `plan` (pp > 1) for the model at
/// `modelPath`. `globalArguments` are the arguments of the model imported
/// at the global batch `globalBatch`: inputs and outputs get their global
/// shape from them, and a split over dp when `plan.dp` > 1. Every input and
/// output must carry the batch as its leading dim. Errors say why the plan
/// cannot run as a pipeline (MLIR diagnostics have been reported).
llvm::Expected<std::vector<StageProgram>>
buildPipelineStages(mlir::MLIRContext &context, llvm::StringRef modelPath,
                    const ImportOptions &options, const PlanCandidate &plan,
                    llvm::ArrayRef<ArtifactArgument> globalArguments,
                    int64_t globalBatch);

} // namespace autopar

#endif // AUTOPAR_DRIVER_PIPELINESTAGES_H
