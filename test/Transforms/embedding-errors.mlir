// The autopar.embedding verifier: a result shape other than the ids' shape
// followed by the table's row shape, a result element type other than the
// table's, and num_rows < 1 are errors.
// RUN: autopar-opt %s --split-input-file --verify-diagnostics

func.func @shape(%t: tensor<8x4xf32>, %ids: tensor<2x3xi64>) -> tensor<2x4xf32> {
  // expected-error @+1 {{result shape must be the ids' shape followed by the table's row shape, 'tensor<2x3x4xf32>'}}
  %e = autopar.embedding %t[%ids] {num_rows = 8 : i64} : tensor<8x4xf32>, tensor<2x3xi64> -> tensor<2x4xf32>
  return %e : tensor<2x4xf32>
}

// -----

func.func @element_type(%t: tensor<8x4xf32>, %ids: tensor<3xi64>) -> tensor<3x4xf16> {
  // expected-error @+1 {{result element type 'f16' differs from the table's 'f32'}}
  %e = autopar.embedding %t[%ids] {num_rows = 8 : i64} : tensor<8x4xf32>, tensor<3xi64> -> tensor<3x4xf16>
  return %e : tensor<3x4xf16>
}

// -----

func.func @rows(%t: tensor<8x4xf32>, %ids: tensor<3xi64>) -> tensor<3x4xf32> {
  // expected-error @+1 {{num_rows must be >= 1, got 0}}
  %e = autopar.embedding %t[%ids] {num_rows = 0 : i64} : tensor<8x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
  return %e : tensor<3x4xf32>
}
