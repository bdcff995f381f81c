//===- FuseElementwise.cpp - Elementwise fusion without recomputation -----===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/Attributes.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace autopar {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// A producer that other ops also read stays materialized for them, so
/// fusing it into one more consumer only trades a read of its result for a
/// recomputation from its inputs. That pays when the inputs are small (a
/// bias broadcast, an iota, a mask of constants) and the body is short; a
/// producer that reads a tensor as large as itself (a residual add) would be
/// recomputed from its own producers, and copies of copies grew training
/// steps' bodies into recomputations of the whole residual stream.
constexpr int64_t kMaxCopiedBodyOps = 8;

bool cheapToRecompute(linalg::GenericOp producer) {
  if (int64_t(producer.getBody()->getOperations().size()) - 1 >
      kMaxCopiedBodyOps)
    return false;
  int64_t loops = producer.getNumLoops();
  for (OpOperand *input : producer.getDpsInputOperands())
    if (producer.getMatchingIndexingMap(input).getNumResults() == loops &&
        loops > 0)
      return false;
  // Tensors read inside the body (a gather's table) are as good as inputs.
  bool readsAbove = false;
  producer.getRegion().walk([&](tensor::ExtractOp) { readsAbove = true; });
  return !readsAbove;
}

/// Fuse only when every loop of the consumer indexes the fused operand, and
/// the producer is fused away or cheap to recompute.
bool fusesWithoutRecomputation(OpOperand *fusedOperand) {
  auto consumer = dyn_cast<linalg::GenericOp>(fusedOperand->getOwner());
  if (!consumer ||
      !consumer.getMatchingIndexingMap(fusedOperand).isPermutation())
    return false;
  auto producer = fusedOperand->get().getDefiningOp<linalg::GenericOp>();
  if (!producer || producer->hasOneUse())
    return true;
  return cheapToRecompute(producer);
}

/// Marks what replaces a recomputed op (autopar-rematerialize's clones) as
/// recomputed too: the fusion patterns build new ops without the original's
/// attributes, and the CSE after them would merge an unmarked clone back
/// into the forward op it copies, keeping the forward's value alive for the
/// backward after all.
struct KeepRecomputedMarks : RewriterBase::Listener {
  void notifyOperationInserted(Operation *op, OpBuilder::InsertPoint) override {
    inserted.insert(op);
  }
  void notifyOperationErased(Operation *op) override { inserted.erase(op); }
  void notifyOperationReplaced(Operation *op, ValueRange values) override {
    if (!op->hasAttr(autopar::attrs::kRecomputed))
      return;
    for (Value v : values)
      if (Operation *def = v.getDefiningOp(); def && inserted.contains(def))
        def->setAttr(autopar::attrs::kRecomputed,
                     UnitAttr::get(op->getContext()));
  }
  llvm::DenseSet<Operation *> inserted;
};

struct FuseElementwisePass
    : autopar::impl::FuseElementwiseBase<FuseElementwisePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(patterns,
                                                 fusesWithoutRecomputation);
    // Fusing a producer that others also read keeps its value as an extra
    // result of the fused op; once those readers are fused too the result
    // is dead, but its init (often a zero fill) and its stores stay unless
    // erased.
    linalg::populateEraseUnusedOperandsAndResultsPatterns(patterns);
    KeepRecomputedMarks marks;
    GreedyRewriteConfig config;
    config.setListener(&marks);
    if (failed(
            applyPatternsGreedily(getOperation(), std::move(patterns), config)))
      signalPassFailure();
  }
};

} // namespace
