// autopar-plan (dp=2 tp=2): the dp axis (grid axis 0) is on the batch of every
// activation, not only on the graph inputs, so the partitioned program keeps
// each replica's share of the batch from input to output and communicates over
// tp only; parameters stay whole over dp.
// RUN: autopar-opt %s --autopar-plan="cluster=local:4 dp=2 tp=2" | FileCheck %s
// RUN: autopar-opt %s --pass-pipeline='builtin.module(autopar-plan{cluster=local:4 dp=2 tp=2},func.func(sharding-propagation,autopar-check-partitionable,shard-partition))' | FileCheck %s --check-prefix=PARTITION

// CHECK: shard.grid @autopar_grid(shape = 2x2)
// CHECK-LABEL: func.func @main
// CHECK-DAG: shard.sharding @autopar_grid split_axes = {{\[\[}}0]]
// CHECK-DAG: shard.sharding @autopar_grid split_axes = {{\[\[}}0], [1]]
// CHECK: return

// PARTITION-LABEL: func.func @main
// PARTITION-SAME: %[[X:arg[0-9]+]]: tensor<32x64xf32> {autopar.dtype = "float32", autopar.input = "X"}
// PARTITION-NOT: grid_axes = [0]
// PARTITION: linalg.matmul {{.*}}ins(%[[X]], %{{.*}} : tensor<32x64xf32>,
// PARTITION-NOT: grid_axes = [0]
// PARTITION: linalg.matmul {{.*}}ins(%{{.*}}, %{{.*}} : tensor<32x
// PARTITION-NOT: grid_axes = [0]
// PARTITION: return %{{.*}} : tensor<32x64xf32>
#map = affine_map<(d0, d1) -> (d0, d1)>
module attributes {autopar.model = "mlp"} {
  func.func @main(%w1: tensor<64x64xf32> {autopar.dtype = "float32", autopar.parameter = "W1"},
                  %w2: tensor<64x64xf32> {autopar.dtype = "float32", autopar.parameter = "W2"},
                  %x: tensor<64x64xf32> {autopar.dtype = "float32", autopar.input = "X"})
      -> (tensor<64x64xf32> {autopar.dtype = "float32", autopar.output = "Y"}) {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<64x64xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
    %h = linalg.matmul ins(%x, %w1 : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
    %e2 = tensor.empty() : tensor<64x64xf32>
    %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
        ins(%h : tensor<64x64xf32>) outs(%e2 : tensor<64x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.maximumf %in, %zero : f32
      linalg.yield %m : f32
    } -> tensor<64x64xf32>
    %e3 = tensor.empty() : tensor<64x64xf32>
    %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<64x64xf32>) -> tensor<64x64xf32>
    %y = linalg.matmul ins(%r, %w2 : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f3 : tensor<64x64xf32>) -> tensor<64x64xf32>
    return %y : tensor<64x64xf32>
  }
}
