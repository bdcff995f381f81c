//===- SharedLibrary.h - A lowered program as a loadable .so ---*- C++ -*-===//
//
// What every backend shares once its lowering has reached the LLVM dialect:
// the host code's translation to LLVM IR, optimization, object emission
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
