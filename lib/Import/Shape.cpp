//===- Shape.cpp - ONNX shape and data-movement ops -----------------------===//
//
// Shape, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Slice,
// Split, Expand, Tile, Pad, DepthToSpace, SpaceToDepth, Gather,
// ConstantOfShape, Range and Trilu.
//
// Exported models compute shapes at run time (Shape -> Gather -> Unsqueeze ->
// Concat -> Reshape). Every tensor shape is static here, so these ops fold on
// the host whenever their inputs are ConstTensors and the result is small;
// the emitted IR then only holds static shapes. Otherwise they become tensor
// ops and named linalg ops that upstream sharding understands (extract_slice,
// collapse/expand_shape, concat, linalg.transpose) and, for data-dependent
// indexing only, a linalg.generic that reads with tensor.extract.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "mlir/IR/AffineMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <limits>
#include <string>

using namespace mlir;
namespace autopar::import {
namespace {

/// Results with at most this many elements are computed on the host when
/// their inputs are constants (as in Elementwise.cpp).
constexpr int64_t kMaxFoldElements = 4096;
/// The limit for integer and bool results: index tensors computed from shapes
/// (torchvision's Swin Transformers build [56, 56, 2] ScatterND indices from
/// Range, Expand and Concat) stay host constants.
constexpr int64_t kMaxFoldIndexElements = 65536;

constexpr OnnxDType kInt64 = onnx::TensorProto_DataType_INT64;

//===----------------------------------------------------------------------===//
// Host helpers
//===----------------------------------------------------------------------===//

/// "[2, 3]" for error messages.
static std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

static bool isFoldable(llvm::ArrayRef<int64_t> shape, OnnxDType dtype) {
  return getNumElements(shape) <=
         (isFloatDType(dtype) ? kMaxFoldElements : kMaxFoldIndexElements);
}

/// Multi-index of the row-major linear index `linear` in `shape`.
static void delinearize(int64_t linear, llvm::ArrayRef<int64_t> shape,
                        llvm::MutableArrayRef<int64_t> index) {
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    index[d] = linear % shape[d];
    linear /= shape[d];
  }
}

/// Row-major linear index of `index` in `shape`.
static int64_t linearize(llvm::ArrayRef<int64_t> index,
                         llvm::ArrayRef<int64_t> shape) {
  int64_t linear = 0;
  for (auto [i, d] : llvm::zip_equal(index, shape))
    linear = linear * d + i;
  return linear;
}

/// Copies element `si` of `src` to element `di` of `dst` (same dtype).
static void copyElement(ConstTensor &dst, int64_t di, const ConstTensor &src,
                        int64_t si) {
  if (src.isFloat())
    dst.floats[di] = src.floats[si];
  else
    dst.ints[di] = src.ints[si];
}

/// A host tensor of `shape` whose element at each multi-index is the element
/// of `src` at the linear index `sourceOf(index)`. Transpose, Slice, Expand and
/// Gather are all such index maps.
static ConstTensor
remapOnHost(const ConstTensor &src, llvm::ArrayRef<int64_t> shape,
            llvm::function_ref<int64_t(llvm::ArrayRef<int64_t>)> sourceOf) {
  ConstTensor result = ConstTensor::zeros(src.dtype, shape);
  llvm::SmallVector<int64_t> index(shape.size());
  for (int64_t linear = 0, n = result.numElements(); linear < n; ++linear) {
    delinearize(linear, shape, index);
    copyElement(result, linear, src, sourceOf(index));
  }
  return result;
}

/// `src` with a new shape of the same number of elements.
static ConstTensor reshapedOnHost(const ConstTensor &src,
                                  llvm::ArrayRef<int64_t> shape) {
  ConstTensor result = src;
  result.shape.assign(shape.begin(), shape.end());
  return result;
}

/// Binds output `i` to the data of input 0 viewed with `shape` (same element
/// count): folded when input 0 is a small constant, else a reshape.
static LogicalResult setReshapedOutput(NodeContext &ctx, int64_t i,
                                       llvm::ArrayRef<int64_t> shape) {
  const ConstTensor *data = ctx.inputConstant(0);
  if (data && isFoldable(shape, data->dtype)) {
    ctx.setOutputConstant(i, reshapedOnHost(*data, shape));
    return success();
  }
  if (getNumElements(shape) == 0) {
    ctx.setOutputConstant(i, ConstTensor::zeros(ctx.inputDType(0), shape));
    return success();
  }
  ctx.setOutput(
      i, reshapeTensor(ctx.getBuilder(), ctx.getLoc(), ctx.input(0), shape),
      ctx.inputDType(0));
  return success();
}

//===----------------------------------------------------------------------===//
// Reading shape data (axes, shapes, slice bounds)
//===----------------------------------------------------------------------===//

/// The contents of integer input `i` (a scalar or 1-D tensor), which must be
/// known at import time.
static FailureOr<llvm::SmallVector<int64_t>>
readIntsInput(NodeContext &ctx, int64_t i, llvm::StringRef what) {
  auto c = ctx.requireConstantInput(i, what);
  if (failed(c))
    return failure();
  const ConstTensor &t = **c;
  if (t.isFloat() || isBoolDType(t.dtype))
    return ctx.emitError(what)
           << " must be an int32/int64 tensor, got " << dtypeName(t.dtype);
  if (t.shape.size() > 1)
    return ctx.emitError(what)
           << " must be a 1-D tensor, got shape " << formatShape(t.shape);
  return llvm::SmallVector<int64_t>(t.ints.begin(), t.ints.end());
}

/// An integer list given as attribute `name` (older opsets) or as input
/// `inputIdx` (newer opsets); nullopt when neither is present.
static FailureOr<std::optional<llvm::SmallVector<int64_t>>>
readAttrOrInput(NodeContext &ctx, llvm::StringRef name, int64_t inputIdx) {
  if (ctx.hasInput(inputIdx)) {
    auto values = readIntsInput(ctx, inputIdx, name);
    if (failed(values))
      return failure();
    return std::optional(*values);
  }
  return ctx.getIntsAttr(name);
}

/// Normalizes every axis against `rank`; rejects out-of-range and repeated
/// axes.
static FailureOr<llvm::SmallVector<int64_t>>
normalizeAxes(NodeContext &ctx, llvm::ArrayRef<int64_t> axes, int64_t rank) {
  llvm::SmallVector<int64_t> result;
  llvm::SmallSet<int64_t, 8> seen;
  if (rank == 0 && !axes.empty())
    return ctx.emitError("axes ")
           << formatShape(axes) << " given for a scalar (rank 0), which has "
           << "no axes";
  for (int64_t axis : axes) {
    auto a = ctx.normalizeAxis(axis, rank);
    if (failed(a))
      return failure();
    if (!seen.insert(*a).second)
      return ctx.emitError("axis ")
             << axis << " is repeated in the axes " << formatShape(axes);
    result.push_back(*a);
  }
  return result;
}

/// Rejects an input dtype that is not int32/int64 (Gather indices).
static LogicalResult requireIndexDType(NodeContext &ctx, int64_t i,
                                       llvm::StringRef what) {
  OnnxDType t = ctx.inputDType(i);
  if (t == onnx::TensorProto_DataType_INT32 || t == kInt64)
    return success();
  return ctx.emitError(what) << " must be int32 or int64, got " << dtypeName(t);
}

//===----------------------------------------------------------------------===//
// Shape, Reshape, Flatten, Squeeze, Unsqueeze
//===----------------------------------------------------------------------===//

/// Shape is always known: every tensor shape is static.
static LogicalResult convertShape(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> shape = ctx.inputShape(0);
  int64_t rank = shape.size();
  // Opset 15 start/end: negative counts from the back, both are clamped.
  auto clampDim = [rank](int64_t v) {
    return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank);
  };
  int64_t start = clampDim(ctx.getIntAttr("start", 0));
  int64_t end = clampDim(ctx.getIntAttr("end", rank));
  int64_t n = std::max<int64_t>(end - start, 0);
  ConstTensor result = ConstTensor::zeros(kInt64, {n});
  for (int64_t i = 0; i < n; ++i)
    result.ints[i] = shape[start + i];
  ctx.setOutputConstant(0, std::move(result));
  return success();
}

