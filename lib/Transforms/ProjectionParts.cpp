//===- ProjectionParts.cpp - Fused projections with a part dim ------------===//
//
// See Passes.td (autopar-expose-projection-parts). The parts of
// `matmul(A, W[K, P*N])` are its column blocks `W[:, p*N : (p+1)*N]`. Viewing
// the columns as `[P, N]` keeps the bytes and makes "block p" an index of the
// part dim and "a rank's share of every part" a split of the N dim, which
// sharding can express. Megatron-LM gets the same layout by storing the QKV
// weight with the heads outermost.
//
//===----------------------------------------------------------------------===//

#include "autopar/Transforms/ProjectionParts.h"

#include "autopar/Dialect/Attributes.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

namespace autopar {
#define GEN_PASS_DEF_EXPOSEPROJECTIONPARTS
#define GEN_PASS_DEF_MERGEPROJECTIONPARTS
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// Marks the contractions this file writes, for the merge after partitioning.
constexpr llvm::StringLiteral kMarker = "autopar.projection_parts";

/// Whether `v` is a parameter of its function read only by `user`.
bool isParameterOnlyFor(Value v, Operation *user) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || !v.hasOneUse() || *v.user_begin() != user)
    return false;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  return func &&
         func.getArgAttr(arg.getArgNumber(), autopar::attrs::kParameter);
}

/// The only user of `v`, if it is an `OpTy`.
template <typename OpTy> OpTy soleUser(Value v) {
  return v.hasOneUse() ? dyn_cast<OpTy>(*v.user_begin()) : OpTy();
}

struct FusedProjection {
  linalg::MatmulOp matmul;
  Attribute zero; ///< the value the matmul's accumulator starts from
  tensor::ExpandShapeOp expand;
  linalg::GenericOp epilogue;
  int64_t bias = -1; ///< the epilogue's input that is a bias parameter
  SmallVector<tensor::ExtractSliceOp> slices;
  int64_t parts = 0, width = 0;
};

/// The epilogue of a projection whose result is `v`: an elementwise generic
/// reading `v` whole and perhaps a bias parameter along the columns.
bool matchEpilogue(linalg::GenericOp op, Value v, FusedProjection &fp) {
  int64_t rank = cast<RankedTensorType>(v.getType()).getRank();
  if (op.getNumDpsInits() != 1 || op.getNumReductionLoops() != 0 ||
      op.getNumLoops() != rank ||
      !op.getIndexingMapsArray().back().isIdentity())
    return false;
  bool indexed = false;
  op->walk([&](linalg::IndexOp) { indexed = true; });
  if (indexed)
    return false;
  AffineMap column = AffineMap::get(
      rank, 0, getAffineDimExpr(rank - 1, op.getContext()), op.getContext());
  bool sawV = false;
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    if (input->get() == v && map.isIdentity() && !sawV)
      sawV = true;
    else if (map == column && fp.bias < 0 &&
             isParameterOnlyFor(input->get(), op))
      fp.bias = input->getOperandNumber();
    else
      return false;
  }
  return sawV;
}

std::optional<FusedProjection> matchFusedProjection(linalg::MatmulOp mm) {
  FusedProjection fp;
  fp.matmul = mm;
  MLIRContext *ctx = mm.getContext();
  AffineExpr m, n, k;
  bindDims(ctx, m, n, k);
  auto defaults = AffineMap::inferFromExprList(
      ArrayRef<ArrayRef<AffineExpr>>{{m, k}, {k, n}, {m, n}}, ctx);
  auto fill = mm.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
  if (!mm.hasPureTensorSemantics() || mm.getIndexingMapsArray() != defaults ||
      !isa<FloatType>(getElementTypeOrSelf(mm.getResult(0).getType())) ||
      !isParameterOnlyFor(mm.getDpsInputs()[1], mm) || !fill ||
      !matchPattern(fill.getInputs()[0], m_Constant(&fp.zero)))
    return std::nullopt;
  Value v = mm.getResult(0);
  int64_t columns = cast<RankedTensorType>(v.getType()).getDimSize(1);
  if ((fp.expand = soleUser<tensor::ExpandShapeOp>(v))) {
    // The columns must stay a dim of their own.
    if (fp.expand.getReassociationIndices().back().size() != 1)
      return std::nullopt;
    v = fp.expand.getResult();
  }
  if ((fp.epilogue = soleUser<linalg::GenericOp>(v))) {
    if (!matchEpilogue(fp.epilogue, v, fp))
      return std::nullopt;
    v = fp.epilogue.getResult(0);
  }
  auto type = cast<RankedTensorType>(v.getType());
  int64_t last = type.getRank() - 1;
  for (Operation *user : v.getUsers()) {
    auto slice = dyn_cast<tensor::ExtractSliceOp>(user);
    if (!slice || slice.getResultType().getRank() != type.getRank() ||
        !slice.hasUnitStride() ||
        ShapedType::isDynamicShape(slice.getStaticSizes()) ||
        ShapedType::isDynamicShape(slice.getStaticOffsets()))
      return std::nullopt;
    for (int64_t d = 0; d < last; ++d)
      if (slice.getStaticOffset(d) != 0 ||
          slice.getStaticSize(d) != type.getDimSize(d))
        return std::nullopt;
    int64_t width = slice.getStaticSize(last);
    if ((fp.width && width != fp.width) ||
        slice.getStaticOffset(last) % width != 0)
      return std::nullopt;
    fp.width = width;
    fp.slices.push_back(slice);
  }
  if (fp.slices.empty() || columns % fp.width != 0)
    return std::nullopt;
  fp.parts = columns / fp.width;
  if (fp.parts < 2)
    return std::nullopt;
  return fp;
}

