//===- SharedLibrary.h - A lowered program as a loadable .so -----*- C++
//-*-===//
//
// What every backend shares once its lowering has reached the LLVM dialect:
// the packed entry point `void autopar_entry(void **args)` (whose argument
// shapes are recorded on `@main` before the memref types are lowered away),
// and the host code's translation to LLVM IR, optimization, object emission
// and link into the `.so` that `autopar-run` loads. On CPU the `.so` is the
// whole program; on GPU it is the host code, with the kernels embedded.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TARGET_SHAREDLIBRARY_H
#define AUTOPAR_TARGET_SHAREDLIBRARY_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace autopar {

/// Registers every pass a lowering pipeline may name (upstream and autopar),
/// once per process.
void registerLoweringPasses();

/// Runs `bufferize` (a textual pipeline nested under builtin.module), records
/// the static shape of each memref argument of `@main` for the packed entry,
/// runs `lower` (which must reach the LLVM dialect) and adds
/// `autopar_entry`. `@main`'s arguments after bufferization must be static,
/// row-major memrefs. `inspect`, if given, sees the bufferized `@main` (the
/// last point where its signature and argument attributes are still there).
mlir::LogicalResult
lowerWithPackedEntry(mlir::ModuleOp module, llvm::StringRef bufferize,
                     llvm::StringRef lower,
                     llvm::function_ref<void(mlir::func::FuncOp)> inspect = {});

/// Options for the host code.
struct SharedLibraryOptions {
  /// LLVM CPU name; "native" means the host's CPU and features.
  std::string cpu = "native";
  /// LLVM optimization level, 0-3.
  unsigned optLevel = 3;
  /// If non-empty, the optimized LLVM IR is also written here.
  std::string llvmIRPath;
};

/// Translates an LLVM-dialect module to LLVM IR, optimizes it, emits an object
/// file and links `soPath` with the system C compiler driver (`cc`). The
/// translations of the dialects left in the module (builtin and LLVM always;
/// GPU and NVVM for device code) must be registered with its context.
mlir::LogicalResult emitSharedLibrary(mlir::ModuleOp module,
                                      llvm::StringRef soPath,
                                      const SharedLibraryOptions &options,
                                      std::string &error);

} // namespace autopar

#endif // AUTOPAR_TARGET_SHAREDLIBRARY_H
