// @main becomes one module per pipeline stage, each with its own @main.
// RUN: autopar-opt %s --split-input-file --autopar-split-pipeline-stages | FileCheck %s

// Two stages: stage 0 takes the input and its parameter and sends the hidden
// activation; stage 1 receives it and returns the output.

// CHECK-LABEL: module @stage0
// CHECK-SAME:    autopar.stage = 0 : i64
// CHECK:       func.func @main(
// CHECK-SAME:    %[[W0:.*]]: tensor<2x4xf32> {autopar.dtype = "float32", autopar.parameter = "w0"}
// CHECK-SAME:    %[[X:.*]]: tensor<2x4xf32> {autopar.dtype = "float32", autopar.input = "x"}
// CHECK-SAME:    -> (tensor<2x4xf32> {autopar.activation_out = "fc0", autopar.dtype = "float32", autopar.peer_stage = 1 : i64})
// CHECK:         %[[H:.*]] = arith.mulf %[[X]], %[[W0]]
// CHECK:         return %[[H]]
// CHECK-LABEL: module @stage1
// CHECK-SAME:    autopar.stage = 1 : i64
// CHECK:       func.func @main(
// CHECK-SAME:    %[[W1:.*]]: tensor<2x4xf32> {autopar.dtype = "float32", autopar.parameter = "w1"}
// CHECK-SAME:    %[[A:.*]]: tensor<2x4xf32> {autopar.activation_in = "fc0", autopar.dtype = "float32", autopar.peer_stage = 0 : i64}
// CHECK-SAME:    -> (tensor<2x4xf32> {autopar.dtype = "float32", autopar.output = "y"})
// CHECK:         %[[Y:.*]] = arith.addf %[[A]], %[[W1]]
// CHECK:         return %[[Y]]
module {
  func.func @main(%w0: tensor<2x4xf32> {autopar.dtype = "float32", autopar.parameter = "w0"},
                  %w1: tensor<2x4xf32> {autopar.dtype = "float32", autopar.parameter = "w1"},
                  %x: tensor<2x4xf32> {autopar.dtype = "float32", autopar.input = "x"})
      -> (tensor<2x4xf32> {autopar.dtype = "float32", autopar.output = "y"}) {
    %h = arith.mulf %x, %w0 {autopar.stage = 0 : i64} : tensor<2x4xf32> loc("fc0")
    %y = arith.addf %h, %w1 {autopar.stage = 1 : i64} : tensor<2x4xf32> loc("fc1")
    return %y : tensor<2x4xf32>
  }
}

// -----

// Three stages. %h (stage 0) is needed by stage 2, so stage 1 forwards it;
// the input %x goes straight to stage 2, which uses it too; constants are
// cloned into the stages that use them; the early output %e comes from stage
// 0, and so does an input returned as an output; a value a region captures
// (%e) crosses like an operand; two values from one ONNX node get distinct
// names.

// CHECK-LABEL: module @stage0
// CHECK:       func.func @main(%[[X:.*]]: tensor<4xf32> {autopar.dtype = "float32", autopar.input = "x"})
// CHECK-SAME:    -> (tensor<4xf32> {autopar.activation_out = "n", autopar.dtype = "float32", autopar.peer_stage = 1 : i64},
// CHECK-SAME:        tensor<4xi64> {autopar.activation_out = "n#1", autopar.dtype = "int64", autopar.peer_stage = 1 : i64},
// CHECK-SAME:        tensor<4xf32> {autopar.activation_out = "early", autopar.dtype = "float32", autopar.peer_stage = 1 : i64},
// CHECK-SAME:        tensor<4xf32> {autopar.dtype = "float32", autopar.output = "early"},
// CHECK-SAME:        tensor<4xf32> {autopar.dtype = "float32", autopar.output = "same"})
// CHECK:         %[[C:.*]] = arith.constant dense<2.0
// CHECK-NOT:     arith.constant
// CHECK:         %[[H:.*]] = arith.mulf %[[X]], %[[C]]
// CHECK:         %[[I:.*]] = arith.fptosi %[[H]]
// CHECK:         %[[E:.*]] = arith.negf %[[H]]
// CHECK:         return %[[H]], %[[I]], %[[E]], %[[E]], %[[X]]

