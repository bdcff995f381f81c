//===- OutlineLoopNests.cpp - One function per top-level loop nest --------===//
//
// See Passes.td. LLVM optimises each function on its own, so splitting the
// step into one function per loop nest makes its optimisation time roughly
// linear in the number of nests instead of superlinear in the step's size.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "RootBuffer.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace autopar {
#define GEN_PASS_DEF_MARKNOALIAS
#define GEN_PASS_DEF_OUTLINELOOPNESTS
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;
using autopar::rootBuffer;

namespace {

/// The constant trip count of `loop`, if its bounds and step are constants.
std::optional<int64_t> constantTripCount(scf::ForOp loop) {
  std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound()),
                         ub = getConstantIntValue(loop.getUpperBound()),
                         step = getConstantIntValue(loop.getStep());
  if (!lb || !ub || !step || *step <= 0)
    return std::nullopt;
  return *ub > *lb ? (*ub - *lb + *step - 1) / *step : 0;
}

/// The loop of the nest `loop` marked autopar.parallel, with its trip count
/// and work per iteration, when every loop around it in the nest runs once
/// and its bounds are constants.
struct ParallelLoop {
  scf::ForOp loop;
  int64_t iterations, work;
};
std::optional<ParallelLoop> findParallelLoop(scf::ForOp nest) {
  scf::ForOp marked;
  nest->walk<WalkOrder::PreOrder>([&](scf::ForOp inner) {
    if (!inner->hasAttr(autopar::kParallelLoopAttr))
      return WalkResult::advance();
    marked = inner;
    return WalkResult::interrupt();
  });
  if (!marked)
    return std::nullopt;
  for (Operation *up = marked->getParentOp(); up && up != nest->getParentOp();
       up = up->getParentOp()) {
    auto around = dyn_cast<scf::ForOp>(up);
    if (!around || constantTripCount(around) != 1)
      return std::nullopt;
  }
  std::optional<int64_t> iterations = constantTripCount(marked);
  auto work = marked->getAttrOfType<IntegerAttr>(autopar::kParallelLoopAttr);
  // Below this much work (elements) the loop keeps its constant bounds and
  // a direct call. The runtime would run 32Ki elements on the threads
  // (MinParallelWork, runtime/lib/cpu/ThreadPool.cpp), but MobileNet's many
  // small loops then lose more to waking the threads (and to OpenBLAS's
  // spinning workers) than they gain: 2 threads were slower than 1.
  constexpr int64_t minParallelWork = 256 * 1024;
  if (!iterations || *iterations < 2 || !work ||
      *iterations * std::max<int64_t>(work.getInt(), 1) < minParallelWork)
    return std::nullopt;
  return ParallelLoop{marked, *iterations, work.getInt()};
}

