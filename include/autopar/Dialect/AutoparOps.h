//===- AutoparOps.h - autopar's own ops -------------------------*- C++ -*-===//
//
// See AutoparOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DIALECT_AUTOPAROPS_H
#define AUTOPAR_DIALECT_AUTOPAROPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Shard/Interfaces/ShardingInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir {
class IRMapping;
class SymbolTableCollection;
} // namespace mlir

namespace autopar {
// ShardingInterface's generated method declarations name these unqualified.
using ::llvm::ArrayRef;
using ::llvm::LogicalResult;
using ::llvm::SmallVector;
using ::mlir::AffineMap;
using ::mlir::IRMapping;
using ::mlir::OpBuilder;
using ::mlir::SymbolTableCollection;
using ::mlir::Value;
using ::mlir::shard::ReductionKind;
using ::mlir::shard::Sharding;
} // namespace autopar

#include "autopar/Dialect/AutoparDialect.h.inc"

#define GET_OP_CLASSES
#include "autopar/Dialect/AutoparOps.h.inc"

namespace autopar {
/// Attaches the bufferization of autopar.attention and
/// autopar.attention_grad (destination-passing: each output is written in
/// place of its destination); the dialect does so when it loads.
void attachAttentionBufferization(mlir::MLIRContext *ctx);
/// Attaches the bufferization of autopar.softmax_cross_entropy and its
/// gradient (destination-passing, as attention's).
void attachCrossEntropyBufferization(mlir::MLIRContext *ctx);
} // namespace autopar

#endif // AUTOPAR_DIALECT_AUTOPAROPS_H
