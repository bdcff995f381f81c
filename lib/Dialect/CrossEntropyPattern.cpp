//===- CrossEntropyPattern.cpp - Recognising softmax cross-entropy --------===//
//
// See CrossEntropyPattern.h. Matched from the pick inwards, on the ops
// lib/Import/Loss.cpp and buildSoftmax (lib/Import/Normalization.cpp) write:
//
//   max    = reduce_max_c(x)                 init -inf
//   e      = exp(x - max)                    elementwise
//   sum    = reduce_sum_c(e)                 init 0
//   logp   = (x - max) - log(sum)            elementwise
//   picked = sum_c (c == label) ? logp : 0   init 0, reduction over c
//
// with c the last loop of every op, and possibly a collapse_shape merging
// the positions between logp and the pick. The intermediates must be used only
// inside the pattern; x may have other users (a model that also returns its
// logits).
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/CrossEntropyPattern.h"

#include "LinalgMatchers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace autopar;
using namespace autopar::detail;

namespace {

/// `v` seen through a reduction's kept dim dropped again
/// (collapse_shape(expand_shape(r)) of r's own type: ONNX's reductions keep
/// the reduced dim, and a micro-batch's step is imported without the
/// canonicalization that folds the pair), or `v` itself.
Value throughKeepDims(Value v) {
  auto collapse = v.getDefiningOp<tensor::CollapseShapeOp>();
  auto expand = collapse
                    ? collapse.getSrc().getDefiningOp<tensor::ExpandShapeOp>()
                    : nullptr;
  if (!expand || expand.getSrc().getType() != v.getType())
    return v;
  return expand.getSrc();
}

/// Whether every op that reads `v`, looking through reshapes (collected in
/// `reshapes`, users last), is in `users`.
bool onlyUsedBy(Value v, ArrayRef<Operation *> users,
                SmallVectorImpl<Operation *> &reshapes) {
  for (Operation *user : v.getUsers()) {
    if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(user)) {
      reshapes.push_back(user);
      if (!onlyUsedBy(user->getResult(0), users, reshapes))
        return false;
    } else if (!llvm::is_contained(users, user)) {
      return false;
    }
  }
  return true;
}

/// The maps of an elementwise generic over `rank` loops whose inputs are
/// read through the identity (`full`) or without the last loop (rows).
bool hasRowMaps(linalg::GenericOp g, ArrayRef<bool> full, unsigned rank) {
  SmallVector<AffineMap> maps = g.getIndexingMapsArray();
  if (maps.size() != full.size() + 1 || !maps.back().isIdentity())
    return false;
  for (auto [map, isFull] : llvm::zip_equal(ArrayRef(maps).drop_back(), full))
    if (isFull ? !map.isIdentity() : !isDropLast(map, rank))
      return false;
  return true;
}

/// The pick's body: `out + select(index(c) == label, logp, 0)`.
bool isOneHotPickBody(linalg::GenericOp pick, unsigned classLoop) {
  Block *body = pick.getBody();
  Value logp = body->getArgument(0), label = body->getArgument(1),
        acc = body->getArgument(2);
  auto add =
      body->getTerminator()->getOperand(0).getDefiningOp<arith::AddFOp>();
  if (!add)
    return false;
  Value other = add.getLhs() == acc   ? add.getRhs()
                : add.getRhs() == acc ? add.getLhs()
                                      : Value();
  auto select = other ? other.getDefiningOp<arith::SelectOp>() : nullptr;
  if (!select || select.getTrueValue() != logp ||
      scalarConstant(select.getFalseValue()) != 0.0)
    return false;
  auto cmp = select.getCondition().getDefiningOp<arith::CmpIOp>();
  if (!cmp || cmp.getPredicate() != arith::CmpIPredicate::eq)
    return false;
  Value index = cmp.getLhs() == label   ? cmp.getRhs()
                : cmp.getRhs() == label ? cmp.getLhs()
                                        : Value();
  auto cast = index ? index.getDefiningOp<arith::IndexCastOp>() : nullptr;
  auto loop = cast ? cast.getIn().getDefiningOp<linalg::IndexOp>() : nullptr;
  return loop && loop.getDim() == classLoop;
}

} // namespace

