// autopar-gpu-host-memory: the host's memref.alloc/dealloc become
// gpu.alloc/dealloc (accesses inside kernels are unchanged); a host global is
// copied into a device buffer that kernels and calls use; allocas become
// device buffers too; both are freed right before the return.
// RUN: autopar-opt %s --pass-pipeline='builtin.module(func.func(autopar-gpu-host-memory))' --split-input-file | FileCheck %s

// Host allocations become device allocations; kernels keep their own.
// CHECK-LABEL: func.func @temporaries
// CHECK: %[[T:.*]] = gpu.alloc () : memref<4x16xf32>
// CHECK: gpu.launch
// CHECK: memref.store %{{.*}}, %[[T]]
// CHECK: gpu.terminator
// CHECK: gpu.dealloc %[[T]] : memref<4x16xf32>
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.dealloc
func.func @temporaries() {
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %t = memref.alloc() {alignment = 64 : i64} : memref<4x16xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%x = %c1, %y = %c1, %z = %c1)
             threads(%tx, %ty, %tz) in (%u = %c1, %v = %c1, %w = %c1) {
    memref.store %zero, %t[%tx, %ty] : memref<4x16xf32>
    gpu.terminator
  }
  memref.dealloc %t : memref<4x16xf32>
  return
}

// -----

// A constant the bufferization put in a host global is copied to a device
// buffer, used by kernels and library calls alike, and freed at the return.
// CHECK-LABEL: func.func @constant
// CHECK: %[[G:.*]] = memref.get_global @table : memref<4xf32>
// CHECK: %[[D:.*]] = gpu.alloc () : memref<4xf32>
// CHECK: gpu.memcpy %[[D]], %[[G]] : memref<4xf32>, memref<4xf32>
// CHECK: call @kernel(%[[D]])
// CHECK: gpu.dealloc %[[D]] : memref<4xf32>
// CHECK-NEXT: return
memref.global "private" constant @table : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
func.func private @kernel(memref<4xf32>)
func.func @constant() {
  %g = memref.get_global @table : memref<4xf32>
  call @kernel(%g) : (memref<4xf32>) -> ()
  return
}

// -----

// Stack buffers of the host code are device buffers too, freed at the return.
// CHECK-LABEL: func.func @stack
// CHECK: %[[D:.*]] = gpu.alloc () : memref<f32>
// CHECK: call @scalar_kernel(%[[D]])
// CHECK: gpu.dealloc %[[D]] : memref<f32>
// CHECK-NEXT: return
func.func private @scalar_kernel(memref<f32>)
func.func @stack() {
  %s = memref.alloca() : memref<f32>
  call @scalar_kernel(%s) : (memref<f32>) -> ()
  return
}
