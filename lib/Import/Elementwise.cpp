//===- Elementwise.cpp - Elementwise ONNX ops to linalg.generic -----------===//
//
// Unary, binary (with multidirectional broadcasting), comparison, logical,
// Cast, Where, Clip and the activation functions. Each op has a scalar IR body
// and, where shape computations use it, a host evaluation so that constant
// operands fold at import time.
//
//===----------------------------------------------------------------------===//

#include "ImporterImpl.h"

#include "mlir/Dialect/Math/IR/Math.h"

#include <cmath>
#include <functional>

using namespace mlir;
namespace autopar::import {
namespace {

/// Builds the scalar result from the operand elements. `dtype` is the ONNX
/// type of the (first) operand, for signedness.
using BodyFn =
    std::function<Value(OpBuilder &, Location, ValueRange, OnnxDType dtype)>;
using HostFloatFn = std::function<double(llvm::ArrayRef<double>)>;
using HostIntFn = std::function<int64_t(llvm::ArrayRef<int64_t>)>;

/// Folds elementwise over constants; result elements are at most this many.
constexpr int64_t kMaxHostFoldElements = 4096;

/// Evaluates an elementwise op over constant operands on the host.
static ConstTensor foldOnHost(llvm::ArrayRef<const ConstTensor *> operands,
                              llvm::ArrayRef<int64_t> shape,
                              OnnxDType resultType,
                              const HostFloatFn &hostFloat,
                              const HostIntFn &hostInt, bool useFloat) {
  ConstTensor result = ConstTensor::zeros(resultType, shape);
  int64_t rank = shape.size();
  int64_t n = result.numElements();
  llvm::SmallVector<int64_t> index(rank, 0);
  llvm::SmallVector<double> fargs(operands.size());
  llvm::SmallVector<int64_t> iargs(operands.size());
  for (int64_t linear = 0; linear < n; ++linear) {
    int64_t rem = linear;
    for (int64_t d = rank - 1; d >= 0; --d) {
      index[d] = rem % shape[d];
      rem /= shape[d];
    }
    for (auto [k, op] : llvm::enumerate(operands)) {
      int64_t offset = rank - op->shape.size(), flat = 0;
      for (size_t j = 0; j < op->shape.size(); ++j)
        flat =
            flat * op->shape[j] + (op->shape[j] == 1 ? 0 : index[offset + j]);
      fargs[k] = op->getDouble(flat);
      iargs[k] = op->getInt(flat);
    }
    if (useFloat)
      result.set(linear, hostFloat(fargs));
    else
      result.setInt(linear, hostInt(iargs));
  }
  return result;
}

/// Converts an elementwise node: `operandIdx` lists the inputs taking part;
/// `resultType` is the ONNX result type (defaults to the first operand's).
static LogicalResult convertElementwise(NodeContext &ctx,
                                        llvm::ArrayRef<int64_t> operandIdx,
                                        const BodyFn &body,
                                        std::optional<OnnxDType> resultType,
                                        const HostFloatFn &hostFloat = nullptr,
                                        const HostIntFn &hostInt = nullptr) {
  llvm::SmallVector<llvm::SmallVector<int64_t>> shapes;
  for (int64_t i : operandIdx)
    shapes.push_back(llvm::SmallVector<int64_t>(ctx.inputShape(i)));
  auto shape = broadcastShapes(shapes);
  if (failed(shape)) {
    auto diag = ctx.emitError("operand shapes cannot be broadcast together:");
    for (const auto &s : shapes) {
      diag << " [";
      llvm::interleaveComma(s, diag);
      diag << "]";
    }
    return diag;
  }
  OnnxDType operandType = ctx.inputDType(operandIdx.front());
  OnnxDType outType = resultType.value_or(operandType);

  // Host folding keeps shape computations static.
  bool allConst = llvm::all_of(
      operandIdx, [&](int64_t i) { return ctx.inputConstant(i) != nullptr; });
  if (allConst && getNumElements(*shape) <= kMaxHostFoldElements) {
    bool useFloat = false;
    for (int64_t i : operandIdx)
      useFloat |= isFloatDType(ctx.inputDType(i));
    if ((useFloat && hostFloat) || (!useFloat && hostInt)) {
      llvm::SmallVector<const ConstTensor *> consts;
      for (int64_t i : operandIdx)
        consts.push_back(ctx.inputConstant(i));
      ctx.setOutputConstant(
          0, foldOnHost(consts, *shape, outType, hostFloat, hostInt, useFloat));
      return success();
    }
  }

  llvm::SmallVector<Value> operands;
  for (int64_t i : operandIdx)
    operands.push_back(ctx.input(i));
  Type elementType = getElementType(ctx.getContext(), outType);
  Value result = createElementwise(
      ctx.getBuilder(), ctx.getLoc(), operands, *shape, elementType,
      [&](OpBuilder &b, Location loc, ValueRange args) {
        return body(b, loc, args, operandType);
      });
  ctx.setOutput(0, result, outType);
  return success();
}

/// Checks that the given inputs share one element type.
static LogicalResult requireSameTypes(NodeContext &ctx,
                                      llvm::ArrayRef<int64_t> idx) {
  for (int64_t i : idx)
    if (ctx.inputDType(i) != ctx.inputDType(idx.front()))
      return ctx.emitError("operands have different element types (")
             << dtypeName(ctx.inputDType(idx.front())) << " and "
             << dtypeName(ctx.inputDType(i)) << ")";
  return success();
}

static llvm::SmallVector<int64_t> allInputs(NodeContext &ctx) {
  llvm::SmallVector<int64_t> idx;
  for (int64_t i = 0; i < ctx.getNumInputs(); ++i)
    if (ctx.hasInput(i))
      idx.push_back(i);
  return idx;
}

//===----------------------------------------------------------------------===//
// Binary arithmetic
//===----------------------------------------------------------------------===//

using FloatOpBuilder = Value (*)(OpBuilder &, Location, Value, Value);
template <typename FOp, typename IOp>
static Value arith2(OpBuilder &b, Location loc, ValueRange a, OnnxDType t) {
  if (isFloatDType(t))
    return FOp::create(b, loc, a[0], a[1]);
  return IOp::create(b, loc, a[0], a[1]);
}

static LogicalResult convertBinary(NodeContext &ctx, const BodyFn &body,
                                   const HostFloatFn &hf, const HostIntFn &hi) {
  if (failed(requireSameTypes(ctx, {0, 1})))
    return failure();
  return convertElementwise(ctx, {0, 1}, body, std::nullopt, hf, hi);
}

static LogicalResult convertAdd(NodeContext &ctx) {
  return convertBinary(
      ctx, arith2<arith::AddFOp, arith::AddIOp>,
      [](auto a) { return a[0] + a[1]; }, [](auto a) { return a[0] + a[1]; });
}
static LogicalResult convertSub(NodeContext &ctx) {
  return convertBinary(
      ctx, arith2<arith::SubFOp, arith::SubIOp>,
      [](auto a) { return a[0] - a[1]; }, [](auto a) { return a[0] - a[1]; });
}
static LogicalResult convertMul(NodeContext &ctx) {
  return convertBinary(
      ctx, arith2<arith::MulFOp, arith::MulIOp>,
      [](auto a) { return a[0] * a[1]; }, [](auto a) { return a[0] * a[1]; });
}
static LogicalResult convertDiv(NodeContext &ctx) {
  return convertBinary(
      ctx,
      [](OpBuilder &b, Location loc, ValueRange a, OnnxDType t) -> Value {
        if (isFloatDType(t))
          return arith::DivFOp::create(b, loc, a[0], a[1]);
        if (isUnsignedIntDType(t))
          return arith::DivUIOp::create(b, loc, a[0], a[1]);
        return arith::DivSIOp::create(b, loc, a[0], a[1]);
      },
      [](auto a) { return a[0] / a[1]; },
      [](auto a) { return a[1] == 0 ? 0 : a[0] / a[1]; });
}

static LogicalResult convertPow(NodeContext &ctx) {
  OnnxDType baseType = ctx.inputDType(0), expType = ctx.inputDType(1);
  BodyFn body = [expType](OpBuilder &b, Location loc, ValueRange a,
                          OnnxDType t) -> Value {
    Value base = a[0], exp = a[1];
    if (isFloatDType(t)) {
      exp = castScalar(b, loc, exp, expType, t);
      return math::PowFOp::create(b, loc, base, exp);
    }
    if (!isFloatDType(expType)) {
      exp = castScalar(b, loc, exp, expType, t);
      return math::IPowIOp::create(b, loc, base, exp);
    }
    // Integer base, float exponent: compute in the exponent's type.
    Value fbase = castScalar(b, loc, base, t, expType);
    Value r = math::PowFOp::create(b, loc, fbase, exp);
    return castScalar(b, loc, r, expType, t);
  };
  (void)baseType;
  return convertElementwise(
      ctx, {0, 1}, body, std::nullopt,
      [](auto a) { return std::pow(a[0], a[1]); },
      [](auto a) {
        int64_t r = 1;
        for (int64_t i = 0; i < a[1]; ++i)
          r *= a[0];
        return r;
      });
}

/// Mod: with fmod=1, C's fmod (the remainder has the dividend's sign), for
/// floats and integers; with fmod=0 (the default), Python's % (the remainder
/// has the divisor's sign), which the spec defines for integers only. An
/// integer divisor of 0 gives 0, as NumPy's does, instead of trapping: the
/// remainder is taken by 1 there, and by 1 for a divisor of -1 as well (the
/// remainder is 0 either way, but the lowest value's quotient by -1
/// overflows).
static LogicalResult convertMod(NodeContext &ctx) {
  if (failed(requireSameTypes(ctx, {0, 1})))
    return failure();
  OnnxDType dtype = ctx.inputDType(0);
  int64_t fmod = ctx.getIntAttr("fmod", 0);
  if (fmod != 0 && fmod != 1)
    return ctx.unsupported("attribute 'fmod' must be 0 or 1, got " +
                           llvm::Twine(fmod));
  if (isBoolDType(dtype))
    return ctx.unsupported("bool operands are not supported (supported: "
                           "integer and floating-point types)");
  if (isFloatDType(dtype) && fmod == 0)
    return ctx.unsupported(
        "fmod=0 (the remainder with the divisor's sign) is defined for "
        "integer operands only, got " +
        dtypeName(dtype) + "; floating-point operands need fmod=1");
  bool pythonMod = fmod == 0;
  BodyFn body = [pythonMod](OpBuilder &b, Location l, ValueRange a,
                            OnnxDType t) -> Value {
    Value x = a[0], y = a[1];
    if (isFloatDType(t))
      return arith::RemFOp::create(b, l, x, y);
    Type type = x.getType();
    Value zero = createScalarConstant(b, l, type, 0);
    Value one = createScalarConstant(b, l, type, 1);
    Value isZero =
        arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, y, zero);
    if (isUnsignedIntDType(t)) {
      Value divisor = arith::SelectOp::create(b, l, isZero, one, y);
      return arith::RemUIOp::create(b, l, x, divisor);
    }
    Value isMinusOne =
        arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, y,
                              createScalarConstant(b, l, type, -1));
    Value noQuotient = arith::OrIOp::create(b, l, isZero, isMinusOne);
    Value divisor = arith::SelectOp::create(b, l, noQuotient, one, y);
    Value r = arith::RemSIOp::create(b, l, x, divisor);
    if (!pythonMod)
      return r;
    // A non-zero remainder whose sign differs from the divisor's moves by
    // one divisor.
    Value nonZero =
        arith::CmpIOp::create(b, l, arith::CmpIPredicate::ne, r, zero);
    Value rNeg =
        arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, r, zero);
    Value dNeg =
        arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, divisor, zero);
    Value signsDiffer = arith::XOrIOp::create(b, l, rNeg, dNeg);
    Value adjust = arith::AndIOp::create(b, l, nonZero, signsDiffer);
    return arith::SelectOp::create(b, l, adjust,
                                   arith::AddIOp::create(b, l, r, divisor), r);
  };
  // Unsigned 64-bit values do not fit the host's int64 arithmetic: those
  // operands are computed in the IR.
  HostIntFn hostInt = nullptr;
  if (isSignedIntDType(dtype))
    hostInt = [pythonMod](llvm::ArrayRef<int64_t> a) -> int64_t {
      if (a[1] == 0 || a[1] == -1)
        return 0;
      int64_t r = a[0] % a[1];
      if (pythonMod && r != 0 && (r < 0) != (a[1] < 0))
        r += a[1];
      return r;
    };
  return convertElementwise(
      ctx, {0, 1}, body, std::nullopt,
      [](llvm::ArrayRef<double> a) { return std::fmod(a[0], a[1]); }, hostInt);
}

