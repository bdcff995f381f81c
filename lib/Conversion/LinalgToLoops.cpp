//===- LinalgToLoops.cpp - linalg to scf.for, parallel loops marked -------===//
//
// See Passes.td. As upstream's convert-linalg-to-loops, but the loop that
// autopar-outline-loop-nests may split among the kernel threads is marked:
// the first one with more than one iteration, when every loop around it has
// one and it walks a parallel dim that indexes every output directly, so
// that its iterations write disjoint elements.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "RootBuffer.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace autopar {
#define GEN_PASS_DEF_LINALGTOLOOPS
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using autopar::rootBuffer;

namespace {

/// The loop dim of `op` whose iterations may run on different threads, and
/// the iterations of the loops inside it (their product), or nullopt.
std::optional<std::pair<unsigned, int64_t>> parallelDim(linalg::LinalgOp op) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  if (ranges.empty() || llvm::any_of(ranges, ShapedType::isDynamic))
    return std::nullopt;
  unsigned dim = 0;
  while (dim < ranges.size() && ranges[dim] == 1 &&
         iterators[dim] == utils::IteratorType::parallel)
    ++dim;
  if (dim == ranges.size() || ranges[dim] < 2 ||
      iterators[dim] != utils::IteratorType::parallel)
    return std::nullopt;
  // Each iteration must write its own output elements: the dim is a result
  // of every output's indexing map.
  for (OpOperand &init : op.getDpsInitsMutable()) {
    AffineMap map = op.getMatchingIndexingMap(&init);
    if (!llvm::any_of(map.getResults(), [&](AffineExpr e) {
          auto d = dyn_cast<AffineDimExpr>(e);
          return d && d.getPosition() == dim;
        }))
      return std::nullopt;
  }
  // An input that views an output's buffer through another view or map
  // could read what a different iteration writes (no bufferization makes
  // one, but the threads would race on it).
  for (OpOperand &init : op.getDpsInitsMutable())
    for (OpOperand *input : op.getDpsInputOperands()) {
      if (!isa<MemRefType>(input->get().getType()))
        continue;
      if (rootBuffer(input->get()) != rootBuffer(init.get()))
        continue;
      if (input->get() != init.get() ||
          op.getMatchingIndexingMap(input) != op.getMatchingIndexingMap(&init))
        return std::nullopt;
    }
  int64_t inner = 1;
  for (int64_t r : ArrayRef<int64_t>(ranges).drop_front(dim + 1))
    inner *= r;
  return std::make_pair(dim, inner);
}

struct LinalgToLoopsPass : autopar::impl::LinalgToLoopsBase<LinalgToLoopsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<linalg::LinalgOp> ops;
    func.walk([&](linalg::LinalgOp op) {
      if (op.hasPureBufferSemantics())
        ops.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : ops) {
      std::optional<std::pair<unsigned, int64_t>> parallel = parallelDim(op);
      rewriter.setInsertionPoint(op);
      FailureOr<linalg::LinalgLoops> loops =
          linalg::linalgOpToLoops(rewriter, op);
      if (failed(loops)) {
        op->emitError("autopar-linalg-to-loops: cannot lower this op to "
                      "loops");
        return signalPassFailure();
      }
      if (parallel && parallel->first < loops->size())
        (*loops)[parallel->first]->setAttr(
            autopar::kParallelLoopAttr,
            rewriter.getI64IntegerAttr(parallel->second));
      rewriter.eraseOp(op);
    }
    // What upstream's pass folds after lowering: affine.apply of a single
    // loop index, dims of static memrefs.
    RewritePatternSet patterns(&getContext());
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, &getContext());
    memref::DimOp::getCanonicalizationPatterns(patterns, &getContext());
    if (failed(applyPatternsGreedily(func, std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
