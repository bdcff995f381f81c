// autopar-differentiate on a forward a tensor-parallel plan annotated: each
// cotangent is laid out as its value, with the annotation read the other
// way, so partitioning gives the backward Megatron's conjugate collectives.
// RUN: autopar-opt %s -autopar-differentiate | FileCheck %s
// RUN: autopar-opt %s --pass-pipeline='builtin.module(autopar-differentiate,func.func(sharding-propagation,autopar-unify-result-annotations,autopar-check-partitionable,shard-partition))' | FileCheck %s --check-prefix=PART

// a = x * w0 is whole on every rank and read whole by the column-split
// matmul (w1 split along its columns); the loss sums the split h.
// CHECK-LABEL: func.func @main
// CHECK-DAG: %[[R:.*]] = shard.sharding @autopar_grid split_axes = {{\[\[}}]] : !shard.sharding
// CHECK-DAG: %[[C:.*]] = shard.sharding @autopar_grid split_axes = {{\[\[}}], [1]] : !shard.sharding
// The result annotation of h becomes an annotation for the users of dh (the
// matmul's adjoints read it split)...
// CHECK: linalg.reduce
// CHECK: %[[DH:.*]] = shard.shard %{{.*}} to %[[C]] annotate_for_users : tensor<2x4xf32>
// CHECK: %[[DA:.*]] = linalg.matmul {{.*}} ins(%[[DH]], %{{.*}} :
// CHECK: %[[DW1:.*]] = linalg.matmul {{.*}} ins(%{{.*}}, %[[DH]] :
// ... the annotation by which the matmul read w1 becomes the result
// annotation of its gradient, and the one by which it read a whole makes
// da whole where it is made: the ranks' partial sums are all-reduced
// (Megatron's f in backward).
// CHECK-DAG: shard.shard %[[DW1]] to %[[C]] : tensor<3x4xf32>
// CHECK-DAG: shard.shard %[[DA]] to %[[R]] : tensor<2x3xf32>
// PART-LABEL: func.func @main
// PART-SAME: %{{.*}}: tensor<3x2xf32>
// PART: %[[DA:.*]] = linalg.matmul {{.*}} -> tensor<2x3xf32>
// PART: shard.all_reduce %[[DA]] on @autopar_grid grid_axes = [1] : tensor<2x3xf32> -> tensor<2x3xf32>
#bcast = affine_map<(d0, d1) -> (d1)>
#id = affine_map<(d0, d1) -> (d0, d1)>
shard.grid @autopar_grid(shape = 1x2)
func.func @main(%w0: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "w0"},
                %w1: tensor<3x4xf32> {autopar.dtype = "float32", autopar.parameter = "w1"},
                %x: tensor<2x3xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"}) {
  %r = shard.sharding @autopar_grid split_axes = [[]] : !shard.sharding
  %c = shard.sharding @autopar_grid split_axes = [[], [1]] : !shard.sharding
  %w0s = shard.shard %w0 to %r : tensor<3xf32>
  %w1s = shard.shard %w1 to %c : tensor<3x4xf32>
  %xs = shard.shard %x to %r : tensor<2x3xf32>
  %zero = arith.constant 0.0 : f32
  %ae = tensor.empty() : tensor<2x3xf32>
  %a = linalg.generic {indexing_maps = [#id, #bcast, #id], iterator_types = ["parallel", "parallel"]} ins(%xs, %w0s : tensor<2x3xf32>, tensor<3xf32>) outs(%ae : tensor<2x3xf32>) {
  ^bb0(%in: f32, %w: f32, %out: f32):
    %m = arith.mulf %in, %w : f32
    linalg.yield %m : f32
  } -> tensor<2x3xf32>
  %as = shard.shard %a to %r : tensor<2x3xf32>
  %au = shard.shard %as to %r annotate_for_users : tensor<2x3xf32>
  %w1u = shard.shard %w1s to %c annotate_for_users : tensor<3x4xf32>
  %he = tensor.empty() : tensor<2x4xf32>
  %hinit = linalg.fill ins(%zero : f32) outs(%he : tensor<2x4xf32>) -> tensor<2x4xf32>
  %h = linalg.matmul ins(%au, %w1u : tensor<2x3xf32>, tensor<3x4xf32>) outs(%hinit : tensor<2x4xf32>) -> tensor<2x4xf32>
  %hs = shard.shard %h to %c : tensor<2x4xf32>
  %hu = shard.shard %hs to %c annotate_for_users : tensor<2x4xf32>
  %le = tensor.empty() : tensor<f32>
  %linit = linalg.fill ins(%zero : f32) outs(%le : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%hu : tensor<2x4xf32>) outs(%linit : tensor<f32>) dimensions = [0, 1]
    (%in: f32, %acc: f32) {
      %s = arith.addf %in, %acc : f32
      linalg.yield %s : f32
    }
  return %loss : tensor<f32>
}
