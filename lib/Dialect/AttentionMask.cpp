//===- AttentionMask.cpp - Causal masks known at compile time -------------===//
//
// isCausalMask (AttentionPattern.h): a mask's values come from a constant, or
// from evaluating, at compile time, the generics that compute it from
// constants, fills and index arithmetic alone (an exported Trilu and Where,
// which the importer leaves as ops).
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/AttentionPattern.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

#include <memory>
#include <vector>

using namespace mlir;
using namespace autopar;

namespace {

/// Evaluates tensors computed from constants, fills and index arithmetic
/// alone (a causal mask built from Trilu, Where and comparisons is such a
/// tensor when the importer does not fold it), as doubles in row-major
/// order (a splat as its one value). Results are cached per value: a
/// model's layers share one mask. A reshape shares its source's values: at
/// sequence 4096 a mask is 128 MiB of doubles, and copying (and faulting in)
/// such buffers was most of the planner's time on large models.
class ConstantTensorEvaluator {
public:
  explicit ConstantTensorEvaluator(int64_t maxElements)
      : maxElements(maxElements) {}

  const std::vector<double> *evaluate(Value v) {
    return evaluateShared(v).get();
  }

  /// Calls `row` with each row (innermost dim) of `v` in row-major order,
  /// while it returns true. A generic the evaluator compiles runs row by row
  /// and is never materialized (a mask at sequence 4096 would be 128 MiB of
  /// doubles). False when `v` cannot be evaluated or `row` stopped.
  bool forEachRow(Value v, llvm::function_ref<bool(ArrayRef<double>)> row) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type || !type.hasStaticShape() || type.getNumElements() > maxElements)
      return false;
    ArrayRef<int64_t> shape = type.getShape();
    int64_t rank = shape.size(), n = type.getNumElements();
    int64_t width = rank ? shape.back() : 1;
    auto generic = v.getDefiningOp<linalg::GenericOp>();
    std::unique_ptr<RowProgram> prog =
        generic && generic->getNumResults() == 1 && !cache.count(v)
            ? compileGeneric(generic, shape)
            : nullptr;
    if (!prog) {
      const std::vector<double> *values = evaluate(v);
      if (!values)
        return false;
      // A splat is kept as its one value.
      std::vector<double> splat;
      if (values->size() == 1 && n != 1) {
        splat.assign(width, values->front());
        for (int64_t p = 0; p < n; p += width)
          if (!row(splat))
            return false;
        return true;
      }
      for (int64_t p = 0; p < n; p += width)
        if (!row(ArrayRef<double>(*values).slice(p, width)))
          return false;
      return true;
    }
    SmallVector<int64_t> index(rank, 0);
    for (int64_t p = 0; p < n; p += width) {
      runRow(*prog, index, rank, width);
      if (!row(prog->slots[prog->yielded]))
        return false;
      for (int64_t d = rank - 2; d >= 0; --d) {
        if (++index[d] < shape[d])
          break;
        index[d] = 0;
      }
    }
    return true;
  }

