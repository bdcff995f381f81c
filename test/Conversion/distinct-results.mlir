// RUN: autopar-opt %s -split-input-file --autopar-distinct-results | FileCheck %s
// RUN: autopar-opt %s -split-input-file --autopar-cpu-pipeline | FileCheck %s --check-prefix=LOWERED

// Each case is a @main so that the CPU pipeline, which used to crash on a
// buffer returned twice, lowers it.

// Two zero cotangents CSE merged into one fill: the repeat is filled again
// into an empty tensor of its own.
// CHECK-LABEL: func.func @main
// CHECK: %[[ZERO:.*]] = arith.constant 0.0
// CHECK: %[[FILL:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.*}} : tensor<2xf32>)
// CHECK: %[[EMPTY:.*]] = tensor.empty() : tensor<2xf32>
// CHECK: %[[AGAIN:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[EMPTY]] : tensor<2xf32>)
// CHECK: return %[[FILL]], %[[AGAIN]]
// LOWERED: llvm.func @autopar_entry
func.func @main(%arg0: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  %cst = arith.constant 0.000000e+00 : f32
  %0 = tensor.empty() : tensor<2xf32>
  %1 = linalg.fill ins(%cst : f32) outs(%0 : tensor<2xf32>) -> tensor<2xf32>
  return %1, %1 : tensor<2xf32>, tensor<2xf32>
}

// -----

// A computed value returned twice (and a third time): each repeat is a copy.
// CHECK-LABEL: func.func @main
// CHECK: %[[SUM:.*]] = linalg.generic
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<2xf32>
// CHECK: %[[C1:.*]] = linalg.copy ins(%[[SUM]] : tensor<2xf32>) outs(%[[E1]] : tensor<2xf32>)
// CHECK: %[[E2:.*]] = tensor.empty() : tensor<2xf32>
// CHECK: %[[C2:.*]] = linalg.copy ins(%[[SUM]] : tensor<2xf32>) outs(%[[E2]] : tensor<2xf32>)
// CHECK: return %[[SUM]], %[[C1]], %[[C2]]
// LOWERED: llvm.func @autopar_entry
func.func @main(%arg0: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %0 = tensor.empty() : tensor<2xf32>
  %1 = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%arg0 : tensor<2xf32>) outs(%0 : tensor<2xf32>) {
  ^bb0(%in: f32, %out: f32):
    %2 = arith.addf %in, %in : f32
    linalg.yield %2 : f32
  } -> tensor<2xf32>
  return %1, %1, %1 : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// A constant and an argument returned twice; distinct results stay as they
// are.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[ARG:.*]]: tensor<3xf32>)
// CHECK: %[[CST:.*]] = arith.constant dense<1.0{{.*}}> : tensor<3xf32>
// CHECK: %[[CST2:.*]] = arith.constant dense<1.0{{.*}}> : tensor<3xf32>
// CHECK: %[[COPY:.*]] = linalg.copy ins(%[[ARG]] : tensor<3xf32>)
// CHECK: return %[[CST]], %[[CST2]], %[[ARG]], %[[COPY]]
// LOWERED: llvm.func @autopar_entry
func.func @main(%arg0: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %cst = arith.constant dense<1.0> : tensor<3xf32>
  return %cst, %cst, %arg0, %arg0 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @main
// CHECK-NOT: linalg.copy
// CHECK: return %arg0, %arg1
// LOWERED: llvm.func @autopar_entry
func.func @main(%arg0: tensor<2xf32>, %arg1: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
  return %arg0, %arg1 : tensor<2xf32>, tensor<2xf32>
}