/// Max/Min: variadic, with broadcasting.
template <bool IsMax> static LogicalResult convertMaxMin(NodeContext &ctx) {
  llvm::SmallVector<int64_t> idx = allInputs(ctx);
  if (idx.empty())
    return ctx.emitError("needs at least one input");
  if (failed(requireSameTypes(ctx, idx)))
    return failure();
  return convertElementwise(
      ctx, idx,
      [](OpBuilder &b, Location loc, ValueRange a, OnnxDType t) {
        Value r = a[0];
        for (Value v : a.drop_front())
          r = IsMax ? maxBody(b, loc, r, v, t) : minBody(b, loc, r, v, t);
        return r;
      },
      std::nullopt,
      [](llvm::ArrayRef<double> a) {
        double r = a[0];
        for (double v : a)
          r = IsMax ? std::max(r, v) : std::min(r, v);
        return r;
      },
      [](llvm::ArrayRef<int64_t> a) {
        int64_t r = a[0];
        for (int64_t v : a)
          r = IsMax ? std::max(r, v) : std::min(r, v);
        return r;
      });
}

/// Sum and Mean: the inputs broadcast together and added up, for Mean divided
/// by their count (floating-point types, as the ONNX schemas allow).
template <bool IsMean> static LogicalResult convertSumMean(NodeContext &ctx) {
  llvm::SmallVector<int64_t> idx = allInputs(ctx);
  if (idx.empty())
    return ctx.emitError("needs at least one input");
  if (failed(requireSameTypes(ctx, idx)))
    return failure();
  if (!isFloatDType(ctx.inputDType(idx[0])))
    return ctx.unsupported("element type " + dtypeName(ctx.inputDType(idx[0])) +
                           " is not supported (supported: floating-point "
                           "types)");
  return convertElementwise(
      ctx, idx,
      [](OpBuilder &b, Location loc, ValueRange a, OnnxDType) {
        Value r = a[0];
        for (Value v : a.drop_front())
          r = arith::AddFOp::create(b, loc, r, v);
        if (IsMean && a.size() > 1)
          r = arith::DivFOp::create(
              b, loc, r,
              arith::ConstantOp::create(
                  b, loc, b.getFloatAttr(r.getType(), double(a.size()))));
        return r;
      },
      std::nullopt,
      [](llvm::ArrayRef<double> a) {
        double r = 0;
        for (double v : a)
          r += v;
        return IsMean ? r / double(a.size()) : r;
      });
}

