// The autopar.* attributes are the dialect's (AutoparOps.td): their types
// are verified on functions' arguments and results and on ops, and an
// unknown autopar.* name (a misspelling every pass would ignore) is an error.
// RUN: autopar-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// Well-typed attributes round-trip.
// CHECK-LABEL: func.func @main
// CHECK-SAME: autopar.parameter = "w", autopar.trainable
// CHECK-SAME: autopar.optimizer_state = "exp_avg", autopar.state_of = "w"
// CHECK-SAME: autopar.step
// CHECK-SAME: autopar.metric = "lr"
// CHECK-SAME: autopar.update = "w"
// CHECK: arith.addf {{.*}} {autopar.stage = 1 : i64}
module attributes {autopar.model = "m.onnx", autopar.plan = {dp = 2 : i64}} {
  func.func @main(%w: tensor<2xf32> {autopar.parameter = "w", autopar.trainable, autopar.dtype = "float32"},
                  %m: tensor<2xf32> {autopar.optimizer_state = "exp_avg", autopar.state_of = "w"},
                  %s: tensor<i64> {autopar.step})
      -> (tensor<f32> {autopar.metric = "lr"}, tensor<2xf32> {autopar.update = "w"}) {
    %c = arith.constant dense<1.0> : tensor<f32>
    %x = arith.constant 1.0 : f32
    %y = arith.addf %x, %x {autopar.stage = 1 : i64} : f32
    return %c, %w : tensor<f32>, tensor<2xf32>
  }
}

// -----

// expected-error @+1 {{argument 0: 'autopar.parameter' must be a string, not 3 : i64}}
func.func @parameter_not_a_string(%w: tensor<2xf32> {autopar.parameter = 3}) {
  return
}

// -----

// expected-error @+1 {{result 0: 'autopar.update' must be a string, not unit}}
func.func @update_unit(%w: tensor<2xf32>) -> (tensor<2xf32> {autopar.update}) {
  return %w : tensor<2xf32>
}

// -----

func.func @stage_not_an_integer() {
  %x = arith.constant 1.0 : f32
  // expected-error @+1 {{'autopar.stage' must be an integer, not "one"}}
  %y = arith.addf %x, %x {autopar.stage = "one"} : f32
  return
}

// -----

// expected-error @+1 {{argument 0: unknown attribute 'autopar.paramter' (autopar's attributes are listed in AutoparOps.td)}}
func.func @misspelled(%w: tensor<2xf32> {autopar.paramter = "w"}) {
  return
}

// -----

// expected-error @+1 {{'autopar.trainable' must be a unit attribute, not true}}
func.func @trainable_bool(%w: tensor<2xf32> {autopar.trainable = true}) {
  return
}
