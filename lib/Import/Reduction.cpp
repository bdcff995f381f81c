//===- Reduction.cpp - Reductions, ArgMax/ArgMin and CumSum ---------------===//
//
// A reduction becomes one named `linalg.reduce` over an init filled with the
// combiner's identity (0, or the lowest value for Max), a division by the
// element count for Mean, and a `tensor.expand_shape` that restores the
// reduced dims as size 1 for keepdims. Small constant inputs fold on the host
// so that shape computations stay static. ArgMax and ArgMin are one
// linalg.generic carrying the best value and its int64 index; CumSum one
// linalg.generic summing the selected positions along the axis;
// LpNormalization a division by the reduced p-norm.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/AffineMap.h"

#include <cmath>
#include <limits>

using namespace mlir;
namespace autopar::import {

//===----------------------------------------------------------------------===//
// Shared helpers (declared in ImporterImpl.h)
//===----------------------------------------------------------------------===//

/// Combines the accumulator with one element.
static Value combine(OpBuilder &b, Location loc, ReductionKind kind, Value x,
                     Value acc, bool isUnsigned) {
  bool isFloat = isa<FloatType>(x.getType());
  if (kind == ReductionKind::Max) {
    if (isFloat)
      return arith::MaximumFOp::create(b, loc, x, acc);
    if (isUnsigned)
      return arith::MaxUIOp::create(b, loc, x, acc);
    return arith::MaxSIOp::create(b, loc, x, acc);
  }
  if (isFloat)
    return arith::AddFOp::create(b, loc, x, acc);
  return arith::AddIOp::create(b, loc, x, acc);
}

/// |x| (p = 1) or x² (p = 2), elementwise: the terms of an L1 or L2 norm.
static Value absOrSquare(OpBuilder &b, Location loc, Value x,
                         llvm::ArrayRef<int64_t> shape, Type et, int64_t p) {
  return createElementwise(
      b, loc, x, shape, et, [&](OpBuilder &nb, Location l, ValueRange args) {
        if (p == 1)
          return math::AbsFOp::create(nb, l, args[0]).getResult();
        return arith::MulFOp::create(nb, l, args[0], args[0]).getResult();
      });
}

/// Divides every element of `value` by the constant `count`.
static Value divideByCount(OpBuilder &b, Location loc, Value value,
                           int64_t count, bool isUnsigned) {
  Type et = getElementTypeOf(value);
  return createElementwise(
      b, loc, value, getShape(value), et,
      [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        Value n = createScalarConstant(nb, l, et, static_cast<double>(count));
        if (isa<FloatType>(et))
          return arith::DivFOp::create(nb, l, args[0], n);
        if (isUnsigned)
          return arith::DivUIOp::create(nb, l, args[0], n);
        return arith::DivSIOp::create(nb, l, args[0], n);
      });
}

Value createReduction(OpBuilder &b, Location loc, Value input,
                      llvm::ArrayRef<int64_t> dims, ReductionKind kind,
                      bool isUnsigned) {
  if (dims.empty())
    return input;
  llvm::ArrayRef<int64_t> shape = getShape(input);
  Type et = getElementTypeOf(input);
  llvm::SmallVector<int64_t> outShape;
  int64_t count = 1;
  for (auto [i, size] : llvm::enumerate(shape)) {
    if (llvm::is_contained(dims, static_cast<int64_t>(i)))
      count *= size;
    else
      outShape.push_back(size);
  }
  Value identity = kind == ReductionKind::Max
                       ? createLowestValue(b, loc, et, isUnsigned)
                       : createScalarConstant(b, loc, et, 0.0);
  Value init = createFilledTensor(b, loc, outShape, et, identity);
  Value result =
      linalg::ReduceOp::create(
          b, loc, ValueRange{input}, ValueRange{init}, dims,
          [&](OpBuilder &nb, Location l, ValueRange args) {
            linalg::YieldOp::create(
                nb, l, combine(nb, l, kind, args[0], args[1], isUnsigned));
          })
          .getResult(0);
  if (kind == ReductionKind::Mean)
    result = divideByCount(b, loc, result, count, isUnsigned);
  return result;
}

Value expandReducedDims(OpBuilder &b, Location loc, Value reduced,
                        llvm::ArrayRef<int64_t> dims) {
  if (dims.empty())
    return reduced;
  auto type = cast<RankedTensorType>(reduced.getType());
  int64_t rank = type.getRank() + static_cast<int64_t>(dims.size());
  llvm::SmallVector<int64_t> shape;
  llvm::SmallVector<ReassociationIndices> groups;
  // Reduced dims join the group of the kept dim before them; leading ones
  // wait for the first kept dim. A 0-D source takes no groups at all.
  ReassociationIndices leading;
  int64_t src = 0;
  for (int64_t i = 0; i < rank; ++i) {
    if (llvm::is_contained(dims, i)) {
      shape.push_back(1);
      if (groups.empty())
        leading.push_back(i);
      else
        groups.back().push_back(i);
      continue;
    }
    shape.push_back(type.getDimSize(src++));
    leading.push_back(i);
    groups.push_back(leading);
    leading.clear();
  }
  auto resultType = RankedTensorType::get(shape, type.getElementType());
  return tensor::ExpandShapeOp::create(b, loc, resultType, reduced, groups);
}

namespace {

/// Host folding is limited to inputs of at most this many elements.
constexpr int64_t kMaxHostFoldElements = 4096;

/// Evaluates the reduction of a non-empty constant on the host.
ConstTensor foldReduction(const ConstTensor &in, llvm::ArrayRef<int64_t> dims,
                          ReductionKind kind, bool keepdims) {
  int64_t rank = in.shape.size();
  llvm::SmallVector<int64_t> outShape, keptShape;
  for (int64_t i = 0; i < rank; ++i) {
    bool reduced = llvm::is_contained(dims, i);
    if (!reduced)
      keptShape.push_back(in.shape[i]);
    if (!reduced || keepdims)
      outShape.push_back(reduced ? 1 : in.shape[i]);
  }
  int64_t outCount = getNumElements(keptShape);
  int64_t groupSize = in.numElements() / outCount;
  bool isUnsigned = isUnsignedIntDType(in.dtype) || isBoolDType(in.dtype);
  std::vector<double> facc(outCount,
                           kind == ReductionKind::Max
                               ? -std::numeric_limits<double>::infinity()
                               : 0.0);
  std::vector<int64_t> iacc(outCount, 0);
  std::vector<bool> seen(outCount, false);
  llvm::SmallVector<int64_t> index(rank, 0);
  for (int64_t linear = 0, n = in.numElements(); linear < n; ++linear) {
    int64_t out = 0;
    for (int64_t d = 0; d < rank; ++d)
      if (!llvm::is_contained(dims, d))
        out = out * in.shape[d] + index[d];
    if (in.isFloat()) {
      double v = in.floats[linear];
      facc[out] = kind == ReductionKind::Max
                      ? (std::isnan(v) || v > facc[out] ? v : facc[out])
                      : facc[out] + v;
    } else {
      int64_t v = in.ints[linear];
      bool greater = isUnsigned ? static_cast<uint64_t>(v) >
                                      static_cast<uint64_t>(iacc[out])
                                : v > iacc[out];
      if (kind != ReductionKind::Max)
        iacc[out] = static_cast<int64_t>(static_cast<uint64_t>(iacc[out]) +
                                         static_cast<uint64_t>(v));
      else if (!seen[out] || greater)
        iacc[out] = v;
      seen[out] = true;
    }
    for (int64_t d = rank - 1; d >= 0 && ++index[d] == in.shape[d]; --d)
      index[d] = 0;
  }
  ConstTensor result = ConstTensor::zeros(in.dtype, outShape);
  for (int64_t i = 0; i < outCount; ++i) {
    if (in.isFloat()) {
      result.set(i,
                 kind == ReductionKind::Mean ? facc[i] / groupSize : facc[i]);
      continue;
    }
    int64_t v = iacc[i];
    if (kind == ReductionKind::Mean)
      v = isUnsigned ? static_cast<int64_t>(static_cast<uint64_t>(v) /
                                            static_cast<uint64_t>(groupSize))
                     : v / groupSize;
    result.setInt(i, v);
  }
  return result;
}

/// The raw (unnormalized) axes: input 1 when present (ReduceSum from opset 13,
/// every reduction from opset 18), else the `axes` attribute.
FailureOr<llvm::SmallVector<int64_t>> getRawAxes(NodeContext &ctx) {
  llvm::SmallVector<int64_t> axes;
  if (!ctx.hasInput(1)) {
    if (auto attr = ctx.getIntsAttr("axes"))
      axes = *attr;
    return axes;
  }
  if (ctx.hasAttr("axes"))
    return ctx.emitError("has both an 'axes' input and an 'axes' attribute; "
                         "give one");
  if (isFloatDType(ctx.inputDType(1)) || isBoolDType(ctx.inputDType(1)))
    return ctx.emitError("axes input must be int64, got ")
           << dtypeName(ctx.inputDType(1));
  // An empty axes tensor is known even when it is a graph input.
  if (getNumElements(ctx.inputShape(1)) == 0)
    return axes;
  auto constant = ctx.requireConstantInput(1, "axes");
  if (failed(constant))
    return failure();
  for (int64_t i = 0, n = (*constant)->numElements(); i < n; ++i)
    axes.push_back((*constant)->getInt(i));
  return axes;
}

/// Normalizes, sorts and checks the axes against `rank`.
FailureOr<llvm::SmallVector<int64_t>>
normalizeAxes(NodeContext &ctx, llvm::ArrayRef<int64_t> raw, int64_t rank) {
  llvm::SmallVector<int64_t> axes;
  for (int64_t axis : raw) {
    auto a = ctx.normalizeAxis(axis, rank, "axes value");
    if (failed(a))
      return failure();
    if (llvm::is_contained(axes, *a))
      return ctx.emitError("axes contain dim ")
             << *a << " more than once (as " << axis << ")";
    axes.push_back(*a);
  }
  llvm::sort(axes);
  return axes;
}

/// The dims a Reduce* node reduces, sorted (all of them when its axes are
/// empty); std::nullopt when noop_with_empty_axes makes it the identity.
FailureOr<std::optional<llvm::SmallVector<int64_t>>>
reducedAxes(NodeContext &ctx) {
  auto raw = getRawAxes(ctx);
  if (failed(raw))
    return failure();
  int64_t rank = ctx.inputRank(0);
  if (!raw->empty()) {
    auto normalized = normalizeAxes(ctx, *raw, rank);
    if (failed(normalized))
      return failure();
    return std::optional(std::move(*normalized));
  }
  if (ctx.getIntAttr("noop_with_empty_axes", 0) != 0)
    return std::optional<llvm::SmallVector<int64_t>>();
  llvm::SmallVector<int64_t> axes;
  for (int64_t i = 0; i < rank; ++i)
    axes.push_back(i);
  return std::optional(std::move(axes));
}

LogicalResult convertReduce(NodeContext &ctx, ReductionKind kind) {
  OnnxDType t = ctx.inputDType(0);
  bool isBool = isBoolDType(t);
  if (!isFloatDType(t) && !isSignedIntDType(t) && !isUnsignedIntDType(t) &&
      !(isBool && kind == ReductionKind::Max))
    return ctx.unsupported("element type " + dtypeName(t) +
                           " is not supported (supported: floating-point and "
                           "integer types" +
                           (kind == ReductionKind::Max ? ", bool" : "") + ")");
  auto reduced = reducedAxes(ctx);
  if (failed(reduced))
    return failure();
  if (!*reduced) {
    // noop_with_empty_axes: the reduction is the identity.
    if (const ConstTensor *c = ctx.inputConstant(0))
      ctx.setOutputConstant(0, *c);
    else
      ctx.setOutput(0, ctx.input(0), t);
    return success();
  }
  llvm::SmallVector<int64_t> axes = std::move(**reduced);
  bool keepdims = ctx.getIntAttr("keepdims", 1) != 0;

  const ConstTensor *c = ctx.inputConstant(0);
  if (c && c->numElements() > 0 && c->numElements() <= kMaxHostFoldElements) {
    ctx.setOutputConstant(0, foldReduction(*c, axes, kind, keepdims));
    return success();
  }
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  bool isUnsigned = isUnsignedIntDType(t) || isBool;
  Value result = createReduction(b, loc, ctx.input(0), axes, kind, isUnsigned);
  if (keepdims)
    result = expandReducedDims(b, loc, result, axes);
  ctx.setOutput(0, result, t);
  return success();
}

LogicalResult convertReduceSum(NodeContext &ctx) {
  return convertReduce(ctx, ReductionKind::Sum);
}
LogicalResult convertReduceMean(NodeContext &ctx) {
  return convertReduce(ctx, ReductionKind::Mean);
}
LogicalResult convertReduceMax(NodeContext &ctx) {
  return convertReduce(ctx, ReductionKind::Max);
}

/// ReduceL1, ReduceL2 and ReduceSumSquare (floating-point): the sum over
/// the axes of |x|, x² (then its square root) or x², as a linalg.generic of
/// the magnitudes and a linalg.reduce; swin_v2's cosine attention normalizes
/// by ReduceL2.
LogicalResult convertReduceNorm(NodeContext &ctx, int64_t p, bool root) {
  OnnxDType t = ctx.inputDType(0);
  if (!isFloatDType(t))
    return ctx.unsupported("element type " + dtypeName(t) +
                           " is not supported (supported: floating-point "
                           "types)");
  auto reduced = reducedAxes(ctx);
  if (failed(reduced))
    return failure();
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  Value x = ctx.input(0);
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  Type et = getElementTypeOf(x);
  Value magnitude = absOrSquare(b, loc, x, in, et, p);
  if (!*reduced) {
    // noop_with_empty_axes: no reduction, only the elementwise part.
    if (root)
      magnitude = createElementwise(
          b, loc, magnitude, in, et,
          [](OpBuilder &nb, Location l, ValueRange args) -> Value {
            return math::SqrtOp::create(nb, l, args[0]);
          });
    ctx.setOutput(0, magnitude, t);
    return success();
  }
  llvm::ArrayRef<int64_t> axes = **reduced;
  Value result = createReduction(b, loc, magnitude, axes, ReductionKind::Sum);
  if (root)
    result = createElementwise(
        b, loc, result, getShape(result), et,
        [](OpBuilder &nb, Location l, ValueRange args) -> Value {
          return math::SqrtOp::create(nb, l, args[0]);
        });
  if (ctx.getIntAttr("keepdims", 1) != 0)
    result = expandReducedDims(b, loc, result, axes);
  ctx.setOutput(0, result, t);
  return success();
}

LogicalResult convertReduceL1(NodeContext &ctx) {
  return convertReduceNorm(ctx, 1, /*root=*/false);
}
LogicalResult convertReduceL2(NodeContext &ctx) {
  return convertReduceNorm(ctx, 2, /*root=*/true);
}
LogicalResult convertReduceSumSquare(NodeContext &ctx) {
  return convertReduceNorm(ctx, 2, /*root=*/false);
}

/// Input 0 of an op along one axis (ArgMax/ArgMin, CumSum): a float or
/// integer tensor of rank 1 or more; an error saying so otherwise.
static LogicalResult requireNumericArray(NodeContext &ctx) {
  OnnxDType t = ctx.inputDType(0);
  if (!isFloatDType(t) && !isSignedIntDType(t) && !isUnsignedIntDType(t))
    return ctx.unsupported("element type " + dtypeName(t) +
                           " is not supported (supported: floating-point and "
                           "integer types)");
  if (ctx.inputShape(0).empty())
    return ctx.emitError("input must have rank 1 or more, got a scalar");
  return success();
}

/// ArgMax / ArgMin: the int64 index of the largest / smallest element along
/// 'axis', the first one unless 'select_last_index' (ties, and NaNs, which
/// win as numpy's argmax has them). One linalg.generic reduces the axis into
/// two outputs, the best value so far and its index; keepdims re-inserts the
/// axis. The index is an integer: it has no gradient.
LogicalResult convertArgExtreme(NodeContext &ctx, bool isMax) {
  OnnxDType t = ctx.inputDType(0);
  if (failed(requireNumericArray(ctx)))
    return failure();
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t rank = in.size();
  auto axis = ctx.normalizeAxis(ctx.getIntAttr("axis", 0), rank);
  if (failed(axis))
    return failure();
  if (in[*axis] == 0)
    return ctx.emitError("axis ")
           << *axis << " has size 0: there is no element to select";
  bool keepdims = ctx.getIntAttr("keepdims", 1) != 0;
  bool last = ctx.getIntAttr("select_last_index", 0) != 0;
  bool isUnsigned = isUnsignedIntDType(t);

  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  MLIRContext *mctx = ctx.getContext();
  Value x = ctx.input(0);
  Type et = getElementTypeOf(x);
  Type i64 = b.getI64Type();
  llvm::SmallVector<int64_t> outShape;
  llvm::SmallVector<AffineExpr> outDims;
  llvm::SmallVector<utils::IteratorType> iterators;
  for (int64_t d = 0; d < rank; ++d) {
    iterators.push_back(d == *axis ? utils::IteratorType::reduction
                                   : utils::IteratorType::parallel);
    if (d == *axis)
      continue;
    outShape.push_back(in[d]);
    outDims.push_back(getAffineDimExpr(d, mctx));
  }
  Value start = isMax ? createLowestValue(b, loc, et, isUnsigned)
                      : createHighestValue(b, loc, et, isUnsigned);
  Value bestInit = createFilledTensor(b, loc, outShape, et, start);
  Value indexInit = createFilledTensor(b, loc, outShape, i64,
                                       createScalarConstant(b, loc, i64, 0));
  AffineMap outMap = AffineMap::get(rank, 0, outDims, mctx);
  llvm::SmallVector<AffineMap> maps = {
      AffineMap::getMultiDimIdentityMap(rank, mctx), outMap, outMap};
  int64_t axisDim = *axis;
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{bestInit.getType(), indexInit.getType()}, ValueRange{x},
      ValueRange{bestInit, indexInit}, maps, iterators,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value v = args[0], best = args[1], bestIndex = args[2];
        Value take;
        if (isa<FloatType>(et)) {
          auto pred = isMax ? (last ? arith::CmpFPredicate::OGE
                                    : arith::CmpFPredicate::OGT)
                            : (last ? arith::CmpFPredicate::OLE
                                    : arith::CmpFPredicate::OLT);
          take = arith::CmpFOp::create(nb, l, pred, v, best);
          // A NaN wins over numbers: the first one, or the last.
          Value vNaN =
              arith::CmpFOp::create(nb, l, arith::CmpFPredicate::UNO, v, v);
          Value nan = vNaN;
          if (!last) {
            Value bestOrdered = arith::CmpFOp::create(
                nb, l, arith::CmpFPredicate::ORD, best, best);
            nan = arith::AndIOp::create(nb, l, vNaN, bestOrdered);
          }
          take = arith::OrIOp::create(nb, l, take, nan);
        } else {
          arith::CmpIPredicate pred;
          if (isMax)
            pred = isUnsigned ? (last ? arith::CmpIPredicate::uge
                                      : arith::CmpIPredicate::ugt)
                              : (last ? arith::CmpIPredicate::sge
                                      : arith::CmpIPredicate::sgt);
          else
            pred = isUnsigned ? (last ? arith::CmpIPredicate::ule
                                      : arith::CmpIPredicate::ult)
                              : (last ? arith::CmpIPredicate::sle
                                      : arith::CmpIPredicate::slt);
          take = arith::CmpIOp::create(nb, l, pred, v, best);
        }
        Value index = arith::IndexCastOp::create(
            nb, l, nb.getI64Type(), linalg::IndexOp::create(nb, l, axisDim));
        linalg::YieldOp::create(
            nb, l,
            ValueRange{arith::SelectOp::create(nb, l, take, v, best),
                       arith::SelectOp::create(nb, l, take, index, bestIndex)});
      });
  Value result = generic.getResult(1);
  if (keepdims)
    result = expandReducedDims(b, loc, result, {axisDim});
  ctx.setOutput(0, result, onnx::TensorProto_DataType_INT64);
  return success();
}