//===----------------------------------------------------------------------===//
// Comparisons and logic
//===----------------------------------------------------------------------===//

template <arith::CmpFPredicate FP, arith::CmpIPredicate SP,
          arith::CmpIPredicate UP>
static LogicalResult convertCompare(NodeContext &ctx,
                                    std::function<bool(double, double)> f) {
  if (failed(requireSameTypes(ctx, {0, 1})))
    return failure();
  return convertElementwise(
      ctx, {0, 1},
      [](OpBuilder &b, Location loc, ValueRange a, OnnxDType t) -> Value {
        if (isFloatDType(t))
          return arith::CmpFOp::create(b, loc, FP, a[0], a[1]);
        bool isUnsigned = isUnsignedIntDType(t) || isBoolDType(t);
        return arith::CmpIOp::create(b, loc, isUnsigned ? UP : SP, a[0], a[1]);
      },
      onnx::TensorProto_DataType_BOOL,
      [f](auto a) -> double { return f(a[0], a[1]); },
      [f](auto a) -> int64_t { return f(a[0], a[1]); });
}

static LogicalResult convertEqual(NodeContext &ctx) {
  return convertCompare<arith::CmpFPredicate::OEQ, arith::CmpIPredicate::eq,
                        arith::CmpIPredicate::eq>(
      ctx, [](double x, double y) { return x == y; });
}
static LogicalResult convertLess(NodeContext &ctx) {
  return convertCompare<arith::CmpFPredicate::OLT, arith::CmpIPredicate::slt,
                        arith::CmpIPredicate::ult>(
      ctx, [](double x, double y) { return x < y; });
}
static LogicalResult convertLessOrEqual(NodeContext &ctx) {
  return convertCompare<arith::CmpFPredicate::OLE, arith::CmpIPredicate::sle,
                        arith::CmpIPredicate::ule>(
      ctx, [](double x, double y) { return x <= y; });
}
static LogicalResult convertGreater(NodeContext &ctx) {
  return convertCompare<arith::CmpFPredicate::OGT, arith::CmpIPredicate::sgt,
                        arith::CmpIPredicate::ugt>(
      ctx, [](double x, double y) { return x > y; });
}
static LogicalResult convertGreaterOrEqual(NodeContext &ctx) {
  return convertCompare<arith::CmpFPredicate::OGE, arith::CmpIPredicate::sge,
                        arith::CmpIPredicate::uge>(
      ctx, [](double x, double y) { return x >= y; });
}

