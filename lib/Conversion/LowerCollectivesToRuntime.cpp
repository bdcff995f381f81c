//===- LowerCollectivesToRuntime.cpp - shard collectives to runtime calls -===//
//
// See Passes.td. One conversion pattern per shard op; the ConversionTarget
// makes every collective and grid query illegal, so a collective the runtime
// cannot run is an error at its location, not a leftover op.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace autopar {
#define GEN_PASS_DEF_LOWERCOLLECTIVESTORUNTIME
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// The runtime's name for an element type, or "" if it has no collective
/// for it.
std::string typeSuffix(Type t) {
  if (t.isF32())
    return "f32";
  if (t.isF64())
    return "f64";
  if (t.isInteger(32))
    return "i32";
  if (t.isInteger(64))
    return "i64";
  return "";
}

/// `value` converted elementwise to element type `to` (f32 from a 16-bit
/// float, or back).
Value convertFloats(OpBuilder &b, Location loc, Value value, Type to) {
  auto type = cast<RankedTensorType>(value.getType());
  Value init = tensor::EmptyOp::create(b, loc, type.getShape(), to);
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  bool widen = to.getIntOrFloatBitWidth() >
               type.getElementType().getIntOrFloatBitWidth();
  return linalg::GenericOp::create(
             b, loc, TypeRange{init.getType()}, ValueRange{value},
             ValueRange{init}, ArrayRef<AffineMap>{id, id},
             SmallVector<utils::IteratorType>(type.getRank(),
                                              utils::IteratorType::parallel),
             [&](OpBuilder &nb, Location nl, ValueRange args) {
               Value converted =
                   widen
                       ? arith::ExtFOp::create(nb, nl, to, args[0]).getResult()
                       : arith::TruncFOp::create(nb, nl, to, args[0])
                             .getResult();
               linalg::YieldOp::create(nb, nl, converted);
             })
      .getResult(0);
}

/// A collective of bf16 or f16 values (mixed precision) run on f32: its
/// operand widened, its result rounded back. The runtime's collectives take
/// f32 (MPI has no 16-bit float type); moving data this way is exact, and
/// sums accumulate in f32 before the one rounding.
void widenHalfCollective(Operation *op) {
  auto inType = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  auto outType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!inType || !outType || !inType.hasStaticShape() ||
      !outType.hasStaticShape())
    return;
  Type element = inType.getElementType();
  if (!element.isBF16() && !element.isF16())
    return;
  OpBuilder b(op);
  Location loc = op->getLoc();
  Type f32 = b.getF32Type();
  Value wide = convertFloats(b, loc, op->getOperand(0), f32);
  Operation *wideOp = b.clone(*op);
  wideOp->setOperand(0, wide);
  wideOp->getResult(0).setType(outType.clone(f32));
  b.setInsertionPointAfter(wideOp);
  op->getResult(0).replaceAllUsesWith(
      convertFloats(b, loc, wideOp->getResult(0), element));
  op->erase();
}

/// Declares (once) a private runtime function in `op`'s module; memref-taking
/// ones use the C interface (descriptors passed by pointer).
func::FuncOp declare(OpBuilder &b, Operation *op, StringRef name,
                     FunctionType type, bool cInterface = true) {
  auto module = op->getParentOfType<ModuleOp>();
  if (auto f = module.lookupSymbol<func::FuncOp>(name))
    return f;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());
  auto f = func::FuncOp::create(b, module.getLoc(), name, type);
  f.setPrivate();
  if (cInterface)
    f->setAttr("llvm.emit_c_interface", b.getUnitAttr());
  return f;
}

/// This rank's coordinate on grid axis `axis`, as an index.
Value gridCoord(OpBuilder &b, Operation *op, int64_t axis) {
  Location loc = op->getLoc();
  func::FuncOp coord =
      declare(b, op, "autopar_rt_grid_coord",
              b.getFunctionType({b.getI64Type()}, {b.getI64Type()}),
              /*cInterface=*/false);
  Value a = arith::ConstantIntOp::create(b, loc, b.getI64Type(), axis);
  Value c = func::CallOp::create(b, loc, coord, ValueRange{a}).getResult(0);
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), c);
}

