//===- PipelineStages.cpp - The programs of a pipeline plan ---------------===//

#include "autopar/Driver/PipelineStages.h"

#include "autopar/Target/LoweringPasses.h"
#include "autopar/Transforms/Passes.h"
#include "autopar/Transforms/PlanAnnotate.h"

#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
namespace autopar {

static llvm::Error error(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

llvm::Expected<std::vector<StageProgram>>
buildPipelineStages(MLIRContext &context, llvm::StringRef modelPath,
                    const ImportOptions &options, const PlanCandidate &plan,
                    llvm::ArrayRef<ArtifactArgument> globalArguments,
                    int64_t globalBatch) {
  int64_t microBatch = plan.microBatchSize;
  int64_t perReplica = microBatch * plan.numMicroBatches;
  if (perReplica * plan.dp != globalBatch)
    return error(llvm::Twine(plan.dp) + " replicas of " +
                 llvm::Twine(plan.numMicroBatches) + " micro-batches of " +
                 llvm::Twine(microBatch) + " do not make the global batch " +
                 llvm::Twine(globalBatch));

  // The stage programs run one micro-batch at a time: import the model at
  // that batch size. Only a batch that is cut needs to lead every input and
  // output.
  bool cut = plan.numMicroBatches > 1 || plan.dp > 1;
  ImportOptions perMicroBatch = options;
  llvm::StringMap<const ArtifactArgument *> wholeInputs, wholeOutputs;
  for (const ArtifactArgument &arg : globalArguments) {
    if (arg.kind == ArtifactArgument::Kind::Output)
      wholeOutputs[arg.name] = &arg;
    if (arg.kind != ArtifactArgument::Kind::Input || !cut)
      continue;
    wholeInputs[arg.name] = &arg;
    if (arg.shape.empty() || arg.shape[0] != globalBatch)
      return error("input '" + arg.name + "' does not have the global batch (" +
                   llvm::Twine(globalBatch) +
                   ") as its leading dim, so it cannot be cut into "
                   "micro-batches");
    llvm::SmallVector<int64_t> shape(arg.shape);
    shape[0] = microBatch;
    perMicroBatch.inputShapes[arg.name] = shape;
  }
  OwningOpRef<ModuleOp> module =
      importOnnxFile(&context, modelPath, perMicroBatch);
  if (!module)
    return error("importing " + modelPath + " for a micro-batch of " +
                 llvm::Twine(microBatch) +
                 " failed (see the diagnostics above)");
  // As every program: merged dims carried apart, then the stages marked
  // as planned and cut apart.
  auto prepare = PassManager::on<ModuleOp>(&context);
  applyPassManagerCLOptionsIfAny(prepare);
  prepare.addNestedPass<func::FuncOp>(createSinkMergingReshapes());
  if (failed(prepare.run(*module)))
    return error("preparing " + modelPath +
                 " for pipeline stages failed (see the diagnostics above)");
  if (llvm::Error err = assignPipelineStages(
          module->lookupSymbol<func::FuncOp>("main"), plan))
    return std::move(err);
  auto pm = PassManager::on<ModuleOp>(&context);
  applyPassManagerCLOptionsIfAny(pm);
  pm.addPass(createSplitPipelineStages());
  if (failed(pm.run(*module)))
    return error("splitting " + modelPath +
                 " into pipeline stages failed (see the diagnostics above)");

  std::vector<StageProgram> stages;
  llvm::SmallVector<ModuleOp> nested(module->getOps<ModuleOp>());
  for (ModuleOp stage : nested) {
    stage->remove();
    StageProgram program;
    program.module = OwningOpRef<ModuleOp>(stage);
    auto args =
        collectArtifactArguments(stage.lookupSymbol<func::FuncOp>("main"));
    if (failed(args))
      return error("stage " + llvm::Twine(stages.size()) +
                   " has an unexpected signature (see the diagnostics above)");
    for (ArtifactArgument &arg : *args) {
      bool input = arg.kind == ArtifactArgument::Kind::Input;
      if (!cut || (!input && arg.kind != ArtifactArgument::Kind::Output))
        continue;
      const ArtifactArgument *whole =
          (input ? wholeInputs : wholeOutputs).lookup(arg.name);
      // A replica's micro-batches, and the replicas, follow one another
      // along the batch dim.
      if (!whole || whole->shape.empty() || arg.shape.empty() ||
          whole->shape[0] != arg.shape[0] * plan.numMicroBatches * plan.dp ||
          llvm::ArrayRef(whole->shape).drop_front() !=
              llvm::ArrayRef(arg.shape).drop_front())
        return error((input ? "input '" : "output '") + arg.name +
                     "' does not keep the batch as its leading dim, so it "
                     "cannot be computed one micro-batch at a time");
      arg.globalShape = whole->shape;
      if (plan.dp > 1) {
        arg.splitDim = 0;
        arg.splitAxis = "dp";
      }
    }
    program.arguments = std::move(*args);
    stages.push_back(std::move(program));
  }
  if (int64_t(stages.size()) != plan.pp)
    return error("the plan has " + llvm::Twine(plan.pp) +
                 " pipeline stages, but its ops cover " +
                 llvm::Twine(stages.size()));
  return stages;
}

} // namespace autopar
