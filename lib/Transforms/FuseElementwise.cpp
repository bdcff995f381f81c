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

/// A producer that other ops also read stays, and fusing it copies its body
/// into the consumer: worth it for a few cheap ops (a broadcast add saves a
/// round trip through memory), not for long bodies (a dropout mask's hash is
/// ~40 integer ops, and copies of copies made fusion itself take minutes).
constexpr int64_t kMaxCopiedBodyOps = 8;

/// Fuse only when every loop of the consumer indexes the fused operand, and
/// the producer is fused away or cheap to copy.
bool fusesWithoutRecomputation(OpOperand *fusedOperand) {
  auto consumer = dyn_cast<linalg::GenericOp>(fusedOperand->getOwner());
  if (!consumer ||
      !consumer.getMatchingIndexingMap(fusedOperand).isPermutation())
    return false;
  auto producer = fusedOperand->get().getDefiningOp<linalg::GenericOp>();
  if (!producer || producer->hasOneUse())
    return true;
  return int64_t(producer.getBody()->getOperations().size()) - 1 <=
         kMaxCopiedBodyOps;
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