/// The single grid axis a collective runs over; the runtime runs one
/// communicator per axis.
FailureOr<int64_t> singleAxis(Operation *op, ArrayRef<int16_t> axes) {
  if (axes.size() == 1)
    return int64_t(axes.front());
  op->emitError("autopar-lower-collectives-to-runtime: collectives over ")
      << axes.size()
      << " grid axes at once are not supported; the runtime runs one "
         "communicator per grid axis";
  return failure();
}

/// Replaces the data-moving collective `op` (input operand 0, one result)
/// by `autopar_rt_<kind>_<type>(in, out, extraArgs...)` on buffers.
LogicalResult replaceWithRuntimeCall(ConversionPatternRewriter &rewriter,
                                     Operation *op, Value input, StringRef kind,
                                     ArrayRef<int64_t> extraArgs) {
  Location loc = op->getLoc();
  auto inType = cast<RankedTensorType>(input.getType());
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());
  // checkSupported: a runtime type and static shapes.
  std::string suffix = typeSuffix(inType.getElementType());
  auto inMemref = MemRefType::get(inType.getShape(), inType.getElementType());
  auto outMemref =
      MemRefType::get(outType.getShape(), outType.getElementType());
  auto unranked = UnrankedMemRefType::get(inType.getElementType(), 0);
  Value inBuf = bufferization::ToBufferOp::create(rewriter, loc, inMemref,
                                                  input, /*read_only=*/true);
  Value outBuf = memref::AllocOp::create(rewriter, loc, outMemref);
  SmallVector<Value> args = {
      memref::CastOp::create(rewriter, loc, unranked, inBuf),
      memref::CastOp::create(rewriter, loc, unranked, outBuf)};
  SmallVector<Type> argTypes = {unranked, unranked};
  for (int64_t v : extraArgs) {
    args.push_back(
        arith::ConstantIntOp::create(rewriter, loc, rewriter.getI64Type(), v));
    argTypes.push_back(rewriter.getI64Type());
  }
  func::FuncOp callee =
      declare(rewriter, op, ("autopar_rt_" + kind + "_" + suffix).str(),
              rewriter.getFunctionType(argTypes, {}));
  func::CallOp::create(rewriter, loc, callee, args);
  rewriter.replaceOpWithNewOp<bufferization::ToTensorOp>(
      op, outType, outBuf, /*restrict=*/true, /*writable=*/true);
  return success();
}

/// The runtime entry point of a data-moving collective and its i64 arguments
/// after the two buffers: the grid axis (checkSupported: exactly one), then
/// the op's dims.
struct RuntimeCall {
  StringRef kind;
  SmallVector<int64_t> args;
};

RuntimeCall runtimeCall(shard::AllReduceOp op) {
  return {op.getReduction() == shard::ReductionKind::Max ? "all_reduce_max"
                                                         : "all_reduce",
          {op.getGridAxes().front()}};
}
RuntimeCall runtimeCall(shard::AllGatherOp op) {
  return {"all_gather",
          {op.getGridAxes().front(), op.getGatherAxis().getSExtValue()}};
}
RuntimeCall runtimeCall(shard::ReduceScatterOp op) {
  return {"reduce_scatter",
          {op.getGridAxes().front(), op.getScatterAxis().getSExtValue()}};
}
RuntimeCall runtimeCall(shard::AllToAllOp op) {
  return {"all_to_all",
          {op.getGridAxes().front(), op.getSplitAxis().getSExtValue(),
           op.getConcatAxis().getSExtValue()}};
}

/// all_reduce, all_gather, reduce_scatter and all_to_all: a runtime call on
/// buffers (replaceWithRuntimeCall).
template <typename CollectiveOp>
struct CollectiveLowering : OpConversionPattern<CollectiveOp> {
  using OpConversionPattern<CollectiveOp>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CollectiveOp op, typename CollectiveOp::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RuntimeCall call = runtimeCall(op);
    return replaceWithRuntimeCall(rewriter, op, adaptor.getInput(), call.kind,
                                  call.args);
  }
};

