//===- Recompute.h - Which forward ops a backward recomputes ----*- C++ -*-===//
//
// Recomputation (docs/distributed-training.md) trades compute for the memory
// of the forward values a backward reads. The planner prices three modes;
// these predicates say which ops each mode recomputes, for the planner's
// model of the activations a backward keeps, the rematerialisation pass of
// a one-program step and the stages of a pipeline alike.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PLANNER_RECOMPUTE_H
#define AUTOPAR_PLANNER_RECOMPUTE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

namespace autopar {

/// Constants, empty tensors and fills of constants: cheaper to make again
/// than to keep, under every mode.
bool isRecomputedAnyway(mlir::Operation *op);

/// Selective recomputation (Korthikanti et al.; the planner's model): the
/// memory-bound ops are recomputed, GEMM and convolution outputs kept. Ops
/// without regions (reshapes, slices, casts) count as memory-bound too;
/// collectives (`shard` ops of a partitioned pipeline stage) are kept.
bool isSelectivelyRecomputed(mlir::Operation *op);

/// The ops of \p f's body that depend on the run's random seed (training-
/// mode Dropout's masks), which selective recomputation does not recompute
/// (TRAINING.md: never random ops), though autopar's counter-based masks
/// would come out the same.
llvm::DenseSet<mlir::Operation *> opsReadingTheSeed(mlir::func::FuncOp f);

/// The ops of \p f's body that compute from its parameters, seed and step
/// alone (a transposed weight): the same for every micro-batch, so a
/// pipeline stage's backward makes them again rather than keeping a copy
/// per micro-batch in flight (the planner keeps only what depends on the
/// data). Collectives (`shard` ops) are left out: they are not repeated.
llvm::DenseSet<mlir::Operation *> opsOfParametersAlone(mlir::func::FuncOp f);

} // namespace autopar

#endif // AUTOPAR_PLANNER_RECOMPUTE_H
