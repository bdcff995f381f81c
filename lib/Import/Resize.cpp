//===- Resize.cpp - ONNX Resize (nearest and linear) ----------------------===//
//
// Resize with static shapes is, along each resized dim, a fixed linear map
// from the input's positions to the output's: out[o] = sum_i in[i] * M[i, o],
// M one-hot (nearest) or two weights per column (linear). The importer
// computes M with the spec's coordinate transformation and rounding (ONNX's
// reference, onnx/backend/test/case/node/resize.py: edge values beyond the
// border) and emits one contraction per resized dim (contractAlongDim), so the
// op needs no gathers and has a gradient for free. A dim of n inputs and m
// outputs costs n * m multiply-adds per row: fine for the upsampling heads of
// segmentation models; cubic and tf_crop_and_resize are refused.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include <cmath>

using namespace mlir;

namespace autopar::import {
namespace {

/// The input coordinate of output position `x` (the spec's
/// coordinate_transformation_mode), for `in` inputs and scale `scale`. As
/// the reference, the output width is scale * in, fractional when scales
/// were given (a 0.6 downsampling of 4 is 2.4 wide for align_corners).
double sourceCoordinate(llvm::StringRef mode, double x, int64_t in,
                        double scale) {
  double out = scale * double(in);
  if (mode == "align_corners")
    return out == 1 ? 0.0 : x * double(in - 1) / (out - 1);
  if (mode == "asymmetric")
    return x / scale;
  if (mode == "pytorch_half_pixel")
    return out == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  if (mode == "tf_half_pixel_for_nn")
    return (x + 0.5) / scale;
  return (x + 0.5) / scale - 0.5; // half_pixel
}

/// The nearest input position to `x` (the spec's nearest_mode).
int64_t nearestIndex(llvm::StringRef mode, double x) {
  if (mode == "floor")
    return int64_t(std::floor(x));
  if (mode == "ceil")
    return int64_t(std::ceil(x));
  if (mode == "round_prefer_ceil")
    return int64_t(std::floor(x + 0.5));
  // round_prefer_floor: halves go down.
  return x == std::floor(x) + 0.5 ? int64_t(std::floor(x))
                                  : int64_t(std::round(x));
}

} // namespace

LogicalResult convertResize(NodeContext &ctx) {
  OnnxDType t = ctx.inputDType(0);
  if (!isFloatDType(t))
    return ctx.unsupported("element type " + dtypeName(t) +
                           " is not supported (Resize takes floating-point "
                           "tensors here)");
  std::string mode = ctx.getStringAttr("mode", "nearest");
  std::string transform =
      ctx.getStringAttr("coordinate_transformation_mode",
                        ctx.getOpset() < 11 ? "asymmetric" : "half_pixel");
  std::string nearest = ctx.getStringAttr("nearest_mode", "round_prefer_floor");
  if (mode != "nearest" && mode != "linear")
    return ctx.unsupported("mode '" + mode +
                           "' is not supported (supported: nearest, linear)");
  if (transform != "half_pixel" && transform != "pytorch_half_pixel" &&
      transform != "align_corners" && transform != "asymmetric" &&
      transform != "tf_half_pixel_for_nn")
    return ctx.unsupported("coordinate_transformation_mode '" + transform +
                           "' is not supported (supported: half_pixel, "
                           "pytorch_half_pixel, align_corners, asymmetric, "
                           "tf_half_pixel_for_nn)");
  if (nearest != "round_prefer_floor" && nearest != "round_prefer_ceil" &&
      nearest != "floor" && nearest != "ceil")
    return ctx.emitError("nearest_mode '") << nearest << "' is not valid";

  llvm::ArrayRef<int64_t> shape = ctx.inputShape(0);
  int64_t rank = shape.size();
  // Opset 10: (X, scales); 11 and later: (X, roi, scales, sizes).
  int64_t scalesInput = ctx.getOpset() < 11 ? 1 : 2;
  llvm::SmallVector<int64_t> outShape(shape);
  llvm::SmallVector<double> scales(rank, 1.0);
  if (ctx.getOpset() >= 11 && ctx.hasInput(3)) {
    auto sizes = ctx.requireConstantInput(3, "sizes");
    if (failed(sizes))
      return failure();
    if ((*sizes)->numElements() != rank)
      return ctx.emitError("sizes has ")
             << (*sizes)->numElements() << " values for a rank-" << rank
             << " input";
    for (int64_t d = 0; d < rank; ++d) {
      outShape[d] = (*sizes)->getInt(d);
      scales[d] = double(outShape[d]) / double(shape[d]);
    }
  } else if (ctx.hasInput(scalesInput)) {
    auto given = ctx.requireConstantInput(scalesInput, "scales");
    if (failed(given))
      return failure();
    if ((*given)->numElements() != rank)
      return ctx.emitError("scales has ")
             << (*given)->numElements() << " values for a rank-" << rank
             << " input";
    for (int64_t d = 0; d < rank; ++d) {
      // The spec's scales are float32: compute with that precision.
      scales[d] = double(float((*given)->getDouble(d)));
      outShape[d] = int64_t(std::floor(double(shape[d]) * scales[d]));
    }
  } else {
    return ctx.emitError("needs scales or sizes");
  }
  for (int64_t d = 0; d < rank; ++d)
    if (outShape[d] < 1)
      return ctx.emitError("output dim ")
             << d << " would have size " << outShape[d];

  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  Value x = ctx.input(0);
  for (int64_t d = 0; d < rank; ++d) {
    int64_t in = shape[d], out = outShape[d];
    if (in == out && scales[d] == 1.0)
      continue;
    // M[i, o]: the weight of input position i in output position o.
    std::vector<float> weights(in * out, 0.0f);
    for (int64_t o = 0; o < out; ++o) {
      double src = sourceCoordinate(transform, double(o), in, scales[d]);
      auto clampIndex = [&](int64_t i) {
        return std::min<int64_t>(std::max<int64_t>(i, 0), in - 1);
      };
      if (mode == "nearest") {
        weights[clampIndex(nearestIndex(nearest, src)) * out + o] = 1.0f;
        continue;
      }
      // Linear: the two neighbours, edge values beyond the border.
      double floorSrc = std::floor(src);
      double ratio = src - floorSrc;
      int64_t left = int64_t(floorSrc);
      weights[clampIndex(left) * out + o] += float(1.0 - ratio);
      weights[clampIndex(left + 1) * out + o] += float(ratio);
    }
    x = contractAlongDim(b, loc, x, d, weights, out, t);
  }
  ctx.setOutput(0, x, t);
  return success();
}

void registerResizeConverters(ConverterRegistry &registry) {
  registry["Resize"] = convertResize;
}

} // namespace autopar::import
