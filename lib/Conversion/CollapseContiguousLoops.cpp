//===- CollapseContiguousLoops.cpp - One loop per contiguous walk ---------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace autopar {
#define GEN_PASS_DEF_COLLAPSECONTIGUOUSLOOPS
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// The position of loop dim `d` among `map`'s results, or -1.
int64_t resultPosition(AffineMap map, unsigned d) {
  for (unsigned r = 0; r < map.getNumResults(); ++r)
    if (auto dim = dyn_cast<AffineDimExpr>(map.getResult(r));
        dim && dim.getPosition() == d)
      return r;
  return -1;
}

/// Groups of adjacent loop dims of `op` that can be one loop: for every
/// operand, both dims absent, or present as adjacent dims in that order.
/// Empty when nothing merges.
SmallVector<ReassociationIndices> mergeableDims(linalg::GenericOp op) {
  unsigned loops = op.getNumLoops();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  SmallVector<ReassociationIndices> groups{{0}};
  bool merged = false;
  for (unsigned d = 1; d < loops; ++d) {
    bool adjacent = llvm::all_of(maps, [&](AffineMap map) {
      int64_t prev = resultPosition(map, d - 1), next = resultPosition(map, d);
      return (prev < 0 && next < 0) || (prev >= 0 && next == prev + 1);
    });
    if (adjacent) {
      groups.back().push_back(d);
      merged = true;
    } else {
      groups.push_back({int64_t(d)});
    }
  }
  return merged ? groups : SmallVector<ReassociationIndices>();
}

/// An all-parallel generic on contiguous buffers whose maps are projected
/// permutations.
bool isCandidate(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumLoops() < 2 ||
      op.getNumParallelLoops() != op.getNumLoops() || op.hasIndexSemantics())
    return false;
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<MemRefType>(operand.get().getType());
    if (!type || !type.hasStaticShape() || !type.getLayout().isIdentity() ||
        !op.getMatchingIndexingMap(&operand).isProjectedPermutation())
      return false;
  }
  return true;
}

struct CollapseContiguousLoopsPass
    : autopar::impl::CollapseContiguousLoopsBase<CollapseContiguousLoopsPass> {
  void runOnOperation() override {
    SmallVector<linalg::GenericOp> ops;
    getOperation().walk([&](linalg::GenericOp op) {
      if (isCandidate(op))
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::GenericOp op : ops) {
      SmallVector<ReassociationIndices> groups = mergeableDims(op);
      if (groups.empty() ||
          !linalg::areDimSequencesPreserved(op.getIndexingMapsArray(), groups))
        continue;
      rewriter.setInsertionPoint(op);
      FailureOr<linalg::CollapseResult> collapsed =
          linalg::collapseOpIterationDims(op, groups, rewriter);
      if (failed(collapsed))
        continue;
      // On buffers the op has no results: nothing to replace, just erase.
      rewriter.eraseOp(op);
    }
  }
};

} // namespace