/// all_slice moves no data: each rank keeps its block of a replicated
/// tensor, block `coord` along the slice axis.
struct AllSliceLowering : OpConversionPattern<shard::AllSliceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(shard::AllSliceOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    // checkSupported: one axis, a supported reduction and type.
    int64_t axis = op.getGridAxes().front();
    auto outType = cast<RankedTensorType>(op.getResult().getType());
    Location loc = op.getLoc();
    int64_t dim = op.getSliceAxis().getSExtValue();
    Value blockSize =
        arith::ConstantIndexOp::create(rewriter, loc, outType.getDimSize(dim));
    Value offset = arith::MulIOp::create(
        rewriter, loc, gridCoord(rewriter, op, axis), blockSize);
    SmallVector<OpFoldResult> offsets(outType.getRank(),
                                      rewriter.getIndexAttr(0));
    offsets[dim] = offset;
    SmallVector<OpFoldResult> sizes,
        strides(outType.getRank(), rewriter.getIndexAttr(1));
    for (int64_t size : outType.getShape())
      sizes.push_back(rewriter.getIndexAttr(size));
    rewriter.replaceOpWithNewOp<tensor::ExtractSliceOp>(
        op, outType, adaptor.getInput(), offsets, sizes, strides);
    return success();
  }
};

/// The grid's shape is known at compile time.
struct GridShapeLowering : OpConversionPattern<shard::GridShapeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(shard::GridShapeOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    SymbolTableCollection symbols;
    shard::GridOp grid = shard::getGrid(op, op.getGridAttr(), symbols);
    if (!grid)
      return op->emitError("unknown grid");
    ArrayRef<int16_t> axes = op.getAxes();
    SmallVector<Value> sizes;
    for (unsigned i = 0; i < op->getNumResults(); ++i) {
      int64_t axis = axes.empty() ? i : axes[i];
      sizes.push_back(arith::ConstantIndexOp::create(rewriter, op.getLoc(),
                                                     grid.getShape()[axis]));
    }
    rewriter.replaceOp(op, sizes);
    return success();
  }
};

/// This rank's coordinates come from the runtime.
struct ProcessMultiIndexLowering
    : OpConversionPattern<shard::ProcessMultiIndexOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(shard::ProcessMultiIndexOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    SymbolTableCollection symbols;
    if (!shard::getGrid(op, op.getGridAttr(), symbols))
      return op->emitError("unknown grid");
    ArrayRef<int16_t> axes = op.getAxes();
    SmallVector<Value> coords;
    for (unsigned i = 0; i < op->getNumResults(); ++i)
      coords.push_back(gridCoord(rewriter, op, axes.empty() ? i : axes[i]));
    rewriter.replaceOp(op, coords);
    return success();
  }
};

/// A sum all-reduced only to be sliced is a reduce-scatter: upstream
/// shard-partition reshards a partial sum to a split that way; moving half
/// the bytes is worth the rewrite.
struct AllSliceOfAllReduceToReduceScatter
    : OpRewritePattern<shard::AllSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(shard::AllSliceOp slice,
                                PatternRewriter &rewriter) const override {
    auto reduce = slice.getInput().getDefiningOp<shard::AllReduceOp>();
    if (!reduce || !reduce->hasOneUse() ||
        reduce.getReduction() != shard::ReductionKind::Sum ||
        reduce.getGridAxes() != slice.getGridAxes() ||
        reduce.getInput().getType() != reduce.getResult().getType())
      return failure();
    rewriter.replaceOpWithNewOp<shard::ReduceScatterOp>(
        slice, slice.getResult().getType(), reduce.getGridAttr(),
        reduce.getGridAxesAttr(), reduce.getInput(),
        shard::ReductionKindAttr::get(rewriter.getContext(),
                                      shard::ReductionKind::Sum),
        slice.getSliceAxisAttr());
    rewriter.eraseOp(reduce);
    return success();
  }
};

