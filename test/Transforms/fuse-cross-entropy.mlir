// autopar-fuse-cross-entropy: the importer's SoftmaxCrossEntropyLoss (and LogSoftmax +
// NegativeLogLikelihoodLoss) pattern, a log-softmax over the last dim and a one-hot pick of
// the labels, becomes autopar.softmax_cross_entropy and `in range ? -nll : 0`; a pattern
// whose intermediates have other users, or whose logits are not f32, stays as it is.
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-fuse-cross-entropy))' --split-input-file | FileCheck %s

// F.cross_entropy(logits, y) as torch exports it, int64 labels.
// CHECK-LABEL: func.func @cross_entropy
// CHECK-SAME: (%[[X:.*]]: tensor<4x16xf32>, %[[Y:.*]]: tensor<4xi64>)
// CHECK: %[[F:.*]]:2 = autopar.softmax_cross_entropy ins(%[[X]], %[[Y]] : tensor<4x16xf32>, tensor<4xi64>)
// CHECK-SAME: outs({{.*}} : tensor<4xf32>, tensor<4xf32>) {ignore_index = -100 : i64}
// CHECK: %[[P:.*]] = linalg.generic {{.*}} ins(%[[F]]#0, %[[Y]] : tensor<4xf32>, tensor<4xi64>)
// CHECK: ^bb0(%[[NLL:.*]]: f32, %[[L:.*]]: i64, %{{.*}}: f32):
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : i64
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[GE:.*]] = arith.cmpi sge, %[[L]], %[[C0]]
// CHECK-DAG: %[[LT:.*]] = arith.cmpi slt, %[[L]], %[[C16]]
// CHECK: %[[IN:.*]] = arith.andi %[[GE]], %[[LT]]
// CHECK: %[[NEG:.*]] = arith.negf %[[NLL]]
// CHECK: %[[SEL:.*]] = arith.select %[[IN]], %[[NEG]], %{{.*}} : f32
// CHECK: linalg.yield %[[SEL]]
// CHECK-NOT: linalg.reduce
// CHECK-NOT: math.exp
// CHECK: return %[[P]] : tensor<4xf32>
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @cross_entropy(%x: tensor<4x16xf32>, %labels: tensor<4xi64>) -> (tensor<4xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4xf32>
  %mfill = linalg.fill ins(%ninf : f32) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %max = linalg.reduce ins(%x : tensor<4x16xf32>) outs(%mfill : tensor<4xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %m = arith.maximumf %in, %init : f32
      linalg.yield %m : f32
    }
  %e1 = tensor.empty() : tensor<4x16xf32>
  %exp = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %max : tensor<4x16xf32>, tensor<4xf32>) outs(%e1 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    %e = math.exp %s : f32
    linalg.yield %e : f32
  } -> tensor<4x16xf32>
  %sfill = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.reduce ins(%exp : tensor<4x16xf32>) outs(%sfill : tensor<4xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    }
  %logp = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %max, %sum : tensor<4x16xf32>, tensor<4xf32>, tensor<4xf32>) outs(%e1 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    %l = math.log %c : f32
    %r = arith.subf %s, %l : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  %picked = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]} ins(%logp, %labels : tensor<4x16xf32>, tensor<4xi64>) outs(%sfill : tensor<4xf32>) {
  ^bb0(%a: f32, %l: i64, %o: f32):
    %i = linalg.index 1 : index
    %c = arith.index_cast %i : index to i64
    %hit = arith.cmpi eq, %c, %l : i64
    %v = arith.select %hit, %a, %zero : f32
    %r = arith.addf %o, %v : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %picked : tensor<4xf32>
}

// -----

