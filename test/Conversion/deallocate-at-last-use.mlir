// autopar-deallocate-at-last-use: each buffer is freed right after the last op
// of its block that uses it or a view of it; a use inside a nested region
// counts as a use by the op holding it; a buffer carried by a loop, or
// deallocated under a condition, keeps its dealloc where it was.
// RUN: autopar-opt %s --autopar-deallocate-at-last-use --split-input-file | FileCheck %s

// A chain of temporaries, all freed at the end (as ownership-based
// deallocation leaves them): each moves up to its last reader, a view's
// reader counting for the buffer it views.
// CHECK-LABEL: func.func @chain
// CHECK: %[[A:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK: linalg.fill {{.*}} outs(%[[A]]
// CHECK: %[[B:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK: linalg.copy ins(%[[A]] : {{.*}}) outs(%[[B]]
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK: %[[V:.*]] = memref.collapse_shape %[[B]]
// CHECK: %[[C:.*]] = memref.alloc() : memref<16xf32>
// CHECK: linalg.copy ins(%[[V]] : {{.*}}) outs(%[[C]]
// CHECK-NEXT: memref.dealloc %[[B]]
// CHECK: memref.copy %[[C]], %{{.*}}
// CHECK-NEXT: memref.dealloc %[[C]]
// CHECK-NEXT: return
func.func @chain(%out: memref<16xf32>) {
  %zero = arith.constant 0.0 : f32
  %a = memref.alloc() : memref<4x4xf32>
  linalg.fill ins(%zero : f32) outs(%a : memref<4x4xf32>)
  %b = memref.alloc() : memref<4x4xf32>
  linalg.copy ins(%a : memref<4x4xf32>) outs(%b : memref<4x4xf32>)
  %v = memref.collapse_shape %b [[0, 1]] : memref<4x4xf32> into memref<16xf32>
  %c = memref.alloc() : memref<16xf32>
  linalg.copy ins(%v : memref<16xf32>) outs(%c : memref<16xf32>)
  memref.copy %c, %out : memref<16xf32> to memref<16xf32>
  memref.dealloc %a : memref<4x4xf32>
  memref.dealloc %b : memref<4x4xf32>
  memref.dealloc %c : memref<16xf32>
  return
}

// -----

// A buffer read inside a loop is freed after the loop, not inside it; a
// buffer the loop carries (an iteration argument may alias it) stays freed
// at the end.
// CHECK-LABEL: func.func @loops
// CHECK: %[[A:.*]] = memref.alloc() : memref<4xf32>
// CHECK: %[[CARRIED:.*]] = memref.alloc() : memref<4xf32>
// CHECK: scf.for
// CHECK: memref.copy %[[A]]
// CHECK: scf.yield
// CHECK: }
// CHECK-NEXT: memref.dealloc %[[A]]
// CHECK: call @use
// CHECK-NEXT: memref.dealloc %[[CARRIED]]
// CHECK-NEXT: return
func.func private @use(memref<4xf32>)
func.func @loops(%out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %a = memref.alloc() : memref<4xf32>
  %carried = memref.alloc() : memref<4xf32>
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%x = %carried) -> (memref<4xf32>) {
    memref.copy %a, %x : memref<4xf32> to memref<4xf32>
    scf.yield %x : memref<4xf32>
  }
  func.call @use(%out) : (memref<4xf32>) -> ()
  memref.dealloc %a : memref<4xf32>
  memref.dealloc %carried : memref<4xf32>
  return
}

// -----

// A conditional dealloc (ownership not known statically) stays.
// CHECK-LABEL: func.func @conditional
// CHECK: memref.copy
// CHECK: call @use
// CHECK: scf.if
// CHECK-NEXT: memref.dealloc
func.func private @use(memref<4xf32>)
func.func @conditional(%out: memref<4xf32>, %owned: i1) {
  %a = memref.alloc() : memref<4xf32>
  memref.copy %a, %out : memref<4xf32> to memref<4xf32>
  func.call @use(%out) : (memref<4xf32>) -> ()
  scf.if %owned {
    memref.dealloc %a : memref<4xf32>
  }
  return
}
