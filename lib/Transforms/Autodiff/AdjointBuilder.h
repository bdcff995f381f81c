//===- AdjointBuilder.h - State of one reverse sweep ------------*- C++ -*-===//
//
// The reverse sweep visits the forward ops last to first. Each op's adjoint
// rule reads the adjoints of its results and adds a contribution to each of
// its operands that carries a gradient (is "active"). Rules live in one file
// per op family; this header is what they share.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_LIB_TRANSFORMS_AUTODIFF_ADJOINTBUILDER_H
#define AUTOPAR_LIB_TRANSFORMS_AUTODIFF_ADJOINTBUILDER_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace autopar::autodiff {

/// Adjoints accumulated so far, and the builder the rules emit with. The
/// insertion point stays just before the function's terminator.
class AdjointBuilder {
public:
  AdjointBuilder(mlir::OpBuilder &builder,
                 const llvm::DenseSet<mlir::Value> &active)
      : builder(builder), active(active) {}

  mlir::OpBuilder &getBuilder() { return builder; }

  /// Whether `v` carries a gradient (depends on a differentiated argument
  /// and the loss depends on it).
  bool isActive(mlir::Value v) const { return active.contains(v); }

  /// The adjoint of `v` accumulated so far; null when nothing flowed back
  /// into it (a zero adjoint).
  mlir::Value getAdjoint(mlir::Value v) const { return adjoints.lookup(v); }

  /// Adds `contribution` (of `v`'s type) to `v`'s adjoint. Inactive values
  /// are ignored, so rules may call this for every operand.
  void accumulate(mlir::Value v, mlir::Value contribution);

  /// A zero tensor of `type`.
  mlir::Value zeros(mlir::Location loc, mlir::RankedTensorType type);

private:
  mlir::OpBuilder &builder;
  const llvm::DenseSet<mlir::Value> &active;
  llvm::DenseMap<mlir::Value, mlir::Value> adjoints;
};

/// Adds the contributions of `op` (whose results' adjoints are in
/// `adjoints`) to its active operands. Returns failure, without emitting a
/// diagnostic, when no rule covers `op`; the caller reports every such op at
/// once.
llvm::LogicalResult applyAdjointRule(mlir::Operation *op,
                                     AdjointBuilder &adjoints);

// One entry point per op family (each returns failure when `op` is of its
// family but not covered, and is only called for ops of its family).
llvm::LogicalResult applyLinalgAdjoint(mlir::Operation *op,
                                       AdjointBuilder &adjoints);
llvm::LogicalResult applyTensorAdjoint(mlir::Operation *op,
                                       AdjointBuilder &adjoints);
/// The table's gradient of an embedding lookup (a scatter-add, written as a
/// one-hot reduction); fails for any other op.
llvm::LogicalResult applyEmbeddingAdjoint(mlir::Operation *op,
                                          AdjointBuilder &adjoints);

/// The query, key and value gradients of an autopar.attention (one
/// autopar.attention_grad); fails for any other op.
llvm::LogicalResult applyAttentionAdjoint(mlir::Operation *op,
                                          AdjointBuilder &adjoints);

/// The logits' gradient of an autopar.softmax_cross_entropy (one
/// autopar.softmax_cross_entropy_grad); fails for any other op.
llvm::LogicalResult applyCrossEntropyAdjoint(mlir::Operation *op,
                                             AdjointBuilder &adjoints);

/// `shard.shard` (the same annotation on the cotangent, read the other way)
/// and `shard.all_reduce` (a sum over replicas: the sum of the adjoints).
llvm::LogicalResult applyShardAdjoint(mlir::Operation *op,
                                      AdjointBuilder &adjoints);

/// Scalar reverse mode inside a structured op's body: given the body ops
/// already cloned with `mapping` (forward body value -> cloned value) and a
/// seed adjoint for the forward body value `seeded`, emits at `b`'s insertion
/// point the adjoint of the forward body value `wrt` (null if it does not
/// depend on `seeded`). Fails when a body op on the path has no scalar rule;
/// `unsupported` then names it.
llvm::FailureOr<mlir::Value>
buildScalarAdjoint(mlir::OpBuilder &b, mlir::Location loc,
                   mlir::Block &forwardBody, const mlir::IRMapping &mapping,
                   mlir::Value seeded, mlir::Value seed, mlir::Value wrt,
                   std::string &unsupported);

} // namespace autopar::autodiff

#endif // AUTOPAR_LIB_TRANSFORMS_AUTODIFF_ADJOINTBUILDER_H
