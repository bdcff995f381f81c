//===- LossScaling.cpp - fp16's loss scale in a training step -------------===//
//
// See LossScaling.h.
//
//===----------------------------------------------------------------------===//

#include "autopar/Transforms/LossScaling.h"

#include "autopar/Dialect/Attributes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

Value autopar::scaleLoss(func::FuncOp main, Value loss, double scale,
                         bool dynamic) {
  MLIRContext *ctx = main.getContext();
  Builder attrs(ctx);
  auto type = cast<RankedTensorType>(loss.getType());
  OpBuilder b(ctx);
  b.setInsertionPointAfterValue(loss);
  Location loc = loss.getLoc();

  // The grid of the plan's annotations, if any.
  FlatSymbolRefAttr grid;
  main.walk([&](shard::ShardingOp sharding) {
    grid = sharding.getGridAttr();
    return WalkResult::interrupt();
  });
  auto whole = [&](Value value) -> Value {
    if (!grid)
      return value;
    Value replicated =
        shard::ShardingOp::create(
            b, loc, grid,
            ArrayRef<shard::GridAxesAttr>{shard::GridAxesAttr::get(ctx, {})})
            .getResult();
    return shard::ShardOp::create(b, loc, value, replicated,
                                  /*annotate_for_users=*/false)
        .getResult();
  };

  Value scaleValue = arith::ConstantOp::create(
      b, loc, b.getFloatAttr(type.getElementType(), scale));
  Value offset;
  if (dynamic) {
    unsigned position = 0;
    for (BlockArgument arg : main.getArguments())
      if (main.getArgAttr(arg.getArgNumber(), attrs::kParameter))
        position = arg.getArgNumber() + 1;
    auto f32Scalar = RankedTensorType::get({}, b.getF32Type());
    (void)main.insertArgument(
        position, f32Scalar,
        attrs.getDictionaryAttr(
            {attrs.getNamedAttr(attrs::kOptimizerState,
                                attrs.getStringAttr("scale_offset")),
             attrs.getNamedAttr(attrs::kStateOf,
                                attrs.getStringAttr("loss_scaler")),
             attrs.getNamedAttr(attrs::kDType,
                                attrs.getStringAttr("float32"))}),
        loc);
    offset = main.getArgument(position);
  }
  Value init =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  AffineMap scalarMap = AffineMap::get(type.getRank(), 0, {}, ctx);
  SmallVector<Value> inputs{loss};
  SmallVector<AffineMap> maps{id};
  if (offset) {
    inputs.push_back(whole(offset));
    maps.push_back(scalarMap);
  }
  maps.push_back(id);
  auto scaled = linalg::GenericOp::create(
      b, loc, TypeRange{type}, inputs, ValueRange{init}, maps,
      SmallVector<utils::IteratorType>(type.getRank(),
                                       utils::IteratorType::parallel),
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        Value s = scaleValue;
        if (offset) {
          Value o = args[1];
          if (o.getType() != s.getType())
            o = arith::TruncFOp::create(nb, nl, s.getType(), o);
          s = arith::AddFOp::create(nb, nl, s, o);
        }
        linalg::YieldOp::create(
            nb, nl, ValueRange{arith::MulFOp::create(nb, nl, args[0], s)});
      });
  scaled->setAttr(attrs::kLossScaling, b.getUnitAttr());
  return whole(scaled.getResult(0));
}
