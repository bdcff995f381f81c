//===- SplitColumnReductions.cpp - Column sums in two coalesced stages ----===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "ReductionCombiner.h"
#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

namespace autopar {
#define GEN_PASS_DEF_SPLITCOLUMNREDUCTIONS
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// A column reduction worth splitting: its combiner, the reduction loop to
/// split and into how many parts.
struct ColumnReduction {
  autopar::Combiner combiner;
  unsigned split;
  int64_t parts;
};

/// The input with the most elements (the one whose layout decides how the
/// reduction reads memory), or null.
OpOperand *largestInput(linalg::GenericOp op) {
  OpOperand *largest = nullptr;
  int64_t most = -1;
  for (OpOperand *input : op.getDpsInputOperands()) {
    auto type = dyn_cast<RankedTensorType>(input->get().getType());
    if (!type || !type.hasStaticShape() || type.getRank() == 0)
      continue;
    if (type.getNumElements() > most) {
      most = type.getNumElements();
      largest = input;
    }
  }
  return largest;
}

std::optional<ColumnReduction> matchColumnReduction(linalg::GenericOp op,
                                                    int64_t maxOutputs,
                                                    int64_t minReduced,
                                                    int64_t maxParts) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInits() != 1 ||
      op.hasIndexSemantics() ||
      !llvm::all_of(op.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isProjectedPermutation(); }))
    return std::nullopt;
  SmallVector<utils::IteratorType> kinds = op.getIteratorTypesArray();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  int64_t outputs = 1, reduced = 1;
  unsigned parallel = 0;
  std::optional<unsigned> split;
  for (auto [i, kind] : llvm::enumerate(kinds)) {
    if (ShapedType::isDynamic(ranges[i]))
      return std::nullopt;
    if (linalg::isParallelIterator(kind)) {
      outputs *= ranges[i];
      ++parallel;
      continue;
    }
    reduced *= ranges[i];
    if (!split || ranges[i] > ranges[*split])
      split = i;
  }
  // Full reductions (no parallel loop) are autopar-split-full-reductions'.
  if (!split || parallel == 0 || outputs > maxOutputs || reduced < minReduced)
    return std::nullopt;
  // The output is indexed by every parallel loop and nothing else.
  AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  if (outMap.getNumResults() != parallel)
    return std::nullopt;
  for (AffineExpr e : outMap.getResults())
    if (!linalg::isParallelIterator(
            kinds[cast<AffineDimExpr>(e).getPosition()]))
      return std::nullopt;
  // A column reduction: the largest input's contiguous dim is a parallel
  // loop (a row reduction reads its rows contiguously already).
  OpOperand *largest = largestInput(op);
  if (!largest)
    return std::nullopt;
  AffineMap inMap = op.getMatchingIndexingMap(largest);
  if (inMap.getNumResults() == 0 ||
      !linalg::isParallelIterator(
          kinds[cast<AffineDimExpr>(inMap.getResults().back()).getPosition()]))
    return std::nullopt;
  auto resultType = dyn_cast<RankedTensorType>(op.getResult(0).getType());
  if (!resultType || !isa<FloatType>(resultType.getElementType()))
    return std::nullopt;
  std::optional<autopar::Combiner> combiner = autopar::matchCombiner(op);
  if (!combiner || !autopar::combinerKind(combiner->op))
    return std::nullopt;
  int64_t parts = maxParts;
  while (parts > 1 && ranges[*split] % parts != 0)
    parts /= 2;
  if (parts < 2)
    return std::nullopt;
  return ColumnReduction{*combiner, *split, parts};
}

/// `map` over the old loops as a map over the stage-1 loops: loop `split`
/// becomes (part, rest) at (split, split + 1), later loops move up by one.
AffineMap splitMap(AffineMap map, unsigned split, MLIRContext *ctx) {
  SmallVector<AffineExpr> results;
  for (AffineExpr e : map.getResults()) {
    unsigned d = cast<AffineDimExpr>(e).getPosition();
    if (d == split) {
      results.push_back(getAffineDimExpr(split, ctx));
      results.push_back(getAffineDimExpr(split + 1, ctx));
    } else {
      results.push_back(getAffineDimExpr(d < split ? d : d + 1, ctx));
    }
  }
  return AffineMap::get(map.getNumDims() + 1, 0, results, ctx);
}

