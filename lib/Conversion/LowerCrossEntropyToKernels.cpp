//===- LowerCrossEntropyToKernels.cpp - Fused cross-entropy to calls ------===//
//
// See Passes.td and docs/design/cross-entropy.md: after bufferization,
// autopar.softmax_cross_entropy and its gradient become calls of the
// runtime's kernels, `<prefix>cross_entropy_{fwd,bwd}_<type>`, on the
// positions collapsed into one dim (the kernels take [N, C] and [N]).
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"
#include "autopar/Dialect/AutoparOps.h"

#include "KernelCall.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace autopar {
#define GEN_PASS_DEF_LOWERCROSSENTROPYTOKERNELS
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// The reassociation that collapses the leading dims of a rank-`rank`
/// memref into one: [[0 .. rank-2], [rank-1]] for the logits (`keepLast`),
/// [[0 .. rank-1]] for the per-position values.
SmallVector<ReassociationIndices> leadingDims(int64_t rank, bool keepLast) {
  ReassociationIndices positions;
  for (int64_t d = 0; d < rank - (keepLast ? 1 : 0); ++d)
    positions.push_back(d);
  SmallVector<ReassociationIndices> groups{positions};
  if (keepLast)
    groups.push_back({rank - 1});
  return groups;
}

/// `v` viewed as [N, C] (`keepLast`) or [N] with unit innermost stride:
/// itself, or collapsed, after a dense copy where its layout allows neither
/// (only for inputs: for an `output` that is an error, returned as null).
Value collapsed(RewriterBase &rewriter, Operation *op, Value v, bool keepLast,
                bool output, SmallVectorImpl<Value> &copies) {
  auto type = cast<MemRefType>(v.getType());
  int64_t rank = type.getRank();
  SmallVector<ReassociationIndices> groups = leadingDims(rank, keepLast);
  bool collapses =
      rank == (keepLast ? 2 : 1) ||
      memref::CollapseShapeOp::isGuaranteedCollapsible(type, groups);
  Location loc = op->getLoc();
  if (!collapses || !autopar::hasUnitInnerStride(type)) {
    if (output) {
      op->emitOpError() << "writes an output of layout " << type.getLayout()
                        << " that is not [N, C] or [N] with unit innermost "
                           "stride, which the kernels need";
      return {};
    }
    Value copy = memref::AllocOp::create(
        rewriter, loc, MemRefType::get(type.getShape(), type.getElementType()));
    memref::CopyOp::create(rewriter, loc, v, copy);
    copies.push_back(copy);
    v = copy;
  }
  if (rank == (keepLast ? 2 : 1))
    return v;
  return memref::CollapseShapeOp::create(rewriter, loc, v, groups);
}

template <typename OpTy>
LogicalResult lower(OpTy op, bool cuda, StringRef direction) {
  IRRewriter rewriter(op);
  auto logitsType = cast<MemRefType>(op.getLogits().getType());
  Type element = logitsType.getElementType();
  std::string types = element.isF32()              ? "f32"
                      : (cuda && element.isBF16()) ? "bf16"
                                                   : "";
  if (types.empty())
    return op.emitOpError()
           << "has no " << (cuda ? "CUDA" : "CPU")
           << " kernel for logits of element type " << element
           << " (the kernels take " << (cuda ? "f32 and bf16" : "f32") << ")";
  if (logitsType.getRank() < 2)
    return op.emitOpError("the kernels take logits of rank >= 2 [P..., C]");
  SmallVector<Value> operands, copies;
  auto add = [&](Value v, bool keepLast, bool output) {
    Value c = collapsed(rewriter, op, v, keepLast, output, copies);
    operands.push_back(c);
    return bool(c);
  };
  bool ok =
      add(op.getLogits(), true, false) && add(op.getLabels(), false, false);
  if constexpr (std::is_same_v<OpTy, autopar::SoftmaxCrossEntropyOp>) {
    ok = ok && add(op.getOutputs()[0], false, true) &&
         add(op.getOutputs()[1], false, true);
  } else {
    ok = ok && add(op.getSaved()[0], false, false) &&
         add(op.getSaved()[1], false, false) &&
         add(op.getOutputs()[0], true, true);
  }
  if (!ok)
    return failure();
  operands.push_back(arith::ConstantOp::create(
      rewriter, op.getLoc(), rewriter.getI64IntegerAttr(op.getIgnoreIndex())));
  std::string name = (Twine(cuda ? "autopar_cuda_" : "autopar_cpu_") +
                      "cross_entropy_" + direction + "_" + types)
                         .str();
  Operation *next = op->getNextNode();
  autopar::replaceWithKernelCall(rewriter, op, name, operands);
  // The dense copies die with the call (buffers were given their frees
  // before this pass).
  rewriter.setInsertionPoint(next);
  for (Value copy : copies)
    memref::DeallocOp::create(rewriter, copy.getLoc(), copy);
  return success();
}

struct LowerCrossEntropyToKernelsPass
    : autopar::impl::LowerCrossEntropyToKernelsBase<
          LowerCrossEntropyToKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (library != "cpu" && library != "cuda") {
      getOperation().emitError() << "autopar-lower-cross-entropy-to-kernels: "
                                    "library must be cpu or cuda, not '"
                                 << library << "'";
      return signalPassFailure();
    }
    bool cuda = library == "cuda";
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<autopar::SoftmaxCrossEntropyOp,
              autopar::SoftmaxCrossEntropyGradOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      if (!cast<DestinationStyleOpInterface>(op).hasPureBufferSemantics()) {
        op->emitOpError("must be bufferized before it is lowered to kernels");
        return signalPassFailure();
      }
      LogicalResult lowered =
          isa<autopar::SoftmaxCrossEntropyOp>(op)
              ? lower(cast<autopar::SoftmaxCrossEntropyOp>(op), cuda, "fwd")
              : lower(cast<autopar::SoftmaxCrossEntropyGradOp>(op), cuda,
                      "bwd");
      if (failed(lowered))
        return signalPassFailure();
    }
  }
};

} // namespace
