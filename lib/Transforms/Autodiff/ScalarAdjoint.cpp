//===- ScalarAdjoint.cpp - Reverse mode on a structured op's scalar body --===//
//
// The body of a linalg op maps scalars to a scalar with arith and math ops.
// Its derivative is built with the textbook reverse sweep over those ops;
// each rule below is the derivative PyTorch uses for the same function
// (derivatives.yaml), including its choice at kinks: relu's gradient at 0 is
// 0, abs's is 0.
//
//===----------------------------------------------------------------------===//

#include "AdjointBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace autopar::autodiff {
namespace {

/// Emits scalar arithmetic at one insertion point.
struct ScalarEmitter {
  OpBuilder &b;
  Location loc;

  Value constant(Type type, double v) {
    return arith::ConstantOp::create(b, loc, type, b.getFloatAttr(type, v));
  }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return arith::DivFOp::create(b, loc, x, y); }
  Value neg(Value x) { return arith::NegFOp::create(b, loc, x); }
  Value cmp(arith::CmpFPredicate p, Value x, Value y) {
    return arith::CmpFOp::create(b, loc, p, x, y);
  }
  Value select(Value c, Value x, Value y) {
    return arith::SelectOp::create(b, loc, c, x, y);
  }
  /// `g` where `c` holds, else 0.
  Value where(Value c, Value g) {
    return select(c, g, constant(g.getType(), 0.0));
  }
};

using Contributions = SmallVector<std::pair<unsigned, Value>, 3>;

/// The contributions of one op to the adjoints of its operands (by operand
/// number), given its result's adjoint `g` and the mapped operands `x` and
/// result `y`. Returns failure when the op has no rule.
FailureOr<Contributions> scalarRule(Operation *op, ScalarEmitter &e,
                                    ArrayRef<Value> x, Value y, Value g) {
  Contributions c;
  bool handled =
      llvm::TypeSwitch<Operation *, bool>(op)
          .Case([&](arith::AddFOp) {
            c = {{0, g}, {1, g}};
            return true;
          })
          .Case([&](arith::SubFOp) {
            c = {{0, g}, {1, e.neg(g)}};
            return true;
          })
          .Case([&](arith::MulFOp) {
            c = {{0, e.mul(g, x[1])}, {1, e.mul(g, x[0])}};
            return true;
          })
          .Case([&](arith::DivFOp) {
            c = {{0, e.div(g, x[1])}, {1, e.neg(e.div(e.mul(g, y), x[1]))}};
            return true;
          })
          .Case([&](arith::NegFOp) {
            c = {{0, e.neg(g)}};
            return true;
          })
          .Case([&](arith::RemFOp) {
            // fmod(x, y) = x - y * trunc(x / y).
            Value quotient =
                math::TruncOp::create(e.b, e.loc, e.div(x[0], x[1]));
            c = {{0, g}, {1, e.neg(e.mul(g, quotient))}};
            return true;
          })
          .Case<arith::MaximumFOp, arith::MaxNumFOp>([&](Operation *) {
            // relu(x) = max(x, 0) passes the gradient where x > 0 only.
            Value first = e.cmp(arith::CmpFPredicate::OGT, x[0], x[1]);
            c = {{0, e.where(first, g)},
                 {1, e.select(first, e.constant(g.getType(), 0.0), g)}};
            return true;
          })
          .Case<arith::MinimumFOp, arith::MinNumFOp>([&](Operation *) {
            Value first = e.cmp(arith::CmpFPredicate::OLT, x[0], x[1]);
            c = {{0, e.where(first, g)},
                 {1, e.select(first, e.constant(g.getType(), 0.0), g)}};
            return true;
          })
          .Case([&](arith::SelectOp) {
            c = {{1, e.where(x[0], g)},
                 {2, e.select(x[0], e.constant(g.getType(), 0.0), g)}};
            return true;
          })
          .Case([&](arith::ExtFOp) {
            c = {{0, arith::TruncFOp::create(e.b, e.loc, x[0].getType(), g)}};
            return true;
          })
          .Case([&](arith::TruncFOp) {
            c = {{0, arith::ExtFOp::create(e.b, e.loc, x[0].getType(), g)}};
            return true;
          })
          .Case([&](math::ExpOp) {
            c = {{0, e.mul(g, y)}};
            return true;
          })
          .Case([&](math::Exp2Op) {
            c = {{0, e.mul(e.mul(g, y), e.constant(g.getType(), M_LN2))}};
            return true;
          })
          .Case([&](math::ExpM1Op) {
            c = {{0, e.mul(g, e.add(y, e.constant(g.getType(), 1.0)))}};
            return true;
          })
          .Case([&](math::LogOp) {
            c = {{0, e.div(g, x[0])}};
            return true;
          })
          .Case([&](math::Log1pOp) {
            c = {{0, e.div(g, e.add(x[0], e.constant(g.getType(), 1.0)))}};
            return true;
          })
          .Case([&](math::TanhOp) {
            Value one = e.constant(g.getType(), 1.0);
            c = {{0, e.mul(g, e.sub(one, e.mul(y, y)))}};
            return true;
          })
          .Case([&](math::SqrtOp) {
            c = {{0, e.div(e.mul(g, e.constant(g.getType(), 0.5)), y)}};
            return true;
          })
          .Case([&](math::RsqrtOp) {
            // d/dx x^-1/2 = -1/2 x^-3/2 = -1/2 y / x.
            c = {{0, e.mul(e.mul(g, e.constant(g.getType(), -0.5)),
                           e.div(y, x[0]))}};
            return true;
          })
          .Case([&](math::ErfOp) {
            // 2/sqrt(pi) exp(-x^2).
            Value dx =
                math::ExpOp::create(e.b, e.loc, e.neg(e.mul(x[0], x[0])));
            c = {{0, e.mul(g, e.mul(e.constant(g.getType(), M_2_SQRTPI), dx))}};
            return true;
          })
          .Case([&](math::PowFOp) {
            Value one = e.constant(g.getType(), 1.0);
            Value pm1 =
                math::PowFOp::create(e.b, e.loc, x[0], e.sub(x[1], one));
            Value logx = math::LogOp::create(e.b, e.loc, x[0]);
            c = {{0, e.mul(g, e.mul(x[1], pm1))},
                 {1, e.mul(g, e.mul(y, logx))}};
            return true;
          })
          .Case([&](math::AbsFOp) {
            Value zero = e.constant(g.getType(), 0.0);
            Value pos = e.cmp(arith::CmpFPredicate::OGT, x[0], zero);
            Value negative = e.cmp(arith::CmpFPredicate::OLT, x[0], zero);
            c = {{0, e.select(pos, g, e.where(negative, e.neg(g)))}};
            return true;
          })
          .Case([&](math::SinOp) {
            c = {{0, e.mul(g, math::CosOp::create(e.b, e.loc, x[0]))}};
            return true;
          })
          .Case([&](math::CosOp) {
            c = {{0, e.neg(e.mul(g, math::SinOp::create(e.b, e.loc, x[0])))}};
            return true;
          })
          .Case([&](math::FmaOp) {
            c = {{0, e.mul(g, x[1])}, {1, e.mul(g, x[0])}, {2, g}};
            return true;
          })
          // Piecewise constant: zero gradient almost everywhere (PyTorch
          // returns zeros).
          .Case<math::FloorOp, math::CeilOp, math::RoundOp, math::RoundEvenOp,
                math::TruncOp>([&](Operation *) { return true; })
          .Default([](Operation *) { return false; });
  if (!handled)
    return failure();
  return c;
}

} // namespace

