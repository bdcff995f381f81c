//===- GpuCodegen.cpp - linalg-on-tensors to CUDA kernels and host code ---===//

#include "autopar/Target/GpuCodegen.h"
#include "autopar/Conversion/Passes.h"
#include "autopar/Dialect/AttentionPattern.h"
#include "autopar/Target/LoweringPasses.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
namespace autopar {

llvm::Expected<std::string> getPtxFeatures(llvm::StringRef arch) {
  // The oldest PTX ISA that supports each architecture (PTX ISA manual,
  // "Release Notes"; LLVM's NVPTX.td encodes the same table). Without it
  // the NVPTX backend emits PTX 6.0, which ptxas rejects for newer GPUs.
  llvm::StringRef ptx = llvm::StringSwitch<llvm::StringRef>(arch)
                            .Case("sm_75", "+ptx63")
                            .Case("sm_80", "+ptx70")
                            .Case("sm_86", "+ptx71")
                            .Case("sm_87", "+ptx74")
                            .Case("sm_89", "+ptx78")
                            .Case("sm_90", "+ptx78")
                            .Case("sm_90a", "+ptx80")
                            .Case("sm_100", "+ptx86")
                            .Case("sm_120", "+ptx87")
                            .Default("");
  if (arch == "sm_70" || arch == "sm_72")
    return llvm::createStringError(
        "GPU architecture " + arch +
        " (Volta) is not supported: CUDA 13's ptxas no longer assembles for "
        "it; the oldest supported architecture is sm_75");
  if (ptx.empty())
    return llvm::createStringError(
        "unknown GPU architecture '" + arch +
        "'; known: sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a, sm_100, "
        "sm_120");
  return ptx.str();
}

static bool hasPtxas(llvm::StringRef root) {
  llvm::SmallString<256> path(root);
  llvm::sys::path::append(path, "bin", "ptxas");
  return llvm::sys::fs::can_execute(path);
}

llvm::Expected<std::string> findCudaToolkit(llvm::StringRef explicitPath) {
  std::vector<std::string> tried;
  auto check = [&](llvm::StringRef root) {
    if (root.empty())
      return false;
    tried.push_back(root.str());
    return hasPtxas(root);
  };
  if (!explicitPath.empty()) {
    if (check(explicitPath))
      return explicitPath.str();
    return llvm::createStringError(
        "--cuda-path " + explicitPath +
        ": no executable bin/ptxas there (the CUDA toolkit is needed to "
        "assemble the GPU kernels)");
  }
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
    if (std::optional<std::string> value = llvm::sys::Process::GetEnv(var))
      if (check(*value))
        return *value;
#ifdef AUTOPAR_DEFAULT_CUDA_PATH
  if (check(AUTOPAR_DEFAULT_CUDA_PATH))
    return std::string(AUTOPAR_DEFAULT_CUDA_PATH);
#endif
  if (llvm::ErrorOr<std::string> ptxas = llvm::sys::findProgramByName("ptxas"))
    return llvm::sys::path::parent_path(llvm::sys::path::parent_path(*ptxas))
        .str();
  return llvm::createStringError(
      "the CUDA toolkit was not found (looked for bin/ptxas in " +
      (tried.empty() ? std::string("no directory") : llvm::join(tried, ", ")) +
      " and on PATH); install it, or give --cuda-path or CUDA_HOME");
}

FuseAttentionOptions gpuFuseAttentionOptions() {
  AttentionPatternOptions limits = cudaAttentionKernelLimits();
  FuseAttentionOptions options;
  options.maxHeadDim = limits.maxHeadDim;
  options.headDimMultiple = limits.headDimMultiple;
  return options;
}

void buildGpuBufferizationPipeline(OpPassManager &pm, const GpuTarget &target) {
  // Why each step (docs/design/gpu-backend.md has the long version):
  // - tensors: as on CPU, plus convolutions become im2col + GEMM, since the
  //   runtime's only contraction kernels are cuBLASLt GEMMs; with bf16/fp16
  //   parameters and activations are stored in that type (what fusion left
  //   materialized is demoted, then the conversions are fused into the
  //   kernels next to them);
  // - bufferize as on CPU: dense row-major arguments, results as
  //   out-params, temporaries freed at their last use.
  OpPassManager &tensors = pm.nest<func::FuncOp>();
  // Attention first, while its pieces are still the importer's ops, with
  // the head dims the CUDA kernels take.
  if (target.fuseAttention)
    tensors.addPass(createFuseAttention(gpuFuseAttentionOptions()));
  tensors.addPass(createCanonicalizerPass());
  tensors.addPass(createCollapseBatchedContractions());
  tensors.addPass(createFoldTransposesIntoMatmuls());
  tensors.addPass(createConvToIm2colGemm());
  tensors.addPass(createFuseElementwise());
  tensors.addPass(createCSEPass());
  tensors.addPass(createCanonicalizerPass());
  if (target.precision == "bf16" || target.precision == "fp16") {
    MixedPrecisionOptions demote;
    demote.type =
        target.precision == "bf16" ? LowPrecision::BF16 : LowPrecision::F16;
    tensors.addPass(createMixedPrecision(demote));
    tensors.addPass(createFuseElementwise());
    tensors.addPass(createCSEPass());
    tensors.addPass(createCanonicalizerPass());
  }
  // A reduction to a scalar (the gradient norm) gets one partial per outer
  // index instead of one warp for the whole tensor.
  tensors.addPass(createSplitFullReductions());
  tensors.addPass(createSplitSharedInits());
  addBufferizationPasses(pm, /*allowReturnAllocsFromLoops=*/false);
  // Each buffer freed at its last use, as on CPU: the frees return blocks
  // to the runtime's caching allocator, whose reuse is ordered on the one
  // compute stream (collectives on the communication stream are waited for
  // before the compute stream goes on), so a block freed while queued
  // kernels still read it is only handed to work queued after them. Freed
  // at the block's end instead, GPT-2 small's training step held 22 GB on an
  // H100 where the plan predicts 7 GB (bench/RESULTS.md).
  pm.addNestedPass<func::FuncOp>(createDeallocateAtLastUse());
}

void buildGpuLoweringToLLVMPipeline(OpPassManager &pm, const GpuTarget &target,
                                    llvm::StringRef ptxFeatures) {
  // - GEMMs become calls to the runtime's cuBLASLt kernels; an embedding's
  //   gradient (a one-hot reduction) becomes a scatter of atomic adds;
  // - every other op becomes a parallel loop nest with its parallel dims
  //   outermost: a thread per output element, except row reductions, where
  //   a warp per output element reads the row coalesced and combines with
  //   shuffles; work left outside parallel loops is wrapped into one-
  //   thread loops so that the host never touches device memory;
  // - each parallel nest is collapsed, tiled into blocks of threads, and
  //   mapped to a gpu.launch; host buffers become gpu.alloc;
  // - kernels are outlined into one gpu.module, made asynchronous on one
  //   stream, lowered to NVVM and assembled by ptxas into a cubin;
  // - the host code is lowered to the LLVM dialect as on CPU.
  pm.addPass(createLowerContractionsToCudaKernels());
  pm.addPass(createLowerAttentionToKernels(
      LowerAttentionToKernelsOptions{/*library=*/"cuda"}));
  pm.addPass(createLowerCrossEntropyToKernels(
      LowerCrossEntropyToKernelsOptions{/*library=*/"cuda"}));
  pm.addPass(createCopiesToLinalg());
  OpPassManager &loops = pm.nest<func::FuncOp>();
  loops.addPass(createOneHotReductionsToScatter());
  loops.addPass(createParallelDimsOutermost());
  loops.addPass(createGpuWarpReductions());
  loops.addPass(createConvertLinalgToParallelLoopsPass());
  addMathLoweringPasses(pm);
  OpPassManager &kernels = pm.nest<func::FuncOp>();
  kernels.addPass(createWrapSequentialCodeForGpu());
  TileParallelLoopsForGpuOptions tiles;
  tiles.blockSize = target.blockSize;
  kernels.addPass(createTileParallelLoopsForGpu(tiles));
  kernels.addPass(createGpuMapParallelLoopsPass());
  kernels.addPass(createConvertParallelLoopToGpuPass());
  kernels.addPass(createGpuHostMemory());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createMergeGpuModules());
  pm.addNestedPass<func::FuncOp>(createGpuAsyncRegionPass());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  GpuNVVMAttachTargetOptions nvvm;
  nvvm.chip = target.arch;
  nvvm.features = ptxFeatures.str();
  nvvm.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(nvvm));
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(createConvertGpuOpsToNVVMOps());
  device.addPass(createCanonicalizerPass());
  device.addPass(createCSEPass());
  device.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createGpuToLLVMConversionPass());
  GpuModuleToBinaryPassOptions binary;
  binary.compilationTarget = "bin";
  binary.toolkitPath = target.cudaPath;
  pm.addPass(createGpuModuleToBinaryPass(binary));
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createEmitPackedEntry());
}