private:
  using Values = std::shared_ptr<const std::vector<double>>;

  Values evaluateShared(Value v) {
    auto it = cache.find(v);
    if (it != cache.end())
      return it->second;
    Values values = compute(v);
    cache[v] = values;
    return values;
  }

  static Values share(std::optional<std::vector<double>> values) {
    return values
               ? std::make_shared<const std::vector<double>>(std::move(*values))
               : nullptr;
  }

  Values compute(Value v) {
    auto type = dyn_cast<RankedTensorType>(v.getType());
    if (!type || !type.hasStaticShape() || type.getNumElements() > maxElements)
      return nullptr;
    Operation *def = v.getDefiningOp();
    if (!def)
      return nullptr;
    DenseElementsAttr dense;
    if (matchPattern(v, m_Constant(&dense)))
      return share(fromAttr(dense));
    if (auto fill = dyn_cast<linalg::FillOp>(def)) {
      std::optional<double> c = scalar(fill.getInputs()[0]);
      if (!c)
        return nullptr;
      // A splat is kept as its one value: readers broadcast it.
      return share(std::vector<double>(1, *c));
    }
    if (isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(def))
      return evaluateShared(def->getOperand(0));
    if (auto generic = dyn_cast<linalg::GenericOp>(def))
      return share(evaluateGeneric(generic, type));
    return nullptr;
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
  /// What an instruction computes, decided once per op rather than per
  /// point (a mask at sequence 4096 is 16M points).
  enum class Kind {
    Index,
    Add,
    Sub,
    Mul,
    Div,
    Neg,
    Max,
    Min,
    Select,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
    Equal,
    NotEqual,
    True,
    False,
    UnsignedCompare,
    Copy
  };

  struct Instruction {
    Operation *op;
    SmallVector<int> operands;
    Kind kind = Kind::Copy;
    int result = 0;
    int64_t dim = 0; ///< linalg.index's dim
  };

  /// A comparison's kind: orderedness does not matter (no NaN in a mask).
  static Kind compareKind(Operation *op) {
    if (auto cmp = dyn_cast<arith::CmpFOp>(op)) {
      using P = arith::CmpFPredicate;
      switch (cmp.getPredicate()) {
      case P::OEQ:
      case P::UEQ:
        return Kind::Equal;
      case P::ONE:
      case P::UNE:
        return Kind::NotEqual;
      case P::OLT:
      case P::ULT:
        return Kind::Less;
      case P::OLE:
      case P::ULE:
        return Kind::LessEqual;
      case P::OGT:
      case P::UGT:
        return Kind::Greater;
      case P::OGE:
      case P::UGE:
        return Kind::GreaterEqual;
      case P::AlwaysTrue:
        return Kind::True;
      default:
        return Kind::False;
      }
    }
    using P = arith::CmpIPredicate;
    switch (cast<arith::CmpIOp>(op).getPredicate()) {
    case P::eq:
      return Kind::Equal;
    case P::ne:
      return Kind::NotEqual;
    case P::slt:
      return Kind::Less;
    case P::sle:
      return Kind::LessEqual;
    case P::sgt:
      return Kind::Greater;
    case P::sge:
      return Kind::GreaterEqual;
    default:
      return Kind::UnsignedCompare;
    }
  }

  static Kind kindOf(Operation *op) {
    if (isa<linalg::IndexOp>(op))
      return Kind::Index;
    if (isa<arith::AddFOp, arith::AddIOp>(op))
      return Kind::Add;
    if (isa<arith::SubFOp, arith::SubIOp>(op))
      return Kind::Sub;
    if (isa<arith::MulFOp, arith::MulIOp>(op))
      return Kind::Mul;
    if (isa<arith::DivFOp>(op))
      return Kind::Div;
    if (isa<arith::NegFOp>(op))
      return Kind::Neg;
    if (isa<arith::MaximumFOp>(op))
      return Kind::Max;
    if (isa<arith::MinimumFOp>(op))
      return Kind::Min;
    if (isa<arith::SelectOp>(op))
      return Kind::Select;
    if (isa<arith::CmpFOp, arith::CmpIOp>(op))
      return compareKind(op);
    return Kind::Copy; // Conversions keep the value (masks are 0, 1, -big).
  }

  /// A generic compiled to run one row (the innermost dim) at a time. An
  /// input made by a single-use elementwise generic read through the same
  /// loops is not materialized: its program runs row by row inside this
  /// one's (a mask's Trilu, Cast and Where, each 128 MiB of doubles at
  /// sequence 4096, become one pass).
  struct RowProgram {
    struct Source {
      const std::vector<double> *values = nullptr; ///< materialized, or
      std::unique_ptr<RowProgram> inlined;         ///< computed per row
      SmallVector<int64_t> strides;                ///< per loop (values)
    };
    SmallVector<Source> sources;
    SmallVector<Instruction> program;
    int yielded = 0;
    /// One row per slot: the block's inputs, then one per body op;
    /// constants filled once.
    std::vector<std::vector<double>> slots;
  };

  /// Compiles \p g, all-parallel with an identity result map over
  /// \p shape; null when it cannot be evaluated.
  std::unique_ptr<RowProgram> compileGeneric(linalg::GenericOp g,
                                             ArrayRef<int64_t> shape) {
    if (g.getNumDpsInits() != 1 || g.getNumParallelLoops() != g.getNumLoops() ||
        !g.getIndexingMapsArray().back().isIdentity() ||
        int64_t(g.getNumLoops()) != int64_t(shape.size()))
      return nullptr;
    Block *body = g.getBody();
    if (!body->getArgument(body->getNumArguments() - 1).use_empty())
      return nullptr; // Reads its init.
    auto compiled = std::make_unique<RowProgram>();
    for (auto [k, in] : llvm::enumerate(g.getDpsInputs())) {
      AffineMap map = g.getIndexingMapsArray()[k];
      RowProgram::Source source;
      if (auto producer = in.getDefiningOp<linalg::GenericOp>();
          producer && in.hasOneUse() && map.isIdentity() &&
          producer.getNumResults() == 1)
        source.inlined = compileGeneric(producer, shape);
      if (!source.inlined) {
        source.values = evaluate(in);
        auto inType = dyn_cast<RankedTensorType>(in.getType());
        if (!source.values || !inType)
          return nullptr;
        // The input's row-major stride per loop (0 for broadcast loops).
        source.strides.assign(g.getNumLoops(), 0);
        int64_t stride = 1;
        for (int64_t r = int64_t(map.getNumResults()) - 1; r >= 0; --r) {
          AffineExpr e = map.getResult(r);
          if (auto d = dyn_cast<AffineDimExpr>(e))
            source.strides[d.getPosition()] += stride;
          else if (auto c = dyn_cast<AffineConstantExpr>(e);
                   !c || c.getValue() != 0)
            return nullptr;
          stride *= inType.getDimSize(r);
        }
        // A splat (one value for a larger tensor) is read at every point.
        if (source.values->size() == 1)
          std::fill(source.strides.begin(), source.strides.end(), 0);
      }
      compiled->sources.push_back(std::move(source));
    }
    // Slots: the block's input arguments, then one per body op; values
    // defined above the body are constants folded into their slot.
    llvm::DenseMap<Value, int> slotOf;
    int numInputs = g.getNumDpsInputs();
    for (int k = 0; k < numInputs; ++k)
      slotOf[body->getArgument(k)] = k;
    int next = numInputs;
    SmallVector<Instruction> &program = compiled->program;
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
        return nullptr;
      Instruction inst{&op, {}};
      if (!isa<arith::ConstantOp>(op))
        for (Value operand : op.getOperands()) {
          std::optional<int> slot = slotFor(operand);
          if (!slot)
            return nullptr;
          inst.operands.push_back(*slot);
        }
      if (auto c = dyn_cast<arith::ConstantOp>(op)) {
        std::optional<double> value = scalar(c.getResult());
        if (!value)
          return nullptr;
        constantSlots.push_back({next, *value});
        slotOf[op.getResult(0)] = next++;
        continue;
      }
      inst.kind = kindOf(&op);
      if (auto idx = dyn_cast<linalg::IndexOp>(op))
        inst.dim = idx.getDim();
      inst.result = next;
      slotOf[op.getResult(0)] = next++;
      program.push_back(inst);
    }
    std::optional<int> yielded = slotFor(body->getTerminator()->getOperand(0));
    if (!yielded)
      return nullptr;
    compiled->yielded = *yielded;
    int64_t row = shape.empty() ? 1 : shape.back();
    compiled->slots.assign(next, std::vector<double>(row));
    for (auto [slot, value] : constantSlots)
      std::fill(compiled->slots[slot].begin(), compiled->slots[slot].end(),
                value);
    return compiled;
  }

  /// Runs \p prog on the row at \p index (its outer dims; the innermost is
  /// the row): the result is `prog.slots[prog.yielded]`.
  static void runRow(RowProgram &prog, ArrayRef<int64_t> index, int64_t rank,
                     int64_t row) {
    for (auto [k, source] : llvm::enumerate(prog.sources)) {
      double *dst = prog.slots[k].data();
      if (source.inlined) {
        runRow(*source.inlined, index, rank, row);
        const std::vector<double> &made =
            source.inlined->slots[source.inlined->yielded];
        std::copy(made.begin(), made.end(), dst);
        continue;
      }
      int64_t offset = 0;
      for (int64_t d = 0; d + 1 < rank; ++d)
        offset += index[d] * source.strides[d];
      int64_t stride = rank ? source.strides[rank - 1] : 0;
      const double *src = source.values->data() + offset;
      for (int64_t c = 0; c < row; ++c)
        dst[c] = src[c * stride];
    }
    for (const Instruction &inst : prog.program) {
      double *r = prog.slots[inst.result].data();
      const double *a = inst.operands.size() > 0
                            ? prog.slots[inst.operands[0]].data()
                            : nullptr;
      const double *b = inst.operands.size() > 1
                            ? prog.slots[inst.operands[1]].data()
                            : nullptr;
      const double *c3 = inst.operands.size() > 2
                             ? prog.slots[inst.operands[2]].data()
                             : nullptr;
      // One switch per instruction and row; the loops vectorise.
      auto each = [&](auto f) {
        for (int64_t c = 0; c < row; ++c)
          r[c] = f(c);
      };
      switch (inst.kind) {
      case Kind::Index:
        if (inst.dim == rank - 1)
          each([](int64_t c) { return double(c); });
        else
          each([&](int64_t) { return double(index[inst.dim]); });
        break;
      case Kind::Add:
        each([&](int64_t c) { return a[c] + b[c]; });
        break;
      case Kind::Sub:
        each([&](int64_t c) { return a[c] - b[c]; });
        break;
      case Kind::Mul:
        each([&](int64_t c) { return a[c] * b[c]; });
        break;
      case Kind::Div:
        each([&](int64_t c) { return a[c] / b[c]; });
        break;
      case Kind::Neg:
        each([&](int64_t c) { return -a[c]; });
        break;
      case Kind::Max:
        each([&](int64_t c) { return std::max(a[c], b[c]); });
        break;
      case Kind::Min:
        each([&](int64_t c) { return std::min(a[c], b[c]); });
        break;
      case Kind::Select:
        each([&](int64_t c) { return a[c] != 0 ? b[c] : c3[c]; });
        break;
      case Kind::Less:
        each([&](int64_t c) { return double(a[c] < b[c]); });
        break;
      case Kind::LessEqual:
        each([&](int64_t c) { return double(a[c] <= b[c]); });
        break;
      case Kind::Greater:
        each([&](int64_t c) { return double(a[c] > b[c]); });
        break;
      case Kind::GreaterEqual:
        each([&](int64_t c) { return double(a[c] >= b[c]); });
        break;
      case Kind::Equal:
        each([&](int64_t c) { return double(a[c] == b[c]); });
        break;
      case Kind::NotEqual:
        each([&](int64_t c) { return double(a[c] != b[c]); });
        break;
      case Kind::True:
        each([](int64_t) { return 1.0; });
        break;
      case Kind::False:
        each([](int64_t) { return 0.0; });
        break;
      case Kind::UnsignedCompare: {
        auto predicate = cast<arith::CmpIOp>(inst.op).getPredicate();
        each([&](int64_t c) {
          return double(arith::applyCmpPredicate(
              predicate, APInt(64, int64_t(a[c]), /*isSigned=*/true),
              APInt(64, int64_t(b[c]), /*isSigned=*/true)));
        });
        break;
      }
      case Kind::Copy:
        each([&](int64_t c) { return a[c]; });
        break;
      }
    }
  }

  std::optional<std::vector<double>> evaluateGeneric(linalg::GenericOp g,
                                                     RankedTensorType type) {
    ArrayRef<int64_t> shape = type.getShape();
    std::unique_ptr<RowProgram> prog = compileGeneric(g, shape);
    if (!prog)
      return std::nullopt;
    int64_t rank = shape.size(), n = type.getNumElements();
    int64_t row = rank ? shape.back() : 1;
    // Filled row by row, never zeroed first.
    std::vector<double> out;
    out.reserve(n);
    SmallVector<int64_t> index(rank, 0);
    for (int64_t p = 0; p < n; p += row) {
      runRow(*prog, index, rank, row);
      const std::vector<double> &made = prog->slots[prog->yielded];
      out.insert(out.end(), made.begin(), made.end());
      // Next row, row-major.
      for (int64_t d = rank - 2; d >= 0; --d) {
        if (++index[d] < shape[d])
          break;
        index[d] = 0;
      }
    }
    return out;
  }

  int64_t maxElements;
  llvm::DenseMap<Value, Values> cache;
};

} // namespace

