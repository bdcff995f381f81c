//===- GpuCodegen.h - linalg-on-tensors to CUDA kernels and host code -*- C++
//-*-//
//
// The GPU backend (docs/design/gpu-backend.md): bufferizes the program like
// the CPU backend, hands GEMMs (and convolutions, through im2col) to the
// runtime's cuBLASLt kernels, maps every other loop nest onto `gpu.launch`
// kernels that upstream MLIR compiles to a cubin for the cluster's GPU
// architecture, and links the host code (which calls MLIR's `mgpu*` runtime
// ABI, implemented by the autopar CUDA runtime) into the same kind of `.so`
// as on CPU (SharedLibrary.h), with the cubin embedded.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TARGET_GPUCODEGEN_H
#define AUTOPAR_TARGET_GPUCODEGEN_H

#include "autopar/Transforms/Passes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace autopar {

/// The device code generation target.
struct GpuTarget {
  /// The GPU architecture, e.g. "sm_90" (DeviceSpec::arch).
  std::string arch;
  /// Root of the CUDA toolkit: `bin/ptxas` assembles the cubins,
  /// `nvvm/libdevice` provides math functions.
  std::string cudaPath;
  /// Threads per block of the generated kernels.
  int64_t blockSize = 256;
  /// Storage type of parameters and activations: "fp32", or "bf16"/"fp16"
  /// (f32 arithmetic, f32 accumulation; autopar-mixed-precision).
  std::string precision = "fp32";
  /// Fuse attention into the FlashAttention kernels (autopar-fuse-attention).
  bool fuseAttention = true;
};

/// The NVPTX feature selecting the PTX ISA version `arch` needs (the oldest
/// that supports it, e.g. "+ptx78" for sm_90); an error for an unknown arch.
llvm::Expected<std::string> getPtxFeatures(llvm::StringRef arch);

/// Finds the CUDA toolkit: `explicitPath` when given, else $CUDA_HOME or
/// $CUDA_PATH, else the toolkit found when autopar was built, else the
/// directory above a `ptxas` on PATH. An error says what was looked at when
/// none has `bin/ptxas`.
llvm::Expected<std::string> findCudaToolkit(llvm::StringRef explicitPath);

/// Registers what GPU lowering needs besides the dialects: the NVVM target
/// attribute's serialization (ptxas) and the GPU/NVVM translations to LLVM
/// IR that embed the cubins.
void registerGpuCodegenExtensions(mlir::DialectRegistry &registry);

/// autopar-fuse-attention's options for the CUDA kernels: head dims that are
/// multiples of 8, at most 128.
FuseAttentionOptions gpuFuseAttentionOptions();

/// Tensors to buffers: fusion, convolutions as im2col + GEMM, the storage
/// type of `target.precision`, One-Shot Bufferize, results as out-params.
void buildGpuBufferizationPipeline(mlir::OpPassManager &pm,
                                   const GpuTarget &target);

/// Bufferized program (with `autopar.arg_shapes` recorded on `@main`) to
/// cuBLASLt calls, CUDA kernels assembled into cubins for `target.arch`
/// (`ptxFeatures` from getPtxFeatures), host code in the LLVM dialect, and
/// the packed entry.
void buildGpuLoweringToLLVMPipeline(mlir::OpPassManager &pm,
                                    const GpuTarget &target,
                                    llvm::StringRef ptxFeatures);

/// The whole GPU pipeline (registered as `autopar-gpu-pipeline`): the two
/// above with `autopar-record-argument-shapes` between them.
void buildGpuPipeline(mlir::OpPassManager &pm, const GpuTarget &target,
                      llvm::StringRef ptxFeatures);

/// Lowers `module` in place: host code in the LLVM dialect with
/// `autopar_entry`, kernels in `gpu.binary` ops. Registers the LLVM IR
/// translations the result needs (GPU, NVVM) with the module's context, so
/// that `emitSharedLibrary` can translate it. `argumentDTypes`, if given,
/// receives the `autopar.dtype` of each argument of the lowered `@main`
/// (parameters stored in bf16/f16 differ from the model's).
mlir::LogicalResult
lowerToLLVMForGpu(mlir::ModuleOp module, const GpuTarget &target,
                  std::vector<std::string> *argumentDTypes = nullptr);

/// Writes the object of every `gpu.binary` in `module` to
/// `dir/device/<program>.<arch>.cubin` (with one binary) or
/// `dir/device/<program>.<binary>.<arch>.cubin` (several), and returns the
/// paths relative to `dir`, for the manifest's `device_code`.
llvm::Expected<std::vector<std::string>>
writeDeviceCode(mlir::ModuleOp module, llvm::StringRef dir,
                llvm::StringRef program, llvm::StringRef arch);

} // namespace autopar

#endif // AUTOPAR_TARGET_GPUCODEGEN_H
