//===- WrapSequentialCodeForGpu.cpp - host memory accesses into kernels ---===//
//
// See Passes.td. Each run of ops that touch memory outside a parallel loop
// moves, in order, into a one-iteration scf.parallel: the GPU mapping makes
// it a one-thread kernel, so the host code never dereferences a buffer.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
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

/// Moves `group` (ops of one block, in order) into a one-iteration
/// scf.parallel inserted before `before`. Fails, with an error, when a value
/// computed in the group is needed outside it.
LogicalResult wrap(ArrayRef<Operation *> group, Operation *before) {
  llvm::SmallPtrSet<Operation *, 16> inGroup(group.begin(), group.end());
  for (Operation *op : group)
    for (Value result : op->getResults())
      for (Operation *user : result.getUsers()) {
        Operation *ancestor = op->getBlock()->findAncestorOpInBlock(*user);
        if (!ancestor || !inGroup.contains(ancestor))
          return op->emitError("autopar-gpu-wrap-sequential-code: the host "
                               "code needs this value, which is computed "
                               "from device memory (used by ")
                 << user->getName()
                 << "); GPU code generation does not support reading a "
                    "tensor's contents on the host (e.g. a data-dependent "
                    "shape or index)";
      }
  OpBuilder b(before);
  Location loc = group.front()->getLoc();
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  auto loop = scf::ParallelOp::create(b, loc, ValueRange{zero}, ValueRange{one},
                                      ValueRange{one});
  Operation *terminator = loop.getBody()->getTerminator();
  for (Operation *op : group)
    op->moveBefore(terminator);
  return success();
}

struct WrapSequentialCodeForGpuPass
    : autopar::impl::WrapSequentialCodeForGpuBase<
          WrapSequentialCodeForGpuPass> {
  void runOnOperation() override {
    for (Block &block : getOperation().getBody()) {
      SmallVector<Operation *> group;
      llvm::SmallPtrSet<Operation *, 16> inGroup;
      auto dependsOnGroup = [&](Operation *op) {
        return llvm::any_of(op->getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return def && inGroup.contains(def);
        });
      };
      for (Operation &op : llvm::make_early_inc_range(block)) {
        bool terminator = op.hasTrait<OpTrait::IsTerminator>();
        bool device = !terminator && (touchesMemoryOutsideParallelLoops(&op) ||
                                      (isPure(&op) && dependsOnGroup(&op)));
        if (device) {
          group.push_back(&op);
          inGroup.insert(&op);
          continue;
        }
        // Pure ops that do not depend on the group stay where they are;
        // any other host op (allocation, call, kernel, return) ends the
        // group, which keeps memory accesses in order.
        if ((isPure(&op) && !terminator) || group.empty())
          continue;
        if (failed(wrap(group, &op)))
          return signalPassFailure();
        group.clear();
        inGroup.clear();
      }
      if (!group.empty()) {
        group.back()->emitError("autopar-gpu-wrap-sequential-code: block "
                                "ends without a terminator");
        return signalPassFailure();
      }
    }
  }
};

} // namespace
