//===- FuseElementwise.cpp - Elementwise fusion without recomputation -----===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace autopar {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// Fuse only when every loop of the consumer indexes the fused operand.
bool fusesWithoutRecomputation(OpOperand *fusedOperand) {
  auto consumer = dyn_cast<linalg::GenericOp>(fusedOperand->getOwner());
  if (!consumer)
    return false;
  return consumer.getMatchingIndexingMap(fusedOperand).isPermutation();
}

struct FuseElementwisePass
    : autopar::impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns,
                                                 fusesWithoutRecomputation);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