FailureOr<Value> buildScalarAdjoint(OpBuilder &b, Location loc,
                                    Block &forwardBody,
                                    const IRMapping &mapping, Value seeded,
                                    Value seed, Value wrt,
                                    std::string &unsupported) {
  ScalarEmitter e{b, loc};
  DenseMap<Value, Value> adjoint;
  adjoint[seeded] = seed;
  auto accumulate = [&](Value v, Value g) {
    if (!isa<FloatType>(v.getType()))
      return;
    Value &slot = adjoint[v];
    slot = slot ? e.add(slot, g) : g;
  };
  for (Operation &op : llvm::reverse(forwardBody.without_terminator())) {
    if (op.getNumResults() != 1)
      continue;
    Value g = adjoint.lookup(op.getResult(0));
    if (!g)
      continue;
    // Ops without float operands (constants, index casts, int-to-float
    // conversions, extracts from tensors that carry no gradient) end the
    // path.
    if (llvm::none_of(op.getOperandTypes(),
                      [](Type t) { return isa<FloatType>(t); }))
      continue;
    SmallVector<Value> x;
    for (Value operand : op.getOperands())
      x.push_back(mapping.lookupOrDefault(operand));
    auto contributions =
        scalarRule(&op, e, x, mapping.lookupOrDefault(op.getResult(0)), g);
    if (failed(contributions)) {
      unsupported = op.getName().getStringRef().str();
      return failure();
    }
    for (auto [index, value] : *contributions)
      accumulate(op.getOperand(index), value);
  }
  return adjoint.lookup(wrt);
}

} // namespace autopar::autodiff
