//===- LowerContractionsToKernels.cpp - matmul/conv to runtime calls ------===//
//
// See Passes.td. One set of patterns serves the CPU and the CUDA kernel
// libraries; a `KernelLibrary` says which symbols a target has. Only ops
// whose semantics match the kernels exactly are rewritten: default (or
// transposed-operand) indexing maps, element types the library has a kernel
// for, memref operands.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "KernelCall.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace autopar {
#define GEN_PASS_DEF_LOWERCONTRACTIONSTOCPUKERNELS
#define GEN_PASS_DEF_LOWERCONTRACTIONSTOCUDAKERNELS
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using autopar::replaceWithKernelCall;

namespace {

/// The kernels one target's runtime provides.
struct KernelLibrary {
  /// Prefix of every kernel symbol: "autopar_cpu_" or "autopar_cuda_".
  StringRef prefix;
  /// The type suffix of the GEMM kernel taking A and B of element type `ab`
  /// and C of type `c`, or "" when the library has none.
  std::string (*gemmTypes)(Type ab, Type c);
  /// Whether the library has convolution kernels. The CPU kernels do their
  /// own im2col; on CUDA, `autopar-conv-to-im2col-gemm` turns convolutions
  /// into GEMMs before bufferization.
  bool convolutions;
  /// Whether every kernel has an `_overwrite_` variant that stores its sum
  /// instead of adding it to the output (`<prefix><op>_overwrite_<types>`).
  bool overwriteKernels;
};

/// The CPU kernels (OpenBLAS) are f32 only: `..._f32`.
std::string cpuGemmTypes(Type ab, Type c) {
  return ab.isF32() && c.isF32() ? "f32" : "";
}

/// The CUDA kernels (cuBLASLt) take f32, bf16 or f16 operands and an f32 or
/// same-typed result, always accumulating in fp32 (gpu-backend.md):
/// `..._<a>_<c>`.
std::string cudaGemmTypes(Type ab, Type c) {
  auto name = [](Type t) -> std::string {
    if (t.isF32())
      return "f32";
    if (t.isBF16())
      return "bf16";
    if (t.isF16())
      return "f16";
    return "";
  };
  std::string a = name(ab);
  if (a.empty() || !(c.isF32() || c == ab))
    return "";
  return a + "_" + name(c);
}

const KernelLibrary kCpuKernels{"autopar_cpu_", cpuGemmTypes,
                                /*convolutions=*/true,
                                /*overwriteKernels=*/true};
const KernelLibrary kCudaKernels{"autopar_cuda_", cudaGemmTypes,
                                 /*convolutions=*/false,
                                 /*overwriteKernels=*/true};

/// The element type of a memref operand, or null.
Type memrefElementType(Value v) {
  auto type = dyn_cast<MemRefType>(v.getType());
  return type ? type.getElementType() : Type();
}

/// The GEMM kernel `<prefix><op>_<types>` for `op`'s operands (A, B, C), or
/// "" when the library has no kernel for them.
std::string gemmKernelName(const KernelLibrary &library, Operation *op,
                           StringRef opName) {
  if (op->getNumOperands() != 3)
    return "";
  Type a = memrefElementType(op->getOperand(0));
  Type b = memrefElementType(op->getOperand(1));
  Type c = memrefElementType(op->getOperand(2));
  if (!a || !b || !c || a != b)
    return "";
  std::string types = library.gemmTypes(a, c);
  if (types.empty())
    return "";
  return (library.prefix + opName + "_" + types).str();
}

/// The `linalg.fill` of zeros into `output` that `op` would add to, if it is
/// the last op before `op` that touches memory: the kernel may then store
/// its sum instead and the fill is not needed. Views, casts and constants in
/// between have no memory effects.
linalg::FillOp zeroFillOverwrittenBy(Operation *op, Value output) {
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    auto fill = dyn_cast<linalg::FillOp>(prev);
    if (!fill) {
      if (isMemoryEffectFree(prev))
        continue;
      return {};
    }
    if (!fill.hasPureBufferSemantics() || fill.getOutputs()[0] != output)
      return {};
    Attribute value;
    if (!matchPattern(fill.getInputs()[0], m_Constant(&value)))
      return {};
    auto zero = dyn_cast<FloatAttr>(value);
    if (!zero || !zero.getValue().isZero() || zero.getValue().isNegative())
      return {};
    return fill;
  }
  return {};
}

/// `kernel` (`<prefix><op>_<types>`) as its overwrite variant, erasing the
/// zero fill that makes it one, when the library has it and the fill comes
/// right before `op`; else `kernel`.
std::string overwriteIfZeroFilled(RewriterBase &rewriter,
                                  const KernelLibrary &library, Operation *op,
                                  Value output, StringRef opName,
                                  const std::string &kernel) {
  if (!library.overwriteKernels)
    return kernel;
  linalg::FillOp fill = zeroFillOverwrittenBy(op, output);
  if (!fill)
    return kernel;
  rewriter.eraseOp(fill);
  std::string prefix = (library.prefix + opName + "_").str();
  return prefix + "overwrite_" + kernel.substr(prefix.size());
}

