//===- AttentionPattern.cpp - Recognising attention -----------------------===//
//
// See AttentionPattern.h. The pattern is matched from the output
// contraction inwards, on the importer's ops:
//
//   scores = contraction(Q, K)             (batch..., i, j), sum over d
//   x      = elementwise chain of scores:  * c, / c, + mask, masked_fill
//   p      = softmax_j(x)                   reduce max, exp(x - max),
//                                           reduce sum, divide
//   out    = contraction(p, V)              (batch..., i, e), sum over j
//
// Every intermediate must be used only inside the pattern. A constant scale
// of Q or K before the first contraction joins the scale; K and V repeated
// over the query heads (grouped-query attention) are read from before the
// repeat (readChain, repeatKinds), and the batch dims ordered so that the
// fused op's query head h reads key/value head h / (H / Hkv) (chooseLayout).
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/AttentionPattern.h"

#include "LinalgMatchers.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

#include <vector>

using namespace mlir;
using namespace autopar;
using namespace autopar::detail;

namespace {

/// A contraction whose init is zeros: (batch..., m, n) += lhs * rhs, with
/// one m, n and k dim and the output's dims in that order.
FailureOr<linalg::ContractionDimensions> matchContraction(linalg::LinalgOp op) {
  if (!op || op.getNumDpsInputs() != 2 || op.getNumDpsInits() != 1 ||
      !linalg::isaContractionOpInterface(op))
    return failure();
  if (!isFilledWith(op.getDpsInits()[0], 0.0))
    return failure();
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || dims->m.size() != 1 || dims->n.size() != 1 ||
      dims->k.size() != 1 || dims->batch.empty())
    return failure();
  SmallVector<AffineExpr> expected;
  for (unsigned b : dims->batch)
    expected.push_back(getAffineDimExpr(b, op.getContext()));
  expected.push_back(getAffineDimExpr(dims->m[0], op.getContext()));
  expected.push_back(getAffineDimExpr(dims->n[0], op.getContext()));
  AffineMap out = op.getIndexingMapsArray().back();
  if (out.getResults() != ArrayRef<AffineExpr>(expected))
    return failure();
  return dims;
}

/// A scalar constant an elementwise generic's body reads: an operand
/// defined above it, or the block argument of a constant input.
std::optional<double> bodyScalar(linalg::GenericOp g, Value operand) {
  if (auto arg = dyn_cast<BlockArgument>(operand)) {
    if (arg.getOwner() != g.getBody() ||
        arg.getArgNumber() >= g.getNumDpsInputs())
      return std::nullopt;
    return scalarConstant(g.getDpsInputs()[arg.getArgNumber()]);
  }
  return scalarConstant(operand);
}