template <typename Op>
static LogicalResult
convertLogical(NodeContext &ctx, std::function<int64_t(int64_t, int64_t)> f) {
  for (int64_t i : {0, 1})
    if (!isBoolDType(ctx.inputDType(i)))
      return ctx.emitError("operands must be bool, got ")
             << dtypeName(ctx.inputDType(i));
  return convertElementwise(
      ctx, {0, 1},
      [](OpBuilder &b, Location loc, ValueRange a, OnnxDType) -> Value {
        return Op::create(b, loc, a[0], a[1]);
      },
      std::nullopt, nullptr, [f](auto a) { return f(a[0], a[1]); });
}
static LogicalResult convertAnd(NodeContext &ctx) {
  return convertLogical<arith::AndIOp>(
      ctx, [](int64_t x, int64_t y) { return x & y; });
}
static LogicalResult convertOr(NodeContext &ctx) {
  return convertLogical<arith::OrIOp>(
      ctx, [](int64_t x, int64_t y) { return x | y; });
}
static LogicalResult convertNot(NodeContext &ctx) {
  if (!isBoolDType(ctx.inputDType(0)))
    return ctx.emitError("operand must be bool, got ")
           << dtypeName(ctx.inputDType(0));
  return convertElementwise(
      ctx, {0},
      [](OpBuilder &b, Location loc, ValueRange a, OnnxDType) -> Value {
        return arith::XOrIOp::create(
            b, loc, a[0], createScalarConstant(b, loc, b.getI1Type(), 1));
      },
      std::nullopt, nullptr, [](auto a) -> int64_t { return !a[0]; });
}

