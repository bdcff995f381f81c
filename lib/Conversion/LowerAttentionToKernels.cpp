//===- LowerAttentionToKernels.cpp - Fused attention to runtime calls -----===//
//
// See Passes.td and docs/design/attention.md: after bufferization,
// autopar.attention and autopar.attention_grad become calls of the runtime's
// FlashAttention kernels, `<prefix>attention_{fwd,bwd}_<type>`, with the
// scale and the flags (bit 0 causal, bit 1 mask present) as scalars. Without
// a mask the kernel gets a stand-in it never reads (a view of lse), so that
// one declaration serves both.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"
#include "autopar/Dialect/AutoparOps.h"

#include "KernelCall.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

namespace autopar {
#define GEN_PASS_DEF_LOWERATTENTIONTOKERNELS
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// The kernels' type suffix for `element`, or "" when the library has none:
/// the CPU kernels are f32 only, the CUDA ones f32 and bf16.
std::string typeSuffix(Type element, bool cuda) {
  if (element.isF32())
    return "f32";
  if (cuda && element.isBF16())
    return "bf16";
  return "";
}

/// `v` itself, or (an input with a strided innermost dim, for the CUDA
/// kernels) a contiguous copy, added to `copies`.
Value contiguousInput(RewriterBase &rewriter, Location loc, Value v,
                      SmallVectorImpl<Value> &copies) {
  if (autopar::hasUnitInnerStride(cast<MemRefType>(v.getType())))
    return v;
  auto type = cast<MemRefType>(v.getType());
  Value copy = memref::AllocOp::create(
      rewriter, loc, MemRefType::get(type.getShape(), type.getElementType()));
  memref::CopyOp::create(rewriter, loc, v, copy);
  copies.push_back(copy);
  return copy;
}

template <typename OpTy>
LogicalResult lower(OpTy op, bool cuda, StringRef direction) {
  IRRewriter rewriter(op);
  Location loc = op.getLoc();
  Type element = cast<MemRefType>(op.getQuery().getType()).getElementType();
  std::string types = typeSuffix(element, cuda);
  if (types.empty())
    return op.emitOpError()
           << "has no " << (cuda ? "CUDA" : "CPU")
           << " kernel for element type " << element << " (the kernels take "
           << (cuda ? "f32 and bf16" : "f32") << ")";
  Value mask = op.getMask();
  if (mask && !cast<MemRefType>(mask.getType()).getElementType().isF32())
    return op.emitOpError("the kernels take an f32 mask");
  SmallVector<Value> operands = {op.getQuery(), op.getKey(), op.getValue()};
  SmallVector<Value> copies;
  Value lse = op.getSaved().empty() ? op.getOutputs()[1] : op.getSaved()[1];
  if (!mask) {
    // A stand-in the kernel does not read: lse as [B, H, S, 1].
    auto lseType = cast<MemRefType>(lse.getType());
    SmallVector<int64_t> shape(lseType.getShape());
    shape.push_back(1);
    mask = memref::ExpandShapeOp::create(
        rewriter, loc, shape, lse,
        SmallVector<ReassociationIndices>{{0}, {1}, {2, 3}});
  }
  // The ABI's order: the gradient's saved values (none in the forward), then
  // the outputs.
  operands.push_back(mask);
  llvm::append_range(operands, op.getSaved());
  llvm::append_range(operands, op.getOutputs());
  if (cuda) {
    // The CUDA kernels read rows of the head dim contiguously.
    for (Value &v : operands) {
      if (v == mask)
        continue;
      if (llvm::is_contained(op.getOutputs(), v)) {
        if (!autopar::hasUnitInnerStride(cast<MemRefType>(v.getType())))
          return op.emitOpError("writes an output whose innermost dim is not "
                                "contiguous, which the CUDA kernels need");
        continue;
      }
      v = contiguousInput(rewriter, loc, v, copies);
    }
  }
  operands.push_back(arith::ConstantOp::create(
      rewriter, loc,
      rewriter.getF32FloatAttr(op.getScale().convertToDouble())));
  operands.push_back(arith::ConstantOp::create(
      rewriter, loc, rewriter.getI32IntegerAttr(op.getKernelFlags())));
  std::string name = (Twine(cuda ? "autopar_cuda_" : "autopar_cpu_") +
                      "attention_" + direction + "_" + types)
                         .str();
  Operation *next = op->getNextNode();
  replaceWithKernelCall(rewriter, op, name, operands);
  // The contiguous copies die with the call: buffers got their frees before
  // this pass, so nothing else would free them (a copy per step, kept).
  rewriter.setInsertionPoint(next);
  for (Value copy : copies)
    memref::DeallocOp::create(rewriter, loc, copy);
  return success();
}

struct LowerAttentionToKernelsPass
    : autopar::impl::LowerAttentionToKernelsBase<LowerAttentionToKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (library != "cpu" && library != "cuda") {
      getOperation().emitError() << "autopar-lower-attention-to-kernels: "
                                    "library must be cpu or cuda, not '"
                                 << library << "'";
      return signalPassFailure();
    }
    bool cuda = library == "cuda";
    SmallVector<Operation *> ops;
    getOperation().walk([&](Operation *op) {
      if (isa<autopar::AttentionOp, autopar::AttentionGradOp>(op))
        ops.push_back(op);
    });
    for (Operation *op : ops) {
      if (!cast<DestinationStyleOpInterface>(op).hasPureBufferSemantics()) {
        op->emitOpError("must be bufferized before it is lowered to kernels");
        return signalPassFailure();
      }
      LogicalResult lowered =
          isa<autopar::AttentionOp>(op)
              ? lower(cast<autopar::AttentionOp>(op), cuda, "fwd")
              : lower(cast<autopar::AttentionGradOp>(op), cuda, "bwd");
      if (failed(lowered))
        return signalPassFailure();
    }
  }
};

} // namespace
