// autopar-add-cross-entropy-loss{fused}: each position's loss is one
// autopar.softmax_cross_entropy (0 at ignored positions), then the same mean
// over the positions whose label is not ignore-index; no max, sum of
// exponentials or one-hot pick over the classes is left. Logits that are not
// f32 keep the unfused loss (the fused op's nll is f32).
// RUN: autopar-opt %s -split-input-file -autopar-add-cross-entropy-loss="output=logits fused=true ignore-index=7" | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3x4xf32> {autopar.dtype = "float32", autopar.input = "x"}
// CHECK-SAME: %[[LABELS:[^:]*]]: tensor<2x3xi64> {autopar.dtype = "int64", autopar.input = "labels"}
// CHECK-NOT: math.exp
// CHECK: %[[L:.*]]:2 = autopar.softmax_cross_entropy ins(%[[X]], %[[LABELS]] : tensor<2x3x4xf32>, tensor<2x3xi64>) outs(%{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<2x3xf32>) {ignore_index = 7 : i64}
// CHECK: %[[TOTAL:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]} ins(%[[L]]#0 : tensor<2x3xf32>)
// CHECK-NEXT: ^bb0(%[[NLL:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT:   %[[SUM:.*]] = arith.addf %[[ACC]], %[[NLL]] : f32
// CHECK: %[[COUNT:.*]] = linalg.generic {{.*}} ins(%[[LABELS]] : tensor<2x3xi64>)
// CHECK:   arith.constant 7 : i64
// CHECK: %[[LOSS:.*]] = linalg.generic {{.*}} ins(%[[TOTAL]], %[[COUNT]] : tensor<f32>, tensor<f32>)
// CHECK:   arith.divf
// CHECK: return %[[X]], %[[LOSS]] : tensor<2x3x4xf32>, tensor<f32>
func.func @main(%x: tensor<2x3x4xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<2x3x4xf32> {autopar.dtype = "float32", autopar.output = "logits"}) {
  return %x : tensor<2x3x4xf32>
}

// -----

// CHECK-LABEL: func.func @main
// CHECK-NOT: autopar.softmax_cross_entropy
// CHECK: math.exp
// CHECK: return
func.func @main(%x: tensor<2x4xf16> {autopar.dtype = "float16", autopar.input = "x"})
    -> (tensor<2x4xf16> {autopar.dtype = "float16", autopar.output = "logits"}) {
  return %x : tensor<2x4xf16>
}