template <typename OpTy> bool hasDefaultMaps(OpTy op) {
  auto defaults = OpTy::getDefaultIndexingMaps(op.getContext());
  return op.getIndexingMapsArray() == SmallVector<AffineMap>(defaults);
}

/// Matmuls whose A or B map is transposed ((m,n,k) -> (k,m) / (n,k)) call
/// the same kernel on a transposed view: the kernel reads any strides, and
/// BLAS takes a transposed operand for free.
struct MatmulToKernel : OpRewritePattern<linalg::MatmulOp> {
  MatmulToKernel(MLIRContext *ctx, const KernelLibrary &library)
      : OpRewritePattern(ctx), library(library) {}
  LogicalResult matchAndRewrite(linalg::MatmulOp op,
                                PatternRewriter &rewriter) const override {
    std::string kernel = gemmKernelName(library, op, "matmul");
    if (!op.hasPureBufferSemantics() || kernel.empty())
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
    kernel = overwriteIfZeroFilled(rewriter, library, op, op->getOperand(2),
                                   "matmul", kernel);
    replaceWithKernelCall(rewriter, op, kernel, operands);
    return success();
  }
  const KernelLibrary &library;
};

struct BatchMatmulToKernel : OpRewritePattern<linalg::BatchMatmulOp> {
  BatchMatmulToKernel(MLIRContext *ctx, const KernelLibrary &library)
      : OpRewritePattern(ctx), library(library) {}
  LogicalResult matchAndRewrite(linalg::BatchMatmulOp op,
                                PatternRewriter &rewriter) const override {
    std::string kernel = gemmKernelName(library, op, "batch_matmul");
    if (!op.hasPureBufferSemantics() || kernel.empty())
      return failure();
    // A or B with its matrix dims swapped (the adjoints of a batched
    // matmul): a transposed view, as for matmul.
    SmallVector<AffineMap> maps = op.getIndexingMapsArray();
    SmallVector<AffineMap> defaults =
        linalg::BatchMatmulOp::getDefaultIndexingMaps(op.getContext());
    if (maps[2] != defaults[2])
      return failure();
    SmallVector<Value> operands(op->getOperands());
    for (int i : {0, 1}) {
      if (maps[i] == defaults[i])
        continue;
      AffineMap swapped =
          AffineMap::get(4, 0,
                         {defaults[i].getResult(0), defaults[i].getResult(2),
                          defaults[i].getResult(1)},
                         op.getContext());
      if (maps[i] != swapped)
        return failure();
      auto perm = AffineMapAttr::get(AffineMap::getPermutationMap(
          ArrayRef<unsigned>{0, 2, 1}, op.getContext()));
      operands[i] =
          memref::TransposeOp::create(rewriter, op.getLoc(), operands[i], perm);
    }
    kernel = overwriteIfZeroFilled(rewriter, library, op, op->getOperand(2),
                                   "batch_matmul", kernel);
    replaceWithKernelCall(rewriter, op, kernel, operands);
    return success();
  }
  const KernelLibrary &library;
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
  ConvToKernel(MLIRContext *ctx, const KernelLibrary &library, StringRef opName)
      : OpRewritePattern<ConvOp>(ctx), library(library), opName(opName),
        kernel((library.prefix + opName + "_f32").str()) {}
  LogicalResult matchAndRewrite(ConvOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureBufferSemantics() ||
        !llvm::all_of(op->getOperands(), [](Value v) {
          Type t = memrefElementType(v);
          return t && t.isF32();
        }))
      return failure();
    std::string name = overwriteIfZeroFilled(
        rewriter, library, op, op.getOutputs()[0], opName, kernel);
    replaceWithKernelCall(rewriter, op, name, convOperands(rewriter, op));
    return success();
  }
  const KernelLibrary &library;
  std::string opName, kernel;
};

/// Rewrites the contractions `library` has kernels for into calls.
LogicalResult lowerContractions(Operation *root, const KernelLibrary &library) {
  MLIRContext *ctx = root->getContext();
  RewritePatternSet patterns(ctx);
  patterns.add<MatmulToKernel, BatchMatmulToKernel>(ctx, library);
  if (library.convolutions) {
    patterns.add<ConvToKernel<linalg::Conv2DNchwFchwOp>>(ctx, library,
                                                         "conv2d_nchw");
    patterns.add<ConvToKernel<linalg::Conv2DNgchwGfchwOp>>(ctx, library,
                                                           "conv2d_ngchw");
  }
  // Walk once: the rewrites create no new matches.
  return applyPatternsGreedily(root, std::move(patterns));
}

struct LowerContractionsToCpuKernelsPass
    : autopar::impl::LowerContractionsToCpuKernelsBase<
          LowerContractionsToCpuKernelsPass> {
  void runOnOperation() override {
    if (failed(lowerContractions(getOperation(), kCpuKernels)))
      signalPassFailure();
  }
};

struct LowerContractionsToCudaKernelsPass
    : autopar::impl::LowerContractionsToCudaKernelsBase<
          LowerContractionsToCudaKernelsPass> {
  void runOnOperation() override {
    if (failed(lowerContractions(getOperation(), kCudaKernels)))
      signalPassFailure();
  }
};

} // namespace
