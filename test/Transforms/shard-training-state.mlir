// autopar-shard-training-state: a tensor-parallel step's optimizer states and
// updates are laid out as their parameters, the optimizer reads a parameter
// through its one annotation, inputs are whole, rank-0 tensors are left
// alone.
// RUN: autopar-opt %s --split-input-file --autopar-shard-training-state | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[W:.*]]: tensor<4x8xf32> {{.*}}, %[[M:.*]]: tensor<4x8xf32> {{.*}}, %[[V:.*]]: tensor<2xf32> {{.*}}, %[[STEP:.*]]: tensor<i64> {{.*}}, %[[X:.*]]: tensor<4x8xf32>
// The optimizer state of the parameter's shape: the parameter's split.
// CHECK-DAG: %[[MS:.*]] = shard.sharding @autopar_grid split_axes = {{\[\[}}], [1]] : !shard.sharding
// CHECK-DAG: %[[MA:.*]] = shard.shard %[[M]] to %[[MS]] : tensor<4x8xf32>
// Another shape: whole.
// CHECK-DAG: %[[VS:.*]] = shard.sharding @autopar_grid split_axes = {{\[\[}}]] : !shard.sharding
// CHECK-DAG: %[[VA:.*]] = shard.shard %[[V]] to %[[VS]] : tensor<2xf32>
// CHECK-DAG: %[[XA:.*]] = shard.shard %[[X]] to %{{.*}} : tensor<4x8xf32>
// CHECK-NOT: shard.shard %[[STEP]]
// CHECK: %[[WS:.*]] = shard.sharding @autopar_grid split_axes = {{\[\[}}], [1]] : !shard.sharding
// CHECK: %[[WA:.*]] = shard.shard %[[W]] to %[[WS]] : tensor<4x8xf32>
// The optimizer's reads of the parameter and its state go through them.
// CHECK: %[[NEW:.*]]:2 = linalg.generic {{.*}} ins(%[[WA]], %[[MA]], %[[XA]] : {{.*}})
// CHECK: %[[NW:.*]] = shard.shard %[[NEW]]#0 to %[[WS]] : tensor<4x8xf32>
// CHECK: %[[NM:.*]] = shard.shard %[[NEW]]#1 to %[[MS]] : tensor<4x8xf32>
// An update that is its argument as annotated keeps that annotation.
// CHECK: return %[[STEP]], %[[NW]], %[[NM]], %[[VA]] :
shard.grid @autopar_grid(shape = 1x2)
func.func @main(%w: tensor<4x8xf32> {autopar.parameter = "w", autopar.trainable},
                %m: tensor<4x8xf32> {autopar.optimizer_state = "momentum", autopar.state_of = "w"},
                %v: tensor<2xf32> {autopar.optimizer_state = "other", autopar.state_of = "w"},
                %step: tensor<i64> {autopar.step},
                %x: tensor<4x8xf32> {autopar.input = "x"})
    -> (tensor<i64> {autopar.metric = "step"}, tensor<4x8xf32> {autopar.update = "w"},
        tensor<4x8xf32> {autopar.update = "w.momentum"}, tensor<2xf32> {autopar.update = "w.other"}) {
  %s = shard.sharding @autopar_grid split_axes = [[], [1]] : !shard.sharding
  %ws = shard.shard %w to %s : tensor<4x8xf32>
  %wu = shard.shard %ws to %s annotate_for_users : tensor<4x8xf32>
  %init = tensor.empty() : tensor<4x8xf32>
  %new:2 = linalg.generic {indexing_maps = [#id, #id, #id, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%w, %m, %x : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) outs(%init, %init : tensor<4x8xf32>, tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32, %p: f32):
    %d = arith.addf %a, %b : f32
    %e = arith.mulf %d, %c : f32
    linalg.yield %d, %e : f32, f32
  } -> (tensor<4x8xf32>, tensor<4x8xf32>)
  return %step, %new#0, %new#1, %v : tensor<i64>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<2xf32>
}

// -----

// A plan that splits nothing (no grid) leaves the step as it is.
// CHECK-LABEL: func.func @main
// CHECK-NOT: shard.shard
func.func @main(%w: tensor<4xf32> {autopar.parameter = "w", autopar.trainable})
    -> (tensor<4xf32> {autopar.update = "w"}) {
  return %w : tensor<4xf32>
}

// -----

// A forward's state update (BatchNorm's running mean) that the plan annotated
// whole as a graph output leaves as its parameter is split, so that the
// rank's block of the parameter receives its block of the update; an update
// already annotated as its parameter keeps its one annotation.
// CHECK-LABEL: func.func @main
// CHECK: %[[SPLIT:.*]] = shard.sharding @autopar_grid split_axes = {{\[\[}}1]] : !shard.sharding
// CHECK: %[[WHOLE:.*]] = shard.sharding @autopar_grid split_axes = {{\[\[}}]] : !shard.sharding
// CHECK: shard.shard %arg0 to %[[SPLIT]] : tensor<8xf32>
// CHECK: %[[SS:.*]] = shard.shard %arg1 to %[[SPLIT]] : tensor<8xf32>
// CHECK: %[[NEXT:.*]] = linalg.generic
// CHECK: %[[NEXTW:.*]] = shard.shard %[[NEXT]] to %[[WHOLE]] : tensor<8xf32>
// CHECK: %[[RESPLIT:.*]] = shard.shard %[[NEXTW]] to %{{.*}} : tensor<8xf32>
// CHECK-NOT: shard.shard %[[SS]]
// CHECK: return %[[RESPLIT]], %[[SS]] :
shard.grid @autopar_grid(shape = 1x2)
func.func @main(%mean: tensor<8xf32> {autopar.parameter = "mean"},
                %scale: tensor<8xf32> {autopar.parameter = "scale", autopar.trainable})
    -> (tensor<8xf32> {autopar.update = "mean"}, tensor<8xf32> {autopar.update = "scale"}) {
  %split = shard.sharding @autopar_grid split_axes = [[1]] : !shard.sharding
  %whole = shard.sharding @autopar_grid split_axes = [[]] : !shard.sharding
  %ms = shard.shard %mean to %split : tensor<8xf32>
  %ss = shard.shard %scale to %split : tensor<8xf32>
  %init = tensor.empty() : tensor<8xf32>
  %next = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%ms : tensor<8xf32>) outs(%init : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.addf %a, %a : f32
    linalg.yield %d : f32
  } -> tensor<8xf32>
  %nexta = shard.shard %next to %whole : tensor<8xf32>
  return %nexta, %ss : tensor<8xf32>, tensor<8xf32>
}
