//===- LowerContractionsToCpuKernels.cpp - matmul/conv to runtime calls ---===//
//
// See Passes.td. Only ops whose semantics match the kernels exactly are
// rewritten: default indexing maps, f32 everywhere, memref operands.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace autopar {
#define GEN_PASS_DEF_LOWERCONTRACTIONSTOCPUKERNELS
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// True when every operand is a memref of f32.
bool allF32Memrefs(Operation *op) {
  return llvm::all_of(op->getOperands(), [](Value v) {
    auto type = dyn_cast<MemRefType>(v.getType());
    return type && type.getElementType().isF32();
  });
}

/// Declares (once) `func.func private @name(<operand types>)` with the C
/// interface, and replaces `op` by a call to it.
void replaceWithKernelCall(RewriterBase &rewriter, Operation *op,
                           StringRef name, ValueRange operands) {
  auto module = op->getParentOfType<ModuleOp>();
  // Callees take fully dynamic strided memrefs, so one declaration serves
  // every shape and view.
  SmallVector<Type> argTypes;
  SmallVector<Value> args;
  for (Value v : operands) {
    if (auto type = dyn_cast<MemRefType>(v.getType())) {
      int64_t rank = type.getRank();
      auto layout = StridedLayoutAttr::get(
          rewriter.getContext(), ShapedType::kDynamic,
          SmallVector<int64_t>(rank, ShapedType::kDynamic));
      auto dynType =
          MemRefType::get(SmallVector<int64_t>(rank, ShapedType::kDynamic),
                          type.getElementType(), layout);
      argTypes.push_back(dynType);
      args.push_back(
          memref::CastOp::create(rewriter, op->getLoc(), dynType, v));
    } else {
      argTypes.push_back(v.getType());
      args.push_back(v);
    }
  }
  auto callee = module.lookupSymbol<func::FuncOp>(name);
  if (!callee) {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(module.getBody());
    callee = func::FuncOp::create(rewriter, op->getLoc(), name,
                                  rewriter.getFunctionType(argTypes, {}));
    callee.setPrivate();
    callee->setAttr("llvm.emit_c_interface", rewriter.getUnitAttr());
  }
  rewriter.replaceOpWithNewOp<func::CallOp>(op, callee, args);
}

template <typename OpTy> bool hasDefaultMaps(OpTy op) {
  auto defaults = OpTy::getDefaultIndexingMaps(op.getContext());
  return op.getIndexingMapsArray() == SmallVector<AffineMap>(defaults);
}

/// Matmuls whose A or B map is transposed ((m,n,k) -> (k,m) / (n,k)) call
/// the same kernel on a transposed view: the kernel reads any strides, and
/// BLAS takes a transposed operand for free.
struct MatmulToKernel : OpRewritePattern<linalg::MatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::MatmulOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics() || !allF32Memrefs(op))
      return failure();
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    SmallVector<AffineMap> defaults =
        linalg::MatmulOp::getDefaultIndexingMaps(op.getContext());
    if (maps[2] != defaults[2])
      return failure();
    SmallVector<Value> operands(op->getOperands());
    for (int i : {0, 1}) {
      if (maps[i] == defaults[i])
        continue;
      AffineMap swapped = AffineMap::get(
          3, 0, {defaults[i].getResult(1), defaults[i].getResult(0)},
          op.getContext());
      if (maps[i] != swapped)
        return failure();
      auto perm = AffineMapAttr::get(AffineMap::getPermutationMap(
          ArrayRef<unsigned>{1, 0}, op.getContext()));
      operands[i] =
          memref::TransposeOp::create(rewriter, op.getLoc(), operands[i], perm);
    }
    replaceWithKernelCall(rewriter, op, "autopar_cpu_matmul_f32", operands);
    return success();
  }
};

struct BatchMatmulToKernel : OpRewritePattern<linalg::BatchMatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(linalg::BatchMatmulOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics() || !allF32Memrefs(op) ||
        !hasDefaultMaps(op))
      return failure();
    replaceWithKernelCall(rewriter, op, "autopar_cpu_batch_matmul_f32",
                          op->getOperands());
    return success();
  }
};

/// Appends strides and dilations (as i64 constants) to the operands.
template <typename ConvOp>
SmallVector<Value> convOperands(PatternRewriter &rewriter, ConvOp op) {
  SmallVector<Value> operands(op->getOperands());
  for (auto attr : {op.getStrides(), op.getDilations()})
    for (int64_t v : attr.template getValues<int64_t>())
      operands.push_back(arith::ConstantIntOp::create(
          rewriter, op.getLoc(), rewriter.getI64Type(), v));
  return operands;
}

template <typename ConvOp> struct ConvToKernel : OpRewritePattern<ConvOp> {
  ConvToKernel(MLIRContext *ctx, StringRef kernel)
      : OpRewritePattern<ConvOp>(ctx), kernel(kernel) {}
  LogicalResult matchAndRewrite(ConvOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics() || !allF32Memrefs(op))
      return failure();
    replaceWithKernelCall(rewriter, op, kernel, convOperands(rewriter, op));
    return success();
  }
  std::string kernel;
};

struct LowerContractionsToCpuKernelsPass
    : autopar::impl::LowerContractionsToCpuKernelsBase<
          LowerContractionsToCpuKernelsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<MatmulToKernel, BatchMatmulToKernel>(&getContext());
    patterns.add<ConvToKernel<linalg::Conv2DNchwFchwOp>>(
        &getContext(), "autopar_cpu_conv2d_nchw_f32");
    patterns.add<ConvToKernel<linalg::Conv2DNgchwGfchwOp>>(
        &getContext(), "autopar_cpu_conv2d_ngchw_f32");
    // Walk once: the rewrites create no new matches.
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
