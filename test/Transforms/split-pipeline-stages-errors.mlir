// Programs that cannot be split into pipeline stages are errors naming the op.
// RUN: autopar-opt %s --split-input-file --verify-diagnostics --autopar-split-pipeline-stages

// Stage 0 uses a value that stage 1 computes.
module {
  func.func @main(%x: tensor<4xf32> {autopar.dtype = "float32", autopar.input = "x"}) -> tensor<4xf32> {
    // expected-note @below {{computed here}}
    %a = arith.negf %x {autopar.stage = 1 : i64} : tensor<4xf32>
    // expected-error @below {{autopar-split-pipeline-stages: op of stage 0 uses a value computed in stage 1; stages must not decrease along def-use chains}}
    %b = arith.addf %a, %x {autopar.stage = 0 : i64} : tensor<4xf32>
    return %b : tensor<4xf32>
  }
}

// -----

module {
  func.func @main(%x: tensor<4xf32> {autopar.dtype = "float32", autopar.input = "x"}) -> tensor<4xf32> {
    // expected-error @below {{autopar-split-pipeline-stages: op has no integer 'autopar.stage' (run autopar-plan first)}}
    %a = arith.negf %x : tensor<4xf32>
    return %a : tensor<4xf32>
  }
}

// -----

module {
  func.func @main(%x: tensor<4xf32> {autopar.dtype = "float32", autopar.input = "x"}) -> tensor<4xf32> {
    // expected-error @below {{autopar-split-pipeline-stages: 'autopar.stage' is -1, stages count from 0}}
    %a = arith.negf %x {autopar.stage = -1 : i64} : tensor<4xf32>
    return %a : tensor<4xf32>
  }
}

// -----

// Stages exchange tensors, not scalars.
module {
  func.func @main(%x: tensor<4xf32> {autopar.dtype = "float32", autopar.input = "x"}) -> f32 {
    %c0 = arith.constant 0 : index
    // expected-error @below {{autopar-split-pipeline-stages: a value of type 'f32' is needed in stage 1, but stages exchange only statically shaped tensors of float, integer or bool elements}}
    %a = tensor.extract %x[%c0] {autopar.stage = 0 : i64} : tensor<4xf32>
    %b = arith.negf %a {autopar.stage = 1 : i64} : f32
    return %b : f32
  }
}

// -----

// expected-error @below {{autopar-split-pipeline-stages: no func.func @main with a body to split}}
module {
  func.func private @main(tensor<4xf32>) -> tensor<4xf32>
}
