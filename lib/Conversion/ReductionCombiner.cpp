//===- ReductionCombiner.cpp - The combining op of a reduction body -------===//

#include "ReductionCombiner.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
namespace autopar {

std::optional<arith::AtomicRMWKind> combinerKind(Operation *op) {
  return llvm::TypeSwitch<Operation *, std::optional<arith::AtomicRMWKind>>(op)
      .Case([](arith::AddFOp) { return arith::AtomicRMWKind::addf; })
      .Case([](arith::MulFOp) { return arith::AtomicRMWKind::mulf; })
      .Case([](arith::MaximumFOp) { return arith::AtomicRMWKind::maximumf; })
      .Case([](arith::MinimumFOp) { return arith::AtomicRMWKind::minimumf; })
      .Case([](arith::MaxNumFOp) { return arith::AtomicRMWKind::maxnumf; })
      .Case([](arith::MinNumFOp) { return arith::AtomicRMWKind::minnumf; })
      .Default([](Operation *) { return std::nullopt; });
}

std::optional<Combiner> matchCombiner(linalg::GenericOp op) {
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  if (yield.getNumOperands() != 1)
    return std::nullopt;
  Operation *combine = yield.getOperand(0).getDefiningOp();
  if (!combine || combine->getBlock() != &body || !combinerKind(combine) ||
      !combine->getResult(0).hasOneUse())
    return std::nullopt;
  BlockArgument out = body.getArguments().back();
  if (!out.hasOneUse())
    return std::nullopt;
  Value lhs = combine->getOperand(0), rhs = combine->getOperand(1);
  if (lhs == out && rhs != out)
    return Combiner{combine, rhs, true};
  if (rhs == out && lhs != out)
    return Combiner{combine, lhs, false};
  return std::nullopt;
}

Value combineWith(OpBuilder &b, const Combiner &combiner, Value accumulator,
                  Value value) {
  IRMapping map;
  Value lhs = combiner.op->getOperand(0), rhs = combiner.op->getOperand(1);
  map.map(lhs, combiner.accumulatorFirst ? accumulator : value);
  map.map(rhs, combiner.accumulatorFirst ? value : accumulator);
  return b.clone(*combiner.op, map)->getResult(0);
}

} // namespace autopar
