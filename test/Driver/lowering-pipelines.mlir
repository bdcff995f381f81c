// autopar-cpu-pipeline and autopar-gpu-pipeline: the lowering autopar-compile
// runs for CPU ranks and for GPUs, as registered pipelines. A matmul plus
// bias becomes a BLAS (or cuBLASLt) call and a loop (or kernel), @main's
// argument shapes are recorded, and the packed entry the runtime calls is
// added.
// RUN: autopar-opt %s --autopar-cpu-pipeline | FileCheck %s --check-prefix=CPU
// RUN: %if cuda-toolkit %{ autopar-opt %s --autopar-gpu-pipeline="arch=sm_90" | FileCheck %s --check-prefix=GPU %}
// RUN: not autopar-opt %s --autopar-gpu-pipeline="arch=sm_42" 2>&1 | FileCheck %s --check-prefix=BAD-ARCH

// CPU: llvm.func private @autopar_cpu_matmul_overwrite_f32(
// CPU: llvm.call @_mlir_ciface_autopar_cpu_matmul_overwrite_f32
// CPU: llvm.func internal @autopar_program(
// CPU-SAME: autopar.arg_shapes = [array<i64: 4, 8>, array<i64: 8, 16>, array<i64: 16>, array<i64: 4, 16>]
// CPU: llvm.call @autopar_cpu_matmul_overwrite_f32(
// CPU: llvm.call @[[LOOP:main_loop[0-9]+]](
// CPU: llvm.func internal @[[LOOP]](
// CPU: llvm.fadd
// CPU: llvm.func @autopar_entry(%{{.*}}: !llvm.ptr)
// CPU: llvm.call @autopar_program(
// CPU-NOT: linalg.
// CPU-NOT: memref.

// GPU: llvm.func internal @autopar_program(
// GPU-SAME: autopar.arg_shapes = [array<i64: 4, 8>, array<i64: 8, 16>, array<i64: 16>, array<i64: 4, 16>]
// GPU: llvm.call @autopar_cuda_matmul_overwrite_f32_f32(
// GPU: gpu.launch_func <%{{.*}} : !llvm.ptr> @autopar_kernels::@main_kernel
// GPU: gpu.binary @autopar_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_90"
// GPU: llvm.func @autopar_entry(%{{.*}}: !llvm.ptr)

// BAD-ARCH: error: autopar-gpu-pipeline: unknown GPU architecture 'sm_42'; known: sm_75,

func.func @main(%x: tensor<4x8xf32>, %w: tensor<8x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x16xf32>) -> tensor<4x16xf32>
  %y = linalg.matmul ins(%x, %w : tensor<4x8xf32>, tensor<8x16xf32>) outs(%f : tensor<4x16xf32>) -> tensor<4x16xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (j)>, affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]}
      ins(%y, %b : tensor<4x16xf32>, tensor<16xf32>) outs(%e : tensor<4x16xf32>) {
  ^bb0(%a: f32, %c: f32, %o: f32):
    %s = arith.addf %a, %c : f32
    linalg.yield %s : f32
  } -> tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}
