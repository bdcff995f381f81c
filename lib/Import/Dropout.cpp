//===- Dropout.cpp - ONNX Dropout, for inference and for training ---------===//
//
// For inference (or ratio 0) Dropout is the identity. In training mode it
// keeps each element with probability 1 - ratio and scales the kept ones by
// 1 / (1 - ratio), as PyTorch does. The keep decision is a counter-based
// random function of (seed, step, node, element index) computed inside the
// op's body, so
//   - the mask of an element does not depend on how the tensor is split or
//     scheduled (every plan draws the same mask), and
//   - nothing is stored between forward and backward: the adjoint's body is
//     the same computation and draws the same mask again.
//
// The function (docs/training.md, "Dropout masks"; python/autopar/random.py
// is its twin) is built from SplitMix64's finalizer mix64:
//   key  = mix64(mix64(mix64(seed + G) ^ node) ^ step)
//   u(i) = mix64(key + (i + 1) * G) >> 32     (i: row-major element index
//                                              in the global batch's tensor)
//   keep = u(i) >= floor(ratio * 2^32)
// with G = 0x9E3779B97F4A7C15 and node = FNV-1a 64 of the node's first
// output name (unique in a graph) xor its `seed` attribute when it has one.
// A training step's call may hold only part of the global batch (a
// micro-batch, a data-parallel replica's share): its element i is element
// i + offset * (elements per sample) of the global batch's tensor, offset
// being the call's first sample (the `sample_offset` argument), so every
// plan draws the masks one rank draws.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"
#include "autopar/Import/OnnxImporter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace mlir;

namespace autopar::import {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

/// FNV-1a, 64 bits.
uint64_t fnv1a(llvm::StringRef s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

/// Emits SplitMix64's finalizer on an i64 (wrapping, logical shifts).
Value mix64(OpBuilder &b, Location loc, Value z) {
  auto c = [&](uint64_t v) {
    return arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(int64_t(v)));
  };
  auto xorShift = [&](Value v, uint64_t s) {
    return arith::XOrIOp::create(b, loc, v,
                                 arith::ShRUIOp::create(b, loc, v, c(s)));
  };
  z = arith::MulIOp::create(b, loc, xorShift(z, 30), c(0xBF58476D1CE4E5B9ull));
  z = arith::MulIOp::create(b, loc, xorShift(z, 27), c(0x94D049BB133111EBull));
  return xorShift(z, 31);
}

/// A linalg.generic over `shape` that yields, per element, what `body`
/// computes from (x, keep); x is the data element (when `data` is given),
/// keep the element's random decision. With `sampleOffset` (an int64
/// scalar tensor), the element indices start at sampleOffset *
/// elementsPerSample.
Value buildDropoutGeneric(
    OpBuilder &b, Location loc, Value data, Value seed, Value step,
    Value sampleOffset, int64_t elementsPerSample,
    llvm::ArrayRef<int64_t> shape, Type resultType, uint64_t node,
    uint64_t threshold,
    llvm::function_ref<Value(OpBuilder &, Location, Value, Value)> body) {
  MLIRContext *mctx = b.getContext();
  int64_t rank = shape.size();
  AffineMap identity = AffineMap::getMultiDimIdentityMap(rank, mctx);
  AffineMap scalar = AffineMap::get(rank, 0, {}, mctx);
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  if (data) {
    inputs.push_back(data);
    maps.push_back(identity);
  }
  inputs.append({seed, step});
  maps.append({scalar, scalar});
  if (sampleOffset) {
    inputs.push_back(sampleOffset);
    maps.push_back(scalar);
  }
  maps.push_back(identity);
  Value init = createEmptyTensor(b, loc, shape, resultType);
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, init.getType(), inputs, init, maps, iterators,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        auto c = [&](uint64_t v) {
          return arith::ConstantOp::create(nb, nl,
                                           nb.getI64IntegerAttr(int64_t(v)));
        };
        unsigned k = data ? 1 : 0;
        Value key =
            mix64(nb, nl, arith::AddIOp::create(nb, nl, args[k], c(kGolden)));
        key = mix64(nb, nl, arith::XOrIOp::create(nb, nl, key, c(node)));
        key = mix64(nb, nl, arith::XOrIOp::create(nb, nl, key, args[k + 1]));
        // Row-major index of the element in the whole tensor.
        Value linear;
        int64_t stride = 1;
        for (int64_t d = rank - 1; d >= 0; --d) {
          Value i = arith::IndexCastOp::create(
              nb, nl, nb.getI64Type(), linalg::IndexOp::create(nb, nl, d));
          Value term =
              stride == 1 ? i : arith::MulIOp::create(nb, nl, i, c(stride));
          linear = linear ? arith::AddIOp::create(nb, nl, linear, term) : term;
          stride *= shape[d];
        }
        if (!linear)
          linear = c(0);
        if (sampleOffset)
          linear = arith::AddIOp::create(
              nb, nl, linear,
              arith::MulIOp::create(nb, nl, args[k + 2],
                                    c(uint64_t(elementsPerSample))));
        Value counter = arith::MulIOp::create(
            nb, nl, arith::AddIOp::create(nb, nl, linear, c(1)), c(kGolden));
        Value z = mix64(nb, nl, arith::AddIOp::create(nb, nl, key, counter));
        Value u = arith::ShRUIOp::create(nb, nl, z, c(32));
        Value keep = arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::uge, u,
                                           c(threshold));
        linalg::YieldOp::create(nb, nl,
                                body(nb, nl, data ? args[0] : Value(), keep));
      });
  return generic.getResult(0);
}

} // namespace