// int32 labels (an NegativeLogLikelihoodLoss of a hand-written graph) are widened first;
// the comparison with the class count stays in i32.
// CHECK-LABEL: func.func @int32_labels
// CHECK-SAME: (%[[X:.*]]: tensor<4x16xf32>, %[[Y:.*]]: tensor<4xi32>)
// CHECK: %[[Y64:.*]] = linalg.generic {{.*}} ins(%[[Y]] : tensor<4xi32>)
// CHECK: arith.extsi %{{.*}} : i32 to i64
// CHECK: %[[F:.*]]:2 = autopar.softmax_cross_entropy ins(%[[X]], %[[Y64]] : tensor<4x16xf32>, tensor<4xi64>)
// CHECK: linalg.generic {{.*}} ins(%[[F]]#0, %[[Y]] : tensor<4xf32>, tensor<4xi32>)
// CHECK: arith.cmpi slt, %{{.*}}, %{{.*}} : i32
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @int32_labels(%x: tensor<4x16xf32>, %labels: tensor<4xi32>) -> (tensor<4xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4xf32>
  %mfill = linalg.fill ins(%ninf : f32) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %max = linalg.reduce ins(%x : tensor<4x16xf32>) outs(%mfill : tensor<4xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %m = arith.maximumf %in, %init : f32
      linalg.yield %m : f32
    }
  %e1 = tensor.empty() : tensor<4x16xf32>
  %exp = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %max : tensor<4x16xf32>, tensor<4xf32>) outs(%e1 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    %e = math.exp %s : f32
    linalg.yield %e : f32
  } -> tensor<4x16xf32>
  %sfill = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.reduce ins(%exp : tensor<4x16xf32>) outs(%sfill : tensor<4xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    }
  %logp = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %max, %sum : tensor<4x16xf32>, tensor<4xf32>, tensor<4xf32>) outs(%e1 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    %l = math.log %c : f32
    %r = arith.subf %s, %l : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  %picked = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]} ins(%logp, %labels : tensor<4x16xf32>, tensor<4xi32>) outs(%sfill : tensor<4xf32>) {
  ^bb0(%a: f32, %l: i32, %o: f32):
    %i = linalg.index 1 : index
    %c = arith.index_cast %i : index to i32
    %hit = arith.cmpi eq, %c, %l : i32
    %v = arith.select %hit, %a, %zero : f32
    %r = arith.addf %o, %v : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %picked : tensor<4xf32>
}

// -----

// The logits returned as well (the model's second output) still fuse: the fused op reads them.
// CHECK-LABEL: func.func @logits_returned
// CHECK-SAME: (%[[X:.*]]: tensor<4x16xf32>
// CHECK: %[[F:.*]]:2 = autopar.softmax_cross_entropy ins(%[[X]],
// CHECK: return %{{.*}}, %[[X]] :
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @logits_returned(%x: tensor<4x16xf32>, %labels: tensor<4xi64>) -> (tensor<4xf32>, tensor<4x16xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4xf32>
  %mfill = linalg.fill ins(%ninf : f32) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %max = linalg.reduce ins(%x : tensor<4x16xf32>) outs(%mfill : tensor<4xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %m = arith.maximumf %in, %init : f32
      linalg.yield %m : f32
    }
  %e1 = tensor.empty() : tensor<4x16xf32>
  %exp = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %max : tensor<4x16xf32>, tensor<4xf32>) outs(%e1 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    %e = math.exp %s : f32
    linalg.yield %e : f32
  } -> tensor<4x16xf32>
  %sfill = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.reduce ins(%exp : tensor<4x16xf32>) outs(%sfill : tensor<4xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    }
  %logp = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %max, %sum : tensor<4x16xf32>, tensor<4xf32>, tensor<4xf32>) outs(%e1 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    %l = math.log %c : f32
    %r = arith.subf %s, %l : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  %picked = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]} ins(%logp, %labels : tensor<4x16xf32>, tensor<4xi64>) outs(%sfill : tensor<4xf32>) {
  ^bb0(%a: f32, %l: i64, %o: f32):
    %i = linalg.index 1 : index
    %c = arith.index_cast %i : index to i64
    %hit = arith.cmpi eq, %c, %l : i64
    %v = arith.select %hit, %a, %zero : f32
    %r = arith.addf %o, %v : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %picked, %x : tensor<4xf32>, tensor<4x16xf32>
}

