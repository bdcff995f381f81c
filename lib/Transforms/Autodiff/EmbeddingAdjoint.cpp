//===- EmbeddingAdjoint.cpp - The table gradient of a lookup --------------===//
//
// An embedding lookup (ONNX Gather on axis 0, Embedding.h) reads its table
// inside the body, so the generic rule cannot transpose it: its adjoint is a
// scatter-add, dTable[v, j...] = sum over i... of dY[i..., j...] where the
// id at i... is v. It is written here as a one-hot reduction,
//
//   dTable[v, j...] = sum_{i...} (clamp(ids[i...]) == v ? dY[i..., j...] : 0)
//
// a linalg.generic over (v, i..., j...) with i... reductions. That costs
// rows x ids x row-size multiply-free adds (the FLOPs of the LM head's
// matmul for a tied vocabulary), but it stays a structured op: it needs no
// atomics, its result is deterministic (PyTorch's CPU embedding backward
// sums in id order too), and splitting v is Megatron's vocabulary-parallel
// embedding gradient with no communication. The id is clamped as the
// forward lookup clamps it, so every gradient lands on the row that was
// read.
//
//===----------------------------------------------------------------------===//

#include "AdjointBuilder.h"
#include "autopar/Transforms/Embedding.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;

namespace autopar::autodiff {

LogicalResult applyEmbeddingAdjoint(Operation *op, AdjointBuilder &adjoints) {
  std::optional<EmbeddingLookup> lookup = matchEmbeddingLookup(op);
  if (!lookup || op->getNumResults() != 1)
    return failure();
  Value dY = adjoints.getAdjoint(op->getResult(0));
  if (!dY || !adjoints.isActive(lookup->table))
    return success();
  auto tableType = cast<RankedTensorType>(lookup->table.getType());
  auto idsType = cast<RankedTensorType>(lookup->ids.getType());
  // The forward reads the whole table (no row offset): the rows are the ids'
  // range.
  if (tableType.getDimSize(0) != lookup->numRows)
    return failure();
  int64_t q = idsType.getRank();
  int64_t rowRank = tableType.getRank() - 1;
  int64_t numLoops = 1 + q + rowRank;
  OpBuilder &b = adjoints.getBuilder();
  Location loc = op->getLoc();
  MLIRContext *ctx = b.getContext();

  // Loops: d0 = v (table row), d1..dq = the ids' dims, then the row's dims.
  SmallVector<AffineExpr> idsExprs, dYExprs, tableExprs{getAffineDimExpr(0, ctx)};
  for (int64_t d = 1; d <= q; ++d) {
    idsExprs.push_back(getAffineDimExpr(d, ctx));
    dYExprs.push_back(getAffineDimExpr(d, ctx));
  }
  for (int64_t d = 1 + q; d < numLoops; ++d) {
    dYExprs.push_back(getAffineDimExpr(d, ctx));
    tableExprs.push_back(getAffineDimExpr(d, ctx));
  }
  SmallVector<AffineMap> maps{AffineMap::get(numLoops, 0, idsExprs, ctx),
                              AffineMap::get(numLoops, 0, dYExprs, ctx),
                              AffineMap::get(numLoops, 0, tableExprs, ctx)};
  SmallVector<utils::IteratorType> iterators(numLoops,
                                             utils::IteratorType::parallel);
  for (int64_t d = 1; d <= q; ++d)
    iterators[d] = utils::IteratorType::reduction;

  int64_t rows = lookup->numRows;
  Type elementType = tableType.getElementType();
  Value init = adjoints.zeros(loc, tableType);
  auto scatter = linalg::GenericOp::create(
      b, loc, TypeRange{tableType}, ValueRange{lookup->ids, dY},
      ValueRange{init}, maps, iterators,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        auto index = [&](int64_t c) {
          return arith::ConstantIndexOp::create(nb, nl, c);
        };
        // The forward's id: negative from the back, clamped into range.
        Value zero = index(0);
        Value id = arith::IndexCastOp::create(nb, nl, nb.getIndexType(),
                                              args[0]);
        Value negative =
            arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::slt, id, zero);
        id = arith::SelectOp::create(nb, nl, negative,
                                     arith::AddIOp::create(nb, nl, id,
                                                           index(rows)),
                                     id);
        id = arith::MaxSIOp::create(nb, nl, id, zero);
        id = arith::MinSIOp::create(nb, nl, id, index(rows - 1));
        Value row = linalg::IndexOp::create(nb, nl, 0);
        Value hit =
            arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::eq, id, row);
        Value picked = arith::SelectOp::create(
            nb, nl, hit, args[1],
            arith::ConstantOp::create(nb, nl, nb.getZeroAttr(elementType)));
        linalg::YieldOp::create(
            nb, nl, ValueRange{arith::AddFOp::create(nb, nl, args[2], picked)});
      });
  adjoints.accumulate(lookup->table, scatter.getResult(0));
  return success();
}

} // namespace autopar::autodiff
