// autopar-parallel-loop-calls: an llvm.func with autopar.parallel_range gets
// a companion @<f>_range(ptr, i64, i64) loading its other arguments from a
// struct, and each call to it stores its arguments into a struct in the
// caller's entry block and calls @autopar_cpu_parallel_for.
// RUN: autopar-opt %s --autopar-parallel-loop-calls -split-input-file -verify-diagnostics | FileCheck %s

// CHECK-LABEL: llvm.func @main(
// CHECK-SAME:    %[[P:[^:]*]]: !llvm.ptr, %[[N:[^:]*]]: i64)
// CHECK:         %[[ONE:.*]] = llvm.mlir.constant(1 : i64) : i64
// CHECK-NEXT:    %[[FRAME:.*]] = llvm.alloca %[[ONE]] x !llvm.struct<(ptr, i64)> : (i64) -> !llvm.ptr
// CHECK:         %[[F0:.*]] = llvm.getelementptr %[[FRAME]][0, 0] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, i64)>
// CHECK-NEXT:    llvm.store %[[P]], %[[F0]] : !llvm.ptr, !llvm.ptr
// CHECK-NEXT:    %[[F1:.*]] = llvm.getelementptr %[[FRAME]][0, 1] : (!llvm.ptr) -> !llvm.ptr, !llvm.struct<(ptr, i64)>
// CHECK-NEXT:    llvm.store %[[N]], %[[F1]] : i64, !llvm.ptr
// CHECK-NEXT:    %[[FN:.*]] = llvm.mlir.addressof @main_loop0_range : !llvm.ptr
// CHECK-NEXT:    %[[ITER:.*]] = llvm.mlir.constant(64 : i64) : i64
// CHECK-NEXT:    %[[WORK:.*]] = llvm.mlir.constant(1024 : i64) : i64
// CHECK-NEXT:    llvm.call @autopar_cpu_parallel_for(%[[FN]], %[[FRAME]], %[[ITER]], %[[WORK]])
// CHECK-NOT:     llvm.call @main_loop0(
// CHECK:         llvm.return

// CHECK-LABEL: llvm.func internal @main_loop0(
// CHECK-NOT:     autopar.parallel_range
// CHECK-LABEL: llvm.func internal @main_loop0_range(
// CHECK-SAME:    %[[CTX:[^:]*]]: !llvm.ptr, %[[FIRST:[^:]*]]: i64, %[[LAST:[^:]*]]: i64)
// CHECK:         %[[G0:.*]] = llvm.getelementptr %[[CTX]][0, 0]
// CHECK-NEXT:    %[[A0:.*]] = llvm.load %[[G0]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT:    %[[G1:.*]] = llvm.getelementptr %[[CTX]][0, 1]
// CHECK-NEXT:    %[[A1:.*]] = llvm.load %[[G1]] : !llvm.ptr -> i64
// CHECK-NEXT:    llvm.call @main_loop0(%[[A0]], %[[A1]], %[[FIRST]], %[[LAST]])
// CHECK-LABEL: llvm.func @autopar_cpu_parallel_for(!llvm.ptr, !llvm.ptr, i64, i64)

llvm.func @main(%p: !llvm.ptr, %n: i64) {
  %c0 = llvm.mlir.constant(0 : i64) : i64
  %c64 = llvm.mlir.constant(64 : i64) : i64
  llvm.call @main_loop0(%p, %n, %c0, %c64) : (!llvm.ptr, i64, i64, i64) -> ()
  llvm.return
}
llvm.func internal @main_loop0(%p: !llvm.ptr, %n: i64, %first: i64, %last: i64) attributes {autopar.parallel_range = array<i64: 64, 1024>} {
  llvm.return
}

// -----

// expected-error @+1 {{autopar-parallel-loop-calls: 'autopar.parallel_range' needs array<i64: iterations, work> and two trailing i64 arguments (the range)}}
llvm.func internal @no_range(%p: !llvm.ptr) attributes {autopar.parallel_range = array<i64: 64, 1024>} {
  llvm.return
}
