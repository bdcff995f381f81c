// RUN: autopar-opt %s -split-input-file --autopar-fold-init-collectives | FileCheck %s

// An init CSE shared between ops of other shardings, resharded as
// shard-partition leaves it: each rank makes its block itself, with the
// collective's stage.
shard.grid @grid(shape = 2)
// CHECK-LABEL: func.func @empty_through_all_to_all
// CHECK-NOT: shard.
// CHECK: %[[E:.*]] = tensor.empty() {autopar.stage = 1 : i64} : tensor<16x32x128xf32>
// CHECK: %[[R:.*]] = linalg.generic {{.*}} outs(%[[E]] : tensor<16x32x128xf32>)
// CHECK: return %[[R]]
func.func @empty_through_all_to_all(%x: tensor<16x32x128xf32>) -> tensor<16x32x128xf32> {
  %e = tensor.empty() : tensor<16x64x64xf32>
  %init = shard.all_to_all %e on @grid grid_axes = [0] split_axis = 1 concat_axis = 2 {autopar.stage = 1 : i64} : tensor<16x64x64xf32> -> tensor<16x32x128xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : tensor<16x32x128xf32>) outs(%init : tensor<16x32x128xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<16x32x128xf32>
  return %r : tensor<16x32x128xf32>
}

// -----

// All-gathers and all-slices of an empty tensor go the same way.
shard.grid @grid(shape = 2)
// CHECK-LABEL: func.func @empty_through_gather_and_slice
// CHECK-NOT: shard.
// CHECK-DAG: %[[G:.*]] = tensor.empty() : tensor<8x16xf32>
// CHECK-DAG: %[[S:.*]] = tensor.empty() : tensor<2x16xf32>
// CHECK: return %[[G]], %[[S]]
func.func @empty_through_gather_and_slice() -> (tensor<8x16xf32>, tensor<2x16xf32>) {
  %e = tensor.empty() : tensor<4x16xf32>
  %g = shard.all_gather %e on @grid grid_axes = [0] gather_axis = 0 : tensor<4x16xf32> -> tensor<8x16xf32>
  %s = shard.all_slice %e on @grid grid_axes = [0] slice_axis = 0 : tensor<4x16xf32> -> tensor<2x16xf32>
  return %g, %s : tensor<8x16xf32>, tensor<2x16xf32>
}

// -----

// A constant fill moved between ranks is the same fill at the result's
// shape, a splat constant too.
shard.grid @grid(shape = 2)
// CHECK-LABEL: func.func @fill_through_data_movement
// CHECK-NOT: shard.
// CHECK-DAG: %[[C:.*]] = arith.constant 2.500000e+00 : f32
// CHECK-DAG: %[[E:.*]] = tensor.empty() : tensor<8x16xf32>
// CHECK: %[[F:.*]] = linalg.fill ins(%[[C]] : f32) outs(%[[E]] : tensor<8x16xf32>)
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK: %[[F2:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E2]] : tensor<4x4xf32>)
// CHECK: return %[[F]], %[[F2]]
func.func @fill_through_data_movement() -> (tensor<8x16xf32>, tensor<4x4xf32>) {
  %c = arith.constant 2.5 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%c : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %g = shard.all_gather %f on @grid grid_axes = [0] gather_axis = 0 : tensor<4x16xf32> -> tensor<8x16xf32>
  %splat = arith.constant dense<1.0> : tensor<8x2xf32>
  %t = shard.all_to_all %splat on @grid grid_axes = [0] split_axis = 0 concat_axis = 1 : tensor<8x2xf32> -> tensor<4x4xf32>
  return %g, %t : tensor<8x16xf32>, tensor<4x4xf32>
}

// -----

// A reduction keeps a constant only where every rank's copy reduces to it:
// max of anything and a sum of zeros fold, a sum of ones (2 on two ranks)
// and a product of twos do not; an undefined input stays undefined.
shard.grid @grid(shape = 2)
// CHECK-LABEL: func.func @fill_through_reductions
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[TWO:.*]] = arith.constant 2.000000e+00 : f32
// CHECK: %[[ONES:.*]] = linalg.fill ins(%[[ONE]] : f32) outs(%{{.*}} : tensor<4xf32>)
// CHECK: %[[TWOS:.*]] = linalg.fill ins(%[[TWO]] : f32) outs(%{{.*}} : tensor<4xf32>)
// CHECK: %[[MAX:.*]] = linalg.fill ins(%[[ONE]] : f32) outs(%{{.*}} : tensor<4xf32>)
// CHECK: %[[ZEROS:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<2xf32>)
// CHECK: %[[SUM1:.*]] = shard.all_reduce %[[ONES]] on @grid grid_axes = [0] :
// CHECK: %[[PROD2:.*]] = shard.all_reduce %[[TWOS]] on @grid grid_axes = [0] reduction = product :
// CHECK: %[[UNDEF:.*]] = tensor.empty() : tensor<4xf32>
// CHECK: return %[[MAX]], %[[ZEROS]], %[[SUM1]], %[[PROD2]], %[[UNDEF]]
func.func @fill_through_reductions() -> (tensor<4xf32>, tensor<2xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<4xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %ones = linalg.fill ins(%one : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %twos = linalg.fill ins(%two : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %max = shard.all_reduce %ones on @grid grid_axes = [0] reduction = max : tensor<4xf32> -> tensor<4xf32>
  %rs = shard.reduce_scatter %zeros on @grid grid_axes = [0] scatter_axis = 0 : tensor<4xf32> -> tensor<2xf32>
  %sum1 = shard.all_reduce %ones on @grid grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  %prod2 = shard.all_reduce %twos on @grid grid_axes = [0] reduction = product : tensor<4xf32> -> tensor<4xf32>
  %undef = shard.all_reduce %e on @grid grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
  return %max, %rs, %sum1, %prod2, %undef : tensor<4xf32>, tensor<2xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A collective of computed values stays.
shard.grid @grid(shape = 2)
// CHECK-LABEL: func.func @computed_values_stay
// CHECK: shard.all_gather %arg0
func.func @computed_values_stay(%x: tensor<4x16xf32>) -> tensor<8x16xf32> {
  %g = shard.all_gather %x on @grid grid_axes = [0] gather_axis = 0 : tensor<4x16xf32> -> tensor<8x16xf32>
  return %g : tensor<8x16xf32>
}
