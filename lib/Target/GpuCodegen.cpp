//===- GpuCodegen.cpp - linalg-on-tensors to CUDA kernels and host code ---===//

#include "autopar/Target/GpuCodegen.h"
#include "autopar/Target/SharedLibrary.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
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

std::string getGpuLoweringPipeline(const GpuTarget &target,
                                   llvm::StringRef ptxFeatures) {
  // bf16/fp16: demote what fusion left materialized, then fuse the
  // conversions into the kernels next to them.
  std::string mixedPrecision;
  if (target.precision == "bf16" || target.precision == "fp16")
    mixedPrecision = llvm::formatv(",autopar-mixed-precision{{type={0}},"
                                   "autopar-fuse-elementwise,cse,canonicalize",
                                   target.precision == "bf16" ? "bf16" : "f16")
                         .str();
  // Why each step (docs/design/gpu-backend.md has the long version):
  // - tensors: as on CPU, plus convolutions become im2col + GEMM, since the
  //   runtime's only contraction kernels are cuBLASLt GEMMs; with bf16/fp16
  //   parameters and activations are stored in that type;
  // - bufferize as on CPU: dense row-major arguments, results as
  //   out-params, temporaries freed;
  // - GEMMs become calls to the runtime's cuBLASLt kernels;
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
  return llvm::formatv(
      "func.func(canonicalize,autopar-collapse-batched-contractions,"
      "autopar-fold-transposes-into-matmuls,autopar-conv-to-im2col-gemm,"
      "autopar-fuse-elementwise,cse,canonicalize"
      "{4},autopar-split-shared-inits),"
      "one-shot-bufferize{{bufferize-function-boundaries "
      "function-boundary-type-conversion=identity-layout-map},"
      "buffer-results-to-out-params{{hoist-static-allocs=true "
      "modify-public-functions=true},"
      "func.func(autopar-forward-results-to-out-params,canonicalize),"
      "buffer-deallocation-pipeline,"
      "autopar-lower-contractions-to-cuda-kernels,"
      "autopar-copies-to-linalg,"
      "func.func(autopar-parallel-dims-outermost,autopar-gpu-warp-reductions,"
      "convert-linalg-to-parallel-loops),"
      "math-extend-to-supported-types,"
      "autopar-approximate-math,"
      "arith-expand{{include-bf16=true},"
      "convert-math-to-funcs{{convert-ctlz=false},"
      "func.func(autopar-gpu-wrap-sequential-code,"
      "autopar-gpu-tile-parallel-loops{{block-size={0}},"
      "gpu-map-parallel-loops,convert-parallel-loops-to-gpu,"
      "autopar-gpu-host-memory),"
      "canonicalize,"
      "gpu-launch-sink-index-computations,"
      "gpu-kernel-outlining,"
      "autopar-merge-gpu-modules,"
      "func.func(gpu-async-region),"
      "expand-strided-metadata,"
      "lower-affine,"
      "convert-scf-to-cf,"
      "nvvm-attach-target{{chip={1} features={2} O=3},"
      "gpu.module(convert-gpu-to-nvvm,canonicalize,cse,"
      "reconcile-unrealized-casts),"
      "gpu-to-llvm,"
      "gpu-module-to-binary{{format=bin toolkit={3}},"
      "finalize-memref-to-llvm,"
      "convert-arith-to-llvm,"
      "convert-index-to-llvm,"
      "convert-func-to-llvm,"
      "convert-cf-to-llvm,"
      "reconcile-unrealized-casts",
      target.blockSize, target.arch, ptxFeatures, target.cudaPath,
      mixedPrecision);
}

LogicalResult lowerToLLVMForGpu(ModuleOp module, const GpuTarget &target,
                                std::vector<std::string> *argumentDTypes) {
  MLIRContext *ctx = module.getContext();
  DialectRegistry registry;
  // gpu-module-to-binary serializes through the NVVM target attribute; the
  // LLVM IR translation of gpu.binary embeds the cubin and emits the
  // mgpuModuleLoad/mgpuLaunchKernel calls.
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
  ctx->appendDialectRegistry(registry);

  llvm::Expected<std::string> features = getPtxFeatures(target.arch);
  if (!features)
    return module.emitError(llvm::toString(features.takeError()));
  std::string pipeline = getGpuLoweringPipeline(target, *features);
  // The pipeline is split where @main's memref types are recorded.
  llvm::StringRef text = pipeline;
  size_t split = text.find("autopar-lower-contractions-to-cuda-kernels");
  auto inspect = [&](func::FuncOp main) {
    if (!argumentDTypes || !main)
      return;
    argumentDTypes->clear();
    for (unsigned i = 0; i < main.getNumArguments(); ++i) {
      auto dtype = main.getArgAttrOfType<StringAttr>(i, "autopar.dtype");
      argumentDTypes->push_back(dtype ? dtype.str() : "");
    }
  };
  return lowerWithPackedEntry(module, text.substr(0, split).rtrim(','),
                              text.substr(split), inspect);
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
