//===- AdjointReads.cpp - What an op's adjoint reads of its forward -------===//
//
// The activations a training step keeps from its forward for its backward
// are the values the adjoints read (autodiff's residuals), not every value
// the forward computes: a GEMM's adjoint reads its operands (the activation
// for the weight's gradient, the weight for the input's), a nonlinearity's
// its input, while a sum, a bias add or a reshape reads nothing. This file
// says which operands the adjoint of one op reads, from the scalar body of
// a structured op as the autodiff's linalg rule differentiates it
// (lib/Transforms/Autodiff/LinalgAdjoint.cpp): dX_k = dY * df/dx_k reads
// the operands df/dx_k depends on, for every operand x_k that needs a
// gradient.
//
//===----------------------------------------------------------------------===//

#include "PlannerImpl.h"

#include "autopar/Dialect/EmbeddingLookup.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;

namespace autopar::plan {

namespace {

/// A scalar of a structured op's body: the operands (bit k: input k) it is
/// computed from, and whether it depends on one that needs a gradient.
struct Scalar {
  uint64_t operands = 0;
  bool active = false;
};

/// Arithmetic whose derivative is a constant: its adjoint reads nothing.
bool hasConstantDerivative(Operation &op) {
  return isa<arith::AddFOp, arith::SubFOp, arith::NegFOp, arith::ExtFOp,
             arith::TruncFOp, arith::ConstantOp, linalg::IndexOp>(op);
}

/// Ops that carry no gradient (integer and index arithmetic, comparisons):
/// read only through what uses them (a select's condition).
bool carriesNoGradient(Operation &op) {
  return llvm::none_of(op.getResultTypes(),
                       [](Type t) { return isa<FloatType>(t); });
}

AdjointReads readsOfStructuredOp(linalg::LinalgOp op,
                                 llvm::function_ref<bool(unsigned)> active) {
  AdjointReads reads;
  Block &body = op->getRegion(0).front();
  unsigned inputs = op.getNumDpsInputs();
  llvm::DenseMap<Value, Scalar> scalars;
  for (BlockArgument arg : body.getArguments()) {
    unsigned k = arg.getArgNumber();
    // The accumulator (an init the body reads) is the result's own value.
    if (k < inputs && k < 64)
      scalars[arg] = {uint64_t(1) << k, active(k)};
  }
  auto of = [&](Value v) { return scalars.lookup(v); };
  for (Operation &scalar : body.without_terminator()) {
    Scalar result;
    for (Value v : scalar.getOperands()) {
      result.operands |= of(v).operands;
      result.active |= of(v).active;
    }
    if (isa<arith::MulFOp>(scalar)) {
      // d(a*b)/da = b, d(a*b)/db = a.
      Scalar a = of(scalar.getOperand(0)), b = of(scalar.getOperand(1));
      if (a.active)
        reads.operands |= b.operands;
      if (b.active)
        reads.operands |= a.operands;
    } else if (isa<arith::DivFOp>(scalar)) {
      // d(a/b)/da = 1/b, d(a/b)/db = -a/b^2.
      Scalar a = of(scalar.getOperand(0)), b = of(scalar.getOperand(1));
      if (a.active || b.active)
        reads.operands |= b.operands;
      if (b.active)
        reads.operands |= a.operands;
    } else if (auto select = dyn_cast<arith::SelectOp>(scalar)) {
      // The gradient goes where the condition says.
      if (of(select.getTrueValue()).active || of(select.getFalseValue()).active)
        reads.operands |= of(select.getCondition()).operands;
    } else if (isa<arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp,
                   arith::MinNumFOp>(scalar)) {
      // Routed to the larger (smaller) operand: both compared again; as a
      // reduction's combiner, against the result.
      if (result.active)
        reads.operands |= result.operands;
      if (llvm::any_of(scalar.getOperands(), [&](Value v) {
            auto arg = dyn_cast<BlockArgument>(v);
            return arg && arg.getOwner() == &body &&
                   arg.getArgNumber() >= inputs;
          }))
        reads.result = true;
    } else if (!hasConstantDerivative(scalar) && !carriesNoGradient(scalar)) {
      // Any other function (math's exp, tanh, sqrt, powf, ...): its
      // derivative depends on its operands.
      if (result.active)
        reads.operands |= result.operands;
    }
    for (Value r : scalar.getResults())
      scalars[r] = result;
  }
  return reads;
}

} // namespace

AdjointReads adjointReads(Operation *op,
                          llvm::function_ref<bool(unsigned)> active) {
  AdjointReads reads;
  if (matchEmbeddingLookup(op)) {
    // The table's gradient (a parameter's) is a scatter-add at the ids
    // (PlanOp lists the table, then the ids).
    reads.operands = uint64_t(1) << 1;
    return reads;
  }
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
      linalgOp && op->getNumRegions() == 1 && !op->getRegion(0).empty())
    return readsOfStructuredOp(linalgOp, active);
  // Reshapes, slices, pads (whose region yields the padding value),
  // concatenations and collectives move values: their adjoints move
  // cotangents. Anything else (autopar's attention) reads its operands.
  llvm::StringRef dialect = op->getDialect()->getNamespace();
  if (dialect == "tensor" || dialect == "shard")
    return reads;
  for (unsigned k = 0; k < op->getNumOperands() && k < 64; ++k)
    reads.operands |= uint64_t(1) << k;
  return reads;
}

} // namespace autopar::plan
