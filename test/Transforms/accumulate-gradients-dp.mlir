// autopar-accumulate-gradients with data-parallel=N: @main is one replica of
// N, each on its share of the global batch. After the micro-batch loop the
// sums (loss, gradients, a ratio loss's denominator) are all-reduced in one
// flat bucket over axis 0 of @autopar_grid (made, of shape N) before the
// normalisation, and
// an averaged loss is divided by micro-batches x N. A forward that updates
// parameters itself (BatchNorm) without sharing its statistics is refused;
// Dropout's masks follow the global sample index.
// RUN: autopar-opt %s -split-input-file -verify-diagnostics --autopar-accumulate-gradients="micro-batches=1 data-parallel=2" | FileCheck %s
// RUN: autopar-opt %s -split-input-file -verify-diagnostics --autopar-accumulate-gradients="micro-batches=3 data-parallel=4" | FileCheck %s --check-prefix=M3N4
// Without buckets (a tensor-parallel step's gradients are blocks a flat
// bucket would gather) each sum is all-reduced on its own.
// RUN: autopar-opt %s -split-input-file -verify-diagnostics --autopar-accumulate-gradients="micro-batches=1 data-parallel=2 bucket=false" | FileCheck %s --check-prefix=NOBUCKET
// NOBUCKET-LABEL: func.func @main
// NOBUCKET-NOT: tensor.insert_slice
// NOBUCKET: %[[CALL:.*]]:3 = scf.for
// NOBUCKET-DAG: shard.all_reduce %[[CALL]]#0 on @autopar_grid grid_axes = [0] : tensor<f32> -> tensor<f32>
// NOBUCKET-DAG: shard.all_reduce %[[CALL]]#1 on @autopar_grid grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
// NOBUCKET-DAG: shard.all_reduce %[[CALL]]#2 on @autopar_grid grid_axes = [0] : tensor<f32> -> tensor<f32>
// RUN: not autopar-opt %s -split-input-file --autopar-accumulate-gradients="data-parallel=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not autopar-opt %s -split-input-file --autopar-accumulate-gradients="data-parallel=2 zero-stage=5" 2>&1 | FileCheck %s --check-prefix=STAGE
// STAGE: error: autopar-accumulate-gradients: zero-stage must be 0 to 3, not 5
// ZERO: error: autopar-accumulate-gradients: data-parallel must be at least 1, not 0

// A mean over valid targets: num, the gradient and den are flattened into
// one bucket, all-reduced once, cut back, then divided by the global den.
// CHECK: shard.grid @autopar_grid(shape = 2)
// CHECK-LABEL: func.func @main
// CHECK-SAME: tensor<2x4xf32> {autopar.input = "x"}
// CHECK: %[[SUMS:.*]]:3 = scf.for
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<6xf32>
// CHECK: %[[NUM1:.*]] = tensor.expand_shape %[[SUMS]]#0 [] output_shape [1] : tensor<f32> into tensor<1xf32>
// CHECK: %[[B0:.*]] = tensor.insert_slice %[[NUM1]] into %[[EMPTY]][0] [1] [1]
// CHECK: %[[B1:.*]] = tensor.insert_slice %[[SUMS]]#1 into %[[B0]][1] [4] [1]
// CHECK: %[[DEN1:.*]] = tensor.expand_shape %[[SUMS]]#2 [] output_shape [1]
// CHECK: %[[B2:.*]] = tensor.insert_slice %[[DEN1]] into %[[B1]][5] [1] [1]
// CHECK: %[[R:.*]] = shard.all_reduce %[[B2]] on @autopar_grid grid_axes = [0] : tensor<6xf32> -> tensor<6xf32>
// CHECK-NOT: shard.all_reduce
// CHECK: %[[NUMS:.*]] = tensor.extract_slice %[[R]][0] [1] [1]
// CHECK: %[[NUM:.*]] = tensor.collapse_shape %[[NUMS]] [] : tensor<1xf32> into tensor<f32>
// CHECK: %[[GRAD:.*]] = tensor.extract_slice %[[R]][1] [4] [1]
// CHECK: %[[DENS:.*]] = tensor.extract_slice %[[R]][5] [1] [1]
// CHECK: %[[DEN:.*]] = tensor.collapse_shape %[[DENS]] []
// CHECK: %[[LOSS:.*]] = linalg.generic {{.*}} ins(%[[DEN]] : tensor<f32>) outs(%[[NUM]] : tensor<f32>)
// CHECK: arith.divf
// CHECK: %[[G:.*]] = linalg.generic {{.*}} ins(%[[DEN]] : tensor<f32>) outs(%[[GRAD]] : tensor<4xf32>)
// CHECK: arith.divf
// CHECK: return %[[LOSS]], %[[G]]
// M3N4: shard.grid @autopar_grid(shape = 4)
// M3N4-LABEL: func.func @main
// M3N4-SAME: tensor<6x4xf32> {autopar.input = "x"}
// M3N4: shard.all_reduce %{{.*}} on @autopar_grid grid_axes = [0] : tensor<6xf32>
// M3N4-NOT: shard.all_reduce

