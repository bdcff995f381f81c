//===- CpuCodegen.h - linalg-on-tensors to a native shared library -*- C++ -*-//
//
// The CPU backend: bufferizes the imported (or partitioned) program, hands
// contractions to the runtime's BLAS kernels, lowers everything else to loops
// that LLVM vectorizes, and links the result into a `.so` that `autopar-run`
// loads (SharedLibrary.h). The library exports only
// `void autopar_entry(void **args)`.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TARGET_CPUCODEGEN_H
#define AUTOPAR_TARGET_CPUCODEGEN_H

#include "autopar/Target/SharedLibrary.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringRef.h"

namespace autopar {

/// Tensors to buffers: fusion (with `fuseAttention`, attention into
/// FlashAttention kernels first), One-Shot Bufferize, results as out-params.
void buildCpuBufferizationPipeline(mlir::OpPassManager &pm,
                                   bool fuseAttention = true);

/// Bufferized program (with `autopar.arg_shapes` recorded on `@main`) to the
/// LLVM dialect, BLAS calls for contractions, and the packed entry
/// `autopar_entry`.
void buildCpuLoweringToLLVMPipeline(mlir::OpPassManager &pm);

/// The whole CPU pipeline (registered as `autopar-cpu-pipeline`): the two
/// above with `autopar-record-argument-shapes` between them.
void buildCpuPipeline(mlir::OpPassManager &pm, bool fuseAttention = true);

/// Lowers `module` in place to the LLVM dialect, adding `autopar_entry`.
/// `@main`'s arguments (after outputs became arguments) must be static.
mlir::LogicalResult lowerToLLVMForCpu(mlir::ModuleOp module,
                                      bool fuseAttention = true);

} // namespace autopar

#endif // AUTOPAR_TARGET_CPUCODEGEN_H