static LogicalResult convertWhere(NodeContext &ctx) {
  if (!isBoolDType(ctx.inputDType(0)))
    return ctx.emitError("condition must be bool, got ")
           << dtypeName(ctx.inputDType(0));
  if (failed(requireSameTypes(ctx, {1, 2})))
    return failure();
  return convertElementwise(
      ctx, {0, 1, 2},
      [](OpBuilder &b, Location loc, ValueRange a, OnnxDType) -> Value {
        return arith::SelectOp::create(b, loc, a[0], a[1], a[2]);
      },
      ctx.inputDType(1), [](auto a) { return a[0] != 0 ? a[1] : a[2]; },
      [](auto a) { return a[0] != 0 ? a[1] : a[2]; });
}

//===----------------------------------------------------------------------===//
// Unary math and activations
//===----------------------------------------------------------------------===//

/// A unary op defined for floats only.
template <typename Build>
static LogicalResult convertFloatUnary(NodeContext &ctx, Build build,
                                       HostFloatFn host = nullptr) {
  if (!isFloatDType(ctx.inputDType(0)))
    return ctx.emitError("supports floating-point inputs only, got ")
           << dtypeName(ctx.inputDType(0));
  return convertElementwise(
      ctx, {0},
      [build](OpBuilder &b, Location loc, ValueRange a, OnnxDType) -> Value {
        return build(b, loc, a[0]);
      },
      std::nullopt, host);
}

static Value fconst(OpBuilder &b, Location loc, Value like, double v) {
  return createScalarConstant(b, loc, like.getType(), v);
}

static LogicalResult convertExp(NodeContext &ctx) {
  return convertFloatUnary(
      ctx,
      [](OpBuilder &b, Location l, Value x) -> Value {
        return math::ExpOp::create(b, l, x);
      },
      [](auto a) { return std::exp(a[0]); });
}
static LogicalResult convertLog(NodeContext &ctx) {
  return convertFloatUnary(
      ctx,
      [](OpBuilder &b, Location l, Value x) -> Value {
        return math::LogOp::create(b, l, x);
      },
      [](auto a) { return std::log(a[0]); });
}
static LogicalResult convertSqrt(NodeContext &ctx) {
  return convertFloatUnary(
      ctx,
      [](OpBuilder &b, Location l, Value x) -> Value {
        return math::SqrtOp::create(b, l, x);
      },
      [](auto a) { return std::sqrt(a[0]); });
}
static LogicalResult convertTanh(NodeContext &ctx) {
  return convertFloatUnary(ctx, [](OpBuilder &b, Location l, Value x) -> Value {
    return math::TanhOp::create(b, l, x);
  });
}
static LogicalResult convertErf(NodeContext &ctx) {
  return convertFloatUnary(ctx, [](OpBuilder &b, Location l, Value x) -> Value {
    return math::ErfOp::create(b, l, x);
  });
}
static LogicalResult convertReciprocal(NodeContext &ctx) {
  return convertFloatUnary(
      ctx,
      [](OpBuilder &b, Location l, Value x) -> Value {
        return arith::DivFOp::create(b, l, fconst(b, l, x, 1.0), x);
      },
      [](auto a) { return 1.0 / a[0]; });
}
static LogicalResult convertSigmoid(NodeContext &ctx) {
  return convertFloatUnary(ctx, [](OpBuilder &b, Location l, Value x) -> Value {
    Value negX = arith::NegFOp::create(b, l, x);
    Value e = math::ExpOp::create(b, l, negX);
    Value one = fconst(b, l, x, 1.0);
    return arith::DivFOp::create(b, l, one,
                                 arith::AddFOp::create(b, l, one, e));
  });
}

/// min(max(x, lo), hi) for floats.
static Value clampF(OpBuilder &b, Location l, Value x, double lo, double hi) {
  Value r = arith::MaximumFOp::create(b, l, x, fconst(b, l, x, lo));
  return arith::MinimumFOp::create(b, l, r, fconst(b, l, x, hi));
}

static LogicalResult convertHardSigmoid(NodeContext &ctx) {
  double alpha = ctx.getFloatAttr("alpha", 0.2f);
  double beta = ctx.getFloatAttr("beta", 0.5f);
  return convertFloatUnary(
      ctx, [=](OpBuilder &b, Location l, Value x) -> Value {
        Value y = arith::AddFOp::create(
            b, l, arith::MulFOp::create(b, l, x, fconst(b, l, x, alpha)),
            fconst(b, l, x, beta));
        return clampF(b, l, y, 0.0, 1.0);
      });
}
static LogicalResult convertHardSwish(NodeContext &ctx) {
  return convertFloatUnary(ctx, [](OpBuilder &b, Location l, Value x) -> Value {
    Value y = arith::AddFOp::create(
        b, l, arith::MulFOp::create(b, l, x, fconst(b, l, x, 1.0 / 6.0)),
        fconst(b, l, x, 0.5));
    return arith::MulFOp::create(b, l, x, clampF(b, l, y, 0.0, 1.0));
  });
}
/// LeakyRelu: x where x > 0, else alpha * x. At x = 0 both sides are 0;
/// taking alpha's side there gives PyTorch's gradient (alpha * dy), as PRelu.
static LogicalResult convertLeakyRelu(NodeContext &ctx) {
  double alpha = ctx.getFloatAttr("alpha", 0.01f);
  return convertFloatUnary(
      ctx, [=](OpBuilder &b, Location l, Value x) -> Value {
        Value isPos = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, x,
                                            fconst(b, l, x, 0.0));
        Value scaled = arith::MulFOp::create(b, l, x, fconst(b, l, x, alpha));
        return arith::SelectOp::create(b, l, isPos, x, scaled);
      });
}

