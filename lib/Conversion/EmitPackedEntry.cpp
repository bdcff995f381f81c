//===- EmitPackedEntry.cpp - void autopar_entry(void **args) --------------===//
//
// See Passes.td. The descriptor of a static, row-major memref is fully
// determined by its buffer pointer and shape, so the runtime passes only
// pointers and this wrapper rebuilds the expanded arguments.
//
//===----------------------------------------------------------------------===//

#include "autopar/Conversion/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinAttributes.h"

namespace autopar {
#define GEN_PASS_DEF_EMITPACKEDENTRY
#include "autopar/Conversion/Passes.h.inc"
} // namespace autopar

using namespace mlir;

namespace {

struct EmitPackedEntryPass
    : autopar::impl::EmitPackedEntryBase<EmitPackedEntryPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<LLVM::LLVMFuncOp>(mainName);
    if (!main) {
      module.emitError("autopar-emit-packed-entry: no llvm.func @")
          << mainName << " (run after conversion to the LLVM dialect)";
      return signalPassFailure();
    }
    auto shapes = main->getAttrOfType<ArrayAttr>(autopar::kArgShapesAttr);
    if (!shapes) {
      main.emitError("autopar-emit-packed-entry: @")
          << mainName << " has no '" << autopar::kArgShapesAttr
          << "' attribute listing its arguments' static shapes";
      return signalPassFailure();
    }
    // Each memref argument expands to: ptr, ptr, i64 offset, R sizes, R
    // strides.
    int64_t expected = 0;
    for (Attribute a : shapes)
      expected += 3 + 2 * cast<DenseI64ArrayAttr>(a).size();
    if (expected != main.getNumArguments()) {
      main.emitError("autopar-emit-packed-entry: '")
          << autopar::kArgShapesAttr << "' describes " << expected
          << " expanded arguments but @" << mainName << " has "
          << main.getNumArguments();
      return signalPassFailure();
    }

    // Only the entry is exported: a global `main` in a library loaded by a
    // program would interpose with (or be mistaken for) the program's own.
    if (main.getName() == "main") {
      if (failed(SymbolTable::replaceAllSymbolUses(
              main, StringAttr::get(&getContext(), "autopar_program"), module)))
        return signalPassFailure();
      SymbolTable::setSymbolName(main, "autopar_program");
    }
    main.setLinkage(LLVM::Linkage::Internal);

    // The runtime passes a distinct buffer for every argument, so the aligned
    // pointers do not alias. Saying so lets LLVM vectorize fused loops that
    // read many arguments, which it otherwise gives up on (too many runtime
    // alias checks).
    unsigned argIndex = 0;
    for (Attribute a : shapes) {
      main.setArgAttr(argIndex + 1, LLVM::LLVMDialect::getNoAliasAttrName(),
                      UnitAttr::get(&getContext()));
      argIndex += 3 + 2 * cast<DenseI64ArrayAttr>(a).size();
    }

    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    Location loc = main.getLoc();
    MLIRContext *ctx = &getContext();
    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    auto i64 = b.getI64Type();
    auto entry = LLVM::LLVMFuncOp::create(
        b, loc, entryName,
        LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {ptrType}));
    Block *body = entry.addEntryBlock(b);
    b.setInsertionPointToStart(body);
    Value argv = body->getArgument(0);

    SmallVector<Value> args;
    auto constant = [&](int64_t v) -> Value {
      return LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(v));
    };
    for (auto [i, attr] : llvm::enumerate(shapes)) {
      ArrayRef<int64_t> shape = cast<DenseI64ArrayAttr>(attr).asArrayRef();
      Value slot = LLVM::GEPOp::create(b, loc, ptrType, ptrType, argv,
                                       ArrayRef<LLVM::GEPArg>{int32_t(i)});
      Value buffer = LLVM::LoadOp::create(b, loc, ptrType, slot);
      args.append({buffer, buffer, constant(0)});
      for (int64_t d : shape)
        args.push_back(constant(d));
      int64_t stride = 1;
      SmallVector<Value> strides(shape.size());
      for (int64_t d = shape.size() - 1; d >= 0; --d) {
        strides[d] = constant(stride);
        stride *= shape[d];
      }
      args.append(strides.begin(), strides.end());
    }
    LLVM::CallOp::create(b, loc, main, args);
    LLVM::ReturnOp::create(b, loc, ValueRange{});
  }
};

} // namespace
