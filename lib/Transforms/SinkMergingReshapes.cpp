//===- SinkMergingReshapes.cpp - Keep merged dims apart through ops -------===//
//
// See Passes.td. Upstream's reshape-by-expansion patterns do the moving;
// this file decides where they may apply.
//
//===----------------------------------------------------------------------===//

#include "autopar/Transforms/SinkMergingReshapes.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace autopar {
#define GEN_PASS_DEF_SINKMERGINGRESHAPES
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// Whether `reassociation` over `shape` (the expanded side) puts two dims of
/// size > 1 in one group: a real merge, not a unit dim added or dropped.
bool mergesDims(ArrayRef<ReassociationIndices> reassociation,
                ArrayRef<int64_t> shape) {
  return llvm::any_of(reassociation, [&](const ReassociationIndices &group) {
    return llvm::count_if(group, [&](int64_t d) { return shape[d] != 1; }) > 1;
  });
}

/// Whether a linalg op may be rewritten over the expanded dims: it must not
/// read through windows (convolutions, pools), and a contraction must have a
/// batch dim (the merged one: the backends collapse batch dims again,
/// autopar-collapse-batched-contractions; a matmul turned into a generic
/// over split M or N would no longer reach BLAS).
bool expandable(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || linalgOp.hasIndexSemantics() ||
      !llvm::all_of(linalgOp.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isProjectedPermutation(); }))
    return false;
  if (linalg::isaContractionOpInterface(linalgOp)) {
    FailureOr<linalg::ContractionDimensions> dims =
        linalg::inferContractionDims(linalgOp);
    return succeeded(dims) && !dims->batch.empty();
  }
  return true;
}

/// The control of upstream's patterns: `fused` is the operand of a linalg op
/// fed by a collapse_shape (the op will read the expanded source), or the
/// source operand of an expand_shape fed by a linalg op (the op will produce
/// the expanded shape).
bool shouldSink(OpOperand *fused) {
  Operation *user = fused->getOwner();
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(user))
    return expand.getSrc().getDefiningOp() &&
           expandable(expand.getSrc().getDefiningOp()) &&
           mergesDims(expand.getReassociationIndices(),
                      expand.getResultType().getShape());
  auto collapse = fused->get().getDefiningOp<tensor::CollapseShapeOp>();
  return collapse && expandable(user) &&
         mergesDims(collapse.getReassociationIndices(),
                    collapse.getSrcType().getShape());
}

struct SinkMergingReshapesPass
    : autopar::impl::SinkMergingReshapesBase<SinkMergingReshapesPass> {
  void runOnOperation() override {
    autopar::sinkMergingReshapes(getOperation());
  }
};

} // namespace

void autopar::sinkMergingReshapes(func::FuncOp func) {
  RewritePatternSet patterns(func.getContext());
  linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, shouldSink);
  // Reshapes of tensor.empty become empties of the new shape.
  tensor::populateFoldTensorEmptyPatterns(patterns);
  tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns,
                                                       func.getContext());
  tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns,
                                                     func.getContext());
  // Every rewrite leaves a valid program: should the patterns not settle
  // within the driver's limit, the reshapes not yet moved simply stay.
  (void)applyPatternsGreedily(func, std::move(patterns));
}
