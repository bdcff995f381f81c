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
#include "llvm/ADT/StringRef.h"

namespace autopar {

/// The textual pass pipeline (nested under builtin.module) that lowers
/// linalg on tensors to the LLVM
/// dialect, up to (not including) the packed entry point.
llvm::StringRef getCpuLoweringPipeline();

/// Lowers `module` in place to the LLVM dialect, adding `autopar_entry`.
/// `@main`'s arguments (after outputs became arguments) must be static.
mlir::LogicalResult lowerToLLVMForCpu(mlir::ModuleOp module);

} // namespace autopar

#endif // AUTOPAR_TARGET_CPUCODEGEN_H
