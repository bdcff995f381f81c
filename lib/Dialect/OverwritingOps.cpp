//===- OverwritingOps.cpp - What autopar's fused ops share ----------------===//
//
// See OverwritingOps.h.
//
//===----------------------------------------------------------------------===//

#include "OverwritingOps.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

void autopar::overwritingEffects(
    DestinationStyleOpInterface op,
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>>
        &effects) {
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    if (op.isDpsInit(&operand))
      effects.emplace_back(MemoryEffects::Write::get(), &operand,
                           SideEffects::DefaultResource::get());
    else
      effects.emplace_back(MemoryEffects::Read::get(), &operand,
                           SideEffects::DefaultResource::get());
  }
}

LogicalResult autopar::verifyOverwritingResults(Operation *op,
                                                ValueRange outputs,
                                                TypeRange results) {
  bool tensors = llvm::all_of(
      outputs, [](Value v) { return isa<RankedTensorType>(v.getType()); });
  bool memrefs = llvm::all_of(
      outputs, [](Value v) { return isa<MemRefType>(v.getType()); });
  if (tensors && TypeRange(outputs) == results)
    return success();
  if (memrefs && results.empty())
    return success();
  return op->emitOpError("returns its tensor outputs, one result each, or "
                         "nothing with memref outputs");
}
