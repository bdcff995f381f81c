//===- GradientBuckets.h - Gradient sums, one collective a type -*- C++ -*-===//
//
// Data parallelism sums every gradient over the replicas. One all-reduce per
// tensor pays the collective's latency once per tensor; DDP and DeepSpeed
// flatten the gradients into buckets instead. The one-program step
// (autopar-accumulate-gradients) and the step of each pipeline stage
// (lib/Driver/PipelineTraining.cpp) build their buckets here.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TRANSFORMS_GRADIENTBUCKETS_H
#define AUTOPAR_TRANSFORMS_GRADIENTBUCKETS_H

#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"

namespace autopar {

/// Replaces `values[i]`, for every i of \p which, by its sum over axis
/// \p axis of grid \p grid: the values are flattened into one bucket per
/// element type (in \p which's order), each bucket is one `shard.all_reduce`
/// (sum), and the sums are cut back into the values' shapes.
void allReduceInBuckets(mlir::OpBuilder &b, mlir::Location loc,
                        llvm::StringRef grid, int16_t axis,
                        llvm::SmallVectorImpl<mlir::Value> &values,
                        llvm::ArrayRef<unsigned> which);

} // namespace autopar

#endif // AUTOPAR_TRANSFORMS_GRADIENTBUCKETS_H
