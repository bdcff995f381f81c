// autopar-outline-loop-nests: each top-level loop nest without results becomes
// a call to an internal noinline @<func>_loop<N> (constants cloned in), whose
// autopar.noalias_pointer_args autopar-mark-noalias turns into llvm.noalias
// after lowering to LLVM; loops with results stay.
// RUN: autopar-opt %s --autopar-outline-loop-nests -split-input-file | FileCheck %s
// RUN: autopar-opt %s --autopar-outline-loop-nests --convert-scf-to-cf \
// RUN:   --finalize-memref-to-llvm --convert-arith-to-llvm --convert-func-to-llvm \
// RUN:   --autopar-mark-noalias --reconcile-unrealized-casts -split-input-file \
// RUN:   | FileCheck %s --check-prefix=LLVM

// Each top-level loop nest becomes a call; constants (the bounds) are cloned
// into the new function, everything else it reads is an argument. A buffer
// that only one argument views is noalias; two views of one buffer are not.

// CHECK-LABEL: func.func @main(
// CHECK-SAME:    %[[A:.*]]: memref<4x8xf32>, %[[O:.*]]: memref<4x8xf32>)
// CHECK:         %[[T:.*]] = memref.alloc() : memref<4x8xf32>
// CHECK-NEXT:    call @main_loop0(%[[A]], %[[T]]) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
// CHECK:         %[[V:.*]] = memref.subview %[[T]][0, 0]
// CHECK:         %[[W:.*]] = memref.subview %[[T]][2, 0]
// CHECK-NEXT:    call @main_loop1(%[[V]], %[[W]], %[[O]])
// CHECK-NOT:     scf.for
// CHECK:         memref.dealloc %[[T]]

// CHECK-LABEL: func.func private @main_loop1(
// CHECK-SAME:    %{{.*}}: memref<2x8xf32, strided<[8, 1]>>, %{{.*}}: memref<2x8xf32, strided<[8, 1], offset: 16>>, %{{.*}}: memref<4x8xf32>)
// CHECK-SAME:    attributes {autopar.noalias_pointer_args = array<i64: 15>, llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]}
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C4:.*]] = arith.constant 4 : index
// CHECK:         scf.for %{{.*}} = %[[C0]] to %[[C4]]

// CHECK-LABEL: func.func private @main_loop0(
// CHECK-SAME:    attributes {autopar.noalias_pointer_args = array<i64: 1, 8>,
// CHECK:         scf.for
// CHECK:           scf.for

// LLVM-LABEL: llvm.func @main(
// LLVM-LABEL: llvm.func internal @main_loop1(
// LLVM-SAME:    %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: i64,
// LLVM-SAME:    %{{[^:]*}}: !llvm.ptr {llvm.noalias}, %{{[^:]*}}: i64, %{{[^:]*}}: i64, %{{[^:]*}}: i64, %{{[^:]*}}: i64, %{{[^:]*}}: i64)
// LLVM-SAME:    passthrough = ["noinline"]
// LLVM-NOT:     autopar.noalias_pointer_args
// LLVM-LABEL: llvm.func internal @main_loop0(
// LLVM-SAME:    %{{[^:]*}}: !llvm.ptr, %{{[^:]*}}: !llvm.ptr {llvm.noalias}, %{{[^:]*}}: i64,

func.func @main(%a: memref<4x8xf32>, %o: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %t = memref.alloc() : memref<4x8xf32>
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      %x = memref.load %a[%i, %j] : memref<4x8xf32>
      memref.store %x, %t[%i, %j] : memref<4x8xf32>
    }
  }
  %v = memref.subview %t[0, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1]>>
  %w = memref.subview %t[2, 0] [2, 8] [1, 1] : memref<4x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 16>>
  scf.for %i = %c0 to %c4 step %c1 {
    %x = memref.load %v[%c0, %i] : memref<2x8xf32, strided<[8, 1]>>
    memref.store %x, %w[%c1, %i] : memref<2x8xf32, strided<[8, 1], offset: 16>>
    memref.store %x, %o[%c1, %i] : memref<4x8xf32>
  }
  memref.dealloc %t : memref<4x8xf32>
  return
}

// -----

