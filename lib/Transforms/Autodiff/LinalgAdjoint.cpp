//===- LinalgAdjoint.cpp - The adjoint of a structured op -----------------===//
//
// One rule covers every linalg op whose body is scalar arithmetic (named ops
// included: their bodies are regions too). For an op computing
//   Y[Mo(i)] = f(X_1[M_1(i)], ..., X_n[M_n(i)])            (all-parallel), or
//   Y[Mo(i)] = Y[Mo(i)] (+|max|min) g(X_1[M_1(i)], ...)    (a reduction),
// the adjoint of X_k is a linalg.generic over the same iteration domain i:
//   dX_k[M_k(i)] += dY[Mo(i)] * d f / d x_k
// whose loops absent from M_k become reduction loops (a broadcast operand's
// gradient is summed over the dims it was broadcast along). A max/min
// reduction routes the gradient to the elements equal to the result, as
// PyTorch's amax/amin backward does for distinct values.
//
// Contractions keep their form: the adjoint of a 2-D matmul is a matmul with
// transposed indexing maps, which the backends call BLAS / cuBLASLt for.
//
//===----------------------------------------------------------------------===//

#include "AdjointBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;

namespace autopar::autodiff {
namespace {

enum class Combiner { None, Add, Max, Min };

/// How a reduction's body combines the accumulator with the new value.
Combiner classifyCombiner(Operation *op) {
  if (isa<arith::AddFOp>(op))
    return Combiner::Add;
  if (isa<arith::MaximumFOp, arith::MaxNumFOp>(op))
    return Combiner::Max;
  if (isa<arith::MinimumFOp, arith::MinNumFOp>(op))
    return Combiner::Min;
  return Combiner::None;
}

/// A 2-D matmul computing dX for one operand of `op` (a linalg.matmul with
/// maps over (m, n, k)), or null when the maps do not fit a matmul's form.
/// `lhs`/`lhsMap` and `rhs`/`rhsMap` are the two factors of the adjoint
/// contraction, `outMap` the map of the operand being differentiated.
Value buildMatmulAdjoint(OpBuilder &b, Location loc, Value lhs,
                         AffineMap lhsMap, Value rhs, AffineMap rhsMap,
                         AffineMap outMap, Value init) {
  // Rename the dims so that the output is (d0, d1) and the contracted dim
  // (the one outMap lacks) is d2.
  if (outMap.getNumResults() != 2 || !outMap.isProjectedPermutation())
    return nullptr;
  unsigned d0 = outMap.getDimPosition(0), d1 = outMap.getDimPosition(1);
  unsigned d2 = 3 - d0 - d1;
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineExpr> rename(3);
  rename[d0] = getAffineDimExpr(0, ctx);
  rename[d1] = getAffineDimExpr(1, ctx);
  rename[d2] = getAffineDimExpr(2, ctx);
  auto renamed = [&](AffineMap m) {
    return m.replaceDimsAndSymbols(rename, {}, 3, 0);
  };
  AffineMap l = renamed(lhsMap), r = renamed(rhsMap);
  auto is = [&](AffineMap m, unsigned x, unsigned y) {
    return m.getNumResults() == 2 && m.isProjectedPermutation() &&
           m.getDimPosition(0) == x && m.getDimPosition(1) == y;
  };
  // A: (d0, d2) or transposed (d2, d0); B: (d2, d1) or transposed (d1, d2).
  if (!(is(l, 0, 2) || is(l, 2, 0)) || !(is(r, 2, 1) || is(r, 1, 2)))
    return nullptr;
  Attribute maps[] = {AffineMapAttr::get(l), AffineMapAttr::get(r),
                      AffineMapAttr::get(renamed(outMap))};
  return linalg::MatmulOp::create(
             b, loc, TypeRange{init.getType()}, ValueRange{lhs, rhs},
             ValueRange{init},
             {b.getNamedAttr("indexing_maps", b.getArrayAttr(maps))})
      .getResult(0);
}

/// `v` with its dims permuted: result dim i is `v`'s dim perm[i], and dims
/// listed in `flip` (result dims) reversed.
Value permuteAndFlip(OpBuilder &b, Location loc, Value v,
                     ArrayRef<int64_t> perm, ArrayRef<int64_t> flip = {}) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape;
  for (int64_t d : perm)
    shape.push_back(type.getDimSize(d));
  MLIRContext *ctx = b.getContext();
  int64_t rank = perm.size();
  // The input is read at (result dim i -> input dim perm[i]), reversed
  // where flipped.
  SmallVector<AffineExpr> exprs(rank);
  for (int64_t i = 0; i < rank; ++i) {
    AffineExpr e = getAffineDimExpr(i, ctx);
    if (llvm::is_contained(flip, i))
      e = getAffineConstantExpr(shape[i] - 1, ctx) - e;
    exprs[perm[i]] = e;
  }
  AffineMap maps[] = {AffineMap::get(rank, 0, exprs, ctx),
                      AffineMap::getMultiDimIdentityMap(rank, ctx)};
  Value init = tensor::EmptyOp::create(b, loc, shape, type.getElementType());
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  return linalg::GenericOp::create(
             b, loc, TypeRange{init.getType()}, ValueRange{v}, ValueRange{init},
             maps, iterators,
             [](OpBuilder &nb, Location nl, ValueRange a) {
               linalg::YieldOp::create(nb, nl, a[0]);
             })
      .getResult(0);
}

/// The convolutions the rules below take: `linalg.conv_2d_nchw_fchw`, and
/// its grouped form `linalg.conv_2d_ngchw_gfchw` (input N x G x C/G x H x W,
/// filter G x F/G x C/G x KH x KW, output N x G x F/G x OH x OW), for which
/// every rule is the plain one within each group: the group dim rides along
/// after the batch (input, output) or first (filter).
bool isConvWithRules(Operation *op) {
  return isa<linalg::Conv2DNchwFchwOp, linalg::Conv2DNgchwGfchwOp>(op);
}

SmallVector<int64_t> convAttr(Operation *conv, StringRef name) {
  return SmallVector<int64_t>(
      conv->getAttrOfType<DenseIntElementsAttr>(name).getValues<int64_t>());
}

/// A convolution of `input` and `filter` into zeros of `resultType`, grouped
/// or not: a named op, so that it reaches the runtime's im2col + GEMM kernel
/// (CPU) or the im2col rewrite (GPU) instead of a loop nest.
Value buildConv(OpBuilder &b, Location loc, bool grouped, Value input,
                Value filter, RankedTensorType resultType,
                ArrayRef<int64_t> strides, ArrayRef<int64_t> dilations,
                AdjointBuilder &adjoints) {
  Value init = adjoints.zeros(loc, resultType);
  auto stridesAttr = b.getI64TensorAttr(strides);
  auto dilationsAttr = b.getI64TensorAttr(dilations);
  if (grouped)
    return linalg::Conv2DNgchwGfchwOp::create(
               b, loc, TypeRange{resultType}, ValueRange{input, filter},
               ValueRange{init}, stridesAttr, dilationsAttr)
        .getResult(0);
  return linalg::Conv2DNchwFchwOp::create(
             b, loc, TypeRange{resultType}, ValueRange{input, filter},
             ValueRange{init}, stridesAttr, dilationsAttr)
      .getResult(0);
}

/// The input gradient of a 2-D convolution (the input already padded): a
/// correlation of dY, spread out by the strides and padded by the dilated
/// filter size, with the filter flipped and its two channel dims swapped:
///   dX[n,c,i,j] = sum_{f,kh,kw} D[n,f,i+kh*dh, j+kw*dw]
///                 W[f,c,KH-1-kh,KW-1-kw]
/// where D holds dY[n,f,oh,ow] at ((KH-1)dh + oh*sh, (KW-1)dw + ow*sw): a
/// convolution of D with the flipped filter (strides 1, the dilations).
Value buildConvInputAdjoint(OpBuilder &b, Location loc, Operation *conv,
                            Value dY, AdjointBuilder &adjoints) {
  bool grouped = isa<linalg::Conv2DNgchwGfchwOp>(conv);
  auto xType = cast<RankedTensorType>(conv->getOperand(0).getType());
  auto wType = cast<RankedTensorType>(conv->getOperand(1).getType());
  auto yType = cast<RankedTensorType>(dY.getType());
  SmallVector<int64_t> strides = convAttr(conv, "strides");
  SmallVector<int64_t> dilations = convAttr(conv, "dilations");
  int64_t sp = grouped ? 3 : 2; // the first spatial dim
  int64_t h = xType.getDimSize(sp), w = xType.getDimSize(sp + 1);
  int64_t padH = (wType.getDimSize(sp) - 1) * dilations[0],
          padW = (wType.getDimSize(sp + 1) - 1) * dilations[1];
  // Positions the forward never read (h - 1 past the last window) get no
  // gradient: D covers exactly the rows and columns the windows reach.
  int64_t reachH = (yType.getDimSize(sp) - 1) * strides[0] + 1;
  int64_t reachW = (yType.getDimSize(sp + 1) - 1) * strides[1] + 1;
  SmallVector<int64_t> spreadShape(yType.getShape()), neededShape;
  spreadShape[sp] = std::max(h, reachH) + padH;
  spreadShape[sp + 1] = std::max(w, reachW) + padW;
  neededShape = spreadShape;
  neededShape[sp] = h + padH;
  neededShape[sp + 1] = w + padW;
  int64_t rank = yType.getRank();
  SmallVector<int64_t> offsets(rank, 0), steps(rank, 1);
  offsets[sp] = padH;
  offsets[sp + 1] = padW;
  steps[sp] = strides[0];
  steps[sp + 1] = strides[1];
  MLIRContext *ctx = b.getContext();
  Value spread = tensor::InsertSliceOp::create(
      b, loc, dY,
      adjoints.zeros(
          loc, RankedTensorType::get(spreadShape, yType.getElementType())),
      getAsIndexOpFoldResult(ctx, offsets),
      getAsIndexOpFoldResult(ctx, yType.getShape()),
      getAsIndexOpFoldResult(ctx, steps));
  if (spreadShape != neededShape)
    spread = tensor::ExtractSliceOp::create(
        b, loc, RankedTensorType::get(neededShape, yType.getElementType()),
        spread, getAsIndexOpFoldResult(ctx, SmallVector<int64_t>(rank, 0)),
        getAsIndexOpFoldResult(ctx, neededShape),
        getAsIndexOpFoldResult(ctx, SmallVector<int64_t>(rank, 1)));
  Value flipped =
      grouped
          ? permuteAndFlip(b, loc, conv->getOperand(1), {0, 2, 1, 3, 4}, {3, 4})
          : permuteAndFlip(b, loc, conv->getOperand(1), {1, 0, 2, 3}, {2, 3});
  return buildConv(b, loc, grouped, spread, flipped, xType, {1, 1}, dilations,
                   adjoints);
}

/// The filter gradient of the same convolution,
///   dW[f,c,kh,kw] = sum_{n,i,j} X[n,c,i*sh+kh*dh, j*sw+kw*dw] dY[n,f,i,j],
/// is itself a convolution with the batch as the reduced channel: of X with
/// batch and channels swapped ([c, n, H, W]; grouped [c, g, n, H, W]) by dY
/// as the filter ([f, n, OH, OW]; grouped [g, f, n, OH, OW]), with the
/// forward's dilations as strides and its strides as dilations, giving
/// [c, f, KH, KW] (grouped [c, g, f, KH, KW]), permuted back.
Value buildConvFilterAdjoint(OpBuilder &b, Location loc, Operation *conv,
                             Value dY, AdjointBuilder &adjoints) {
  bool grouped = isa<linalg::Conv2DNgchwGfchwOp>(conv);
  auto wType = cast<RankedTensorType>(conv->getOperand(1).getType());
  SmallVector<int64_t> strides = convAttr(conv, "strides");
  SmallVector<int64_t> dilations = convAttr(conv, "dilations");
  // Result dim i of a permutation is the operand's dim perm[i].
  SmallVector<int64_t> xPerm{1, 0, 2, 3}, yPerm{1, 0, 2, 3}, back{1, 0, 2, 3};
  if (grouped) {
    xPerm = {2, 1, 0, 3, 4};
    yPerm = back = {1, 2, 0, 3, 4};
  }
  Value x = permuteAndFlip(b, loc, conv->getOperand(0), xPerm);
  Value filter = permuteAndFlip(b, loc, dY, yPerm);
  // The result holds the filter's dims in the order `back` undoes.
  SmallVector<int64_t> swappedShape(wType.getRank());
  for (auto [i, d] : llvm::enumerate(back))
    swappedShape[d] = wType.getDimSize(i);
  Value swapped =
      buildConv(b, loc, grouped, x, filter,
                RankedTensorType::get(swappedShape, wType.getElementType()),
                dilations, strides, adjoints);
  return permuteAndFlip(b, loc, swapped, back);
}

/// The coefficient of dim `dim` in the linear expression `e`.
int64_t coefficientOf(AffineExpr e, unsigned dim, unsigned numDims) {
  MLIRContext *ctx = e.getContext();
  SmallVector<AffineExpr> values;
  for (unsigned i = 0; i < numDims; ++i)
    values.push_back(getAffineConstantExpr(i == dim ? 1 : 0, ctx));
  auto folded = dyn_cast<AffineConstantExpr>(
      simplifyAffineExpr(e.replaceDims(values), numDims, 0));
  return folded ? folded.getValue() : 0;
}

/// The input gradient of a windowed sum or max over (N, C, spatial...) as
/// the importer writes pooling: input map (n, c, o_i * s_i + k_i * dil_i),
/// output map (n, c, o_i). dY is spread out by the strides and padded by
/// the dilated window; each input position gathers the outputs whose window
/// covers it (under max: where it equals that output's maximum). Returns
/// null when `op` is not of that form.
Value buildWindowAdjoint(OpBuilder &b, Location loc, linalg::LinalgOp op,
                         OpOperand *input, Combiner combiner, Value dY,
                         AdjointBuilder &adjoints) {
  AffineMap inMap = op.getMatchingIndexingMap(input);
  AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  unsigned numLoops = op.getNumLoops();
  unsigned rank = inMap.getNumResults();
  if (rank < 3 || outMap.getNumResults() != rank ||
      !outMap.isProjectedPermutation())
    return nullptr;
  auto xType = cast<RankedTensorType>(input->get().getType());
  auto yType = cast<RankedTensorType>(dY.getType());
  MLIRContext *ctx = b.getContext();
  SmallVector<int64_t> kernel, strides, dilations, windowDims;
  for (unsigned r = 0; r < rank; ++r) {
    unsigned outDim = outMap.getDimPosition(r);
    AffineExpr e = inMap.getResult(r);
    if (r < 2) {
      if (e != getAffineDimExpr(outDim, ctx))
        return nullptr;
      continue;
    }
    int64_t stride = coefficientOf(e, outDim, numLoops);
    std::optional<unsigned> window;
    int64_t dilation = 0;
    for (unsigned l = 0; l < numLoops; ++l) {
      if (l == outDim || outMap.isFunctionOfDim(l))
        continue;
      if (int64_t coef = coefficientOf(e, l, numLoops)) {
        if (window)
          return nullptr;
        window = l;
        dilation = coef;
      }
    }
    if (!window || stride <= 0 || dilation <= 0)
      return nullptr;
    strides.push_back(stride);
    dilations.push_back(dilation);
    windowDims.push_back(*window);
    kernel.push_back(op.getStaticLoopRanges()[*window]);
  }
  unsigned spatial = rank - 2;
  auto index = [&](int64_t v) -> OpFoldResult { return b.getIndexAttr(v); };
  SmallVector<int64_t> spreadShape(xType.getShape().take_front(2));
  SmallVector<OpFoldResult> offsets{index(0), index(0)}, sizes,
      steps{index(1), index(1)};
  for (int64_t d = 0; d < yType.getRank(); ++d)
    sizes.push_back(index(yType.getDimSize(d)));
  for (unsigned i = 0; i < spatial; ++i) {
    int64_t pad = (kernel[i] - 1) * dilations[i];
    spreadShape.push_back(xType.getDimSize(2 + i) + pad);
    offsets.push_back(index(pad));
    steps.push_back(index(strides[i]));
  }
  auto spreadType = RankedTensorType::get(spreadShape, yType.getElementType());
  auto spread = [&](Value v) {
    return tensor::InsertSliceOp::create(b, loc, v,
                                         adjoints.zeros(loc, spreadType),
                                         offsets, sizes, steps)
        .getResult();
  };
  // Loops (n, c, p_1..p_S, k_1..k_S).
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  unsigned loops = 2 + 2 * spatial;
  SmallVector<AffineExpr> spreadExprs{d(0), d(1)}, xExprs{d(0), d(1)};
  for (unsigned i = 0; i < spatial; ++i) {
    spreadExprs.push_back(d(2 + i) + (kernel[i] - 1) * dilations[i] -
                          d(2 + spatial + i) * dilations[i]);
    xExprs.push_back(d(2 + i));
  }
  AffineMap spreadMap = AffineMap::get(loops, 0, spreadExprs, ctx);
  AffineMap xMap = AffineMap::get(loops, 0, xExprs, ctx);
  SmallVector<Value> inputs{spread(dY)};
  SmallVector<AffineMap> maps{spreadMap};
  bool isMax = combiner == Combiner::Max;
  if (isMax) {
    inputs.push_back(spread(op->getResult(0)));
    maps.push_back(spreadMap);
    inputs.push_back(input->get());
    maps.push_back(xMap);
  } else if (combiner != Combiner::Add) {
    return nullptr;
  }
  // The window's extent, as the forward op gives it: a tensor read by no
  // one, whose map names the window loops (linalg derives loop bounds from
  // the operands).
  SmallVector<AffineExpr> windowExprs;
  for (unsigned i = 0; i < spatial; ++i)
    windowExprs.push_back(d(2 + spatial + i));
  inputs.push_back(
      tensor::EmptyOp::create(b, loc, kernel, yType.getElementType()));
  maps.push_back(AffineMap::get(loops, 0, windowExprs, ctx));
  maps.push_back(xMap);
  SmallVector<utils::IteratorType> iterators(2 + spatial,
                                             utils::IteratorType::parallel);
  iterators.append(spatial, utils::IteratorType::reduction);
  return linalg::GenericOp::create(
             b, loc, TypeRange{xType}, inputs,
             ValueRange{adjoints.zeros(loc, xType)}, maps, iterators,
             [&](OpBuilder &nb, Location nl, ValueRange a) {
               Value g = a[0];
               if (isMax) {
                 Value hit = arith::CmpFOp::create(
                     nb, nl, arith::CmpFPredicate::OEQ, a[2], a[1]);
                 Value zero = arith::ConstantOp::create(
                     nb, nl, g.getType(), nb.getFloatAttr(g.getType(), 0.0));
                 g = arith::SelectOp::create(nb, nl, hit, g, zero);
               }
               linalg::YieldOp::create(
                   nb, nl,
                   ValueRange{arith::AddFOp::create(nb, nl, a.back(), g)});
             })
      .getResult(0);
}

} // namespace

