//===- Builders.cpp - IR building helpers for the ONNX converters ---------===//

#include "ImporterImpl.h"

#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/APFloat.h"

#include <limits>

using namespace mlir;
namespace autopar::import {

FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<llvm::SmallVector<int64_t>> shapes) {
  size_t rank = 0;
  for (const auto &s : shapes)
    rank = std::max(rank, s.size());
  llvm::SmallVector<int64_t> result(rank, 1);
  for (const auto &s : shapes) {
    for (size_t j = 0; j < s.size(); ++j) {
      int64_t &r = result[rank - s.size() + j];
      if (s[j] == r || s[j] == 1)
        continue;
      if (r != 1)
        return failure();
      r = s[j];
    }
  }
  return result;
}

Value createEmptyTensor(OpBuilder &b, Location loc,
                        llvm::ArrayRef<int64_t> shape, Type elementType) {
  return tensor::EmptyOp::create(b, loc, shape, elementType);
}

Value createFilledTensor(OpBuilder &b, Location loc,
                         llvm::ArrayRef<int64_t> shape, Type elementType,
                         Value value) {
  Value empty = createEmptyTensor(b, loc, shape, elementType);
  return linalg::FillOp::create(b, loc, value, empty).getResult(0);
}

Value createScalarConstant(OpBuilder &b, Location loc, Type type, double v) {
  if (auto ft = dyn_cast<FloatType>(type)) {
    llvm::APFloat f(v);
    bool lost;
    f.convert(ft.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven,
              &lost);
    return arith::ConstantOp::create(b, loc, ft, b.getFloatAttr(ft, f));
  }
  auto it = cast<IntegerType>(type);
  if (it.getWidth() == 1)
    return arith::ConstantOp::create(b, loc, it,
                                     b.getIntegerAttr(it, v != 0.0 ? 1 : 0));
  return arith::ConstantOp::create(
      b, loc, it, b.getIntegerAttr(it, static_cast<int64_t>(v)));
}