// A loop carrying values out (iter_args) and nested loops stay where they
// are; only top-level nests without results move.

// CHECK-LABEL: func.func @reduction(
// CHECK:         %[[S:.*]] = scf.for {{.*}} iter_args
// CHECK:         return %[[S]]
// CHECK-NOT:   func.func private @reduction_loop
// LLVM-LABEL:  llvm.func @reduction(
func.func @reduction(%a: memref<8xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %z = arith.constant 0.0 : f32
  %s = scf.for %i = %c0 to %c8 step %c1 iter_args(%acc = %z) -> f32 {
    %x = memref.load %a[%i] : memref<8xf32>
    %y = arith.addf %acc, %x : f32
    scf.yield %y : f32
  }
  return %s : f32
}

// -----

// A nest whose loop autopar-linalg-to-loops marked, with enough work (64
// iterations of 4096 elements), takes the range of that loop's iterations
// as two more arguments and runs lb + first * step up to
// min(lb + last * step, ub); the call passes the whole range. The loop
// around it runs once. Marks with too little work, or under a loop of two
// iterations, give plain calls.

// CHECK-LABEL: func.func @parallel(
// CHECK:         arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    %[[FROM:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[TO:.*]] = arith.constant 64 : index
// CHECK-NEXT:    call @parallel_loop0(%{{.*}}, %[[FROM]], %[[TO]]) : (memref<1x64x4096xf32>, index, index) -> ()
// CHECK:         call @parallel_loop1(%{{.*}}) : (memref<1x64x4096xf32>) -> ()
// CHECK:         call @parallel_loop2(%{{.*}}) : (memref<1x64x4096xf32>) -> ()

// CHECK-LABEL: func.func private @parallel_loop2(
// CHECK-NOT:     autopar.parallel_range
// CHECK-LABEL: func.func private @parallel_loop1(
// CHECK-NOT:     autopar.parallel_range
// CHECK-LABEL: func.func private @parallel_loop0(
// CHECK-SAME:    %[[A:[^:]*]]: memref<1x64x4096xf32>, %[[FIRST:[^:]*]]: index, %[[LAST:[^:]*]]: index)
// CHECK-SAME:    autopar.parallel_range = array<i64: 64, 4096>
// CHECK:         scf.for
// CHECK:           %[[F:.*]] = arith.muli %[[FIRST]], %[[STEP:.*]] : index
// CHECK-NEXT:      %[[BEGIN:.*]] = arith.addi %[[LB:.*]], %[[F]] : index
// CHECK-NEXT:      %[[L:.*]] = arith.muli %[[LAST]], %[[STEP]] : index
// CHECK-NEXT:      %[[E:.*]] = arith.addi %[[LB]], %[[L]] : index
// CHECK-NEXT:      %[[END:.*]] = arith.minsi %[[E]], %{{.*}} : index
// CHECK-NEXT:      scf.for %{{.*}} = %[[BEGIN]] to %[[END]] step %[[STEP]] {
// CHECK-NOT:     autopar.parallel =

// LLVM-LABEL: llvm.func @parallel(
func.func @parallel(%a: memref<1x64x4096xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %c4096 = arith.constant 4096 : index
  %x = arith.constant 1.0 : f32
  scf.for %b = %c0 to %c1 step %c1 {
    scf.for %i = %c0 to %c64 step %c1 {
      scf.for %j = %c0 to %c4096 step %c1 {
        memref.store %x, %a[%b, %i, %j] : memref<1x64x4096xf32>
      }
    } {autopar.parallel = 4096 : i64}
  }
  scf.for %i = %c0 to %c8 step %c1 {
    scf.for %j = %c0 to %c8 step %c1 {
      memref.store %x, %a[%c0, %i, %j] : memref<1x64x4096xf32>
    }
  } {autopar.parallel = 8 : i64}
  scf.for %b = %c0 to %c2 step %c1 {
    scf.for %i = %c0 to %c64 step %c1 {
      scf.for %j = %c0 to %c4096 step %c1 {
        memref.store %x, %a[%c0, %i, %j] : memref<1x64x4096xf32>
      }
    } {autopar.parallel = 4096 : i64}
  }
  return
}
