// RUN: autopar-opt %s --autopar-approximate-math | FileCheck %s

// erf and tanh become plain arithmetic (no libm call survives), which the
// loop vectorizer handles; other math ops are left alone.
// CHECK-LABEL: func.func @gelu_parts
// CHECK-NOT: math.erf
// CHECK-NOT: math.tanh
// CHECK: arith.mulf
// CHECK: math.sqrt
func.func @gelu_parts(%x: f32) -> (f32, f32, f32) {
  %e = math.erf %x : f32
  %t = math.tanh %x : f32
  %s = math.sqrt %x : f32
  return %e, %t, %s : f32, f32, f32
}
