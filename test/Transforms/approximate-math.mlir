// autopar-approximate-math: erf, tanh and exp become polynomials in plain
// arithmetic (no libm call survives, so the loop vectorizer handles them);
// other math ops (sqrt, log) are left alone.
// RUN: autopar-opt %s --autopar-approximate-math -split-input-file | FileCheck %s

// exp: the input clamped (cmpf, select), a range reduction x = k ln2 + r
// (floor), a polynomial in r (fma), and 2^k built in the exponent bits
// (fptosi, shli, bitcast).
// CHECK-LABEL: func.func @exp
// CHECK-NOT: math.exp
// CHECK: arith.cmpf
// CHECK: arith.select
// CHECK: math.floor
// CHECK: math.fma
// CHECK: arith.fptosi
// CHECK: arith.shli
// CHECK: arith.bitcast
// CHECK-NOT: math.exp
// CHECK: return
func.func @exp(%x: f32) -> f32 {
  %e = math.exp %x : f32
  return %e : f32
}

// -----

// erf: a rational polynomial, no math.erf left.
// CHECK-LABEL: func.func @erf
// CHECK-NOT: math.erf
// CHECK: arith.divf
// CHECK-NOT: math.erf
// CHECK: return
func.func @erf(%x: f32) -> f32 {
  %e = math.erf %x : f32
  return %e : f32
}

// -----

// tanh: approximated too (no math.tanh left).
// CHECK-LABEL: func.func @tanh
// CHECK-NOT: math.tanh
// CHECK: arith.divf
// CHECK-NOT: math.tanh
// CHECK: return
func.func @tanh(%x: f32) -> f32 {
  %t = math.tanh %x : f32
  return %t : f32
}

// -----

// Ops without an approximation here are left to LLVM.
// CHECK-LABEL: func.func @untouched
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK-NEXT: %[[S:.*]] = math.sqrt %[[X]] : f32
// CHECK-NEXT: %[[L:.*]] = math.log %[[X]] : f32
// CHECK-NEXT: return %[[S]], %[[L]]
func.func @untouched(%x: f32) -> (f32, f32) {
  %s = math.sqrt %x : f32
  %l = math.log %x : f32
  return %s, %l : f32, f32
}
