//===- MergeGpuModules.cpp - all kernels in one gpu.module ----------------===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"

namespace autopar {
#define GEN_PASS_DEF_MERGEGPUMODULES
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

struct MergeGpuModulesPass
    : autopar::impl::MergeGpuModulesBase<MergeGpuModulesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    SmallVector<gpu::GPUModuleOp> modules(module.getOps<gpu::GPUModuleOp>());
    if (modules.empty())
      return;
    if (module.lookupSymbol(moduleName)) {
      module.emitError("autopar-merge-gpu-modules: symbol @")
          << moduleName << " already exists";
      return signalPassFailure();
    }

    OpBuilder b(modules.front());
    auto merged =
        gpu::GPUModuleOp::create(b, modules.front().getLoc(), moduleName);
    SymbolTable mergedSymbols(merged);
    // (old module, old kernel) -> kernel name in the merged module.
    llvm::DenseMap<std::pair<StringAttr, StringAttr>, StringAttr> renamed;
    for (gpu::GPUModuleOp old : modules) {
      StringAttr oldModule = old.getSymNameAttr();
      for (Operation &op :
           llvm::make_early_inc_range(old.getBody()->without_terminator())) {
        auto symbol = dyn_cast<SymbolOpInterface>(&op);
        auto kernel = dyn_cast<gpu::GPUFuncOp>(&op);
        if (kernel && kernel.isKernel()) {
          // Outlining names each module uniquely after its kernel: the
          // kernel takes the module's name (renamed on a clash).
          StringAttr oldName = kernel.getNameAttr();
          op.remove();
          SymbolTable::setSymbolName(&op, oldModule);
          renamed[{oldModule, oldName}] = mergedSymbols.insert(&op);
          continue;
        }
        // Symbols outlining cloned from the parent (globals) appear in
        // every module that uses them: keep one copy.
        if (symbol && mergedSymbols.lookup(symbol.getNameAttr())) {
          op.erase();
          continue;
        }
        op.remove();
        mergedSymbols.insert(&op);
      }
      old.erase();
    }

    WalkResult result = module.walk([&](gpu::LaunchFuncOp launch) {
      auto it =
          renamed.find({launch.getKernelModuleName(), launch.getKernelName()});
      if (it == renamed.end()) {
        launch.emitError("autopar-merge-gpu-modules: launches a kernel that "
                         "is not in any gpu.module");
        return WalkResult::interrupt();
      }
      launch.setKernelAttr(SymbolRefAttr::get(
          merged.getSymNameAttr(), {FlatSymbolRefAttr::get(ctx, it->second)}));
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