LogicalResult convertArgMax(NodeContext &ctx) {
  return convertArgExtreme(ctx, /*isMax=*/true);
}
LogicalResult convertArgMin(NodeContext &ctx) {
  return convertArgExtreme(ctx, /*isMax=*/false);
}

/// TopK: the K (input 1, known at import time) largest (or smallest) elements
/// along 'axis', in order, and their int64 indices; equal elements keep
/// their order (the lower index first), as the spec asks. Two generics, with
/// projected-permutation maps only: the rank of every element (how many
/// elements of its row come before it: larger, or equal at a lower index),
/// quadratic in the axis length like CumSum; then output position p takes
/// the element of rank p (a sum of it and zeros, so the values' gradient
/// reaches the input by the rule of a sum) and its index. `sorted` = 0 gets
/// them sorted too.
LogicalResult convertTopK(NodeContext &ctx) {
  OnnxDType t = ctx.inputDType(0);
  if (failed(requireNumericArray(ctx)))
    return failure();
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t rank = in.size();
  auto axis = ctx.normalizeAxis(ctx.getIntAttr("axis", -1), rank);
  if (failed(axis))
    return failure();
  int64_t k = 0;
  if (ctx.getOpset() < 10) {
    k = ctx.getIntAttr("k", -1);
  } else {
    auto kInput = ctx.requireConstantInput(1, "K");
    if (failed(kInput))
      return failure();
    if ((*kInput)->numElements() != 1)
      return ctx.emitError("K must hold one value");
    k = (*kInput)->getInt(0);
  }
  int64_t n = in[*axis];
  if (k < 0 || k > n)
    return ctx.emitError("K = ")
           << k << " is not between 0 and the axis' size " << n;
  bool largest = ctx.getIntAttr("largest", 1) != 0;
  bool isUnsigned = isUnsignedIntDType(t);

  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  MLIRContext *mctx = ctx.getContext();
  Value x = ctx.input(0);
  Type et = getElementTypeOf(x);
  Type i64 = b.getI64Type();
  int64_t axisDim = *axis;
  auto dim = [&](int64_t i) { return getAffineDimExpr(i, mctx); };
  // Loops: x's dims, then j along the axis.
  llvm::SmallVector<AffineExpr> self, other;
  for (int64_t d = 0; d < rank; ++d) {
    self.push_back(dim(d));
    other.push_back(d == axisDim ? dim(rank) : dim(d));
  }
  llvm::SmallVector<utils::IteratorType> iterators(
      rank, utils::IteratorType::parallel);
  iterators.push_back(utils::IteratorType::reduction);
  Value zeroRank =
      createFilledTensor(b, loc, in, i64, createScalarConstant(b, loc, i64, 0));
  Value ranks =
      linalg::GenericOp::create(
          b, loc, zeroRank.getType(), ValueRange{x, x}, ValueRange{zeroRank},
          llvm::ArrayRef<AffineMap>{AffineMap::get(rank + 1, 0, self, mctx),
                                    AffineMap::get(rank + 1, 0, other, mctx),
                                    AffineMap::get(rank + 1, 0, self, mctx)},
          iterators,
          [&](OpBuilder &nb, Location l, ValueRange a) {
            Value mine = a[0], theirs = a[1], count = a[2];
            Value i = linalg::IndexOp::create(nb, l, axisDim);
            Value j = linalg::IndexOp::create(nb, l, rank);
            Value before, equal;
            if (isa<FloatType>(et)) {
              before =
                  arith::CmpFOp::create(nb, l,
                                        largest ? arith::CmpFPredicate::OGT
                                                : arith::CmpFPredicate::OLT,
                                        theirs, mine);
              equal = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OEQ,
                                            theirs, mine);
            } else {
              before = arith::CmpIOp::create(
                  nb, l,
                  largest ? (isUnsigned ? arith::CmpIPredicate::ugt
                                        : arith::CmpIPredicate::sgt)
                          : (isUnsigned ? arith::CmpIPredicate::ult
                                        : arith::CmpIPredicate::slt),
                  theirs, mine);
              equal = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::eq,
                                            theirs, mine);
            }
            Value earlier =
                arith::CmpIOp::create(nb, l, arith::CmpIPredicate::ult, j, i);
            Value counts = arith::OrIOp::create(
                nb, l, before, arith::AndIOp::create(nb, l, equal, earlier));
            Value one = createScalarConstant(nb, l, nb.getI64Type(), 1);
            Value zero = createScalarConstant(nb, l, nb.getI64Type(), 0);
            linalg::YieldOp::create(
                nb, l,
                Value(arith::AddIOp::create(
                    nb, l, count,
                    arith::SelectOp::create(nb, l, counts, one, zero))));
          })
          .getResult(0);

  // Loops: the outputs' dims (p along the axis), then i along the axis.
  llvm::SmallVector<int64_t> outShape(in);
  outShape[axisDim] = k;
  Value valuesInit = createFilledTensor(b, loc, outShape, et,
                                        createScalarConstant(b, loc, et, 0));
  Value indicesInit = createFilledTensor(b, loc, outShape, i64,
                                         createScalarConstant(b, loc, i64, 0));
  // The values: a sum over i of the element of rank p (0 elsewhere), so
  // that the gradient rule of a sum takes them (added to 0: exact but for
  // the sign of a -0); the indices: the same selection, integer.
  llvm::SmallVector<AffineMap, 3> maps{AffineMap::get(rank + 1, 0, other, mctx),
                                       AffineMap::get(rank + 1, 0, other, mctx),
                                       AffineMap::get(rank + 1, 0, self, mctx)};
  auto isRankP = [&](OpBuilder &nb, Location l, Value r) -> Value {
    Value p = arith::IndexCastOp::create(
        nb, l, nb.getI64Type(), linalg::IndexOp::create(nb, l, axisDim));
    return arith::CmpIOp::create(nb, l, arith::CmpIPredicate::eq, r, p);
  };
  Value values =
      linalg::GenericOp::create(
          b, loc, valuesInit.getType(), ValueRange{x, ranks},
          ValueRange{valuesInit}, maps, iterators,
          [&](OpBuilder &nb, Location l, ValueRange a) {
            Value zero = createScalarConstant(nb, l, et, 0.0);
            Value pick = arith::SelectOp::create(nb, l, isRankP(nb, l, a[1]),
                                                 a[0], zero);
            Value sum = isa<FloatType>(et)
                            ? Value(arith::AddFOp::create(nb, l, a[2], pick))
                            : Value(arith::AddIOp::create(nb, l, a[2], pick));
            linalg::YieldOp::create(nb, l, sum);
          })
          .getResult(0);
  ctx.setOutput(0, values, t);
  if (ctx.hasOutput(1)) {
    Value indices =
        linalg::GenericOp::create(
            b, loc, indicesInit.getType(), ValueRange{x, ranks},
            ValueRange{indicesInit}, maps, iterators,
            [&](OpBuilder &nb, Location l, ValueRange a) {
              Value i = arith::IndexCastOp::create(
                  nb, l, nb.getI64Type(), linalg::IndexOp::create(nb, l, rank));
              linalg::YieldOp::create(
                  nb, l,
                  Value(arith::SelectOp::create(nb, l, isRankP(nb, l, a[1]), i,
                                                a[2])));
            })
            .getResult(0);
    ctx.setOutput(1, indices, onnx::TensorProto_DataType_INT64);
  }
  return success();
}

