//===- Reduction.cpp - ReduceSum/Mean/Max to linalg.reduce ----------------===//
//
// A reduction becomes one named `linalg.reduce` over an init filled with the
// combiner's identity (0, or the lowest value for Max), a division by the
// element count for Mean, and a `tensor.expand_shape` that restores the
// reduced dims as size 1 for keepdims. Small constant inputs fold on the host
// so that shape computations stay static.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

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

LogicalResult convertReduce(NodeContext &ctx, ReductionKind kind) {
  OnnxDType t = ctx.inputDType(0);
  bool isBool = isBoolDType(t);
  if (!isFloatDType(t) && !isSignedIntDType(t) && !isUnsignedIntDType(t) &&
      !(isBool && kind == ReductionKind::Max))
    return ctx.unsupported("element type " + dtypeName(t) +
                           " is not supported (supported: floating-point and "
                           "integer types" +
                           (kind == ReductionKind::Max ? ", bool" : "") + ")");
  auto raw = getRawAxes(ctx);
  if (failed(raw))
    return failure();
  int64_t rank = ctx.inputRank(0);
  llvm::SmallVector<int64_t> axes;
  if (raw->empty()) {
    // noop_with_empty_axes: the reduction is the identity.
    if (ctx.getIntAttr("noop_with_empty_axes", 0) != 0) {
      if (const ConstTensor *c = ctx.inputConstant(0))
        ctx.setOutputConstant(0, *c);
      else
        ctx.setOutput(0, ctx.input(0), t);
      return success();
    }
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  } else {
    auto normalized = normalizeAxes(ctx, *raw, rank);
    if (failed(normalized))
      return failure();
    axes = std::move(*normalized);
  }
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

} // namespace

void registerReductionConverters(ConverterRegistry &registry) {
  registry["ReduceSum"] = convertReduceSum;
  registry["ReduceMean"] = convertReduceMean;
  registry["ReduceMax"] = convertReduceMax;
}

} // namespace autopar::import