/// `shape` with its last dim cut into [parts, shape.back() / parts].
SmallVector<int64_t> withParts(ArrayRef<int64_t> shape, int64_t parts) {
  SmallVector<int64_t> result(shape.drop_back());
  result.push_back(parts);
  result.push_back(shape.back() / parts);
  return result;
}

/// Gives parameter `arg` the shape `withParts` of its own (same bytes).
void viewWithParts(BlockArgument arg, int64_t parts) {
  auto type = cast<RankedTensorType>(arg.getType());
  arg.setType(type.clone(withParts(type.getShape(), parts)));
}

void rewrite(FusedProjection &fp) {
  linalg::MatmulOp mm = fp.matmul;
  MLIRContext *ctx = mm.getContext();
  OpBuilder b(mm);
  int64_t parts = fp.parts;
  Value a = mm.getDpsInputs()[0];
  auto w = cast<BlockArgument>(mm.getDpsInputs()[1]);
  viewWithParts(w, parts);

  // C[m, p, n] = sum_k A[m, k] * W[k, p, n]
  auto cType = cast<RankedTensorType>(mm.getResult(0).getType());
  SmallVector<int64_t> cShape = withParts(cType.getShape(), parts);
  Location loc = mm.getLoc();
  Value init =
      linalg::FillOp::create(
          b, loc,
          arith::ConstantOp::create(b, loc, cast<TypedAttr>(fp.zero))
              .getResult(),
          tensor::EmptyOp::create(b, loc, cShape, cType.getElementType())
              .getResult())
          .getResult(0);
  AffineExpr m, p, n, k;
  bindDims(ctx, m, p, n, k);
  auto maps = AffineMap::inferFromExprList(
      ArrayRef<ArrayRef<AffineExpr>>{{m, k}, {k, p, n}, {m, p, n}}, ctx);
  SmallVector<utils::IteratorType> iterators(3, utils::IteratorType::parallel);
  iterators.push_back(utils::IteratorType::reduction);
  auto contraction = linalg::GenericOp::create(
      b, loc, init.getType(), ValueRange{a, w}, init, maps, iterators,
      [](OpBuilder &nb, Location nloc, ValueRange args) {
        Value product = arith::MulFOp::create(nb, nloc, args[0], args[1]);
        linalg::YieldOp::create(
            nb, nloc,
            arith::AddFOp::create(nb, nloc, args[2], product).getResult());
      });
  contraction->setAttr(kMarker, b.getUnitAttr());
  Value v = contraction.getResult(0);

  if (fp.expand) {
    b.setInsertionPoint(fp.expand);
    SmallVector<ReassociationIndices> groups =
        fp.expand.getReassociationIndices();
    groups.push_back({groups.back().front() + 1});
    v = tensor::ExpandShapeOp::create(
        b, fp.expand.getLoc(),
        fp.expand.getResultType().clone(
            withParts(fp.expand.getResultType().getShape(), parts)),
        v, groups);
  }
  auto vType = cast<RankedTensorType>(v.getType());
  int64_t rank = vType.getRank();
  if (fp.epilogue) {
    b.setInsertionPoint(fp.epilogue);
    SmallVector<AffineMap> epilogueMaps;
    SmallVector<Value> inputs;
    for (OpOperand *input : fp.epilogue.getDpsInputOperands()) {
      if (int64_t(input->getOperandNumber()) == fp.bias) {
        auto bias = cast<BlockArgument>(input->get());
        viewWithParts(bias, parts);
        inputs.push_back(bias);
        epilogueMaps.push_back(AffineMap::get(
            rank, 0,
            {getAffineDimExpr(rank - 2, ctx), getAffineDimExpr(rank - 1, ctx)},
            ctx));
      } else {
        inputs.push_back(v);
        epilogueMaps.push_back(AffineMap::getMultiDimIdentityMap(rank, ctx));
      }
    }
    epilogueMaps.push_back(AffineMap::getMultiDimIdentityMap(rank, ctx));
    Value empty = tensor::EmptyOp::create(
        b, fp.epilogue.getLoc(), vType.getShape(), vType.getElementType());
    auto epilogue = linalg::GenericOp::create(
        b, fp.epilogue.getLoc(), vType, inputs, empty, epilogueMaps,
        SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel));
    epilogue.getRegion().takeBody(fp.epilogue.getRegion());
    v = epilogue.getResult(0);
  }

  // Part q of width N: index q of the part dim (dropped), all of N.
  for (tensor::ExtractSliceOp slice : fp.slices) {
    b.setInsertionPoint(slice);
    SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0)), sizes,
        strides(rank, b.getIndexAttr(1));
    for (int64_t size : vType.getShape())
      sizes.push_back(b.getIndexAttr(size));
    offsets[rank - 2] =
        b.getIndexAttr(slice.getStaticOffset(rank - 2) / fp.width);
    sizes[rank - 2] = b.getIndexAttr(1);
    auto part = tensor::ExtractSliceOp::create(
        b, slice.getLoc(), slice.getResultType(), v, offsets, sizes, strides);
    slice.getResult().replaceAllUsesWith(part.getResult());
    slice.erase();
  }
  SmallVector<Value> inits = {mm.getDpsInits()[0]};
  if (fp.epilogue)
    inits.push_back(fp.epilogue.getDpsInits()[0]);
  for (Operation *old : {fp.epilogue.getOperation(), fp.expand.getOperation(),
                         mm.getOperation()})
    if (old)
      old->erase();
  // The old inits (empty tensors, the matmul's filled), now unused: left,
  // they would be ops that shard-partition cannot annotate.
  for (Value init : inits)
    for (Operation *def = init.getDefiningOp();
         def && isOpTriviallyDead(def);) {
      Operation *next = def->getNumOperands() > 0
                            ? def->getOperands().back().getDefiningOp()
                            : nullptr;
      def->erase();
      def = next;
    }
}