/// Emits an error at `op` if the runtime cannot run it; the patterns then
/// only see collectives they can lower.
LogicalResult checkSupported(Operation *op) {
  auto error = [&]() {
    return op->emitError("autopar-lower-collectives-to-runtime: ");
  };
  ArrayRef<int16_t> axes;
  if (auto ar = dyn_cast<shard::AllReduceOp>(op)) {
    axes = ar.getGridAxes();
    if (ar.getReduction() != shard::ReductionKind::Sum &&
        ar.getReduction() != shard::ReductionKind::Max)
      return error() << "all_reduce with this reduction is not supported "
                        "(sum, max)";
  } else if (auto rs = dyn_cast<shard::ReduceScatterOp>(op)) {
    axes = rs.getGridAxes();
    if (rs.getReduction() != shard::ReductionKind::Sum)
      return error() << "reduce_scatter supports sum only";
  } else if (auto ag = dyn_cast<shard::AllGatherOp>(op)) {
    axes = ag.getGridAxes();
  } else if (auto a2a = dyn_cast<shard::AllToAllOp>(op)) {
    axes = a2a.getGridAxes();
  } else if (auto slice = dyn_cast<shard::AllSliceOp>(op)) {
    if (failed(singleAxis(op, slice.getGridAxes())))
      return failure();
    if (!cast<RankedTensorType>(slice.getResult().getType()).hasStaticShape())
      return error() << "all_slice of a dynamically shaped tensor is not "
                        "supported";
    return success();
  } else {
    return success(); // Grid queries: always.
  }
  if (failed(singleAxis(op, axes)))
    return failure();
  auto inType = cast<RankedTensorType>(op->getOperand(0).getType());
  auto outType = cast<RankedTensorType>(op->getResult(0).getType());
  if (typeSuffix(inType.getElementType()).empty() || !inType.hasStaticShape() ||
      !outType.hasStaticShape())
    return error() << op->getName().stripDialect() << " of " << inType
                   << " is not supported (static f32, f64, i32 or i64 "
                      "tensors; bf16 and f16 run as f32)";
  return success();
}

struct LowerCollectivesToRuntimePass
    : autopar::impl::LowerCollectivesToRuntimeBase<
          LowerCollectivesToRuntimePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    {
      RewritePatternSet fold(ctx);
      autopar::populateCollectiveFoldPatterns(fold);
      if (failed(applyPatternsGreedily(module, std::move(fold))))
        return signalPassFailure();
    }

    SmallVector<Operation *> halves;
    module.walk([&](Operation *op) {
      if (isa<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp,
              shard::AllToAllOp>(op))
        halves.push_back(op);
    });
    for (Operation *op : halves)
      widenHalfCollective(op);

    // Every unsupported collective is reported, then nothing is lowered.
    bool supported = true;
    module.walk([&](Operation *op) {
      if (isa<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp,
              shard::AllToAllOp, shard::AllSliceOp>(op))
        supported &= succeeded(checkSupported(op));
    });
    if (!supported)
      return signalPassFailure();

    ConversionTarget target(*ctx);
    target.addIllegalOp<shard::AllReduceOp, shard::AllGatherOp,
                        shard::ReduceScatterOp, shard::AllToAllOp,
                        shard::AllSliceOp, shard::ProcessMultiIndexOp,
                        shard::GridShapeOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(ctx);
    patterns.add<CollectiveLowering<shard::AllReduceOp>,
                 CollectiveLowering<shard::AllGatherOp>,
                 CollectiveLowering<shard::ReduceScatterOp>,
                 CollectiveLowering<shard::AllToAllOp>, AllSliceLowering,
                 GridShapeLowering, ProcessMultiIndexLowering>(ctx);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();

    // With every query lowered the grids are unused; the LLVM lowering
    // would not know them.
    for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      if (SymbolTable::symbolKnownUseEmpty(grid, module))
        grid.erase();
  }
};

} // namespace

void autopar::populateCollectiveFoldPatterns(RewritePatternSet &patterns) {
  patterns.add<AllSliceOfAllReduceToReduceScatter>(patterns.getContext());
}
