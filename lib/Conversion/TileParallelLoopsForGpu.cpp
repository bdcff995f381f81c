//===- TileParallelLoopsForGpu.cpp - parallel loops into thread blocks ----===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/PatternMatch.h"

#include <numeric>

namespace autopar {
#define GEN_PASS_DEF_TILEPARALLELLOOPSFORGPU
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// The number of iterations of `loop` (all dims), if its bounds are
/// constants.
std::optional<int64_t> staticTripCount(scf::ParallelOp loop) {
  int64_t trips = 1;
  for (unsigned i = 0; i < loop.getNumLoops(); ++i) {
    std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound()[i]);
    std::optional<int64_t> ub = getConstantIntValue(loop.getUpperBound()[i]);
    std::optional<int64_t> step = getConstantIntValue(loop.getStep()[i]);
    if (!lb || !ub || !step || *step <= 0)
      return std::nullopt;
    trips *= std::max<int64_t>(0, llvm::divideCeil(*ub - *lb, *step));
  }
  return trips;
}

struct TileParallelLoopsForGpuPass
    : autopar::impl::TileParallelLoopsForGpuBase<TileParallelLoopsForGpuPass> {
  using Base::Base;

  void runOnOperation() override {
    if (blockSize < 1) {
      getOperation().emitError("autopar-gpu-tile-parallel-loops: block-size "
                               "must be at least 1");
      return signalPassFailure();
    }
    SmallVector<scf::ParallelOp> outermost;
    getOperation().walk([&](scf::ParallelOp op) {
      if (!op->getParentOfType<scf::ParallelOp>())
        outermost.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (scf::ParallelOp loop : outermost) {
      if (loop.getNumResults() != 0) {
        loop.emitError("autopar-gpu-tile-parallel-loops: parallel loops with "
                       "reductions are not supported on GPU");
        return signalPassFailure();
      }
      // Fewer iterations than a block: one block of exactly that many
      // threads (counted before collapsing, whose bounds are not folded).
      int64_t tile = blockSize;
      if (std::optional<int64_t> trips = staticTripCount(loop);
          trips && *trips >= 1 && *trips < tile)
        tile = *trips;
      // Warp shuffles (autopar-gpu-warp-reductions) need every warp inside
      // one row of the nest: blocks of whole warps.
      bool shuffles = false;
      int64_t width = 0;
      loop.walk([&](gpu::ShuffleOp shuffle) {
        shuffles = true;
        if (std::optional<int64_t> w = getConstantIntValue(shuffle.getWidth()))
          width = std::max(width, *w);
      });
      if (shuffles && (width < 1 || tile % width != 0)) {
        loop.emitError("autopar-gpu-tile-parallel-loops: a loop with warp "
                       "shuffles of width ")
            << width << " needs blocks of a multiple of that many threads, "
            << "not " << tile << " (block-size)";
        return signalPassFailure();
      }
      if (loop.getNumLoops() > 1) {
        // The collapsed loop replaces `loop` at the same place.
        Operation *next = loop->getNextNode();
        std::vector<unsigned> all(loop.getNumLoops());
        std::iota(all.begin(), all.end(), 0);
        collapseParallelLoops(rewriter, loop, {all});
        loop = cast<scf::ParallelOp>(next->getPrevNode());
      }
      scf::tileParallelLoop(loop, {tile}, /*noMinMaxBounds=*/true);
    }
  }
};

} // namespace
