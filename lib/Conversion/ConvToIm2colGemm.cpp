//===- ConvToIm2colGemm.cpp - convolutions as im2col + GEMM ---------------===//
//
// See Passes.td. Upstream's im2col rewrite produces the GEMM as a generic
// with an unbatched filter; it is turned into the named op that
// autopar-lower-contractions-to-cuda-kernels hands to cuBLASLt.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace autopar {
#define GEN_PASS_DEF_CONVTOIM2COLGEMM
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// Replaces upstream's `Out[b, m, n] += F[m, k] * Col[b, k, n]` generic by
/// a `linalg.matmul` (batch 1) or a `linalg.batch_matmul` of the broadcast
/// filter.
LogicalResult gemmAsNamedOp(RewriterBase &rewriter, linalg::GenericOp gemm) {
  Value filter = gemm.getDpsInputOperand(0)->get();
  Value col = gemm.getDpsInputOperand(1)->get();
  Value out = gemm.getDpsInitOperand(0)->get();
  auto filterType = cast<RankedTensorType>(filter.getType());
  auto colType = cast<RankedTensorType>(col.getType());
  auto outType = cast<RankedTensorType>(out.getType());
  MLIRContext *ctx = gemm.getContext();
  AffineExpr b, m, n, k;
  bindDims(ctx, b, m, n, k);
  SmallVector<AffineMap> expected = {AffineMap::get(4, 0, {m, k}, ctx),
                                     AffineMap::get(4, 0, {b, k, n}, ctx),
                                     AffineMap::get(4, 0, {b, m, n}, ctx)};
  if (gemm.getIndexingMapsArray() != expected || filterType.getRank() != 2 ||
      colType.getRank() != 3 || outType.getRank() != 3)
    return failure();
  Location loc = gemm.getLoc();
  int64_t batch = outType.getDimSize(0);
  rewriter.setInsertionPoint(gemm);
  Value result;
  if (batch == 1) {
    SmallVector<ReassociationIndices> dropBatch = {{0, 1}, {2}};
    Value col2 = tensor::CollapseShapeOp::create(rewriter, loc, col, dropBatch);
    Value out2 = tensor::CollapseShapeOp::create(rewriter, loc, out, dropBatch);
    Value product =
        linalg::MatmulOp::create(rewriter, loc, out2.getType(),
                                 ValueRange{filter, col2}, ValueRange{out2})
            .getResult(0);
    result = tensor::ExpandShapeOp::create(rewriter, loc, outType, product,
                                           dropBatch);
  } else {
    auto broadcastType = RankedTensorType::get(
        {batch, filterType.getDimSize(0), filterType.getDimSize(1)},
        filterType.getElementType());
    Value init =
        tensor::EmptyOp::create(rewriter, loc, broadcastType.getShape(),
                                broadcastType.getElementType());
    Value broadcast = linalg::BroadcastOp::create(rewriter, loc, filter, init,
                                                  ArrayRef<int64_t>{0})
                          .getResult()[0];
    result = linalg::BatchMatmulOp::create(rewriter, loc, outType,
                                           ValueRange{broadcast, col},
                                           ValueRange{out})
                 .getResult(0);
  }
  rewriter.replaceOp(gemm, result);
  return success();
}

struct ConvToIm2colGemmPass
    : autopar::impl::ConvToIm2colGemmBase<ConvToIm2colGemmPass> {
  void runOnOperation() override {
    SmallVector<linalg::Conv2DNchwFchwOp> convs;
    getOperation().walk([&](linalg::Conv2DNchwFchwOp op) {
      if (op.hasPureTensorSemantics())
        convs.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (linalg::Conv2DNchwFchwOp conv : convs) {
      rewriter.setInsertionPoint(conv);
      // Unsupported forms (dilations, dynamic shapes) fail to match and keep
      // the convolution.
      FailureOr<std::pair<Operation *, Operation *>> rewritten =
          linalg::rewriteInIm2Col(rewriter, conv);
      if (failed(rewritten))
        continue;
      auto expand = dyn_cast<tensor::ExpandShapeOp>(rewritten->second);
      auto gemm = expand ? expand.getSrc().getDefiningOp<linalg::GenericOp>()
                         : linalg::GenericOp();
      if (!gemm || failed(gemmAsNamedOp(rewriter, gemm))) {
        rewritten->second->emitError(
            "autopar-conv-to-im2col-gemm: upstream's im2col rewrite did not "
            "produce the expected GEMM (expand_shape of a linalg.generic)");
        return signalPassFailure();
      }
    }
  }
};

} // namespace
