//===- DeallocateAtLastUse.cpp - free buffers at their last use -----------===//
//
// See Passes.td. The ownership-based deallocation frees what a block owns
// at the block's end; this moves each such free up to the buffer's last
// use, as the older liveness-based BufferDeallocation pass placed them.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/Bufferization/Transforms/BufferViewFlowAnalysis.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace autopar {
#define GEN_PASS_DEF_DEALLOCATEATLASTUSE
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

struct DeallocateAtLastUsePass
    : autopar::impl::DeallocateAtLastUseBase<DeallocateAtLastUsePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    BufferViewFlowAnalysis aliases(func);
    SmallVector<memref::DeallocOp> deallocs;
    func.walk([&](memref::DeallocOp dealloc) { deallocs.push_back(dealloc); });
    for (memref::DeallocOp dealloc : deallocs)
      if (Operation *last = lastUse(dealloc, aliases))
        dealloc->moveAfter(last);
  }

  /// The op after which `dealloc` may go, when that is earlier than where
  /// it is; null otherwise.
  static Operation *lastUse(memref::DeallocOp dealloc,
                            const BufferViewFlowAnalysis &aliases) {
    Block *block = dealloc->getBlock();
    Value buffer = dealloc.getMemref();
    Operation *last = buffer.getDefiningOp();
    if (!last || last->getBlock() != block)
      return nullptr; // An argument's, or a buffer made in another block.
    for (Value alias : aliases.resolve(buffer)) {
      // A block argument (a loop's iteration argument) may carry the buffer
      // around: the end of the block is as early as is known safe.
      if (isa<BlockArgument>(alias))
        return nullptr;
      for (Operation *user : alias.getUsers()) {
        if (user == dealloc.getOperation())
          continue;
        Operation *ancestor = block->findAncestorOpInBlock(*user);
        if (!ancestor)
          return nullptr; // Used outside the block.
        if (ancestor == dealloc.getOperation())
          return nullptr;
        if (last->isBeforeInBlock(ancestor))
          last = ancestor;
      }
    }
    if (!last->isBeforeInBlock(dealloc))
      return nullptr;
    // Already right after its last use.
    if (last->getNextNode() == dealloc.getOperation())
      return nullptr;
    return last;
  }
};

} // namespace