/// Resolves a Reshape target: 0 copies the input dim (unless `allowZero`),
/// -1 is inferred from the element count.
static FailureOr<llvm::SmallVector<int64_t>>
resolveReshapeTarget(NodeContext &ctx, llvm::ArrayRef<int64_t> target,
                     bool allowZero) {
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  llvm::SmallVector<int64_t> shape;
  int64_t inferred = -1, known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t d = target[i];
    if (d == 0 && !allowZero) {
      if (i >= in.size())
        return ctx.emitError("shape ")
               << formatShape(target) << " has 0 (copy the input dim) at "
               << "position " << i << ", past the input's rank " << in.size();
      d = in[i];
    } else if (d == -1) {
      if (inferred >= 0)
        return ctx.emitError("shape ")
               << formatShape(target) << " has more than one -1";
      inferred = i;
      shape.push_back(-1);
      continue;
    } else if (d < -1) {
      return ctx.emitError("shape ")
             << formatShape(target) << " has invalid dim " << d
             << " (dims must be >= 0, or -1 to infer one dim)";
    }
    known *= d;
    shape.push_back(d);
  }
  int64_t total = getNumElements(in);
  // A batch baked into the target by an export at a larger batch
  // (ImportOptions::batchRatio): its leading dim scales with the input's.
  int64_t ratio = ctx.batchRatio();
  if (ratio > 1 && !shape.empty() && shape[0] > 0 && !in.empty() &&
      target[0] != 0) {
    bool fits =
        inferred >= 0 ? known != 0 && total % known == 0 : known == total;
    if (shape[0] == in[0] * ratio || (!fits && shape[0] % ratio == 0)) {
      known /= shape[0];
      shape[0] /= ratio;
      known *= shape[0];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || total % known != 0)
      return ctx.emitError("cannot reshape ")
             << formatShape(in) << " (" << total << " elements) to "
             << formatShape(target) << ": the -1 dim cannot be inferred";
    shape[inferred] = total / known;
  } else if (known != total) {
    return ctx.emitError("cannot reshape ")
           << formatShape(in) << " (" << total << " elements) to "
           << formatShape(shape) << " (" << known << " elements)";
  }
  return shape;
}

static LogicalResult convertReshape(NodeContext &ctx) {
  // Before opset 5 the target is the `shape` attribute.
  auto target = readAttrOrInput(ctx, "shape", 1);
  if (failed(target))
    return failure();
  if (!*target)
    return ctx.emitError("needs a target shape (input 1, or the 'shape' "
                         "attribute before opset 5)");
  bool allowZero = ctx.getIntAttr("allowzero", 0) != 0;
  auto shape = resolveReshapeTarget(ctx, **target, allowZero);
  if (failed(shape))
    return failure();
  return setReshapedOutput(ctx, 0, *shape);
}

static LogicalResult convertFlatten(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t rank = in.size();
  int64_t axis = ctx.getIntAttr("axis", 1);
  // Unlike most axes, rank itself is valid here (everything in the rows).
  if (axis < -rank || axis > rank)
    return ctx.emitError("axis ")
           << axis << " is out of range for rank " << rank << " (valid: ["
           << -rank << ", " << rank << "])";
  if (axis < 0)
    axis += rank;
  int64_t rows = getNumElements(in.take_front(axis));
  int64_t cols = getNumElements(in.drop_front(axis));
  return setReshapedOutput(ctx, 0, {rows, cols});
}

static LogicalResult convertSqueeze(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  auto axesOr = readAttrOrInput(ctx, "axes", 1);
  if (failed(axesOr))
    return failure();
  llvm::SmallVector<bool> drop(in.size(), false);
  if (*axesOr) {
    auto axes = normalizeAxes(ctx, **axesOr, in.size());
    if (failed(axes))
      return failure();
    for (int64_t a : *axes) {
      if (in[a] != 1)
        return ctx.emitError("cannot squeeze axis ")
               << a << " of shape " << formatShape(in) << ": its size is "
               << in[a] << ", not 1";
      drop[a] = true;
    }
  } else {
    // No axes: every size-1 dim goes.
    for (auto [i, d] : llvm::enumerate(in))
      drop[i] = d == 1;
  }
  llvm::SmallVector<int64_t> shape;
  for (auto [i, d] : llvm::enumerate(in))
    if (!drop[i])
      shape.push_back(d);
  return setReshapedOutput(ctx, 0, shape);
}

static LogicalResult convertUnsqueeze(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  auto axesOr = readAttrOrInput(ctx, "axes", 1);
  if (failed(axesOr))
    return failure();
  if (!*axesOr)
    return ctx.emitError("needs axes (input 1 from opset 13, the 'axes' "
                         "attribute before)");
  // Axes index the output, whose rank counts the new dims.
  int64_t outRank = in.size() + (*axesOr)->size();
  auto axes = normalizeAxes(ctx, **axesOr, outRank);
  if (failed(axes))
    return failure();
  llvm::SmallVector<int64_t> shape(outRank, 1);
  llvm::SmallVector<bool> isNew(outRank, false);
  for (int64_t a : *axes)
    isNew[a] = true;
  for (int64_t i = 0, j = 0; i < outRank; ++i)
    if (!isNew[i])
      shape[i] = in[j++];
  return setReshapedOutput(ctx, 0, shape);
}

//===----------------------------------------------------------------------===//
// Transpose, Expand, Trilu
//===----------------------------------------------------------------------===//

static LogicalResult convertTranspose(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t rank = in.size();
  llvm::SmallVector<int64_t> perm;
  if (auto attr = ctx.getIntsAttr("perm")) {
    perm = *attr;
  } else {
    for (int64_t i = rank - 1; i >= 0; --i)
      perm.push_back(i);
  }
  llvm::SmallVector<bool> used(rank, false);
  bool valid = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t p : perm) {
    valid = valid && p >= 0 && p < rank && !used[p];
    if (valid)
      used[p] = true;
  }
  if (!valid)
    return ctx.emitError("perm ")
           << formatShape(perm) << " is not a permutation of [0, " << rank
           << ") for an input of rank " << rank;
  llvm::SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(in[p]);

  if (const ConstTensor *data = ctx.inputConstant(0);
      data && isFoldable(shape, data->dtype)) {
    llvm::SmallVector<int64_t> srcIndex(rank);
    ctx.setOutputConstant(
        0, remapOnHost(*data, shape, [&](llvm::ArrayRef<int64_t> index) {
          for (int64_t i = 0; i < rank; ++i)
            srcIndex[perm[i]] = index[i];
          return linearize(srcIndex, in);
        }));
    return success();
  }
  Value x = ctx.input(0);
  if (llvm::equal(perm, llvm::seq<int64_t>(0, rank))) {
    ctx.setOutput(0, x, ctx.inputDType(0));
    return success();
  }
  OpBuilder &b = ctx.getBuilder();
  Value init = createEmptyTensor(b, ctx.getLoc(), shape, getElementTypeOf(x));
  Value result = linalg::TransposeOp::create(b, ctx.getLoc(), x, init, perm)
                     .getResult()[0];
  ctx.setOutput(0, result, ctx.inputDType(0));
  return success();
}

/// Expand: the output shape is the broadcast of the input's and the target's.
static LogicalResult convertExpand(NodeContext &ctx) {
  auto target = readIntsInput(ctx, 1, "shape");
  if (failed(target))
    return failure();
  if (llvm::any_of(*target, [](int64_t d) { return d < 0; }))
    return ctx.emitError("shape ")
           << formatShape(*target) << " has a negative dim";
  llvm::SmallVector<int64_t> in(ctx.inputShape(0));
  auto shape = broadcastShapes({in, *target});
  if (failed(shape))
    return ctx.emitError("cannot expand shape ")
           << formatShape(in) << " to " << formatShape(*target)
           << ": dims must be equal or 1";
  if (const ConstTensor *data = ctx.inputConstant(0);
      data && isFoldable(*shape, data->dtype)) {
    int64_t offset = shape->size() - in.size();
    llvm::SmallVector<int64_t> srcIndex(in.size());
    ctx.setOutputConstant(
        0, remapOnHost(*data, *shape, [&](llvm::ArrayRef<int64_t> index) {
          for (size_t j = 0; j < in.size(); ++j)
            srcIndex[j] = in[j] == 1 ? 0 : index[offset + j];
          return linearize(srcIndex, in);
        }));
    return success();
  }
  ctx.setOutput(
      0, broadcastTo(ctx.getBuilder(), ctx.getLoc(), ctx.input(0), *shape),
      ctx.inputDType(0));
  return success();
}

