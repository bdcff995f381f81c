// ZeRO over 2 data-parallel replicas (docs/distributed-training.md, "ZeRO").
// autopar-accumulate-gradients zero-stage=2 reduce-scatters the gradients
// whose dim 0 divides by 2 (one bucket whose row r is every such gradient's
// block r) and all-reduces the rest; autopar-apply-optimizer zero-stage=1
// updates those parameters by blocks: block-shaped optimizer states, the
// replica's block of the parameter and its gradient (all_slice), the
// blocks' sums of squares all-reduced into the global norm, and one
// all_gather of the new blocks. b (dim 0 = 3) stays replicated.
// RUN: autopar-opt %s --autopar-accumulate-gradients="data-parallel=2 zero-stage=2" | FileCheck %s --check-prefix=SCATTER
// RUN: autopar-opt %s --autopar-apply-optimizer="optimizer=sgd momentum=0.9 clip=1.0 zero-stage=1 data-parallel=2" | FileCheck %s --check-prefix=UPDATE
// RUN: autopar-opt %s --autopar-accumulate-gradients="data-parallel=2 zero-stage=2" --autopar-apply-optimizer="optimizer=adamw zero-stage=2 data-parallel=2" | FileCheck %s --check-prefix=STAGE2

// SCATTER: shard.grid @autopar_grid(shape = 2)
// SCATTER-LABEL: func.func @main
// SCATTER-SAME: -> (tensor<f32> {autopar.output = "loss"}, tensor<2x3xf32> {autopar.gradient = "w"}, tensor<3xf32> {autopar.gradient = "b"})
// SCATTER: %[[SUMS:.*]]:3 = scf.for
// SCATTER: %[[AR:.*]] = shard.all_reduce %{{.*}} on @autopar_grid grid_axes = [0] : tensor<4xf32> -> tensor<4xf32>
// SCATTER: %[[BUCKET:.*]] = tensor.empty() : tensor<2x6xf32>
// SCATTER: %[[FLAT:.*]] = tensor.collapse_shape %[[SUMS]]#1 {{\[}}[0, 1]] : tensor<4x3xf32> into tensor<12xf32>
// SCATTER: %[[ROWS:.*]] = tensor.expand_shape %[[FLAT]] {{\[}}[0, 1]] output_shape [2, 6] : tensor<12xf32> into tensor<2x6xf32>
// SCATTER: %[[FULL:.*]] = tensor.insert_slice %[[ROWS]] into %[[BUCKET]][0, 0] [2, 6] [1, 1]
// SCATTER: %[[MINE:.*]] = shard.reduce_scatter %[[FULL]] on @autopar_grid grid_axes = [0] scatter_axis = 0 : tensor<2x6xf32> -> tensor<1x6xf32>
// SCATTER: %[[PART:.*]] = tensor.extract_slice %[[MINE]][0, 0] [1, 6] [1, 1] : tensor<1x6xf32> to tensor<6xf32>
// SCATTER: %[[BLOCK:.*]] = tensor.expand_shape %[[PART]] {{\[}}[0, 1]] output_shape [2, 3] : tensor<6xf32> into tensor<2x3xf32>
// SCATTER: %[[G:.*]] = linalg.generic {{.*}} outs(%[[BLOCK]] : tensor<2x3xf32>)
// SCATTER: return %{{.*}}, %[[G]], %{{.*}} : tensor<f32>, tensor<2x3xf32>, tensor<3xf32>