Value createLowestValue(OpBuilder &b, Location loc, Type type,
                        bool isUnsigned) {
  if (auto ft = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(
        b, loc, ft,
        b.getFloatAttr(ft, llvm::APFloat::getInf(ft.getFloatSemantics(),
                                                 /*Negative=*/true)));
  auto it = cast<IntegerType>(type);
  llvm::APInt v = isUnsigned || it.getWidth() == 1
                      ? llvm::APInt::getMinValue(it.getWidth())
                      : llvm::APInt::getSignedMinValue(it.getWidth());
  return arith::ConstantOp::create(b, loc, it, b.getIntegerAttr(it, v));
}

Value createHighestValue(OpBuilder &b, Location loc, Type type,
                         bool isUnsigned) {
  if (auto ft = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(
        b, loc, ft,
        b.getFloatAttr(ft, llvm::APFloat::getInf(ft.getFloatSemantics(),
                                                 /*Negative=*/false)));
  auto it = cast<IntegerType>(type);
  llvm::APInt v = isUnsigned || it.getWidth() == 1
                      ? llvm::APInt::getMaxValue(it.getWidth())
                      : llvm::APInt::getSignedMaxValue(it.getWidth());
  return arith::ConstantOp::create(b, loc, it, b.getIntegerAttr(it, v));
}

/// Collapses away the dims of `value` not in `keep` (all of size 1). Each
/// dropped dim joins the group of a neighbouring kept dim.
static Value dropUnitDims(OpBuilder &b, Location loc, Value value,
                          llvm::ArrayRef<bool> keep) {
  auto type = cast<RankedTensorType>(value.getType());
  llvm::SmallVector<ReassociationIndices> groups;
  llvm::SmallVector<int64_t> newShape;
  ReassociationIndices pending;
  for (int64_t i = 0; i < type.getRank(); ++i) {
    pending.push_back(i);
    if (keep[i]) {
      groups.push_back(pending);
      newShape.push_back(type.getDimSize(i));
      pending.clear();
    }
  }
  if (!pending.empty() && !groups.empty())
    groups.back().append(pending.begin(), pending.end());
  if (groups.size() == static_cast<size_t>(type.getRank()))
    return value;
  auto newType = RankedTensorType::get(newShape, type.getElementType());
  return tensor::CollapseShapeOp::create(b, loc, newType, value, groups);
}

Value maxBody(OpBuilder &b, Location loc, Value x, Value y, OnnxDType t) {
  if (isFloatDType(t))
    return arith::MaximumFOp::create(b, loc, x, y);
  if (isUnsignedIntDType(t) || isBoolDType(t))
    return arith::MaxUIOp::create(b, loc, x, y);
  return arith::MaxSIOp::create(b, loc, x, y);
}

Value minBody(OpBuilder &b, Location loc, Value x, Value y, OnnxDType t) {
  if (isFloatDType(t))
    return arith::MinimumFOp::create(b, loc, x, y);
  if (isUnsignedIntDType(t) || isBoolDType(t))
    return arith::MinUIOp::create(b, loc, x, y);
  return arith::MinSIOp::create(b, loc, x, y);
}

Value createElementwise(OpBuilder &b, Location loc, ValueRange operands,
                        llvm::ArrayRef<int64_t> resultShape,
                        Type resultElementType, ScalarBodyFn body) {
  int64_t rank = resultShape.size();
  MLIRContext *ctx = b.getContext();
  llvm::SmallVector<Value> inputs;
  llvm::SmallVector<AffineMap> maps;
  for (Value operand : operands) {
    llvm::ArrayRef<int64_t> shape = getShape(operand);
    int64_t offset = rank - static_cast<int64_t>(shape.size());
    llvm::SmallVector<bool> keep;
    llvm::SmallVector<AffineExpr> exprs;
    for (int64_t j = 0; j < static_cast<int64_t>(shape.size()); ++j) {
      bool broadcast = shape[j] == 1 && resultShape[offset + j] != 1;
      keep.push_back(!broadcast);
      if (!broadcast)
        exprs.push_back(getAffineDimExpr(offset + j, ctx));
    }
    inputs.push_back(dropUnitDims(b, loc, operand, keep));
    maps.push_back(AffineMap::get(rank, 0, exprs, ctx));
  }
  maps.push_back(AffineMap::getMultiDimIdentityMap(rank, ctx));
  Value init = createEmptyTensor(b, loc, resultShape, resultElementType);
  llvm::SmallVector<utils::IteratorType> iterators(
      rank, utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, init.getType(), inputs, ValueRange{init}, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value result = body(nb, nloc, args.drop_back());
        linalg::YieldOp::create(nb, nloc, result);
      });
  return generic.getResult(0);
}

Value broadcastTo(OpBuilder &b, Location loc, Value value,
                  llvm::ArrayRef<int64_t> shape) {
  if (getShape(value) == shape)
    return value;
  return createElementwise(
      b, loc, value, shape, getElementTypeOf(value),
      [](OpBuilder &, Location, ValueRange args) { return args[0]; });
}

Value castScalar(OpBuilder &b, Location loc, Value value, OnnxDType from,
                 OnnxDType to) {
  Type toType = getElementType(b.getContext(), to);
  Type fromType = value.getType();
  if (from == to || (fromType == toType && isFloatDType(from)))
    return value;
  if (isBoolDType(to)) {
    if (isFloatDType(from))
      return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, value,
                                   createScalarConstant(b, loc, fromType, 0.0));
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, value,
                                 createScalarConstant(b, loc, fromType, 0.0));
  }
  bool fromUnsigned = isUnsignedIntDType(from) || isBoolDType(from);
  if (isFloatDType(from) && isFloatDType(to)) {
    unsigned fw = cast<FloatType>(fromType).getWidth();
    unsigned tw = cast<FloatType>(toType).getWidth();
    if (fw < tw)
      return arith::ExtFOp::create(b, loc, toType, value);
    if (fw > tw)
      return arith::TruncFOp::create(b, loc, toType, value);
    // f16 <-> bf16: go through f32.
    Value wide = arith::ExtFOp::create(b, loc, b.getF32Type(), value);
    return arith::TruncFOp::create(b, loc, toType, wide);
  }
  if (isFloatDType(from)) {
    if (isUnsignedIntDType(to))
      return arith::FPToUIOp::create(b, loc, toType, value);
    return arith::FPToSIOp::create(b, loc, toType, value);
  }
  if (isFloatDType(to)) {
    if (fromUnsigned)
      return arith::UIToFPOp::create(b, loc, toType, value);
    return arith::SIToFPOp::create(b, loc, toType, value);
  }
  unsigned fw = cast<IntegerType>(fromType).getWidth();
  unsigned tw = cast<IntegerType>(toType).getWidth();
  if (fw == tw)
    return value;
  if (fw > tw)
    return arith::TruncIOp::create(b, loc, toType, value);
  if (fromUnsigned)
    return arith::ExtUIOp::create(b, loc, toType, value);
  return arith::ExtSIOp::create(b, loc, toType, value);
}