/// Replaces `loop` by a call to a new function `name` inserted after
/// `parent`, holding the loop. Constants it reads are cloned into the new
/// function (loop bounds and strides must stay visible to LLVM); every other
/// value it reads from outside becomes an argument.
void outline(scf::ForOp loop, func::FuncOp parent, StringRef name,
             SymbolTable &symbols) {
  llvm::SetVector<Value> captured;
  for (Value v : loop->getOperands())
    captured.insert(v);
  getUsedValuesDefinedAbove(loop.getRegion(), captured);
  SmallVector<Value> arguments;
  SmallVector<Operation *> constants;
  for (Value v : captured) {
    Operation *def = v.getDefiningOp();
    if (def && def->hasTrait<OpTrait::ConstantLike>())
      constants.push_back(def);
    else
      arguments.push_back(v);
  }

  MLIRContext *ctx = loop.getContext();
  OpBuilder b(ctx);
  b.setInsertionPointAfter(parent);
  // A parallel loop's range of iterations: two more arguments.
  std::optional<ParallelLoop> parallel = findParallelLoop(loop);
  SmallVector<Type> argumentTypes(ValueRange(arguments).getTypes());
  if (parallel)
    argumentTypes.append(2, b.getIndexType());
  auto type = FunctionType::get(ctx, argumentTypes, {});
  auto func = func::FuncOp::create(b, loop.getLoc(), name, type);
  func.setPrivate();
  func->setAttr("llvm.linkage",
                LLVM::LinkageAttr::get(ctx, LLVM::Linkage::Internal));
  func->setAttr("passthrough", b.getArrayAttr({b.getStringAttr("noinline")}));
  symbols.insert(func);
  // Arguments that are the only view of their buffer among the arguments
  // alias none of the others (buffers that bufferization allocated, or
  // arguments of the step, which the runtime passes as distinct buffers).
  // Saying so spares LLVM the runtime alias checks it did not need in the
  // one big function. func-to-llvm drops `llvm.noalias` on memref arguments,
  // so the pass records the aligned pointers' positions among the lowered
  // arguments (a memref of rank r lowers to allocated pointer, aligned
  // pointer, offset, r sizes, r strides) and `autopar-mark-noalias` sets it
  // on the llvm.func.
  llvm::DenseMap<Value, int> views;
  for (Value v : arguments)
    if (isa<MemRefType>(v.getType()))
      ++views[rootBuffer(v)];
  SmallVector<int64_t> noalias;
  int64_t position = 0;
  for (Value v : arguments) {
    auto memref = dyn_cast<MemRefType>(v.getType());
    if (!memref) {
      ++position;
      continue;
    }
    Value root = rootBuffer(v);
    bool distinct = isa<BlockArgument>(root) ||
                    root.getDefiningOp<memref::AllocOp>() ||
                    root.getDefiningOp<memref::AllocaOp>();
    if (distinct && views[root] == 1)
      noalias.push_back(position + 1);
    position += 3 + 2 * memref.getRank();
  }
  if (!noalias.empty())
    func->setAttr(autopar::kNoAliasPointerArgs,
                  b.getDenseI64ArrayAttr(noalias));

  Block *entry = func.addEntryBlock();
  b.setInsertionPointToStart(entry);
  IRMapping mapping;
  for (auto [outer, inner] : llvm::zip(arguments, entry->getArguments()))
    mapping.map(outer, inner);
  for (Operation *constant : constants)
    b.clone(*constant, mapping);
  b.clone(*loop, mapping);
  func::ReturnOp::create(b, loop.getLoc());

  SmallVector<Value> callArguments(arguments);
  if (parallel) {
    // The cloned loop runs iterations [first, last): lb + first * step up to
    // min(lb + last * step, ub).
    auto inner =
        cast<scf::ForOp>(mapping.lookup(parallel->loop.getOperation()));
    inner->removeAttr(autopar::kParallelLoopAttr);
    Location loc = inner.getLoc();
    b.setInsertionPoint(inner);
    Value first = entry->getArgument(arguments.size());
    Value last = entry->getArgument(arguments.size() + 1);
    Value lb = inner.getLowerBound(), step = inner.getStep();
    Value begin = arith::AddIOp::create(
        b, loc, lb, arith::MulIOp::create(b, loc, first, step));
    Value end = arith::MinSIOp::create(
        b, loc,
        arith::AddIOp::create(b, loc, lb,
                              arith::MulIOp::create(b, loc, last, step)),
        inner.getUpperBound());
    inner.setLowerBound(begin);
    inner.setUpperBound(end);
    func->setAttr(
        autopar::kParallelRangeAttr,
        b.getDenseI64ArrayAttr({parallel->iterations, parallel->work}));
    b.setInsertionPoint(loop);
    callArguments.push_back(
        arith::ConstantIndexOp::create(b, loop.getLoc(), 0));
    callArguments.push_back(
        arith::ConstantIndexOp::create(b, loop.getLoc(), parallel->iterations));
  }

  b.setInsertionPoint(loop);
  func::CallOp::create(b, loop.getLoc(), func, callArguments);
  loop.erase();
}

struct MarkNoAliasPass : autopar::impl::MarkNoAliasBase<MarkNoAliasPass> {
  void runOnOperation() override {
    getOperation().walk([](LLVM::LLVMFuncOp func) {
      auto positions =
          func->getAttrOfType<DenseI64ArrayAttr>(autopar::kNoAliasPointerArgs);
      if (!positions)
        return;
      for (int64_t i : positions.asArrayRef())
        if (i < func.getNumArguments() &&
            isa<LLVM::LLVMPointerType>(func.getArgumentTypes()[i]))
          func.setArgAttr(i, LLVM::LLVMDialect::getNoAliasAttrName(),
                          UnitAttr::get(func.getContext()));
      func->removeAttr(autopar::kNoAliasPointerArgs);
    });
  }
};

struct OutlineLoopNestsPass
    : autopar::impl::OutlineLoopNestsBase<OutlineLoopNestsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    SmallVector<func::FuncOp> funcs(module.getOps<func::FuncOp>());
    for (func::FuncOp parent : funcs) {
      if (parent.isExternal())
        continue;
      SmallVector<scf::ForOp> loops;
      for (Block &block : parent.getBody())
        for (auto loop : block.getOps<scf::ForOp>())
          if (loop.getNumResults() == 0)
            loops.push_back(loop);
      for (auto [n, loop] : llvm::enumerate(loops))
        outline(loop, parent,
                (parent.getName() + "_loop" + std::to_string(n)).str(),
                symbols);
    }
  }
};

} // namespace
