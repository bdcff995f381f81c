// autopar-accumulate-gradients: a training-mode Dropout whose input holds the
// batch in another dim than 0 (a sequence-first [S, B, D]) would draw other
// masks under micro-batches than one call over the whole batch: an error
// (naming the ONNX node when the op has its NameLoc). The batch-first case
// passes this check: accumulate-gradients.mlir's Dropout tests.
// RUN: autopar-opt %s -split-input-file -verify-diagnostics --autopar-accumulate-gradients=micro-batches=2

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#s3 = affine_map<(d0, d1, d2) -> ()>
#all = affine_map<(d0, d1, d2) -> ()>
func.func @main(%w: tensor<4x2x3xf32> {autopar.parameter = "w", autopar.trainable},
                %seed: tensor<i64> {autopar.seed},
                %step: tensor<i64> {autopar.step},
                %offset: tensor<i64> {autopar.sample_offset},
                %x: tensor<2x4x3xf32> {autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"},
        tensor<4x2x3xf32> {autopar.gradient = "w", autopar.output = "w.grad"}) {
  %e = tensor.empty() : tensor<4x2x3xf32>
  %xt = linalg.transpose ins(%x : tensor<2x4x3xf32>) outs(%e : tensor<4x2x3xf32>) permutation = [1, 0, 2]
  // expected-error @+1 {{training-mode Dropout on a tensor of type 'tensor<4x2x3xf32>' whose batch is dim 1, not dim 0}}
  %d = linalg.generic {indexing_maps = [#id3, #s3, #s3, #s3, #id3], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%xt, %seed, %step, %offset : tensor<4x2x3xf32>, tensor<i64>, tensor<i64>, tensor<i64>) outs(%e : tensor<4x2x3xf32>) {
  ^bb0(%a: f32, %s: i64, %t: i64, %o: i64, %out: f32):
    linalg.yield %a : f32
  } -> tensor<4x2x3xf32>
  %zero = arith.constant 0.0 : f32
  %l0 = tensor.empty() : tensor<f32>
  %z = linalg.fill ins(%zero : f32) outs(%l0 : tensor<f32>) -> tensor<f32>
  %loss = linalg.generic {indexing_maps = [#id3, #id3, #all], iterator_types = ["reduction", "reduction", "reduction"]}
      ins(%d, %w : tensor<4x2x3xf32>, tensor<4x2x3xf32>) outs(%z : tensor<f32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  return %loss, %w : tensor<f32>, tensor<4x2x3xf32>
}
