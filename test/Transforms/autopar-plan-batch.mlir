// autopar-plan (tp=2 on local:2): tensor parallelism never splits the batch
// (data parallelism gives each replica its share). For this Linear +
// elementwise chain a split of the batch rows would need no collective at
// all; the search splits the columns instead.
// RUN: autopar-opt %s --autopar-plan="cluster=local:2 tp=2" | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK: %[[COLUMNS:.*]] = shard.sharding @autopar_grid split_axes = {{\[\[}}], [1]]
// CHECK: %[[H:.*]] = linalg.matmul
// CHECK: shard.shard %[[H]] to %{{.*}} : tensor<64x64xf32>
// CHECK-NOT: split_axes = {{\[\[}}1]]
// CHECK: return
#map = affine_map<(d0, d1) -> (d0, d1)>
module attributes {autopar.model = "linear"} {
  func.func @main(%w: tensor<64x64xf32> {autopar.dtype = "float32", autopar.parameter = "W"},
                  %x: tensor<64x64xf32> {autopar.dtype = "float32", autopar.input = "X"})
      -> (tensor<64x64xf32> {autopar.dtype = "float32", autopar.output = "Y"}) {
    %zero = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<64x64xf32>
    %f = linalg.fill ins(%zero : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
    %h = linalg.matmul ins(%x, %w : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
    %e2 = tensor.empty() : tensor<64x64xf32>
    %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
        ins(%h : tensor<64x64xf32>) outs(%e2 : tensor<64x64xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.maximumf %in, %zero : f32
      %t = math.tanh %m : f32
      %t2 = math.tanh %t : f32
      %t3 = math.exp %t2 : f32
      linalg.yield %t3 : f32
    } -> tensor<64x64xf32>
    return %r : tensor<64x64xf32>
  }
}