/// `v` as `x * c`, `c * x` or `x / c` for a compile-time scalar c > 0 (an
/// elementwise generic, x of v's type read through the identity): x and the
/// factor. (MultiheadAttention scales the query before Q K^T.)
std::optional<std::pair<Value, double>> scaledOperand(Value v) {
  auto g = v.getDefiningOp<linalg::GenericOp>();
  Operation *op = elementwiseOp(g);
  if (!op || !isa<arith::MulFOp, arith::DivFOp>(op))
    return std::nullopt;
  for (auto [index, in] : llvm::enumerate(g.getDpsInputs())) {
    if (in.getType() != v.getType() ||
        !g.getIndexingMapsArray()[index].isIdentity())
      continue;
    Value arg = g.getBody()->getArgument(index);
    std::optional<double> c;
    if (isa<arith::DivFOp>(op)) {
      if (op->getOperand(0) != arg)
        continue;
      c = bodyScalar(g, op->getOperand(1));
      if (c && *c > 0)
        return std::pair(in, 1 / *c);
    } else if (op->getOperand(0) == arg || op->getOperand(1) == arg) {
      c = bodyScalar(g, op->getOperand(op->getOperand(0) == arg ? 1 : 0));
      if (c && *c > 0)
        return std::pair(in, *c);
    }
  }
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Key and value repeated over the query heads
//===----------------------------------------------------------------------===//

/// A read of `source` through `map` (from some op's loops to the source's
/// dims), and the ops looked through to find it.
struct Read {
  Value source;
  AffineMap map;
  SmallVector<Operation *> through;
};

bool sameRead(const Read &a, const Read &b) {
  return a.source == b.source && a.map == b.map;
}

std::optional<Read> stepThrough(const Read &r, int depth);

/// The reads equivalent to `start` found by looking through the ops that
/// move, repeat or select elements without computing on them, `start`
/// first.
SmallVector<Read> readChain(Read start, int depth) {
  SmallVector<Read> chain = {std::move(start)};
  while (chain.size() < 24) {
    std::optional<Read> next = stepThrough(chain.back(), depth);
    if (!next)
      break;
    chain.push_back(std::move(*next));
  }
  return chain;
}

/// One step of readChain: the read of the operand of the op that defines
/// `r.source`. Copy-like linalg ops (transpose, broadcast, the importer's
/// broadcasting generics: Expand), collapse_shape and expand_shape
/// (Reshape, Unsqueeze), extract_slice (Split, Slice), and a concat whose
/// inputs all come from one read alike (repeat_interleave as torch 1.x
/// exports it: a Split, then per piece Unsqueeze, Expand and Reshape, then
/// Concat).
std::optional<Read> stepThrough(const Read &r, int depth) {
  Operation *def = r.source.getDefiningOp();
  if (!def || !isa<RankedTensorType>(r.source.getType()))
    return std::nullopt;
  MLIRContext *ctx = def->getContext();
  unsigned numDims = r.map.getNumDims();
  auto next = [&](Value source, ArrayRef<AffineExpr> exprs) {
    Read read{source, simplifyAffineMap(AffineMap::get(numDims, 0, exprs, ctx)),
              r.through};
    read.through.push_back(def);
    return read;
  };
  auto staticShape = [](Value v) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    return type && type.hasStaticShape();
  };
  if (auto op = dyn_cast<linalg::LinalgOp>(def)) {
    if (op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
        op.getNumLoops() != op.getNumParallelLoops() ||
        op.hasIndexSemantics() || !staticShape(op.getDpsInputs()[0]))
      return std::nullopt;
    Block *body = op.getBlock();
    if (body->getOperations().size() != 1 ||
        body->getTerminator()->getOperand(0) != body->getArgument(0))
      return std::nullopt;
    AffineMap in = op.getIndexingMapsArray()[0];
    AffineMap out = op.getIndexingMapsArray()[1];
    if (!out.isPermutation() ||
        !in.isProjectedPermutation(/*allowZeroInResults=*/true))
      return std::nullopt;
    // The op's loops as r.map's dims read them, then its input.
    AffineMap loops = inversePermutation(out).compose(r.map);
    return next(op.getDpsInputs()[0], in.compose(loops).getResults());
  }
  if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(def)) {
    RankedTensorType src = collapse.getSrcType();
    if (!src.hasStaticShape())
      return std::nullopt;
    SmallVector<AffineExpr> exprs(src.getRank());
    for (auto [k, group] :
         llvm::enumerate(collapse.getReassociationIndices())) {
      AffineExpr e = r.map.getResult(k);
      for (int64_t g = group.size() - 1; g > 0; --g) {
        int64_t size = src.getDimSize(group[g]);
        exprs[group[g]] = e % size;
        e = e.floorDiv(size);
      }
      exprs[group[0]] = e;
    }
    return next(collapse.getSrc(), exprs);
  }
  if (auto expand = dyn_cast<tensor::ExpandShapeOp>(def)) {
    RankedTensorType result = expand.getResultType();
    if (!result.hasStaticShape())
      return std::nullopt;
    SmallVector<AffineExpr> exprs;
    for (const ReassociationIndices &group : expand.getReassociationIndices()) {
      AffineExpr e = getAffineConstantExpr(0, ctx);
      for (int64_t d : group)
        e = e * result.getDimSize(d) + r.map.getResult(d);
      exprs.push_back(e);
    }
    return next(expand.getSrc(), exprs);
  }
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(def)) {
    if (slice.getSourceType().getRank() != slice.getResultType().getRank() ||
        !staticShape(slice.getSource()) ||
        ShapedType::isDynamicShape(slice.getStaticOffsets()) ||
        ShapedType::isDynamicShape(slice.getStaticStrides()))
      return std::nullopt;
    SmallVector<AffineExpr> exprs;
    for (auto [k, e] : llvm::enumerate(r.map.getResults()))
      exprs.push_back(e * slice.getStaticStrides()[k] +
                      slice.getStaticOffsets()[k]);
    return next(slice.getSource(), exprs);
  }
  if (auto concat = dyn_cast<tensor::ConcatOp>(def)) {
    // Each input read where the concat puts it; the first read that every
    // input's chain reaches is the concat's (the chains go on alike from
    // there).
    if (depth > 2 || !staticShape(concat.getResult()))
      return std::nullopt;
    int64_t dim = concat.getDim(), offset = 0;
    SmallVector<SmallVector<Read>> chains;
    for (Value in : concat.getInputs()) {
      if (!staticShape(in))
        return std::nullopt;
      SmallVector<AffineExpr> exprs(r.map.getResults());
      exprs[dim] = exprs[dim] - offset;
      chains.push_back(readChain(
          Read{in,
               simplifyAffineMap(AffineMap::get(numDims, 0, exprs, ctx)),
               {}},
          depth + 1));
      offset += cast<RankedTensorType>(in.getType()).getDimSize(dim);
    }
    for (const Read &candidate : chains.front()) {
      Read found{candidate.source, candidate.map, r.through};
      found.through.push_back(def);
      bool everywhere = true;
      for (const SmallVector<Read> &chain : chains) {
        const Read *same = llvm::find_if(
            chain, [&](const Read &c) { return sameRead(c, candidate); });
        if (same == chain.end()) {
          everywhere = false;
          break;
        }
        llvm::append_range(found.through, same->through);
      }
      if (everywhere)
        return found;
    }
    return std::nullopt;
  }
  return std::nullopt;
}

