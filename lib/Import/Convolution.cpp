//===- Convolution.cpp - Conv and pooling to linalg -----------------------===//
//
// Conv pads its input with `tensor.pad` and becomes a named convolution:
// `linalg.conv_2d_nchw_fchw`, or `linalg.conv_2d_ngchw_gfchw` over the input
// and filter reshaped to expose the groups (the two ops the CPU backend hands
// to BLAS-backed kernels); 1-D convolutions run as 2-D ones with H = 1;
// 3-D ones use `linalg.conv_3d_ncdhw_fcdhw`, or a `linalg.generic` when
// grouped. MaxPool and AveragePool are windowed reductions: a
// `linalg.generic` over the padded input and a dummy window tensor, as
// linalg's pooling ops do, for any number of spatial dims.
//
// The input is padded (or sliced) to exactly the extent the windows read, so
// every operand shape is tight.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "mlir/IR/AffineMap.h"

using namespace mlir;
namespace autopar::import {
namespace {

//===----------------------------------------------------------------------===//
// Window geometry
//===----------------------------------------------------------------------===//

/// Where the windows of a convolution or pooling op lie along each spatial
/// dim. Pads are the ONNX ones (explicit or from auto_pad).
struct Window {
  llvm::SmallVector<int64_t> input, kernel, strides, dilations, padBegin,
      padEnd, output;