void buildGpuPipeline(OpPassManager &pm, const GpuTarget &target,
                      llvm::StringRef ptxFeatures) {
  buildGpuBufferizationPipeline(pm, target);
  pm.addPass(createRecordArgumentShapes());
  buildGpuLoweringToLLVMPipeline(pm, target, ptxFeatures);
}

void registerGpuCodegenExtensions(DialectRegistry &registry) {
  // gpu-module-to-binary serializes through the NVVM target attribute; the
  // LLVM IR translation of gpu.binary embeds the cubin and emits the
  // mgpuModuleLoad/mgpuLaunchKernel calls.
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
}

LogicalResult lowerToLLVMForGpu(ModuleOp module, const GpuTarget &target,
                                std::vector<std::string> *argumentDTypes) {
  MLIRContext *ctx = module.getContext();
  DialectRegistry registry;
  registerGpuCodegenExtensions(registry);
  ctx->appendDialectRegistry(registry);
  llvm::Expected<std::string> features = getPtxFeatures(target.arch);
  if (!features)
    return module.emitError(llvm::toString(features.takeError()));
  // In two runs: the bufferized @main is the last point where its argument
  // attributes (the storage types mixed precision chose) are still there.
  auto bufferize = PassManager::on<ModuleOp>(ctx);
  applyPassManagerCLOptionsIfAny(bufferize);
  buildGpuBufferizationPipeline(bufferize, target);
  if (failed(bufferize.run(module)))
    return failure();
  if (auto main = module.lookupSymbol<func::FuncOp>("main");
      main && argumentDTypes) {
    argumentDTypes->clear();
    for (unsigned i = 0; i < main.getNumArguments(); ++i) {
      auto dtype = main.getArgAttrOfType<StringAttr>(i, "autopar.dtype");
      argumentDTypes->push_back(dtype ? dtype.str() : "");
    }
  }
  auto lower = PassManager::on<ModuleOp>(ctx);
  applyPassManagerCLOptionsIfAny(lower);
  lower.addPass(createRecordArgumentShapes());
  buildGpuLoweringToLLVMPipeline(lower, target, *features);
  return lower.run(module);
}