/// How a key or value read uses the batch loops `batch` (`plain`: the
/// loops it must read as they are, each once: keys and head dim), per
/// batch loop: 1 read as it is, g > 1 read as `loop floordiv g` (a source
/// dim g times smaller), 0 not read. Nullopt when the read is anything
/// else. Source dims of size 1 may be read through any expression (only 0
/// is in bounds).
std::optional<SmallVector<int64_t>> repeatKinds(const Read &r,
                                                ArrayRef<unsigned> batch,
                                                ArrayRef<unsigned> plain,
                                                ArrayRef<int64_t> loopSizes) {
  auto type = dyn_cast<RankedTensorType>(r.source.getType());
  if (!type || !type.hasStaticShape() || !type.getElementType().isF32())
    return std::nullopt;
  SmallVector<int64_t> kinds(batch.size(), 0);
  llvm::SmallDenseSet<unsigned> used;
  for (auto [k, e] : llvm::enumerate(r.map.getResults())) {
    int64_t size = type.getDimSize(k);
    unsigned loop;
    int64_t factor = 1;
    if (auto d = dyn_cast<AffineDimExpr>(e)) {
      loop = d.getPosition();
    } else if (auto div = dyn_cast<AffineBinaryOpExpr>(e);
               div && div.getKind() == AffineExprKind::FloorDiv &&
               isa<AffineDimExpr>(div.getLHS()) &&
               isa<AffineConstantExpr>(div.getRHS())) {
      loop = cast<AffineDimExpr>(div.getLHS()).getPosition();
      factor = cast<AffineConstantExpr>(div.getRHS()).getValue();
      if (factor <= 1)
        return std::nullopt;
    } else if (size == 1) {
      continue;
    } else {
      return std::nullopt;
    }
    if (!used.insert(loop).second || size * factor != loopSizes[loop])
      return std::nullopt;
    if (const unsigned *b = llvm::find(batch, loop); b != batch.end())
      kinds[b - batch.begin()] = factor;
    else if (!llvm::is_contained(plain, loop) || factor != 1)
      return std::nullopt;
  }
  for (unsigned loop : plain)
    if (!used.contains(loop))
      return std::nullopt;
  // One repeated dim at most: the kernels share a key/value head among
  // consecutive query heads.
  if (llvm::count_if(kinds, [](int64_t k) { return k > 1; }) > 1)
    return std::nullopt;
  return kinds;
}

class Matcher {
public:
  explicit Matcher(const AttentionPatternOptions &options) : options(options) {}