/// The finest runs of consecutive dims of `src` and `dst` with equal sizes
/// (a size-1 dim belongs to the run it starts, or to the last), when there
/// are at least two; nullopt otherwise.
static std::optional<std::pair<llvm::SmallVector<ReassociationIndices>,
                               llvm::SmallVector<ReassociationIndices>>>
commonRuns(llvm::ArrayRef<int64_t> src, llvm::ArrayRef<int64_t> dst) {
  if (src.empty() || dst.empty() || llvm::is_contained(src, 0) ||
      llvm::is_contained(dst, 0) || ShapedType::isDynamicShape(src) ||
      ShapedType::isDynamicShape(dst))
    return std::nullopt;
  llvm::SmallVector<ReassociationIndices> srcRuns, dstRuns;
  int64_t i = 0, j = 0, n = src.size(), m = dst.size();
  while (i < n && j < m) {
    ReassociationIndices a = {i}, c = {j};
    int64_t pa = src[i++], pc = dst[j++];
    while (pa != pc) {
      if (pa < pc && i < n)
        pa *= src[a.emplace_back(i++)];
      else if (pc < pa && j < m)
        pc *= dst[c.emplace_back(j++)];
      else
        return std::nullopt;
    }
    srcRuns.push_back(a);
    dstRuns.push_back(c);
  }
  // Leftover dims are of size 1: they join the last run.
  for (; i < n; ++i)
    srcRuns.back().push_back(i);
  for (; j < m; ++j)
    dstRuns.back().push_back(j);
  if (srcRuns.size() < 2)
    return std::nullopt;
  return std::make_pair(srcRuns, dstRuns);
}

/// The coarsest shape that both `src` and `dst` collapse from (each dim of
/// either is a run of its dims), when one exists: the union of the two
/// shapes' running products must form a chain of divisors. nullopt for
/// shapes with unit or dynamic dims, and when there is no such chain
/// ([6] and [4, ...]).
static std::optional<llvm::SmallVector<int64_t>>
commonRefinement(llvm::ArrayRef<int64_t> src, llvm::ArrayRef<int64_t> dst) {
  auto plain = [](llvm::ArrayRef<int64_t> s) {
    return !s.empty() && llvm::all_of(s, [](int64_t d) { return d > 1; });
  };
  if (!plain(src) || !plain(dst))
    return std::nullopt;
  llvm::SmallVector<int64_t> bounds;
  for (llvm::ArrayRef<int64_t> shape : {src, dst}) {
    int64_t product = 1;
    for (int64_t d : shape)
      bounds.push_back(product *= d);
  }
  llvm::sort(bounds);
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  llvm::SmallVector<int64_t> refined;
  int64_t previous = 1;
  for (int64_t bound : bounds) {
    if (bound % previous != 0)
      return std::nullopt;
    refined.push_back(bound / previous);
    previous = bound;
  }
  return refined;
}

