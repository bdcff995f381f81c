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
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace autopar {
#define GEN_PASS_DEF_SPLITSHAREDINITS
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// The ops that make `value` a tensor of undefined contents: a
/// `tensor.empty`, possibly reshaped (`collapse_shape`/`expand_shape`, as
/// attention's batch * heads merge leaves it), in definition order; empty
/// when `value` is something else.
SmallVector<Operation *> freshShape(Value value) {
  SmallVector<Operation *> chain;
  Operation *def = value.getDefiningOp();
  while (def && isa<tensor::CollapseShapeOp, tensor::ExpandShapeOp>(def)) {
    chain.push_back(def);
    def = def->getOperand(0).getDefiningOp();
  }
  if (!def || !isa<tensor::EmptyOp>(def))
    return {};
  chain.push_back(def);
  std::reverse(chain.begin(), chain.end());
  return chain;
}

/// A `tensor.empty`, or a `linalg.fill` of one (possibly reshaped): an init
/// whose contents are recomputed cheaply at every use.
bool isFreshInit(Operation *op) {
  if (isa<tensor::EmptyOp>(op))
    return true;
  auto fill = dyn_cast<linalg::FillOp>(op);
  return fill && !freshShape(fill.getOutputs()[0]).empty() &&
         fill.getInputs()[0].getDefiningOp() &&
         fill.getInputs()[0].getDefiningOp()->hasTrait<OpTrait::ConstantLike>();
}

/// Clones the empty tensor (and its reshapes) that `value` is at `b`'s
/// insertion point; returns the clone of `value`.
Value cloneFreshShape(OpBuilder &b, Value value) {
  IRMapping map;
  Operation *last = nullptr;
  for (Operation *op : freshShape(value))
    last = b.clone(*op, map);
  return last->getResult(0);
}

/// Clones `op` (and, for a fill, the empty tensor it fills) before `user`.
Value cloneBefore(Operation *op, Operation *user) {
  OpBuilder b(user);
  if (auto fill = dyn_cast<linalg::FillOp>(op)) {
    Value shape = cloneFreshShape(b, fill.getOutputs()[0]);
    Operation *copy = b.clone(*op);
    copy->setOperand(1, shape);
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
            init.set(cloneFreshShape(b, fill.getOutputs()[0]));
            originals.insert(def);
            continue;
          }
          // The last writer of a shared init gets a clone too unless the
          // init is made right before it: a fill far above its use is
          // bufferized as a buffer live across everything in between (and
          // a zero fill right before a GEMM becomes an overwrite GEMM).
          if (init.get().hasOneUse() && def->getNextNode() == &op)
            continue;
          init.set(cloneBefore(def, &op));
          originals.insert(def);
        }
      }
    }
    // A fill's empty (and its reshapes) may be dead once the fill is gone.
    for (Operation *op : llvm::to_vector(originals.getArrayRef()))
      if (auto fill = dyn_cast<linalg::FillOp>(op))
        for (Operation *shape : freshShape(fill.getOutputs()[0]))
          originals.insert(shape);
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
