//===- ZeroSharding.cpp - Which tensors ZeRO shards, and its collectives --===//
//
// See ZeroSharding.h.
//
//===----------------------------------------------------------------------===//

#include "autopar/Transforms/ZeroSharding.h"
#include "autopar/Dialect/Attributes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/MapVector.h"

#include <numeric>

using namespace mlir;

namespace autopar {

bool isZeroSharded(RankedTensorType type, int64_t dp) {
  return dp > 1 && type.hasStaticShape() && type.getRank() >= 1 &&
         type.getDimSize(0) % dp == 0;
}

RankedTensorType zeroShardType(RankedTensorType type, int64_t dp) {
  SmallVector<int64_t> shape(type.getShape());
  shape[0] /= dp;
  return type.clone(shape);
}

FlatSymbolRefAttr getOrCreateReplicaGrid(ModuleOp module, int64_t dp) {
  MLIRContext *ctx = module.getContext();
  auto name = FlatSymbolRefAttr::get(ctx, "autopar_grid");
  SmallVector<int64_t> shape{dp};
  if (auto grid = module.lookupSymbol<shard::GridOp>("autopar_grid")) {
    if (!grid.getShape().empty() && grid.getShape().front() == dp)
      return name;
    // A tensor-parallel replica's grid (planned as one replica, 1 x tp):
    // axis 0 becomes the replicas'.
    shape.append(grid.getShape().begin() + (grid.getShape().empty() ? 0 : 1),
                 grid.getShape().end());
    grid.erase();
  }
  OpBuilder b = OpBuilder::atBlockBegin(module.getBody());
  shard::GridOp::create(b, module.getLoc(), "autopar_grid", shape);
  return name;
}

namespace {

/// All of a rank-k tensor's dims in one group, for collapsing it to 1-D (or
/// expanding 1-D to it).
SmallVector<ReassociationIndices> allDims(int64_t rank) {
  ReassociationIndices group(rank);
  std::iota(group.begin(), group.end(), 0);
  return {group};
}

/// \p v as a 1-D tensor.
Value flatten(OpBuilder &b, Location loc, Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getRank() == 1)
    return v;
  return tensor::CollapseShapeOp::create(b, loc, v, allDims(type.getRank()));
}

/// The 1-D \p flat viewed as \p type.
Value unflatten(OpBuilder &b, Location loc, Value flat, RankedTensorType type) {
  if (type.getRank() == 1)
    return flat;
  return tensor::ExpandShapeOp::create(b, loc, type, flat,
                                       allDims(type.getRank()));
}

/// The values' indices grouped by element type, in first-seen order.
llvm::MapVector<Type, SmallVector<unsigned>> byElementType(ValueRange values) {
  llvm::MapVector<Type, SmallVector<unsigned>> groups;
  for (auto [i, v] : llvm::enumerate(values))
    groups[cast<RankedTensorType>(v.getType()).getElementType()].push_back(i);
  return groups;
}

} // namespace

SmallVector<Value> reduceScatterBlocks(OpBuilder &b, Location loc,
                                       FlatSymbolRefAttr grid, int64_t dp,
                                       ValueRange values) {
  SmallVector<Value> blocks(values.size());
  for (auto &[elementType, members] : byElementType(values)) {
    // Row r of the bucket: block r of every member, side by side.
    SmallVector<int64_t> columns;
    int64_t total = 0;
    for (unsigned i : members) {
      columns.push_back(total);
      total +=
          cast<RankedTensorType>(values[i].getType()).getNumElements() / dp;
    }
    Value bucket = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{dp, total},
                                           elementType);
    for (auto [k, i] : llvm::enumerate(members)) {
      auto type = cast<RankedTensorType>(values[i].getType());
      int64_t width = type.getNumElements() / dp;
      auto rows = RankedTensorType::get({dp, width}, elementType);
      Value view = tensor::ExpandShapeOp::create(
          b, loc, rows, flatten(b, loc, values[i]),
          SmallVector<ReassociationIndices>{{0, 1}});
      bucket = tensor::InsertSliceOp::create(
          b, loc, view, bucket,
          getAsIndexOpFoldResult(b.getContext(),
                                 ArrayRef<int64_t>{0, columns[k]}),
          getAsIndexOpFoldResult(b.getContext(), ArrayRef<int64_t>{dp, width}),
          getAsIndexOpFoldResult(b.getContext(), ArrayRef<int64_t>{1, 1}));
    }
    Value mine = shard::ReduceScatterOp::create(
        b, loc, RankedTensorType::get({1, total}, elementType), grid,
        b.getDenseI16ArrayAttr({0}), bucket,
        shard::ReductionKindAttr::get(b.getContext(),
                                      shard::ReductionKind::Sum),
        b.getIndexAttr(0));
    for (auto [k, i] : llvm::enumerate(members)) {
      auto type = cast<RankedTensorType>(values[i].getType());
      RankedTensorType blockType = zeroShardType(type, dp);
      int64_t width = blockType.getNumElements();
      Value flat = tensor::ExtractSliceOp::create(
          b, loc, RankedTensorType::get({width}, elementType), mine,
          getAsIndexOpFoldResult(b.getContext(),
                                 ArrayRef<int64_t>{0, columns[k]}),
          getAsIndexOpFoldResult(b.getContext(), ArrayRef<int64_t>{1, width}),
          getAsIndexOpFoldResult(b.getContext(), ArrayRef<int64_t>{1, 1}));
      blocks[i] = unflatten(b, loc, flat, blockType);
    }
  }
  return blocks;
}