LogicalResult convertDropout(NodeContext &ctx) {
  bool training = false;
  double ratio = 0.5;
  if (ctx.hasInput(2)) {
    auto mode = ctx.requireConstantInput(2, "training_mode");
    if (failed(mode))
      return failure();
    training = (*mode)->getInt(0) != 0;
  }
  if (ctx.hasInput(1)) {
    auto r = ctx.requireConstantInput(1, "ratio");
    if (failed(r))
      return failure();
    ratio = (*r)->getDouble(0);
  } else if (ctx.getOpset() < 12) {
    ratio = ctx.getFloatAttr("ratio", 0.5);
  }
  if (ctx.getIntAttr("is_test", 1) == 0 && ctx.getOpset() < 7)
    return ctx.unsupported("is_test=0 (training before opset 7) is not "
                           "supported; export with opset 12 or later, where "
                           "training_mode is an input");
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  llvm::ArrayRef<int64_t> shape = ctx.inputShape(0);

  if (!training || ratio == 0.0 || ctx.importsForEval()) {
    // The identity, and a mask of ones.
    if (const ConstTensor *c = ctx.inputConstant(0))
      ctx.setOutputConstant(0, *c);
    else
      ctx.setOutput(0, ctx.input(0), ctx.inputDType(0));
    if (ctx.hasOutput(1))
      ctx.setOutput(
          1,
          createFilledTensor(b, loc, shape, b.getI1Type(),
                             createScalarConstant(b, loc, b.getI1Type(), 1)),
          onnx::TensorProto_DataType_BOOL);
    return success();
  }

  if (!(ratio >= 0.0 && ratio <= 1.0))
    return ctx.emitError("ratio " + llvm::formatv("{0}", ratio).str() +
                         " is outside [0, 1]; ONNX Dropout drops each "
                         "element with probability ratio");
  Value x = ctx.input(0);
  auto elementType = dyn_cast<FloatType>(getElementTypeOf(x));
  if (!elementType)
    return ctx.unsupported("training-mode Dropout of a " +
                           dtypeName(ctx.inputDType(0)) +
                           " tensor (supported: float tensors)");
  // Step first: the arguments read parameters, step, seed, inputs.
  Value step = ctx.trainingScalar(attrs::kStep);
  Value seed = ctx.trainingScalar(attrs::kSeed);
  if (!seed || !step)
    return ctx.emitError("cannot add the seed and step arguments");
  const onnx::NodeProto &node = ctx.getNode();
  uint64_t nodeKey = fnv1a(node.output(0));
  if (auto attrSeed = ctx.getOptionalIntAttr("seed"))
    nodeKey ^= uint64_t(*attrSeed);
  // A training step indexes the masks in the global batch: the call's
  // first sample (autopar-accumulate-gradients sets it per micro-batch and
  // replica), times the elements of one sample.
  Value sampleOffset;
  int64_t elementsPerSample = 0;
  if (ctx.importsTrainingState()) {
    std::optional<int64_t> samples = ctx.samplesPerCall();
    int64_t elements = 1;
    for (int64_t d : shape)
      elements *= d;
    if (!samples || *samples <= 0 || shape.empty() || shape[0] % *samples != 0)
      return ctx.unsupported(
          "training-mode Dropout on a tensor of shape [" +
          llvm::join(llvm::map_range(
                         shape, [](int64_t d) { return std::to_string(d); }),
                     ", ") +
          "]" + " whose dim 0 is not a multiple of the batch (" +
          (samples ? std::to_string(*samples) : std::string("none")) +
          "): its masks are indexed by global sample, which needs the "
          "batch as the outermost dim (PyTorch's batch_first layouts)");
    elementsPerSample = elements / *samples;
    sampleOffset = ctx.trainingScalar(attrs::kSampleOffset);
    if (!sampleOffset)
      return ctx.emitError("cannot add the sample_offset argument");
  }
  // P(u < threshold) = threshold / 2^32 = ratio (to 2^-32).
  uint64_t threshold = uint64_t(std::floor(ratio * 4294967296.0));
  double scale = ratio < 1.0 ? 1.0 / (1.0 - ratio) : 0.0;

  Value y = buildDropoutGeneric(
      b, loc, x, seed, step, sampleOffset, elementsPerSample, shape,
      elementType, nodeKey, threshold,
      [&](OpBuilder &nb, Location nl, Value v, Value keep) -> Value {
        Value zero =
            arith::ConstantOp::create(nb, nl, nb.getFloatAttr(elementType, 0));
        Value scaled = arith::MulFOp::create(
            nb, nl, v,
            arith::ConstantOp::create(nb, nl,
                                      nb.getFloatAttr(elementType, scale)));
        return arith::SelectOp::create(nb, nl, keep, scaled, zero);
      });
  ctx.setOutput(0, y, ctx.inputDType(0));
  if (ctx.hasOutput(1))
    ctx.setOutput(1,
                  buildDropoutGeneric(b, loc, Value(), seed, step, sampleOffset,
                                      elementsPerSample, shape, b.getI1Type(),
                                      nodeKey, threshold,
                                      [](OpBuilder &, Location, Value,
                                         Value keep) -> Value { return keep; }),
                  onnx::TensorProto_DataType_BOOL);
  return success();
}

} // namespace autopar::import