/// PRelu: x where x > 0, else slope * x; the slope broadcasts to the input's
/// shape (unidirectional broadcasting). At x = 0 both sides are 0; taking
/// the slope's side there gives PyTorch's gradient (slope * dy).
static LogicalResult convertPRelu(NodeContext &ctx) {
  if (isBoolDType(ctx.inputDType(0)))
    return ctx.unsupported("bool inputs are not supported (supported: "
                           "floating-point and integer types)");
  if (failed(requireSameTypes(ctx, {0, 1})))
    return failure();
  llvm::SmallVector<int64_t> x(ctx.inputShape(0)), slope(ctx.inputShape(1));
  // Before opset 7, a slope of shape [C] applies along the channel axis (dim
  // 1), as PyTorch's PReLU(num_parameters=C) exported at opset 6 expects;
  // from opset 7 on the slope broadcasts unidirectionally (against the last
  // dims).
  bool channelSlope = ctx.getOpset() < 7 && slope.size() == 1 &&
                      x.size() >= 2 && slope[0] == x[1] && slope[0] != 1;
  llvm::SmallVector<int64_t> slopeShape(slope);
  if (channelSlope) {
    slopeShape.assign(x.size() - 1, 1);
    slopeShape[0] = x[1];
  }
  auto shape = broadcastShapes({x, slopeShape});
  if (failed(shape) || *shape != x) {
    auto diag = ctx.emitError("slope of shape [");
    llvm::interleaveComma(slope, diag);
    diag << "] does not broadcast to the input's shape [";
    llvm::interleaveComma(x, diag);
    return diag << "] (unidirectional broadcasting)";
  }
  BodyFn body = [](OpBuilder &b, Location l, ValueRange a,
                   OnnxDType t) -> Value {
    Value x = a[0], slope = a[1];
    if (isUnsignedIntDType(t))
      return x;
    Value zero = createScalarConstant(b, l, x.getType(), 0.0);
    if (isFloatDType(t)) {
      Value isPos =
          arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, x, zero);
      return arith::SelectOp::create(b, l, isPos, x,
                                     arith::MulFOp::create(b, l, slope, x));
    }
    Value isPos =
        arith::CmpIOp::create(b, l, arith::CmpIPredicate::sgt, x, zero);
    return arith::SelectOp::create(b, l, isPos, x,
                                   arith::MulIOp::create(b, l, slope, x));
  };
  if (!channelSlope)
    return convertElementwise(ctx, {0, 1}, body, std::nullopt);
  OpBuilder &b = ctx.getBuilder();
  OnnxDType t = ctx.inputDType(0);
  Value channels = reshapeTensor(b, ctx.getLoc(), ctx.input(1), slopeShape);
  Value result =
      createElementwise(b, ctx.getLoc(), {ctx.input(0), channels}, x,
                        getElementType(ctx.getContext(), t),
                        [&](OpBuilder &b, Location loc, ValueRange args) {
                          return body(b, loc, args, t);
                        });
  ctx.setOutput(0, result, t);
  return success();
}

/// alpha * (exp(x) - 1) for x <= 0, else x: the shared part of Elu and Selu.
/// The exponential is of min(0, x), so that the branch not taken for a large
/// x cannot overflow (its gradient, 0 * inf, would be NaN); at x = 0 the
/// exponential's side is taken, which gives PyTorch's gradient (alpha * dy).
static Value eluBody(OpBuilder &b, Location l, Value x, double alpha) {
  Value zero = fconst(b, l, x, 0.0);
  Value isPos = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, x, zero);
  Value negPart = arith::MinimumFOp::create(b, l, zero, x);
  Value expm1 = math::ExpM1Op::create(b, l, negPart);
  Value scaled = arith::MulFOp::create(b, l, expm1, fconst(b, l, x, alpha));
  return arith::SelectOp::create(b, l, isPos, x, scaled);
}

static LogicalResult convertElu(NodeContext &ctx) {
  double alpha = ctx.getFloatAttr("alpha", 1.0f);
  return convertFloatUnary(ctx, [=](OpBuilder &b, Location l, Value x) {
    return eluBody(b, l, x, alpha);
  });
}

/// Selu: gamma * elu(x, alpha), with the spec's defaults (float32 values).
static LogicalResult convertSelu(NodeContext &ctx) {
  double alpha = ctx.getFloatAttr("alpha", 1.67326319217681884765625f);
  double gamma = ctx.getFloatAttr("gamma", 1.05070102214813232421875f);
  return convertFloatUnary(
      ctx, [=](OpBuilder &b, Location l, Value x) -> Value {
        return arith::MulFOp::create(b, l, eluBody(b, l, x, alpha),
                                     fconst(b, l, x, gamma));
      });
}