SmallVector<Value> allGatherBlocks(OpBuilder &b, Location loc,
                                   FlatSymbolRefAttr grid, int64_t dp,
                                   ValueRange blocks) {
  SmallVector<Value> wholes(blocks.size());
  for (auto &[elementType, members] : byElementType(blocks)) {
    SmallVector<int64_t> columns;
    int64_t total = 0;
    for (unsigned i : members) {
      columns.push_back(total);
      total += cast<RankedTensorType>(blocks[i].getType()).getNumElements();
    }
    Value bucket = tensor::EmptyOp::create(b, loc, ArrayRef<int64_t>{1, total},
                                           elementType);
    for (auto [k, i] : llvm::enumerate(members)) {
      int64_t width =
          cast<RankedTensorType>(blocks[i].getType()).getNumElements();
      bucket = tensor::InsertSliceOp::create(
          b, loc, flatten(b, loc, blocks[i]), bucket,
          getAsIndexOpFoldResult(b.getContext(),
                                 ArrayRef<int64_t>{0, columns[k]}),
          getAsIndexOpFoldResult(b.getContext(), ArrayRef<int64_t>{1, width}),
          getAsIndexOpFoldResult(b.getContext(), ArrayRef<int64_t>{1, 1}));
    }
    Value all = shard::AllGatherOp::create(
        b, loc, RankedTensorType::get({dp, total}, elementType), grid,
        b.getDenseI16ArrayAttr({0}), bucket, b.getIndexAttr(0));
    for (auto [k, i] : llvm::enumerate(members)) {
      auto blockType = cast<RankedTensorType>(blocks[i].getType());
      int64_t width = blockType.getNumElements();
      SmallVector<int64_t> shape(blockType.getShape());
      shape[0] *= dp;
      auto wholeType = blockType.clone(shape);
      Value rows = tensor::ExtractSliceOp::create(
          b, loc, RankedTensorType::get({dp, width}, elementType), all,
          getAsIndexOpFoldResult(b.getContext(),
                                 ArrayRef<int64_t>{0, columns[k]}),
          getAsIndexOpFoldResult(b.getContext(), ArrayRef<int64_t>{dp, width}),
          getAsIndexOpFoldResult(b.getContext(), ArrayRef<int64_t>{1, 1}));
      Value flat = tensor::CollapseShapeOp::create(
          b, loc, rows, SmallVector<ReassociationIndices>{{0, 1}});
      wholes[i] = unflatten(b, loc, flat, wholeType);
    }
  }
  return wholes;
}