Value reshapeTransposeReshape(OpBuilder &b, Location loc, Value x,
                              llvm::ArrayRef<int64_t> split,
                              llvm::ArrayRef<int64_t> perm,
                              llvm::ArrayRef<int64_t> shape) {
  Value v = reshapeTensor(b, loc, x, split);
  llvm::SmallVector<int64_t> permuted;
  for (int64_t p : perm)
    permuted.push_back(split[p]);
  Value init = createEmptyTensor(b, loc, permuted, getElementTypeOf(x));
  v = linalg::TransposeOp::create(b, loc, v, init, perm).getResult()[0];
  return reshapeTensor(b, loc, v, shape);
}

Value contractAlongDim(OpBuilder &b, Location loc, Value x, int64_t dim,
                       llvm::ArrayRef<float> weights, int64_t out,
                       OnnxDType type) {
  MLIRContext *ctx = b.getContext();
  llvm::ArrayRef<int64_t> shape = getShape(x);
  int64_t rank = shape.size(), in = shape[dim];
  Type et = getElementTypeOf(x);
  Value matrix = arith::ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(RankedTensorType::get({in, out}, b.getF32Type()),
                             weights));
  if (!et.isF32())
    matrix = createElementwise(
        b, loc, matrix, {in, out}, et,
        [&](OpBuilder &nb, Location l, ValueRange a) -> Value {
          return castScalar(nb, l, a[0], onnx::TensorProto_DataType_FLOAT,
                            type);
        });
  // Loops: the result's dims, then i along `dim`.
  auto d = [&](int64_t i) { return getAffineDimExpr(i, ctx); };
  llvm::SmallVector<AffineExpr> read, write;
  for (int64_t k = 0; k < rank; ++k) {
    read.push_back(k == dim ? d(rank) : d(k));
    write.push_back(d(k));
  }
  llvm::SmallVector<utils::IteratorType> iterators(
      rank, utils::IteratorType::parallel);
  iterators.push_back(utils::IteratorType::reduction);
  llvm::SmallVector<int64_t> resultShape(shape);
  resultShape[dim] = out;
  Value init = createFilledTensor(b, loc, resultShape, et,
                                  createScalarConstant(b, loc, et, 0.0));
  return linalg::GenericOp::create(
             b, loc, init.getType(), ValueRange{x, matrix}, ValueRange{init},
             llvm::ArrayRef<AffineMap>{
                 AffineMap::get(rank + 1, 0, read, ctx),
                 AffineMap::get(rank + 1, 0, {d(rank), d(dim)}, ctx),
                 AffineMap::get(rank + 1, 0, write, ctx)},
             iterators,
             [](OpBuilder &nb, Location l, ValueRange a) {
               Value p = arith::MulFOp::create(nb, l, a[0], a[1]);
               linalg::YieldOp::create(
                   nb, l, Value(arith::AddFOp::create(nb, l, a[2], p)));
             })
      .getResult(0);
}