/// Tile: output dim i is input dim i repeated repeats[i] times. Each repeated
/// dim gets a new outer dim of repeats[i] copies: one linalg.generic
/// broadcasts the input to [r0, d0, r1, d1, ...] (dims repeated once take no
/// new dim), and a collapse_shape merges each pair into r * d.
static LogicalResult convertTile(NodeContext &ctx) {
  if (ctx.getOpset() < 6)
    return ctx.unsupported("Tile before opset 6 (the 'tiles' and 'axis' "
                           "inputs) is not supported (supported: opset 6 and "
                           "later, with a 'repeats' input)");
  auto repeats = readIntsInput(ctx, 1, "repeats");
  if (failed(repeats))
    return failure();
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t rank = in.size();
  if (static_cast<int64_t>(repeats->size()) != rank)
    return ctx.emitError("repeats ")
           << formatShape(*repeats) << " must hold one count per input dim ("
           << rank << " for shape " << formatShape(in) << ")";
  if (llvm::any_of(*repeats, [](int64_t r) { return r < 0; }))
    return ctx.emitError("repeats ")
           << formatShape(*repeats) << " has a negative count";
  llvm::SmallVector<int64_t> shape;
  for (auto [d, r] : llvm::zip_equal(in, *repeats))
    shape.push_back(d * r);
  OnnxDType dtype = ctx.inputDType(0);
  if (const ConstTensor *data = ctx.inputConstant(0);
      data && isFoldable(shape, data->dtype)) {
    llvm::SmallVector<int64_t> srcIndex(rank);
    ctx.setOutputConstant(
        0, remapOnHost(*data, shape, [&](llvm::ArrayRef<int64_t> index) {
          for (int64_t j = 0; j < rank; ++j)
            srcIndex[j] = index[j] % in[j];
          return linearize(srcIndex, in);
        }));
    return success();
  }
  if (getNumElements(shape) == 0) {
    ctx.setOutputConstant(0, ConstTensor::zeros(dtype, shape));
    return success();
  }
  Value x = ctx.input(0);
  if (llvm::equal(shape, in)) {
    ctx.setOutput(0, x, dtype);
    return success();
  }
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  MLIRContext *mctx = ctx.getContext();
  llvm::SmallVector<int64_t> tiled;
  llvm::SmallVector<AffineExpr> inputDims;
  llvm::SmallVector<ReassociationIndices> groups;
  for (auto [d, r] : llvm::zip_equal(in, *repeats)) {
    ReassociationIndices group;
    if (r != 1) {
      group.push_back(tiled.size());
      tiled.push_back(r);
    }
    group.push_back(tiled.size());
    inputDims.push_back(getAffineDimExpr(tiled.size(), mctx));
    tiled.push_back(d);
    groups.push_back(group);
  }
  int64_t tiledRank = tiled.size();
  Type elementType = getElementTypeOf(x);
  Value init = createEmptyTensor(b, loc, tiled, elementType);
  llvm::SmallVector<AffineMap> maps = {
      AffineMap::get(tiledRank, 0, inputDims, mctx),
      AffineMap::getMultiDimIdentityMap(tiledRank, mctx)};
  llvm::SmallVector<utils::IteratorType> iterators(
      tiledRank, utils::IteratorType::parallel);
  auto copies = linalg::GenericOp::create(
      b, loc, init.getType(), ValueRange{x}, ValueRange{init}, maps, iterators,
      [](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(nb, nloc, args[0]);
      });
  Value result = tensor::CollapseShapeOp::create(
      b, loc, RankedTensorType::get(shape, elementType), copies.getResult(0),
      groups);
  ctx.setOutput(0, result, dtype);
  return success();
}

/// Trilu keeps the elements on and above (upper) or below (lower) the k-th
/// diagonal of the last two dims and zeroes the rest.
static LogicalResult convertTrilu(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t rank = in.size();
  if (rank < 2)
    return ctx.emitError("input must have rank >= 2, got shape ")
           << formatShape(in);
  bool upper = ctx.getIntAttr("upper", 1) != 0;
  int64_t k = 0;
  if (ctx.hasInput(1)) {
    auto kValues = readIntsInput(ctx, 1, "k");
    if (failed(kValues))
      return failure();
    if (kValues->size() != 1)
      return ctx.emitError("k must be a scalar, got ")
             << kValues->size() << " values";
    k = kValues->front();
  }
  auto keep = [&](int64_t row, int64_t col) {
    return upper ? col - row >= k : col - row <= k;
  };
  OnnxDType dtype = ctx.inputDType(0);
  if (const ConstTensor *data = ctx.inputConstant(0);
      data && isFoldable(in, data->dtype)) {
    ConstTensor result = ConstTensor::zeros(dtype, in);
    llvm::SmallVector<int64_t> index(rank);
    for (int64_t i = 0, n = result.numElements(); i < n; ++i) {
      delinearize(i, in, index);
      if (keep(index[rank - 2], index[rank - 1]))
        copyElement(result, i, *data, i);
    }
    ctx.setOutputConstant(0, std::move(result));
    return success();
  }
  Value x = ctx.input(0);
  Value result = createElementwise(
      ctx.getBuilder(), ctx.getLoc(), x, in, getElementTypeOf(x),
      [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
        Value row = linalg::IndexOp::create(b, loc, rank - 2);
        Value col = linalg::IndexOp::create(b, loc, rank - 1);
        Value diff = arith::SubIOp::create(b, loc, col, row);
        Value kv = arith::ConstantIndexOp::create(b, loc, k);
        Value inside = arith::CmpIOp::create(b, loc,
                                             upper ? arith::CmpIPredicate::sge
                                                   : arith::CmpIPredicate::sle,
                                             diff, kv);
        Value zero = createScalarConstant(b, loc, args[0].getType(), 0.0);
        return arith::SelectOp::create(b, loc, inside, args[0], zero);
      });
  ctx.setOutput(0, result, dtype);
  return success();
}

//===----------------------------------------------------------------------===//
// Concat, Split, Slice
//===----------------------------------------------------------------------===//

static LogicalResult convertConcat(NodeContext &ctx) {
  auto axisAttr = ctx.getOptionalIntAttr("axis");
  // Concat-1 defaulted the axis to 1; it is required from opset 4.
  if (!axisAttr && ctx.getOpset() < 4)
    axisAttr = 1;
  if (!axisAttr)
    return ctx.emitError("is missing its required 'axis' attribute");
  llvm::SmallVector<int64_t> idx;
  for (int64_t i = 0; i < ctx.getNumInputs(); ++i)
    if (ctx.hasInput(i))
      idx.push_back(i);
  if (idx.empty())
    return ctx.emitError("needs at least one input");
  OnnxDType dtype = ctx.inputDType(idx[0]);
  llvm::SmallVector<int64_t> shape(ctx.inputShape(idx[0]));
  int64_t rank = shape.size();
  if (rank == 0)
    return ctx.emitError("cannot concatenate scalars (rank 0 inputs)");
  auto axis = ctx.normalizeAxis(*axisAttr, rank);
  if (failed(axis))
    return failure();
  shape[*axis] = 0;
  for (int64_t i : idx) {
    llvm::ArrayRef<int64_t> s = ctx.inputShape(i);
    if (ctx.inputDType(i) != dtype)
      return ctx.emitError("inputs have different element types (")
             << dtypeName(dtype) << " and " << dtypeName(ctx.inputDType(i))
             << ")";
    bool same = static_cast<int64_t>(s.size()) == rank;
    for (int64_t d = 0; same && d < rank; ++d)
      same = d == *axis || s[d] == shape[d];
    if (!same)
      return ctx.emitError("input ")
             << i << " has shape " << formatShape(s)
             << ", which does not match input " << idx[0] << " ("
             << formatShape(ctx.inputShape(idx[0])) << ") outside axis "
             << *axis;
    shape[*axis] += s[*axis];
  }

  if (ctx.allInputsConstant() && isFoldable(shape, dtype)) {
    ConstTensor result = ConstTensor::zeros(dtype, shape);
    int64_t offset = 0;
    llvm::SmallVector<int64_t> index(rank);
    for (int64_t i : idx) {
      const ConstTensor &part = *ctx.inputConstant(i);
      for (int64_t j = 0, n = part.numElements(); j < n; ++j) {
        delinearize(j, part.shape, index);
        index[*axis] += offset;
        copyElement(result, linearize(index, shape), part, j);
      }
      offset += part.shape[*axis];
    }
    ctx.setOutputConstant(0, std::move(result));
    return success();
  }
  // Zero-size inputs (allowed by ONNX) contribute nothing.
  llvm::SmallVector<Value> parts;
  for (int64_t i : idx)
    if (getNumElements(ctx.inputShape(i)) != 0)
      parts.push_back(ctx.input(i));
  if (parts.empty() || getNumElements(shape) == 0) {
    ctx.setOutputConstant(0, ConstTensor::zeros(dtype, shape));
    return success();
  }
  Value result = parts.size() == 1
                     ? parts[0]
                     : tensor::ConcatOp::create(ctx.getBuilder(), ctx.getLoc(),
                                                *axis, parts)
                           .getResult();
  ctx.setOutput(0, result, dtype);
  return success();
}

/// One axis of a slice: element `i` comes from `start + i * step`.
struct SliceDim {
  int64_t start = 0, size = 0, step = 1;
};

