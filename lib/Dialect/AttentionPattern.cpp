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
// Every intermediate must be used only inside the pattern.
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/AttentionPattern.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

#include <vector>

using namespace mlir;
using namespace autopar;

namespace {

/// The ops of a generic's body before its yield, but constants.
SmallVector<Operation *> bodyOps(linalg::GenericOp op) {
  SmallVector<Operation *> ops;
  for (Operation &inner : op.getBody()->without_terminator())
    if (!isa<arith::ConstantOp>(inner))
      ops.push_back(&inner);
  return ops;
}

bool allParallel(linalg::LinalgOp op) {
  return op.getNumLoops() == op.getNumParallelLoops();
}

/// A float scalar known at compile time: a constant, or a splat or 0-d
/// tensor constant.
std::optional<double> scalarConstant(Value v) {
  Attribute attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return std::nullopt;
  if (auto f = dyn_cast<FloatAttr>(attr))
    return f.getValueAsDouble();
  if (auto dense = dyn_cast<DenseFPElementsAttr>(attr))
    if (dense.isSplat())
      return dense.getSplatValue<APFloat>().convertToDouble();
  return std::nullopt;
}

/// Whether `init` is a linalg.fill of `value` (or, with `atMost`, of a
/// value at most `value`).
bool isFilledWith(Value init, double value, bool atMost = false) {
  auto fill = init.getDefiningOp<linalg::FillOp>();
  if (!fill)
    return false;
  std::optional<double> c = scalarConstant(fill.getInputs()[0]);
  return c && (atMost ? *c <= value : *c == value);
}

/// The identity map over `n` dims minus its last result.
bool isDropLast(AffineMap map, unsigned n) {
  if (map.getNumDims() != n || map.getNumResults() != n - 1)
    return false;
  for (unsigned i = 0; i + 1 < n; ++i)
    if (map.getResult(i) != getAffineDimExpr(i, map.getContext()))
      return false;
  return true;
}

/// The single body op of an elementwise generic with identity output that
/// yields that op's result, or null.
Operation *elementwiseOp(linalg::GenericOp g) {
  if (!g || g.getNumDpsInits() != 1 || !allParallel(g) ||
      !g.getIndexingMapsArray().back().isIdentity())
    return nullptr;
  SmallVector<Operation *> ops = bodyOps(g);
  if (ops.size() != 1 || ops[0]->getNumResults() != 1)
    return nullptr;
  auto yield = cast<linalg::YieldOp>(g.getBody()->getTerminator());
  if (yield.getOperand(0) != ops[0]->getResult(0))
    return nullptr;
  return ops[0];
}

/// The row reduction `linalg.reduce ins(x) dimensions = [last]` whose body is
/// a single `OpTy`.
template <typename... OpTys>
linalg::ReduceOp matchRowReduce(Value result, Value input) {
  auto reduce = result.getDefiningOp<linalg::ReduceOp>();
  if (!reduce || reduce.getInputs().size() != 1 ||
      reduce.getInputs()[0] != input)
    return {};
  auto inputType = cast<RankedTensorType>(input.getType());
  if (reduce.getDimensions() != ArrayRef<int64_t>{inputType.getRank() - 1})
    return {};
  Block &body = reduce.getCombiner().front();
  if (body.getOperations().size() != 2 || !isa<OpTys...>(body.front()))
    return {};
  return reduce;
}

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
      dims->k.size() != 1 || dims->batch.empty() || dims->batch.size() > 2)
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
    Value e = div.getDpsInputs()[0], sum = div.getDpsInputs()[1];
    auto sumOp = matchRowReduce<arith::AddFOp>(sum, e);
    if (!sumOp || !isFilledWith(sumOp.getInits()[0], 0.0) || !sum.hasOneUse())
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
    Value x = exp.getDpsInputs()[0], max = exp.getDpsInputs()[1];
    auto maxOp = matchRowReduce<arith::MaximumFOp, arith::MaxNumFOp>(max, x);
    if (!maxOp || !isFilledWith(maxOp.getInits()[0], -1e30, /*atMost=*/true) ||
        !max.hasOneUse())
      return {};
    for (Operation *user : x.getUsers())
      if (user != maxOp && user != exp)
        return {};
    m.interior.append({div, sumOp, exp, maxOp});
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
      auto otherScalar = [&](Value operand) -> std::optional<double> {
        if (auto arg = dyn_cast<BlockArgument>(operand)) {
          if (arg.getOwner() != g.getBody() ||
              arg.getArgNumber() >= g.getNumDpsInputs())
            return std::nullopt;
          return scalarConstant(g.getDpsInputs()[arg.getArgNumber()]);
        }
        return scalarConstant(operand);
      };
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

