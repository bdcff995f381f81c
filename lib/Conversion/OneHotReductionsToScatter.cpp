//===- OneHotReductionsToScatter.cpp - embedding gradients as scatter-adds ===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace autopar {
#define GEN_PASS_DEF_ONEHOTREDUCTIONSTOSCATTER
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// A matched one-hot reduction.
struct OneHot {
  unsigned indexInput, valueInput;
  /// The output's loop that no input reads: the row the index selects.
  unsigned rowLoop;
  /// The body's computation of the row from the index block argument, in
  /// order (pure ops only), and its result.
  SmallVector<Operation *> rowOps;
  Value row;
  /// The value added: the value block argument, or its extension.
  Value added;
};

/// The loops `map` reads (it must be a projected permutation).
llvm::SmallDenseSet<unsigned> loopsOf(AffineMap map) {
  llvm::SmallDenseSet<unsigned> loops;
  for (AffineExpr e : map.getResults())
    loops.insert(cast<AffineDimExpr>(e).getPosition());
  return loops;
}

/// Collects, in program order, the ops computing `v` from `arg` alone (pure
/// ops of the body). False if `v` depends on anything else of the body.
bool collectChain(Value v, BlockArgument arg, Block &body,
                  llvm::SetVector<Operation *> &chain) {
  if (v == arg)
    return true;
  if (isa<BlockArgument>(v))
    return false;
  Operation *def = v.getDefiningOp();
  if (def->getBlock() != &body)
    return true; // Defined above the generic (a constant): usable as is.
  if (!isPure(def) || def->getNumRegions() != 0 || isa<linalg::IndexOp>(def))
    return false;
  for (Value operand : def->getOperands())
    if (!collectChain(operand, arg, body, chain))
      return false;
  chain.insert(def);
  return true;
}

std::optional<OneHot> match(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || !op.hasIndexSemantics())
    return std::nullopt;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  if (!llvm::all_of(maps,
                    [](AffineMap m) { return m.isProjectedPermutation(); }))
    return std::nullopt;
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  auto add = yield.getOperand(0).getDefiningOp<arith::AddFOp>();
  BlockArgument out = body.getArgument(2);
  if (!add)
    return std::nullopt;
  Value picked = add.getLhs() == out   ? add.getRhs()
                 : add.getRhs() == out ? add.getLhs()
                                       : Value();
  auto select = picked ? picked.getDefiningOp<arith::SelectOp>() : nullptr;
  if (!select || !matchPattern(select.getFalseValue(), m_AnyZeroFloat()))
    return std::nullopt;
  auto cmp = select.getCondition().getDefiningOp<arith::CmpIOp>();
  if (!cmp || cmp.getPredicate() != arith::CmpIPredicate::eq)
    return std::nullopt;
  auto indexOp = cmp.getRhs().getDefiningOp<linalg::IndexOp>();
  Value computed = cmp.getLhs();
  if (!indexOp) {
    indexOp = cmp.getLhs().getDefiningOp<linalg::IndexOp>();
    computed = cmp.getRhs();
  }
  if (!indexOp)
    return std::nullopt;
  OneHot result;
  result.rowLoop = indexOp.getDim();
  // Which input is the index (integer) and which the value (float).
  bool firstIsIndex = isa<IntegerType>(body.getArgument(0).getType());
  result.indexInput = firstIsIndex ? 0 : 1;
  result.valueInput = firstIsIndex ? 1 : 0;
  BlockArgument indexArg = body.getArgument(result.indexInput);
  BlockArgument valueArg = body.getArgument(result.valueInput);
  if (!isa<IntegerType>(indexArg.getType()) ||
      !isa<FloatType>(valueArg.getType()))
    return std::nullopt;
  Value added = select.getTrueValue();
  if (auto ext = added.getDefiningOp<arith::ExtFOp>())
    if (ext.getIn() == valueArg)
      added = ext.getIn();
  if (added != valueArg)
    return std::nullopt;
  result.added = select.getTrueValue();
  llvm::SetVector<Operation *> chain;
  if (!collectChain(computed, indexArg, body, chain))
    return std::nullopt;
  if (!computed.getType().isIndex())
    return std::nullopt;
  result.rowOps.assign(chain.begin(), chain.end());
  result.row = computed;
  // Loops: the index reads reductions only; the value reads those and the
  // output's other loops; the output reads the row and those.
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  auto indexLoops = loopsOf(maps[result.indexInput]);
  auto valueLoops = loopsOf(maps[result.valueInput]);
  auto outLoops = loopsOf(maps[2]);
  if (!outLoops.contains(result.rowLoop) ||
      iterators[result.rowLoop] != utils::IteratorType::parallel ||
      valueLoops.contains(result.rowLoop) ||
      indexLoops.contains(result.rowLoop))
    return std::nullopt;
  for (unsigned d = 0; d < op.getNumLoops(); ++d) {
    bool reduction = iterators[d] == utils::IteratorType::reduction;
    if (reduction != (indexLoops.contains(d) && !outLoops.contains(d)))
      return std::nullopt;
    if (d != result.rowLoop && !valueLoops.contains(d))
      return std::nullopt;
    if (!reduction && d != result.rowLoop && !outLoops.contains(d))
      return std::nullopt;
  }
  // Nothing else in the body: the row's chain, the row's index, the compare,
  // the select, the add, the value's extension and constants they use.
  llvm::SmallPtrSet<Operation *, 16> allowed(result.rowOps.begin(),
                                             result.rowOps.end());
  allowed.insert({indexOp, cmp, select, add, yield});
  if (Operation *ext = result.added.getDefiningOp())
    allowed.insert(ext);
  for (Operation &bodyOp : body)
    if (!allowed.contains(&bodyOp) &&
        !(bodyOp.hasTrait<OpTrait::ConstantLike>() &&
          llvm::all_of(bodyOp.getUsers(), [&](Operation *user) {
            return allowed.contains(user);
          })))
      return std::nullopt;
  return result;
}