LogicalResult applyLinalgAdjoint(Operation *op, AdjointBuilder &adjoints) {
  auto linalgOp = cast<linalg::LinalgOp>(op);
  if (op->getNumResults() != 1 || linalgOp.getNumDpsInits() != 1)
    return failure();
  Value result = op->getResult(0);
  Value dY = adjoints.getAdjoint(result);
  if (!dY)
    return success();
  OpBuilder &b = adjoints.getBuilder();
  Location loc = op->getLoc();

  Block &body = *linalgOp.getBlock();
  Value yielded = body.getTerminator()->getOperand(0);
  OpOperand *init = linalgOp.getDpsInitOperand(0);
  BlockArgument acc = linalgOp.getMatchingBlockArgument(init);
  AffineMap outMap = linalgOp.getMatchingIndexingMap(init);

  // A reduction must combine the accumulator once, with +, max or min; its
  // other operand is what the reduction loops range over.
  Combiner combiner = Combiner::None;
  Value seeded = yielded;
  Operation *combine = nullptr;
  if (linalgOp.getNumReductionLoops() > 0) {
    combine = yielded.getDefiningOp();
    if (!combine || combine->getBlock() != &body ||
        combine->getNumOperands() != 2 || !acc.hasOneUse() ||
        acc.getUses().begin()->getOwner() != combine)
      return failure();
    combiner = classifyCombiner(combine);
    if (combiner == Combiner::None)
      return failure();
    seeded = combine->getOperand(combine->getOperand(0) == acc ? 1 : 0);
    // The accumulator's initial value receives dY unchanged under +; under
    // max/min it is the identity (-inf / +inf), which carries no gradient.
    if (adjoints.isActive(init->get())) {
      if (combiner != Combiner::Add)
        return failure();
      adjoints.accumulate(init->get(), dY);
    }
  }

  // Operands to differentiate: the active inputs, and in an all-parallel op
  // that reads its init, the init.
  SmallVector<OpOperand *> targets;
  for (OpOperand *input : linalgOp.getDpsInputOperands())
    if (adjoints.isActive(input->get()))
      targets.push_back(input);
  bool readsInit = combiner == Combiner::None && !acc.use_empty();
  if (readsInit && adjoints.isActive(init->get()))
    targets.push_back(init);

  // Named 2-D matmul: its adjoints are matmuls (BLAS on CPU, cuBLASLt on
  // GPU), dA = dC . B^T and dB = A^T . dC with the maps composed.
  if (auto matmul = dyn_cast<linalg::MatmulOp>(op);
      matmul && isa_and_nonnull<arith::MulFOp>(seeded.getDefiningOp())) {
    SmallVector<OpOperand *> rest;
    for (OpOperand *target : targets) {
      Value grad;
      if (target != init) {
        OpOperand *other = target == matmul.getDpsInputOperand(0)
                               ? matmul.getDpsInputOperand(1)
                               : matmul.getDpsInputOperand(0);
        AffineMap otherMap = matmul.getMatchingIndexingMap(other);
        bool isLhs = target == matmul.getDpsInputOperand(0);
        auto type = cast<RankedTensorType>(target->get().getType());
        // dA = dC . B^T (dC first); dB = A^T . dC (A first).
        grad = buildMatmulAdjoint(
            b, loc, isLhs ? dY : other->get(), isLhs ? outMap : otherMap,
            isLhs ? other->get() : dY, isLhs ? otherMap : outMap,
            matmul.getMatchingIndexingMap(target), adjoints.zeros(loc, type));
      }
      if (grad)
        adjoints.accumulate(target->get(), grad);
      else
        rest.push_back(target);
    }
    targets = std::move(rest);
  }

  if (isConvWithRules(op)) {
    OpOperand *input = linalgOp.getDpsInputOperand(0);
    if (llvm::is_contained(targets, input)) {
      adjoints.accumulate(input->get(),
                          buildConvInputAdjoint(b, loc, op, dY, adjoints));
      llvm::erase(targets, input);
    }
    OpOperand *filter = linalgOp.getDpsInputOperand(1);
    if (llvm::is_contained(targets, filter)) {
      adjoints.accumulate(filter->get(),
                          buildConvFilterAdjoint(b, loc, op, dY, adjoints));
      llvm::erase(targets, filter);
    }
  }

  for (OpOperand *target : targets) {
    AffineMap targetMap = linalgOp.getMatchingIndexingMap(target);
    if (!targetMap.isProjectedPermutation()) {
      // Pooling: a windowed sum or max whose accumulated value is the
      // windowed operand itself.
      BlockArgument arg = linalgOp.getMatchingBlockArgument(target);
      Value grad;
      if (combiner != Combiner::None && seeded == arg)
        grad = buildWindowAdjoint(b, loc, linalgOp, target, combiner, dY,
                                  adjoints);
      if (!grad)
        return failure();
      adjoints.accumulate(target->get(), grad);
      continue;
    }
    auto targetType = cast<RankedTensorType>(target->get().getType());

    // Inputs: the forward inputs (and init when read), dY, and for max/min
    // the forward result.
    SmallVector<Value> inputs;
    SmallVector<AffineMap> maps;
    for (OpOperand *input : linalgOp.getDpsInputOperands()) {
      inputs.push_back(input->get());
      maps.push_back(linalgOp.getMatchingIndexingMap(input));
    }
    if (readsInit) {
      inputs.push_back(init->get());
      maps.push_back(outMap);
    }
    inputs.push_back(dY);
    maps.push_back(outMap);
    bool routesToExtremum =
        combiner == Combiner::Max || combiner == Combiner::Min;
    if (routesToExtremum) {
      inputs.push_back(result);
      maps.push_back(outMap);
    }
    maps.push_back(targetMap);
    SmallVector<utils::IteratorType> iterators;
    for (unsigned d = 0; d < linalgOp.getNumLoops(); ++d)
      iterators.push_back(targetMap.isFunctionOfDim(d)
                              ? utils::IteratorType::parallel
                              : utils::IteratorType::reduction);

    // Every loop indexes the target: each element is written once, so the
    // adjoint needs neither a zero init nor to read it (no fill, no load).
    bool overwrites = llvm::all_of(iterators, [](utils::IteratorType t) {
      return t == utils::IteratorType::parallel;
    });
    Value gradInit =
        overwrites ? tensor::EmptyOp::create(b, loc, targetType.getShape(),
                                             targetType.getElementType())
                         .getResult()
                   : adjoints.zeros(loc, targetType);
    std::string unsupported;
    bool bodyFailed = false;
    auto generic = linalg::GenericOp::create(
        b, loc, TypeRange{targetType}, inputs, ValueRange{gradInit}, maps,
        iterators, [&](OpBuilder &nb, Location nl, ValueRange args) {
          IRMapping mapping;
          unsigned numInputs = linalgOp.getNumDpsInputs();
          for (unsigned i = 0; i < numInputs; ++i)
            mapping.map(body.getArgument(i), args[i]);
          unsigned next = numInputs;
          if (readsInit)
            mapping.map(acc, args[next++]);
          Value g = args[next++];
          Value extremum = routesToExtremum ? args[next++] : Value();
          Value gradAcc = args.back();
          for (Operation &bodyOp : body.without_terminator())
            if (&bodyOp != combine)
              nb.clone(bodyOp, mapping);
          if (routesToExtremum) {
            Value hit = arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OEQ,
                                              mapping.lookupOrDefault(seeded),
                                              extremum);
            Value zero = arith::ConstantOp::create(
                nb, nl, g.getType(), nb.getFloatAttr(g.getType(), 0.0));
            g = arith::SelectOp::create(nb, nl, hit, g, zero);
          }
          BlockArgument wrt = linalgOp.getMatchingBlockArgument(target);
          Value contribution;
          if (seeded == wrt) {
            contribution = g;
          } else {
            auto built = buildScalarAdjoint(nb, nl, body, mapping, seeded, g,
                                            wrt, unsupported);
            if (failed(built))
              bodyFailed = true;
            else
              contribution = *built;
          }
          Value sum;
          if (overwrites)
            sum = contribution ? contribution
                               : arith::ConstantOp::create(
                                     nb, nl, gradAcc.getType(),
                                     nb.getFloatAttr(gradAcc.getType(), 0.0))
                                     .getResult();
          else
            sum = contribution
                      ? arith::AddFOp::create(nb, nl, gradAcc, contribution)
                            .getResult()
                      : gradAcc;
          linalg::YieldOp::create(nb, nl, sum);
        });
    if (bodyFailed) {
      generic->erase();
      return failure();
    }
    adjoints.accumulate(target->get(), generic.getResult(0));
  }
  return success();
}

} // namespace autopar::autodiff