//===----------------------------------------------------------------------===//
// Compile-time masks
//===----------------------------------------------------------------------===//

namespace {

/// Evaluates tensors computed from constants, fills and index arithmetic
/// alone (a causal mask built from Trilu, Where and comparisons is such a
/// tensor when the importer does not fold it), as doubles in row-major
/// order. Results are cached per value: a model's layers share one mask.
class ConstantTensorEvaluator {
public:
  explicit ConstantTensorEvaluator(int64_t maxElements)
      : maxElements(maxElements) {}

  const std::vector<double> *evaluate(Value v) {
    auto it = cache.find(v);
    if (it != cache.end())
      return it->second ? &*it->second : nullptr;
    std::optional<std::vector<double>> values = compute(v);
    auto &slot = cache[v];
    slot = std::move(values);
    return slot ? &*slot : nullptr;
  }

private:
  std::optional<std::vector<double>> compute(Value v) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type || !type.hasStaticShape() || type.getNumElements() > maxElements)
      return std::nullopt;
    Operation *def = v.getDefiningOp();
    if (!def)
      return std::nullopt;
    DenseElementsAttr dense;
    if (matchPattern(v, m_Constant(&dense)))
      return fromAttr(dense);
    if (auto fill = dyn_cast<linalg::FillOp>(def)) {
      std::optional<double> c = scalar(fill.getInputs()[0]);
      if (!c)
        return std::nullopt;
      return std::vector<double>(type.getNumElements(), *c);
    }
    if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(def)) {
      const std::vector<double> *src = evaluate(def->getOperand(0));
      return src ? std::optional(*src) : std::nullopt;
    }
    if (auto generic = dyn_cast<linalg::GenericOp>(def))
      return evaluateGeneric(generic, type);
    return std::nullopt;
  }

  static std::optional<std::vector<double>> fromAttr(DenseElementsAttr attr) {
    std::vector<double> values;
    values.reserve(attr.getNumElements());
    Type e = attr.getElementType();
    if (isa<FloatType>(e)) {
      for (APFloat f : attr.getValues<APFloat>())
        values.push_back(f.convertToDouble());
    } else if (e.isInteger(1)) {
      for (bool b : attr.getValues<bool>())
        values.push_back(b);
    } else if (isa<IntegerType, IndexType>(e)) {
      for (APInt i : attr.getValues<APInt>())
        values.push_back(double(i.getSExtValue()));
    } else {
      return std::nullopt;
    }
    return values;
  }

  /// A scalar constant (float, integer, index or i1).
  static std::optional<double> scalar(Value v) {
    Attribute attr;
    if (!matchPattern(v, m_Constant(&attr)))
      return std::nullopt;
    if (auto f = dyn_cast<FloatAttr>(attr))
      return f.getValueAsDouble();
    if (auto i = dyn_cast<IntegerAttr>(attr))
      return i.getType().isInteger(1) ? double(i.getValue().getBoolValue())
                                      : double(i.getInt());
    if (auto d = dyn_cast<DenseElementsAttr>(attr); d && d.isSplat()) {
      std::optional<std::vector<double>> values = fromAttr(d);
      if (values && !values->empty())
        return values->front();
    }
    return std::nullopt;
  }

  /// One body op, compiled: what it computes from which slots.
  struct Instruction {
    Operation *op;
    SmallVector<int> operands;
  };

  std::optional<std::vector<double>> evaluateGeneric(linalg::GenericOp g,
                                                     RankedTensorType type) {
    if (g.getNumDpsInits() != 1 || g.getNumParallelLoops() != g.getNumLoops() ||
        !g.getIndexingMapsArray().back().isIdentity())
      return std::nullopt;
    Block *body = g.getBody();
    if (!body->getArgument(body->getNumArguments() - 1).use_empty())
      return std::nullopt; // Reads its init.
    // Inputs, evaluated, with their maps' results (dims or constants).
    SmallVector<const std::vector<double> *> inputs;
    SmallVector<SmallVector<int64_t>> strides;
    for (auto [k, in] : llvm::enumerate(g.getDpsInputs())) {
      const std::vector<double> *values = evaluate(in);
      auto inType = dyn_cast<RankedTensorType>(in.getType());
      if (!values || !inType)
        return std::nullopt;
      inputs.push_back(values);
      // The input's row-major stride per loop (0 for broadcast loops).
      SmallVector<int64_t> perLoop(g.getNumLoops(), 0);
      AffineMap map = g.getIndexingMapsArray()[k];
      int64_t stride = 1;
      for (int64_t r = int64_t(map.getNumResults()) - 1; r >= 0; --r) {
        AffineExpr e = map.getResult(r);
        if (auto d = dyn_cast<AffineDimExpr>(e))
          perLoop[d.getPosition()] += stride;
        else if (auto c = dyn_cast<AffineConstantExpr>(e);
                 !c || c.getValue() != 0)
          return std::nullopt;
        stride *= inType.getDimSize(r);
      }
      strides.push_back(perLoop);
    }
    // Slots: the block's input arguments, then one per body op; values
    // defined above the body are constants folded into their slot.
    llvm::DenseMap<Value, int> slotOf;
    SmallVector<double> constants; // Slot values that never change.
    int numInputs = g.getNumDpsInputs();
    for (int k = 0; k < numInputs; ++k)
      slotOf[body->getArgument(k)] = k;
    int next = numInputs;
    SmallVector<Instruction> program;
    SmallVector<std::pair<int, double>> constantSlots;
    auto slotFor = [&](Value operand) -> std::optional<int> {
      if (auto it = slotOf.find(operand); it != slotOf.end())
        return it->second;
      std::optional<double> c = scalar(operand);
      if (!c)
        return std::nullopt;
      constantSlots.push_back({next, *c});
      slotOf[operand] = next;
      return next++;
    };
    for (Operation &op : body->without_terminator()) {
      if (!isa<arith::ConstantOp, linalg::IndexOp, arith::AddFOp, arith::SubFOp,
               arith::MulFOp, arith::DivFOp, arith::NegFOp, arith::MaximumFOp,
               arith::MinimumFOp, arith::AddIOp, arith::SubIOp, arith::MulIOp,
               arith::CmpFOp, arith::CmpIOp, arith::SelectOp, arith::ExtFOp,
               arith::TruncFOp, arith::SIToFPOp, arith::UIToFPOp,
               arith::IndexCastOp, arith::ExtUIOp, arith::ExtSIOp>(op) ||
          op.getNumResults() != 1)
        return std::nullopt;
      Instruction inst{&op, {}};
      if (!isa<arith::ConstantOp>(op))
        for (Value operand : op.getOperands()) {
          std::optional<int> slot = slotFor(operand);
          if (!slot)
            return std::nullopt;
          inst.operands.push_back(*slot);
        }
      if (auto c = dyn_cast<arith::ConstantOp>(op)) {
        std::optional<double> value = scalar(c.getResult());
        if (!value)
          return std::nullopt;
        constantSlots.push_back({next, *value});
        slotOf[op.getResult(0)] = next++;
        continue;
      }
      slotOf[op.getResult(0)] = next++;
      program.push_back(inst);
    }
    std::optional<int> yielded = slotFor(body->getTerminator()->getOperand(0));
    if (!yielded)
      return std::nullopt;
    std::vector<double> slots(next, 0.0);
    for (auto [slot, value] : constantSlots)
      slots[slot] = value;
    ArrayRef<int64_t> shape = type.getShape();
    int64_t rank = shape.size(), n = type.getNumElements();
    std::vector<double> out(n);
    SmallVector<int64_t> index(rank, 0);
    SmallVector<int64_t> offsets(numInputs, 0);
    for (int64_t p = 0; p < n; ++p) {
      for (int k = 0; k < numInputs; ++k)
        slots[k] = (*inputs[k])[offsets[k]];
      for (const Instruction &inst : program) {
        auto in = [&](int i) { return slots[inst.operands[i]]; };
        double r = 0;
        Operation *op = inst.op;
        if (auto idx = dyn_cast<linalg::IndexOp>(op))
          r = double(index[idx.getDim()]);
        else if (isa<arith::AddFOp, arith::AddIOp>(op))
          r = in(0) + in(1);
        else if (isa<arith::SubFOp, arith::SubIOp>(op))
          r = in(0) - in(1);
        else if (isa<arith::MulFOp, arith::MulIOp>(op))
          r = in(0) * in(1);
        else if (isa<arith::DivFOp>(op))
          r = in(0) / in(1);
        else if (isa<arith::NegFOp>(op))
          r = -in(0);
        else if (isa<arith::MaximumFOp>(op))
          r = std::max(in(0), in(1));
        else if (isa<arith::MinimumFOp>(op))
          r = std::min(in(0), in(1));
        else if (isa<arith::SelectOp>(op))
          r = in(0) != 0 ? in(1) : in(2);
        else if (auto cmp = dyn_cast<arith::CmpFOp>(op))
          r = compareFloats(cmp.getPredicate(), in(0), in(1));
        else if (auto cmp = dyn_cast<arith::CmpIOp>(op))
          r = compareInts(cmp.getPredicate(), in(0), in(1));
        else
          r = in(0); // Conversions keep the value (masks are 0, 1, -big).
        slots[slotOf[op->getResult(0)]] = r;
      }
      out[p] = slots[*yielded];
      // Next point, row-major, and the inputs' offsets with it.
      for (int64_t d = rank - 1; d >= 0; --d) {
        for (int k = 0; k < numInputs; ++k)
          offsets[k] += strides[k][d];
        if (++index[d] < shape[d])
          break;
        for (int k = 0; k < numInputs; ++k)
          offsets[k] -= strides[k][d] * shape[d];
        index[d] = 0;
      }
    }
    return out;
  }

  static double compareFloats(arith::CmpFPredicate p, double a, double b) {
    using P = arith::CmpFPredicate;
    switch (p) {
    case P::OEQ:
    case P::UEQ:
      return a == b;
    case P::ONE:
    case P::UNE:
      return a != b;
    case P::OLT:
    case P::ULT:
      return a < b;
    case P::OLE:
    case P::ULE:
      return a <= b;
    case P::OGT:
    case P::UGT:
      return a > b;
    case P::OGE:
    case P::UGE:
      return a >= b;
    case P::AlwaysTrue:
      return 1;
    default:
      return 0;
    }
  }

  static double compareInts(arith::CmpIPredicate p, double a, double b) {
    using P = arith::CmpIPredicate;
    switch (p) {
    case P::eq:
      return a == b;
    case P::ne:
      return a != b;
    case P::slt:
    case P::ult:
      return a < b;
    case P::sle:
    case P::ule:
      return a <= b;
    case P::sgt:
    case P::ugt:
      return a > b;
    case P::sge:
    case P::uge:
      return a >= b;
    }
    return 0;
  }

  int64_t maxElements;
  llvm::DenseMap<Value, std::optional<std::vector<double>>> cache;
};

} // namespace