/// A strided slice of `x` (`dims` covers every axis, no size is 0).
/// Positive steps become one tensor.extract_slice; negative steps slice the
/// same elements with a positive stride, then reverse those axes.
static Value buildSlice(OpBuilder &b, Location loc, Value x,
                        llvm::ArrayRef<SliceDim> dims) {
  llvm::SmallVector<OpFoldResult> offsets, sizes, strides;
  llvm::SmallVector<int64_t> shape;
  bool reversed = false, identity = true;
  for (auto [d, size] : llvm::zip_equal(dims, getShape(x))) {
    // The lowest element taken; a negative step walks down from `start`.
    int64_t low = d.step > 0 ? d.start : d.start + (d.size - 1) * d.step;
    offsets.push_back(b.getIndexAttr(low));
    sizes.push_back(b.getIndexAttr(d.size));
    strides.push_back(b.getIndexAttr(std::abs(d.step)));
    shape.push_back(d.size);
    reversed |= d.step < 0 && d.size > 1;
    identity &= d.size == size && (std::abs(d.step) == 1 || d.size == 1);
  }
  Value slice = identity ? x
                         : tensor::ExtractSliceOp::create(b, loc, x, offsets,
                                                          sizes, strides)
                               .getResult();
  if (!reversed)
    return slice;
  // Element i of a reversed axis is element size-1-i of the slice. That index
  // map is not a projected permutation, so the body extracts it.
  return createElementwise(
      b, loc, {}, shape, getElementTypeOf(x),
      [&](OpBuilder &nb, Location nloc, ValueRange) -> Value {
        llvm::SmallVector<Value> index;
        for (auto [j, d] : llvm::enumerate(dims)) {
          Value i = linalg::IndexOp::create(nb, nloc, j);
          if (d.step < 0 && d.size > 1)
            i = arith::SubIOp::create(
                nb, nloc, arith::ConstantIndexOp::create(nb, nloc, d.size - 1),
                i);
          index.push_back(i);
        }
        return tensor::ExtractOp::create(nb, nloc, slice, index);
      });
}

/// Binds output `out` to a strided slice of input 0: folded on the host when
/// input 0 is a small constant.
static void setSliceOutput(NodeContext &ctx, int64_t out,
                           llvm::ArrayRef<SliceDim> dims) {
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  OnnxDType dtype = ctx.inputDType(0);
  llvm::SmallVector<int64_t> shape;
  for (const SliceDim &d : dims)
    shape.push_back(d.size);
  if (const ConstTensor *data = ctx.inputConstant(0);
      data && isFoldable(shape, data->dtype)) {
    llvm::SmallVector<int64_t> srcIndex(dims.size());
    ctx.setOutputConstant(
        out, remapOnHost(*data, shape, [&](llvm::ArrayRef<int64_t> index) {
          for (auto [j, d] : llvm::enumerate(dims))
            srcIndex[j] = d.start + index[j] * d.step;
          return linearize(srcIndex, in);
        }));
    return;
  }
  if (getNumElements(shape) == 0) {
    ctx.setOutputConstant(out, ConstTensor::zeros(dtype, shape));
    return;
  }
  ctx.setOutput(out,
                buildSlice(ctx.getBuilder(), ctx.getLoc(), ctx.input(0), dims),
                dtype);
}

/// Clamps one ONNX Slice axis as NumPy does: negative starts/ends count from
/// the back; the range is clamped to the axis ([0, dim] going up, [-1, dim-1]
/// going down), so INT64_MAX/INT64_MIN mean "to the end".
static SliceDim clampSlice(int64_t start, int64_t end, int64_t step,
                           int64_t dim) {
  auto wrap = [dim](int64_t v) { return v < 0 ? v + dim : v; };
  SliceDim d;
  d.step = step;
  start = wrap(start);
  end = wrap(end);
  int64_t distance;
  if (step > 0) {
    d.start = std::clamp<int64_t>(start, 0, dim);
    distance = std::clamp<int64_t>(end, 0, dim) - d.start;
  } else {
    d.start = std::clamp<int64_t>(start, 0, std::max<int64_t>(dim - 1, 0));
    distance = d.start - std::clamp<int64_t>(end, -1, dim - 1);
  }
  int64_t stride = step > 0 ? step : -step;
  // ceil(distance / stride) without overflow for huge steps.
  d.size = distance > 0 && dim > 0 ? (distance - 1) / stride + 1 : 0;
  return d;
}

static LogicalResult convertSlice(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t rank = in.size();
  // Opset >= 10: inputs starts, ends, axes, steps; before: attributes.
  bool fromAttrs = ctx.hasAttr("starts") || ctx.getNumInputs() == 1;
  std::optional<llvm::SmallVector<int64_t>> starts, ends, axesOr, steps;
  if (fromAttrs) {
    starts = ctx.getIntsAttr("starts");
    ends = ctx.getIntsAttr("ends");
    axesOr = ctx.getIntsAttr("axes");
  } else {
    const char *names[] = {"starts", "ends", "axes", "steps"};
    std::optional<llvm::SmallVector<int64_t>> *slots[] = {&starts, &ends,
                                                          &axesOr, &steps};
    for (int64_t i = 0; i < 4; ++i) {
      if (!ctx.hasInput(i + 1))
        continue;
      auto values = readIntsInput(ctx, i + 1, names[i]);
      if (failed(values))
        return failure();
      *slots[i] = std::move(*values);
    }
  }
  if (!starts || !ends)
    return ctx.emitError("needs starts and ends (inputs 1 and 2 from opset "
                         "10, attributes before)");
  size_t n = starts->size();
  if (ends->size() != n || (axesOr && axesOr->size() != n) ||
      (steps && steps->size() != n))
    return ctx.emitError("starts, ends, axes and steps must have the same "
                         "length; got starts ")
           << formatShape(*starts) << ", ends " << formatShape(*ends);
  llvm::SmallVector<int64_t> axes;
  if (axesOr) {
    auto normalized = normalizeAxes(ctx, *axesOr, rank);
    if (failed(normalized))
      return failure();
    axes = *normalized;
  } else {
    if (static_cast<int64_t>(n) > rank)
      return ctx.emitError("has ")
             << n << " starts for an input of rank " << rank;
    axes = llvm::to_vector(llvm::seq<int64_t>(0, n));
  }

  llvm::SmallVector<SliceDim> dims;
  for (int64_t d : in)
    dims.push_back({0, d, 1});
  for (size_t i = 0; i < n; ++i) {
    int64_t step = steps ? (*steps)[i] : 1;
    if (step == 0)
      return ctx.emitError("step for axis ")
             << axes[i] << " is 0; steps must be non-zero";
    dims[axes[i]] = clampSlice((*starts)[i], (*ends)[i], step, in[axes[i]]);
  }
  setSliceOutput(ctx, 0, dims);
  return success();
}

/// The sizes of Split's outputs along `dim`: given, or equal parts (the last
/// one smaller when `dim` does not divide evenly, as in opset 18).
static FailureOr<llvm::SmallVector<int64_t>> splitSizes(NodeContext &ctx,
                                                        int64_t dim) {
  auto given = readAttrOrInput(ctx, "split", 1);
  if (failed(given))
    return failure();
  int64_t outputs = ctx.getIntAttr("num_outputs", ctx.getNumOutputs());
  if (*given) {
    llvm::SmallVector<int64_t> sizes = **given;
    int64_t sum = 0;
    for (int64_t s : sizes) {
      if (s < 0)
        return ctx.emitError("split ")
               << formatShape(sizes) << " has a negative size";
      sum += s;
    }
    if (sum != dim)
      return ctx.emitError("split ") << formatShape(sizes) << " sums to " << sum
                                     << ", but the axis has size " << dim;
    if (static_cast<int64_t>(sizes.size()) != ctx.getNumOutputs())
      return ctx.emitError("split ")
             << formatShape(sizes) << " has " << sizes.size() << " sizes for "
             << ctx.getNumOutputs() << " outputs";
    return sizes;
  }
  if (outputs < 1)
    return ctx.emitError("needs at least one output");
  int64_t chunk = (dim + outputs - 1) / outputs;
  int64_t last = dim - chunk * (outputs - 1);
  if (last < 0)
    return ctx.emitError("cannot split an axis of size ")
           << dim << " into " << outputs
           << " parts (equal parts, the last one smaller); give 'split'";
  llvm::SmallVector<int64_t> sizes(outputs, chunk);
  sizes.back() = last;
  return sizes;
}