  /// Matches the attention whose output contraction is `pv`.
  std::optional<AttentionPattern> match(linalg::LinalgOp pv) {
    AttentionPattern m;
    FailureOr<linalg::ContractionDimensions> pvDims = matchContraction(pv);
    if (failed(pvDims))
      return std::nullopt;
    m.output = pv;
    Value p = pv.getDpsInputs()[0];
    // p is read as (batch..., i, j) with j the summed dim.
    SmallVector<AffineExpr> pExpected;
    for (unsigned b : pvDims->batch)
      pExpected.push_back(getAffineDimExpr(b, pv.getContext()));
    pExpected.push_back(getAffineDimExpr(pvDims->m[0], pv.getContext()));
    pExpected.push_back(getAffineDimExpr(pvDims->k[0], pv.getContext()));
    if (pv.getIndexingMapsArray()[0].getResults() !=
            ArrayRef<AffineExpr>(pExpected) ||
        !p.hasOneUse())
      return std::nullopt;
    m.outBatch.assign(pvDims->batch.begin(), pvDims->batch.end());
    m.oi = pvDims->m[0];
    m.oj = pvDims->k[0];
    m.oe = pvDims->n[0];
    m.value = pv.getDpsInputs()[1];
    m.valueMap = pv.getIndexingMapsArray()[1];

    Value x = matchSoftmax(p, m);
    if (!x || !matchScoreChain(x, m))
      return std::nullopt;
    if (m.scoreBatch.size() != m.outBatch.size())
      return std::nullopt;
    m.batchDims = m.scoreBatch.size();
    if (!chooseLayout(m))
      return std::nullopt;
    auto queryType = cast<RankedTensorType>(m.query.getType());
    auto valueType = cast<RankedTensorType>(m.value.getType());
    int64_t headDim = queryType.getDimSize(
        m.queryMap.getResultPosition(getAffineDimExpr(m.d, pv.getContext()))
            .value());
    int64_t valueDim = valueType.getDimSize(
        m.valueMap.getResultPosition(getAffineDimExpr(m.oe, pv.getContext()))
            .value());
    for (int64_t dim : {headDim, valueDim})
      if ((options.maxHeadDim && dim > options.maxHeadDim) ||
          dim % options.headDimMultiple != 0)
        return std::nullopt;
    // The kernels are f32 (bf16 and f16 come from mixed precision later).
    if (!queryType.getElementType().isF32() ||
        !valueType.getElementType().isF32())
      return std::nullopt;
    return m;
  }

private:
  /// Matches p = softmax over the last dim of x; returns x.
  /// `v` itself, or the row statistic under a keepdims round trip
  /// (ONNX's reductions keep the reduced dim, Softmax's import drops it
  /// again: collapse_shape(expand_shape(r)) of r's own type), whose two
  /// reshapes are appended to `reshapes`, users first.
  static Value throughKeepDims(Value v,
                               SmallVectorImpl<Operation *> &reshapes) {
    auto collapse = v.getDefiningOp<tensor::CollapseShapeOp>();
    if (!collapse || !v.hasOneUse())
      return v;
    auto expand = collapse.getSrc().getDefiningOp<tensor::ExpandShapeOp>();
    if (!expand || !collapse.getSrc().hasOneUse() ||
        expand.getSrc().getType() != v.getType())
      return v;
    reshapes.append({collapse, expand});
    return expand.getSrc();
  }

