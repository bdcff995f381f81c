//===- RecordArgumentShapes.cpp - @main's shapes for the packed entry -----===//
//
// See Passes.td.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"

namespace autopar {
#define GEN_PASS_DEF_RECORDARGUMENTSHAPES
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

struct RecordArgumentShapesPass
    : autopar::impl::RecordArgumentShapesBase<RecordArgumentShapesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main) {
      module.emitError("no func.func @main to lower");
      return signalPassFailure();
    }
    SmallVector<Attribute> shapes;
    for (auto [i, type] : llvm::enumerate(main.getArgumentTypes())) {
      auto memref = dyn_cast<MemRefType>(type);
      if (!memref || !memref.hasStaticShape() ||
          !memref.getLayout().isIdentity()) {
        main.emitError("argument #")
            << i << " of @main has type " << type
            << ", not a static, row-major memref (the runtime passes dense "
               "buffers)";
        return signalPassFailure();
      }
      shapes.push_back(
          DenseI64ArrayAttr::get(module.getContext(), memref.getShape()));
    }
    main->setAttr(autopar::kArgShapesAttr,
                  ArrayAttr::get(module.getContext(), shapes));
  }
};

} // namespace
