// One pipeline stage's step (pipeline-stages=2): the stage holds only its
// own parameters, so the sum of squares of its gradients is all-reduced
// over the stages (axis 2 of @autopar_grid, dp x tp x pp) before the square
// root: every stage clips by the global norm.
// RUN: autopar-opt %s -split-input-file -autopar-apply-optimizer="optimizer=sgd lr=0.5 clip=1.0 pipeline-stages=2" -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK: %[[SQ:.*]] = linalg.generic
// CHECK: %[[PART:.*]] = tensor.from_elements %{{.*}} : tensor<1xf32>
// CHECK: %[[ALL:.*]] = shard.all_reduce %[[PART]] on @autopar_grid grid_axes = [2] : tensor<1xf32> -> tensor<1xf32>
// CHECK: %[[TOTAL:.*]] = tensor.extract %[[ALL]][%{{.*}}] : tensor<1xf32>
// CHECK: math.sqrt %[[TOTAL]] : f32
shard.grid @autopar_grid(shape = 1x1x2)
func.func @main(%w: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable},
                %g: tensor<3xf32> {autopar.dtype = "float32", autopar.accumulator = "w.grad"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<3xf32> {autopar.dtype = "float32", autopar.gradient = "w", autopar.output = "w.grad"}) {
  %zero = arith.constant 0.0 : f32
  %s = tensor.empty() : tensor<f32>
  %loss = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  return %loss, %g : tensor<f32>, tensor<3xf32>
}

// -----

// Without the grid of the stages: an error.
// expected-error @+1 {{autopar-apply-optimizer: pipeline-stages=2 needs a grid @autopar_grid of shape dp x tp x 2}}
module {
func.func @main(%w: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<3xf32> {autopar.dtype = "float32", autopar.gradient = "w", autopar.output = "w.grad"}) {
  %zero = arith.constant 0.0 : f32
  %s = tensor.empty() : tensor<f32>
  %loss = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  return %loss, %w : tensor<f32>, tensor<3xf32>
}
}

// -----

// A tied weight's copy (autopar.tied_copy: an earlier stage holds it too and
// counts it) adds nothing to the stage's sum of squares; a stage whose only
// trained parameter is such a copy adds zero.
// CHECK-LABEL: func.func @main
// CHECK-NOT: linalg.generic
// CHECK-NOT: arith.addf
// CHECK: %[[PART:.*]] = tensor.from_elements %cst_{{[0-9]+}} : tensor<1xf32>
// CHECK: %[[ALL:.*]] = shard.all_reduce %[[PART]] on @autopar_grid grid_axes = [2]
// CHECK: %[[TOTAL:.*]] = tensor.extract %[[ALL]]
// CHECK: math.sqrt %[[TOTAL]] : f32
shard.grid @autopar_grid(shape = 1x1x2)
func.func @main(%w: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable, autopar.tied_copy},
                %g: tensor<3xf32> {autopar.dtype = "float32", autopar.accumulator = "w.grad"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<3xf32> {autopar.dtype = "float32", autopar.gradient = "w", autopar.output = "w.grad"}) {
  %zero = arith.constant 0.0 : f32
  %s = tensor.empty() : tensor<f32>
  %loss = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  return %loss, %g : tensor<f32>, tensor<3xf32>
}

// -----

// A stage that trains nothing (parameter-free ops): no update, but the stage
// still adds its zero to the stages' sum of squares, as every rank of the
// axis takes part, and returns the loss and the metrics.
// CHECK-LABEL: func.func @main(%{{.*}}: tensor<i64> {autopar.dtype = "int64", autopar.step}) -> (tensor<f32> {autopar.output = "loss"}, tensor<f32> {{{.*}}autopar.metric = "lr"}, tensor<f32> {{{.*}}autopar.metric = "grad_norm"}) {
// CHECK: %[[PART:.*]] = tensor.from_elements %cst{{[_0-9]*}} : tensor<1xf32>
// CHECK: shard.all_reduce %[[PART]] on @autopar_grid grid_axes = [2]
// CHECK-NOT: autopar.update
shard.grid @autopar_grid(shape = 1x1x2)
func.func @main() -> (tensor<f32> {autopar.output = "loss"}) {
  %zero = arith.constant 0.0 : f32
  %s = tensor.empty() : tensor<f32>
  %loss = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  return %loss : tensor<f32>
}