  Value matchSoftmax(Value p, AttentionPattern &m) {
    auto div = p.getDefiningOp<linalg::GenericOp>();
    Operation *divOp = elementwiseOp(div);
    if (!divOp || !isa<arith::DivFOp>(divOp) || div.getNumDpsInputs() != 2)
      return {};
    unsigned rank = cast<RankedTensorType>(p.getType()).getRank();
    auto maps = div.getIndexingMapsArray();
    Block *body = div.getBody();
    if (!maps[0].isIdentity() || !isDropLast(maps[1], rank) ||
        divOp->getOperand(0) != body->getArgument(0) ||
        divOp->getOperand(1) != body->getArgument(1))
      return {};
    SmallVector<Operation *> sumReshapes, maxReshapes;
    Value e = div.getDpsInputs()[0],
          sum = throughKeepDims(div.getDpsInputs()[1], sumReshapes);
    auto sumOp = matchRowReduce<arith::AddFOp>(sum, e);
    if (!sumOp || !isFilledWith(sumOp.getDpsInits()[0], 0.0) ||
        !sum.hasOneUse())
      return {};
    auto exp = e.getDefiningOp<linalg::GenericOp>();
    if (!exp || exp.getNumDpsInputs() != 2 || !allParallel(exp))
      return {};
    SmallVector<Operation *> expOps = bodyOps(exp);
    auto expMaps = exp.getIndexingMapsArray();
    if (expOps.size() != 2 || !isa<arith::SubFOp>(expOps[0]) ||
        !isa<math::ExpOp>(expOps[1]) ||
        expOps[0]->getOperand(0) != exp.getBody()->getArgument(0) ||
        expOps[0]->getOperand(1) != exp.getBody()->getArgument(1) ||
        expOps[1]->getOperand(0) != expOps[0]->getResult(0) ||
        !expMaps[0].isIdentity() || !isDropLast(expMaps[1], rank) ||
        !expMaps[2].isIdentity() ||
        exp.getBody()->getTerminator()->getOperand(0) !=
            expOps[1]->getResult(0))
      return {};
    // e feeds the sum and the division only.
    for (Operation *user : e.getUsers())
      if (user != sumOp && user != div)
        return {};
    Value x = exp.getDpsInputs()[0],
          max = throughKeepDims(exp.getDpsInputs()[1], maxReshapes);
    auto maxOp = matchRowReduce<arith::MaximumFOp, arith::MaxNumFOp>(max, x);
    if (!maxOp ||
        !isFilledWith(maxOp.getDpsInits()[0], -1e30, /*atMost=*/true) ||
        !max.hasOneUse())
      return {};
    for (Operation *user : x.getUsers())
      if (user != maxOp && user != exp)
        return {};
    m.interior.push_back(div);
    m.interior.append(sumReshapes);
    m.interior.append({sumOp, exp});
    m.interior.append(maxReshapes);
    m.interior.push_back(maxOp);
    return x;
  }

  /// Walks from x back through the elementwise chain to the score
  /// contraction, collecting the scale and the mask.
  bool matchScoreChain(Value x, AttentionPattern &m) {
    Value cur = x;
    // The product of the scales met so far (they come after an additive
    // mask met later, so the mask is scaled by it).
    double scaleAfter = 1;
    bool first = true;
    while (true) {
      if (!first && !cur.hasOneUse())
        return false;
      first = false;
      auto linalgOp = cur.getDefiningOp<linalg::LinalgOp>();
      if (!linalgOp)
        return false;
      if (succeeded(matchContraction(linalgOp)))
        return matchScores(linalgOp, m, scaleAfter);
      auto g = dyn_cast<linalg::GenericOp>(linalgOp.getOperation());
      Operation *op = elementwiseOp(g);
      if (!op || g->getResult(0) != cur)
        return false;
      // The operand carrying the scores: same type, identity map.
      int mainIndex = -1;
      for (auto [index, in] : llvm::enumerate(g.getDpsInputs()))
        if (in.getType() == cur.getType() &&
            g.getIndexingMapsArray()[index].isIdentity() && mainIndex < 0 &&
            (!isa<arith::SelectOp>(op) || !cast<RankedTensorType>(in.getType())
                                               .getElementType()
                                               .isInteger(1)))
          mainIndex = index;
      if (mainIndex < 0)
        return false;
      Value mainArg = g.getBody()->getArgument(mainIndex);
      auto otherScalar = [&](Value operand) { return bodyScalar(g, operand); };
      if (auto mul = dyn_cast<arith::MulFOp>(op)) {
        Value other = mul.getLhs() == mainArg ? mul.getRhs() : mul.getLhs();
        std::optional<double> c = otherScalar(other);
        if (!c || (mul.getLhs() != mainArg && mul.getRhs() != mainArg) ||
            *c <= 0)
          return false;
        (m.mask ? m.scale : scaleAfter) *= *c;
      } else if (auto div = dyn_cast<arith::DivFOp>(op)) {
        std::optional<double> c = otherScalar(div.getRhs());
        if (!c || div.getLhs() != mainArg || *c <= 0)
          return false;
        (m.mask ? m.scale : scaleAfter) /= *c;
      } else if (auto add = dyn_cast<arith::AddFOp>(op)) {
        Value other = add.getLhs() == mainArg ? add.getRhs() : add.getLhs();
        auto arg = dyn_cast<BlockArgument>(other);
        if (m.mask || (add.getLhs() != mainArg && add.getRhs() != mainArg) ||
            !arg || arg.getOwner() != g.getBody() ||
            (int)arg.getArgNumber() == mainIndex ||
            arg.getArgNumber() >= g.getNumDpsInputs())
          return false;
        if (!setMask(m, g.getDpsInputs()[arg.getArgNumber()],
                     g.getIndexingMapsArray()[arg.getArgNumber()], scaleAfter))
          return false;
      } else if (auto select = dyn_cast<arith::SelectOp>(op)) {
        // masked_fill: select(cond, fill, scores) or select(cond, scores,
        // fill), fill a large negative constant.
        bool maskedWhenTrue = select.getFalseValue() == mainArg;
        if (!maskedWhenTrue && select.getTrueValue() != mainArg)
          return false;
        std::optional<double> fill = otherScalar(
            maskedWhenTrue ? select.getTrueValue() : select.getFalseValue());
        auto cond = dyn_cast<BlockArgument>(select.getCondition());
        if (m.mask || !fill || *fill > kAttentionMaskedBelow || !cond ||
            cond.getOwner() != g.getBody() ||
            cond.getArgNumber() >= g.getNumDpsInputs())
          return false;
        Value condition = g.getDpsInputs()[cond.getArgNumber()];
        DenseElementsAttr condValues;
        if (!matchPattern(condition, m_Constant(&condValues))) {
          // Computed at run time (PyTorch's tril buffer is a weight):
          // the additive mask is made from it when the op is built.
          m.maskCondition = condition;
          m.maskFill = *fill;
          m.maskedWhenTrue = maskedWhenTrue;
          if (scaleAfter != 1)
            m.maskFill *= scaleAfter;
          m.mask = condition;
          m.maskMap = g.getIndexingMapsArray()[cond.getArgNumber()];
          m.interior.push_back(g);
          cur = g.getDpsInputs()[mainIndex];
          continue;
        }
        // The additive mask equal to the fill: fill where masked, else 0.
        auto condType = cast<RankedTensorType>(condition.getType());
        auto maskType = condType.clone(Float32Type::get(g.getContext()));
        SmallVector<APFloat> values;
        for (bool c : condValues.getValues<bool>())
          values.push_back(
              APFloat(c == maskedWhenTrue ? static_cast<float>(*fill) : 0.0f));
        m.maskConstant =
            cast<DenseFPElementsAttr>(DenseElementsAttr::get(maskType, values));
        if (!setMask(m, condition,
                     g.getIndexingMapsArray()[cond.getArgNumber()], scaleAfter))
          return false;
      } else {
        return false;
      }
      m.interior.push_back(g);
      cur = g.getDpsInputs()[mainIndex];
    }
  }

