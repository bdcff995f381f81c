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
//   u(i) = mix64(key + (i + 1) * G) >> 32     (i: row-major element index)
//   keep = u(i) >= floor(ratio * 2^32)
// with G = 0x9E3779B97F4A7C15 and node = FNV-1a 64 of the node's first
// output name (unique in a graph) xor its `seed` attribute when it has one.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"
#include "autopar/Import/OnnxImporter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

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
/// keep the element's random decision.
Value buildDropoutGeneric(
    OpBuilder &b, Location loc, Value data, Value seed, Value step,
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
  maps.append({scalar, scalar, identity});
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
  // P(u < threshold) = threshold / 2^32 = ratio (to 2^-32).
  uint64_t threshold = uint64_t(std::floor(ratio * 4294967296.0));
  double scale = ratio < 1.0 ? 1.0 / (1.0 - ratio) : 0.0;

  Value y = buildDropoutGeneric(
      b, loc, x, seed, step, shape, elementType, nodeKey, threshold,
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
                  buildDropoutGeneric(b, loc, Value(), seed, step, shape,
                                      b.getI1Type(), nodeKey, threshold,
                                      [](OpBuilder &, Location, Value,
                                         Value keep) -> Value { return keep; }),
                  onnx::TensorProto_DataType_BOOL);
  return success();
}

} // namespace autopar::import
