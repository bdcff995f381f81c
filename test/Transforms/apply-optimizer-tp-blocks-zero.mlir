// ZeRO does not shard a tensor-parallel block over the replicas: an error
// naming the parameter.
// RUN: autopar-opt %s -autopar-apply-optimizer="optimizer=sgd lr=0.5 zero-stage=1 data-parallel=2 pipeline-stages=2" -verify-diagnostics

shard.grid @autopar_grid(shape = 2x2x2)
// expected-error @+1 {{autopar-apply-optimizer: 'w' is a tensor-parallel block; ZeRO does not shard such blocks over the replicas (zero-stage 0)}}
func.func @main(%w: tensor<4xf32> {autopar.dtype = "float32", autopar.parameter = "w", autopar.trainable, autopar.tp_split = 0 : i64},
                %g: tensor<4xf32> {autopar.dtype = "float32", autopar.accumulator = "w.grad"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<4xf32> {autopar.dtype = "float32", autopar.gradient = "w", autopar.output = "w.grad"}) {
  %zero = arith.constant 0.0 : f32
  %s = tensor.empty() : tensor<f32>
  %loss = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  return %loss, %g : tensor<f32>, tensor<4xf32>
}