void split(linalg::GenericOp op, const ColumnReduction &m) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  MLIRContext *ctx = op.getContext();
  int64_t size = op.getStaticLoopRanges()[m.split];
  int64_t rest = size / m.parts;

  // The inputs that read the split loop, with that dim as [parts, rest].
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    Value value = input->get();
    std::optional<unsigned> at =
        map.getResultPosition(getAffineDimExpr(m.split, ctx));
    if (at) {
      auto type = cast<RankedTensorType>(value.getType());
      SmallVector<int64_t> shape;
      SmallVector<ReassociationIndices> groups;
      for (int64_t i = 0; i < type.getRank(); ++i) {
        ReassociationIndices group{static_cast<int64_t>(shape.size())};
        if (i == static_cast<int64_t>(*at)) {
          shape.append({m.parts, rest});
          group.push_back(group.front() + 1);
        } else {
          shape.push_back(type.getDimSize(i));
        }
        groups.push_back(group);
      }
      value = tensor::ExpandShapeOp::create(
          b, loc, RankedTensorType::get(shape, type.getElementType()), value,
          groups);
    }
    inputs.push_back(value);
    maps.push_back(splitMap(map, m.split, ctx));
  }

  // Stage 1: the same body over the split loops, one partial per part and
  // output element, the part innermost ([outputs..., parts]) so that
  // stage 2 reads each element's partials contiguously.
  auto resultType = cast<RankedTensorType>(op.getResult(0).getType());
  Type element = resultType.getElementType();
  SmallVector<int64_t> partialShape(resultType.getShape());
  partialShape.push_back(m.parts);
  arith::AtomicRMWKind kind = *autopar::combinerKind(m.combiner.op);
  Value identity = arith::ConstantOp::create(
      b, loc, arith::getIdentityValueAttr(kind, element, b, loc));
  Value empty = tensor::EmptyOp::create(b, loc, partialShape, element);
  Value init = linalg::FillOp::create(b, loc, identity, empty).getResult(0);
  AffineMap outMap = op.getMatchingIndexingMap(op.getDpsInitOperand(0));
  AffineMap partialMap = splitMap(outMap, m.split, ctx);
  partialMap = partialMap.insertResult(getAffineDimExpr(m.split, ctx),
                                       partialMap.getNumResults());
  maps.push_back(partialMap);
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  iterators[m.split] = utils::IteratorType::parallel;
  iterators.insert(iterators.begin() + m.split + 1,
                   utils::IteratorType::reduction);
  auto partial =
      linalg::GenericOp::create(b, loc, TypeRange{init.getType()}, inputs,
                                ValueRange{init}, maps, iterators);
  IRMapping mapping;
  op.getRegion().cloneInto(&partial.getRegion(), mapping);

  // Stage 2: each output element's partials combined into the original
  // init.
  int64_t rank = resultType.getRank();
  AffineMap all = AffineMap::getMultiDimIdentityMap(rank + 1, ctx);
  SmallVector<AffineExpr> outExprs;
  for (int64_t d = 0; d < rank; ++d)
    outExprs.push_back(getAffineDimExpr(d, ctx));
  AffineMap out = AffineMap::get(rank + 1, 0, outExprs, ctx);
  SmallVector<utils::IteratorType> combineIterators(
      rank, utils::IteratorType::parallel);
  combineIterators.push_back(utils::IteratorType::reduction);
  const autopar::Combiner &combiner = m.combiner;
  auto total = linalg::GenericOp::create(
      b, loc, op.getResultTypes(), ValueRange{partial.getResult(0)},
      op.getDpsInits(), ArrayRef<AffineMap>{all, out}, combineIterators,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        linalg::YieldOp::create(
            nb, nl, autopar::combineWith(nb, combiner, args[1], args[0]));
      });
  op.getResult(0).replaceAllUsesWith(total.getResult(0));
  op.erase();
}

struct SplitColumnReductionsPass
    : autopar::impl::SplitColumnReductionsBase<SplitColumnReductionsPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, ColumnReduction>> found;
    getOperation().walk([&](linalg::GenericOp op) {
      if (std::optional<ColumnReduction> m =
              matchColumnReduction(op, maxOutputs, minReduced, maxParts))
        found.push_back({op, *m});
    });
    for (auto &[op, m] : found)
      split(op, m);
  }
};

} // namespace
