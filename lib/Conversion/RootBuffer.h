//===- RootBuffer.h - The buffer a memref value views -----------*- C++ -*-===//

#ifndef AUTOPAR_LIB_CONVERSION_ROOTBUFFER_H
#define AUTOPAR_LIB_CONVERSION_ROOTBUFFER_H

#include "mlir/IR/Value.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace autopar {

/// The buffer `v` is a view of: through view-like ops to an allocation or
/// a block argument.
inline mlir::Value rootBuffer(mlir::Value v) {
  while (auto view = v.getDefiningOp<mlir::ViewLikeOpInterface>())
    v = view.getViewSource();
  return v;
}

} // namespace autopar

#endif // AUTOPAR_LIB_CONVERSION_ROOTBUFFER_H
