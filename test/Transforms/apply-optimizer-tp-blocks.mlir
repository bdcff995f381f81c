// A pipeline stage's step under tensor parallelism: the stage's programs
// were partitioned before the step was built, so a parameter marked
// autopar.tp_split is this rank's block. Its sum of squares is all-reduced
// over tp (axis 1) and then added to the replicated parameters' (counted
// once, not tp times); the total is all-reduced over the stages (axis 2).
// RUN: autopar-opt %s -split-input-file -autopar-apply-optimizer="optimizer=sgd lr=0.5 clip=1.0 pipeline-stages=2" -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK: %[[WSQ:.*]] = linalg.generic {{.*}} ins(%[[G:[^ ]*]] :
// CHECK: %[[W:.*]] = tensor.extract %[[WSQ]][] : tensor<f32>
// CHECK: %[[BSQ:.*]] = linalg.generic {{.*}} ins(%[[H:[^ ]*]] :
// CHECK: %[[B:.*]] = tensor.extract %[[BSQ]][] : tensor<f32>
// CHECK: %[[TPPART:.*]] = tensor.from_elements %[[W]] : tensor<1xf32>
// CHECK: %[[TPALL:.*]] = shard.all_reduce %[[TPPART]] on @autopar_grid grid_axes = [1] : tensor<1xf32> -> tensor<1xf32>
// CHECK: %[[TP:.*]] = tensor.extract %[[TPALL]]
// CHECK: %[[SUM:.*]] = arith.addf %[[B]], %[[TP]] : f32
// CHECK: %[[PPPART:.*]] = tensor.from_elements %[[SUM]] : tensor<1xf32>
// CHECK: %[[PPALL:.*]] = shard.all_reduce %[[PPPART]] on @autopar_grid grid_axes = [2]
// CHECK: %[[TOTAL:.*]] = tensor.extract %[[PPALL]]
// CHECK: math.sqrt %[[TOTAL]] : f32
shard.grid @autopar_grid(shape = 1x2x2)
func.func @main(%w: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable, autopar.tp_split = 0 : i64},
                %b: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "b", autopar.trainable},
                %g: tensor<3xf32> {autopar.dtype = "float32", autopar.accumulator = "w.grad"},
                %h: tensor<3xf32> {autopar.dtype = "float32", autopar.accumulator = "b.grad"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<3xf32> {autopar.dtype = "float32", autopar.gradient = "w", autopar.output = "w.grad"},
        tensor<3xf32> {autopar.dtype = "float32", autopar.gradient = "b", autopar.output = "b.grad"}) {
  %zero = arith.constant 0.0 : f32
  %s = tensor.empty() : tensor<f32>
  %loss = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  return %loss, %g, %h : tensor<f32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// A block needs a grid whose axis 1 is tp.
// expected-error @+1 {{autopar-apply-optimizer: tensor-parallel blocks (autopar.tp_split) need a grid @autopar_grid whose axis 1 is tp}}
module {
func.func @main(%w: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable, autopar.tp_split = 0 : i64})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<3xf32> {autopar.dtype = "float32", autopar.gradient = "w", autopar.output = "w.grad"}) {
  %zero = arith.constant 0.0 : f32
  %s = tensor.empty() : tensor<f32>
  %loss = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  return %loss, %w : tensor<f32>, tensor<3xf32>
}
}
