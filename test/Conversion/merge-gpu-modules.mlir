// autopar-merge-gpu-modules: the gpu.modules of kernel outlining (one per
// kernel) become one, @autopar_kernels or module-name, each kernel renamed
// after its old module and each launch updated; a global cloned into several
// modules is kept once.
// RUN: autopar-opt %s --autopar-merge-gpu-modules --split-input-file | FileCheck %s
// RUN: autopar-opt %s --autopar-merge-gpu-modules="module-name=stage0_kernels" --split-input-file | FileCheck %s --check-prefix=NAMED

// Outlining gives each kernel a module of its own; they are merged into one
// (one cubin, one module load), each kernel renamed after its old module,
// and the launches follow. A global cloned into both modules is kept once.
// The two kernels take different buffers, so a launch that followed the
// wrong kernel would show.
// CHECK-LABEL: func.func @main
// CHECK-SAME: (%[[X:.*]]: memref<4xf32>, %[[Y:.*]]: memref<8xf32>)
// CHECK: gpu.launch_func @autopar_kernels::@main_kernel blocks {{.*}} args(%[[X]] : memref<4xf32>)
// CHECK: gpu.launch_func @autopar_kernels::@main_kernel_0 blocks {{.*}} args(%[[Y]] : memref<8xf32>)
// CHECK: gpu.module @autopar_kernels {
// CHECK-COUNT-1: memref.global "private" constant @table
// CHECK-NOT: memref.global
// CHECK-DAG: gpu.func @main_kernel(%{{.*}}: memref<4xf32>) kernel
// CHECK-DAG: gpu.func @main_kernel_0(%{{.*}}: memref<8xf32>) kernel
// CHECK-NOT: gpu.module
// NAMED: gpu.launch_func @stage0_kernels::@main_kernel blocks
// NAMED: gpu.launch_func @stage0_kernels::@main_kernel_0 blocks
// NAMED: gpu.module @stage0_kernels
module attributes {gpu.container_module} {
  func.func @main(%x: memref<4xf32>, %y: memref<8xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @main_kernel::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%x : memref<4xf32>)
    gpu.launch_func @main_kernel_0::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%y : memref<8xf32>)
    return
  }
  gpu.module @main_kernel {
    memref.global "private" constant @table : memref<4xf32> = dense<1.0>
    gpu.func @main_kernel(%arg0: memref<4xf32>) kernel {
      %g = memref.get_global @table : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_0 {
    memref.global "private" constant @table : memref<4xf32> = dense<1.0>
    gpu.func @main_kernel(%arg0: memref<8xf32>) kernel {
      %g = memref.get_global @table : memref<4xf32>
      gpu.return
    }
  }
}
