//===- CpuCodegen.h - linalg-on-tensors to a native shared library -*- C++ -*-//
//
// The CPU backend: bufferizes the imported (or partitioned) program, hands
// contractions to the runtime's BLAS kernels, lowers everything else to loops
// that LLVM vectorizes, and links the result into a `.so` that `autopar-run`
// loads. The library exports only `void autopar_entry(void **args)`.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TARGET_CPUCODEGEN_H
#define AUTOPAR_TARGET_CPUCODEGEN_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace autopar {

/// The textual pass pipeline (nested under builtin.module) that lowers
/// linalg on tensors to the LLVM
/// dialect, up to (not including) the packed entry point.
llvm::StringRef getCpuLoweringPipeline();

/// Lowers `module` in place to the LLVM dialect, adding `autopar_entry`.
/// `@main`'s arguments (after outputs became arguments) must be static.
mlir::LogicalResult lowerToLLVMForCpu(mlir::ModuleOp module);

/// Options for native code generation.
struct CpuCodegenOptions {
  /// LLVM CPU name; "native" means the host's CPU and features.
  std::string cpu = "native";
  /// LLVM optimization level, 0-3.
  unsigned optLevel = 3;
  /// If non-empty, the optimized LLVM IR is also written here.
  std::string llvmIRPath;
};

/// Translates an LLVM-dialect module to LLVM IR, optimizes it, emits an object
/// file and links `soPath` with the system C compiler driver (`cc`).
mlir::LogicalResult emitSharedLibrary(mlir::ModuleOp module,
                                      llvm::StringRef soPath,
                                      const CpuCodegenOptions &options,
                                      std::string &error);

} // namespace autopar

#endif // AUTOPAR_TARGET_CPUCODEGEN_H