bool autopar::isCausalMask(const AttentionPattern &m,
                           llvm::DenseMap<Value, bool> *cache) {
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
  // Each row of the mask, read in place or computed row by row: a condition
  // (Where's) maps to the fill where it masks and 0 elsewhere.
  auto causalRow = [&, r = int64_t(0)](ArrayRef<double> values,
                                       bool isCondition) mutable {
    for (int64_t c = 0; c < cols; ++c) {
      double v = values[c];
      if (isCondition)
        v = (v != 0) == m.maskedWhenTrue ? m.maskFill : 0.0;
      if (!(c <= r ? v == 0.0 : v <= kAttentionMaskedBelow))
        return false;
    }
    ++r;
    return true;
  };
  // Big enough for sequence 8192; a mask computed from weights or inputs
  // does not evaluate.
  ConstantTensorEvaluator evaluator(int64_t(1) << 26);
  bool causal = false;
  if (m.maskConstant) {
    if (m.maskConstant.getNumElements() != rows * cols)
      return false;
    std::vector<double> row;
    row.reserve(cols);
    causal = true;
    for (APFloat f : m.maskConstant.getValues<APFloat>()) {
      row.push_back(f.convertToDouble());
      if (int64_t(row.size()) < cols)
        continue;
      if (!(causal = causalRow(row, /*isCondition=*/false)))
        break;
      row.clear();
    }
  } else {
    Value source = m.maskCondition ? m.maskCondition : m.mask;
    if (cache)
      if (auto it = cache->find(source); it != cache->end())
        return it->second;
    auto sourceType = cast<RankedTensorType>(source.getType());
    causal =
        sourceType.hasStaticShape() &&
        sourceType.getNumElements() == rows * cols &&
        (sourceType.getRank() ? sourceType.getShape().back() : 1) == cols &&
        evaluator.forEachRow(source, [&](ArrayRef<double> values) {
          return causalRow(values, bool(m.maskCondition));
        });
  }
  if (cache && !m.maskConstant)
    (*cache)[m.maskCondition ? m.maskCondition : m.mask] = causal;
  return causal;
}
