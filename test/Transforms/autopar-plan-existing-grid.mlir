// A program whose first op is already a grid (a data-parallel replica's,
// as BatchNorm's shared statistics leave it) is planned again: the old grid
// is replaced, the replicas' axis kept (the plan is the replica's own, dp 1).
// Regression: the builder used to insert before the erased grid and crash.
// RUN: autopar-opt %s --autopar-plan="cluster=local:2 tp=2" | FileCheck %s

// CHECK: shard.grid @autopar_grid(shape = 2x2)
// CHECK-NOT: shard.grid
// CHECK-LABEL: func.func @main
shard.grid @autopar_grid(shape = 2)
func.func @main(%w: tensor<8x8xf32> {autopar.parameter = "w"}, %x: tensor<4x8xf32> {autopar.input = "x"})
    -> (tensor<4x8xf32> {autopar.output = "y"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x8xf32>) outs(%z : tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