static LogicalResult convertSplit(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  if (in.empty())
    return ctx.emitError("cannot split a scalar (rank 0 input)");
  auto axis = ctx.normalizeAxis(ctx.getIntAttr("axis", 0), in.size());
  if (failed(axis))
    return failure();
  auto sizes = splitSizes(ctx, in[*axis]);
  if (failed(sizes))
    return failure();
  int64_t offset = 0;
  for (auto [i, size] : llvm::enumerate(*sizes)) {
    llvm::SmallVector<SliceDim> dims;
    for (int64_t d : in)
      dims.push_back({0, d, 1});
    dims[*axis] = {offset, size, 1};
    offset += size;
    if (ctx.hasOutput(i))
      setSliceOutput(ctx, i, dims);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Gather
//===----------------------------------------------------------------------===//

/// The slice that Gather with constant indices takes when they step evenly
/// upwards (one index, or i0, i0+s, ...); nullopt otherwise. As a strided
/// tensor.extract_slice (plus a reshape) sharding understands it, unlike a
/// data-dependent generic.
static std::optional<llvm::SmallVector<SliceDim>>
gatherAsSlice(llvm::ArrayRef<int64_t> dataShape, int64_t axis,
              llvm::ArrayRef<int64_t> indices) {
  int64_t n = indices.size();
  int64_t step = n > 1 ? indices[1] - indices[0] : 1;
  if (n == 0 || step < 1)
    return std::nullopt;
  for (int64_t i = 1; i < n; ++i)
    if (indices[i] - indices[i - 1] != step)
      return std::nullopt;
  llvm::SmallVector<SliceDim> dims;
  for (int64_t d : dataShape)
    dims.push_back({0, d, 1});
  dims[axis] = {indices[0], n, step};
  return dims;
}

/// A linalg.generic over the output that reads the index element and
/// extracts data[i_0.., index, ..i_r] (the embedding lookup).
static Value buildGather(OpBuilder &b, Location loc, Value data, Value indices,
                         int64_t axis, llvm::ArrayRef<int64_t> outShape) {
  MLIRContext *mctx = b.getContext();
  int64_t outRank = outShape.size();
  int64_t q = getShape(indices).size();
  int64_t dim = getShape(data)[axis];
  llvm::SmallVector<AffineExpr> indexExprs;
  for (int64_t i = 0; i < q; ++i)
    indexExprs.push_back(getAffineDimExpr(axis + i, mctx));
  AffineMap maps[] = {AffineMap::get(outRank, 0, indexExprs, mctx),
                      AffineMap::getMultiDimIdentityMap(outRank, mctx)};
  Value init = createEmptyTensor(b, loc, outShape, getElementTypeOf(data));
  llvm::SmallVector<utils::IteratorType> iterators(
      outRank, utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, init.getType(), indices, init, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        Value idx =
            arith::IndexCastOp::create(nb, nloc, nb.getIndexType(), args[0]);
        // Negative indices count from the back. Out-of-range indices are an
        // error in ONNX; clamping keeps a bad one from reading out of bounds.
        Value size = arith::ConstantIndexOp::create(nb, nloc, dim);
        Value zero = arith::ConstantIndexOp::create(nb, nloc, 0);
        Value isNeg = arith::CmpIOp::create(nb, nloc, arith::CmpIPredicate::slt,
                                            idx, zero);
        idx = arith::SelectOp::create(
            nb, nloc, isNeg, arith::AddIOp::create(nb, nloc, idx, size), idx);
        idx = arith::MaxSIOp::create(nb, nloc, idx, zero);
        idx = arith::MinSIOp::create(
            nb, nloc, idx,
            arith::ConstantIndexOp::create(nb, nloc,
                                           std::max<int64_t>(dim - 1, 0)));
        llvm::SmallVector<Value> coords;
        for (int64_t d = 0; d < axis; ++d)
          coords.push_back(linalg::IndexOp::create(nb, nloc, d));
        coords.push_back(idx);
        for (int64_t d = axis + q; d < outRank; ++d)
          coords.push_back(linalg::IndexOp::create(nb, nloc, d));
        Value v = tensor::ExtractOp::create(nb, nloc, data, coords);
        linalg::YieldOp::create(nb, nloc, v);
      });
  return generic.getResult(0);
}

static LogicalResult convertGather(NodeContext &ctx) {
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t rank = in.size();
  if (rank == 0)
    return ctx.emitError("data must have rank >= 1");
  auto axis = ctx.normalizeAxis(ctx.getIntAttr("axis", 0), rank);
  if (failed(axis) || failed(requireIndexDType(ctx, 1, "indices")))
    return failure();
  llvm::ArrayRef<int64_t> indicesShape = ctx.inputShape(1);
  llvm::SmallVector<int64_t> shape(in.take_front(*axis));
  shape.append(indicesShape.begin(), indicesShape.end());
  shape.append(in.begin() + *axis + 1, in.end());
  int64_t dim = in[*axis];
  OnnxDType dtype = ctx.inputDType(0);

  const ConstTensor *indices = ctx.inputConstant(1);
  llvm::SmallVector<int64_t> idx;
  if (indices) {
    for (int64_t i : indices->ints) {
      if (i < -dim || i >= dim)
        return ctx.emitError("index ")
               << i << " is out of range for axis " << *axis << " of size "
               << dim << " (valid: [" << -dim << ", " << dim - 1 << "])";
      idx.push_back(i < 0 ? i + dim : i);
    }
  }
  if (const ConstTensor *data = ctx.inputConstant(0);
      data && indices && isFoldable(shape, data->dtype)) {
    int64_t q = indicesShape.size();
    llvm::SmallVector<int64_t> srcIndex(rank);
    ctx.setOutputConstant(
        0, remapOnHost(*data, shape, [&](llvm::ArrayRef<int64_t> index) {
          for (int64_t d = 0; d < rank; ++d)
            srcIndex[d] = index[d < *axis ? d : d + q - 1];
          srcIndex[*axis] = idx[linearize(index.slice(*axis, q), indicesShape)];
          return linearize(srcIndex, in);
        }));
    return success();
  }
  if (getNumElements(shape) == 0) {
    ctx.setOutputConstant(0, ConstTensor::zeros(dtype, shape));
    return success();
  }
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  if (auto dims = indices ? gatherAsSlice(in, *axis, idx) : std::nullopt) {
    // The slice has idx.size() elements on the axis; the output has the
    // indices' shape there (no dim for a scalar index).
    Value slice = buildSlice(b, loc, ctx.input(0), *dims);
    ctx.setOutput(0, reshapeTensor(b, loc, slice, shape), dtype);
    return success();
  }
  Value result = buildGather(b, loc, ctx.input(0), ctx.input(1), *axis, shape);
  ctx.setOutput(0, result, dtype);
  return success();
}

//===----------------------------------------------------------------------===//
// ConstantOfShape, Range
//===----------------------------------------------------------------------===//

static LogicalResult convertConstantOfShape(NodeContext &ctx) {
  auto shape = readIntsInput(ctx, 0, "shape");
  if (failed(shape))
    return failure();
  if (llvm::any_of(*shape, [](int64_t d) { return d < 0; }))
    return ctx.emitError("shape ")
           << formatShape(*shape) << " has a negative dim";
  ConstTensor value = ConstTensor::zeros(onnx::TensorProto_DataType_FLOAT, {});
  if (const onnx::AttributeProto *attr = ctx.getAttr("value")) {
    std::string error;
    if (failed(readTensorProto(attr->t(), "", value, error)))
      return ctx.emitError("value ") << error;
    if (value.numElements() != 1)
      return ctx.emitError("value must hold exactly one element, got ")
             << value.numElements();
  }
  if (isFoldable(*shape, value.dtype)) {
    ConstTensor result = ConstTensor::zeros(value.dtype, *shape);
    for (int64_t i = 0, n = result.numElements(); i < n; ++i)
      copyElement(result, i, value, 0);
    ctx.setOutputConstant(0, std::move(result));
    return success();
  }
  OpBuilder &b = ctx.getBuilder();
  Type elementType = getElementType(ctx.getContext(), value.dtype);
  Value scalar =
      createScalarConstant(b, ctx.getLoc(), elementType, value.getDouble(0));
  ctx.setOutput(
      0, createFilledTensor(b, ctx.getLoc(), *shape, elementType, scalar),
      value.dtype);
  return success();
}

/// The number of elements of Range(start, limit, delta), or failure with a
/// message.
static FailureOr<int64_t> rangeLength(NodeContext &ctx,
                                      const ConstTensor &start,
                                      const ConstTensor &limit,
                                      const ConstTensor &delta) {
  int64_t n;
  if (start.isFloat()) {
    double s = start.getDouble(0), l = limit.getDouble(0),
           d = delta.getDouble(0);
    double count = std::ceil((l - s) / d);
    if (d == 0 || !std::isfinite(count))
      return ctx.emitError("delta must be non-zero and start, limit, delta "
                           "finite; got ")
             << s << ", " << l << ", " << d;
    // float32 inputs divide in float32, as the reference does.
    if (start.dtype == onnx::TensorProto_DataType_FLOAT)
      count = std::ceil(static_cast<float>(static_cast<float>(l - s) / d));
    n = count > 0 ? static_cast<int64_t>(count) : 0;
  } else {
    int64_t s = start.getInt(0), l = limit.getInt(0), d = delta.getInt(0);
    if (d == 0)
      return ctx.emitError("delta must be non-zero");
    int64_t distance;
    if (llvm::SubOverflow(d > 0 ? l : s, d > 0 ? s : l, distance))
      return ctx.emitError("the range from ")
             << s << " to " << l << " overflows int64";
    // ceil(distance / |d|) without overflow.
    n = distance > 0 ? (distance - 1) / (d > 0 ? d : -d) + 1 : 0;
  }
  if (n > std::numeric_limits<int32_t>::max())
    return ctx.emitError("the output would have ")
           << n << " elements; autopar supports at most 2^31-1";
  return n;
}

/// The most slice insertions a ScatterND computed at run time may become
/// (runs of consecutive indices each make one).
constexpr int64_t kMaxScatterRuns = 4096;

/// `held` combined with `update` by ScatterND's `reduction` (add, mul, max,
/// min) for elements of ONNX type `dtype`.
static Value combineScatter(OpBuilder &b, Location loc,
                            llvm::StringRef reduction, Value held, Value update,
                            OnnxDType dtype) {
  bool isFloat = isFloatDType(dtype);
  if (reduction == "add")
    return isFloat ? arith::AddFOp::create(b, loc, held, update).getResult()
                   : arith::AddIOp::create(b, loc, held, update).getResult();
  if (reduction == "mul")
    return isFloat ? arith::MulFOp::create(b, loc, held, update).getResult()
                   : arith::MulIOp::create(b, loc, held, update).getResult();
  if (reduction == "max")
    return maxBody(b, loc, held, update, dtype);
  return minBody(b, loc, held, update, dtype);
}

/// ScatterND whose data or updates are computed at run time (or are a
/// parameter, as the `qkv_bias[length:2 * length].zero_()` torchvision's
/// Swin Transformer V2 exports), with indices known at import time: each run
/// of indices consecutive in the last index dim replaces one block of data
/// by a tensor.insert_slice (combined first with the block's values under a
/// reduction), so the result is differentiable in data and updates (the
/// slices' adjoints) without a reduction.
static LogicalResult convertScatterNDAtRunTime(NodeContext &ctx,
                                               const ConstTensor &indices) {
  // convertScatterND checked it.
  std::string reduction = ctx.getStringAttr("reduction", "none");
  llvm::ArrayRef<int64_t> dataShape = ctx.inputShape(0),
                          indexShape = indices.shape,
                          updateShape = ctx.inputShape(2);
  if (ShapedType::isDynamicShape(dataShape) ||
      ShapedType::isDynamicShape(updateShape))
    return ctx.unsupported("data and updates must have static shapes when "
                           "they are computed at run time; give the model's "
                           "inputs static shapes (--input-shape)");
  if (indexShape.empty())
    return ctx.emitError("indices must have rank at least 1");
  int64_t k = indexShape.back(), rank = dataShape.size();
  if (k < 1 || k > rank)
    return ctx.emitError("the last dim of indices (")
           << k << ") must be between 1 and the rank of data (" << rank << ")";
  llvm::SmallVector<int64_t> expected(indexShape.drop_back());
  llvm::append_range(expected, dataShape.drop_front(k));
  if (updateShape != llvm::ArrayRef<int64_t>(expected))
    return ctx.emitError("updates have shape ")
           << formatShape(updateShape) << ", expected " << formatShape(expected)
           << " (indices.shape[:-1] + data.shape[indices.shape[-1]:])";
  if (ctx.inputDType(0) != ctx.inputDType(2))
    return ctx.emitError("data and updates have different element types (")
           << dtypeName(ctx.inputDType(0)) << " and "
           << dtypeName(ctx.inputDType(2)) << ")";

  // The index tuples, normalized, and the runs of them that name
  // consecutive slices along index dim k - 1.
  int64_t count = getNumElements(indexShape.drop_back());
  llvm::SmallVector<llvm::SmallVector<int64_t>> tuples;
  for (int64_t n = 0; n < count; ++n) {
    llvm::SmallVector<int64_t> tuple;
    for (int64_t d = 0; d < k; ++d) {
      int64_t i = indices.getInt(n * k + d);
      if (i < -dataShape[d] || i >= dataShape[d])
        return ctx.emitError("index ") << i << " is out of range for dim " << d
                                       << " of size " << dataShape[d];
      tuple.push_back(i < 0 ? i + dataShape[d] : i);
    }
    tuples.push_back(std::move(tuple));
  }
  struct Run {
    int64_t first, length;
  };
  llvm::SmallVector<Run> runs;
  for (int64_t n = 0; n < count; ++n) {
    if (!runs.empty()) {
      const auto &previous = tuples[n - 1];
      bool next = llvm::equal(llvm::ArrayRef(previous).drop_back(),
                              llvm::ArrayRef(tuples[n]).drop_back()) &&
                  tuples[n].back() == previous.back() + 1;
      if (next) {
        ++runs.back().length;
        continue;
      }
    }
    runs.push_back({n, 1});
  }
  if (int64_t(runs.size()) > kMaxScatterRuns)
    return ctx.unsupported(llvm::Twine("the indices name ") +
                           llvm::Twine(int64_t(runs.size())) +
                           " separate blocks; with data or updates computed "
                           "at run time at most " +
                           llvm::Twine(kMaxScatterRuns) + " are supported");

  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  auto attrs = [&](llvm::ArrayRef<int64_t> values) {
    llvm::SmallVector<OpFoldResult> r;
    for (int64_t v : values)
      r.push_back(b.getIndexAttr(v));
    return r;
  };
  llvm::ArrayRef<int64_t> rest = dataShape.drop_front(k);
  // Updates as [count, rest...].
  llvm::SmallVector<int64_t> rows{count};
  llvm::append_range(rows, rest);
  Value updates = reshapeTensor(b, loc, ctx.input(2), rows);
  Value result = ctx.input(0);
  OnnxDType dtype = ctx.inputDType(0);
  Type elementType = cast<RankedTensorType>(result.getType()).getElementType();
  for (const Run &run : runs) {
    // The run's rows of updates, as the block of data they replace:
    // [1, ..., 1, length, rest...].
    llvm::SmallVector<int64_t> rowOffsets(rows.size(), 0), rowSizes(rows);
    rowOffsets[0] = run.first;
    rowSizes[0] = run.length;
    Value block = updates;
    if (run.length != count)
      block = tensor::ExtractSliceOp::create(
          b, loc, updates, attrs(rowOffsets), attrs(rowSizes),
          attrs(llvm::SmallVector<int64_t>(rows.size(), 1)));
    llvm::SmallVector<int64_t> offsets(tuples[run.first]), sizes(k - 1, 1);
    offsets.append(rest.size(), 0);
    sizes.push_back(run.length);
    llvm::append_range(sizes, rest);
    block = reshapeTensor(b, loc, block, sizes);
    llvm::SmallVector<OpFoldResult> unitStrides =
        attrs(llvm::SmallVector<int64_t>(rank, 1));
    if (reduction != "none") {
      // Combined with what the block holds so far (earlier runs included:
      // repeated indices combine in order).
      Value held = tensor::ExtractSliceOp::create(
          b, loc, result, attrs(offsets), attrs(sizes), unitStrides);
      block = createElementwise(
          b, loc, {held, block}, sizes, elementType,
          [&](OpBuilder &nb, Location l, ValueRange v) -> Value {
            return combineScatter(nb, l, reduction, v[0], v[1], dtype);
          });
    }
    result = tensor::InsertSliceOp::create(
        b, loc, block, result, attrs(offsets), attrs(sizes), unitStrides);
  }
  ctx.setOutput(0, result, ctx.inputDType(0));
  return success();
}

/// ScatterND: a copy of `data` with the slices `indices` names replaced by
/// (or, with `reduction`, combined with) those of `updates`. autopar folds it
/// on the host when all three inputs are known at import time, as in the
/// attention masks torchvision's Swin Transformers build from shapes;
/// with data or updates computed at run time, the indices must be known
/// (convertScatterNDAtRunTime).
static LogicalResult convertScatterND(NodeContext &ctx) {
  const ConstTensor *data = ctx.inputConstant(0);
  const ConstTensor *updates = ctx.inputConstant(2);
  std::string reduction = ctx.getStringAttr("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" &&
      reduction != "max" && reduction != "min")
    return ctx.unsupported("reduction '" + reduction +
                           "' is not supported (supported: none, add, mul, "
                           "max, min)");
  FailureOr<const ConstTensor *> known =
      ctx.requireConstantInput(1, "indices", "which slices are replaced");
  if (failed(known))
    return failure();
  const ConstTensor *indices = *known;
  if (!data || !updates)
    return convertScatterNDAtRunTime(ctx, *indices);
  llvm::ArrayRef<int64_t> dataShape = data->shape, indexShape = indices->shape;
  if (indexShape.empty())
    return ctx.emitError("indices must have rank at least 1");
  int64_t k = indexShape.back();
  if (k < 1 || k > static_cast<int64_t>(dataShape.size()))
    return ctx.emitError("the last dim of indices (")
           << k << ") must be between 1 and the rank of data ("
           << dataShape.size() << ")";
  llvm::SmallVector<int64_t> expected(indexShape.drop_back());
  llvm::append_range(expected, dataShape.drop_front(k));
  if (llvm::ArrayRef<int64_t>(updates->shape) != llvm::ArrayRef(expected))
    return ctx.emitError("updates have shape ")
           << formatShape(updates->shape) << ", expected "
           << formatShape(expected)
           << " (indices.shape[:-1] + data.shape[indices.shape[-1]:])";
  if (updates->dtype != data->dtype)
    return ctx.emitError("data and updates have different element types (")
           << dtypeName(data->dtype) << " and " << dtypeName(updates->dtype)
           << ")";
  int64_t slice = getNumElements(dataShape.drop_front(k));
  int64_t count = getNumElements(indexShape.drop_back());
  ConstTensor result = *data;
  for (int64_t n = 0; n < count; ++n) {
    int64_t offset = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t i = indices->getInt(n * k + d);
      if (i < -dataShape[d] || i >= dataShape[d])
        return ctx.emitError("index ") << i << " is out of range for dim " << d
                                       << " of size " << dataShape[d];
      offset = offset * dataShape[d] + (i < 0 ? i + dataShape[d] : i);
    }
    for (int64_t e = 0; e < slice; ++e) {
      int64_t at = offset * slice + e, from = n * slice + e;
      if (result.isFloat()) {
        double a = result.floats[at], u = updates->floats[from];
        result.set(at, reduction == "add"   ? a + u
                       : reduction == "mul" ? a * u
                       : reduction == "max" ? std::max(a, u)
                       : reduction == "min" ? std::min(a, u)
                                            : u);
      } else {
        int64_t a = result.ints[at], u = updates->ints[from];
        result.setInt(at, reduction == "add"   ? a + u
                          : reduction == "mul" ? a * u
                          : reduction == "max" ? std::max(a, u)
                          : reduction == "min" ? std::min(a, u)
                                               : u);
      }
    }
  }
  ctx.setOutputConstant(0, std::move(result));
  return success();
}