  /// Records `mask` (read through `map`; its values `m.maskConstant` when
  /// already known), which the scales in `scaleAfter` multiply: only a
  /// constant can absorb them.
  bool setMask(AttentionPattern &m, Value mask, AffineMap map,
               double scaleAfter) {
    DenseFPElementsAttr constant;
    if (!m.maskConstant && matchPattern(mask, m_Constant(&constant)))
      m.maskConstant = constant;
    if (scaleAfter != 1) {
      if (!m.maskConstant)
        return false;
      m.maskConstant = cast<DenseFPElementsAttr>(m.maskConstant.mapValues(
          m.maskConstant.getElementType(), [&](const APFloat &v) {
            APFloat scaled = v;
            bool lost;
            APFloat factor(scaleAfter);
            factor.convert(v.getSemantics(), APFloat::rmNearestTiesToEven,
                           &lost);
            scaled.multiply(factor, APFloat::rmNearestTiesToEven);
            return scaled.bitcastToAPInt();
          }));
    }
    m.mask = mask;
    m.maskMap = map;
    return true;
  }

  bool matchScores(linalg::LinalgOp qk, AttentionPattern &m,
                   double scaleAfter) {
    FailureOr<linalg::ContractionDimensions> dims = matchContraction(qk);
    m.scale *= scaleAfter;
    m.scores = qk;
    m.scoreBatch.assign(dims->batch.begin(), dims->batch.end());
    m.i = dims->m[0];
    m.j = dims->n[0];
    m.d = dims->k[0];
    m.query = qk.getDpsInputs()[0];
    m.key = qk.getDpsInputs()[1];
    m.queryMap = qk.getIndexingMapsArray()[0];
    m.keyMap = qk.getIndexingMapsArray()[1];
    // A constant scale of the query or the key scales the scores.
    for (Value *operand : {&m.query, &m.key})
      while (std::optional<std::pair<Value, double>> scaled =
                 scaledOperand(*operand)) {
        m.operandOps.push_back(operand->getDefiningOp());
        *operand = scaled->first;
        m.scale *= scaled->second;
      }
    return true;
  }

