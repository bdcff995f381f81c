// autopar-tp-partition-pipeline on a program whose loss is fused before
// planning (autopar.softmax_cross_entropy after an LM head with a large
// vocabulary): the planner places the fused op (PlanGraph.cpp,
// crossEntropyOptions) and splits the head by its vocabulary columns, so the
// op reads each rank's block of the classes, the blocks' log-sum-exps merge
// in an all-reduce max and sums, and the logits are never gathered.
// RUN: autopar-opt %s --autopar-tp-partition-pipeline="tp=2" | FileCheck %s

// CHECK-LABEL: func.func @main(
// CHECK-SAME: %[[W:[^:]*]]: tensor<256x4096xf32> {autopar.parameter = "head"}
// CHECK-SAME: -> (tensor<f32>
// CHECK: linalg.matmul {{.*}}ins(%{{.*}}, %[[W]] : tensor<64x256xf32>, tensor<256x4096xf32>)
// CHECK-NOT: autopar_rt_all_gather
// CHECK: autopar.softmax_cross_entropy ins(%{{.*}}, %{{.*}} : tensor<64x4096xf32>, tensor<64xi64>)
// CHECK: call @autopar_rt_all_reduce_max_f32(
// CHECK-NOT: autopar_rt_all_gather
// CHECK: return %{{.*}} : tensor<f32>
#rows = affine_map<(d0) -> (d0)>
#sum = affine_map<(d0) -> ()>
func.func @main(%w: tensor<256x8192xf32> {autopar.parameter = "head"}, %x: tensor<64x256xf32> {autopar.input = "x"}, %y: tensor<64xi64> {autopar.input = "labels"}) -> (tensor<f32> {autopar.output = "loss"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x8192xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<64x8192xf32>) -> tensor<64x8192xf32>
  %logits = linalg.matmul ins(%x, %w : tensor<64x256xf32>, tensor<256x8192xf32>) outs(%z : tensor<64x8192xf32>) -> tensor<64x8192xf32>
  %n0 = tensor.empty() : tensor<64xf32>
  %nll, %lse = autopar.softmax_cross_entropy ins(%logits, %y : tensor<64x8192xf32>, tensor<64xi64>) outs(%n0, %n0 : tensor<64xf32>, tensor<64xf32>) {ignore_index = -100 : i64} -> tensor<64xf32>, tensor<64xf32>
  %s0 = tensor.empty() : tensor<f32>
  %s = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  %total = linalg.generic {indexing_maps = [#rows, #sum], iterator_types = ["reduction"]} ins(%nll : tensor<64xf32>) outs(%s : tensor<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %r = arith.addf %a, %acc : f32
    linalg.yield %r : f32
  } -> tensor<f32>
  return %total : tensor<f32>
}