void rewrite(linalg::GenericOp op, const OneHot &m, bool atomic) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<unsigned> loops; // every loop but the row's, in order
  for (unsigned d = 0; d < op.getNumLoops(); ++d)
    if (d != m.rowLoop)
      loops.push_back(d);
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  SmallVector<Value> lbs(loops.size(), zero), steps(loops.size(), one), ubs;
  for (unsigned d : loops)
    ubs.push_back(arith::ConstantIndexOp::create(b, loc, ranges[d]));
  Value rows = arith::ConstantIndexOp::create(b, loc, ranges[m.rowLoop]);
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  Value index = op.getDpsInputs()[m.indexInput];
  Value value = op.getDpsInputs()[m.valueInput];
  Value out = op.getDpsInits()[0];
  Block &body = op.getRegion().front();
  // The innermost body to fill, and the loops' induction variables.
  OpBuilder nb(op);
  SmallVector<Value> ivs;
  if (atomic) {
    auto loop = scf::ParallelOp::create(b, loc, lbs, ubs, steps);
    nb = OpBuilder::atBlockTerminator(loop.getBody());
    llvm::append_range(ivs, loop.getInductionVars());
  } else {
    // Loops in the generic's order: the reduction's adds land in its order.
    for (auto [lb, ub, step] : llvm::zip(lbs, ubs, steps)) {
      auto loop = scf::ForOp::create(nb, loc, lb, ub, step);
      ivs.push_back(loop.getInductionVar());
      nb = OpBuilder::atBlockTerminator(loop.getBody());
    }
  }
  DenseMap<unsigned, Value> iv;
  for (auto [d, v] : llvm::zip(loops, ivs))
    iv[d] = v;
  auto at = [&](AffineMap map, Value rowValue) {
    SmallVector<Value> indices;
    for (AffineExpr e : map.getResults()) {
      unsigned d = cast<AffineDimExpr>(e).getPosition();
      indices.push_back(d == m.rowLoop ? rowValue : iv[d]);
    }
    return indices;
  };
  IRMapping mapping;
  mapping.map(
      body.getArgument(m.indexInput),
      memref::LoadOp::create(nb, loc, index, at(maps[m.indexInput], Value())));
  mapping.map(
      body.getArgument(m.valueInput),
      memref::LoadOp::create(nb, loc, value, at(maps[m.valueInput], Value())));
  for (Operation *rowOp : m.rowOps)
    nb.clone(*rowOp, mapping);
  Value row = mapping.lookupOrDefault(m.row);
  if (Operation *ext = m.added.getDefiningOp())
    nb.clone(*ext, mapping);
  Value added = mapping.lookupOrDefault(m.added);
  // The one-hot reduction adds nothing for a row outside the output.
  Value nonNegative =
      arith::CmpIOp::create(nb, loc, arith::CmpIPredicate::sge, row, zero);
  Value below =
      arith::CmpIOp::create(nb, loc, arith::CmpIPredicate::slt, row, rows);
  Value inside = arith::AndIOp::create(nb, loc, nonNegative, below);
  auto guard = scf::IfOp::create(nb, loc, inside, /*withElse=*/false);
  OpBuilder tb = guard.getThenBodyBuilder();
  SmallVector<Value> target = at(maps[2], row);
  if (atomic) {
    memref::AtomicRMWOp::create(tb, loc, arith::AtomicRMWKind::addf, added, out,
                                target);
  } else {
    Value old = memref::LoadOp::create(tb, loc, out, target);
    Value sum = arith::AddFOp::create(tb, loc, old, added);
    memref::StoreOp::create(tb, loc, sum, out, target);
  }
  op.erase();
}

struct OneHotReductionsToScatterPass
    : autopar::impl::OneHotReductionsToScatterBase<
          OneHotReductionsToScatterPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<std::pair<linalg::GenericOp, OneHot>> found;
    getOperation().walk([&](linalg::GenericOp op) {
      if (std::optional<OneHot> m = match(op))
        found.push_back({op, std::move(*m)});
    });
    for (auto &[op, m] : found)
      rewrite(op, m, atomic);
  }
};

} // namespace
