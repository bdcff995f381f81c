// autopar-apply-optimizer: a loss and its gradients become one training
// step with optimizer states, the step number, the lr and grad_norm metrics
// and one update per parameter and state.
// RUN: autopar-opt %s -split-input-file -autopar-apply-optimizer="optimizer=sgd lr=0.5 momentum=0.9" | FileCheck %s --check-prefix=SGD
// RUN: autopar-opt %s -split-input-file -autopar-apply-optimizer="optimizer=adamw lr=0.01 weight-decay=0.1 clip=1.0 schedule=warmup-cosine warmup-steps=3 total-steps=10" | FileCheck %s --check-prefix=ADAMW
// RUN: not autopar-opt %s -split-input-file -autopar-apply-optimizer="schedule=warmup-decay warmup-steps=5 total-steps=4" 2>&1 | FileCheck %s --check-prefix=TOTAL
// RUN: not autopar-opt %s -split-input-file -autopar-apply-optimizer="optimizer=lamb" 2>&1 | FileCheck %s --check-prefix=ENUM

// SGD with momentum: one state per parameter, after the parameters; the
// buffer is d_p at step 1 and momentum * buf + d_p after.
// SGD-LABEL: func.func @main
// SGD-SAME: %[[W:[^:]*]]: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable}
// SGD-SAME: %[[BUF:[^:]*]]: tensor<3xf32> {autopar.dtype = "float32", autopar.optimizer_state = "momentum", autopar.state_of = "w"}
// SGD-SAME: %[[STEP:[^:]*]]: tensor<i64> {autopar.dtype = "int64", autopar.step}
// SGD-SAME: %[[X:[^:]*]]: tensor<3xf32> {autopar.dtype = "float32", autopar.input = "x"}
// SGD-SAME: -> (tensor<f32> {autopar.output = "loss"}, tensor<f32> {autopar.dtype = "float32", autopar.metric = "lr"}, tensor<f32> {autopar.dtype = "float32", autopar.metric = "grad_norm"}, tensor<3xf32> {autopar.dtype = "float32", autopar.update = "w"}, tensor<3xf32> {autopar.dtype = "float32", autopar.update = "w.momentum"})
// SGD: %[[S:.*]] = tensor.extract %[[STEP]][] : tensor<i64>
// SGD: %[[FIRST:.*]] = arith.cmpi eq, %[[S]], %{{.*}} : i64
// SGD: %[[NEWBUF:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[BUF]], {{.*}}) {
// SGD:   %[[MB:.*]] = arith.mulf
// SGD:   %[[DD:.*]] = arith.mulf
// SGD:   %[[NEXT:.*]] = arith.addf %[[MB]], %[[DD]]
// SGD:   arith.select %{{.*}}, %{{.*}}, %[[NEXT]]
// SGD: %[[NEWW:.*]] = linalg.generic {{.*}} ins(%[[W]], %[[NEWBUF]], {{.*}}) {
// SGD:   arith.mulf
// SGD:   arith.subf
// SGD: return %{{.*}}, %{{.*}}, %{{.*}}, %[[NEWW]], %[[NEWBUF]]

// AdamW: two states per parameter; the gradient is clipped before use.
// ADAMW-LABEL: func.func @main
// ADAMW-SAME: autopar.optimizer_state = "exp_avg", autopar.state_of = "w"
// ADAMW-SAME: autopar.optimizer_state = "exp_avg_sq", autopar.state_of = "w"
// ADAMW-SAME: autopar.update = "w"}, tensor<3xf32> {autopar.dtype = "float32", autopar.update = "w.exp_avg"}, tensor<3xf32> {autopar.dtype = "float32", autopar.update = "w.exp_avg_sq"}
// ADAMW: math.cos
// ADAMW: math.sqrt
// ADAMW: arith.minimumf
// ADAMW: math.powf
// ADAMW-SAME: f64

// TOTAL: the schedule needs total-steps (4) greater than warmup-steps (5)
// ENUM: for the --optimizer option: Cannot find option named 'lamb'!
func.func @main(%w: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable},
                %x: tensor<3xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<3xf32> {autopar.dtype = "float32", autopar.gradient = "w", autopar.output = "w.grad"}) {
  %zero = arith.constant 0.0 : f32
  %s = tensor.empty() : tensor<f32>
  %loss = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  return %loss, %x : tensor<f32>, tensor<3xf32>
}
