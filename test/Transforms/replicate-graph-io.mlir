// autopar-replicate-graph-io: on an annotated tp program, graph inputs (not
// parameters) and returned values are annotated as replicated, so every rank
// of the group gets and gives them whole; a program whose plan split nothing
// loses its grid instead.
// RUN: autopar-opt %s -split-input-file -autopar-replicate-graph-io -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32> {autopar.input = "x"}, %[[W:.*]]: tensor<8x16xf32> {autopar.parameter = "w"})
// CHECK: %[[REP:.*]] = shard.sharding @autopar_grid split_axes = {{\[\[\]\]}}
// CHECK: %[[XS:.*]] = shard.shard %[[X]] to %[[REP]] : tensor<4x8xf32>
// CHECK-NOT: shard.shard %[[W]] to %[[REP]] :
// CHECK: linalg.matmul ins(%[[XS]], %{{.*}} :
// CHECK: %[[OUT:.*]] = shard.shard %{{.*}} to %{{.*}} : tensor<4x16xf32>
// CHECK-NEXT: return %[[OUT]]
module {
  shard.grid @autopar_grid(shape = 1x2)
  func.func @main(%x: tensor<4x8xf32> {autopar.input = "x"}, %w: tensor<8x16xf32> {autopar.parameter = "w"}) -> tensor<4x16xf32> {
    %split = shard.sharding @autopar_grid split_axes = [[], [1]] : !shard.sharding
    %ws = shard.shard %w to %split annotate_for_users : tensor<8x16xf32>
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<4x16xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
    %y = linalg.matmul ins(%x, %ws : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
    return %y : tensor<4x16xf32>
  }
}

// -----

// Nothing split: the grid goes, nothing is annotated.
// CHECK-LABEL: module
// CHECK-NOT: shard.grid
// CHECK-LABEL: func.func @main
// CHECK-NOT: shard.
// CHECK: return
module {
  shard.grid @autopar_grid(shape = 1x2)
  func.func @main(%x: tensor<4x8xf32> {autopar.input = "x"}) -> tensor<4x8xf32> {
    return %x : tensor<4x8xf32>
  }
}

// -----

// expected-error @+1 {{@main is annotated but the module has no shard.grid @autopar_grid (run autopar-plan first)}}
module {
  shard.grid @other(shape = 2)
  func.func @main(%x: tensor<4x8xf32> {autopar.input = "x"}) -> tensor<4x8xf32> {
    %s = shard.sharding @other split_axes = [[0]] : !shard.sharding
    %xs = shard.shard %x to %s : tensor<4x8xf32>
    return %xs : tensor<4x8xf32>
  }
}
