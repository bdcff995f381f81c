// autopar-apply-optimizer with ZeRO refuses a gradient whose shape is
// neither its parameter's nor a ZeRO block of it, and a stage outside 0-3.
// RUN: autopar-opt %s -verify-diagnostics --autopar-apply-optimizer="zero-stage=1 data-parallel=2"
// RUN: not autopar-opt %s --autopar-apply-optimizer="zero-stage=4 data-parallel=2" 2>&1 | FileCheck %s --check-prefix=STAGE
// STAGE: error: autopar-apply-optimizer: zero-stage must be 0 to 3 and data-parallel at least 1, not 4 and 2

// expected-error @+1 {{autopar-apply-optimizer: the gradient of 'w' is 'tensor<3x3xf32>', neither its parameter's 'tensor<4x3xf32>' nor (ZeRO) a block of it}}
func.func @main(%w: tensor<4x3xf32> {autopar.parameter = "w", autopar.trainable},
                %g: tensor<3x3xf32> {autopar.input = "g"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<3x3xf32> {autopar.gradient = "w"}) {
  %c = arith.constant dense<1.0> : tensor<f32>
  return %c, %g : tensor<f32>, tensor<3x3xf32>
}
