//===- ApproximateMath.cpp - Vectorizable math approximations -------------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace autopar {
#define GEN_PASS_DEF_APPROXIMATEMATH
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {
struct ApproximateMathPass
    : autopar::impl::ApproximateMathBase<ApproximateMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populatePolynomialApproximateErfPattern(patterns);
    populatePolynomialApproximateTanhPattern(patterns);
    populateMathPolynomialApproximationPatterns(patterns, [](StringRef name) {
      return name == "exp" || name == "math.exp";
    });
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