/// Range: its length depends on the values of its inputs, so they must be
/// known at import time. Small results are host constants; longer ones
/// compute start + i * delta in a linalg.generic instead of storing them.
static LogicalResult convertRange(NodeContext &ctx) {
  const char *names[] = {"start", "limit", "delta"};
  const ConstTensor *v[3];
  for (int64_t i = 0; i < 3; ++i) {
    // The output length depends on the values: they must be known now.
    auto known = ctx.requireConstantInput(i, names[i]);
    if (failed(known))
      return failure();
    v[i] = *known;
    if (v[i]->numElements() != 1)
      return ctx.emitError(names[i])
             << " must be a scalar, got shape " << formatShape(v[i]->shape);
    if (v[i]->dtype != v[0]->dtype)
      return ctx.emitError("start, limit and delta have different element "
                           "types (")
             << dtypeName(v[0]->dtype) << " and " << dtypeName(v[i]->dtype)
             << ")";
  }
  auto n = rangeLength(ctx, *v[0], *v[1], *v[2]);
  if (failed(n))
    return failure();
  OnnxDType dtype = v[0]->dtype;
  bool single = dtype == onnx::TensorProto_DataType_FLOAT;
  if (*n <= kMaxFoldElements) {
    ConstTensor result = ConstTensor::zeros(dtype, {*n});
    for (int64_t i = 0; i < *n; ++i) {
      if (!result.isFloat())
        result.setInt(i, v[0]->getInt(0) + i * v[2]->getInt(0));
      else if (single)
        result.set(i, static_cast<float>(v[0]->getDouble(0)) +
                          static_cast<float>(i) *
                              static_cast<float>(v[2]->getDouble(0)));
      else
        result.set(i, v[0]->getDouble(0) + i * v[2]->getDouble(0));
    }
    ctx.setOutputConstant(0, std::move(result));
    return success();
  }
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  Type elementType = getElementType(ctx.getContext(), dtype);
  Value start = createScalarConstant(b, loc, elementType, v[0]->getDouble(0));
  Value delta = createScalarConstant(b, loc, elementType, v[2]->getDouble(0));
  Value result = createElementwise(
      b, loc, {}, {*n}, elementType,
      [&](OpBuilder &nb, Location nloc, ValueRange) -> Value {
        Value i = linalg::IndexOp::create(nb, nloc, 0);
        if (isFloatDType(dtype)) {
          i = arith::IndexCastOp::create(nb, nloc, nb.getI64Type(), i);
          i = arith::SIToFPOp::create(nb, nloc, elementType, i);
          Value step = arith::MulFOp::create(nb, nloc, i, delta);
          return arith::AddFOp::create(nb, nloc, start, step);
        }
        i = arith::IndexCastOp::create(nb, nloc, elementType, i);
        Value step = arith::MulIOp::create(nb, nloc, i, delta);
        return arith::AddIOp::create(nb, nloc, start, step);
      });
  ctx.setOutput(0, result, dtype);
  return success();
}

