// autopar-differentiate through autopar.attention: one autopar.attention_grad
// reads the forward's operands, its out and lse and the adjoint of out, and
// gives the query's, key's and value's adjoints (no S x T tensor); its
// results flow back to the parameters like any adjoint. Then
// autopar-mixed-precision on a GPU runs both in bf16 (lse stays f32).
// RUN: autopar-opt %s -autopar-differentiate | FileCheck %s
// RUN: autopar-opt %s --pass-pipeline='builtin.module(autopar-differentiate, func.func(autopar-mixed-precision{keep-parameters}))' | FileCheck %s --check-prefix=BF16

// CHECK-LABEL: func.func @main
// CHECK-SAME: autopar.output = "wq.grad"
// CHECK-SAME: autopar.output = "wv.grad"
// CHECK: %[[O:.*]]:2 = autopar.attention ins(%[[Q:[0-9a-z_]+]], %[[X:[0-9a-z_]+]], %[[V:[0-9a-z_]+]] : {{.*}}) {causal, scale = 5.000000e-01 : f64}
// CHECK: %[[G:.*]]:3 = autopar.attention_grad ins(%[[Q]], %[[X]], %[[V]] saved(%[[O]]#0, %[[O]]#1, %[[DO:[0-9a-z_]+]] : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>, tensor<1x2x4x8xf32>)
// CHECK-SAME: {causal, scale = 5.000000e-01 : f64}
// CHECK-NOT: tensor<1x2x4x4xf32>
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}} : tensor<f32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>

// BF16-LABEL: func.func @main
// BF16: autopar.attention ins({{.*}} : tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>) outs({{.*}} : tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>)
// BF16: autopar.attention_grad ins({{.*}} saved({{.*}} : tensor<1x2x4x8xbf16>, tensor<1x2x4xf32>, tensor<1x2x4x8xbf16>) : {{.*}}) outs({{.*}} : tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>, tensor<1x2x4x8xbf16>)
#id = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
func.func @main(%wq: tensor<1x2x4x8xf32> {autopar.dtype = "float32", autopar.parameter = "wq"},
                %wv: tensor<1x2x4x8xf32> {autopar.dtype = "float32", autopar.parameter = "wv"},
                %x: tensor<1x2x4x8xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<f32> {autopar.output = "loss"}) {
  %e = tensor.empty() : tensor<1x2x4x8xf32>
  %q = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%wq, %x : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) outs(%e : tensor<1x2x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<1x2x4x8xf32>
  %v = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%wv, %x : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) outs(%e : tensor<1x2x4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.addf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<1x2x4x8xf32>
  %o0 = tensor.empty() : tensor<1x2x4x8xf32>
  %l0 = tensor.empty() : tensor<1x2x4xf32>
  %o, %l = autopar.attention ins(%q, %x, %v : tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) outs(%o0, %l0 : tensor<1x2x4x8xf32>, tensor<1x2x4xf32>) {scale = 0.5 : f64, causal} -> tensor<1x2x4x8xf32>, tensor<1x2x4xf32>
  %zero = arith.constant 0.0 : f32
  %s = tensor.empty() : tensor<f32>
  %sinit = linalg.fill ins(%zero : f32) outs(%s : tensor<f32>) -> tensor<f32>
  %loss = linalg.reduce ins(%o : tensor<1x2x4x8xf32>) outs(%sinit : tensor<f32>) dimensions = [0, 1, 2, 3]
    (%in: f32, %acc: f32) {
      %r = arith.addf %in, %acc : f32
      linalg.yield %r : f32
    }
  return %loss : tensor<f32>
}
