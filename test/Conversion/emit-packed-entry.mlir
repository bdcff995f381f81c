// autopar-emit-packed-entry: @autopar_entry(ptr) loads each argument's buffer
// and rebuilds its static row-major descriptor from autopar.arg_shapes, then
// calls @main renamed and made internal; shapes that do not match @main's
// arguments, a missing attribute and a missing @main are errors.
// RUN: autopar-opt %s --autopar-emit-packed-entry --split-input-file --verify-diagnostics | FileCheck %s

// The entry loads one pointer per argument and rebuilds each row-major
// descriptor (ptr, ptr, offset 0, sizes, strides); @main becomes internal and
// is renamed so that it cannot clash with the loading program's main.
// CHECK-LABEL: llvm.func internal @autopar_program
// CHECK-SAME: (%{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr {llvm.noalias}, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: i64, %{{.*}}: !llvm.ptr, %{{.*}}: !llvm.ptr {llvm.noalias},
// CHECK-LABEL: llvm.func @autopar_entry
// CHECK-SAME: (%[[ARGV:.*]]: !llvm.ptr)
// CHECK: %[[SLOT0:.*]] = llvm.getelementptr %[[ARGV]][0]
// CHECK: %[[P0:.*]] = llvm.load %[[SLOT0]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[OFF0:.*]] = llvm.mlir.constant(0 : i64)
// CHECK: %[[D0:.*]] = llvm.mlir.constant(2 : i64)
// CHECK: %[[D1:.*]] = llvm.mlir.constant(3 : i64)
// CHECK: %[[S1:.*]] = llvm.mlir.constant(1 : i64)
// CHECK: %[[S0:.*]] = llvm.mlir.constant(3 : i64)
// CHECK: %[[SLOT1:.*]] = llvm.getelementptr %[[ARGV]][1]
// CHECK: %[[P1:.*]] = llvm.load %[[SLOT1]]
// CHECK: %[[OFF1:.*]] = llvm.mlir.constant(0 : i64)
// CHECK: %[[E0:.*]] = llvm.mlir.constant(6 : i64)
// CHECK: %[[T0:.*]] = llvm.mlir.constant(1 : i64)
// CHECK: llvm.call @autopar_program(%[[P0]], %[[P0]], %[[OFF0]], %[[D0]], %[[D1]], %[[S0]], %[[S1]], %[[P1]], %[[P1]], %[[OFF1]], %[[E0]], %[[T0]])
// CHECK-NEXT: llvm.return
module {
  llvm.func @main(%a0: !llvm.ptr, %a1: !llvm.ptr, %o: i64, %s0: i64, %s1: i64, %t0: i64, %t1: i64,
                  %b0: !llvm.ptr, %b1: !llvm.ptr, %o2: i64, %s: i64, %t: i64)
      attributes {autopar.arg_shapes = [array<i64: 2, 3>, array<i64: 6>]} {
    llvm.return
  }
}

// -----

// The shapes must account for every expanded argument.
module {
  // expected-error @below {{describes 5 expanded arguments but @main has 3}}
  llvm.func @main(%a0: !llvm.ptr, %a1: !llvm.ptr, %o: i64)
      attributes {autopar.arg_shapes = [array<i64: 7>]} {
    llvm.return
  }
}

// -----

module {
  // expected-error @below {{has no 'autopar.arg_shapes' attribute}}
  llvm.func @main() {
    llvm.return
  }
}

// -----

// expected-error @below {{no llvm.func @main}}
module {
}
