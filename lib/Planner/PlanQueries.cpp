//===- PlanQueries.cpp - The planner's analysis, for IR rewrites ----------===//
//
// What the rewrites that carry out a plan (lib/Transforms/PlanAnnotate.cpp)
// need from the planner's view of the program, without its internals.
//
//===----------------------------------------------------------------------===//

#include "PlannerImpl.h"

namespace autopar {

llvm::DenseMap<mlir::Value, int> findBatchDims(mlir::func::FuncOp main) {
  llvm::DenseMap<mlir::Value, int> dims;
  llvm::FailureOr<plan::ProgramGraph> graph =
      plan::buildProgramGraph(main, /*fusedAttention=*/std::nullopt);
  if (mlir::failed(graph))
    return dims;
  for (auto [value, id] : graph->valueIds) {
    auto type = llvm::dyn_cast<mlir::RankedTensorType>(value.getType());
    if (!type || !type.hasStaticShape())
      continue;
    // The batch as the outermost factor of the dim: data parallelism
    // splits there.
    for (auto [d, stride] : llvm::enumerate(graph->values[id].batch))
      if (stride > 0 && d < size_t(type.getRank()) &&
          stride * graph->globalBatch == type.getDimSize(d)) {
        dims[value] = d;
        break;
      }
  }
  return dims;
}

llvm::FailureOr<std::vector<std::vector<mlir::Operation *>>>
segmentOps(mlir::func::FuncOp main) {
  llvm::FailureOr<plan::ProgramGraph> graph =
      plan::buildProgramGraph(main, /*fusedAttention=*/std::nullopt);
  if (mlir::failed(graph))
    return mlir::failure();
  std::vector<std::vector<mlir::Operation *>> segments;
  for (const plan::Segment &segment : graph->segments) {
    std::vector<mlir::Operation *> ops;
    for (int64_t i = segment.first; i <= segment.last; ++i)
      ops.push_back(graph->ops[i].op);
    segments.push_back(std::move(ops));
  }
  return segments;
}

} // namespace autopar
