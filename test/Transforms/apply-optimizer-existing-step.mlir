// A forward that already reads the step (training-mode Dropout draws its
// masks from the seed and the step) keeps its step argument: the optimizer
// reads the same one and adds no second; states go after the parameters.
// An update the forward makes itself (BatchNorm's running statistics) is
// returned after the optimizer's.
// RUN: autopar-opt %s -autopar-apply-optimizer="optimizer=sgd lr=0.5 momentum=0.9" | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[W:[^:]*]]: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable}
// CHECK-SAME: %[[RMARG:[^:]*]]: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "rm"}
// CHECK-SAME: %[[BUF:[^:]*]]: tensor<3xf32> {autopar.dtype = "float32", autopar.optimizer_state = "momentum", autopar.state_of = "w"}
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<i64> {autopar.dtype = "int64", autopar.step}
// CHECK-SAME: %[[SEED:[^:]*]]: tensor<i64> {autopar.dtype = "int64", autopar.seed}
// CHECK-SAME: %[[X:[^:]*]]: tensor<3xf32> {autopar.dtype = "float32", autopar.input = "x"}
// CHECK-SAME: -> (tensor<f32> {autopar.output = "loss"}, tensor<f32> {autopar.dtype = "float32", autopar.metric = "lr"}, tensor<f32> {autopar.dtype = "float32", autopar.metric = "grad_norm"}, tensor<3xf32> {autopar.dtype = "float32", autopar.update = "w"}, tensor<3xf32> {autopar.dtype = "float32", autopar.update = "w.momentum"}, tensor<3xf32> {autopar.dtype = "float32", autopar.update = "rm"})
// CHECK-NOT: autopar.step
// CHECK: tensor.extract %[[STEP]][] : tensor<i64>
// CHECK: return {{.*}}, %[[RM:.*]] : tensor<f32>, tensor<f32>, tensor<f32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
func.func @main(%w: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable},
                %rm: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "rm"},
                %step: tensor<i64> {autopar.dtype = "int64", autopar.step},
                %seed: tensor<i64> {autopar.dtype = "int64", autopar.seed},
                %x: tensor<3xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<3xf32> {autopar.dtype = "float32", autopar.gradient = "w", autopar.output = "w.grad"},
        tensor<3xf32> {autopar.dtype = "float32", autopar.update = "rm"}) {
  %zero = arith.constant 0.0 : f32
  %s = tensor.empty() : tensor<f32>
  %loss = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  return %loss, %x, %x : tensor<f32>, tensor<3xf32>, tensor<3xf32>
}
