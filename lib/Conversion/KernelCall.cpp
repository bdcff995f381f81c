//===- KernelCall.cpp - Calls of the runtime's kernels --------------------===//
//
// See KernelCall.h.
//
//===----------------------------------------------------------------------===//

#include "KernelCall.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;

bool autopar::hasUnitInnerStride(MemRefType type) {
  if (type.getRank() == 0 || type.getShape().back() == 1)
    return true;
  auto [strides, offset] = type.getStridesAndOffset();
  return strides.back() == 1;
}

void autopar::replaceWithKernelCall(RewriterBase &rewriter, Operation *op,
                                    StringRef name, ValueRange operands) {
  auto module = op->getParentOfType<ModuleOp>();
  // Callees take fully dynamic strided memrefs, so one declaration serves
  // every shape and view.
  SmallVector<Type> argTypes;
  SmallVector<Value> args;
  for (Value v : operands) {
    if (auto type = dyn_cast<MemRefType>(v.getType())) {
      int64_t rank = type.getRank();
      auto layout = StridedLayoutAttr::get(
          rewriter.getContext(), ShapedType::kDynamic,
          SmallVector<int64_t>(rank, ShapedType::kDynamic));
      auto dynType =
          MemRefType::get(SmallVector<int64_t>(rank, ShapedType::kDynamic),
                          type.getElementType(), layout);
      argTypes.push_back(dynType);
      args.push_back(
          memref::CastOp::create(rewriter, op->getLoc(), dynType, v));
    } else {
      argTypes.push_back(v.getType());
      args.push_back(v);
    }
  }
  auto callee = module.lookupSymbol<func::FuncOp>(name);
  if (!callee) {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(module.getBody());
    callee = func::FuncOp::create(rewriter, op->getLoc(), name,
                                  rewriter.getFunctionType(argTypes, {}));
    callee.setPrivate();
    callee->setAttr("llvm.emit_c_interface", rewriter.getUnitAttr());
  }
  rewriter.replaceOpWithNewOp<func::CallOp>(op, callee, args);
}