void gatherZeroBlockAtUses(func::FuncOp f, BlockArgument param,
                           Operation *forwardEnd, FlatSymbolRefAttr grid,
                           int64_t dataParallel) {
  Block &body = f.getBody().front();
  bool split = forwardEnd && forwardEnd->getBlock() == &body;
  // The uses of `value` in the forward (phase 0) or the backward (1),
  // each with the op of the body that holds it.
  using Uses = SmallVector<std::pair<Operation *, OpOperand *>>;
  auto usesIn = [&](Value value, int phase) {
    Uses uses;
    for (OpOperand &use : value.getUses()) {
      Operation *owner = body.findAncestorOpInBlock(*use.getOwner());
      bool forward =
          split && (owner == forwardEnd || owner->isBeforeInBlock(forwardEnd));
      if (forward == (phase == 0))
        uses.push_back({owner, &use});
    }
    return uses;
  };
  // Gathers the whole just before the first of `uses` and makes them
  // read it (nothing without uses).
  auto gatherFor = [&](const Uses &uses) -> Value {
    if (uses.empty())
      return {};
    Operation *first = uses.front().first;
    for (auto &[owner, use] : uses)
      if (owner->isBeforeInBlock(first))
        first = owner;
    OpBuilder b(first);
    Value whole = allGatherBlocks(b, param.getLoc(), grid, dataParallel,
                                  ValueRange{Value(param)})[0];
    for (auto &[owner, use] : uses)
      use->set(whole);
    return whole;
  };
  Uses forwardUses = usesIn(param, 0), backwardUses = usesIn(param, 1);
  param.setType(
      zeroShardType(cast<RankedTensorType>(param.getType()), dataParallel));
  Value forwardWhole = gatherFor(forwardUses);
  if (!forwardWhole) {
    gatherFor(backwardUses);
    return;
  }
  // The backward's adjoints read the forward's operands: the whole, or a
  // view of it the forward made (a transposed weight). Those uses read
  // the backward's gather, and the views are made again from it, so that
  // the whole is not held from the forward to the backward.
  SmallVector<Value> views{forwardWhole};
  SmallVector<Operation *> viewOps;
  for (size_t i = 0; i < views.size(); ++i)
    for (auto &[owner, use] : usesIn(views[i], 0)) {
      Operation *op = use->getOwner();
      if (op != owner ||
          !isa<linalg::TransposeOp, linalg::BroadcastOp,
               tensor::CollapseShapeOp, tensor::ExpandShapeOp>(op) ||
          op->getNumResults() != 1 || llvm::is_contained(viewOps, op))
        continue;
      // The view's input, not its init.
      if (auto dps = dyn_cast<DestinationStyleOpInterface>(op);
          dps && dps.isDpsInit(use))
        continue;
      viewOps.push_back(op);
      views.push_back(op->getResult(0));
    }
  for (Value view : views)
    backwardUses.append(usesIn(view, 1));
  if (backwardUses.empty())
    return;
  Operation *first = backwardUses.front().first;
  for (auto &[owner, use] : backwardUses)
    if (owner->isBeforeInBlock(first))
      first = owner;
  OpBuilder b(first);
  // The ops of the backward's gather are marked as a recomputation, so that
  // CSE does not merge them back into the forward's identical ones (which
  // would hold the whole, or the bucket it is gathered from, from the
  // forward to the backward after all: autopar-run's activation
  // measurement found it).
  struct Inserted : OpBuilder::Listener {
    void notifyOperationInserted(Operation *op,
                                 OpBuilder::InsertPoint) override {
      ops.push_back(op);
    }
    SmallVector<Operation *> ops;
  } inserted;
  b.setListener(&inserted);
  Value backwardWhole = allGatherBlocks(b, param.getLoc(), grid, dataParallel,
                                        ValueRange{Value(param)})[0];
  b.setListener(nullptr);
  for (Operation *op : inserted.ops)
    op->setAttr(autopar::attrs::kRecomputed, b.getUnitAttr());
  IRMapping again;
  again.map(forwardWhole, backwardWhole);
  again.map(Value(param), backwardWhole);
  llvm::sort(viewOps,
             [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
  for (Operation *op : viewOps)
    b.clone(*op, again);
  for (auto &[owner, use] : backwardUses)
    use->set(again.lookup(use->get()));
}

void readZeroBlocks(func::FuncOp f, int64_t dataParallel,
                    llvm::function_ref<bool(BlockArgument)> isBlock) {
  FlatSymbolRefAttr grid =
      getOrCreateReplicaGrid(f->getParentOfType<ModuleOp>(), dataParallel);
  Builder b(f.getContext());
  for (BlockArgument arg : f.getArguments()) {
    if (!isBlock(arg))
      continue;
    f.setArgAttr(arg.getArgNumber(), attrs::kZeroBlocks,
                 b.getI64IntegerAttr(dataParallel));
    gatherZeroBlockAtUses(f, arg, /*forwardEnd=*/nullptr, grid, dataParallel);
  }
  f.setType(FunctionType::get(f.getContext(),
                              f.getBody().front().getArgumentTypes(),
                              f.getResultTypes()));
}

} // namespace autopar
