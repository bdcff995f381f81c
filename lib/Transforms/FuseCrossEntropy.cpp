//===- FuseCrossEntropy.cpp - Imported losses into softmax_cross_entropy --===//
//
// See Passes.td and docs/design/cross-entropy.md. The pattern is recognised
// by autopar/Dialect/CrossEntropyPattern.h; this pass replaces its one-hot
// pick of the log-probabilities by `-nll` of one
// `autopar.softmax_cross_entropy` over the same logits, and erases the
// log-softmax. The fused op picks no logit for a label outside [0, C) and
// gives such a row `nll = lse`, where the importer's pick gives 0: the
// elementwise op after it keeps the importer's 0, so nothing downstream (the
// weights, the ignored labels, the mean) changes.
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/AutoparOps.h"
#include "autopar/Dialect/CrossEntropyPattern.h"
#include "autopar/Transforms/Passes.h"

#include "Elementwise.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

namespace autopar {
#define GEN_PASS_DEF_FUSECROSSENTROPY
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using namespace autopar;
using autopar::detail::buildElementwise;

namespace {

/// The ignore_index the fused op gets. Any value works: the importer's
/// ops after the pick weigh an ignored position 0 whatever it picked.
constexpr int64_t kIgnoreIndex = -100;

void fuse(CrossEntropyPattern &m) {
  linalg::GenericOp pick = m.pick;
  Operation *before = pick->getPrevNode();
  OpBuilder b(pick);
  Location loc = pick.getLoc();
  auto logitsType = cast<RankedTensorType>(m.logits.getType());
  auto pickedType = cast<RankedTensorType>(pick->getResult(0).getType());
  int64_t classes = logitsType.getShape().back();
  Type i64 = b.getI64Type();
  auto positions = [&](Type elementType) {
    return RankedTensorType::get(pickedType.getShape(), elementType);
  };

  // The fused op reads i64 labels; the importer's pick compares them
  // sign-extended (index_cast).
  Value labels = m.labels;
  if (getElementTypeOrSelf(labels.getType()) != i64)
    labels = buildElementwise(b, loc, {labels}, positions(i64),
                              [&](OpBuilder &nb, Location nl, ValueRange a) {
                                return Value(
                                    arith::ExtSIOp::create(nb, nl, i64, a[0]));
                              });
  Value logits = m.logits;
  if (!m.logitsReassociation.empty())
    logits =
        tensor::CollapseShapeOp::create(b, loc, logits, m.logitsReassociation);
  Type f32 = b.getF32Type();
  Value nllInit = tensor::EmptyOp::create(b, loc, pickedType.getShape(), f32);
  Value lseInit = tensor::EmptyOp::create(b, loc, pickedType.getShape(), f32);
  auto fused = autopar::SoftmaxCrossEntropyOp::create(
      b, loc, TypeRange{positions(f32), positions(f32)}, logits, labels,
      ValueRange{}, ValueRange{nllInit, lseInit},
      b.getI64IntegerAttr(kIgnoreIndex));

  // picked[p] = 0 <= labels[p] < C ? -nll[p] : 0 (the importer's pick of
  // a label out of range is 0).
  Value picked = buildElementwise(
      b, loc, {fused.getResult(0), m.labels}, pickedType,
      [&](OpBuilder &nb, Location nl, ValueRange a) {
        Type labelType = a[1].getType();
        Value zero =
            arith::ConstantOp::create(nb, nl, nb.getIntegerAttr(labelType, 0));
        Value count = arith::ConstantOp::create(
            nb, nl, nb.getIntegerAttr(labelType, classes));
        Value inRange = arith::AndIOp::create(
            nb, nl,
            arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::sge, a[1],
                                  zero),
            arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::slt, a[1],
                                  count));
        Value none = arith::ConstantOp::create(
            nb, nl, nb.getFloatAttr(a[0].getType(), 0.0));
        return Value(arith::SelectOp::create(
            nb, nl, inRange, arith::NegFOp::create(nb, nl, a[0]), none));
      });
  // The new ops take the pick's place, and its annotations (the pipeline
  // stage the planner gave the loss).
  DictionaryAttr annotations = pick->getDiscardableAttrDictionary();
  for (Operation *op = pick->getPrevNode(); op && op != before;
       op = op->getPrevNode())
    op->setDiscardableAttrs(annotations);
  pick->getResult(0).replaceAllUsesWith(picked);
  pick->erase();
  // Erased as each becomes dead (the keep-dims reshapes of the maximum are
  // read by the exponentials, listed after them).
  SmallVector<Operation *> dead(m.logSoftmax);
  for (bool erased = true; erased;) {
    erased = false;
    for (Operation *&op : dead)
      if (op && op->use_empty()) {
        op->erase();
        op = nullptr;
        erased = true;
      }
  }
}

struct FuseCrossEntropyPass
    : autopar::impl::FuseCrossEntropyBase<FuseCrossEntropyPass> {
  void runOnOperation() override {
    std::vector<CrossEntropyPattern> matches;
    getOperation().walk([&](linalg::GenericOp op) {
      std::optional<CrossEntropyPattern> m = matchCrossEntropyPattern(op);
      // The fused op's nll is f32; other logits keep the unfused loss.
      if (m && getElementTypeOrSelf(m->logits.getType()).isF32())
        matches.push_back(std::move(*m));
    });
    for (CrossEntropyPattern &m : matches)
      fuse(m);
  }
};

} // namespace