// UPDATE: shard.grid @autopar_grid(shape = 2)
// UPDATE-LABEL: func.func @main
// UPDATE-SAME: %[[W:[^:]*]]: tensor<4x3xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable}
// UPDATE-SAME: %[[B:[^:]*]]: tensor<3xf32> {autopar.dtype = "float32", autopar.parameter = "b", autopar.trainable}
// UPDATE-SAME: %[[WBUF:[^:]*]]: tensor<2x3xf32> {autopar.dtype = "float32", autopar.optimizer_state = "momentum", autopar.state_of = "w"}
// UPDATE-SAME: %[[BBUF:[^:]*]]: tensor<3xf32> {autopar.dtype = "float32", autopar.optimizer_state = "momentum", autopar.state_of = "b"}
// UPDATE-SAME: -> (tensor<f32> {autopar.output = "loss"}, tensor<f32> {{.*}}, tensor<f32> {{.*}}, tensor<4x3xf32> {autopar.dtype = "float32", autopar.update = "w"}, tensor<2x3xf32> {autopar.dtype = "float32", autopar.update = "w.momentum"}, tensor<3xf32> {autopar.dtype = "float32", autopar.update = "b"}, tensor<3xf32> {autopar.dtype = "float32", autopar.update = "b.momentum"})
// UPDATE: %[[WBLOCK:.*]] = shard.all_slice %[[W]] on @autopar_grid grid_axes = [0] slice_axis = 0 : tensor<4x3xf32> -> tensor<2x3xf32>
// UPDATE: %[[GBLOCK:.*]] = shard.all_slice %[[GW:.*]] on @autopar_grid grid_axes = [0] slice_axis = 0 : tensor<4x3xf32> -> tensor<2x3xf32>
// UPDATE: %[[PARTIAL:.*]] = tensor.from_elements %{{.*}} : tensor<1xf32>
// UPDATE: %[[TOTAL:.*]] = shard.all_reduce %[[PARTIAL]] on @autopar_grid grid_axes = [0] : tensor<1xf32> -> tensor<1xf32>
// UPDATE: math.sqrt
// UPDATE: %[[NEWWBUF:.*]] = linalg.generic {{.*}} ins(%{{.*}}, %[[WBUF]], {{.*}} : tensor<2x3xf32>, tensor<2x3xf32>,
// UPDATE: %[[NEWWBLOCK:.*]] = linalg.generic {{.*}} ins(%[[WBLOCK]], %[[NEWWBUF]], {{.*}}) outs(%{{.*}} : tensor<2x3xf32>)
// UPDATE: %[[NEWB:.*]] = linalg.generic {{.*}} ins(%[[B]], {{.*}}) outs(%{{.*}} : tensor<3xf32>)
// UPDATE: %[[FLAT:.*]] = tensor.collapse_shape %[[NEWWBLOCK]] {{\[}}[0, 1]] : tensor<2x3xf32> into tensor<6xf32>
// UPDATE: %[[ONE:.*]] = tensor.insert_slice %[[FLAT]] into %{{.*}}[0, 0] [1, 6] [1, 1] : tensor<6xf32> into tensor<1x6xf32>
// UPDATE: %[[ALL:.*]] = shard.all_gather %[[ONE]] on @autopar_grid grid_axes = [0] gather_axis = 0 : tensor<1x6xf32> -> tensor<2x6xf32>
// UPDATE: %[[ROWS:.*]] = tensor.extract_slice %[[ALL]][0, 0] [2, 6] [1, 1]
// UPDATE: %[[WHOLE:.*]] = tensor.collapse_shape %[[ROWS]] {{\[}}[0, 1]] : tensor<2x6xf32> into tensor<12xf32>
// UPDATE: %[[NEWW:.*]] = tensor.expand_shape %[[WHOLE]] {{\[}}[0, 1]] output_shape [4, 3] : tensor<12xf32> into tensor<4x3xf32>
// UPDATE: return %{{.*}}, %{{.*}}, %{{.*}}, %[[NEWW]], %[[NEWWBUF]], %[[NEWB]], %{{.*}}

// Stage 2: the reduce-scattered gradient is used as it is (no all_slice of
// it), the parameter's block is still sliced.
// STAGE2-LABEL: func.func @main
// STAGE2-SAME: autopar.optimizer_state = "exp_avg", autopar.state_of = "w"
// STAGE2: shard.reduce_scatter
// STAGE2-COUNT-1: shard.all_slice
// STAGE2-NOT: shard.all_slice
// STAGE2: shard.all_gather

func.func @main(%w: tensor<4x3xf32> {autopar.parameter = "w", autopar.trainable, autopar.dtype = "float32"},
                %b: tensor<3xf32> {autopar.parameter = "b", autopar.trainable, autopar.dtype = "float32"},
                %x: tensor<4x3xf32> {autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<4x3xf32> {autopar.gradient = "w"},
        tensor<3xf32> {autopar.gradient = "b"}) {
  %c = arith.constant dense<1.0> : tensor<f32>
  %g = arith.mulf %w, %x : tensor<4x3xf32>
  return %c, %g, %b : tensor<f32>, tensor<4x3xf32>, tensor<3xf32>
}
