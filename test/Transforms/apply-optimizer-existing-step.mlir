// A forward that already reads the step (training-mode Dropout draws its
// masks from the seed and the step) keeps its step argument: the optimizer
// reads the same one and adds no second; states go after the parameters.
// RUN: autopar-opt %s -autopar-apply-optimizer="optimizer=sgd lr=0.5 momentum=0.9" | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[W:[^:]*]]: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable}
// CHECK-SAME: %[[BUF:[^:]*]]: tensor<3xf32> {autopar.dtype = "float32", autopar.optimizer_state = "momentum", autopar.state_of = "w"}
// CHECK-SAME: %[[STEP:[^:]*]]: tensor<i64> {autopar.dtype = "int64", autopar.step}
// CHECK-SAME: %[[SEED:[^:]*]]: tensor<i64> {autopar.dtype = "int64", autopar.seed}
// CHECK-SAME: %[[X:[^:]*]]: tensor<3xf32> {autopar.dtype = "float32", autopar.input = "x"}
// CHECK-NOT: autopar.step
// CHECK: tensor.extract %[[STEP]][] : tensor<i64>
func.func @main(%w: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable},
                %step: tensor<i64> {autopar.dtype = "int64", autopar.step},
                %seed: tensor<i64> {autopar.dtype = "int64", autopar.seed},
                %x: tensor<3xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<3xf32> {autopar.dtype = "float32", autopar.gradient = "w", autopar.output = "w.grad"}) {
  %zero = arith.constant 0.0 : f32
  %s = tensor.empty() : tensor<f32>
  %loss = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  return %loss, %x : tensor<f32>, tensor<3xf32>
}