//===----------------------------------------------------------------------===//
// Pad
//===----------------------------------------------------------------------===//

/// A slice of `x` taking `size` elements from `offset` along `dim` (all of the
/// other dims).
static Value sliceAlong(OpBuilder &b, Location loc, Value x, int64_t dim,
                        int64_t offset, int64_t size) {
  llvm::SmallVector<SliceDim> dims;
  for (int64_t d : getShape(x))
    dims.push_back({0, d, 1});
  dims[dim] = {offset, size, 1};
  return buildSlice(b, loc, x, dims);
}

/// The padding Pad adds before (`low`) and after (`high`) each dim of input
/// 0; negative counts remove elements.
struct PadAmounts {
  llvm::SmallVector<int64_t> low, high;
};

/// Reads the pads (the 'paddings' attribute at opset 1, 'pads' at opsets 2 to
/// 10, input 1 with optional axes (input 3) from opset 11) into per-dim
/// amounts.
static FailureOr<PadAmounts> readPads(NodeContext &ctx) {
  int64_t rank = ctx.inputRank(0);
  llvm::SmallVector<int64_t> pads;
  llvm::SmallVector<int64_t> axes =
      llvm::to_vector(llvm::seq<int64_t>(0, rank));
  if (ctx.getOpset() >= 11) {
    auto values = readIntsInput(ctx, 1, "pads");
    if (failed(values))
      return failure();
    pads = *values;
    if (ctx.hasInput(3)) {
      auto given = readIntsInput(ctx, 3, "axes");
      if (failed(given))
        return failure();
      auto normalized = normalizeAxes(ctx, *given, rank);
      if (failed(normalized))
        return failure();
      axes = *normalized;
    }
  } else {
    llvm::StringRef name = ctx.getOpset() < 2 ? "paddings" : "pads";
    auto attr = ctx.getIntsAttr(name);
    if (!attr)
      return ctx.emitError("needs the '")
             << name << "' attribute (2 * rank pad counts) at opset "
             << ctx.getOpset();
    pads = *attr;
  }
  int64_t n = axes.size();
  if (static_cast<int64_t>(pads.size()) != 2 * n)
    return ctx.emitError("pads ")
           << formatShape(pads) << " must hold 2 * " << n
           << " counts (the starts, then the ends, of "
           << (n == rank ? "every input dim" : "the axes") << ") for shape "
           << formatShape(ctx.inputShape(0));
  PadAmounts amounts{llvm::SmallVector<int64_t>(rank, 0),
                     llvm::SmallVector<int64_t>(rank, 0)};
  for (auto [i, a] : llvm::enumerate(axes)) {
    amounts.low[a] = pads[i];
    amounts.high[a] = pads[i + n];
  }
  return amounts;
}

/// The constant Pad fills with: input 2 from opset 11 (a one-element tensor
/// of the input's type, known at import time), else the 'value' attribute;
/// 0 by default.
static FailureOr<double> readPadValue(NodeContext &ctx) {
  if (ctx.getOpset() < 11)
    return static_cast<double>(ctx.getFloatAttr("value", 0.0f));
  if (!ctx.hasInput(2))
    return 0.0;
  const ConstTensor *c = ctx.inputConstant(2);
  if (!c) {
    const onnx::NodeProto &node = ctx.getNode();
    return ctx.emitError("input 2 ('")
           << node.input(2)
           << "', the constant_value) must be known at compile time (a "
              "constant or an initializer); when it is a graph input, freeze "
              "it with --const-input "
           << node.input(2) << "=FILE.npy";
  }
  if (c->numElements() != 1)
    return ctx.emitError("constant_value must hold one element, got shape ")
           << formatShape(c->shape);
  return c->getDouble(0);
}

