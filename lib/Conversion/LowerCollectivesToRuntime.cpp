//===- LowerCollectivesToRuntime.cpp - shard collectives to runtime calls -===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/SymbolTable.h"

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

struct LowerCollectivesToRuntimePass
    : autopar::impl::LowerCollectivesToRuntimeBase<
          LowerCollectivesToRuntimePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTableCollection symbols;
    // A sum all-reduced only to be sliced is a reduce-scatter: upstream
    // shard-partition reshards a partial sum to a split that way; moving
    // half the bytes is worth the rewrite.
    module.walk([&](shard::AllSliceOp slice) {
      auto reduce = slice.getInput().getDefiningOp<shard::AllReduceOp>();
      if (!reduce || !reduce->hasOneUse() ||
          reduce.getReduction() != shard::ReductionKind::Sum ||
          reduce.getGridAxes() != slice.getGridAxes() ||
          reduce.getInput().getType() != reduce.getResult().getType())
        return;
      OpBuilder b(slice);
      auto scatter = shard::ReduceScatterOp::create(
          b, slice.getLoc(), slice.getResult().getType(), reduce.getGridAttr(),
          reduce.getGridAxesAttr(), reduce.getInput(),
          shard::ReductionKindAttr::get(b.getContext(),
                                        shard::ReductionKind::Sum),
          slice.getSliceAxisAttr());
      slice.getResult().replaceAllUsesWith(scatter.getResult());
      slice.erase();
      reduce.erase();
    });
    SmallVector<Operation *> worklist;
    module.walk([&](Operation *op) {
      if (isa<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp,
              shard::AllToAllOp, shard::AllSliceOp, shard::ProcessMultiIndexOp,
              shard::GridShapeOp>(op))
        worklist.push_back(op);
    });
    for (Operation *op : worklist)
      if (failed(lower(op, symbols)))
        return signalPassFailure();
    // With every query lowered the grids are unused; the LLVM lowering
    // would not know them.
    for (auto grid : llvm::make_early_inc_range(module.getOps<shard::GridOp>()))
      if (SymbolTable::symbolKnownUseEmpty(grid, module))
        grid.erase();
  }

  /// Declares (once) a private runtime function; memref-taking ones use the
  /// C interface (descriptors passed by pointer).
  func::FuncOp declare(StringRef name, FunctionType type,
                       bool cInterface = true) {
    ModuleOp module = getOperation();
    if (auto f = module.lookupSymbol<func::FuncOp>(name))
      return f;
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToStart(module.getBody());
    auto f = func::FuncOp::create(b, module.getLoc(), name, type);
    f.setPrivate();
    if (cInterface)
      f->setAttr("llvm.emit_c_interface", b.getUnitAttr());
    return f;
  }

  /// The single grid axis a collective runs over.
  FailureOr<int64_t> singleAxis(Operation *op, ArrayRef<int16_t> axes) {
    if (axes.size() != 1) {
      op->emitError("autopar-lower-collectives-to-runtime: collectives over ")
          << axes.size()
          << " grid axes at once are not supported; the runtime runs one "
             "communicator per grid axis";
      return failure();
    }
    return int64_t(axes.front());
  }

  LogicalResult lowerCollective(Operation *op, StringRef kind,
                                ArrayRef<int64_t> extraArgs) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    Value input = op->getOperand(0);
    auto inType = cast<RankedTensorType>(input.getType());
    auto outType = cast<RankedTensorType>(op->getResult(0).getType());
    std::string suffix = typeSuffix(inType.getElementType());
    if (suffix.empty() || !inType.hasStaticShape() || !outType.hasStaticShape())
      return op->emitError("autopar-lower-collectives-to-runtime: ")
             << kind << " of " << inType
             << " is not supported (static f32, f64, i32 or i64 tensors)";
    auto inMemref = MemRefType::get(inType.getShape(), inType.getElementType());
    auto outMemref =
        MemRefType::get(outType.getShape(), outType.getElementType());
    auto unranked = UnrankedMemRefType::get(inType.getElementType(), 0);
    Value inBuf = bufferization::ToBufferOp::create(b, loc, inMemref, input,
                                                    /*read_only=*/true);
    Value outBuf = memref::AllocOp::create(b, loc, outMemref);
    SmallVector<Value> args = {
        memref::CastOp::create(b, loc, unranked, inBuf),
        memref::CastOp::create(b, loc, unranked, outBuf)};
    SmallVector<Type> argTypes = {unranked, unranked};
    for (int64_t v : extraArgs) {
      args.push_back(arith::ConstantIntOp::create(b, loc, b.getI64Type(), v));
      argTypes.push_back(b.getI64Type());
    }
    func::FuncOp callee = declare(("autopar_rt_" + kind + "_" + suffix).str(),
                                  b.getFunctionType(argTypes, {}));
    func::CallOp::create(b, loc, callee, args);
    Value result = bufferization::ToTensorOp::create(
        b, loc, outType, outBuf, /*restrict=*/true, /*writable=*/true);
    op->getResult(0).replaceAllUsesWith(result);
    op->erase();
    return success();
  }

  /// This rank's coordinate on grid axis `axis`, as an index.
  Value gridCoord(OpBuilder &b, Location loc, int64_t axis) {
    func::FuncOp coord =
        declare("autopar_rt_grid_coord",
                b.getFunctionType({b.getI64Type()}, {b.getI64Type()}),
                /*cInterface=*/false);
    Value a = arith::ConstantIntOp::create(b, loc, b.getI64Type(), axis);
    Value c = func::CallOp::create(b, loc, coord, ValueRange{a}).getResult(0);
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), c);
  }

  /// all_slice moves no data: each rank keeps its block of a replicated
  /// tensor, block `coord` along the slice axis.
  LogicalResult lowerAllSlice(shard::AllSliceOp op) {
    auto axis = singleAxis(op, op.getGridAxes());
    if (failed(axis))
      return failure();
    auto outType = cast<RankedTensorType>(op.getResult().getType());
    if (!outType.hasStaticShape())
      return op->emitError("autopar-lower-collectives-to-runtime: all_slice "
                           "of a dynamically shaped tensor is not supported");
    OpBuilder b(op);
    Location loc = op.getLoc();
    int64_t dim = op.getSliceAxis().getSExtValue();
    Value blockSize =
        arith::ConstantIndexOp::create(b, loc, outType.getDimSize(dim));
    Value offset =
        arith::MulIOp::create(b, loc, gridCoord(b, loc, *axis), blockSize);
    SmallVector<OpFoldResult> offsets(outType.getRank(), b.getIndexAttr(0));
    offsets[dim] = offset;
    SmallVector<OpFoldResult> sizes,
        strides(outType.getRank(), b.getIndexAttr(1));
    for (int64_t size : outType.getShape())
      sizes.push_back(b.getIndexAttr(size));
    Value result = tensor::ExtractSliceOp::create(
        b, loc, outType, op.getInput(), offsets, sizes, strides);
    op.getResult().replaceAllUsesWith(result);
    op.erase();
    return success();
  }

  LogicalResult lower(Operation *op, SymbolTableCollection &symbols) {
    if (auto ar = dyn_cast<shard::AllReduceOp>(op)) {
      auto axis = singleAxis(op, ar.getGridAxes());
      if (failed(axis))
        return failure();
      StringRef kind;
      switch (ar.getReduction()) {
      case shard::ReductionKind::Sum:
        kind = "all_reduce";
        break;
      case shard::ReductionKind::Max:
        kind = "all_reduce_max";
        break;
      default:
        return op->emitError("autopar-lower-collectives-to-runtime: "
                             "all_reduce with this reduction is not "
                             "supported (sum, max)");
      }
      return lowerCollective(op, kind, {*axis});
    }
    if (auto ag = dyn_cast<shard::AllGatherOp>(op)) {
      auto axis = singleAxis(op, ag.getGridAxes());
      if (failed(axis))
        return failure();
      return lowerCollective(op, "all_gather",
                             {*axis, ag.getGatherAxis().getSExtValue()});
    }
    if (auto rs = dyn_cast<shard::ReduceScatterOp>(op)) {
      auto axis = singleAxis(op, rs.getGridAxes());
      if (failed(axis))
        return failure();
      if (rs.getReduction() != shard::ReductionKind::Sum)
        return op->emitError("autopar-lower-collectives-to-runtime: "
                             "reduce_scatter supports sum only");
      return lowerCollective(op, "reduce_scatter",
                             {*axis, rs.getScatterAxis().getSExtValue()});
    }
    if (auto a2a = dyn_cast<shard::AllToAllOp>(op)) {
      auto axis = singleAxis(op, a2a.getGridAxes());
      if (failed(axis))
        return failure();
      return lowerCollective(op, "all_to_all",
                             {*axis, a2a.getSplitAxis().getSExtValue(),
                              a2a.getConcatAxis().getSExtValue()});
    }
    OpBuilder b(op);
    Location loc = op->getLoc();
    if (auto slice = dyn_cast<shard::AllSliceOp>(op))
      return lowerAllSlice(slice);
    if (auto shape = dyn_cast<shard::GridShapeOp>(op)) {
      shard::GridOp grid = shard::getGrid(op, shape.getGridAttr(), symbols);
      if (!grid)
        return op->emitError("unknown grid");
      ArrayRef<int16_t> axes = shape.getAxes();
      for (auto [i, result] : llvm::enumerate(op->getResults())) {
        int64_t axis = axes.empty() ? i : axes[i];
        result.replaceAllUsesWith(
            arith::ConstantIndexOp::create(b, loc, grid.getShape()[axis]));
      }
      op->erase();
      return success();
    }
    auto index = cast<shard::ProcessMultiIndexOp>(op);
    shard::GridOp grid = shard::getGrid(op, index.getGridAttr(), symbols);
    if (!grid)
      return op->emitError("unknown grid");
    ArrayRef<int16_t> axes = index.getAxes();
    for (auto [i, result] : llvm::enumerate(op->getResults())) {
      int64_t axis = axes.empty() ? i : axes[i];
      result.replaceAllUsesWith(gridCoord(b, loc, axis));
    }
    op->erase();
    return success();
  }
};

} // namespace
