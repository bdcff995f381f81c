// autopar-copies-to-linalg: a memref.copy of a strided view becomes a
// linalg.copy of the same source and destination, and no memref.copy is left.
// RUN: autopar-opt %s --autopar-copies-to-linalg | FileCheck %s

// Strided copies must not reach finalize-memref-to-llvm as memref.copy: that
// would call MLIR's memrefCopy, which the runtime does not provide.
// CHECK-LABEL: func.func @strided_copy
// CHECK-SAME: (%[[SRC:.*]]: memref<4x4xf32, strided<[8, 1]>>, %[[DST:.*]]: memref<4x4xf32>)
// CHECK: linalg.copy ins(%[[SRC]] : memref<4x4xf32, strided<[8, 1]>>) outs(%[[DST]] : memref<4x4xf32>)
// CHECK-NOT: memref.copy
func.func @strided_copy(%src: memref<4x4xf32, strided<[8, 1]>>, %dst: memref<4x4xf32>) {
  memref.copy %src, %dst : memref<4x4xf32, strided<[8, 1]>> to memref<4x4xf32>
  return
}
