//===- Passes.h - autopar transformation passes -----------------*- C++ -*-===//

#ifndef AUTOPAR_TRANSFORMS_PASSES_H
#define AUTOPAR_TRANSFORMS_PASSES_H

#include "autopar/Dialect/AutoparOps.h"
#include "autopar/Transforms/Training.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace autopar {

#define GEN_PASS_DECL
#include "autopar/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "autopar/Transforms/Passes.h.inc"

} // namespace autopar

#endif // AUTOPAR_TRANSFORMS_PASSES_H