#id = affine_map<(d0) -> (d0)>
#red = affine_map<(d0) -> ()>
#scalar = affine_map<() -> ()>
func.func @main(%w: tensor<4xf32> {autopar.parameter = "w", autopar.trainable},
                %x: tensor<2x4xf32> {autopar.input = "x"},
                %y: tensor<2xf32> {autopar.input = "y"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<4xf32> {autopar.gradient = "w", autopar.output = "w.grad"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %num = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction"]}
      ins(%w : tensor<4xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %den = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction"]}
      ins(%y : tensor<2xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#scalar, #scalar, #scalar], iterator_types = []}
      ins(%num, %den : tensor<f32>, tensor<f32>) outs(%e : tensor<f32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.divf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<f32>
  %ge = tensor.empty() : tensor<4xf32>
  %grad = linalg.generic {indexing_maps = [#red, #id], iterator_types = ["parallel"]}
      ins(%den : tensor<f32>) outs(%ge : tensor<4xf32>) {
  ^bb0(%b: f32, %o: f32):
    %one = arith.constant 1.0 : f32
    %d = arith.divf %one, %b : f32
    linalg.yield %d : f32
  } -> tensor<4xf32>
  return %loss, %grad : tensor<f32>, tensor<4xf32>
}

// -----

// Any other loss is averaged over every micro-batch of every replica: 2 on
// one micro-batch each, 12 for 3 micro-batches on 4 replicas.
// CHECK-LABEL: func.func @main
// CHECK: %[[SUMS:.*]]:2 = scf.for
// CHECK: %[[R:.*]] = shard.all_reduce %{{.*}} : tensor<5xf32> -> tensor<5xf32>
// CHECK: %[[LS:.*]] = tensor.extract_slice %[[R]][0] [1] [1]
// CHECK: %[[L:.*]] = tensor.collapse_shape %[[LS]]
// CHECK: %[[G:.*]] = tensor.extract_slice %[[R]][1] [4] [1]
// CHECK: %[[TWO:.*]] = arith.constant dense<2.000000e+00> : tensor<f32>
// CHECK: linalg.generic {{.*}} ins(%[[TWO]] : tensor<f32>) outs(%[[L]] : tensor<f32>)
// CHECK: linalg.generic {{.*}} ins(%[[TWO]] : tensor<f32>) outs(%[[G]] : tensor<4xf32>)
// M3N4-LABEL: func.func @main
// M3N4: arith.constant dense<1.200000e+01> : tensor<f32>

#id = affine_map<(d0) -> (d0)>
#red = affine_map<(d0) -> ()>
#scalar = affine_map<() -> ()>
func.func @main(%w: tensor<4xf32> {autopar.parameter = "w", autopar.trainable},
                %x: tensor<2x4xf32> {autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<4xf32> {autopar.gradient = "w", autopar.output = "w.grad"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %num = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction"]}
      ins(%w : tensor<4xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#scalar, #scalar, #scalar], iterator_types = []}
      ins(%num, %num : tensor<f32>, tensor<f32>) outs(%e : tensor<f32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.divf %a, %b : f32
    linalg.yield %d : f32
  } -> tensor<f32>
  %ge = tensor.empty() : tensor<4xf32>
  %grad = linalg.fill ins(%zero : f32) outs(%ge : tensor<4xf32>) -> tensor<4xf32>
  return %loss, %grad : tensor<f32>, tensor<4xf32>
}

// -----

// A running statistic the forward updates from its replica's own batch
// would differ between replicas.
#id = affine_map<(d0) -> (d0)>
#red = affine_map<(d0) -> ()>
// expected-error @+1 {{data-parallel training: the forward updates parameters itself (BatchNorm's running statistics) from its own batch, so the}}
func.func @main(%w: tensor<4xf32> {autopar.parameter = "w", autopar.trainable},
                %rm: tensor<4xf32> {autopar.parameter = "rm"},
                %x: tensor<2x4xf32> {autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<4xf32> {autopar.gradient = "w", autopar.output = "w.grad"},
        tensor<4xf32> {autopar.update = "rm"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction"]}
      ins(%w : tensor<4xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss, %w, %w : tensor<f32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Dropout's masks follow the global sample index: replica r's micro-batch k
// starts at sample (r x micro-batches + k) x its batch of 2; the seed passes
// unchanged.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[SEED:[^:]*]]: tensor<i64> {autopar.seed}, %{{[^:]*}}: tensor<2x4xf32> {autopar.input = "x"})
// CHECK: %[[R:.*]] = shard.process_multi_index on @autopar_grid axes = [0] : index
// CHECK: %[[SPAN:.*]] = arith.constant 2 : i64
// CHECK: %[[RI:.*]] = arith.index_cast %[[R]] : index to i64
// CHECK: %[[BASE:.*]] = arith.muli %[[RI]], %[[SPAN]] : i64
// CHECK: scf.for %[[K:[^ ]*]] =
// CHECK: %[[KI:.*]] = arith.index_cast %[[K]] : index to i64
// CHECK: %[[OFF:.*]] = arith.muli %[[KI]], %{{.*}} : i64
// CHECK: %[[FIRST:.*]] = arith.addi %[[BASE]], %[[OFF]] : i64
// CHECK: %[[T:.*]] = tensor.from_elements %[[FIRST]] : tensor<i64>
// CHECK: func.call @main_micro_batch(%{{.*}}, %[[SEED]], %[[T]], %{{.*}})
// M3N4-LABEL: func.func @main
// M3N4-SAME: tensor<6x4xf32> {autopar.input = "x"}
// M3N4: %[[R:.*]] = shard.process_multi_index on @autopar_grid axes = [0] : index
// M3N4: %[[SPAN:.*]] = arith.constant 6 : i64
// M3N4: %[[RI:.*]] = arith.index_cast %[[R]] : index to i64
// M3N4: arith.muli %[[RI]], %[[SPAN]] : i64
#id = affine_map<(d0) -> (d0)>
#red = affine_map<(d0) -> ()>
func.func @main(%w: tensor<4xf32> {autopar.parameter = "w", autopar.trainable},
                %seed: tensor<i64> {autopar.seed},
                %offset: tensor<i64> {autopar.sample_offset},
                %x: tensor<2x4xf32> {autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<4xf32> {autopar.gradient = "w", autopar.output = "w.grad"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction"]}
      ins(%w : tensor<4xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss, %w : tensor<f32>, tensor<4xf32>
}

// -----

// Statistics reduced over the replicas (SyncBatchNorm's, as the importer
// writes them for a replica) are the same on every replica: the update is
// carried and returned.
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[RM:[^:]*]]: tensor<4xf32> {autopar.parameter = "rm"}
// CHECK: %[[SUMS:.*]]:3 = scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %[[STATE:.*]] = %[[RM]])
// CHECK: return %{{.*}}, %{{.*}}, %[[SUMS]]#2
#id = affine_map<(d0) -> (d0)>
#red = affine_map<(d0) -> ()>
module {
  shard.grid @autopar_grid(shape = 2)
  func.func @main(%w: tensor<4xf32> {autopar.parameter = "w", autopar.trainable},
                  %rm: tensor<4xf32> {autopar.parameter = "rm"},
                  %x: tensor<2x4xf32> {autopar.input = "x"})
      -> (tensor<f32> {autopar.output = "loss"},
          tensor<4xf32> {autopar.gradient = "w", autopar.output = "w.grad"},
          tensor<4xf32> {autopar.update = "rm"}) {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<f32>
    %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
    %loss = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["reduction"]}
        ins(%w : tensor<4xf32>) outs(%z : tensor<f32>) {
    ^bb0(%a: f32, %acc: f32):
      %s = arith.addf %a, %acc : f32
      linalg.yield %s : f32
    } -> tensor<f32>
    %global = shard.all_reduce %w on @autopar_grid grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
    return %loss, %w, %global : tensor<f32>, tensor<4xf32>, tensor<4xf32>
  }
}
