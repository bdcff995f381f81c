// autopar-apply-optimizer with fp16 loss scaling (DeepSpeed's dynamic loss
// scaler): the loss and gradients are divided by the scale (65536 plus the
// state loss_scaler.scale_offset); an overflow (a sum of squares that is inf
// or NaN) keeps every parameter and state; the schedule counts applied
// steps; the scaler's states and the loss_scale and overflow metrics are
// added.
// RUN: autopar-opt %s -split-input-file -autopar-apply-optimizer="optimizer=sgd lr=0.5 momentum=0.9 loss-scale=65536 dynamic-loss-scale hysteresis=2 loss-scale-window=1000 min-loss-scale=1" | FileCheck %s
// RUN: autopar-opt %s -split-input-file -autopar-apply-optimizer="optimizer=sgd lr=0.5 loss-scale=128" | FileCheck %s --check-prefix=STATIC

// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[W:[^:]*]]: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable}
// CHECK-SAME: %[[BUF:[^:]*]]: tensor<3xf32> {autopar.dtype = "float32", autopar.optimizer_state = "momentum", autopar.state_of = "w"}
// CHECK-SAME: %[[APPLIED:[^:]*]]: tensor<i64> {autopar.dtype = "int64", autopar.optimizer_state = "applied_steps", autopar.state_of = "loss_scaler"}
// CHECK-SAME: %[[ITER:[^:]*]]: tensor<i64> {autopar.dtype = "int64", autopar.optimizer_state = "iter", autopar.state_of = "loss_scaler"}
// CHECK-SAME: %[[LAST:[^:]*]]: tensor<i64> {autopar.dtype = "int64", autopar.optimizer_state = "last_overflow", autopar.state_of = "loss_scaler"}
// CHECK-SAME: %[[USED:[^:]*]]: tensor<i64> {autopar.dtype = "int64", autopar.optimizer_state = "hysteresis_used", autopar.state_of = "loss_scaler"}
// CHECK-SAME: %{{[^:]*}}: tensor<i64> {autopar.dtype = "int64", autopar.step}
// CHECK-SAME: %[[OFFSET:[^:]*]]: tensor<f32> {autopar.dtype = "float32", autopar.optimizer_state = "scale_offset", autopar.state_of = "loss_scaler"}
// CHECK-SAME: -> (tensor<f32> {autopar.output = "loss"}, tensor<f32> {{.*}}"lr"}, tensor<f32> {{.*}}"grad_norm"}, tensor<3xf32> {{.*}}autopar.update = "w"}, tensor<3xf32> {{.*}}autopar.update = "w.momentum"}, tensor<f32> {{.*}}autopar.metric = "loss_scale"}, tensor<f32> {{.*}}autopar.metric = "overflow"}, tensor<i64> {{.*}}autopar.update = "loss_scaler.applied_steps"}, tensor<f32> {{.*}}autopar.update = "loss_scaler.scale_offset"}, tensor<i64> {{.*}}autopar.update = "loss_scaler.iter"}, tensor<i64> {{.*}}autopar.update = "loss_scaler.last_overflow"}, tensor<i64> {{.*}}autopar.update = "loss_scaler.hysteresis_used"})
// The step the optimizer sees is applied_steps + 1.
// CHECK: %[[A:.*]] = tensor.extract %[[APPLIED]][] : tensor<i64>
// CHECK: %[[STEP:.*]] = arith.addi %[[A]], %{{.*}} : i64
// CHECK: %[[O:.*]] = tensor.extract %[[OFFSET]][] : tensor<f32>
// CHECK: %[[SCALE:.*]] = arith.addf %{{.*}}, %[[O]] : f32
// CHECK: %[[LOSS:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<f32>, tensor<f32>)
// CHECK: arith.divf
// CHECK: %[[GRAD:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %{{.*}} : tensor<3xf32>, tensor<f32>)
// CHECK: arith.divf
// CHECK: %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK: %[[OVERFLOW:.*]] = arith.cmpf uge, %{{.*}}, %[[INF]] : f32
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[STEP]], %{{.*}} : i64
// CHECK: %[[NEWBUF:.*]] = linalg.generic {{.*}} ins(%[[GRAD]], %[[BUF]],
// CHECK: %[[NEWW:.*]] = linalg.generic {{.*}} ins(%[[W]], %[[NEWBUF]],
// CHECK: %[[SKIP:.*]] = tensor.from_elements %[[OVERFLOW]] : tensor<i1>
// CHECK: %[[KEEPW:.*]] = linalg.generic {{.*}} ins(%[[NEWW]], %[[W]], %[[SKIP]] :
// CHECK: arith.select
// CHECK: %[[KEEPBUF:.*]] = linalg.generic {{.*}} ins(%[[NEWBUF]], %[[BUF]], %[[SKIP]] :
// CHECK: %[[A2:.*]] = tensor.extract %[[APPLIED]][] : tensor<i64>
// CHECK: %[[NEXTA:.*]] = arith.select %[[OVERFLOW]], %[[A2]], %{{.*}} : i64
// DeepSpeed: an overflow halves the scale (not below the minimum) once the
// hysteresis is used up; without one the scale doubles every window.
// CHECK: arith.divf %[[SCALE]]
// CHECK: arith.maximumf
// CHECK: arith.remsi %{{.*}}, %{{.*}} : i64
// CHECK: arith.mulf %[[SCALE]]
// CHECK: %[[NEXTSCALE:.*]] = arith.select %[[OVERFLOW]], %{{.*}}, %{{.*}} : f32
// CHECK: arith.subf %[[NEXTSCALE]]
// CHECK: return %[[LOSS]], %{{.*}}, %{{.*}}, %[[KEEPW]], %[[KEEPBUF]]

// A fixed scale: no scaler state but applied_steps, no scale update.
// STATIC-LABEL: func.func @main
// STATIC-NOT: scale_offset
// STATIC-SAME: autopar.optimizer_state = "applied_steps"
// STATIC-NOT: autopar.optimizer_state = "iter"
// STATIC: arith.constant 1.280000e+02 : f32
// STATIC-NOT: arith.remsi
// STATIC: return

func.func @main(%w: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable},
                %offset: tensor<f32> {autopar.dtype = "float32", autopar.optimizer_state = "scale_offset", autopar.state_of = "loss_scaler"},
                %x: tensor<3xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<3xf32> {autopar.dtype = "float32", autopar.gradient = "w", autopar.output = "w.grad"}) {
  %zero = arith.constant 0.0 : f32
  %s = tensor.empty() : tensor<f32>
  %loss = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  return %loss, %x : tensor<f32>, tensor<3xf32>
}
