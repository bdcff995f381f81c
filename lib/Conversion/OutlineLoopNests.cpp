//===- OutlineLoopNests.cpp - One function per top-level loop nest --------===//
//
// See Passes.td. LLVM optimises each function on its own, so splitting the
// step into one function per loop nest makes its optimisation time roughly
// linear in the number of nests instead of superlinear in the step's size.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

namespace autopar {
#define GEN_PASS_DEF_MARKNOALIAS
#define GEN_PASS_DEF_OUTLINELOOPNESTS
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// The buffer `v` is a view of: through view-like ops to an allocation or
/// a block argument.
Value rootBuffer(Value v) {
  while (auto view = v.getDefiningOp<ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
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
  auto type = FunctionType::get(ctx, ValueRange(arguments).getTypes(), {});
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

  b.setInsertionPoint(loop);
  func::CallOp::create(b, loop.getLoc(), func, arguments);
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
