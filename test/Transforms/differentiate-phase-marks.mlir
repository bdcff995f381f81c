// autopar-differentiate{phase-marks=true}: the forward begins with a call of
// autopar_rt_step_phase(0) and the backward, after the forward's last op, with
// autopar_rt_step_phase(1), so that autopar-run measures the activations kept
// for the backward; without the option there are no calls. LLVM dialect calls,
// which the partitioner clones (a func.func declaration would stop it).
// RUN: autopar-opt %s -autopar-differentiate="phase-marks=true" | FileCheck %s
// RUN: autopar-opt %s -autopar-differentiate | FileCheck %s --check-prefix=NONE

#map = affine_map<(d0, d1) -> (d0, d1)>
#scalar = affine_map<(d0, d1) -> ()>
// CHECK: llvm.func @autopar_rt_step_phase(i32)
// CHECK-LABEL: func.func @main
// CHECK-DAG: %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-DAG: %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: llvm.call @autopar_rt_step_phase(%[[ZERO]]) : (i32) -> ()
// CHECK-NEXT: tensor.empty
// CHECK: %[[Y:.*]] = linalg.matmul
// CHECK: %[[LOSS:.*]] = linalg.generic {{.*}} ins(%[[Y]] :
// CHECK-NEXT: ^bb0
// CHECK-NEXT: arith.addf
// CHECK-NEXT: linalg.yield
// CHECK-NEXT: }
// CHECK-NEXT: llvm.call @autopar_rt_step_phase(%[[ONE]]) : (i32) -> ()
// The backward follows: the matmul's adjoint.
// CHECK: linalg.matmul
// CHECK: return %[[LOSS]]
// NONE-NOT: autopar_rt_step_phase
func.func @main(%w: tensor<3x2xf32> {autopar.parameter = "w"}, %x: tensor<4x3xf32> {autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x2xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<4x2xf32>) -> tensor<4x2xf32>
  %y = linalg.matmul ins(%x, %w : tensor<4x3xf32>, tensor<3x2xf32>) outs(%z : tensor<4x2xf32>) -> tensor<4x2xf32>
  %s0 = tensor.empty() : tensor<f32>
  %s = linalg.fill ins(%zero : f32) outs(%s0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#map, #scalar], iterator_types = ["reduction", "reduction"]} ins(%y : tensor<4x2xf32>) outs(%s : tensor<f32>) {
  ^bb0(%a: f32, %o: f32):
    %p = arith.addf %a, %o : f32
    linalg.yield %p : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}