/// CumSum: element i along 'axis' (input 1, known at import time) is the sum
/// of the elements j <= i (j < i when 'exclusive', j >= i or j > i when
/// 'reverse'). One linalg.generic reduces a second loop j over the axis and
/// adds the elements that the comparison of j and i selects: quadratic in the
/// axis length, but every map is a projected permutation, so sharding and
/// autodiff treat it as any reduction (the adjoint is the reverse cumsum).
LogicalResult convertCumSum(NodeContext &ctx) {
  OnnxDType t = ctx.inputDType(0);
  if (failed(requireNumericArray(ctx)))
    return failure();
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t rank = in.size();
  const ConstTensor *axisTensor = ctx.inputConstant(1);
  if (!axisTensor) {
    const std::string &name = ctx.getNode().input(1);
    return ctx.emitError("input 1 ('")
           << name
           << "', the axis) must be known at compile time (a constant or an "
              "initializer); when it is a graph input, freeze it with "
              "--const-input "
           << name << "=FILE.npy";
  }
  if (axisTensor->isFloat() || isBoolDType(axisTensor->dtype) ||
      axisTensor->numElements() != 1)
    return ctx.emitError("axis must be one int32/int64 value, got ")
           << axisTensor->numElements() << " " << dtypeName(axisTensor->dtype)
           << " values";
  auto axis = ctx.normalizeAxis(axisTensor->getInt(0), rank);
  if (failed(axis))
    return failure();
  bool exclusive = ctx.getIntAttr("exclusive", 0) != 0;
  bool reverse = ctx.getIntAttr("reverse", 0) != 0;
  if (getNumElements(in) == 0) {
    ctx.setOutputConstant(0, ConstTensor::zeros(t, in));
    return success();
  }

  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  MLIRContext *mctx = ctx.getContext();
  Value x = ctx.input(0);
  Type et = getElementTypeOf(x);
  // Loops: the output's dims, then j (the summed position along the axis).
  llvm::SmallVector<AffineExpr> inputDims;
  for (int64_t d = 0; d < rank; ++d)
    inputDims.push_back(getAffineDimExpr(d == *axis ? rank : d, mctx));
  llvm::SmallVector<AffineMap> maps = {
      AffineMap::get(rank + 1, 0, inputDims, mctx),
      AffineMap::getMultiDimIdentityMap(rank + 1, mctx).getMajorSubMap(rank)};
  llvm::SmallVector<utils::IteratorType> iterators(
      rank, utils::IteratorType::parallel);
  iterators.push_back(utils::IteratorType::reduction);
  arith::CmpIPredicate pred =
      reverse
          ? (exclusive ? arith::CmpIPredicate::ugt : arith::CmpIPredicate::uge)
          : (exclusive ? arith::CmpIPredicate::ult : arith::CmpIPredicate::ule);
  Value init =
      createFilledTensor(b, loc, in, et, createScalarConstant(b, loc, et, 0.0));
  int64_t axisDim = *axis;
  Value result =
      linalg::GenericOp::create(
          b, loc, init.getType(), ValueRange{x}, ValueRange{init}, maps,
          iterators,
          [&](OpBuilder &nb, Location l, ValueRange args) {
            Value i = linalg::IndexOp::create(nb, l, axisDim);
            Value j = linalg::IndexOp::create(nb, l, rank);
            Value taken = arith::CmpIOp::create(nb, l, pred, j, i);
            Value zero = createScalarConstant(nb, l, et, 0.0);
            Value term = arith::SelectOp::create(nb, l, taken, args[0], zero);
            Value sum =
                isa<FloatType>(et)
                    ? arith::AddFOp::create(nb, l, args[1], term).getResult()
                    : arith::AddIOp::create(nb, l, args[1], term).getResult();
            linalg::YieldOp::create(nb, l, sum);
          })
          .getResult(0);
  ctx.setOutput(0, result, t);
  return success();
}