struct ExposeProjectionPartsPass
    : autopar::impl::ExposeProjectionPartsBase<ExposeProjectionPartsPass> {
  void runOnOperation() override {
    autopar::exposeProjectionParts(getOperation());
  }
};

/// C[m, p, n] = A[m, k] * W[k, p, n] as a matmul over the (p, n) columns.
struct MergeProjectionPartsPass
    : autopar::impl::MergeProjectionPartsBase<MergeProjectionPartsPass> {
  void runOnOperation() override {
    getOperation().walk([](linalg::GenericOp op) {
      if (!op->hasAttr(kMarker))
        return;
      OpBuilder b(op);
      Location loc = op.getLoc();
      SmallVector<ReassociationIndices> columns = {{0}, {1, 2}};
      auto collapse = [&](Value v) {
        return tensor::CollapseShapeOp::create(b, loc, v, columns).getResult();
      };
      Value c = collapse(op.getDpsInits()[0]);
      Value product =
          linalg::MatmulOp::create(
              b, loc,
              ValueRange{op.getDpsInputs()[0], collapse(op.getDpsInputs()[1])},
              ValueRange{c})
              .getResult(0);
      Value result = tensor::ExpandShapeOp::create(
          b, loc, op.getResultTypes()[0], product, columns);
      op.getResult(0).replaceAllUsesWith(result);
      op.erase();
    });
  }
};

} // namespace

int autopar::exposeProjectionParts(func::FuncOp func) {
  SmallVector<FusedProjection> found;
  func.walk([&](linalg::MatmulOp mm) {
    if (std::optional<FusedProjection> fp = matchFusedProjection(mm))
      found.push_back(std::move(*fp));
  });
  for (FusedProjection &fp : found)
    rewrite(fp);
  if (!found.empty())
    func.setType(FunctionType::get(func.getContext(),
                                   func.getBody().front().getArgumentTypes(),
                                   func.getResultTypes()));
  return found.size();
}
