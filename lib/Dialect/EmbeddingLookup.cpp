//===- EmbeddingLookup.cpp - Recognising embedding lookups ----------------===//
//
// See EmbeddingLookup.h. The importer's lookup (Shape.cpp, buildGather) is a
// linalg.generic over the result whose body normalizes and clamps the id,
//   i = min(max(id < 0 ? id + V : id, 0), V - 1),
// and yields tensor.extract %table[i, linalg.index q, ...]. Matching that
// exact form keeps a raised op's semantics those of the importer's.
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/EmbeddingLookup.h"

#include "autopar/Dialect/AutoparOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;

namespace {

/// Whether `v` is the index constant `c`.
bool isIndex(Value v, int64_t c) {
  APInt value;
  return matchPattern(v, m_ConstantInt(&value)) && value.getSExtValue() == c;
}

/// Whether `v` is the importer's clamped id: min(max(x < 0 ? x + rows : x,
/// 0), rows - 1) with x = index_cast(`id`).
bool isClampedId(Value v, Value id, int64_t rows) {
  auto min = v.getDefiningOp<arith::MinSIOp>();
  if (!min || !isIndex(min.getRhs(), rows - 1))
    return false;
  auto max = min.getLhs().getDefiningOp<arith::MaxSIOp>();
  if (!max || !isIndex(max.getRhs(), 0))
    return false;
  auto select = max.getLhs().getDefiningOp<arith::SelectOp>();
  if (!select)
    return false;
  auto cast = select.getFalseValue().getDefiningOp<arith::IndexCastOp>();
  auto cmp = select.getCondition().getDefiningOp<arith::CmpIOp>();
  auto add = select.getTrueValue().getDefiningOp<arith::AddIOp>();
  return cast && cast.getIn() == id && cmp &&
         cmp.getPredicate() == arith::CmpIPredicate::slt &&
         cmp.getLhs() == cast.getResult() && isIndex(cmp.getRhs(), 0) && add &&
         add.getLhs() == cast.getResult() && isIndex(add.getRhs(), rows);
}

std::optional<autopar::EmbeddingLookup>
matchGatherGeneric(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() != 0)
    return std::nullopt;
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto extract = yield.getOperand(0).getDefiningOp<tensor::ExtractOp>();
  if (!extract ||
      op.getRegion().isAncestor(extract.getTensor().getParentRegion()))
    return std::nullopt;
  Value table = extract.getTensor();
  auto tableType = cast<RankedTensorType>(table.getType());
  auto ids = dyn_cast<RankedTensorType>(op.getDpsInputs()[0].getType());
  auto result = cast<RankedTensorType>(op->getResult(0).getType());
  if (!ids || tableType.isDynamicDim(0) ||
      result.getRank() != ids.getRank() + tableType.getRank() - 1)
    return std::nullopt;
  int64_t q = ids.getRank();
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  MLIRContext *ctx = op.getContext();
  SmallVector<AffineExpr> leading;
  for (int64_t d = 0; d < q; ++d)
    leading.push_back(getAffineDimExpr(d, ctx));
  if (maps[0] != AffineMap::get(result.getRank(), 0, leading, ctx) ||
      !maps[1].isIdentity())
    return std::nullopt;
  // table[i, linalg.index q, linalg.index q + 1, ...]
  ValueRange coords = extract.getIndices();
  if (!isClampedId(coords[0], body.getArgument(0), tableType.getDimSize(0)))
    return std::nullopt;
  for (auto [k, coord] : llvm::enumerate(coords.drop_front())) {
    auto index = coord.getDefiningOp<linalg::IndexOp>();
    if (!index || int64_t(index.getDim()) != q + int64_t(k))
      return std::nullopt;
  }
  return autopar::EmbeddingLookup{table, op.getDpsInputs()[0],
                                  tableType.getDimSize(0)};
}

} // namespace

std::optional<autopar::EmbeddingLookup>
autopar::matchEmbeddingLookup(Operation *op) {
  if (auto embedding = dyn_cast<EmbeddingOp>(op))
    return EmbeddingLookup{embedding.getTable(), embedding.getIds(),
                           static_cast<int64_t>(embedding.getNumRows())};
  if (auto generic = dyn_cast<linalg::GenericOp>(op))
    return matchGatherGeneric(generic);
  return std::nullopt;
}
