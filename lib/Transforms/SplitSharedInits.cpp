//===- SplitSharedInits.cpp - One fresh init tensor per user --------------===//
//
// See Passes.td. CSE merges identical `tensor.empty` and zero `linalg.fill`
// ops, so that many structured ops name one tensor as their init. One-Shot
// Bufferize then gives the first writer that buffer and, for every later one
// whose predecessor's value is still live, allocates a new buffer and copies
// the shared one into it. Inference steps rarely notice (values die young);
// a training step keeps the forward's activations until backward, and the
// copies were a seventh of a small GPT's step time. An op that never reads
// its init (an elementwise op whose init CSE made a zero fill) gets an empty
// tensor instead: no fill at all.
//
//===----------------------------------------------------------------------===//

#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/SetVector.h"

namespace autopar {
#define GEN_PASS_DEF_SPLITSHAREDINITS
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// A `tensor.empty`, or a `linalg.fill` of one: an init whose contents are
/// recomputed cheaply at every use.
bool isFreshInit(Operation *op) {
  if (isa<tensor::EmptyOp>(op))
    return true;
  auto fill = dyn_cast<linalg::FillOp>(op);
  return fill && fill.getOutputs()[0].getDefiningOp<tensor::EmptyOp>() &&
         fill.getInputs()[0].getDefiningOp() &&
         fill.getInputs()[0].getDefiningOp()->hasTrait<OpTrait::ConstantLike>();
}

/// Clones `op` (and, for a fill, the empty tensor it fills) before `user`.
Value cloneBefore(Operation *op, Operation *user) {
  OpBuilder b(user);
  if (auto fill = dyn_cast<linalg::FillOp>(op)) {
    Operation *empty = b.clone(*fill.getOutputs()[0].getDefiningOp());
    Operation *copy = b.clone(*op);
    copy->setOperand(1, empty->getResult(0));
    return copy->getResult(0);
  }
  return b.clone(*op)->getResult(0);
}

struct SplitSharedInitsPass
    : autopar::impl::SplitSharedInitsBase<SplitSharedInitsPass> {
  void runOnOperation() override {
    // Every op that writes into a fresh init used more than once gets a
    // clone of it; reads keep the original, which is erased if none is
    // left.
    llvm::SetVector<Operation *> originals;
    for (Block &block : getOperation().getBody()) {
      for (Operation &op : block) {
        auto dps = dyn_cast<DestinationStyleOpInterface>(&op);
        if (!dps)
          continue;
        auto linalgOp = dyn_cast<linalg::LinalgOp>(&op);
        for (OpOperand &init : dps.getDpsInitsMutable()) {
          Operation *def = init.get().getDefiningOp();
          if (!def || def->getBlock() != &block || !isFreshInit(def))
            continue;
          // An op that only writes its init needs its shape, not its
          // contents: an empty tensor, no fill.
          auto fill = dyn_cast<linalg::FillOp>(def);
          if (fill && linalgOp && !isa<linalg::FillOp>(&op) &&
              !linalgOp.payloadUsesValueFromOperand(&init)) {
            OpBuilder b(&op);
            init.set(
                b.clone(*fill.getOutputs()[0].getDefiningOp())->getResult(0));
            originals.insert(def);
            continue;
          }
          if (init.get().hasOneUse())
            continue;
          init.set(cloneBefore(def, &op));
          originals.insert(def);
        }
      }
    }
    // A fill's empty may be an original too, dead once the fill is gone.
    bool erased = true;
    while (erased) {
      erased = false;
      for (Operation *op : originals.takeVector()) {
        if (op->use_empty()) {
          op->erase();
          erased = true;
        } else {
          originals.insert(op);
        }
      }
    }
  }
};

} // namespace