  /// Reads key and value from before a repeat over the query heads when
  /// both repeat alike, and orders the batch dims for the fused op; false
  /// when the mask cannot be laid out either way.
  bool chooseLayout(AttentionPattern &m) {
    unsigned n = m.batchDims;
    SmallVector<int64_t> scoreSizes = m.scores.getStaticLoopRanges();
    SmallVector<int64_t> outSizes = m.output.getStaticLoopRanges();
    SmallVector<Read> keys = readChain(Read{m.key, m.keyMap, {}}, 0);
    SmallVector<Read> values = readChain(Read{m.value, m.valueMap, {}}, 0);
    SmallVector<int64_t> ones(n, 1);
    // The deepest reads of both that repeat, alike.
    for (const Read &k : llvm::reverse(keys)) {
      std::optional<SmallVector<int64_t>> kinds =
          repeatKinds(k, m.scoreBatch, {m.j, m.d}, scoreSizes);
      if (!kinds || *kinds == ones)
        continue;
      for (const Read &v : llvm::reverse(values)) {
        std::optional<SmallVector<int64_t>> valueKinds =
            repeatKinds(v, m.outBatch, {m.oj, m.oe}, outSizes);
        if (!valueKinds || *valueKinds != *kinds || !layoutBatch(m, *kinds))
          continue;
        m.key = k.source;
        m.keyMap = k.map;
        m.value = v.source;
        m.valueMap = v.map;
        llvm::append_range(m.operandOps, k.through);
        llvm::append_range(m.operandOps, v.through);
        return true;
      }
    }
    return layoutBatch(m, ones);
  }

  /// Orders the batch dims for key/value repeats `kinds` (see kvRepeat):
  /// those read as they are first (the first of them B when there are two
  /// batch dims or more), then the repeated one, then the broadcast ones,
  /// so that query head h reads key/value head h / (H / Hkv). False when
  /// the mask's dims are out of that order, or read only some of H's.
  bool layoutBatch(AttentionPattern &m, ArrayRef<int64_t> kinds) {
    unsigned n = m.batchDims;
    SmallVector<unsigned> order;
    for (auto wanted : {1, 2, 0})
      for (unsigned k = 0; k < n; ++k)
        if (wanted == 2 ? kinds[k] > 1 : kinds[k] == wanted)
          order.push_back(k);
    unsigned outer = n >= 2 && kinds[order[0]] == 1 ? 1 : 0;
    if (m.mask) {
      auto maskType = cast<RankedTensorType>(m.mask.getType());
      Type element = m.maskConstant ? m.maskConstant.getElementType()
                                    : maskType.getElementType();
      if (!m.maskCondition && !element.isF32())
        return false; // The kernels read an f32 mask.
      // Each score dim's place in the fused op's order.
      SmallVector<unsigned> place(n + 2);
      for (auto [k, position] : llvm::enumerate(order))
        place[position] = k;
      place[n] = n;
      place[n + 1] = n + 1;
      int64_t last = -1;
      unsigned headsRead = 0;
      for (auto [r, e] : llvm::enumerate(m.maskMap.getResults())) {
        if (auto c = dyn_cast<AffineConstantExpr>(e)) {
          if (c.getValue() != 0 || maskType.getDimSize(r) != 1)
            return false;
          continue;
        }
        auto d = dyn_cast<AffineDimExpr>(e);
        if (!d || int64_t(place[d.getPosition()]) <= last)
          return false;
        last = place[d.getPosition()];
        if (last >= int64_t(outer) && last < int64_t(n))
          ++headsRead;
      }
      if (headsRead != 0 && headsRead != n - outer)
        return false;
    }
    m.kvRepeat.assign(kinds.begin(), kinds.end());
    m.batchOrder = order;
    m.outerBatch = outer;
    return true;
  }

  const AttentionPatternOptions &options;
};

} // namespace

std::optional<AttentionPattern>
autopar::matchAttentionPattern(Operation *output,
                               const AttentionPatternOptions &options) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(output);
  if (!linalgOp)
    return std::nullopt;
  return Matcher(options).match(linalgOp);
}
