// autopar-add-cross-entropy-loss: F.cross_entropy's loss on a model that
// returns logits [positions..., classes]: a labels input, the max, the
// sum of exponentials and the picked logit per position, then the mean over
// the positions whose label is not ignore-index.
// RUN: autopar-opt %s -split-input-file -autopar-add-cross-entropy-loss="output=logits" -verify-diagnostics | FileCheck %s

// CHECK-DAG: #[[ALL:.*]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[POS:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[EACH:.*]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[SCALAR:.*]] = affine_map<(d0, d1) -> ()>
// CHECK-LABEL: func.func @main
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3x4xf32> {autopar.dtype = "float32", autopar.input = "x"}
// CHECK-SAME: %[[LABELS:[^:]*]]: tensor<2x3xi64> {autopar.dtype = "int64", autopar.input = "labels"}
// CHECK-SAME: -> (tensor<2x3x4xf32> {autopar.dtype = "float32", autopar.output = "logits"}, tensor<f32> {autopar.dtype = "float32", autopar.output = "loss"})
// CHECK: %[[MAX:.*]] = linalg.generic {indexing_maps = [#[[ALL]], #[[POS]]], iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : tensor<2x3x4xf32>)
// CHECK:   arith.maximumf
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[MAX]] :
// CHECK:   arith.subf
// CHECK:   math.exp
// CHECK: %[[PICK:.*]] = linalg.generic {{.*}} ins(%[[X]], %[[LABELS]] : tensor<2x3x4xf32>, tensor<2x3xi64>)
// CHECK:   %[[C:.*]] = linalg.index 2 : index
// CHECK:   %[[CI:.*]] = arith.index_cast %[[C]] : index to i64
// CHECK:   arith.cmpi eq, %[[CI]], %{{.*}} : i64
// CHECK: %[[TOTAL:.*]] = linalg.generic {indexing_maps = [#[[EACH]], #[[EACH]], #[[EACH]], #[[EACH]], #[[SCALAR]]], iterator_types = ["reduction", "reduction"]} ins(%[[MAX]], %[[SUM]], %[[PICK]], %[[LABELS]] :
// CHECK:   math.log
// CHECK:   %[[IGNORED:.*]] = arith.constant -100 : i64
// CHECK:   arith.cmpi ne, %{{.*}}, %[[IGNORED]] : i64
// CHECK: %[[COUNT:.*]] = linalg.generic {{.*}} ins(%[[LABELS]] : tensor<2x3xi64>)
// CHECK: %[[LOSS:.*]] = linalg.generic {{.*}} ins(%[[TOTAL]], %[[COUNT]] : tensor<f32>, tensor<f32>)
// CHECK:   arith.divf
// CHECK: return %[[X]], %[[LOSS]] : tensor<2x3x4xf32>, tensor<f32>
func.func @main(%x: tensor<2x3x4xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<2x3x4xf32> {autopar.dtype = "float32", autopar.output = "logits"}) {
  return %x : tensor<2x3x4xf32>
}

// -----

// expected-error @+1 {{--loss cross-entropy:logits: the model has no output of that name; its outputs are 'probs', 'features'}}
func.func @main(%x: tensor<2x4xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<2x4xf32> {autopar.output = "probs"}, tensor<2x4xf32> {autopar.output = "features"}) {
  return %x, %x : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// expected-error @+1 {{--loss cross-entropy:logits: 'logits' must be float logits [batch..., classes] of rank >= 2, but it is 'tensor<4xf32>'}}
func.func @main(%x: tensor<4xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<4xf32> {autopar.output = "logits"}) {
  return %x : tensor<4xf32>
}

// -----

// expected-error @+1 {{--loss cross-entropy:logits: the model already has an output named 'loss'; train it with --loss loss}}
func.func @main(%x: tensor<2x4xf32> {autopar.dtype = "float32", autopar.input = "x"})
    -> (tensor<2x4xf32> {autopar.output = "logits"}, tensor<f32> {autopar.output = "loss"}) {
  %c = arith.constant dense<0.0> : tensor<f32>
  return %x, %c : tensor<2x4xf32>, tensor<f32>
}

// -----

// expected-error @+1 {{--loss cross-entropy:logits: the model already has an input named 'labels', the name the added loss's targets take}}
func.func @main(%x: tensor<2x4xf32> {autopar.dtype = "float32", autopar.input = "x"},
                %y: tensor<2xi64> {autopar.dtype = "int64", autopar.input = "labels"})
    -> (tensor<2x4xf32> {autopar.output = "logits"}) {
  return %x : tensor<2x4xf32>
}
