// autopar.embedding: the printed form parses back to the same op (with and
// without a row offset), and the verifier names what is wrong.
// RUN: autopar-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// RUN: autopar-opt %s -split-input-file -verify-diagnostics | autopar-opt -split-input-file | FileCheck %s

// CHECK-LABEL: func.func @lookup
// CHECK-SAME: (%[[T:.*]]: tensor<512x128xf32>, %[[IDS:.*]]: tensor<2x32xi64>)
// CHECK: %[[E:.*]] = autopar.embedding %[[T]][%[[IDS]]] {num_rows = 512 : i64} : tensor<512x128xf32>, tensor<2x32xi64> -> tensor<2x32x128xf32>
// CHECK: return %[[E]]
func.func @lookup(%t: tensor<512x128xf32>, %ids: tensor<2x32xi64>) -> tensor<2x32x128xf32> {
  %e = autopar.embedding %t[%ids] {num_rows = 512 : i64} : tensor<512x128xf32>, tensor<2x32xi64> -> tensor<2x32x128xf32>
  return %e : tensor<2x32x128xf32>
}

// -----

// A rank's slice of a vocabulary split over ranks: rows [offset, offset + 256).
// CHECK-LABEL: func.func @vocabulary_slice
// CHECK: autopar.embedding %{{.*}}[%{{.*}}] offset %{{.*}} {num_rows = 512 : i64} : tensor<256x128xf32>, tensor<2x32xi64> -> tensor<2x32x128xf32>
func.func @vocabulary_slice(%t: tensor<256x128xf32>, %ids: tensor<2x32xi64>, %offset: index) -> tensor<2x32x128xf32> {
  %e = autopar.embedding %t[%ids] offset %offset {num_rows = 512 : i64} : tensor<256x128xf32>, tensor<2x32xi64> -> tensor<2x32x128xf32>
  return %e : tensor<2x32x128xf32>
}

// -----

func.func @bad_shape(%t: tensor<512x128xf32>, %ids: tensor<2x32xi64>) -> tensor<2x128xf32> {
  // expected-error @+1 {{'autopar.embedding' op result shape must be the ids' shape followed by the table's row shape, 'tensor<2x32x128xf32>'}}
  %e = autopar.embedding %t[%ids] {num_rows = 512 : i64} : tensor<512x128xf32>, tensor<2x32xi64> -> tensor<2x128xf32>
  return %e : tensor<2x128xf32>
}

// -----

func.func @bad_element_type(%t: tensor<512x128xf32>, %ids: tensor<2xi64>) -> tensor<2x128xf16> {
  // expected-error @+1 {{'autopar.embedding' op result element type 'f16' differs from the table's 'f32'}}
  %e = autopar.embedding %t[%ids] {num_rows = 512 : i64} : tensor<512x128xf32>, tensor<2xi64> -> tensor<2x128xf16>
  return %e : tensor<2x128xf16>
}

// -----

func.func @bad_rows(%t: tensor<512x128xf32>, %ids: tensor<2xi64>) -> tensor<2x128xf32> {
  // expected-error @+1 {{'autopar.embedding' op num_rows must be >= 1, got 0}}
  %e = autopar.embedding %t[%ids] {num_rows = 0 : i64} : tensor<512x128xf32>, tensor<2xi64> -> tensor<2x128xf32>
  return %e : tensor<2x128xf32>
}

// -----

func.func @bad_table(%t: tensor<f32>, %ids: tensor<2xi64>) -> tensor<2xf32> {
  // expected-error @+1 {{'autopar.embedding' op table must have rank >= 1}}
  %e = autopar.embedding %t[%ids] {num_rows = 1 : i64} : tensor<f32>, tensor<2xi64> -> tensor<2xf32>
  return %e : tensor<2xf32>
}