/// Softplus: ln(exp(x) + 1), computed as max(x, 0) + log1p(exp(-|x|)) so
/// that exp never overflows (the spec's form is inf from x = 89 in float32).
/// max and |x| are selects on x > 0 that take x's negative side at 0, so
/// that x = 0 gets the gradient 1/2 (max and abs would give it 0).
static LogicalResult convertSoftplus(NodeContext &ctx) {
  return convertFloatUnary(ctx, [](OpBuilder &b, Location l, Value x) -> Value {
    Value zero = fconst(b, l, x, 0.0);
    Value isPos =
        arith::CmpFOp::create(b, l, arith::CmpFPredicate::OGT, x, zero);
    Value negAbs =
        arith::SelectOp::create(b, l, isPos, arith::NegFOp::create(b, l, x), x);
    Value log1p =
        math::Log1pOp::create(b, l, math::ExpOp::create(b, l, negAbs));
    Value posPart = arith::SelectOp::create(b, l, isPos, x, zero);
    return arith::AddFOp::create(b, l, posPart, log1p);
  });
}

/// Softsign: x / (1 + |x|).
static LogicalResult convertSoftsign(NodeContext &ctx) {
  return convertFloatUnary(ctx, [](OpBuilder &b, Location l, Value x) -> Value {
    Value denom = arith::AddFOp::create(b, l, fconst(b, l, x, 1.0),
                                        math::AbsFOp::create(b, l, x));
    return arith::DivFOp::create(b, l, x, denom);
  });
}

static LogicalResult convertRelu(NodeContext &ctx) {
  return convertElementwise(
      ctx, {0},
      [](OpBuilder &b, Location l, ValueRange a, OnnxDType t) -> Value {
        Value zero = createScalarConstant(b, l, a[0].getType(), 0.0);
        return maxBody(b, l, a[0], zero, t);
      },
      std::nullopt, [](auto a) { return std::max(a[0], 0.0); },
      [](auto a) { return std::max<int64_t>(a[0], 0); });
}

static LogicalResult convertAbs(NodeContext &ctx) {
  return convertElementwise(
      ctx, {0},
      [](OpBuilder &b, Location l, ValueRange a, OnnxDType t) -> Value {
        if (isFloatDType(t))
          return math::AbsFOp::create(b, l, a[0]);
        if (isUnsignedIntDType(t))
          return a[0];
        return math::AbsIOp::create(b, l, a[0]);
      },
      std::nullopt, [](auto a) { return std::fabs(a[0]); },
      [](auto a) { return a[0] < 0 ? -a[0] : a[0]; });
}

static LogicalResult convertNeg(NodeContext &ctx) {
  return convertElementwise(
      ctx, {0},
      [](OpBuilder &b, Location l, ValueRange a, OnnxDType t) -> Value {
        if (isFloatDType(t))
          return arith::NegFOp::create(b, l, a[0]);
        return arith::SubIOp::create(
            b, l, createScalarConstant(b, l, a[0].getType(), 0), a[0]);
      },
      std::nullopt, [](auto a) { return -a[0]; }, [](auto a) { return -a[0]; });
}

/// Clip: bounds from inputs 1 and 2 (opset >= 11) or min/max attributes.
static LogicalResult convertClip(NodeContext &ctx) {
  OnnxDType t = ctx.inputDType(0);
  OpBuilder &b = ctx.getBuilder();
  Location loc = ctx.getLoc();
  Type elementType = getElementType(ctx.getContext(), t);
  // Scalar bounds as rank-0 tensors broadcast by the elementwise helper.
  auto bound = [&](int64_t idx, const char *attr, bool isMin) -> Value {
    if (ctx.getOpset() < 11) {
      double def = isMin ? -std::numeric_limits<float>::max()
                         : std::numeric_limits<float>::max();
      return createFilledTensor(
          b, loc, {}, elementType,
          createScalarConstant(b, loc, elementType,
                               ctx.getFloatAttr(attr, def)));
    }
    if (ctx.hasInput(idx))
      return ctx.input(idx);
    Value v =
        isMin ? createLowestValue(b, loc, elementType, isUnsignedIntDType(t))
              : createHighestValue(b, loc, elementType, isUnsignedIntDType(t));
    return createFilledTensor(b, loc, {}, elementType, v);
  };
  Value lo = bound(1, "min", true), hi = bound(2, "max", false);
  Value x = ctx.input(0);
  Value result = createElementwise(
      b, loc, {x, lo, hi}, getShape(x), elementType,
      [t](OpBuilder &nb, Location l, ValueRange a) {
        return minBody(nb, l, maxBody(nb, l, a[0], a[1], t), a[2], t);
      });
  ctx.setOutput(0, result, t);
  return success();
}

