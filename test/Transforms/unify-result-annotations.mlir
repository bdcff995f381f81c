// autopar-unify-result-annotations: one result annotation per op result, as
// shard-partition requires; a rank-0 result read without one gets a
// replicated one, so that a sum over split loops that makes it is
// all-reduced.
// RUN: autopar-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(autopar-unify-result-annotations))' | FileCheck %s
// RUN: autopar-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(autopar-unify-result-annotations,autopar-check-partitionable,shard-partition))' | FileCheck %s --check-prefix=PART

// Two equal result annotations (propagation visits the forward's and the
// backward's users apart): the users of the second read the first.
// CHECK-LABEL: func.func @two_annotations
// CHECK: %[[E:.*]] = linalg.generic
// CHECK: %[[A:.*]] = shard.shard %[[E]] to %{{.*}} : tensor<8xf32>
// CHECK-NOT: shard.shard %[[E]]
// CHECK: shard.shard %[[A]] to %{{.*}} annotate_for_users
// CHECK: shard.shard %[[A]] to %{{.*}} annotate_for_users
shard.grid @autopar_grid(shape = 1x2)
func.func @two_annotations(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %s = shard.sharding @autopar_grid split_axes = [[1]] : !shard.sharding
  %t = shard.sharding @autopar_grid split_axes = [[1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8xf32>
  %xu = shard.shard %xs to %s annotate_for_users : tensor<8xf32>
  %init = tensor.empty() : tensor<8xf32>
  %is = shard.shard %init to %s : tensor<8xf32>
  %iu = shard.shard %is to %s annotate_for_users : tensor<8xf32>
  %e = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%xu : tensor<8xf32>) outs(%iu : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<8xf32>
  %a = shard.shard %e to %s : tensor<8xf32>
  %b = shard.shard %e to %t : tensor<8xf32>
  %au = shard.shard %a to %s annotate_for_users : tensor<8xf32>
  %bu = shard.shard %b to %t annotate_for_users : tensor<8xf32>
  return %au, %bu : tensor<8xf32>, tensor<8xf32>
}

// -----

// A sum over a split dim into a rank-0 tensor that scalar code reads: the
// replicated annotation makes shard-partition all-reduce the ranks' partial
// sums before tensor.extract reads the value.
// CHECK-LABEL: func.func @rank0_sum
// CHECK: %[[R:.*]] = linalg.reduce
// CHECK: %[[A:.*]] = shard.shard %[[R]] to %[[S:.*]] : tensor<f32>
// CHECK: tensor.extract %[[A]][]
// PART-LABEL: func.func @rank0_sum
// PART-SAME: (%[[X:.*]]: tensor<4xf32>) -> f32
// PART: %[[R:.*]] = linalg.reduce ins(%[[X]] : tensor<4xf32>)
// PART: %[[AR:.*]] = shard.all_reduce %[[R]] on @autopar_grid grid_axes = [1] : tensor<f32> -> tensor<f32>
// PART: %[[E:.*]] = tensor.extract %[[AR]][] : tensor<f32>
// PART: return %[[E]] : f32
shard.grid @autopar_grid(shape = 1x2)
func.func @rank0_sum(%x: tensor<8xf32>) -> f32 {
  %s = shard.sharding @autopar_grid split_axes = [[1]] : !shard.sharding
  %xs = shard.shard %x to %s : tensor<8xf32>
  %xu = shard.shard %xs to %s annotate_for_users : tensor<8xf32>
  %zero = arith.constant dense<0.0> : tensor<f32>
  %r = linalg.reduce ins(%xu : tensor<8xf32>) outs(%zero : tensor<f32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %sum = arith.addf %in, %acc : f32
      linalg.yield %sum : f32
    }
  %e = tensor.extract %r[] : tensor<f32>
  return %e : f32
}