// CHECK-LABEL: module @stage1
// CHECK:       func.func @main(
// CHECK-SAME:    %[[H1:[^:]*]]: tensor<4xf32> {autopar.activation_in = "n", autopar.dtype = "float32", autopar.peer_stage = 0 : i64}
// CHECK-SAME:    %[[I1:[^:]*]]: tensor<4xi64> {autopar.activation_in = "n#1", autopar.dtype = "int64", autopar.peer_stage = 0 : i64}
// CHECK-SAME:    %[[E1:[^:]*]]: tensor<4xf32> {autopar.activation_in = "early", autopar.dtype = "float32", autopar.peer_stage = 0 : i64}
// CHECK-SAME:    -> (tensor<4xf32> {autopar.activation_out = "n", autopar.dtype = "float32", autopar.peer_stage = 2 : i64},
// CHECK-SAME:        tensor<4xf32> {autopar.activation_out = "g", autopar.dtype = "float32", autopar.peer_stage = 2 : i64})
// CHECK-DAG:     %[[C1:.*]] = arith.constant dense<2.0
// CHECK-DAG:     %[[IDX:.*]] = arith.constant 0 : index
// CHECK:         %[[G:.*]] = linalg.generic
// CHECK-SAME:      ins(%[[I1]] : tensor<4xi64>)
// CHECK:           tensor.extract %[[E1]][%[[IDX]]]
// CHECK:         arith.mulf %[[G]], %[[C1]]
// CHECK:         return %[[H1]], %[[G]]

// CHECK-LABEL: module @stage2
// CHECK:       func.func @main(
// CHECK-SAME:    %[[X2:[^:]*]]: tensor<4xf32> {autopar.dtype = "float32", autopar.input = "x"}
// CHECK-SAME:    %[[H2:[^:]*]]: tensor<4xf32> {autopar.activation_in = "n", autopar.dtype = "float32", autopar.peer_stage = 1 : i64}
// CHECK-SAME:    %[[G2:[^:]*]]: tensor<4xf32> {autopar.activation_in = "g", autopar.dtype = "float32", autopar.peer_stage = 1 : i64}
// CHECK-SAME:    -> (tensor<4xf32> {autopar.dtype = "float32", autopar.output = "y"})
// CHECK-NOT:     arith.constant
// CHECK:         %[[S:.*]] = arith.addf %[[H2]], %[[G2]]
// CHECK:         %[[Y:.*]] = arith.subf %[[S]], %[[X2]]
// CHECK:         return %[[Y]]
#id = affine_map<(d0) -> (d0)>
module {
  func.func @main(%x: tensor<4xf32> {autopar.dtype = "float32", autopar.input = "x"})
      -> (tensor<4xf32> {autopar.dtype = "float32", autopar.output = "y"},
          tensor<4xf32> {autopar.dtype = "float32", autopar.output = "early"},
          tensor<4xf32> {autopar.dtype = "float32", autopar.output = "same"}) {
    %c = arith.constant dense<2.0> : tensor<4xf32>
    %c0 = arith.constant 0 : index
    %init = tensor.empty() : tensor<4xf32>
    %h = arith.mulf %x, %c {autopar.stage = 0 : i64} : tensor<4xf32> loc("n")
    %i = arith.fptosi %h {autopar.stage = 0 : i64} : tensor<4xf32> to tensor<4xi64> loc("n")
    %e = arith.negf %h {autopar.stage = 0 : i64} : tensor<4xf32> loc("early")
    %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%i : tensor<4xi64>) outs(%init : tensor<4xf32>) attrs = {autopar.stage = 1 : i64} {
    ^bb0(%in: i64, %out: f32):
      %f = arith.sitofp %in : i64 to f32
      %v = tensor.extract %e[%c0] : tensor<4xf32>
      %a = arith.addf %f, %v : f32
      linalg.yield %a : f32
    } -> tensor<4xf32> loc("g")
    %t = arith.mulf %g, %c {autopar.stage = 1 : i64} : tensor<4xf32> loc("unused")
    %sum = arith.addf %h, %g {autopar.stage = 2 : i64} : tensor<4xf32> loc("sum")
    %y = arith.subf %sum, %x {autopar.stage = 2 : i64} : tensor<4xf32> loc("y")
    return %y, %e, %x : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}
