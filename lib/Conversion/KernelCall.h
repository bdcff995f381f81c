//===- KernelCall.h - Calls of the runtime's kernels ------------*- C++ -*-===//
//
// What every lowering to runtime kernels shares: a kernel is an external
// function with MLIR's C interface that takes fully dynamic strided memrefs,
// so one declaration serves every shape and view.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_LIB_CONVERSION_KERNELCALL_H
#define AUTOPAR_LIB_CONVERSION_KERNELCALL_H

#include "mlir/IR/PatternMatch.h"

namespace autopar {

/// Declares (once) `func.func private @name(<operand types>)` with the C
/// interface, memref operands cast to fully dynamic strided memrefs, and
/// replaces `op` by a call to it.
void replaceWithKernelCall(mlir::RewriterBase &rewriter, mlir::Operation *op,
                           llvm::StringRef name, mlir::ValueRange operands);

/// Whether the innermost dim of `type` is contiguous (unit stride, or a
/// single element), as the fused kernels read their rows.
bool hasUnitInnerStride(mlir::MemRefType type);

} // namespace autopar

#endif // AUTOPAR_LIB_CONVERSION_KERNELCALL_H
