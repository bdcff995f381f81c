//===- WrapSequentialCodeForGpu.cpp - host memory accesses into kernels ---===//
//
// See Passes.td. Each run of ops that touch memory outside a parallel loop
// moves, in order, into a one-iteration scf.parallel: the GPU mapping makes
// it a one-thread kernel, so the host code never dereferences a buffer.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/CallInterfaces.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace autopar {
#define GEN_PASS_DEF_WRAPSEQUENTIALCODEFORGPU
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// True when `op` or an op nested in it (outside nested scf.parallel loops,
/// which become kernels themselves) reads or writes a memref.
bool touchesMemoryOutsideParallelLoops(Operation *op) {
  WalkResult result = op->walk<WalkOrder::PreOrder>([](Operation *nested) {
    if (isa<scf::ParallelOp>(nested))
      return WalkResult::skip();
    auto effects = dyn_cast<MemoryEffectOpInterface>(nested);
    if (!effects)
      return WalkResult::advance();
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    for (const MemoryEffects::EffectInstance &e : instances) {
      if (!isa<MemoryEffects::Read, MemoryEffects::Write>(e.getEffect()))
        continue;
      Value v = e.getValue();
      if (!v || isa<BaseMemRefType>(v.getType()))
        return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return result.wasInterrupted();
}

/// True when `op` holds host work in its regions (a loop over micro-batches
/// that launches kernels, calls GEMMs or allocates buffers): it stays on the
/// host, and its blocks are processed like the function's.
bool isHostControlFlow(Operation *op) {
  if (op->getNumRegions() == 0 || isa<scf::ParallelOp>(op))
    return false;
  WalkResult result = op->walk([&](Operation *nested) {
    if (nested == op)
      return WalkResult::advance();
    if (isa<scf::ParallelOp, CallOpInterface>(nested))
      return WalkResult::interrupt();
    if (auto effects = dyn_cast<MemoryEffectOpInterface>(nested))
      if (effects.hasEffect<MemoryEffects::Allocate>() ||
          effects.hasEffect<MemoryEffects::Free>())
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return result.wasInterrupted();
}

/// Where a reload of a value spilled by a group goes for `user`: at the top
/// of the outermost scf.parallel holding it (the kernel that reads it),
/// else right before it (host code; the reload then joins a later group).
Operation *reloadPoint(Operation *user) {
  Operation *outermost = nullptr;
  for (Operation *p = user->getParentOp(); p && !isa<FunctionOpInterface>(p);
       p = p->getParentOp())
    if (isa<scf::ParallelOp>(p))
      outermost = p;
  if (outermost)
    return &cast<scf::ParallelOp>(outermost).getBody()->front();
  return user;
}

struct Wrapper {
  /// Moves `group` (ops of one block, in order) into a one-iteration
  /// scf.parallel inserted before `before`. A scalar the group computes and
  /// later code uses (Adam's bias correction from the step counter, read in
  /// every update kernel) is stored into a device scalar and loaded again
  /// where it is used: inside the kernels that use it, or before a host op,
  /// where the load starts the next group; so only host code that really
  /// needs the value (a size, a bound, a call's scalar) is an error, when
  /// that group is wrapped.
  LogicalResult wrap(ArrayRef<Operation *> group, Operation *before) {
    llvm::SmallPtrSet<Operation *, 16> inGroup(group.begin(), group.end());
    Block *block = group.front()->getBlock();
    // The values used outside the group, with those users.
    llvm::MapVector<Value, SmallVector<OpOperand *>> escaping;
    for (Operation *op : group)
      for (Value result : op->getResults())
        for (OpOperand &use : result.getUses()) {
          Operation *ancestor = block->findAncestorOpInBlock(*use.getOwner());
          if (ancestor && inGroup.contains(ancestor))
            continue;
          escaping[result].push_back(&use);
        }
    for (auto &[value, uses] : escaping) {
      Operation *user = uses.front()->getOwner();
      Type type = value.getType();
      // A host op outside kernels that is neither pure nor device work
      // itself (an allocation, a call, a loop bound) needs it on the host.
      bool needsHost = llvm::any_of(uses, [&](OpOperand *use) {
        Operation *owner = use->getOwner();
        return reloadPoint(owner) == owner && !isPure(owner) &&
               !touchesMemoryOutsideParallelLoops(owner);
      });
      if (needsHost || !(type.isIntOrIndexOrFloat()))
        return value.getDefiningOp()->emitError(
                   "autopar-gpu-wrap-sequential-code: the host code needs "
                   "this value, which is computed from device memory (used "
                   "by ")
               << user->getName()
               << "); GPU code generation does not support reading a "
                  "tensor's contents on the host (e.g. a data-dependent "
                  "shape or index)";
    }
    OpBuilder b(before);
    Location loc = group.front()->getLoc();
    // Device scalars for the escaping values, freed at the end of the block.
    SmallVector<Value> spills;
    for (auto &[value, uses] : escaping) {
      Value spill = memref::AllocOp::create(
          b, value.getLoc(), MemRefType::get({}, value.getType()));
      spills.push_back(spill);
      OpBuilder end(block->getTerminator());
      memref::DeallocOp::create(end, value.getLoc(), spill);
    }
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    auto loop = scf::ParallelOp::create(b, loc, ValueRange{zero},
                                        ValueRange{one}, ValueRange{one});
    Operation *terminator = loop.getBody()->getTerminator();
    for (Operation *op : group)
      op->moveBefore(terminator);
    for (auto [entry, spill] : llvm::zip(escaping, spills)) {
      auto &[value, uses] = entry;
      OpBuilder inside(terminator);
      memref::StoreOp::create(inside, value.getLoc(), value, spill);
      // One load per kernel or host op that reads it.
      llvm::DenseMap<Operation *, Value> reloads;
      for (OpOperand *use : uses) {
        Operation *point = reloadPoint(use->getOwner());
        Value &reload = reloads[point];
        if (!reload) {
          OpBuilder at(point);
          reload = memref::LoadOp::create(at, value.getLoc(), spill);
        }
        use->set(reload);
      }
    }
    return success();
  }

  /// Wraps the runs of device work of `block`, and of the blocks of its host
  /// control flow.
  LogicalResult process(Block &block) {
    SmallVector<Operation *> group;
    llvm::SmallPtrSet<Operation *, 16> inGroup;
    auto dependsOnGroup = [&](Operation *op) {
      return llvm::any_of(op->getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return def && inGroup.contains(def);
      });
    };
    auto flush = [&](Operation *before) {
      if (group.empty())
        return success();
      LogicalResult wrapped = wrap(group, before);
      group.clear();
      inGroup.clear();
      return wrapped;
    };
    // The next op is taken after each one is handled: wrapping a group
    // reloads its values right before later ops, which must be visited too.
    for (Operation *op = &block.front(); op; op = op->getNextNode()) {
      bool terminator = op->hasTrait<OpTrait::IsTerminator>();
      if (!terminator && isHostControlFlow(op)) {
        if (failed(flush(op)))
          return failure();
        for (Region &region : op->getRegions())
          for (Block &nested : region)
            if (failed(process(nested)))
              return failure();
        continue;
      }
      bool device = !terminator && (touchesMemoryOutsideParallelLoops(op) ||
                                    (isPure(op) && dependsOnGroup(op)));
      if (device) {
        group.push_back(op);
        inGroup.insert(op);
        continue;
      }
      // Pure ops that do not depend on the group stay where they are;
      // any other host op (allocation, call, kernel, return) ends the
      // group, which keeps memory accesses in order.
      if ((isPure(op) && !terminator) || group.empty())
        continue;
      if (failed(flush(op)))
        return failure();
    }
    if (!group.empty())
      return group.back()->emitError("autopar-gpu-wrap-sequential-code: "
                                     "block ends without a terminator");
    return success();
  }
};

struct WrapSequentialCodeForGpuPass
    : autopar::impl::WrapSequentialCodeForGpuBase<
          WrapSequentialCodeForGpuPass> {
  void runOnOperation() override {
    Wrapper wrapper;
    for (Block &block : getOperation().getBody())
      if (failed(wrapper.process(block)))
        return signalPassFailure();
  }
};

} // namespace
