// autopar-approximate-math: f32 erf, tanh and exp (scalar or vector) become
// polynomials in plain arithmetic (no libm call survives, so the loop
// vectorizer handles them); f64 exp and other math ops (sqrt, log) are left.
// RUN: autopar-opt %s --autopar-approximate-math -split-input-file | FileCheck %s

// exp (f32): the input clamped to [-87.8, 88.8]; k = floor(x log2(e) + 1/2)
// clamped to [-127, 127]; r = x - k ln2 in two fmas (ln2 split into a high and
// a low part); exp(r) = 1 + r + r^2 p(r) with p in Horner form (fma); 2^k
// built in the exponent bits ((k + 127) << 23); the result exp(r) * 2^k.
// CHECK-LABEL: func.func @exp
// CHECK-SAME: (%[[X:.*]]: f32) -> f32
// CHECK-DAG: %[[BIAS:.*]] = arith.constant 127 : i32
// CHECK-DAG: %[[MANT:.*]] = arith.constant 23 : i32
// CHECK-DAG: %[[KMAX:.*]] = arith.constant 1.270000e+02 : f32
// CHECK-DAG: %[[KMIN:.*]] = arith.constant -1.270000e+02 : f32
// CHECK-DAG: %[[XMAX:.*]] = arith.constant 8.880000e+01 : f32
// CHECK-DAG: %[[XMIN:.*]] = arith.constant -8.780000e+01 : f32
// CHECK-DAG: %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG: %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG: %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// CHECK-DAG: %[[NEG_LN2_HI:.*]] = arith.constant -0.693359375 : f32
// CHECK-DAG: %[[LN2_LO:.*]] = arith.constant 2.12194442E-4 : f32
// CHECK-DAG: %[[P5:.*]] = arith.constant 1.98756912E-4 : f32
// CHECK-DAG: %[[P4:.*]] = arith.constant 0.00139819994 : f32
// CHECK-DAG: %[[P3:.*]] = arith.constant 0.00833345205 : f32
// CHECK-DAG: %[[P2:.*]] = arith.constant 0.0416657962 : f32
// CHECK-DAG: %[[P1:.*]] = arith.constant 0.166666657 : f32
// CHECK: %[[GE:.*]] = arith.cmpf uge, %[[X]], %[[XMIN]] : f32
// CHECK-NEXT: %[[XLO:.*]] = arith.select %[[GE]], %[[X]], %[[XMIN]] : f32
// CHECK-NEXT: %[[LE:.*]] = arith.cmpf ule, %[[XLO]], %[[XMAX]] : f32
// CHECK-NEXT: %[[XC:.*]] = arith.select %[[LE]], %[[XLO]], %[[XMAX]] : f32
// CHECK-NEXT: %[[T:.*]] = math.fma %[[XC]], %[[LOG2E]], %[[HALF]] : f32
// CHECK-NEXT: %[[KF:.*]] = math.floor %[[T]] : f32
// CHECK-NEXT: %[[KGE:.*]] = arith.cmpf uge, %[[KF]], %[[KMIN]] : f32
// CHECK-NEXT: %[[KLO:.*]] = arith.select %[[KGE]], %[[KF]], %[[KMIN]] : f32
// CHECK-NEXT: %[[KLE:.*]] = arith.cmpf ule, %[[KLO]], %[[KMAX]] : f32
// CHECK-NEXT: %[[K:.*]] = arith.select %[[KLE]], %[[KLO]], %[[KMAX]] : f32
// CHECK-NEXT: %[[R0:.*]] = math.fma %[[NEG_LN2_HI]], %[[K]], %[[XC]] : f32
// CHECK-NEXT: %[[R:.*]] = math.fma %[[LN2_LO]], %[[K]], %[[R0]] : f32
// CHECK-NEXT: %[[H4:.*]] = math.fma %[[R]], %[[P5]], %[[P4]] : f32
// CHECK-NEXT: %[[H3:.*]] = math.fma %[[H4]], %[[R]], %[[P3]] : f32
// CHECK-NEXT: %[[H2:.*]] = math.fma %[[H3]], %[[R]], %[[P2]] : f32
// CHECK-NEXT: %[[H1:.*]] = math.fma %[[H2]], %[[R]], %[[P1]] : f32
// CHECK-NEXT: %[[H0:.*]] = math.fma %[[H1]], %[[R]], %[[HALF]] : f32
// CHECK-NEXT: %[[RR:.*]] = arith.mulf %[[R]], %[[R]] : f32
// CHECK-NEXT: %[[Q:.*]] = math.fma %[[H0]], %[[RR]], %[[R]] : f32
// CHECK-NEXT: %[[EXPR:.*]] = arith.addf %[[Q]], %[[ONE]] : f32
// CHECK-NEXT: %[[KI:.*]] = arith.fptosi %[[K]] : f32 to i32
// CHECK-NEXT: %[[EXPONENT:.*]] = arith.addi %[[KI]], %[[BIAS]] : i32
// CHECK-NEXT: %[[BITS:.*]] = arith.shli %[[EXPONENT]], %[[MANT]] : i32
// CHECK-NEXT: %[[POW2K:.*]] = arith.bitcast %[[BITS]] : i32 to f32
// CHECK-NEXT: %[[E:.*]] = arith.mulf %[[EXPR]], %[[POW2K]] : f32
// CHECK-NEXT: return %[[E]] : f32
func.func @exp(%x: f32) -> f32 {
  %e = math.exp %x : f32
  return %e : f32
}

// -----

// exp of a vector (a vectorized loop body) is approximated in vector
// arithmetic, lane by lane.
// CHECK-LABEL: func.func @exp_vector
// CHECK-SAME: (%[[X:.*]]: vector<8xf32>) -> vector<8xf32>
// CHECK-NOT: math.exp
// CHECK: arith.cmpf uge, %[[X]], %{{.*}} : vector<8xf32>
// CHECK: math.floor %{{.*}} : vector<8xf32>
// CHECK: arith.shli %{{.*}}, %{{.*}} : vector<8xi32>
// CHECK: %[[POW2K:.*]] = arith.bitcast %{{.*}} : vector<8xi32> to vector<8xf32>
// CHECK-NEXT: %[[E:.*]] = arith.mulf %{{.*}}, %[[POW2K]] : vector<8xf32>
// CHECK-NEXT: return %[[E]] : vector<8xf32>
func.func @exp_vector(%x: vector<8xf32>) -> vector<8xf32> {
  %e = math.exp %x : vector<8xf32>
  return %e : vector<8xf32>
}

// -----

// The approximation is f32 only: an f64 exp is left to libm.
// CHECK-LABEL: func.func @exp_f64
// CHECK-SAME: (%[[X:.*]]: f64)
// CHECK-NEXT: %[[E:.*]] = math.exp %[[X]] : f64
// CHECK-NEXT: return %[[E]]
func.func @exp_f64(%x: f64) -> f64 {
  %e = math.exp %x : f64
  return %e : f64
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
