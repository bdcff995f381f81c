//===- Rematerialize.cpp - Recompute forward values in the backward -------===//
//
// See Passes.td. A differentiated @main reads forward values in its
// backward; each is live from the forward to the backward. Cloning the ops
// that compute them right before their first backward use makes the
// forward's own values die in the forward: the backward recomputes them
// (Megatron's recomputation, as rematerialisation in the IR).
//
//===----------------------------------------------------------------------===//

#include "autopar/Dialect/Attributes.h"
#include "autopar/Planner/Recompute.h"
#include "autopar/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

#include <functional>

namespace autopar {
#define GEN_PASS_DEF_REMATERIALIZE
#include "autopar/Transforms/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// The value a chain of `shard.shard` annotations annotates: under a
/// tensor-parallel plan each value is read through its annotations, which
/// are the value as far as liveness goes.
Value annotatedValue(Value v) {
  while (auto shard = v.getDefiningOp<shard::ShardOp>())
    v = shard.getSrc();
  return v;
}

/// The forward ops after which one value computed from the data is live in
/// the forward (the planner's segment cuts, PlanGraph.cpp): what the data
/// (the arguments other than parameters) flows into, counted live from its
/// op to its last use by a forward op (through any of its annotations). The
/// op making the loss is no cut, nor is an annotation.
llvm::DenseSet<Operation *>
segmentBoundaries(func::FuncOp main, const llvm::DenseSet<Operation *> &forward,
                  Operation *forwardEnd) {
  llvm::DenseSet<Value> fromData;
  for (BlockArgument arg : main.getArguments())
    if (!main.getArgAttr(arg.getArgNumber(), autopar::attrs::kParameter))
      fromData.insert(arg);
  // The forward's ops in order, what each reads, and each value's last
  // forward reader.
  SmallVector<Operation *> order;
  SmallVector<llvm::SetVector<Value>> reads;
  llvm::DenseMap<Value, int64_t> lastRead;
  for (Operation &op : main.getBody().front()) {
    if (!forward.contains(&op))
      break;
    llvm::SetVector<Value> used(op.operand_begin(), op.operand_end());
    getUsedValuesDefinedAbove(op.getRegions(), used);
    llvm::SetVector<Value> read;
    for (Value v : used)
      read.insert(annotatedValue(v));
    if (llvm::any_of(read, [&](Value v) { return fromData.contains(v); }))
      for (Value r : op.getResults())
        fromData.insert(r);
    for (Value v : read)
      lastRead[v] = int64_t(order.size());
    order.push_back(&op);
    reads.push_back(std::move(read));
  }
  llvm::DenseSet<Operation *> cuts;
  llvm::DenseSet<Value> live;
  for (auto [at, op] : llvm::enumerate(order)) {
    for (Value v : reads[at])
      if (lastRead.lookup(v) == int64_t(at))
        live.erase(v);
    if (isa<shard::ShardOp>(op))
      continue;
    for (Value r : op->getResults())
      if (fromData.contains(r) && lastRead.lookup(r) > int64_t(at))
        live.insert(r);
    if (op != forwardEnd && op->getNumResults() == 1 && live.size() == 1 &&
        live.contains(op->getResult(0)))
      cuts.insert(op);
  }
  return cuts;
}

struct RematerializePass : autopar::impl::RematerializeBase<RematerializePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (mode != "none" && mode != "selective" && mode != "full") {
      module.emitError() << "autopar-rematerialize: mode must be none, "
                            "selective or full, not '"
                         << mode << "'";
      return signalPassFailure();
    }
    if (mode == "none")
      return;
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main || main.isExternal()) {
      module.emitError("autopar-rematerialize: no func.func @main");
      return signalPassFailure();
    }
    if (main.getNumResults() == 0 ||
        main.getResultAttr(0, autopar::attrs::kGradient)) {
      main.emitError("autopar-rematerialize: @main must be differentiated "
                     "first (autopar-differentiate): its first result is the "
                     "loss");
      return signalPassFailure();
    }
    Block &body = main.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    // The backward (autopar-differentiate appends it) follows the op that
    // makes the returned loss.
    Operation *forwardEnd = ret.getOperand(0).getDefiningOp();
    if (!forwardEnd || forwardEnd->getBlock() != &body)
      return;
    llvm::DenseSet<Operation *> forward;
    for (Operation &op : body) {
      forward.insert(&op);
      if (&op == forwardEnd)
        break;
    }
    llvm::DenseSet<Operation *> random = autopar::opsReadingTheSeed(main);
    // Only what the trained parameters flow into: the rest (labels, masks,
    // a mean's count of valid targets, which autopar-accumulate-gradients
    // replaces by one) stays as it is, and costs no more to keep.
    llvm::DenseSet<Value> trained;
    for (BlockArgument arg : main.getArguments())
      if (main.getArgAttr(arg.getArgNumber(), autopar::attrs::kTrainable))
        trained.insert(arg);
    llvm::DenseSet<Operation *> active;
    for (Operation &op : body) {
      if (!forward.contains(&op))
        break;
      llvm::SetVector<Value> read(op.operand_begin(), op.operand_end());
      getUsedValuesDefinedAbove(op.getRegions(), read);
      if (llvm::any_of(read, [&](Value v) { return trained.contains(v); })) {
        active.insert(&op);
        for (Value r : op.getResults())
          trained.insert(r);
      }
    }
    bool full = mode == "full";
    // Full recomputation keeps the forward's segment boundaries (Megatron's
    // per-layer checkpoints, the planner's model): recomputing from the
    // arguments instead would make the backward's first op recompute the
    // whole forward, all of it live at once.
    llvm::DenseSet<Operation *> boundaries;
    if (full)
      boundaries = segmentBoundaries(main, forward, forwardEnd);
    auto recomputed = [&](Operation *op) {
      if (!op || !active.contains(op) || op->getNumOperands() == 0 ||
          !isMemoryEffectFree(op))
        return false;
      // A tensor-parallel plan's annotation of an argument (a parameter)
      // says how it is laid out: a clone would annotate the argument a
      // second time, after uses the first one serves. Annotations of
      // recomputed values are cloned with them.
      auto shard = dyn_cast<shard::ShardOp>(op);
      if (shard && isa<BlockArgument>(shard.getSrc()))
        return false;
      if (full)
        return !boundaries.contains(op);
      // Selectively too, annotations are made again: what is kept is a
      // value as the op that made it laid it out, and a resharding the
      // backward reads (a GEMM's all-gathered input) is repeated there, as
      // Megatron's sequence parallelism gathers again in the backward
      // rather than keep the gathered tensor (the planner prices each kept
      // value where it is made).
      if (shard)
        return true;
      return autopar::isSelectivelyRecomputed(op) && !random.contains(op);
    };

    // Each recomputed value, once, before the first backward op reading it.
    llvm::DenseMap<Value, Value> clones;
    Builder attrs(&getContext());
    std::function<Value(Value, Operation *)> cloneBefore =
        [&](Value v, Operation *user) -> Value {
      if (Value known = clones.lookup(v))
        return known;
      Operation *def = v.getDefiningOp();
      OpBuilder b(user);
      IRMapping map;
      // Its recomputed operands first, and the values its regions capture.
      llvm::SetVector<Value> read(def->operand_begin(), def->operand_end());
      getUsedValuesDefinedAbove(def->getRegions(), read);
      for (Value operand : read)
        if (recomputed(operand.getDefiningOp()))
          map.map(operand, cloneBefore(operand, user));
      Operation *clone = b.clone(*def, map);
      // Distinct from the forward's op, so that CSE does not merge them
      // back.
      clone->setAttr(autopar::attrs::kRecomputed, attrs.getUnitAttr());
      for (auto [from, to] : llvm::zip(def->getResults(), clone->getResults()))
        clones[from] = to;
      return clones.lookup(v);
    };
    SmallVector<Operation *> backward;
    for (Operation &op : body)
      if (!forward.contains(&op) && &op != ret.getOperation())
        backward.push_back(&op);
    for (Operation *op : backward) {
      SmallVector<OpOperand *> uses;
      op->walk([&](Operation *inner) {
        for (OpOperand &use : inner->getOpOperands())
          if (Operation *def = use.get().getDefiningOp();
              def && def->getBlock() == &body && recomputed(def))
            uses.push_back(&use);
      });
      for (OpOperand *use : uses)
        use->set(cloneBefore(use->get(), op));
    }
  }
};

} // namespace