llvm::Expected<std::vector<std::string>>
writeDeviceCode(ModuleOp module, llvm::StringRef dir, llvm::StringRef program,
                llvm::StringRef arch) {
  SmallVector<gpu::BinaryOp> binaries(module.getOps<gpu::BinaryOp>());
  llvm::SmallString<256> deviceDir(dir);
  llvm::sys::path::append(deviceDir, "device");
  if (std::error_code ec = llvm::sys::fs::create_directories(deviceDir))
    return llvm::createStringError("cannot create " + deviceDir + ": " +
                                   ec.message());
  std::vector<std::string> paths;
  for (gpu::BinaryOp binary : binaries) {
    if (binary.getObjects().size() != 1)
      return llvm::createStringError(
          llvm::formatv("gpu.binary @{0} holds {1} objects, expected one "
                        "(for {2})",
                        binary.getSymName(), binary.getObjects().size(), arch)
              .str());
    auto object = cast<gpu::ObjectAttr>(binary.getObjects()[0]);
    std::string name = binaries.size() == 1
                           ? llvm::formatv("{0}.{1}.cubin", program, arch).str()
                           : llvm::formatv("{0}.{1}.{2}.cubin", program,
                                           binary.getSymName(), arch)
                                 .str();
    llvm::SmallString<256> path(deviceDir);
    llvm::sys::path::append(path, name);
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
    if (ec)
      return llvm::createStringError("cannot write " + path + ": " +
                                     ec.message());
    os << object.getObject().getValue();
    paths.push_back("device/" + name);
  }
  return paths;
}

} // namespace autopar
