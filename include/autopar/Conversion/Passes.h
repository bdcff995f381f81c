//===- Passes.h - autopar conversion passes ---------------------*- C++ -*-===//

#ifndef AUTOPAR_CONVERSION_PASSES_H
#define AUTOPAR_CONVERSION_PASSES_H

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Pass/Pass.h"

namespace autopar {

/// Attribute on `@main` listing each argument's static shape (an array of
/// dense i64 arrays), recorded before lowering for `autopar-emit-packed-entry`.
inline constexpr llvm::StringLiteral kArgShapesAttr = "autopar.arg_shapes";

/// Attribute by which `autopar-outline-loop-nests` tells
/// `autopar-mark-noalias` which lowered arguments of an outlined function are
/// pointers that alias no other argument.
inline constexpr llvm::StringLiteral kNoAliasPointerArgs =
    "autopar.noalias_pointer_args";

/// Attribute `autopar-linalg-to-loops` sets on the scf.for whose iterations
/// write disjoint elements (its value: the iterations of the loops inside
/// it), for `autopar-outline-loop-nests` to split among threads.
inline constexpr llvm::StringLiteral kParallelLoopAttr = "autopar.parallel";

/// Attribute `autopar-outline-loop-nests` sets on an outlined function whose
/// last two arguments are the range [first, last) of a parallel loop's
/// iterations: array<i64: iterations, work per iteration>, for
/// `autopar-parallel-loop-calls`.
inline constexpr llvm::StringLiteral kParallelRangeAttr =
    "autopar.parallel_range";

/// The rewrites `autopar-lower-collectives-to-runtime` makes among `shard`
/// collectives before lowering them (a sum all-reduced only to be sliced
/// becomes a reduce-scatter), for counting a program's collectives as they
/// will run.
void populateCollectiveFoldPatterns(mlir::RewritePatternSet &patterns);

#define GEN_PASS_DECL
#include "autopar/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "autopar/Conversion/Passes.h.inc"

} // namespace autopar

#endif // AUTOPAR_CONVERSION_PASSES_H
