//===- ReshapeSplits.h - Where a split passes through a reshape -*- C++ -*-===//
//
// Shared by the planner's view of reshapes and the sharding models that
// partition them (lib/Transforms): both must agree on which dim of a
// reassociation group a split lands on.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_PLANNER_RESHAPESPLITS_H
#define AUTOPAR_PLANNER_RESHAPESPLITS_H

#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "llvm/ADT/ArrayRef.h"

namespace autopar {

/// The dim of a reshape's reassociation group that a split may pass through:
/// its outermost dim of size > 1 (the unit dims before it hold one index),
/// or its first. `shape` is the shape the group indexes.
inline int64_t splittableDimOfGroup(mlir::ReassociationIndicesRef group,
                                    llvm::ArrayRef<int64_t> shape) {
  for (int64_t d : group)
    if (shape[d] != 1)
      return d;
  return group.front();
}

} // namespace autopar

#endif // AUTOPAR_PLANNER_RESHAPESPLITS_H
