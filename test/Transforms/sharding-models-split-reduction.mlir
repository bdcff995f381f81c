// autopar's linalg sharding model partitions a softmax over a split dim (a row
// split over tp): each rank reduces its block, the partial max and the partial
// sum are all-reduced with their own reduction kinds (max, then sum), and the
// elementwise ops stay split, with no all-gather. Inits that are the
// combiner's neutral element (-inf for max, 0 for a sum) are every rank's: no
// rank-dependent choice of init.
// RUN: autopar-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(sharding-propagation,shard-partition))' | FileCheck %s

// CHECK-LABEL: func.func @softmax_split_dim
// CHECK-SAME: (%[[X:.*]]: tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NOT: scf.if
// CHECK: %[[M:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4x4xf32>)
// CHECK: arith.maximumf
// CHECK: %[[MAX:.*]] = shard.all_reduce %[[M]] on @grid grid_axes = [0] reduction = max : tensor<4xf32> -> tensor<4xf32>
// CHECK: %[[EX:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[MAX]] : tensor<4x4xf32>, tensor<4xf32>)
// CHECK: math.exp
// CHECK-NOT: shard.all_gather
// CHECK: %[[S:.*]] = linalg.generic {{.*}} ins(%[[EX]] : tensor<4x4xf32>)
// CHECK: arith.addf
// CHECK: %[[SUM:.*]] = shard.all_reduce %[[S]] on @grid grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
// CHECK: %[[Y:.*]] = linalg.generic {{.*}} ins(%[[EX]], %[[SUM]] : tensor<4x4xf32>, tensor<4xf32>)
// CHECK: arith.divf
// CHECK: return %[[Y]]
#row = affine_map<(d0, d1) -> (d0, d1)>
#red = affine_map<(d0, d1) -> (d0)>
shard.grid @grid(shape = 2)
func.func @softmax_split_dim(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s annotate_for_users : tensor<4x8xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<4xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %m = linalg.generic {indexing_maps = [#row, #red], iterator_types = ["parallel", "reduction"]} ins(%xs : tensor<4x8xf32>) outs(%m0 : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.maximumf %a, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %ex = linalg.generic {indexing_maps = [#row, #red, #row], iterator_types = ["parallel", "parallel"]} ins(%xs, %m : tensor<4x8xf32>, tensor<4xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %exs = shard.shard %ex to %s : tensor<4x8xf32>
  %exu = shard.shard %exs to %s annotate_for_users : tensor<4x8xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#row, #red], iterator_types = ["parallel", "reduction"]} ins(%exu : tensor<4x8xf32>) outs(%s0 : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %e3 = tensor.empty() : tensor<4x8xf32>
  %y = linalg.generic {indexing_maps = [#row, #red, #row], iterator_types = ["parallel", "parallel"]} ins(%exu, %sum : tensor<4x8xf32>, tensor<4xf32>) outs(%e3 : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.divf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<4x8xf32>
  %ys = shard.shard %y to %s : tensor<4x8xf32>
  return %ys : tensor<4x8xf32>
}

// -----

// A split sum onto an init that is not neutral (a bias): the first rank of
// the reduction group adds it, the others start from zero, so the all-reduce
// adds it once.
// CHECK-LABEL: func.func @row_sum_onto_bias
// CHECK-SAME: (%[[X:.*]]: tensor<4x4xf32>, %[[B:.*]]: tensor<4xf32>)
// CHECK: %[[IDX:.*]] = shard.process_multi_index on @grid axes = [0]
// CHECK: %[[LEAD:.*]] = arith.cmpi eq, %[[IDX]], %{{.*}} : index
// CHECK: %[[INIT:.*]] = scf.if %[[LEAD]]
// CHECK-NEXT: scf.yield %[[B]]
// CHECK: } else {
// CHECK: %[[Z:.*]] = linalg.fill
// CHECK-NEXT: scf.yield %[[Z]]
// CHECK: %[[S:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<4x4xf32>) outs(%[[INIT]] : tensor<4xf32>)
// CHECK: %[[SUM:.*]] = shard.all_reduce %[[S]] on @grid grid_axes = [0]
// CHECK: return %[[SUM]]
#row = affine_map<(d0, d1) -> (d0, d1)>
#red = affine_map<(d0, d1) -> (d0)>
shard.grid @grid(shape = 2)
func.func @row_sum_onto_bias(%x: tensor<4x8xf32>, %bias: tensor<4xf32>) -> tensor<4xf32> {
  %s = shard.sharding @grid split_axes = [[], [0]] : !shard.sharding
  %xs = shard.shard %x to %s annotate_for_users : tensor<4x8xf32>
  %sum = linalg.generic {indexing_maps = [#row, #red], iterator_types = ["parallel", "reduction"]} ins(%xs : tensor<4x8xf32>) outs(%bias : tensor<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %sum : tensor<4xf32>
}

// -----

// A split reduction whose body reads a value defined above it (the
// ignore_index the canonicalizer hoisted out of the body of the loss's sum
// over positions): the partitioned body reads the partitioned function's
// copy of it, not the erased original.
// CHECK-LABEL: func.func @split_reduction_reads_outer_scalar
// CHECK-SAME: (%[[NLL:.*]]: tensor<4xf32>, %[[L:.*]]: tensor<4xi64>) -> tensor<f32>
// CHECK-DAG: %[[IGNORE:.*]] = arith.constant -100 : i64
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: %[[S:.*]] = linalg.generic {{.*}} ins(%[[NLL]], %[[L]] : tensor<4xf32>, tensor<4xi64>)
// CHECK: %[[VALID:.*]] = arith.cmpi ne, %{{.*}}, %[[IGNORE]] : i64
// CHECK-NEXT: arith.select %[[VALID]], %{{.*}}, %[[ZERO]] : f32
// CHECK: %[[R:.*]] = shard.all_reduce %[[S]] on @grid grid_axes = [0] : tensor<f32> -> tensor<f32>
// CHECK: return %[[R]]
#pos = affine_map<(d0) -> (d0)>
#sum = affine_map<(d0) -> ()>
shard.grid @grid(shape = 2)
func.func @split_reduction_reads_outer_scalar(%nll: tensor<8xf32>, %labels: tensor<8xi64>) -> tensor<f32> {
  %s = shard.sharding @grid split_axes = [[0]] : !shard.sharding
  %r = shard.sharding @grid split_axes = [[]] : !shard.sharding
  %ns = shard.shard %nll to %s annotate_for_users : tensor<8xf32>
  %ls = shard.shard %labels to %s annotate_for_users : tensor<8xi64>
  %ignore = arith.constant -100 : i64
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %total = linalg.generic {indexing_maps = [#pos, #pos, #sum], iterator_types = ["reduction"]} ins(%ns, %ls : tensor<8xf32>, tensor<8xi64>) outs(%init : tensor<f32>) {
  ^bb0(%a: f32, %label: i64, %acc: f32):
    %valid = arith.cmpi ne, %label, %ignore : i64
    %v = arith.select %valid, %a, %zero : f32
    %sum = arith.addf %acc, %v : f32
    linalg.yield %sum : f32
  } -> tensor<f32>
  %ts = shard.shard %total to %r : tensor<f32>
  return %ts : tensor<f32>
}
