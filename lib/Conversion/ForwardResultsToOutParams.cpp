//===- ForwardResultsToOutParams.cpp - no final copy of reshaped results --===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace autopar {
#define GEN_PASS_DEF_FORWARDRESULTSTOOUTPARAMS
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

struct ForwardResultsToOutParamsPass
    : autopar::impl::ForwardResultsToOutParamsBase<
          ForwardResultsToOutParamsPass> {
  /// Forwards `copy` (reshape(alloc) -> out-param) when it qualifies.
  bool forward(IRRewriter &rewriter, memref::CopyOp copy) {
    auto outParam = dyn_cast<BlockArgument>(copy.getTarget());
    if (!outParam || !outParam.hasOneUse() ||
        outParam.getOwner() != copy->getBlock() ||
        !cast<MemRefType>(outParam.getType()).getLayout().isIdentity())
      return false;
    Operation *reshape = copy.getSource().getDefiningOp();
    if (!reshape ||
        !isa<memref::ExpandShapeOp, memref::CollapseShapeOp>(reshape))
      return false;
    auto alloc = reshape->getOperand(0).getDefiningOp<memref::AllocOp>();
    if (!alloc || alloc->getBlock() != copy->getBlock() ||
        !alloc.getType().getLayout().isIdentity() ||
        !alloc.getDynamicSizes().empty())
      return false;
    // Every use of the allocation comes before the copy: it is the result,
    // and nothing reads it afterwards (no dealloc exists yet).
    for (Operation *user : alloc->getUsers())
      if (user->getBlock() != copy->getBlock() || !user->isBeforeInBlock(copy))
        return false;
    // The out-param, reshaped back to the allocation's shape, right where
    // the allocation was (the out-param dominates everything).
    rewriter.setInsertionPoint(alloc);
    Value view;
    if (auto expand = dyn_cast<memref::ExpandShapeOp>(reshape))
      view = memref::CollapseShapeOp::create(rewriter, alloc.getLoc(),
                                             alloc.getType(), outParam,
                                             expand.getReassociationIndices());
    else
      view = memref::ExpandShapeOp::create(
          rewriter, alloc.getLoc(), alloc.getType(), outParam,
          cast<memref::CollapseShapeOp>(reshape).getReassociationIndices());
    rewriter.replaceAllUsesWith(alloc.getResult(), view);
    rewriter.eraseOp(copy);
    rewriter.eraseOp(alloc);
    if (reshape->use_empty())
      rewriter.eraseOp(reshape);
    return true;
  }

  void runOnOperation() override {
    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp copy) { copies.push_back(copy); });
    IRRewriter rewriter(&getContext());
    for (memref::CopyOp copy : copies)
      forward(rewriter, copy);
  }
};

} // namespace