  int64_t numDims() const { return input.size(); }
  /// The span of one window, dilation included.
  int64_t extent(int64_t i) const { return (kernel[i] - 1) * dilations[i] + 1; }
  /// The padded size that the windows read exactly.
  int64_t readSize(int64_t i) const {
    return (output[i] - 1) * strides[i] + extent(i);
  }
};

/// Reads an ints attribute with one value per spatial dim (`count` values),
/// `defaultValue` everywhere when absent; values must be >= `minValue`.
FailureOr<llvm::SmallVector<int64_t>>
readPerDimAttr(NodeContext &ctx, llvm::StringRef name, int64_t count,
               int64_t defaultValue, int64_t minValue) {
  auto values = ctx.getIntsAttr(name);
  if (!values)
    return llvm::SmallVector<int64_t>(count, defaultValue);
  if (static_cast<int64_t>(values->size()) != count)
    return ctx.emitError("attribute '")
           << name << "' has " << values->size() << " values; expected "
           << count << " for an input with " << ctx.inputRank(0) - 2
           << " spatial dims";
  for (int64_t v : *values)
    if (v < minValue)
      return ctx.emitError("attribute '") << name << "' has value " << v
                                          << "; values must be >= " << minValue;
  return *values;
}

/// Output size for explicit pads; ceil_mode rounds up but drops a last window
/// that would start in the end padding (ONNX and PyTorch agree on this).
int64_t explicitPadOutput(const Window &w, int64_t i, bool ceilMode) {
  int64_t span = w.input[i] + w.padBegin[i] + w.padEnd[i] - w.extent(i);
  if (!ceilMode)
    return span / w.strides[i] + 1;
  int64_t out = (span + w.strides[i] - 1) / w.strides[i] + 1;
  if ((out - 1) * w.strides[i] >= w.input[i] + w.padBegin[i])
    --out;
  return out;
}

/// Resolves strides, dilations, pads/auto_pad and the output size for an
/// input of spatial sizes `input` and a window of `kernel`.
FailureOr<Window> computeWindow(NodeContext &ctx, llvm::ArrayRef<int64_t> input,
                                llvm::ArrayRef<int64_t> kernel, bool ceilMode) {
  Window w;
  int64_t n = input.size();
  w.input.assign(input.begin(), input.end());
  w.kernel.assign(kernel.begin(), kernel.end());
  auto strides = readPerDimAttr(ctx, "strides", n, 1, 1);
  auto dilations = readPerDimAttr(ctx, "dilations", n, 1, 1);
  if (failed(strides) || failed(dilations))
    return failure();
  w.strides = *strides;
  w.dilations = *dilations;
  std::string autoPad = ctx.getStringAttr("auto_pad", "NOTSET");
  w.padBegin.assign(n, 0);
  w.padEnd.assign(n, 0);
  w.output.assign(n, 0);
  if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (int64_t i = 0; i < n; ++i) {
      w.output[i] = (input[i] + w.strides[i] - 1) / w.strides[i];
      int64_t total = std::max<int64_t>(0, (w.output[i] - 1) * w.strides[i] +
                                               w.extent(i) - input[i]);
      // SAME_UPPER puts the odd padding at the end, SAME_LOWER at the start.
      w.padBegin[i] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.padEnd[i] = total - w.padBegin[i];
    }
    return w;
  }
  if (autoPad == "NOTSET" || autoPad.empty()) {
    auto pads = readPerDimAttr(ctx, "pads", 2 * n, 0, 0);
    if (failed(pads))
      return failure();
    w.padBegin.assign(pads->begin(), pads->begin() + n);
    w.padEnd.assign(pads->begin() + n, pads->end());
  } else if (autoPad != "VALID") {
    return ctx.emitError("auto_pad '")
           << autoPad
           << "' is not supported (supported: NOTSET, SAME_UPPER, SAME_LOWER, "
              "VALID)";
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t padded = input[i] + w.padBegin[i] + w.padEnd[i];
    if (padded < w.extent(i))
      return ctx.emitError("the window along spatial dim ")
             << i << " spans " << w.extent(i) << " (kernel " << kernel[i]
             << ", dilation " << w.dilations[i]
             << "), more than the padded input size " << padded;
    w.output[i] = explicitPadOutput(w, i, ceilMode && autoPad != "VALID");
  }
  return w;
}

/// Slices and pads the spatial dims of `x` (N, C, spatial...) to exactly what
/// the windows read: dim i becomes [-padBegin, readSize - padBegin) of the
/// input, reading `padValue()` outside it.
Value padToWindows(OpBuilder &b, Location loc, Value x, const Window &w,
                   llvm::function_ref<Value()> padValue) {
  llvm::SmallVector<int64_t> shape(getShape(x));
  llvm::SmallVector<int64_t> low(shape.size(), 0), high(shape.size(), 0),
      kept(shape);
  bool slice = false, pad = false;
  for (int64_t i = 0; i < w.numDims(); ++i) {
    int64_t need = w.readSize(i);
    int64_t lo = std::min(w.padBegin[i], need);
    int64_t keep = std::min(w.input[i], need - lo);
    low[i + 2] = lo;
    high[i + 2] = need - lo - keep;
    kept[i + 2] = keep;
    slice |= keep != w.input[i];
    pad |= lo != 0 || high[i + 2] != 0;
  }
  auto index = [&](llvm::ArrayRef<int64_t> values) {
    llvm::SmallVector<OpFoldResult> r;
    for (int64_t v : values)
      r.push_back(b.getIndexAttr(v));
    return r;
  };
  if (slice) {
    llvm::SmallVector<int64_t> zeros(shape.size(), 0), ones(shape.size(), 1);
    x = tensor::ExtractSliceOp::create(b, loc, x, index(zeros), index(kept),
                                       index(ones));
  }
  if (!pad)
    return x;
  llvm::SmallVector<int64_t> padded(kept);
  for (size_t i = 0; i < padded.size(); ++i)
    padded[i] += low[i] + high[i];
  auto type = RankedTensorType::get(padded, getElementTypeOf(x));
  return tensor::PadOp::create(b, loc, type, x, index(low), index(high),
                               padValue());
}

/// Reads `kernel_shape` when given and checks it against `expected` (the
/// filter's spatial dims) when that is known.
FailureOr<llvm::SmallVector<int64_t>>
readKernelShape(NodeContext &ctx, int64_t numDims,
                std::optional<llvm::ArrayRef<int64_t>> expected) {
  auto attr = ctx.getIntsAttr("kernel_shape");
  if (!attr) {
    if (expected)
      return llvm::SmallVector<int64_t>(*expected);
    return ctx.emitError("is missing its required 'kernel_shape' attribute");
  }
  auto kernel = readPerDimAttr(ctx, "kernel_shape", numDims, 1, 1);
  if (failed(kernel))
    return failure();
  if (expected && llvm::ArrayRef<int64_t>(*kernel) != *expected) {
    auto diag = ctx.emitError("kernel_shape [");
    llvm::interleaveComma(*kernel, diag);
    diag << "] differs from the filter's spatial dims [";
    llvm::interleaveComma(*expected, diag);
    return diag << "]";
  }
  return kernel;
}

/// N, C followed by the output spatial sizes.
llvm::SmallVector<int64_t> outputShape(int64_t n, int64_t c, const Window &w) {
  llvm::SmallVector<int64_t> shape{n, c};
  shape.append(w.output.begin(), w.output.end());
  return shape;
}

Value zerosLike(OpBuilder &b, Location loc, llvm::ArrayRef<int64_t> shape,
                Type et) {
  return createFilledTensor(b, loc, shape, et,
                            createScalarConstant(b, loc, et, 0.0));
}

/// Reshapes with explicit reassociation groups (expand or collapse).
Value regroup(OpBuilder &b, Location loc, Value v,
              llvm::ArrayRef<int64_t> shape,
              llvm::ArrayRef<ReassociationIndices> groups) {
  auto type = RankedTensorType::get(shape, getElementTypeOf(v));
  if (type.getRank() > cast<RankedTensorType>(v.getType()).getRank())
    return tensor::ExpandShapeOp::create(b, loc, type, v, groups);
  return tensor::CollapseShapeOp::create(b, loc, type, v, groups);
}

//===----------------------------------------------------------------------===//
// Conv
//===----------------------------------------------------------------------===//

llvm::SmallVector<NamedAttribute> convAttrs(OpBuilder &b,
                                            llvm::ArrayRef<int64_t> strides,
                                            llvm::ArrayRef<int64_t> dilations) {
  return {b.getNamedAttr("strides", b.getI64TensorAttr(strides)),
          b.getNamedAttr("dilations", b.getI64TensorAttr(dilations))};
}

/// 2-D convolution of the padded input `x` (N, C, H, W) with `w`
/// (F, C/G, KH, KW): conv_2d_nchw_fchw, or conv_2d_ngchw_gfchw when grouped.
Value conv2d(OpBuilder &b, Location loc, Value x, Value w, int64_t group,
             llvm::ArrayRef<int64_t> strides, llvm::ArrayRef<int64_t> dilations,
             llvm::ArrayRef<int64_t> outShape) {
  Type et = getElementTypeOf(x);
  auto attrs = convAttrs(b, strides, dilations);
  if (group == 1) {
    Value init = zerosLike(b, loc, outShape, et);
    return linalg::Conv2DNchwFchwOp::create(b, loc, init.getType(),
                                            ValueRange{x, w}, ValueRange{init},
                                            attrs)
        .getResult(0);
  }
  llvm::ArrayRef<int64_t> xs = getShape(x), ws = getShape(w);
  int64_t n = xs[0], c = xs[1], f = ws[0];
  Value xg = regroup(b, loc, x, {n, group, c / group, xs[2], xs[3]},
                     {{0}, {1, 2}, {3}, {4}});
  Value wg = regroup(b, loc, w, {group, f / group, ws[1], ws[2], ws[3]},
                     {{0, 1}, {2}, {3}, {4}});
  Value init =
      zerosLike(b, loc, {n, group, f / group, outShape[2], outShape[3]}, et);
  Value y = linalg::Conv2DNgchwGfchwOp::create(b, loc, init.getType(),
                                               ValueRange{xg, wg},
                                               ValueRange{init}, attrs)
                .getResult(0);
  return regroup(b, loc, y, outShape, {{0}, {1, 2}, {3}, {4}});
}

/// Grouped convolution with any number of spatial dims as a linalg.generic
/// over (n, g, f, o..., c, k...).
Value convGeneric(OpBuilder &b, Location loc, Value x, Value w, int64_t group,
                  const Window &win, llvm::ArrayRef<int64_t> outShape) {
  MLIRContext *ctx = b.getContext();
  Type et = getElementTypeOf(x);
  int64_t s = win.numDims();
  llvm::ArrayRef<int64_t> xs = getShape(x), ws = getShape(w);
  int64_t n = xs[0], c = xs[1], f = ws[0], cg = c / group, fg = f / group;

  llvm::SmallVector<int64_t> xgShape{n, group, cg}, wgShape{group, fg, cg},
      ygShape{n, group, fg};
  xgShape.append(xs.begin() + 2, xs.end());
  wgShape.append(ws.begin() + 2, ws.end());
  ygShape.append(outShape.begin() + 2, outShape.end());
  auto groups = [&](ReassociationIndices split, int64_t rank) {
    llvm::SmallVector<ReassociationIndices> r;
    int64_t next = 0;
    while (next < rank) {
      if (llvm::is_contained(split, next)) {
        r.push_back({next, next + 1});
        next += 2;
      } else {
        r.push_back({next++});
      }
    }
    return r;
  };
  Value xg = regroup(b, loc, x, xgShape, groups({1}, 3 + s));
  Value wg = regroup(b, loc, w, wgShape, groups({0}, 3 + s));

  // Loops: n, g, f, o_0..o_{s-1}, c, k_0..k_{s-1}.
  int64_t numLoops = 4 + 2 * s;
  auto d = [&](int64_t i) { return getAffineDimExpr(i, ctx); };
  llvm::SmallVector<AffineExpr> xExprs{d(0), d(1), d(3 + s)},
      wExprs{d(1), d(2), d(3 + s)}, yExprs{d(0), d(1), d(2)};
  for (int64_t i = 0; i < s; ++i) {
    xExprs.push_back(d(3 + i) * win.strides[i] +
                     d(4 + s + i) * win.dilations[i]);
    wExprs.push_back(d(4 + s + i));
    yExprs.push_back(d(3 + i));
  }
  llvm::SmallVector<AffineMap> maps{AffineMap::get(numLoops, 0, xExprs, ctx),
                                    AffineMap::get(numLoops, 0, wExprs, ctx),
                                    AffineMap::get(numLoops, 0, yExprs, ctx)};
  llvm::SmallVector<utils::IteratorType> iterators(
      3 + s, utils::IteratorType::parallel);
  iterators.append(1 + s, utils::IteratorType::reduction);
  Value init = zerosLike(b, loc, ygShape, et);
  Value y = linalg::GenericOp::create(
                b, loc, init.getType(), ValueRange{xg, wg}, ValueRange{init},
                maps, iterators,
                [](OpBuilder &nb, Location l, ValueRange a) {
                  Value p = arith::MulFOp::create(nb, l, a[0], a[1]);
                  linalg::YieldOp::create(
                      nb, l, Value(arith::AddFOp::create(nb, l, a[2], p)));
                })
                .getResult(0);
  return regroup(b, loc, y, outShape, groups({1}, 3 + s));
}

/// Checks Conv's operand shapes: X (N, C, spatial...), W (F, C/group, k...),
/// optional B (F).
LogicalResult checkConvShapes(NodeContext &ctx, int64_t group) {
  llvm::ArrayRef<int64_t> xs = ctx.inputShape(0), ws = ctx.inputShape(1);
  if (xs.size() < 3)
    return ctx.emitError("X must have rank >= 3 (N, C, spatial...), got rank ")
           << xs.size();
  if (ws.size() != xs.size())
    return ctx.emitError("W has rank ")
           << ws.size() << "; expected " << xs.size() << " like X";
  if (group < 1 || xs[1] % group != 0 || ws[0] % group != 0)
    return ctx.emitError("group ")
           << group << " must be >= 1 and divide both the input channels ("
           << xs[1] << ") and the output channels (" << ws[0] << ")";
  if (ws[1] * group != xs[1])
    return ctx.emitError("W has ")
           << ws[1] << " input channels per group; X has " << xs[1]
           << " channels in " << group << " groups (expected " << xs[1] / group
           << ")";
  if (ctx.hasInput(2) && ctx.inputShape(2) != llvm::ArrayRef<int64_t>{ws[0]})
    return ctx.emitError("B must have shape [") << ws[0] << "]";
  return success();
}

Value convolve(OpBuilder &b, Location loc, Value x, Value w, int64_t group,
               const Window &win, llvm::ArrayRef<int64_t> outShape);
Value addChannelBias(OpBuilder &b, Location loc, Value y, Value bias,
                     llvm::ArrayRef<int64_t> outShape);

/// Conv: pads, then dispatches on the number of spatial dims.
LogicalResult convertConv(NodeContext &ctx) {
  OnnxDType t = ctx.inputDType(0);
  if (!isFloatDType(t))
    return ctx.unsupported("element type " + dtypeName(t) +
                           " is not supported (Conv takes floating-point "
                           "types)");
  if (ctx.inputDType(1) != t || (ctx.hasInput(2) && ctx.inputDType(2) != t))
    return ctx.emitError("X, W and B must have the same element type");
  int64_t group = ctx.getIntAttr("group", 1);
  if (failed(checkConvShapes(ctx, group)))
    return failure();
  llvm::ArrayRef<int64_t> xs = ctx.inputShape(0), ws = ctx.inputShape(1);
  int64_t numDims = xs.size() - 2;
  auto kernel = readKernelShape(ctx, numDims, ws.drop_front(2));
  if (failed(kernel))
    return failure();
  auto win = computeWindow(ctx, xs.drop_front(2), *kernel, /*ceilMode=*/false);
  if (failed(win))
    return failure();

  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  Type et = getElementType(ctx.getContext(), t);
  Value x = padToWindows(b, loc, ctx.input(0), *win,
                         [&] { return createScalarConstant(b, loc, et, 0.0); });
  llvm::SmallVector<int64_t> outShape = outputShape(xs[0], ws[0], *win);
  Value y = convolve(b, loc, x, ctx.input(1), group, *win, outShape);
  if (ctx.hasInput(2))
    y = addChannelBias(b, loc, y, ctx.input(2), outShape);
  ctx.setOutput(0, y, t);
  return success();
}

/// The convolution of the padded input `x` (N, C, spatial...) with `w`
/// (F, C/group, k...) over `win`'s windows, by the number of spatial dims:
/// linalg's named 1-D (as 2-D), 2-D and 3-D ops, else a generic.
Value convolve(OpBuilder &b, Location loc, Value x, Value w, int64_t group,
               const Window &win, llvm::ArrayRef<int64_t> outShape) {
  int64_t numDims = win.numDims();
  llvm::ArrayRef<int64_t> ws = getShape(w);
  Type et = getElementTypeOf(x);
  const Window *winPtr = &win;
  Value y;
  if (numDims == 1) {
    // A 1-D convolution is a 2-D one with H = 1.
    llvm::SmallVector<ReassociationIndices> groups{{0}, {1}, {2, 3}};
    llvm::ArrayRef<int64_t> px = getShape(x);
    Value x4 = regroup(b, loc, x, {px[0], px[1], 1, px[2]}, groups);
    Value w4 = regroup(b, loc, w, {ws[0], ws[1], 1, ws[2]}, groups);
    Value y4 = conv2d(b, loc, x4, w4, group, {1, winPtr->strides[0]},
                      {1, winPtr->dilations[0]},
                      {outShape[0], outShape[1], 1, outShape[2]});
    y = regroup(b, loc, y4, outShape, groups);
  } else if (numDims == 2) {
    y = conv2d(b, loc, x, w, group, winPtr->strides, winPtr->dilations,
               outShape);
  } else if (numDims == 3 && group == 1) {
    Value init = zerosLike(b, loc, outShape, et);
    y = linalg::Conv3DNcdhwFcdhwOp::create(
            b, loc, init.getType(), ValueRange{x, w}, ValueRange{init},
            convAttrs(b, winPtr->strides, winPtr->dilations))
            .getResult(0);
  } else {
    y = convGeneric(b, loc, x, w, group, win, outShape);
  }
  return y;
}

/// y + bias, bias (F) reshaped to [F, 1, ..., 1] so that broadcasting
/// aligns it with dim 1.
Value addChannelBias(OpBuilder &b, Location loc, Value y, Value bias,
                     llvm::ArrayRef<int64_t> outShape) {
  llvm::SmallVector<int64_t> biasShape(outShape.size() - 1, 1);
  biasShape[0] = outShape[1];
  Value reshaped = reshapeTensor(b, loc, bias, biasShape);
  return createElementwise(
      b, loc, {y, reshaped}, outShape, getElementTypeOf(y),
      [](OpBuilder &nb, Location l, ValueRange a) -> Value {
        return arith::AddFOp::create(nb, l, a[0], a[1]);
      });
}

//===----------------------------------------------------------------------===//
// ConvTranspose
//===----------------------------------------------------------------------===//

/// ConvTranspose as the convolution it is the transpose of: X's elements
/// spread `strides` apart (zeros between), padded by d(k-1) - pads (minus
/// pads: cropped) plus output_padding at the end, convolved with stride 1
/// and the filter flipped along every spatial dim with its two channel
/// dims swapped per group (W is C x F/group x k...).
LogicalResult convertConvTranspose(NodeContext &ctx) {
  OnnxDType t = ctx.inputDType(0);
  if (!isFloatDType(t))
    return ctx.unsupported("element type " + dtypeName(t) +
                           " is not supported (ConvTranspose takes "
                           "floating-point types)");
  if (ctx.inputDType(1) != t || (ctx.hasInput(2) && ctx.inputDType(2) != t))
    return ctx.emitError("X, W and B must have the same element type");
  llvm::ArrayRef<int64_t> xs = ctx.inputShape(0), ws = ctx.inputShape(1);
  if (xs.size() < 3 || ws.size() != xs.size())
    return ctx.emitError("X must have rank >= 3 (N, C, spatial...) and W the "
                         "same rank; got ranks ")
           << xs.size() << " and " << ws.size();
  int64_t group = ctx.getIntAttr("group", 1);
  if (group < 1 || xs[1] != ws[0] || ws[0] % group != 0)
    return ctx.emitError("W has ")
           << ws[0] << " input channels, X has " << xs[1] << " (group " << group
           << " must divide them)";
  int64_t n = xs.size() - 2, f = ws[1] * group;
  if (ctx.hasInput(2) && ctx.inputShape(2) != llvm::ArrayRef<int64_t>{f})
    return ctx.emitError("B must have shape [") << f << "]";
  auto kernel = readKernelShape(ctx, n, ws.drop_front(2));
  auto strides = readPerDimAttr(ctx, "strides", n, 1, 1);
  auto dilations = readPerDimAttr(ctx, "dilations", n, 1, 1);
  auto outputPadding = readPerDimAttr(ctx, "output_padding", n, 0, 0);
  if (failed(kernel) || failed(strides) || failed(dilations) ||
      failed(outputPadding))
    return failure();
  llvm::SmallVector<int64_t> padBegin(n, 0), padEnd(n, 0), out(n, 0);
  std::string autoPad = ctx.getStringAttr("auto_pad", "NOTSET");
  std::optional<llvm::SmallVector<int64_t>> outputShape;
  if (ctx.getIntsAttr("output_shape")) {
    auto given = readPerDimAttr(ctx, "output_shape", n, 1, 1);
    if (failed(given))
      return failure();
    outputShape = *given;
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    outputShape.emplace();
    for (int64_t i = 0; i < n; ++i)
      outputShape->push_back(xs[i + 2] * (*strides)[i]);
  }
  for (int64_t i = 0; i < n; ++i) {
    int64_t extent = ((*kernel)[i] - 1) * (*dilations)[i] + 1;
    int64_t full =
        (*strides)[i] * (xs[i + 2] - 1) + (*outputPadding)[i] + extent;
    if (outputShape) {
      // The spec's rule for pads derived from output_shape; an output larger
      // than the transposed windows reach is padded at the end (as
      // output_padding), as the reference implementation does.
      int64_t total = full - (*outputShape)[i];
      padBegin[i] = total < 0                 ? 0
                    : autoPad == "SAME_UPPER" ? total / 2
                                              : total - total / 2;
      padEnd[i] = total - padBegin[i];
    } else if (autoPad == "NOTSET" || autoPad.empty()) {
      auto pads = readPerDimAttr(ctx, "pads", 2 * n, 0, 0);
      if (failed(pads))
        return failure();
      padBegin[i] = (*pads)[i];
      padEnd[i] = (*pads)[i + n];
    } else if (autoPad != "VALID") {
      return ctx.emitError("auto_pad '")
             << autoPad
             << "' is not supported (supported: NOTSET, SAME_UPPER, "
                "SAME_LOWER, VALID)";
    }
    out[i] = full - padBegin[i] - padEnd[i];
    if (out[i] < 1)
      return ctx.emitError("the output along spatial dim ")
             << i << " would have size " << out[i]
             << " (pads larger than the transposed window)";
  }

  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  Type et = getElementType(ctx.getContext(), t);
  auto index = [&](llvm::ArrayRef<int64_t> values) {
    llvm::SmallVector<OpFoldResult> r;
    for (int64_t v : values)
      r.push_back(b.getIndexAttr(v));
    return r;
  };
  // X spread out and padded: element j of X lands at j * stride + lo, lo =
  // d(k-1) - padBegin; the elements that land outside are cropped.
  llvm::SmallVector<int64_t> spreadShape{xs[0], xs[1]}, first(n + 2, 0),
      count(xs.begin(), xs.end()), at(n + 2, 0), step(n + 2, 1), unit(n + 2, 1);
  for (int64_t i = 0; i < n; ++i) {
    int64_t s = (*strides)[i];
    int64_t lo = ((*kernel)[i] - 1) * (*dilations)[i] - padBegin[i];
    int64_t size = out[i] + ((*kernel)[i] - 1) * (*dilations)[i];
    spreadShape.push_back(size);
    int64_t j0 = lo >= 0 ? 0 : (-lo + s - 1) / s;
    int64_t j1 =
        size - 1 - lo < 0 ? -1 : std::min(xs[i + 2] - 1, (size - 1 - lo) / s);
    if (j1 < j0)
      return ctx.emitError("no input element reaches the output along spatial "
                           "dim ")
             << i;
    first[i + 2] = j0;
    count[i + 2] = j1 - j0 + 1;
    at[i + 2] = j0 * s + lo;
    step[i + 2] = s;
  }
  Value x = ctx.input(0);
  if (llvm::ArrayRef<int64_t>(count) != xs)
    x = tensor::ExtractSliceOp::create(b, loc, x, index(first), index(count),
                                       index(unit));
  Value spread = tensor::InsertSliceOp::create(
      b, loc, x, zerosLike(b, loc, spreadShape, et), index(at), index(count),
      index(step));

  // The filter as a convolution's: F x C/group x k..., flipped. Built from
  // ops with gradients (a reshaping transpose, and per spatial dim a
  // contraction with the K x K anti-identity), so that training reaches W.
  int64_t cg = ws[0] / group, fg = ws[1];
  // C x F/g x k -> g x C/g x F/g x k -> g x F/g x C/g x k -> F x C/g x k.
  llvm::SmallVector<int64_t> split{group, cg, fg}, perm{0, 2, 1},
      filterShape{f, cg};
  split.append(kernel->begin(), kernel->end());
  filterShape.append(kernel->begin(), kernel->end());
  for (int64_t i = 0; i < n; ++i)
    perm.push_back(3 + i);
  Value filter =
      reshapeTransposeReshape(b, loc, ctx.input(1), split, perm, filterShape);
  for (int64_t i = 0; i < n; ++i) {
    int64_t k = (*kernel)[i];
    llvm::SmallVector<float> reverse(k * k, 0.0f);
    for (int64_t r = 0; r < k; ++r)
      reverse[r * k + (k - 1 - r)] = 1.0f;
    if (k > 1)
      filter = contractAlongDim(b, loc, filter, 2 + i, reverse, k, t);
  }

  Window win;
  win.input.assign(spreadShape.begin() + 2, spreadShape.end());
  win.kernel = *kernel;
  win.strides.assign(n, 1);
  win.dilations = *dilations;
  win.padBegin.assign(n, 0);
  win.padEnd.assign(n, 0);
  win.output = out;
  llvm::SmallVector<int64_t> outShape{xs[0], f};
  outShape.append(out.begin(), out.end());
  Value y = convolve(b, loc, spread, filter, group, win, outShape);
  if (ctx.hasInput(2))
    y = addChannelBias(b, loc, y, ctx.input(2), outShape);
  ctx.setOutput(0, y, t);
  return success();
}

//===----------------------------------------------------------------------===//
// MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool
//===----------------------------------------------------------------------===//

Value maxOf(OpBuilder &b, Location loc, Value x, Value y, bool isUnsigned) {
  if (isa<FloatType>(x.getType()))
    return arith::MaximumFOp::create(b, loc, x, y);
  if (isUnsigned)
    return arith::MaxUIOp::create(b, loc, x, y);
  return arith::MaxSIOp::create(b, loc, x, y);
}

/// Max or sum over every window of the padded input `x`: a linalg.generic
/// over (n, c, o..., k...) reading x at o * stride + k * dilation, with a
/// dummy window tensor that gives the k loops their extent.
Value windowReduce(OpBuilder &b, Location loc, Value x, const Window &win,
                   bool isMax, bool isUnsigned) {
  MLIRContext *ctx = b.getContext();
  Type et = getElementTypeOf(x);
  int64_t s = win.numDims();
  int64_t numLoops = 2 + 2 * s;
  auto d = [&](int64_t i) { return getAffineDimExpr(i, ctx); };
  llvm::SmallVector<AffineExpr> xExprs{d(0), d(1)}, kExprs, yExprs{d(0), d(1)};
  for (int64_t i = 0; i < s; ++i) {
    xExprs.push_back(d(2 + i) * win.strides[i] +
                     d(2 + s + i) * win.dilations[i]);
    kExprs.push_back(d(2 + s + i));
    yExprs.push_back(d(2 + i));
  }
  llvm::SmallVector<AffineMap> maps{AffineMap::get(numLoops, 0, xExprs, ctx),
                                    AffineMap::get(numLoops, 0, kExprs, ctx),
                                    AffineMap::get(numLoops, 0, yExprs, ctx)};
  llvm::SmallVector<utils::IteratorType> iterators(
      2 + s, utils::IteratorType::parallel);
  iterators.append(s, utils::IteratorType::reduction);
  llvm::ArrayRef<int64_t> xs = getShape(x);
  Value identity = isMax ? createLowestValue(b, loc, et, isUnsigned)
                         : createScalarConstant(b, loc, et, 0.0);
  Value init =
      createFilledTensor(b, loc, outputShape(xs[0], xs[1], win), et, identity);
  Value window = createEmptyTensor(b, loc, win.kernel, et);
  return linalg::GenericOp::create(
             b, loc, init.getType(), ValueRange{x, window}, ValueRange{init},
             maps, iterators,
             [&](OpBuilder &nb, Location l, ValueRange a) {
               Value r = isMax
                             ? maxOf(nb, l, a[0], a[2], isUnsigned)
                             : Value(arith::AddFOp::create(nb, l, a[0], a[2]));
               linalg::YieldOp::create(nb, l, r);
             })
      .getResult(0);
}

/// How many window elements of output position `o` along dim `i` are
/// counted: inside the input, or inside the input and its explicit pads.
int64_t countAlongDim(const Window &w, int64_t i, int64_t o, bool includePad) {
  int64_t lo = includePad ? -w.padBegin[i] : 0;
  int64_t hi = includePad ? w.input[i] + w.padEnd[i] : w.input[i];
  int64_t count = 0;
  for (int64_t k = 0; k < w.kernel[i]; ++k) {
    int64_t p = o * w.strides[i] + k * w.dilations[i] - w.padBegin[i];
    count += p >= lo && p < hi;
  }
  return count;
}

/// Divides window sums by the per-position element counts: one scalar when
/// every window counts the same, else a host-computed constant tensor over
/// the output's spatial dims.
Value divideByWindowCounts(OpBuilder &b, Location loc, Value sums,
                           const Window &w, bool includePad, OnnxDType t) {
  ConstTensor counts = ConstTensor::zeros(t, w.output);
  llvm::SmallVector<int64_t> index(w.numDims(), 0);
  bool uniform = true;
  for (int64_t linear = 0, n = counts.numElements(); linear < n; ++linear) {
    int64_t count = 1;
    for (int64_t i = 0; i < w.numDims(); ++i)
      count *= countAlongDim(w, i, index[i], includePad);
    counts.set(linear, static_cast<double>(count));
    uniform &= counts.floats[linear] == counts.floats[0];
    for (int64_t i = w.numDims() - 1; i >= 0 && ++index[i] == w.output[i]; --i)
      index[i] = 0;
  }
  Type et = getElementTypeOf(sums);
  Value divisor;
  if (uniform) {
    double count = counts.numElements() ? counts.floats[0] : 1.0;
    divisor = createFilledTensor(b, loc, {}, et,
                                 createScalarConstant(b, loc, et, count));
  } else {
    divisor = materializeConstant(b, loc, counts, et);
  }
  return createElementwise(
      b, loc, {sums, divisor}, getShape(sums), et,
      [](OpBuilder &nb, Location l, ValueRange a) -> Value {
        return arith::DivFOp::create(nb, l, a[0], a[1]);
      });
}

/// MaxPool (float and integer types) and AveragePool (float types).
LogicalResult convertPool(NodeContext &ctx, bool isMax) {
  OnnxDType t = ctx.inputDType(0);
  bool intOk = isMax && (isSignedIntDType(t) || isUnsignedIntDType(t));
  if (!isFloatDType(t) && !intOk)
    return ctx.unsupported("element type " + dtypeName(t) +
                           " is not supported (supported: floating-point" +
                           (isMax ? " and integer" : "") + " types)");
  if (isMax && ctx.hasOutput(1))
    return ctx.unsupported("output 1 (Indices) is not supported; only the "
                           "pooled values Y are");
  int64_t rank = ctx.inputRank(0);
  if (rank < 3)
    return ctx.emitError("X must have rank >= 3 (N, C, spatial...), got rank ")
           << rank;
  auto kernel = readKernelShape(ctx, rank - 2, std::nullopt);
  if (failed(kernel))
    return failure();
  bool ceilMode = ctx.getIntAttr("ceil_mode", 0) != 0;
  auto win =
      computeWindow(ctx, ctx.inputShape(0).drop_front(2), *kernel, ceilMode);
  if (failed(win))
    return failure();

  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  Type et = getElementType(ctx.getContext(), t);
  bool isUnsigned = isUnsignedIntDType(t);
  // Padding never wins a max and adds nothing to a sum.
  Value x = padToWindows(b, loc, ctx.input(0), *win, [&] {
    return isMax ? createLowestValue(b, loc, et, isUnsigned)
                 : createScalarConstant(b, loc, et, 0.0);
  });
  Value y = windowReduce(b, loc, x, *win, isMax, isUnsigned);
  if (!isMax)
    y = divideByWindowCounts(b, loc, y, *win,
                             ctx.getIntAttr("count_include_pad", 0) != 0, t);
  ctx.setOutput(0, y, t);
  return success();
}

LogicalResult convertMaxPool(NodeContext &ctx) {
  return convertPool(ctx, /*isMax=*/true);
}
LogicalResult convertAveragePool(NodeContext &ctx) {
  return convertPool(ctx, /*isMax=*/false);
}

/// Mean or max over all spatial dims, which stay as size-1 dims.
LogicalResult convertGlobalPool(NodeContext &ctx, ReductionKind kind) {
  OnnxDType t = ctx.inputDType(0);
  if (!isFloatDType(t))
    return ctx.unsupported("element type " + dtypeName(t) +
                           " is not supported (supported: floating-point "
                           "types)");
  int64_t rank = ctx.inputRank(0);
  if (rank < 2)
    return ctx.emitError("X must have rank >= 2 (N, C, spatial...), got rank ")
           << rank;
  llvm::SmallVector<int64_t> dims;
  for (int64_t d = 2; d < rank; ++d)
    dims.push_back(d);
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  Value y = createReduction(b, loc, ctx.input(0), dims, kind);
  ctx.setOutput(0, expandReducedDims(b, loc, y, dims), t);
  return success();
}

LogicalResult convertGlobalAveragePool(NodeContext &ctx) {
  return convertGlobalPool(ctx, ReductionKind::Mean);
}
LogicalResult convertGlobalMaxPool(NodeContext &ctx) {
  return convertGlobalPool(ctx, ReductionKind::Max);
}

} // namespace

void registerConvolutionConverters(ConverterRegistry &registry) {
  registry["Conv"] = convertConv;
  registry["ConvTranspose"] = convertConvTranspose;
  registry["MaxPool"] = convertMaxPool;
  registry["AveragePool"] = convertAveragePool;
  registry["GlobalAveragePool"] = convertGlobalAveragePool;
  registry["GlobalMaxPool"] = convertGlobalMaxPool;
}

} // namespace autopar::import
