// Dynamic loss scaling without the scale-offset state that
// autopar-differentiate adds is an error that says what to run.
// RUN: autopar-opt %s -autopar-apply-optimizer="loss-scale=128 dynamic-loss-scale" -verify-diagnostics

// expected-error @+1 {{autopar-apply-optimizer: dynamic loss scaling needs the state loss_scaler.scale_offset; run autopar-differentiate with the same loss-scale and dynamic-loss-scale}}
func.func @main(%w: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable},
                %x: tensor<3xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<3xf32> {autopar.dtype = "float32", autopar.gradient = "w", autopar.output = "w.grad"}) {
  %zero = arith.constant 0.0 : f32
  %s = tensor.empty() : tensor<f32>
  %loss = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  return %loss, %x : tensor<f32>, tensor<3xf32>
}
