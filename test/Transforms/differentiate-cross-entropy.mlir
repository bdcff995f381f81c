// autopar-differentiate through the fused cross-entropy: one
// autopar.softmax_cross_entropy_grad reads the logits, the labels, the
// forward's lse and the adjoint of nll, and gives the logits' adjoint, which
// flows back through the GEMM to the weight. Then autopar-mixed-precision on
// a GPU (bf16 GEMMs) runs both ops on bf16 logits, which the LM head's
// GEMM writes itself (no f32 logits), and writes a bf16 gradient the GEMMs
// read as it is; lse, nll, the mean and the backward's
// d_nll (1 / count at each position) stay f32. On CPU (f32-gemms) and with
// f16 (no f16 kernel) the ops read f32.
// RUN: autopar-opt %s --pass-pipeline='builtin.module(autopar-add-cross-entropy-loss{output=logits fused=true}, autopar-differentiate)' | FileCheck %s
// RUN: autopar-opt %s --pass-pipeline='builtin.module(autopar-add-cross-entropy-loss{output=logits fused=true}, autopar-differentiate, func.func(autopar-mixed-precision{keep-parameters f32-loss-head}), canonicalize, cse)' | FileCheck %s --check-prefix=BF16
// RUN: autopar-opt %s --pass-pipeline='builtin.module(autopar-add-cross-entropy-loss{output=logits fused=true}, autopar-differentiate, func.func(autopar-mixed-precision{keep-parameters f32-loss-head f32-gemms}))' | FileCheck %s --check-prefix=CPU
// RUN: autopar-opt %s --pass-pipeline='builtin.module(autopar-add-cross-entropy-loss{output=logits fused=true}, autopar-differentiate, func.func(autopar-mixed-precision{type=f16 keep-parameters f32-loss-head}))' | FileCheck %s --check-prefix=F16

// CHECK-LABEL: func.func @main
// CHECK-SAME: autopar.output = "w.grad"
// CHECK: %[[LOGITS:.*]] = linalg.matmul
// CHECK: %[[L:.*]]:2 = autopar.softmax_cross_entropy ins(%[[LOGITS]], %[[Y:[0-9a-z_]+]] :
// CHECK: %[[D:.*]] = autopar.softmax_cross_entropy_grad ins(%[[LOGITS]], %[[Y]] saved(%[[L]]#1, %[[DNLL:[0-9a-z_]+]] : tensor<3xf32>, tensor<3xf32>) : tensor<3x5xf32>, tensor<3xi64>) outs(%{{.*}} : tensor<3x5xf32>) {ignore_index = -100 : i64}
// CHECK-NOT: math.exp
// CHECK: linalg.matmul {{.*}} ins(%{{.*}}, %[[D]] :

// BF16-LABEL: func.func @main
// BF16: %[[LOW:.*]] = linalg.matmul ins(%{{.*}}, %{{.*}} : tensor<3x4xbf16>, tensor<4x5xbf16>) outs(%{{.*}} : tensor<3x5xbf16>) -> tensor<3x5xbf16>
// BF16-NOT: tensor<3x5xf32>
// BF16: autopar.softmax_cross_entropy ins(%[[LOW]], %{{.*}} : tensor<3x5xbf16>, tensor<3xi64>) outs(%{{.*}} : tensor<3xf32>, tensor<3xf32>)
// BF16-NOT: tensor<3xbf16>
// BF16-NOT: tensor<bf16>
// BF16: %[[D:.*]] = autopar.softmax_cross_entropy_grad ins(%[[LOW]], %{{.*}} saved({{.*}} : tensor<3xf32>, tensor<3xf32>) : tensor<3x5xbf16>, tensor<3xi64>) outs(%{{.*}} : tensor<3x5xbf16>) {{.*}} -> tensor<3x5xbf16>
// BF16: linalg.matmul {{.*}} ins(%{{.*}}, %[[D]] : tensor<3x4xbf16>, tensor<3x5xbf16>) outs(%{{.*}} : tensor<4x5xf32>)

// CPU-LABEL: func.func @main
// CPU: autopar.softmax_cross_entropy ins(%{{.*}}, %{{.*}} : tensor<3x5xf32>, tensor<3xi64>)
// CPU: autopar.softmax_cross_entropy_grad {{.*}} outs(%{{.*}} : tensor<3x5xf32>)

// F16-LABEL: func.func @main
// F16: autopar.softmax_cross_entropy ins(%{{.*}}, %{{.*}} : tensor<3x5xf32>, tensor<3xi64>)
// F16: autopar.softmax_cross_entropy_grad {{.*}} outs(%{{.*}} : tensor<3x5xf32>)
func.func @main(%w: tensor<4x5xf32> {autopar.dtype = "float32", autopar.parameter = "w"},
                %x: tensor<3x4xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<3x5xf32> {autopar.dtype = "float32", autopar.output = "logits"}) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x5xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<3x5xf32>) -> tensor<3x5xf32>
  %logits = linalg.matmul ins(%x, %w : tensor<3x4xf32>, tensor<4x5xf32>) outs(%init : tensor<3x5xf32>) -> tensor<3x5xf32>
  return %logits : tensor<3x5xf32>
}
