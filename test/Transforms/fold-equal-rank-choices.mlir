// RUN: autopar-opt %s -split-input-file --autopar-fold-equal-rank-choices | FileCheck %s

// A row-parallel matmul as shard-partition leaves it: the first rank of the
// reduction group starts from the init (a zero fill), the others from a zero
// fill of their own. Both are zeros: the matmul reads the outer fill on
// every rank, and no branch is left.
// CHECK-LABEL: func.func @zero_init_on_every_rank
// CHECK-SAME: (%[[A:.*]]: tensor<8x4xf32>, %[[B:.*]]: tensor<4x16xf32>, %[[RANK:.*]]: index)
// CHECK: %[[ZERO:.*]] = linalg.fill {autopar.stage = 0 : i64}
// CHECK-NOT: scf.if
// CHECK: %[[P:.*]] = linalg.matmul ins(%[[A]], %[[B]] : {{.*}}) outs(%[[ZERO]] : tensor<8x16xf32>)
// CHECK: return %[[P]]
func.func @zero_init_on_every_rank(%a: tensor<8x4xf32>, %b: tensor<4x16xf32>, %rank: index) -> tensor<8x16xf32> {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() {autopar.stage = 0 : i64} : tensor<8x16xf32>
  %init = linalg.fill {autopar.stage = 0 : i64} ins(%zero : f32) outs(%e : tensor<8x16xf32>) -> tensor<8x16xf32>
  %lead = arith.cmpi eq, %rank, %c0 : index
  %chosen = scf.if %lead -> (tensor<8x16xf32>) {
    scf.yield %init : tensor<8x16xf32>
  } else {
    %e2 = tensor.empty() : tensor<8x16xf32>
    %neutral = arith.constant -0.0 : f32
    %z = linalg.fill ins(%neutral : f32) outs(%e2 : tensor<8x16xf32>) -> tensor<8x16xf32>
    scf.yield %z : tensor<8x16xf32>
  }
  %p = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x16xf32>) outs(%chosen : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %p : tensor<8x16xf32>
}

// -----

// A splat constant init equal to the neutral fill folds too.
// CHECK-LABEL: func.func @splat_constant_init
// CHECK: %[[CST:.*]] = arith.constant dense<0.000000e+00> : tensor<4xf32>
// CHECK-NOT: scf.if
// CHECK: return %[[CST]]
func.func @splat_constant_init(%rank: index) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %init = arith.constant dense<0.0> : tensor<4xf32>
  %lead = arith.cmpi eq, %rank, %c0 : index
  %chosen = scf.if %lead -> (tensor<4xf32>) {
    scf.yield %init : tensor<4xf32>
  } else {
    %e = tensor.empty() : tensor<4xf32>
    %zero = arith.constant 0.0 : f32
    %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    scf.yield %z : tensor<4xf32>
  }
  return %chosen : tensor<4xf32>
}

// -----

// An init that is not the neutral element (a bias; a max's init of zero
// against -inf) is the first rank's alone: the choice stays.
// CHECK-LABEL: func.func @different_inits_stay
// CHECK: %[[S:.*]] = scf.if
// CHECK: %[[M:.*]] = scf.if
// CHECK: return %[[S]], %[[M]]
func.func @different_inits_stay(%bias: tensor<4xf32>, %rank: index) -> (tensor<4xf32>, tensor<4xf32>) {
  %c0 = arith.constant 0 : index
  %lead = arith.cmpi eq, %rank, %c0 : index
  %sum = scf.if %lead -> (tensor<4xf32>) {
    scf.yield %bias : tensor<4xf32>
  } else {
    %e = tensor.empty() : tensor<4xf32>
    %zero = arith.constant 0.0 : f32
    %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    scf.yield %z : tensor<4xf32>
  }
  %e0 = tensor.empty() : tensor<4xf32>
  %zero0 = arith.constant 0.0 : f32
  %zeros = linalg.fill ins(%zero0 : f32) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %max = scf.if %lead -> (tensor<4xf32>) {
    scf.yield %zeros : tensor<4xf32>
  } else {
    %e = tensor.empty() : tensor<4xf32>
    %ninf = arith.constant 0xFF800000 : f32
    %z = linalg.fill ins(%ninf : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    scf.yield %z : tensor<4xf32>
  }
  return %sum, %max : tensor<4xf32>, tensor<4xf32>
}

// -----

// Only the results whose branches agree are replaced; the others keep the
// scf.if.
// CHECK-LABEL: func.func @one_of_two_results
// CHECK-SAME: (%[[BIAS:.*]]: tensor<4xf32>, %[[RANK:.*]]: index)
// CHECK: %[[ZEROS:.*]] = linalg.fill
// CHECK: %[[IF:.*]]:2 = scf.if
// CHECK: return %[[ZEROS]], %[[IF]]#1
func.func @one_of_two_results(%bias: tensor<4xf32>, %rank: index) -> (tensor<4xf32>, tensor<4xf32>) {
  %c0 = arith.constant 0 : index
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %lead = arith.cmpi eq, %rank, %c0 : index
  %r:2 = scf.if %lead -> (tensor<4xf32>, tensor<4xf32>) {
    scf.yield %zeros, %bias : tensor<4xf32>, tensor<4xf32>
  } else {
    %e = tensor.empty() : tensor<4xf32>
    %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4xf32>) -> tensor<4xf32>
    scf.yield %z, %z : tensor<4xf32>, tensor<4xf32>
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<4xf32>
}
