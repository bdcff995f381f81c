//===- ParallelDimsOutermost.cpp - parallel loops before reductions -------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"

namespace autopar {
#define GEN_PASS_DEF_PARALLELDIMSOUTERMOST
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// The loop order with the parallel dims first, each group in its order, or
/// an empty vector when they already are.
SmallVector<unsigned> parallelFirst(linalg::LinalgOp op) {
  SmallVector<unsigned> parallel, rest;
  for (auto [i, kind] : llvm::enumerate(op.getIteratorTypesArray()))
    (linalg::isParallelIterator(kind) ? parallel : rest).push_back(i);
  SmallVector<unsigned> order(parallel);
  order.append(rest);
  for (auto [i, dim] : llvm::enumerate(order))
    if (dim != i)
      return order;
  return {};
}

struct ParallelDimsOutermostPass
    : autopar::impl::ParallelDimsOutermostBase<ParallelDimsOutermostPass> {
  void runOnOperation() override {
    SmallVector<linalg::LinalgOp> ops;
    getOperation().walk([&](linalg::LinalgOp op) {
      if (op.hasPureBufferSemantics() && !parallelFirst(op).empty())
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : ops) {
      SmallVector<unsigned> order = parallelFirst(op);
      rewriter.setInsertionPoint(op);
      auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
      if (!generic) {
        FailureOr<linalg::GenericOp> generalized =
            linalg::generalizeNamedOp(rewriter, op);
        if (failed(generalized)) {
          op.emitError("autopar-parallel-dims-outermost: cannot generalize ")
              << op->getName() << " to interchange its loops";
          return signalPassFailure();
        }
        generic = *generalized;
      }
      if (failed(linalg::interchangeGenericOp(rewriter, generic, order))) {
        generic.emitError("autopar-parallel-dims-outermost: interchanging the "
                          "loops failed");
        return signalPassFailure();
      }
    }
  }
};

} // namespace
