//===- AddCrossEntropyLoss.cpp - A loss for a model that returns logits ---===//
//
// See Passes.td. The loss is PyTorch's F.cross_entropy with its defaults
// (mean over the targets that are not ignore_index): for each position p of
// the logits' leading dims,
//
//   nll[p] = log(sum_c exp(x[p, c] - m[p])) + m[p] - x[p, labels[p]],
//   m[p]   = max_c x[p, c],
//   loss   = sum_p valid[p] * nll[p] / sum_p valid[p].
//
// The label's logit is picked by a one-hot reduction over the classes (as the
// importer's SoftmaxCrossEntropyLoss does), so the adjoint needs no scatter.
// With `fused`, nll[p] (0 where ignored) is autopar.softmax_cross_entropy's.
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/Attributes.h"
#include "autopar/Dialect/AutoparOps.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <limits>

namespace autopar {
#define GEN_PASS_DEF_ADDCROSSENTROPYLOSS
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// Builds structured ops over a logits tensor of shape [P..., C]: the
/// leading dims are the positions, the last the classes.
struct LossBuilder {
  OpBuilder &b;
  Location loc;
  int64_t rank; ///< rank of the logits
  FloatType type;

  MLIRContext *ctx() { return b.getContext(); }
  AffineMap identity() {
    return AffineMap::getMultiDimIdentityMap(rank, ctx());
  }
  /// The map of a per-position tensor inside the logits' loop nest.
  AffineMap positions() {
    SmallVector<AffineExpr> exprs;
    for (int64_t d = 0; d + 1 < rank; ++d)
      exprs.push_back(getAffineDimExpr(d, ctx()));
    return AffineMap::get(rank, 0, exprs, ctx());
  }
  Value constant(double v) {
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, v));
  }
  Value filled(ArrayRef<int64_t> shape, Type element, TypedAttr value) {
    Value empty = tensor::EmptyOp::create(b, loc, shape, element);
    Value v = arith::ConstantOp::create(b, loc, value);
    return linalg::FillOp::create(b, loc, v, empty).getResult(0);
  }

  /// A generic over `maps.size() - 1` inputs and one init, reducing the
  /// loops `reduced` of a `loops`-deep nest.
  Value generic(ArrayRef<Value> inputs, Value init, ArrayRef<AffineMap> maps,
                int64_t loops, ArrayRef<int64_t> reduced,
                function_ref<Value(OpBuilder &, Location, ValueRange)> body) {
    SmallVector<utils::IteratorType> iterators(loops,
                                               utils::IteratorType::parallel);
    for (int64_t d : reduced)
      iterators[d] = utils::IteratorType::reduction;
    return linalg::GenericOp::create(
               b, loc, TypeRange{init.getType()}, inputs, ValueRange{init},
               maps, iterators,
               [&](OpBuilder &nb, Location nl, ValueRange args) {
                 linalg::YieldOp::create(nb, nl, body(nb, nl, args));
               })
        .getResult(0);
  }
};