Value reshapeTensor(OpBuilder &b, Location loc, Value value,
                    llvm::ArrayRef<int64_t> shape) {
  auto srcType = cast<RankedTensorType>(value.getType());
  if (srcType.getShape() == shape)
    return value;
  auto dstType = RankedTensorType::get(shape, srcType.getElementType());
  if (srcType.getRank() > dstType.getRank()) {
    if (auto groups =
            getReassociationIndicesForCollapse(srcType.getShape(), shape))
      return tensor::CollapseShapeOp::create(b, loc, dstType, value, *groups);
  } else if (srcType.getRank() < dstType.getRank()) {
    if (auto groups =
            getReassociationIndicesForCollapse(shape, srcType.getShape()))
      return tensor::ExpandShapeOp::create(b, loc, dstType, value, *groups);
  }
  // Split then merge when a common refinement exists: [seq, batch, heads *
  // d] becomes [seq, batch, heads, d], then [seq, batch * heads, d]. The
  // heads are a dim of their own before they merge with the batch, so
  // autopar-sink-merging-reshapes can carry them apart through attention.
  if (auto refined = commonRefinement(srcType.getShape(), shape)) {
    auto refinedType =
        RankedTensorType::get(*refined, srcType.getElementType());
    auto toRefined =
        getReassociationIndicesForCollapse(*refined, srcType.getShape());
    auto fromRefined = getReassociationIndicesForCollapse(*refined, shape);
    if (toRefined && fromRefined) {
      Value v = value;
      if (refinedType.getShape() != srcType.getShape())
        v = tensor::ExpandShapeOp::create(b, loc, refinedType, v, *toRefined);
      if (refinedType.getShape() != shape)
        v = tensor::CollapseShapeOp::create(b, loc, dstType, v, *fromRefined);
      return v;
    }
  }
  // General case: collapse each run of source dims to the size it shares
  // with a run of result dims, then expand it (through one flat dim only
  // when no finer grouping exists). Keeping the runs apart lets sharding
  // follow a split through the reshape ([seq, batch, heads * d] to
  // [seq, batch * heads, d] keeps seq a dim of its own).
  if (auto runs = commonRuns(srcType.getShape(), shape)) {
    llvm::SmallVector<int64_t> mid;
    for (const ReassociationIndices &run : runs->first) {
      int64_t size = 1;
      for (int64_t d : run)
        size *= srcType.getDimSize(d);
      mid.push_back(size);
    }
    Value v = value;
    if (int64_t(mid.size()) != srcType.getRank())
      v = tensor::CollapseShapeOp::create(
          b, loc, RankedTensorType::get(mid, srcType.getElementType()), v,
          runs->first);
    if (int64_t(mid.size()) != dstType.getRank())
      v = tensor::ExpandShapeOp::create(b, loc, dstType, v, runs->second);
    return v;
  }
  // Through a 1-D tensor.
  int64_t n = srcType.getNumElements();
  Value flat = value;
  if (srcType.getRank() != 1) {
    llvm::SmallVector<ReassociationIndices> all(1);
    for (int64_t i = 0; i < srcType.getRank(); ++i)
      all[0].push_back(i);
    if (srcType.getRank() == 0)
      all.clear();
    flat = tensor::CollapseShapeOp::create(
        b, loc, RankedTensorType::get({n}, srcType.getElementType()), value,
        all);
  }
  if (dstType.getRank() == 1)
    return flat;
  llvm::SmallVector<ReassociationIndices> all(1);
  for (int64_t i = 0; i < dstType.getRank(); ++i)
    all[0].push_back(i);
  if (dstType.getRank() == 0)
    all.clear();
  return tensor::ExpandShapeOp::create(b, loc, dstType, flat, all);
}

Value materializeConstant(OpBuilder &b, Location loc, const ConstTensor &value,
                          Type elementType) {
  auto type = RankedTensorType::get(value.shape, elementType);
  int64_t n = value.numElements();
  DenseElementsAttr attr;
  if (auto ft = dyn_cast<FloatType>(elementType)) {
    llvm::SmallVector<llvm::APFloat> data;
    data.reserve(n);
    for (int64_t i = 0; i < n; ++i) {
      llvm::APFloat f(value.getDouble(i));
      bool lost;
      f.convert(ft.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven,
                &lost);
      data.push_back(f);
    }
    attr = DenseElementsAttr::get(type, data);
  } else {
    unsigned width = cast<IntegerType>(elementType).getWidth();
    llvm::SmallVector<llvm::APInt> data;
    data.reserve(n);
    for (int64_t i = 0; i < n; ++i)
      data.push_back(llvm::APInt(width, static_cast<uint64_t>(value.getInt(i)),
                                 /*isSigned=*/false, /*implicitTrunc=*/true));
    attr = DenseElementsAttr::get(type, data);
  }
  return arith::ConstantOp::create(b, loc, type, attr);
}

} // namespace autopar::import
