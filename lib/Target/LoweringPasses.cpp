//===- LoweringPasses.cpp - Steps the CPU and GPU pipelines share ---------===//

#include "autopar/Target/LoweringPasses.h"
#include "autopar/Conversion/Passes.h"
#include "autopar/Target/CpuCodegen.h"
#include "autopar/Target/GpuCodegen.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
namespace autopar {

void addBufferizationPasses(OpPassManager &pm,
                            bool allowReturnAllocsFromLoops) {
  // Each result its own value, so that each gets its own out-param.
  pm.addNestedPass<func::FuncOp>(createDistinctResults());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.allowReturnAllocsFromLoops = allowReturnAllocsFromLoops;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.modifyPublicFunctions = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  OpPassManager &forward = pm.nest<func::FuncOp>();
  forward.addPass(createForwardResultsToOutParams());
  forward.addPass(createCanonicalizerPass());
  bufferization::buildBufferDeallocationPipeline(pm);
}

void addMathLoweringPasses(OpPassManager &pm) {
  pm.addPass(math::createMathExtendToSupportedTypes());
  pm.addPass(createApproximateMath());
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  ConvertMathToFuncsOptions toFuncs;
  toFuncs.convertCtlz = false;
  pm.addPass(createConvertMathToFuncs(toFuncs));
}

void applyPassManagerCLOptionsIfAny(PassManager &pm) {
  // Fails only when the tool did not register the options: nothing to do.
  (void)applyPassManagerCLOptions(pm);
}

namespace {

struct GpuPipelineOptions : public PassPipelineOptions<GpuPipelineOptions> {
  Option<std::string> arch{*this, "arch",
                           llvm::cl::desc("GPU architecture, e.g. sm_90"),
                           llvm::cl::init("sm_90")};
  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("Storage type of parameters and activations: fp32, "
                     "bf16 or fp16"),
      llvm::cl::init("fp32")};
  Option<std::string> cudaPath{
      *this, "cuda-path",
      llvm::cl::desc("CUDA toolkit root whose bin/ptxas assembles the "
                     "kernels (default: found as autopar-compile finds it)")};
  Option<int64_t> blockSize{*this, "block-size",
                            llvm::cl::desc("Threads per block"),
                            llvm::cl::init(256)};
};

struct ReportErrorPass : PassWrapper<ReportErrorPass, OperationPass<>> {
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(ReportErrorPass)
  explicit ReportErrorPass(std::string message) : message(std::move(message)) {}
  void runOnOperation() override {
    getOperation()->emitError(message);
    signalPassFailure();
  }
  std::string message;
};

} // namespace

std::unique_ptr<Pass> createReportErrorPass(std::string message) {
  return std::make_unique<ReportErrorPass>(std::move(message));
}

void registerLoweringPipelines() {
  PassPipelineRegistration<>(
      "autopar-cpu-pipeline",
      "Lower linalg on tensors to the LLVM dialect for CPU ranks, with the "
      "packed entry autopar_entry (as autopar-compile does for local:N)",
      [](OpPassManager &pm) { buildCpuPipeline(pm); });
  PassPipelineRegistration<GpuPipelineOptions>(
      "autopar-gpu-pipeline",
      "Lower linalg on tensors to CUDA kernels (assembled into cubins) and "
      "host code in the LLVM dialect, with the packed entry (as "
      "autopar-compile does for a GPU cluster)",
      [](OpPassManager &pm, const GpuPipelineOptions &options) {
        GpuTarget target;
        target.arch = options.arch;
        target.precision = options.precision;
        target.blockSize = options.blockSize;
        llvm::Expected<std::string> features = getPtxFeatures(target.arch);
        llvm::Expected<std::string> toolkit = findCudaToolkit(options.cudaPath);
        if (!features || !toolkit) {
          std::string message = !features ? llvm::toString(features.takeError())
                                          : llvm::toString(toolkit.takeError());
          if (!features)
            llvm::consumeError(toolkit.takeError());
          pm.addPass(createReportErrorPass("autopar-gpu-pipeline: " + message));
          return;
        }
        target.cudaPath = *toolkit;
        buildGpuPipeline(pm, target, *features);
      });
}

} // namespace autopar