struct AddCrossEntropyLossPass
    : autopar::impl::AddCrossEntropyLossBase<AddCrossEntropyLossPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError("autopar-add-cross-entropy-loss: no func.func @main");
      return signalPassFailure();
    }
    std::optional<unsigned> index;
    std::string outputs;
    for (unsigned i = 0; i < main.getNumResults(); ++i) {
      auto name =
          main.getResultAttrOfType<StringAttr>(i, autopar::attrs::kOutput);
      if (!name)
        continue;
      outputs += (outputs.empty() ? "'" : ", '") + name.str() + "'";
      if (name.getValue() == output)
        index = i;
      if (name.getValue() == "loss") {
        main.emitError() << "--loss cross-entropy:" << output
                         << ": the model already has an output named 'loss'; "
                            "train it with --loss loss";
        return signalPassFailure();
      }
    }
    if (!index) {
      main.emitError() << "--loss cross-entropy:" << output
                       << ": the model has no output of that name; its "
                          "outputs are "
                       << outputs;
      return signalPassFailure();
    }
    for (BlockArgument arg : main.getArguments())
      if (auto name = main.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                        autopar::attrs::kInput);
          name && name.getValue() == "labels") {
        main.emitError() << "--loss cross-entropy:" << output
                         << ": the model already has an input named "
                            "'labels', the name the added loss's targets take";
        return signalPassFailure();
      }
    auto logitsType = dyn_cast<RankedTensorType>(main.getResultTypes()[*index]);
    auto floatType =
        logitsType ? dyn_cast<FloatType>(logitsType.getElementType()) : nullptr;
    if (!floatType || logitsType.getRank() < 2 ||
        !logitsType.hasStaticShape()) {
      main.emitError() << "--loss cross-entropy:" << output << ": '" << output
                       << "' must be float logits [batch..., classes] of rank "
                          ">= 2, but it is "
                       << main.getResultTypes()[*index];
      return signalPassFailure();
    }

    // The labels: an int64 input shaped like the logits without the classes,
    // after the other inputs.
    ArrayRef<int64_t> shape = logitsType.getShape();
    int64_t rank = shape.size();
    SmallVector<int64_t> positionShape(shape.drop_back());
    Builder attrs(&getContext());
    auto labelsType = RankedTensorType::get(positionShape, attrs.getI64Type());
    unsigned position = main.getNumArguments();
    if (failed(main.insertArgument(
            position, labelsType,
            attrs.getDictionaryAttr(
                {attrs.getNamedAttr(autopar::attrs::kInput,
                                    attrs.getStringAttr("labels")),
                 attrs.getNamedAttr(autopar::attrs::kDType,
                                    attrs.getStringAttr("int64"))}),
            main.getLoc())))
      return signalPassFailure();
    Value labels = main.getArgument(position);

    auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
    OpBuilder b(ret);
    Location loc = NameLoc::get(attrs.getStringAttr("cross-entropy:" + output),
                                main.getLoc());
    LossBuilder l{b, loc, rank, floatType};
    Value logits = ret.getOperand(*index);
    // A tensor-parallel step's forward is annotated already, its outputs
    // gathered whole for the return (autopar-replicate-graph-io). The fused
    // loss reads the logits as their producer left them (a column-parallel
    // LM head's: split by classes), which its sharding model computes
    // without gathering them.
    if (fused)
      while (auto annotation = logits.getDefiningOp<shard::ShardOp>()) {
        if (!annotation.getSrc().getDefiningOp<shard::ShardOp>())
          break;
        logits = annotation.getSrc();
      }
    AffineMap all = l.identity(), perPosition = l.positions();
    SmallVector<int64_t> classDim{rank - 1};

    Value maxima, sums, picked, nll;
    // The fused op's nll is f32: logits of another type (a model exported
    // in f16) keep the unfused loss, computed in their type.
    bool fuse = fused && floatType.isF32();
    if (fuse) {
      // nll[p] and lse[p] in one pass over each row (f32 whatever the
      // logits' type).
      Type f32 = b.getF32Type();
      Value nllInit = tensor::EmptyOp::create(b, loc, positionShape, f32);
      Value lseInit = tensor::EmptyOp::create(b, loc, positionShape, f32);
      auto fusedLoss = autopar::SoftmaxCrossEntropyOp::create(
          b, loc, TypeRange{nllInit.getType(), lseInit.getType()}, logits,
          labels, ValueRange{}, ValueRange{nllInit, lseInit},
          b.getI64IntegerAttr(ignoreIndex));
      nll = fusedLoss.getResult(0);
    } else {
      // m[p] = max_c x[p, c].
      Value lowest = l.filled(
          positionShape, floatType,
          b.getFloatAttr(floatType, -std::numeric_limits<double>::infinity()));
      maxima = l.generic({logits}, lowest, {all, perPosition}, rank, classDim,
                         [](OpBuilder &nb, Location nl, ValueRange a) -> Value {
                           return arith::MaximumFOp::create(nb, nl, a[0], a[1]);
                         });
      // s[p] = sum_c exp(x[p, c] - m[p]); pick[p] = x[p, labels[p]].
      Value zeros =
          l.filled(positionShape, floatType, b.getFloatAttr(floatType, 0.0));
      sums = l.generic({logits, maxima}, zeros, {all, perPosition, perPosition},
                       rank, classDim,
                       [](OpBuilder &nb, Location nl, ValueRange a) -> Value {
                         Value e = math::ExpOp::create(
                             nb, nl, arith::SubFOp::create(nb, nl, a[0], a[1]));
                         return arith::AddFOp::create(nb, nl, a[2], e);
                       });
      picked = l.generic(
          {logits, labels}, zeros, {all, perPosition, perPosition}, rank,
          classDim, [&](OpBuilder &nb, Location nl, ValueRange a) -> Value {
            Value c = arith::IndexCastOp::create(
                nb, nl, nb.getI64Type(),
                linalg::IndexOp::create(nb, nl, rank - 1));
            Value hit = arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::eq,
                                              c, a[1]);
            Value zero = arith::ConstantOp::create(
                nb, nl, nb.getFloatAttr(a[0].getType(), 0.0));
            return arith::AddFOp::create(
                nb, nl, a[2], arith::SelectOp::create(nb, nl, hit, a[0], zero));
          });
    }
    // Over every position: the sum of the valid ones' nll and their count.
    int64_t positions = rank - 1;
    AffineMap each =
        AffineMap::getMultiDimIdentityMap(positions, &getContext());
    AffineMap scalar = AffineMap::get(positions, 0, {}, &getContext());
    SmallVector<int64_t> everyPosition;
    for (int64_t d = 0; d < positions; ++d)
      everyPosition.push_back(d);
    Value scalarZero = l.filled({}, floatType, b.getFloatAttr(floatType, 0.0));
    auto valid = [&](OpBuilder &nb, Location nl, Value label) {
      Value ignored =
          arith::ConstantOp::create(nb, nl, nb.getI64IntegerAttr(ignoreIndex));
      return arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::ne, label,
                                   ignored);
    };
    Value total;
    if (fuse) {
      // nll[p] is 0 at the ignored positions already.
      total =
          l.generic({nll}, scalarZero, {each, scalar}, positions, everyPosition,
                    [](OpBuilder &nb, Location nl, ValueRange a) -> Value {
                      return arith::AddFOp::create(nb, nl, a[1], a[0]);
                    });
    } else {
      total =
          l.generic({maxima, sums, picked, labels}, scalarZero,
                    {each, each, each, each, scalar}, positions, everyPosition,
                    [&](OpBuilder &nb, Location nl, ValueRange a) -> Value {
                      Value lse = arith::AddFOp::create(
                          nb, nl, math::LogOp::create(nb, nl, a[1]), a[0]);
                      Value nll = arith::SubFOp::create(nb, nl, lse, a[2]);
                      Value zero = arith::ConstantOp::create(
                          nb, nl, nb.getFloatAttr(nll.getType(), 0.0));
                      return arith::AddFOp::create(
                          nb, nl, a[4],
                          arith::SelectOp::create(nb, nl, valid(nb, nl, a[3]),
                                                  nll, zero));
                    });
    }
    Value count = l.generic(
        {labels}, scalarZero, {each, scalar}, positions, everyPosition,
        [&](OpBuilder &nb, Location nl, ValueRange a) -> Value {
          Value one = arith::ConstantOp::create(
              nb, nl, nb.getFloatAttr(a[1].getType(), 1.0));
          Value zero = arith::ConstantOp::create(
              nb, nl, nb.getFloatAttr(a[1].getType(), 0.0));
          return arith::AddFOp::create(
              nb, nl, a[1],
              arith::SelectOp::create(nb, nl, valid(nb, nl, a[0]), one, zero));
        });
    Value empty =
        tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{}, floatType);
    AffineMap none = AffineMap::get(0, 0, {}, &getContext());
    Value loss =
        l.generic({total, count}, empty, {none, none, none}, 0, {},
                  [](OpBuilder &nb, Location nl, ValueRange a) -> Value {
                    return arith::DivFOp::create(nb, nl, a[0], a[1]);
                  });

    // The loss joins the results, named "loss".
    SmallVector<Value> results(ret.getOperands());
    results.push_back(loss);
    SmallVector<DictionaryAttr> resultAttrs;
    for (unsigned i = 0; i < main.getNumResults(); ++i)
      resultAttrs.push_back(main.getResultAttrDict(i));
    resultAttrs.push_back(attrs.getDictionaryAttr(
        {attrs.getNamedAttr(autopar::attrs::kOutput,
                            attrs.getStringAttr("loss")),
         attrs.getNamedAttr(autopar::attrs::kDType,
                            main.getResultAttr(*index, autopar::attrs::kDType)
                                ?: attrs.getStringAttr("float32"))}));
    func::ReturnOp::create(b, ret.getLoc(), results);
    ret.erase();
    main.setType(FunctionType::get(&getContext(), main.getArgumentTypes(),
                                   ValueRange(results).getTypes()));
    main.setAllResultAttrs(resultAttrs);
  }
};

} // namespace