//===----------------------------------------------------------------------===//
// Cast, Identity, Constant (Dropout: Dropout.cpp)
//===----------------------------------------------------------------------===//

static LogicalResult convertCast(NodeContext &ctx) {
  auto to = ctx.getOptionalIntAttr("to");
  if (!to)
    return ctx.emitError("is missing its required 'to' attribute");
  if (!getElementType(ctx.getContext(), *to))
    return ctx.unsupported("cast to " + dtypeName(*to) +
                           " is not supported (supported: float32, float64, "
                           "float16, bfloat16, int8-64, uint8-64, bool)");
  OnnxDType from = ctx.inputDType(0);
  OnnxDType target = *to;
  return convertElementwise(
      ctx, {0},
      [=](OpBuilder &b, Location l, ValueRange a, OnnxDType) -> Value {
        return castScalar(b, l, a[0], from, target);
      },
      target, [](auto a) { return a[0]; }, [](auto a) { return a[0]; });
}

static LogicalResult convertIdentity(NodeContext &ctx) {
  if (const ConstTensor *c = ctx.inputConstant(0)) {
    ctx.setOutputConstant(0, *c);
    return success();
  }
  ctx.setOutput(0, ctx.input(0), ctx.inputDType(0));
  return success();
}

static LogicalResult convertConstant(NodeContext &ctx) {
  const onnx::NodeProto &node = ctx.getNode();
  if (node.attribute_size() != 1)
    return ctx.emitError("must have exactly one attribute");
  const onnx::AttributeProto &attr = node.attribute(0);
  ConstTensor value;
  const std::string &name = attr.name();
  if (name == "value") {
    std::string error;
    if (failed(readTensorProto(attr.t(), "", value, error)))
      return ctx.emitError("value ") << error;
  } else if (name == "value_float") {
    value = ConstTensor::zeros(onnx::TensorProto_DataType_FLOAT, {});
    value.floats[0] = attr.f();
  } else if (name == "value_floats") {
    value = ConstTensor::zeros(onnx::TensorProto_DataType_FLOAT,
                               {static_cast<int64_t>(attr.floats_size())});
    for (int i = 0; i < attr.floats_size(); ++i)
      value.floats[i] = attr.floats(i);
  } else if (name == "value_int") {
    value = ConstTensor::zeros(onnx::TensorProto_DataType_INT64, {});
    value.ints[0] = attr.i();
  } else if (name == "value_ints") {
    value = ConstTensor::zeros(onnx::TensorProto_DataType_INT64,
                               {static_cast<int64_t>(attr.ints_size())});
    for (int i = 0; i < attr.ints_size(); ++i)
      value.ints[i] = attr.ints(i);
  } else {
    return ctx.unsupported("attribute '" + name +
                           "' is not supported (supported: value, "
                           "value_float(s), value_int(s); no strings or "
                           "sparse tensors)");
  }
  ctx.setOutputConstant(0, std::move(value));
  return success();
}

} // namespace

void registerElementwiseConverters(ConverterRegistry &r) {
  r["Add"] = convertAdd;
  r["Sub"] = convertSub;
  r["Mul"] = convertMul;
  r["Div"] = convertDiv;
  r["Pow"] = convertPow;
  r["Mod"] = convertMod;
  r["Max"] = convertMaxMin<true>;
  r["Min"] = convertMaxMin<false>;
  r["Sum"] = convertSumMean<false>;
  r["Mean"] = convertSumMean<true>;
  r["Equal"] = convertEqual;
  r["Less"] = convertLess;
  r["LessOrEqual"] = convertLessOrEqual;
  r["Greater"] = convertGreater;
  r["GreaterOrEqual"] = convertGreaterOrEqual;
  r["And"] = convertAnd;
  r["Or"] = convertOr;
  r["Not"] = convertNot;
  r["Where"] = convertWhere;
  r["Abs"] = convertAbs;
  r["Neg"] = convertNeg;
  r["Exp"] = convertExp;
  r["Log"] = convertLog;
  r["Sqrt"] = convertSqrt;
  r["Tanh"] = convertTanh;
  r["Erf"] = convertErf;
  r["Reciprocal"] = convertReciprocal;
  r["Sigmoid"] = convertSigmoid;
  r["Relu"] = convertRelu;
  r["HardSigmoid"] = convertHardSigmoid;
  r["HardSwish"] = convertHardSwish;
  r["LeakyRelu"] = convertLeakyRelu;
  r["PRelu"] = convertPRelu;
  r["Elu"] = convertElu;
  r["Selu"] = convertSelu;
  r["Softplus"] = convertSoftplus;
  r["Softsign"] = convertSoftsign;
  r["Clip"] = convertClip;
  r["Cast"] = convertCast;
  r["Identity"] = convertIdentity;
  r["Dropout"] = convertDropout;
  r["Constant"] = convertConstant;
}

} // namespace autopar::import