bool autopar::isCausalMask(const AttentionPattern &m) {
  // Only a mask over (i, j): every other dim of it a unit broadcast.
  if (!m.mask)
    return false;
  SmallVector<unsigned> scoreLoops(m.scoreBatch);
  scoreLoops.append({m.i, m.j});
  unsigned iDim = scoreLoops.size() - 2, jDim = scoreLoops.size() - 1;
  auto maskType = cast<RankedTensorType>(m.mask.getType());
  SmallVector<unsigned> dims;
  for (auto [r, e] : llvm::enumerate(m.maskMap.getResults())) {
    if (auto d = dyn_cast<AffineDimExpr>(e)) {
      dims.push_back(d.getPosition());
      continue;
    }
    if (maskType.getDimSize(r) != 1)
      return false;
  }
  if (dims != SmallVector<unsigned>{iDim, jDim})
    return false;
  auto scoreType = cast<RankedTensorType>(m.scores->getResult(0).getType());
  int64_t rows = scoreType.getDimSize(scoreType.getRank() - 2);
  int64_t cols = scoreType.getShape().back();
  std::vector<double> values;
  if (m.maskConstant) {
    for (APFloat f : m.maskConstant.getValues<APFloat>())
      values.push_back(f.convertToDouble());
  } else {
    // Big enough for sequence 8192; a mask computed from weights or inputs
    // does not evaluate.
    ConstantTensorEvaluator evaluator(int64_t(1) << 26);
    const std::vector<double> *computed =
        evaluator.evaluate(m.maskCondition ? m.maskCondition : m.mask);
    if (!computed)
      return false;
    values = *computed;
    if (m.maskCondition)
      for (double &v : values)
        v = (v != 0) == m.maskedWhenTrue ? m.maskFill : 0.0;
  }
  if (int64_t(values.size()) != rows * cols)
    return false;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double v = values[r * cols + c];
      if (c <= r ? v != 0.0 : v > kAttentionMaskedBelow)
        return false;
    }
  return true;
}
