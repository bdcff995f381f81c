//===- GpuHostMemory.cpp - host buffers in device memory ------------------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace autopar {
#define GEN_PASS_DEF_GPUHOSTMEMORY
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

/// A synchronous `gpu.alloc` of `type` with the dynamic sizes and symbols
/// of the memref allocation it replaces.
Value createDeviceAlloc(OpBuilder &b, Location loc, MemRefType type,
                        ValueRange dynamicSizes, ValueRange symbols) {
  return gpu::AllocOp::create(b, loc, type, /*asyncToken=*/Type(),
                              /*asyncDependencies=*/ValueRange{}, dynamicSizes,
                              symbols, /*hostShared=*/false)
      .getMemref();
}

struct GpuHostMemoryPass : autopar::impl::GpuHostMemoryBase<GpuHostMemoryPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    SmallVector<Operation *> hostOps;
    func.walk<WalkOrder::PreOrder>([&](Operation *op) {
      // Allocations inside kernels are per-thread scratch; leave them.
      if (isa<gpu::LaunchOp>(op))
        return WalkResult::skip();
      if (isa<memref::AllocOp, memref::AllocaOp, memref::DeallocOp,
              memref::GetGlobalOp>(op))
        hostOps.push_back(op);
      return WalkResult::advance();
    });

    // Buffers this pass creates that live until the function returns.
    SmallVector<Value> freeAtReturn;
    for (Operation *op : hostOps) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      if (auto alloc = dyn_cast<memref::AllocOp>(op)) {
        Value device =
            createDeviceAlloc(b, loc, alloc.getType(), alloc.getDynamicSizes(),
                              alloc.getSymbolOperands());
        alloc.replaceAllUsesWith(device);
        alloc.erase();
      } else if (auto alloca = dyn_cast<memref::AllocaOp>(op)) {
        Value device = createDeviceAlloc(b, loc, alloca.getType(),
                                         alloca.getDynamicSizes(),
                                         alloca.getSymbolOperands());
        alloca.replaceAllUsesWith(device);
        alloca.erase();
        freeAtReturn.push_back(device);
      } else if (auto dealloc = dyn_cast<memref::DeallocOp>(op)) {
        gpu::DeallocOp::create(b, loc, /*asyncToken=*/Type(), ValueRange{},
                               dealloc.getMemref());
        dealloc.erase();
      } else if (auto global = dyn_cast<memref::GetGlobalOp>(op)) {
        // Kernels and library calls may only see device pointers: the
        // constant is copied to the device where it is first needed.
        b.setInsertionPointAfter(global);
        auto type = cast<MemRefType>(global.getType());
        if (!type.hasStaticShape()) {
          global.emitError("autopar-gpu-host-memory: global of dynamic shape");
          return signalPassFailure();
        }
        Value device = createDeviceAlloc(b, loc, type, {}, {});
        auto copy =
            gpu::MemcpyOp::create(b, loc, /*asyncToken=*/Type(), ValueRange{},
                                  device, global.getResult());
        global.getResult().replaceAllUsesExcept(device, copy);
        freeAtReturn.push_back(device);
      }
    }

    if (freeAtReturn.empty())
      return;
    WalkResult result = func.walk([&](func::ReturnOp ret) {
      OpBuilder b(ret);
      for (Value buffer : freeAtReturn) {
        if (buffer.getParentRegion() != ret->getParentRegion()) {
          buffer.getDefiningOp()->emitError(
              "autopar-gpu-host-memory: a constant or stack buffer in a "
              "nested region cannot be freed at the function's return");
          return WalkResult::interrupt();
        }
        gpu::DeallocOp::create(b, ret.getLoc(), /*asyncToken=*/Type(),
                               ValueRange{}, buffer);
      }
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
