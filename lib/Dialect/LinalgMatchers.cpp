//===- LinalgMatchers.cpp - Small matchers over the importer's linalg -----===//
//
// See LinalgMatchers.h.
//
//===----------------------------------------------------------------------===//

#include "LinalgMatchers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

SmallVector<Operation *> autopar::detail::bodyOps(linalg::GenericOp op) {
  SmallVector<Operation *> ops;
  for (Operation &inner : op.getBody()->without_terminator())
    if (!isa<arith::ConstantOp>(inner))
      ops.push_back(&inner);
  return ops;
}

bool autopar::detail::allParallel(linalg::LinalgOp op) {
  return op.getNumLoops() == op.getNumParallelLoops();
}

std::optional<double> autopar::detail::scalarConstant(Value v) {
  Attribute attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  if (auto f = dyn_cast<FloatAttr>(attr))
    return f.getValueAsDouble();
  if (auto dense = dyn_cast<DenseFPElementsAttr>(attr))
    if (dense.isSplat())
      return dense.getSplatValue<APFloat>().convertToDouble();
  return std::nullopt;
}

bool autopar::detail::isFilledWith(Value init, double value, bool atMost) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  if (!fill)
    return false;
  std::optional<double> c = scalarConstant(fill.getInputs()[0]);
  return c && (atMost ? *c <= value : *c == value);
}

bool autopar::detail::isDropLast(AffineMap map, unsigned n) {
  if (map.getNumDims() != n || map.getNumResults() != n - 1)
    return false;
  for (unsigned i = 0; i + 1 < n; ++i)
    if (map.getResult(i) != getAffineDimExpr(i, map.getContext()))
      return false;
  return true;
}

Operation *autopar::detail::elementwiseOp(linalg::GenericOp g) {
  if (!g || g.getNumDpsInits() != 1 || !allParallel(g) ||
      !g.getIndexingMapsArray().back().isIdentity())
    return nullptr;
  SmallVector<Operation *> ops = bodyOps(g);
  if (ops.size() != 1 || ops[0]->getNumResults() != 1)
    return nullptr;
  auto yield = cast<linalg::YieldOp>(g.getBody()->getTerminator());
  if (yield.getOperand(0) != ops[0]->getResult(0))
    return nullptr;
  return ops[0];
}
