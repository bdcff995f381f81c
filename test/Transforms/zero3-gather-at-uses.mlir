// ZeRO-3 over 2 replicas: autopar-accumulate-gradients zero-stage=3 makes
// the trained parameters whose dim 0 divides by 2 blocks of @main
// (autopar.zero_blocks = 2), and the micro-batch gathers each just before
// its first forward use (up to the op that makes the loss) and again before
// its first backward use, remaking there the views the forward took of it
// (the transposed weight), so that the whole is not held in between. The
// gradient is reduce-scattered as under ZeRO-2; b (dim 0 = 3) stays whole.
// RUN: autopar-opt %s --autopar-accumulate-gradients="data-parallel=2 zero-stage=3" | FileCheck %s
// RUN: autopar-opt %s --autopar-accumulate-gradients="data-parallel=2 zero-stage=3" --autopar-apply-optimizer="optimizer=sgd momentum=0.9 zero-stage=3 data-parallel=2" | FileCheck %s --check-prefix=UPDATE

// CHECK-LABEL: func.func private @main_micro_batch
// CHECK-SAME: (%[[W:[^:]*]]: tensor<2x3xf32>, %[[B:[^:]*]]: tensor<3xf32>, %[[X:[^:]*]]: tensor<2x4xf32>)
// CHECK: %[[EMPTY_T:.*]] = tensor.empty() : tensor<3x4xf32>
// CHECK: %[[FLAT:.*]] = tensor.collapse_shape %[[W]] {{\[}}[0, 1]] : tensor<2x3xf32> into tensor<6xf32>
// CHECK: %[[ROW:.*]] = tensor.insert_slice %[[FLAT]] into %{{.*}}[0, 0] [1, 6] [1, 1]
// CHECK: %[[ALL:.*]] = shard.all_gather %[[ROW]] on @autopar_grid grid_axes = [0] gather_axis = 0 : tensor<1x6xf32> -> tensor<2x6xf32>
// CHECK: %[[WHOLE:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0, 1]] output_shape [4, 3] : tensor<12xf32> into tensor<4x3xf32>
// CHECK: %[[Y:.*]] = linalg.matmul ins(%[[X]], %[[WHOLE]] : tensor<2x4xf32>, tensor<4x3xf32>)
// CHECK: %[[LOSS:.*]] = arith.addf
// The backward's gather is marked recomputed, so that CSE does not merge it
// (and the bucket it gathers from) back into the forward's.
// CHECK: %[[ROW2:.*]] = tensor.insert_slice {{.*}} {autopar.recomputed}
// CHECK: shard.all_gather %[[ROW2]] on @autopar_grid grid_axes = [0] gather_axis = 0 {autopar.recomputed} : tensor<1x6xf32> -> tensor<2x6xf32>
// CHECK: %[[AGAIN:.*]] = tensor.expand_shape %{{.*}} {{\[}}[0, 1]] output_shape [4, 3] {autopar.recomputed} : tensor<12xf32> into tensor<4x3xf32>
// CHECK: %[[WT:.*]] = linalg.transpose ins(%[[AGAIN]] : tensor<4x3xf32>) outs(%[[EMPTY_T]] : tensor<3x4xf32>)
// CHECK: linalg.matmul ins(%[[Y]], %[[WT]] : tensor<2x3xf32>, tensor<3x4xf32>)
// CHECK: %[[GW:.*]] = arith.mulf %[[AGAIN]], %[[AGAIN]] : tensor<4x3xf32>
// CHECK: return %[[LOSS]], %[[GW]], %[[B]]
// CHECK-LABEL: func.func @main
// CHECK-SAME: tensor<2x3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable, autopar.zero_blocks = 2 : i64}
// CHECK-SAME: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "b", autopar.trainable}
// CHECK-SAME: -> (tensor<f32> {autopar.output = "loss"}, tensor<2x3xf32> {autopar.gradient = "w"}, tensor<3xf32> {autopar.gradient = "b"})
// CHECK: shard.reduce_scatter %{{.*}} on @autopar_grid grid_axes = [0] scatter_axis = 0 : tensor<2x6xf32> -> tensor<1x6xf32>

// The optimizer updates the block it holds: no slice, no gather; the
// state and the update are blocks.
// UPDATE-LABEL: func.func @main
// UPDATE-SAME: %[[W:[^:]*]]: tensor<2x3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable, autopar.zero_blocks = 2 : i64}
// UPDATE-SAME: tensor<2x3xf32> {autopar.dtype = "float32", autopar.optimizer_state = "momentum", autopar.state_of = "w"}
// UPDATE-SAME: tensor<2x3xf32> {autopar.dtype = "float32", autopar.update = "w"}, tensor<2x3xf32> {autopar.dtype = "float32", autopar.update = "w.momentum"}
// UPDATE-NOT: shard.all_slice
// UPDATE-NOT: shard.all_gather
// UPDATE: return

#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @main(%w: tensor<4x3xf32> {autopar.parameter = "w", autopar.trainable, autopar.dtype = "float32"},
                %b: tensor<3xf32> {autopar.parameter = "b", autopar.trainable, autopar.dtype = "float32"},
                %x: tensor<2x4xf32> {autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<4x3xf32> {autopar.gradient = "w"},
        tensor<3xf32> {autopar.gradient = "b"}) {
  %e = tensor.empty() : tensor<3x4xf32>
  %wt = linalg.transpose ins(%w : tensor<4x3xf32>) outs(%e : tensor<3x4xf32>) permutation = [1, 0]
  %z = tensor.empty() : tensor<2x3xf32>
  %y = linalg.matmul ins(%x, %w : tensor<2x4xf32>, tensor<4x3xf32>) outs(%z : tensor<2x3xf32>) -> tensor<2x3xf32>
  %c = arith.constant dense<1.0> : tensor<f32>
  %l = arith.addf %c, %c : tensor<f32>
  %z2 = tensor.empty() : tensor<2x4xf32>
  %dx = linalg.matmul ins(%y, %wt : tensor<2x3xf32>, tensor<3x4xf32>) outs(%z2 : tensor<2x4xf32>) -> tensor<2x4xf32>
  %gw = arith.mulf %w, %w : tensor<4x3xf32>
  return %l, %gw, %b : tensor<f32>, tensor<4x3xf32>, tensor<3xf32>
}
