// autopar-gpu-wrap-sequential-code: host memory accesses outside parallel
// loops move, in order, into one-iteration scf.parallel groups that calls end;
// a scalar used later is spilled to a device buffer, a host loop stays on the
// host; a value the host needs from device memory is an error.
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-gpu-wrap-sequential-code))' --split-input-file --verify-diagnostics | FileCheck %s

// A full reduction to a scalar (what convert-linalg-to-parallel-loops makes
// of ReduceSum to a rank-0 output) is a fill and a sequential loop on the
// host: both move, in order, into one one-iteration scf.parallel (a
// one-thread kernel after the GPU mapping). The parallel loop, allocation
// and constants stay where they are.
// CHECK-LABEL: func.func @full_reduction
// CHECK-SAME: (%[[X:.*]]: memref<4xf32>, %[[S:.*]]: memref<f32>)
// CHECK-DAG: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step
// CHECK: memref.store %[[ZERO]], %[[X]]
// CHECK: scf.reduce
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : index
// CHECK: scf.parallel (%{{.*}}) = (%[[C0]]) to (%[[C1]]) step (%[[C1]]) {
// CHECK-NEXT: memref.store %[[ZERO]], %[[S]][]
// CHECK-NEXT: scf.for
// CHECK: memref.load %[[X]]
// CHECK: memref.store %{{.*}}, %[[S]][]
// CHECK: }
// CHECK-NEXT: scf.reduce
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @full_reduction(%x: memref<4xf32>, %s: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    memref.store %zero, %x[%i] : memref<4xf32>
    scf.reduce
  }
  memref.store %zero, %s[] : memref<f32>
  scf.for %i = %c0 to %c4 step %c1 {
    %a = memref.load %x[%i] : memref<4xf32>
    %acc = memref.load %s[] : memref<f32>
    %sum = arith.addf %a, %acc : f32
    memref.store %sum, %s[] : memref<f32>
  }
  return
}

// -----

// A call (a GEMM kernel, a collective) reads and writes buffers on the
// device too: it ends a group, so memory accesses keep their order. A value
// loaded and used only inside the group moves with it.
// CHECK-LABEL: func.func @groups
// CHECK: scf.parallel
// CHECK-NEXT: %[[V:.*]] = memref.load %{{.*}}[] : memref<f32>
// CHECK-NEXT: %[[W:.*]] = arith.addf %[[V]], %[[V]] : f32
// CHECK-NEXT: memref.store %[[W]], %{{.*}}[] : memref<f32>
// CHECK-NEXT: scf.reduce
// CHECK: call @kernel
// CHECK: scf.parallel
// CHECK-NEXT: memref.copy
// CHECK-NEXT: scf.reduce
// CHECK: memref.dealloc
func.func private @kernel(memref<f32>)
func.func @groups(%a: memref<f32>, %b: memref<f32>) {
  %v = memref.load %a[] : memref<f32>
  %w = arith.addf %v, %v : f32
  memref.store %w, %b[] : memref<f32>
  call @kernel(%b) : (memref<f32>) -> ()
  %t = memref.alloc() : memref<f32>
  memref.copy %b, %t : memref<f32> to memref<f32>
  memref.dealloc %t : memref<f32>
  return
}

// -----

// Host code that needs a value read from a buffer (here as an allocation
// size) cannot run on the GPU's data: a clear error instead of a crash.
func.func @data_dependent_shape(%n: memref<index>) {
  // expected-error @+1 {{the host code needs this value, which is computed from device memory (used by memref.alloc)}}
  %size = memref.load %n[] : memref<index>
  %buf = memref.alloc(%size) : memref<?xf32>
  memref.dealloc %buf : memref<?xf32>
  return
}

// -----

// A scalar computed from device memory on the host side of the program
// (Adam's bias correction from the step counter) is computed in a
// one-thread kernel, stored into a device scalar, and loaded again inside
// the kernel that uses it; the scalar is freed at the end of the block.
// CHECK-LABEL: func.func @spilled_scalar
// CHECK-SAME: (%[[STEP:.*]]: memref<i64>, %[[P:.*]]: memref<4xf32>)
// CHECK: %[[SPILL:.*]] = memref.alloc() : memref<f32>
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step
// CHECK-NEXT: %[[S:.*]] = memref.load %[[STEP]][] : memref<i64>
// CHECK-NEXT: %[[F:.*]] = arith.sitofp %[[S]] : i64 to f32
// CHECK-NEXT: %[[POW:.*]] = math.powf %{{.*}}, %[[F]] : f32
// CHECK-NEXT: memref.store %[[POW]], %[[SPILL]][] : memref<f32>
// CHECK-NEXT: scf.reduce
// CHECK: %[[T:.*]] = memref.alloc() : memref<4xf32>
// CHECK: scf.parallel (%[[I:.*]]) =
// CHECK-NEXT: %[[B:.*]] = memref.load %[[SPILL]][] : memref<f32>
// CHECK-NEXT: %[[V:.*]] = memref.load %[[P]][%[[I]]]
// CHECK-NEXT: %[[W:.*]] = arith.mulf %[[V]], %[[B]] : f32
// CHECK-NEXT: memref.store %[[W]], %[[T]][%[[I]]]
// CHECK: memref.dealloc %[[T]]
// CHECK-NEXT: memref.dealloc %[[SPILL]]
// CHECK-NEXT: return
func.func @spilled_scalar(%step: memref<i64>, %p: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %beta = arith.constant 0.9 : f32
  %s = memref.load %step[] : memref<i64>
  %f = arith.sitofp %s : i64 to f32
  %b = math.powf %beta, %f : f32
  %t = memref.alloc() : memref<4xf32>
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    %v = memref.load %p[%i] : memref<4xf32>
    %w = arith.mulf %v, %b : f32
    memref.store %w, %t[%i] : memref<4xf32>
    scf.reduce
  }
  memref.dealloc %t : memref<4xf32>
  return
}

// -----

// A host loop that calls kernels (gradient accumulation's loop over
// micro-batches) stays on the host; the memory accesses in its body are
// wrapped there, in order with the call.
// CHECK-LABEL: func.func @host_loop
// CHECK-SAME: (%[[A:.*]]: memref<3xf32>, %[[S:.*]]: memref<f32>)
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK: scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step
// CHECK-NEXT: %[[V:.*]] = memref.load %[[A]][%[[I]]] : memref<3xf32>
// CHECK-NEXT: memref.store %[[V]], %[[S]][] : memref<f32>
// CHECK-NEXT: scf.reduce
// CHECK: call @kernel(%[[S]])
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func private @kernel(memref<f32>)
func.func @host_loop(%a: memref<3xf32>, %s: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  scf.for %i = %c0 to %c3 step %c1 {
    %v = memref.load %a[%i] : memref<3xf32>
    memref.store %v, %s[] : memref<f32>
    func.call @kernel(%s) : (memref<f32>) -> ()
  }
  return
}

// -----

// A host loop whose trip count is read from device memory cannot run.
func.func private @kernel(memref<f32>)
func.func @device_bound(%n: memref<index>, %s: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error @+1 {{the host code needs this value, which is computed from device memory (used by scf.for)}}
  %bound = memref.load %n[] : memref<index>
  scf.for %i = %c0 to %bound step %c1 {
    func.call @kernel(%s) : (memref<f32>) -> ()
  }
  return
}
