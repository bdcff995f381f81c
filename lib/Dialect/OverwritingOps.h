//===- OverwritingOps.h - What autopar's fused ops share ------*- C++ -*-===//
//
// autopar's fused ops (attention, softmax cross-entropy, and their
// gradients) are destination-passing ops that overwrite their outputs whole:
// with tensors they return their destinations, with memrefs they write
// them. Their memory effects, result check and bufferization are one piece
// of code for all of them.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_LIB_DIALECT_OVERWRITINGOPS_H
#define AUTOPAR_LIB_DIALECT_OVERWRITINGOPS_H

#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/DstBufferizableOpInterfaceImpl.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace autopar {

/// The effects of a destination-style op with memref operands: it reads its
/// inputs and writes its outputs (in full: it reads none of them).
void overwritingEffects(mlir::DestinationStyleOpInterface op,
                        llvm::SmallVectorImpl<mlir::SideEffects::EffectInstance<
                            mlir::MemoryEffects::Effect>> &effects);

/// With tensors: one result per output, of its type. With memrefs: none.
llvm::LogicalResult verifyOverwritingResults(mlir::Operation *op,
                                             mlir::ValueRange outputs,
                                             mlir::TypeRange results);

/// The op overwrites its outputs whole: the destinations are written, never
/// read, and each result is its destination's buffer.
template <typename OpTy>
struct OverwritingBufferization
    : mlir::bufferization::DstBufferizableOpInterfaceExternalModel<
          OverwritingBufferization<OpTy>, OpTy> {
  bool
  bufferizesToMemoryRead(mlir::Operation *op, mlir::OpOperand &operand,
                         const mlir::bufferization::AnalysisState &) const {
    return !mlir::cast<mlir::DestinationStyleOpInterface>(op).isDpsInit(
        &operand);
  }

  llvm::LogicalResult
  bufferize(mlir::Operation *op, mlir::RewriterBase &rewriter,
            const mlir::bufferization::BufferizationOptions &options,
            mlir::bufferization::BufferizationState &state) const {
    llvm::SmallVector<mlir::Value> operands;
    for (mlir::Value v : op->getOperands()) {
      if (!mlir::isa<mlir::TensorType>(v.getType())) {
        operands.push_back(v);
        continue;
      }
      mlir::FailureOr<mlir::Value> buffer =
          mlir::bufferization::getBuffer(rewriter, v, options, state);
      if (mlir::failed(buffer))
        return mlir::failure();
      operands.push_back(*buffer);
    }
    rewriter.setInsertionPoint(op);
    mlir::OperationState bufferized(op->getLoc(), op->getName());
    bufferized.addOperands(operands);
    bufferized.addAttributes(op->getAttrs());
    rewriter.create(bufferized);
    llvm::SmallVector<mlir::Value> outputs(
        llvm::ArrayRef<mlir::Value>(operands).take_back(
            mlir::cast<OpTy>(op).getOutputs().size()));
    mlir::bufferization::replaceOpWithBufferizedValues(rewriter, op, outputs);
    return mlir::success();
  }
};

} // namespace autopar

#endif // AUTOPAR_LIB_DIALECT_OVERWRITINGOPS_H
