// autopar-record-argument-shapes: @main's static memref argument shapes are
// recorded for autopar-emit-packed-entry; an argument the runtime cannot
// pass as a dense buffer is an error naming it.
// RUN: autopar-opt %s -split-input-file -autopar-record-argument-shapes -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @main
// CHECK-SAME: autopar.arg_shapes = [array<i64: 2, 3>, array<i64>, array<i64: 4>]
func.func @main(%a: memref<2x3xf32>, %s: memref<f32>, %out: memref<4xi64>) {
  return
}

// -----

// expected-error @+1 {{argument #1 of @main has type 'memref<?xf32>', not a static, row-major memref}}
func.func @main(%a: memref<2xf32>, %b: memref<?xf32>) {
  return
}

// -----

// expected-error @+1 {{argument #0 of @main has type 'memref<4x4xf32, strided<[8, 1]>>', not a static, row-major memref}}
func.func @main(%a: memref<4x4xf32, strided<[8, 1]>>) {
  return
}

// -----

// expected-error @+1 {{no func.func @main to lower}}
module {
  func.func @other() {
    return
  }
}
