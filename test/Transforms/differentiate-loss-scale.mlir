// autopar-differentiate with fp16 loss scaling: the loss is multiplied by
// the scale (1024 plus the state loss_scaler.scale_offset, added after the
// parameters) before the backward, so the gradients come out scaled; the
// multiply is marked autopar.loss_scaling and its result is the loss
// returned. With a fixed scale there is no state.
// RUN: autopar-opt %s --autopar-differentiate="loss-scale=1024 dynamic-loss-scale" | FileCheck %s
// RUN: autopar-opt %s --autopar-differentiate="loss-scale=8" | FileCheck %s --check-prefix=STATIC

// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[W:[^:]*]]: tensor<4xf32> {autopar.parameter = "w", autopar.trainable}
// CHECK-SAME: %[[OFFSET:[^:]*]]: tensor<f32> {autopar.dtype = "float32", autopar.optimizer_state = "scale_offset", autopar.state_of = "loss_scaler"}
// CHECK-SAME: %[[X:[^:]*]]: tensor<4xf32> {autopar.input = "x"}
// CHECK: %[[LOSS:.*]] = linalg.generic {{.*}} ins(%[[W]], %[[X]] : tensor<4xf32>, tensor<4xf32>) outs(%{{.*}} : tensor<f32>)
// CHECK: %[[SCALED:.*]] = linalg.generic {{.*}} ins(%[[LOSS]], %[[OFFSET]] : tensor<f32>, tensor<f32>) outs(%{{.*}} : tensor<f32>) attrs = {{ *}}{autopar.loss_scaling}
// CHECK: ^bb0(%[[L:.*]]: f32, %[[O:.*]]: f32, %{{.*}}: f32):
// CHECK: %[[S:.*]] = arith.addf %[[O]], %{{.*}} : f32
// CHECK: %[[M:.*]] = arith.mulf %[[L]], %[[S]] : f32
// CHECK: linalg.yield %[[M]]
// CHECK: return %[[SCALED]], %{{.*}} : tensor<f32>, tensor<4xf32>

// STATIC-LABEL: func.func @main
// STATIC-NOT: scale_offset
// STATIC: %[[C:.*]] = arith.constant 8.000000e+00 : f32
// STATIC: %[[LOSS:.*]] = linalg.generic {{.*}} iterator_types = ["reduction"]
// STATIC: %[[SCALED:.*]] = linalg.generic {{.*}} ins(%[[LOSS]] : tensor<f32>) outs(%{{.*}} : tensor<f32>) attrs = {{ *}}{autopar.loss_scaling}
// STATIC: arith.mulf %{{.*}}, %[[C]] : f32
// STATIC: return %[[SCALED]], %{{.*}} : tensor<f32>, tensor<4xf32>

#id = affine_map<(d0) -> (d0)>
#red = affine_map<(d0) -> ()>
func.func @main(%w: tensor<4xf32> {autopar.parameter = "w"},
                %x: tensor<4xf32> {autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id, #id, #red], iterator_types = ["reduction"]}
      ins(%w, %x : tensor<4xf32>, tensor<4xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %p, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss : tensor<f32>
}