/// Pad (modes constant, reflect, edge and wrap). Constant padding is one
/// tensor.pad. The other modes build each padded dim from slices of the input
/// joined with one tensor.concat: reflect mirrors single elements (x[p], ...,
/// x[1] before, x[n-2], ... after), edge broadcasts the first or last element,
/// wrap takes the other end. Every piece is a slice, a broadcast or a concat,
/// so autodiff needs no rule of its own. Negative pads remove elements: an
/// extract_slice after the padding (as the ONNX reference pads, then crops).
static LogicalResult convertPad(NodeContext &ctx) {
  std::string mode = ctx.getStringAttr("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" &&
      mode != "wrap")
    return ctx.unsupported("mode '" + mode +
                           "' is not supported (supported: constant, reflect, "
                           "edge, wrap)");
  auto amounts = readPads(ctx);
  if (failed(amounts))
    return failure();
  auto value = readPadValue(ctx);
  if (failed(value))
    return failure();
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t rank = in.size();
  OnnxDType dtype = ctx.inputDType(0);
  llvm::SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t size = in[d] + amounts->low[d] + amounts->high[d];
    if (size < 0)
      return ctx.emitError("pads remove more than the ")
             << in[d] << " elements of dim " << d << " (shape "
             << formatShape(in) << ")";
    shape.push_back(size);
  }
  // Reflect, edge and wrap read the input's elements near each padded end.
  for (int64_t d = 0; d < rank && mode != "constant"; ++d) {
    int64_t most = std::max<int64_t>({amounts->low[d], amounts->high[d], 0});
    if (most == 0)
      continue;
    int64_t limit = mode == "reflect" ? in[d] - 1 : mode == "wrap" ? in[d] : -1;
    if (in[d] == 0 || (limit >= 0 && most > limit))
      return ctx.emitError(mode + " padding of ")
             << most << " on dim " << d << " needs a dim of at least "
             << (mode == "reflect" ? most + 1
                 : mode == "wrap"  ? most
                                   : 1)
             << " elements, but the input's shape is " << formatShape(in)
             << "; use mode 'constant' or smaller pads";
  }
  if (getNumElements(shape) == 0) {
    ctx.setOutputConstant(0, ConstTensor::zeros(dtype, shape));
    return success();
  }
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  Type elementType = getElementType(ctx.getContext(), dtype);
  auto fill = [&] { return createScalarConstant(b, loc, elementType, *value); };
  if (getNumElements(in) == 0) {
    // Only padding is left (constant mode: the other modes need elements).
    ctx.setOutput(0, createFilledTensor(b, loc, shape, elementType, fill()),
                  dtype);
    return success();
  }
  Value x = ctx.input(0);
  if (mode == "constant") {
    // Crop first (the same elements, fewer to pad), then pad.
    llvm::SmallVector<SliceDim> kept;
    llvm::SmallVector<OpFoldResult> low, high;
    bool pads = false;
    for (int64_t d = 0; d < rank; ++d) {
      int64_t lo = amounts->low[d], hi = amounts->high[d];
      kept.push_back(
          {std::max<int64_t>(-lo, 0),
           in[d] + std::min<int64_t>(lo, 0) + std::min<int64_t>(hi, 0), 1});
      low.push_back(b.getIndexAttr(std::max<int64_t>(lo, 0)));
      high.push_back(b.getIndexAttr(std::max<int64_t>(hi, 0)));
      pads |= lo > 0 || hi > 0;
    }
    if (llvm::any_of(kept, [](const SliceDim &k) { return k.size == 0; })) {
      // Negative pads removed every element: only padding is left.
      ctx.setOutput(0, createFilledTensor(b, loc, shape, elementType, fill()),
                    dtype);
      return success();
    }
    x = buildSlice(b, loc, x, kept);
    if (pads)
      x = tensor::PadOp::create(b, loc,
                                RankedTensorType::get(shape, elementType), x,
                                low, high, fill());
    ctx.setOutput(0, x, dtype);
    return success();
  }
  llvm::SmallVector<SliceDim> kept;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t lo = std::max<int64_t>(amounts->low[d], 0);
    int64_t hi = std::max<int64_t>(amounts->high[d], 0);
    int64_t n = in[d];
    if (lo > 0 || hi > 0) {
      llvm::SmallVector<Value> pieces;
      auto edge = [&](int64_t at, int64_t count) {
        Value one = sliceAlong(b, loc, x, d, at, 1);
        llvm::SmallVector<int64_t> target(getShape(one));
        target[d] = count;
        return count == 1 ? one : broadcastTo(b, loc, one, target);
      };
      if (lo > 0) {
        if (mode == "reflect")
          for (int64_t k = lo; k >= 1; --k)
            pieces.push_back(sliceAlong(b, loc, x, d, k, 1));
        else if (mode == "edge")
          pieces.push_back(edge(0, lo));
        else
          pieces.push_back(sliceAlong(b, loc, x, d, n - lo, lo));
      }
      pieces.push_back(x);
      if (hi > 0) {
        if (mode == "reflect")
          for (int64_t k = n - 2; k >= n - 1 - hi; --k)
            pieces.push_back(sliceAlong(b, loc, x, d, k, 1));
        else if (mode == "edge")
          pieces.push_back(edge(n - 1, hi));
        else
          pieces.push_back(sliceAlong(b, loc, x, d, 0, hi));
      }
      x = tensor::ConcatOp::create(b, loc, d, pieces).getResult();
    }
    kept.push_back({std::max<int64_t>(-amounts->low[d], 0), shape[d], 1});
  }
  ctx.setOutput(0, buildSlice(b, loc, x, kept), dtype);
  return success();
}

//===----------------------------------------------------------------------===//
// DepthToSpace, SpaceToDepth
//===----------------------------------------------------------------------===//

/// Reads and checks the 'blocksize' attribute and the [N, C, H, W] input.
static FailureOr<int64_t> readBlockSize(NodeContext &ctx) {
  auto blocksize = ctx.getOptionalIntAttr("blocksize");
  if (!blocksize)
    return ctx.emitError("needs the 'blocksize' attribute");
  if (*blocksize <= 0)
    return ctx.emitError("blocksize must be positive, got ") << *blocksize;
  if (ctx.inputRank(0) != 4)
    return ctx.emitError("input must have rank 4 ([N, C, H, W]), got shape ")
           << formatShape(ctx.inputShape(0));
  return *blocksize;
}

/// DepthToSpace moves blocks of b * b channels into b x b spatial blocks. DCR
/// (the default) orders the channels depth-column-row: reshape to [N, b, b,
/// C/b², H, W], permute to [N, C/b², H, b, W, b]; CRD orders them
/// column-row-depth: reshape to [N, C/b², b, b, H, W], same target order.
static LogicalResult convertDepthToSpace(NodeContext &ctx) {
  auto blocksize = readBlockSize(ctx);
  if (failed(blocksize))
    return failure();
  std::string mode = ctx.getStringAttr("mode", "DCR");
  if (mode != "DCR" && mode != "CRD")
    return ctx.unsupported("mode '" + mode +
                           "' is not supported (supported: DCR, CRD)");
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t bs = *blocksize, n = in[0], c = in[1], h = in[2], w = in[3];
  if (c % (bs * bs) != 0)
    return ctx.emitError("the ")
           << c << " channels of shape " << formatShape(in)
           << " are not a multiple of blocksize * blocksize = " << bs * bs;
  int64_t depth = c / (bs * bs);
  llvm::SmallVector<int64_t> shape = {n, depth, h * bs, w * bs};
  OnnxDType dtype = ctx.inputDType(0);
  if (getNumElements(shape) == 0) {
    ctx.setOutputConstant(0, ConstTensor::zeros(dtype, shape));
    return success();
  }
  llvm::SmallVector<int64_t> split, perm;
  if (mode == "DCR") {
    split = {n, bs, bs, depth, h, w};
    perm = {0, 3, 4, 1, 5, 2};
  } else {
    split = {n, depth, bs, bs, h, w};
    perm = {0, 1, 4, 2, 5, 3};
  }
  ctx.setOutput(0,
                reshapeTransposeReshape(ctx.getBuilder(), ctx.getLoc(),
                                        ctx.input(0), split, perm, shape),
                dtype);
  return success();
}

/// SpaceToDepth, the inverse of DepthToSpace in DCR order: reshape to [N, C,
/// H/b, b, W/b, b], permute to [N, b, b, C, H/b, W/b], merge the channels.
static LogicalResult convertSpaceToDepth(NodeContext &ctx) {
  auto blocksize = readBlockSize(ctx);
  if (failed(blocksize))
    return failure();
  llvm::ArrayRef<int64_t> in = ctx.inputShape(0);
  int64_t bs = *blocksize, n = in[0], c = in[1], h = in[2], w = in[3];
  if (h % bs != 0 || w % bs != 0)
    return ctx.emitError("the spatial dims of shape ")
           << formatShape(in) << " are not multiples of blocksize " << bs;
  llvm::SmallVector<int64_t> shape = {n, c * bs * bs, h / bs, w / bs};
  OnnxDType dtype = ctx.inputDType(0);
  if (getNumElements(shape) == 0) {
    ctx.setOutputConstant(0, ConstTensor::zeros(dtype, shape));
    return success();
  }
  ctx.setOutput(0,
                reshapeTransposeReshape(
                    ctx.getBuilder(), ctx.getLoc(), ctx.input(0),
                    {n, c, h / bs, bs, w / bs, bs}, {0, 3, 5, 1, 2, 4}, shape),
                dtype);
  return success();
}

} // namespace

void registerShapeConverters(ConverterRegistry &r) {
  r["Shape"] = convertShape;
  r["Reshape"] = convertReshape;
  r["Flatten"] = convertFlatten;
  r["Squeeze"] = convertSqueeze;
  r["Unsqueeze"] = convertUnsqueeze;
  r["Transpose"] = convertTranspose;
  r["Concat"] = convertConcat;
  r["Slice"] = convertSlice;
  r["Split"] = convertSplit;
  r["Expand"] = convertExpand;
  r["Tile"] = convertTile;
  r["Pad"] = convertPad;
  r["DepthToSpace"] = convertDepthToSpace;
  r["SpaceToDepth"] = convertSpaceToDepth;
  r["Gather"] = convertGather;
  r["ScatterND"] = convertScatterND;
  r["ConstantOfShape"] = convertConstantOfShape;
  r["Range"] = convertRange;
  r["Trilu"] = convertTrilu;
}

} // namespace autopar::import
