//===- Embedding.cpp - Embedding lookups for partitioning -----------------===//
//
// See Embedding.h; the lookups are recognised by
// autopar/Dialect/EmbeddingLookup.h.
//
//===----------------------------------------------------------------------===//

#include "autopar/Transforms/Embedding.h"

#include "autopar/Dialect/AutoparOps.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

namespace autopar {
#define GEN_PASS_DEF_LOWEREMBEDDINGS
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

Operation *autopar::raiseEmbeddingLookup(Operation *op) {
  std::optional<EmbeddingLookup> lookup = matchEmbeddingLookup(op);
  assert(lookup && isa<linalg::GenericOp>(op) && "not the importer's lookup");
  OpBuilder b(op);
  auto raised = EmbeddingOp::create(
      b, op->getLoc(), cast<RankedTensorType>(op->getResult(0).getType()),
      lookup->table, lookup->ids, /*row_offset=*/Value(), lookup->numRows);
  raised->setDiscardableAttrs(op->getDiscardableAttrDictionary());
  op->getResult(0).replaceAllUsesWith(raised.getResult());
  // Its init only gave the result's shape; left unused, it would be an op
  // that shard-partition cannot annotate.
  Value init = cast<linalg::GenericOp>(op).getDpsInits()[0];
  op->erase();
  if (Operation *def = init.getDefiningOp(); def && isOpTriviallyDead(def))
    def->erase();
  return raised;
}

namespace {

/// The lookup as the importer writes it, plus (with a row offset, or a table
/// holding only some of the rows) zeros for the ids outside the table.
Value lowerEmbedding(OpBuilder &b, autopar::EmbeddingOp op) {
  Location loc = op.getLoc();
  RankedTensorType type = op.getResult().getType();
  RankedTensorType tableType = op.getTable().getType();
  int64_t q = op.getIds().getType().getRank();
  int64_t numRows = op.getNumRows(), rows = tableType.getDimSize(0);
  Value offset = op.getRowOffset();
  bool masked = offset || rows != numRows;
  MLIRContext *ctx = b.getContext();
  SmallVector<AffineExpr> leading;
  for (int64_t d = 0; d < q; ++d)
    leading.push_back(getAffineDimExpr(d, ctx));
  AffineMap maps[] = {AffineMap::get(type.getRank(), 0, leading, ctx),
                      AffineMap::getMultiDimIdentityMap(type.getRank(), ctx)};
  Value init =
      tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
  SmallVector<utils::IteratorType> iterators(type.getRank(),
                                             utils::IteratorType::parallel);
  auto generic = linalg::GenericOp::create(
      b, loc, type, op.getIds(), init, maps, iterators,
      [&](OpBuilder &nb, Location nloc, ValueRange args) {
        auto index = [&](int64_t c) {
          return arith::ConstantIndexOp::create(nb, nloc, c);
        };
        Value zero = index(0);
        Value id =
            arith::IndexCastOp::create(nb, nloc, nb.getIndexType(), args[0]);
        Value negative = arith::CmpIOp::create(
            nb, nloc, arith::CmpIPredicate::slt, id, zero);
        id = arith::SelectOp::create(
            nb, nloc, negative,
            arith::AddIOp::create(nb, nloc, id, index(numRows)), id);
        id = arith::MaxSIOp::create(nb, nloc, id, zero);
        id = arith::MinSIOp::create(nb, nloc, id, index(numRows - 1));
        Value inRange;
        if (masked) {
          if (offset)
            id = arith::SubIOp::create(nb, nloc, id, offset);
          Value above = arith::CmpIOp::create(
              nb, nloc, arith::CmpIPredicate::sge, id, zero);
          Value below = arith::CmpIOp::create(
              nb, nloc, arith::CmpIPredicate::slt, id, index(rows));
          inRange = arith::AndIOp::create(nb, nloc, above, below);
          id = arith::SelectOp::create(nb, nloc, inRange, id, zero);
        }
        SmallVector<Value> coords = {id};
        for (int64_t d = q; d < type.getRank(); ++d)
          coords.push_back(linalg::IndexOp::create(nb, nloc, d));
        Value v = tensor::ExtractOp::create(nb, nloc, op.getTable(), coords);
        if (masked)
          v = arith::SelectOp::create(
              nb, nloc, inRange, v,
              arith::ConstantOp::create(nb, nloc,
                                        nb.getZeroAttr(type.getElementType())));
        linalg::YieldOp::create(nb, nloc, v);
      });
  return generic.getResult(0);
}

struct LowerEmbeddingsPass
    : autopar::impl::LowerEmbeddingsBase<LowerEmbeddingsPass> {
  void runOnOperation() override {
    getOperation().walk([](autopar::EmbeddingOp op) {
      OpBuilder b(op);
      op.getResult().replaceAllUsesWith(lowerEmbedding(b, op));
      op.erase();
    });
  }
};

} // namespace