// -----

// The log-probabilities returned too (SoftmaxCrossEntropyLoss's log_prob output): unfused.
// CHECK-LABEL: func.func @log_prob_returned
// CHECK-NOT: autopar.softmax_cross_entropy
// CHECK: linalg.reduce
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @log_prob_returned(%x: tensor<4x16xf32>, %labels: tensor<4xi64>) -> (tensor<4xf32>, tensor<4x16xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4xf32>
  %mfill = linalg.fill ins(%ninf : f32) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %max = linalg.reduce ins(%x : tensor<4x16xf32>) outs(%mfill : tensor<4xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %m = arith.maximumf %in, %init : f32
      linalg.yield %m : f32
    }
  %e1 = tensor.empty() : tensor<4x16xf32>
  %exp = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %max : tensor<4x16xf32>, tensor<4xf32>) outs(%e1 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    %e = math.exp %s : f32
    linalg.yield %e : f32
  } -> tensor<4x16xf32>
  %sfill = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.reduce ins(%exp : tensor<4x16xf32>) outs(%sfill : tensor<4xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    }
  %logp = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %max, %sum : tensor<4x16xf32>, tensor<4xf32>, tensor<4xf32>) outs(%e1 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    %l = math.log %c : f32
    %r = arith.subf %s, %l : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  %picked = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]} ins(%logp, %labels : tensor<4x16xf32>, tensor<4xi64>) outs(%sfill : tensor<4xf32>) {
  ^bb0(%a: f32, %l: i64, %o: f32):
    %i = linalg.index 1 : index
    %c = arith.index_cast %i : index to i64
    %hit = arith.cmpi eq, %c, %l : i64
    %v = arith.select %hit, %a, %zero : f32
    %r = arith.addf %o, %v : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %picked, %logp : tensor<4xf32>, tensor<4x16xf32>
}

// -----

// The maximum read elsewhere: unfused.
// CHECK-LABEL: func.func @max_used_elsewhere
// CHECK-NOT: autopar.softmax_cross_entropy
// CHECK: linalg.reduce
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @max_used_elsewhere(%x: tensor<4x16xf32>, %labels: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<4xf32>
  %mfill = linalg.fill ins(%ninf : f32) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %max = linalg.reduce ins(%x : tensor<4x16xf32>) outs(%mfill : tensor<4xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %m = arith.maximumf %in, %init : f32
      linalg.yield %m : f32
    }
  %e1 = tensor.empty() : tensor<4x16xf32>
  %exp = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %max : tensor<4x16xf32>, tensor<4xf32>) outs(%e1 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    %e = math.exp %s : f32
    linalg.yield %e : f32
  } -> tensor<4x16xf32>
  %sfill = linalg.fill ins(%zero : f32) outs(%e0 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.reduce ins(%exp : tensor<4x16xf32>) outs(%sfill : tensor<4xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    }
  %logp = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %max, %sum : tensor<4x16xf32>, tensor<4xf32>, tensor<4xf32>) outs(%e1 : tensor<4x16xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    %l = math.log %c : f32
    %r = arith.subf %s, %l : f32
    linalg.yield %r : f32
  } -> tensor<4x16xf32>
  %picked = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]} ins(%logp, %labels : tensor<4x16xf32>, tensor<4xi64>) outs(%sfill : tensor<4xf32>) {
  ^bb0(%a: f32, %l: i64, %o: f32):
    %i = linalg.index 1 : index
    %c = arith.index_cast %i : index to i64
    %hit = arith.cmpi eq, %c, %l : i64
    %v = arith.select %hit, %a, %zero : f32
    %r = arith.addf %o, %v : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  return %picked, %max : tensor<4xf32>, tensor<4xf32>
}

// -----

