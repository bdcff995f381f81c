//===- autopar-opt.cpp - MLIR optimizer driver that also reads ONNX -------===//
//
// Like mlir-opt, with every autopar pass registered. An input ending in
// `.onnx` (binary) or `.onnxtxt` (ONNX textual syntax) is imported first;
// `--input-shape NAME=D0xD1...` binds its symbolic dims.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"
#include "autopar/Driver/TensorParallel.h"
#include "autopar/Driver/TrainingStep.h"
#include "autopar/Import/OnnxImporter.h"
#include "autopar/Target/GpuCodegen.h"
#include "autopar/Target/LoweringPasses.h"
#include "autopar/Transforms/Passes.h"
#include "autopar/Transforms/ShardingModels.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace mlir;

static llvm::cl::list<std::string>
    inputShapes("input-shape",
                llvm::cl::desc("Shape of an ONNX graph input: NAME=D0xD1x... "
                               "(repeatable; binds symbolic dims)"),
                llvm::cl::value_desc("NAME=DIMS"));

static llvm::cl::list<std::string> constInputs(
    "const-input",
    llvm::cl::desc("Freeze an ONNX graph input to the contents of a .npy "
                   "file (for inputs that decide shapes)"),
    llvm::cl::value_desc("NAME=FILE.npy"));

static llvm::cl::opt<bool> trainingState(
    "training-state",
    llvm::cl::desc("Import for a training step: parameters that training "
                   "updates besides the trained ones (BatchNorm's running "
                   "statistics) get their new value as results marked "
                   "autopar.update, as autopar-compile --mode train does"),
    llvm::cl::init(false));

static llvm::cl::opt<bool> evalMode(
    "eval-mode",
    llvm::cl::desc("Import a training-mode model for evaluation: Dropout "
                   "off, BatchNorm on its running statistics (the eval "
                   "program of autopar-compile --mode train)"),
    llvm::cl::init(false));

static llvm::cl::opt<int64_t> batchRatio(
    "batch-ratio",
    llvm::cl::desc("The inputs' batch (--input-shape) is this many times "
                   "smaller than the one the file was exported at: Reshape "
                   "targets with the exported batch baked in are scaled "
                   "down (one micro-batch of gradient accumulation)"),
    llvm::cl::init(1));

static llvm::cl::opt<int64_t> dataParallelReplicas(
    "data-parallel-replicas",
    llvm::cl::desc("Import one of N data-parallel replicas of a training step: "
                   "BatchNormalization's batch statistics are averaged over "
                   "them (shard.all_reduce), as autopar-compile --mode train "
                   "on local:N does"),
    llvm::cl::init(1));

/// Imports `path` and returns the module printed with its locations.
static std::unique_ptr<llvm::MemoryBuffer>
importToBuffer(DialectRegistry &registry, llvm::StringRef path) {
  autopar::ImportOptions options;
  options.trainingStateUpdates = trainingState;
  options.evalMode = evalMode;
  options.batchRatio = batchRatio;
  options.dataParallelReplicas = dataParallelReplicas;
  for (const std::string &flag : inputShapes) {
    std::string error;
    if (failed(autopar::parseInputShapeFlag(flag, options, error))) {
      llvm::errs() << "autopar-opt: error: " << error << "\n";
      return nullptr;
    }
  }
  for (const std::string &flag : constInputs) {
    std::string error;
    if (failed(autopar::parseConstInputFlag(flag, options, error))) {
      llvm::errs() << "autopar-opt: error: " << error << "\n";
      return nullptr;
    }
  }
  MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler handler(sourceMgr, &context);
  OwningOpRef<ModuleOp> module =
      autopar::importOnnxFile(&context, path, options);
  if (!module)
    return nullptr;
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os, OpPrintingFlags().enableDebugInfo());
  return llvm::MemoryBuffer::getMemBufferCopy(text, path);
}

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  registerAllPasses();
  autopar::registerAutoparConversionPasses();
  autopar::registerAutoparTransformsPasses();
  autopar::registerTrainingStepPipeline();
  autopar::registerTensorParallelPipeline();
  autopar::registerLoweringPipelines();

  DialectRegistry registry;
  // autopar's sharding models first (registerAllDialects brings upstream's
  // linalg models, and the first attached wins): they replace upstream's.
  autopar::registerShardingModels(registry);
  registerAllDialects(registry);
  registerAllExtensions(registry);
  autopar::registerImportDialects(registry);
  // autopar-gpu-pipeline assembles cubins and embeds them.
  autopar::registerGpuCodegenExtensions(registry);

  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      argc, argv, "autopar optimizer driver", registry);
  llvm::StringRef input = inputFilename;
  if (!input.ends_with(".onnx") && !input.ends_with(".onnxtxt"))
    return asMainReturnCode(
        MlirOptMain(argc, argv, inputFilename, outputFilename, registry));

  std::unique_ptr<llvm::MemoryBuffer> buffer = importToBuffer(registry, input);
  if (!buffer)
    return 1;
  std::string error;
  auto output = openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << "autopar-opt: error: " << error << "\n";
    return 1;
  }
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  if (failed(MlirOptMain(output->os(), std::move(buffer), registry, config)))
    return 1;
  output->keep();
  return 0;
}