/// LpNormalization: x divided by its p-norm along 'axis' (p = 1: the sum of
/// |x|; p = 2: the square root of the sum of x²), as the ONNX reference
/// computes it (a zero norm divides by zero). A linalg.reduce of the
/// magnitudes, keepdims' expand_shape and a broadcasting division.
LogicalResult convertLpNormalization(NodeContext &ctx) {
  OnnxDType t = ctx.inputDType(0);
  if (!isFloatDType(t))
    return ctx.unsupported("element type " + dtypeName(t) +
                           " is not supported (supported: floating-point "
                           "types)");
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t rank = in.size();
  if (rank == 0)
    return ctx.emitError("input must have rank 1 or more, got a scalar");
  auto axis = ctx.normalizeAxis(ctx.getIntAttr("axis", -1), rank);
  if (failed(axis))
    return failure();
  int64_t p = ctx.getIntAttr("p", 2);
  if (p != 1 && p != 2)
    return ctx.unsupported("p = " + std::to_string(p) +
                           " is not supported (supported: 1 and 2, as the "
                           "ONNX spec allows)");
  if (getNumElements(in) == 0) {
    ctx.setOutputConstant(0, ConstTensor::zeros(t, in));
    return success();
  }
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  Value x = ctx.input(0);
  Type et = getElementTypeOf(x);
  Value magnitude = absOrSquare(b, loc, x, in, et, p);
  int64_t dims[] = {*axis};
  Value norm = createReduction(b, loc, magnitude, dims, ReductionKind::Sum);
  if (p == 2)
    norm = createElementwise(
        b, loc, norm, getShape(norm), et,
        [](OpBuilder &nb, Location l, ValueRange args) -> Value {
          return math::SqrtOp::create(nb, l, args[0]);
        });
  norm = expandReducedDims(b, loc, norm, dims);
  Value result = createElementwise(
      b, loc, {x, norm}, in, et,
      [](OpBuilder &nb, Location l, ValueRange args) -> Value {
        return arith::DivFOp::create(nb, l, args[0], args[1]);
      });
  ctx.setOutput(0, result, t);
  return success();
}

} // namespace

void registerReductionConverters(ConverterRegistry &registry) {
  registry["ReduceSum"] = convertReduceSum;
  registry["ReduceMean"] = convertReduceMean;
  registry["ReduceMax"] = convertReduceMax;
  registry["ReduceL1"] = convertReduceL1;
  registry["ReduceL2"] = convertReduceL2;
  registry["ReduceSumSquare"] = convertReduceSumSquare;
  registry["ArgMax"] = convertArgMax;
  registry["ArgMin"] = convertArgMin;
  registry["TopK"] = convertTopK;
  registry["CumSum"] = convertCumSum;
  registry["LpNormalization"] = convertLpNormalization;
}

} // namespace autopar::import