std::optional<CrossEntropyPattern>
autopar::matchCrossEntropyPattern(Operation *op) {
  auto pick = dyn_cast<linalg::GenericOp>(op);
  if (!pick || pick.getNumDpsInputs() != 2 || pick.getNumDpsInits() != 1 ||
      pick->getNumResults() != 1)
    return std::nullopt;
  unsigned rank = pick.getNumLoops();
  SmallVector<utils::IteratorType> iterators = pick.getIteratorTypesArray();
  if (rank < 2 || pick.getNumReductionLoops() != 1 ||
      iterators.back() != utils::IteratorType::reduction)
    return std::nullopt;
  SmallVector<AffineMap> maps = pick.getIndexingMapsArray();
  if (!maps[0].isIdentity() || !isDropLast(maps[1], rank) ||
      !isDropLast(maps[2], rank) || !isFilledWith(pick.getDpsInits()[0], 0.0) ||
      !isOneHotPickBody(pick, rank - 1))
    return std::nullopt;
  Value logp = pick.getDpsInputs()[0], labels = pick.getDpsInputs()[1];
  if (!isa<IntegerType>(getElementTypeOrSelf(labels.getType())) ||
      !logp.hasOneUse())
    return std::nullopt;
  // The log-softmax may be computed before a reshape that merges the
  // positions (`logits.view(-1, V)`, moved below the log-softmax by
  // autopar-sink-merging-reshapes).
  CrossEntropyPattern m;
  if (auto collapse = logp.getDefiningOp<tensor::CollapseShapeOp>()) {
    SmallVector<ReassociationIndices> groups =
        collapse.getReassociationIndices();
    int64_t srcRank = collapse.getSrcType().getRank();
    if (groups.back() != ReassociationIndices{srcRank - 1} ||
        !collapse.getSrc().hasOneUse())
      return std::nullopt;
    m.logitsReassociation = groups;
    m.logSoftmax.push_back(collapse);
    logp = collapse.getSrc();
  }
  rank = cast<RankedTensorType>(logp.getType()).getRank();

  // logp = (x - max) - log(sum).
  auto logpOp = logp.getDefiningOp<linalg::GenericOp>();
  if (!logpOp || logpOp.getNumDpsInputs() != 3 || !allParallel(logpOp) ||
      !hasRowMaps(logpOp, {true, false, false}, rank))
    return std::nullopt;
  {
    Block *body = logpOp.getBody();
    SmallVector<Operation *> ops = bodyOps(logpOp);
    auto result =
        body->getTerminator()->getOperand(0).getDefiningOp<arith::SubFOp>();
    if (ops.size() != 3 || !result)
      return std::nullopt;
    auto shifted = result.getLhs().getDefiningOp<arith::SubFOp>();
    auto log = result.getRhs().getDefiningOp<math::LogOp>();
    if (!shifted || !log || shifted.getLhs() != body->getArgument(0) ||
        shifted.getRhs() != body->getArgument(1) ||
        log.getOperand() != body->getArgument(2))
      return std::nullopt;
  }
  Value x = logpOp.getDpsInputs()[0],
        max = throughKeepDims(logpOp.getDpsInputs()[1]),
        sum = throughKeepDims(logpOp.getDpsInputs()[2]);

  // sum = reduce_sum(exp(x - max)).
  auto exp = sum.getDefiningOp<linalg::LinalgOp>()
                 ? sum.getDefiningOp<linalg::LinalgOp>().getDpsInputs()[0]
                 : Value();
  linalg::LinalgOp sumOp =
      exp ? matchRowReduce<arith::AddFOp>(sum, exp) : linalg::LinalgOp();
  SmallVector<Operation *> reshapes;
  if (!sumOp || !isFilledWith(sumOp.getDpsInits()[0], 0.0) ||
      !exp.hasOneUse() || !onlyUsedBy(sum, {logpOp}, reshapes))
    return std::nullopt;
  auto expOp = exp.getDefiningOp<linalg::GenericOp>();
  if (!expOp || expOp.getNumDpsInputs() != 2 || !allParallel(expOp) ||
      !hasRowMaps(expOp, {true, false}, rank) || expOp.getDpsInputs()[0] != x ||
      throughKeepDims(expOp.getDpsInputs()[1]) != max)
    return std::nullopt;
  {
    Block *body = expOp.getBody();
    auto e = body->getTerminator()->getOperand(0).getDefiningOp<math::ExpOp>();
    auto shifted = e ? e.getOperand().getDefiningOp<arith::SubFOp>() : nullptr;
    if (bodyOps(expOp).size() != 2 || !shifted ||
        shifted.getLhs() != body->getArgument(0) ||
        shifted.getRhs() != body->getArgument(1))
      return std::nullopt;
  }

  // max = reduce_max(x), from -inf (or any fill at most -1e30).
  linalg::LinalgOp maxOp =
      matchRowReduce<arith::MaximumFOp, arith::MaxNumFOp>(max, x);
  if (!maxOp || !isFilledWith(maxOp.getDpsInits()[0], -1e30, /*atMost=*/true) ||
      !onlyUsedBy(max, {expOp, logpOp}, reshapes))
    return std::nullopt;

  m.pick = pick;
  m.logSoftmax.push_back(logpOp);
  // The keep-dims reshapes, users first.
  m.logSoftmax.append(reshapes.rbegin(), reshapes.rend());
  m.logSoftmax.append({sumOp, expOp, maxOp});
  m.logits = x;
  m.labels = labels;
  return m;
}
