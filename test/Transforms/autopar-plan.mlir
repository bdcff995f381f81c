// autopar-plan of an MLP for training on 8 GPUs with tp pinned: the search
// finds Megatron's split (first weight by columns, second by rows, the partial
// sum all-reduced), annotated so that upstream partitioning gives each rank
// 1/8 of each weight.
// RUN: autopar-opt %s --split-input-file --autopar-plan="cluster=dgx-h100:1 tp=8 mode=train" | FileCheck %s
// RUN: autopar-opt %s --split-input-file --pass-pipeline='builtin.module(autopar-plan{cluster=dgx-h100:1 tp=8 mode=train},func.func(sharding-propagation,shard-partition))' | FileCheck %s --check-prefix=PARTITION

// A Linear-ReLU-Linear MLP on 8 GPUs of one node, tensor parallelism pinned:
// the search finds Megatron's split by itself -- the first weight split by
// columns (loop n), the second by rows (loop k, a partial sum) -- because any
// other choice moves more bytes.
// CHECK: shard.grid @autopar_grid(shape = 1x8)
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[W1:.*]]: tensor<8192x32768xf32> {{.*}}, %[[W2:.*]]: tensor<32768x8192xf32> {{.*}}, %[[X:.*]]: tensor<4096x8192xf32>
// Each weight is read through one annotation with its users' split.
// CHECK: %[[S1:.*]] = shard.sharding @autopar_grid split_axes = {{\[\[}}], [1]]
// CHECK: %[[W1D:.*]] = shard.shard %[[W1]] to %[[S1]] :
// CHECK: %[[S2:.*]] = shard.sharding @autopar_grid split_axes = {{\[\[}}1]]
// CHECK: %[[W2D:.*]] = shard.shard %[[W2]] to %[[S2]] :
// CHECK: %[[W1S:.*]] = shard.shard %[[W1D]] to %{{.*}} annotate_for_users
// CHECK: %[[H:.*]] = linalg.matmul {autopar.stage = 0 : i64} ins(%[[X]], %[[W1S]]
// CHECK: shard.shard %[[H]] to %{{.*}} : tensor<4096x32768xf32>
// CHECK: %[[W2S:.*]] = shard.shard %[[W2D]] to %{{.*}} annotate_for_users
// CHECK: %[[Y:.*]] = linalg.matmul {autopar.stage = 0 : i64} ins(%{{.*}}, %[[W2S]]
// The partial sum leaves replicated: the matmul all-reduces it.
// CHECK: %[[R:.*]] = shard.sharding @autopar_grid split_axes = {{\[\[}}]]
// CHECK: shard.shard %[[Y]] to %[[R]] : tensor<4096x8192xf32>

// After upstream partitioning each rank holds 1/8 of each weight and one
// all-reduce sums the second matmul's partial results.
// PARTITION-LABEL: func.func @main
// PARTITION-SAME: (%{{.*}}: tensor<8192x4096xf32> {{.*}}, %{{.*}}: tensor<4096x8192xf32>
// PARTITION: linalg.matmul {{.*}} -> tensor<4096x4096xf32>
// PARTITION: linalg.matmul {{.*}} -> tensor<4096x8192xf32>
// PARTITION: shard.all_reduce %{{.*}} on @autopar_grid grid_axes = [1]
#map = affine_map<(d0, d1) -> (d0, d1)>
module attributes {autopar.model = "mlp"} {
  func.func @main(%w1: tensor<8192x32768xf32> {autopar.dtype = "float32", autopar.parameter = "W1"},
                  %w2: tensor<32768x8192xf32> {autopar.dtype = "float32", autopar.parameter = "W2"},
                  %x: tensor<4096x8192xf32> {autopar.dtype = "float32", autopar.input = "X"})
      -> (tensor<4096x8192xf32> {autopar.dtype = "float32", autopar.output = "Y"}) {
    %zero = arith.constant 0.0 : f32
    %e1 = tensor.empty() : tensor<4096x32768xf32>
    %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4096x32768xf32>) -> tensor<4096x32768xf32>
    %h = linalg.matmul ins(%x, %w1 : tensor<4096x8192xf32>, tensor<8192x32768xf32>) outs(%f1 : tensor<4096x32768xf32>) -> tensor<4096x32768xf32>
    %e2 = tensor.empty() : tensor<4096x32768xf32>
    %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
        ins(%h : tensor<4096x32768xf32>) outs(%e2 : tensor<4096x32768xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.maximumf %in, %zero : f32
      linalg.yield %m : f32
    } -> tensor<4096x32768xf32>
    %e3 = tensor.empty() : tensor<4096x8192xf32>
    %f3 = linalg.fill ins(%zero : f32) outs(%e3 : tensor<4096x8192xf32>) -> tensor<4096x8192xf32>
    %y = linalg.matmul ins(%r, %w2 : tensor<4096x32768xf32>, tensor<32768x8192xf32>) outs(%f3 : tensor<4096x8192xf32>) -> tensor<4096x8192xf32>
    return %y : tensor<4096x8192xf32>
  }
}