// f16 logits (a model exported in half precision): the fused op's nll is f32, so unfused.
// CHECK-LABEL: func.func @f16_logits
// CHECK-NOT: autopar.softmax_cross_entropy
// CHECK: linalg.reduce
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @f16_logits(%x: tensor<4x16xf16>, %labels: tensor<4xi64>) -> (tensor<4xf16>) {
  %ninf = arith.constant 0xFC00 : f16
  %zero = arith.constant 0.0 : f16
  %e0 = tensor.empty() : tensor<4xf16>
  %mfill = linalg.fill ins(%ninf : f16) outs(%e0 : tensor<4xf16>) -> tensor<4xf16>
  %max = linalg.reduce ins(%x : tensor<4x16xf16>) outs(%mfill : tensor<4xf16>) dimensions = [1]
    (%in: f16, %init: f16) {
      %m = arith.maximumf %in, %init : f16
      linalg.yield %m : f16
    }
  %e1 = tensor.empty() : tensor<4x16xf16>
  %exp = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %max : tensor<4x16xf16>, tensor<4xf16>) outs(%e1 : tensor<4x16xf16>) {
  ^bb0(%a: f16, %b: f16, %o: f16):
    %s = arith.subf %a, %b : f16
    %e = math.exp %s : f16
    linalg.yield %e : f16
  } -> tensor<4x16xf16>
  %sfill = linalg.fill ins(%zero : f16) outs(%e0 : tensor<4xf16>) -> tensor<4xf16>
  %sum = linalg.reduce ins(%exp : tensor<4x16xf16>) outs(%sfill : tensor<4xf16>) dimensions = [1]
    (%in: f16, %init: f16) {
      %s = arith.addf %in, %init : f16
      linalg.yield %s : f16
    }
  %logp = linalg.generic {indexing_maps = [#id, #row, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %max, %sum : tensor<4x16xf16>, tensor<4xf16>, tensor<4xf16>) outs(%e1 : tensor<4x16xf16>) {
  ^bb0(%a: f16, %b: f16, %c: f16, %o: f16):
    %s = arith.subf %a, %b : f16
    %l = math.log %c : f16
    %r = arith.subf %s, %l : f16
    linalg.yield %r : f16
  } -> tensor<4x16xf16>
  %picked = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]} ins(%logp, %labels : tensor<4x16xf16>, tensor<4xi64>) outs(%sfill : tensor<4xf16>) {
  ^bb0(%a: f16, %l: i64, %o: f16):
    %i = linalg.index 1 : index
    %c = arith.index_cast %i : index to i64
    %hit = arith.cmpi eq, %c, %l : i64
    %v = arith.select %hit, %a, %zero : f16
    %r = arith.addf %o, %v : f16
    linalg.yield %r : f16
  } -> tensor<4xf16>
  return %picked : tensor<4xf16>
}

// -----

