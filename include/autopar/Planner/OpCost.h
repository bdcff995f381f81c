//===- OpCost.h - FLOPs and bytes of structured ops -------------*- C++ -*-===//
//
// Cost follows from a linalg op's iteration domain and its body: a
// contraction does 2 FLOPs (multiply, add) per point of its domain, an
// elementwise or reduction op one FLOP per arithmetic op of its body per
// point; bytes are the operands' and results' sizes. Shape-only ops
// (reshapes, slices of contiguous dims, constants) are free.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PLANNER_OPCOST_H
#define AUTOPAR_PLANNER_OPCOST_H

#include "autopar/Planner/CostModel.h"

#include "mlir/IR/Operation.h"

namespace autopar {

struct OpCost {
  double flops = 0;
  double bytesRead = 0;
  double bytesWritten = 0;
  ComputeKind kind = ComputeKind::Elementwise;
  /// For contractions: the smallest of M, N, K (efficiency of small GEMMs).
  double minDim = 0;
  /// False for ops that move no data at run time (reshapes, constants).
  bool executes = true;
};

/// Cost of one op on tensors with static shapes.
OpCost getOpCost(mlir::Operation *op);

} // namespace autopar

#endif // AUTOPAR_PLANNER_OPCOST_H
