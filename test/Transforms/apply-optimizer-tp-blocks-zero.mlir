// ZeRO over a tensor-parallel block (a pipeline stage's step under dp x tp x
// pp): the block's dim 0 is cut again over the replicas (axis 0), as ZeRO
// cuts any parameter; the block's optimizer state is that block of it. For
// the global norm, the sum of squares of such a block adds up over the
// replicas (axis 0) first, then with the other tp blocks' over tp (axis 1),
// then with the replicated parameters' over the stages (axis 2).
// RUN: autopar-opt %s -autopar-apply-optimizer="optimizer=adamw lr=0.5 clip=1.0 zero-stage=1 data-parallel=2 pipeline-stages=2" | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[W:[^:]*]]: tensor<4x3xf32> {{{.*}}autopar.tp_split = 0
// CHECK-SAME: %[[M:[^:]*]]: tensor<2x3xf32> {{{.*}}autopar.optimizer_state = "exp_avg"
// CHECK-SAME: %[[V:[^:]*]]: tensor<2x3xf32> {{{.*}}autopar.optimizer_state = "exp_avg_sq"
// CHECK: %[[WBLOCK:.*]] = shard.all_slice %[[W]] on @autopar_grid grid_axes = [0] slice_axis = 0 : tensor<4x3xf32> -> tensor<2x3xf32>
// CHECK: %[[GBLOCK:.*]] = shard.all_slice %{{.*}} on @autopar_grid grid_axes = [0] slice_axis = 0 : tensor<4x3xf32> -> tensor<2x3xf32>
// CHECK: %[[BSQ:.*]] = linalg.generic {{.*}} ins(%[[GBLOCK]] :
// CHECK: %[[B:.*]] = tensor.extract %[[BSQ]][] : tensor<f32>
// CHECK: %[[DPPART:.*]] = tensor.from_elements %[[B]] : tensor<1xf32>
// CHECK: %[[DPALL:.*]] = shard.all_reduce %[[DPPART]] on @autopar_grid grid_axes = [0] : tensor<1xf32> -> tensor<1xf32>
// CHECK: %[[DP:.*]] = tensor.extract %[[DPALL]]
// CHECK: %[[TPPART:.*]] = tensor.from_elements %[[DP]] : tensor<1xf32>
// CHECK: %[[TPALL:.*]] = shard.all_reduce %[[TPPART]] on @autopar_grid grid_axes = [1] : tensor<1xf32> -> tensor<1xf32>
// CHECK: %[[TP:.*]] = tensor.extract %[[TPALL]]
// CHECK: %[[PPPART:.*]] = tensor.from_elements %[[TP]] : tensor<1xf32>
// CHECK: shard.all_reduce %[[PPPART]] on @autopar_grid grid_axes = [2]
// CHECK: %[[NEW:.*]] = shard.all_gather %{{.*}} on @autopar_grid grid_axes = [0] gather_axis = 0 : tensor<1x6xf32> -> tensor<2x6xf32>
shard.grid @autopar_grid(shape = 2x2x2)
func.func @main(%w: tensor<4x3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable, autopar.tp_split = 0 : i64},
                %g: tensor<4x3xf32> {autopar.dtype = "float32", autopar.accumulator = "w.grad"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<4x3xf32> {autopar.dtype = "float32", autopar.gradient = "w", autopar.output = "w.grad"}) {
  %zero = arith.constant 0.0 : f32
  %s = tensor.empty() : tensor<f32>
  %loss = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  return %loss, %g : tensor<f32>, tensor<4x3xf32>
}