// Scores [N, C, D] (the classes in dim 1, as ONNX orders them for more than two dims): the
// fused op wants the classes last, so unfused.
// CHECK-LABEL: func.func @classes_not_last
// CHECK-NOT: autopar.softmax_cross_entropy
// CHECK: linalg.reduce
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#row3 = affine_map<(d0, d1, d2) -> (d0, d2)>
#pick3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
func.func @classes_not_last(%x: tensor<2x16x3xf32>, %labels: tensor<2x3xi64>) -> tensor<2x3xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<2x3xf32>
  %mfill = linalg.fill ins(%ninf : f32) outs(%e0 : tensor<2x3xf32>) -> tensor<2x3xf32>
  %max = linalg.reduce ins(%x : tensor<2x16x3xf32>) outs(%mfill : tensor<2x3xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %m = arith.maximumf %in, %init : f32
      linalg.yield %m : f32
    }
  %e1 = tensor.empty() : tensor<2x16x3xf32>
  %exp = linalg.generic {indexing_maps = [#id3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %max : tensor<2x16x3xf32>, tensor<2x3xf32>) outs(%e1 : tensor<2x16x3xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    %e = math.exp %s : f32
    linalg.yield %e : f32
  } -> tensor<2x16x3xf32>
  %sfill = linalg.fill ins(%zero : f32) outs(%e0 : tensor<2x3xf32>) -> tensor<2x3xf32>
  %sum = linalg.reduce ins(%exp : tensor<2x16x3xf32>) outs(%sfill : tensor<2x3xf32>) dimensions = [1]
    (%in: f32, %init: f32) {
      %s = arith.addf %in, %init : f32
      linalg.yield %s : f32
    }
  %logp = linalg.generic {indexing_maps = [#id3, #row3, #row3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x, %max, %sum : tensor<2x16x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) outs(%e1 : tensor<2x16x3xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %s = arith.subf %a, %b : f32
    %l = math.log %c : f32
    %r = arith.subf %s, %l : f32
    linalg.yield %r : f32
  } -> tensor<2x16x3xf32>
  %picked = linalg.generic {indexing_maps = [#id3, #row3, #row3], iterator_types = ["parallel", "reduction", "parallel"]} ins(%logp, %labels : tensor<2x16x3xf32>, tensor<2x3xi64>) outs(%sfill : tensor<2x3xf32>) {
  ^bb0(%a: f32, %l: i64, %o: f32):
    %i = linalg.index 1 : index
    %c = arith.index_cast %i : index to i64
    %hit = arith.cmpi eq, %c, %l : i64
    %v = arith.select %hit, %a, %zero : f32
    %r = arith.addf %o, %v : f32
    linalg.yield %r : f32
  } -> tensor<2x3xf32>
  return %picked : tensor<2x3xf32>
}

// -----

// GPT's `F.cross_entropy(logits.view(-1, V), y.view(-1))` after autopar-sink-merging-reshapes:
// the log-softmax (its reductions as generics) over [B, T, V], the merge of B and T after it.
// The fused op reads the logits merged the same way.
// CHECK-LABEL: func.func @gpt_view
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x16xf32>, %[[Y:.*]]: tensor<2x3xi64>)
// CHECK: %[[Y6:.*]] = tensor.collapse_shape %[[Y]] {{\[\[}}0, 1]] : tensor<2x3xi64> into tensor<6xi64>
// CHECK: %[[X6:.*]] = tensor.collapse_shape %[[X]] {{\[\[}}0, 1], [2]] : tensor<2x3x16xf32> into tensor<6x16xf32>
// CHECK: %[[F:.*]]:2 = autopar.softmax_cross_entropy ins(%[[X6]], %[[Y6]] : tensor<6x16xf32>, tensor<6xi64>)
// CHECK: %[[P:.*]] = linalg.generic {{.*}} ins(%[[F]]#0, %[[Y6]] :
// CHECK-NOT: math.exp
// CHECK: return %[[P]] : tensor<6xf32>
#map1 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#map2 = affine_map<(d0, d1, d2) -> (d0, d1)>
#map3 = affine_map<(d0, d1) -> (d0, d1)>
#map4 = affine_map<(d0, d1) -> (d0)>
func.func @gpt_view(%5: tensor<2x3x16xf32>, %arg3: tensor<2x3xi64>) -> tensor<6xf32> {
    %cst_0 = arith.constant 0xFF800000 : f32
    %cst_1 = arith.constant 0.000000e+00 : f32
    %collapsed_2 = tensor.collapse_shape %arg3 [[0, 1]] : tensor<2x3xi64> into tensor<6xi64>
    %6 = tensor.empty() : tensor<2x3xf32>
    %7 = linalg.fill ins(%cst_0 : f32) outs(%6 : tensor<2x3xf32>) -> tensor<2x3xf32>
    %8 = linalg.generic {indexing_maps = [#map1, #map2], iterator_types = ["parallel", "parallel", "reduction"]} ins(%5 : tensor<2x3x16xf32>) outs(%7 : tensor<2x3xf32>) {
    ^bb0(%in: f32, %out: f32):
      %31 = arith.maximumf %in, %out : f32
      linalg.yield %31 : f32
    } -> tensor<2x3xf32>
    %9 = tensor.empty() : tensor<2x3x16xf32>
    %10 = linalg.generic {indexing_maps = [#map1, #map2, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%5, %8 : tensor<2x3x16xf32>, tensor<2x3xf32>) outs(%9 : tensor<2x3x16xf32>) {
    ^bb0(%in: f32, %in_5: f32, %out: f32):
      %31 = arith.subf %in, %in_5 : f32
      %32 = math.exp %31 : f32
      linalg.yield %32 : f32
    } -> tensor<2x3x16xf32>
    %11 = tensor.empty() : tensor<2x3xf32>
    %12 = linalg.fill ins(%cst_1 : f32) outs(%11 : tensor<2x3xf32>) -> tensor<2x3xf32>
    %13 = linalg.generic {indexing_maps = [#map1, #map2], iterator_types = ["parallel", "parallel", "reduction"]} ins(%10 : tensor<2x3x16xf32>) outs(%12 : tensor<2x3xf32>) {
    ^bb0(%in: f32, %out: f32):
      %31 = arith.addf %in, %out : f32
      linalg.yield %31 : f32
    } -> tensor<2x3xf32>
    %14 = tensor.empty() : tensor<2x3x16xf32>
    %15 = linalg.generic {indexing_maps = [#map1, #map2, #map2, #map1], iterator_types = ["parallel", "parallel", "parallel"]} ins(%5, %8, %13 : tensor<2x3x16xf32>, tensor<2x3xf32>, tensor<2x3xf32>) outs(%14 : tensor<2x3x16xf32>) {
    ^bb0(%in: f32, %in_5: f32, %in_6: f32, %out: f32):
      %31 = arith.subf %in, %in_5 : f32
      %32 = math.log %in_6 : f32
      %33 = arith.subf %31, %32 : f32
      linalg.yield %33 : f32
    } -> tensor<2x3x16xf32>
    %collapsed_3 = tensor.collapse_shape %15 [[0, 1], [2]] : tensor<2x3x16xf32> into tensor<6x16xf32>
    %16 = tensor.empty() : tensor<6xf32>
    %17 = linalg.fill ins(%cst_1 : f32) outs(%16 : tensor<6xf32>) -> tensor<6xf32>
    %18 = linalg.generic {indexing_maps = [#map3, #map4, #map4], iterator_types = ["parallel", "reduction"]} ins(%collapsed_3, %collapsed_2 : tensor<6x16xf32>, tensor<6xi64>) outs(%17 : tensor<6xf32>) {
    ^bb0(%in: f32, %in_5: i64, %out: f32):
      %31 = linalg.index 1 : index
      %32 = arith.index_cast %31 : index to i64
      %33 = arith.cmpi eq, %32, %in_5 : i64
      %34 = arith.select %33, %in, %cst_1 : f32
      %35 = arith.addf %out, %34 : f32
      linalg.yield %35 : f32
    } -> tensor<6xf32>
    return %18 : tensor<6xf32>
}

// -----

// A micro-batch's step, imported without canonicalization: each reduction's kept dim is
// expanded and dropped again before the exponentials and the log-probabilities read it.
// CHECK-LABEL: func.func @keep_dims
// CHECK-SAME: (%[[X:.*]]: tensor<8x64xf32>, %[[Y:.*]]: tensor<8xi64>)
// CHECK: %[[F:.*]]:2 = autopar.softmax_cross_entropy ins(%[[X]], %[[Y]] : tensor<8x64xf32>, tensor<8xi64>)
// CHECK-NOT: tensor.expand_shape
// CHECK-NOT: linalg.reduce
// CHECK-NOT: math.exp
// CHECK: return
func.func @keep_dims(%collapsed_73: tensor<8x64xf32>, %collapsed_74: tensor<8xi64>) -> tensor<8xf32> {
    %cst_75 = arith.constant 0xFF800000 : f32
    %138 = tensor.empty() : tensor<8xf32>
    %139 = linalg.fill ins(%cst_75 : f32) outs(%138 : tensor<8xf32>) -> tensor<8xf32>
    %reduced_76 = linalg.reduce ins(%collapsed_73 : tensor<8x64xf32>) outs(%139 : tensor<8xf32>) dimensions = [1] 
      (%in: f32, %init: f32) {
        %159 = arith.maximumf %in, %init : f32
        linalg.yield %159 : f32
      }
    %expanded_77 = tensor.expand_shape %reduced_76 [[0, 1]] output_shape [8, 1] : tensor<8xf32> into tensor<8x1xf32>
    %collapsed_78 = tensor.collapse_shape %expanded_77 [[0, 1]] : tensor<8x1xf32> into tensor<8xf32>
    %140 = tensor.empty() : tensor<8x64xf32>
    %141 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%collapsed_73, %collapsed_78 : tensor<8x64xf32>, tensor<8xf32>) outs(%140 : tensor<8x64xf32>) {
    ^bb0(%in: f32, %in_89: f32, %out: f32):
      %159 = arith.subf %in, %in_89 : f32
      %160 = math.exp %159 : f32
      linalg.yield %160 : f32
    } -> tensor<8x64xf32>
    %cst_79 = arith.constant 0.000000e+00 : f32
    %142 = tensor.empty() : tensor<8xf32>
    %143 = linalg.fill ins(%cst_79 : f32) outs(%142 : tensor<8xf32>) -> tensor<8xf32>
    %reduced_80 = linalg.reduce ins(%141 : tensor<8x64xf32>) outs(%143 : tensor<8xf32>) dimensions = [1] 
      (%in: f32, %init: f32) {
        %159 = arith.addf %in, %init : f32
        linalg.yield %159 : f32
      }
    %expanded_81 = tensor.expand_shape %reduced_80 [[0, 1]] output_shape [8, 1] : tensor<8xf32> into tensor<8x1xf32>
    %collapsed_82 = tensor.collapse_shape %expanded_77 [[0, 1]] : tensor<8x1xf32> into tensor<8xf32>
    %collapsed_83 = tensor.collapse_shape %expanded_81 [[0, 1]] : tensor<8x1xf32> into tensor<8xf32>
    %144 = tensor.empty() : tensor<8x64xf32>
    %145 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%collapsed_73, %collapsed_82, %collapsed_83 : tensor<8x64xf32>, tensor<8xf32>, tensor<8xf32>) outs(%144 : tensor<8x64xf32>) {
    ^bb0(%in: f32, %in_89: f32, %in_90: f32, %out: f32):
      %159 = arith.subf %in, %in_89 : f32
      %160 = math.log %in_90 : f32
      %161 = arith.subf %159, %160 : f32
      linalg.yield %161 : f32
    } -> tensor<8x64xf32>
    %cst_84 = arith.constant 0.000000e+00 : f32
    %146 = tensor.empty() : tensor<8xf32>
    %147 = linalg.fill ins(%cst_84 : f32) outs(%146 : tensor<8xf32>) -> tensor<8xf32>
    %148 = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%145, %collapsed_74 : tensor<8x64xf32>, tensor<8xi64>) outs(%147 : tensor<8xf32>) {
    ^bb0(%in: f32, %in_89: i64, %out: f32):
      %159 = linalg.index 1 : index
      %160 = arith.index_cast %159 : index to i64
      %161 = arith.cmpi eq, %160, %in_89 : i64
      %cst_90 = arith.constant 0.000000e+00 : f32
      %162 = arith.select %161, %in, %cst_90 : f32
      %163 = arith.addf %out, %162 : f32
      linalg.yield %163 : f32
    } -> tensor<8xf32>
    func.return %148 : tensor<8xf32>
}
