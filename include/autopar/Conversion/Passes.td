//===- Passes.td - autopar conversion passes ---------------*- tablegen -*-===//

#ifndef AUTOPAR_CONVERSION_PASSES
#define AUTOPAR_CONVERSION_PASSES

include "mlir/Pass/PassBase.td"

def LowerContractionsToCpuKernels
    : Pass<"autopar-lower-contractions-to-cpu-kernels", "mlir::ModuleOp"> {
  let summary = "Replace f32 matmuls and convolutions on memrefs with calls "
                "to the runtime's BLAS-backed CPU kernels";
  let description = [{
    Contractions dominate the run time of every model autopar targets. On CPU
    they are handed to the runtime's kernels (OpenBLAS GEMM; im2col + GEMM for
    convolutions), the way the GPU backend hands them to cuBLASLt, while the
    generated code keeps the fused elementwise and reduction work around them.

    Runs after bufferization. Rewrites, for f32 operands:

    - `linalg.matmul` (default indexing maps) into
      `call @autopar_cpu_matmul_f32(%A, %B, %C)`;
    - `linalg.batch_matmul` into `call @autopar_cpu_batch_matmul_f32`;
    - `linalg.conv_2d_nchw_fchw` into `call @autopar_cpu_conv2d_nchw_f32`
      with its strides and dilations;
    - `linalg.conv_2d_ngchw_gfchw` into `call @autopar_cpu_conv2d_ngchw_f32`.

    The kernels accumulate into the output (`C += A * B`), which keeps the
    semantics of the linalg ops exactly. Callees are declared private with
    `llvm.emit_c_interface`, so each memref reaches the runtime as a pointer
    to its descriptor (see docs/design/artifact.md). Other element types keep
    their linalg form and lower to loops.
  }];
  let dependentDialects = ["mlir::func::FuncDialect"];
}

def CollapseBatchedContractions
    : Pass<"autopar-collapse-batched-contractions", "mlir::func::FuncOp"> {
  let summary = "Fold the batch loops of N-D batched contractions into one "
                "for linalg.batch_matmul";
  let description = [{
    The importer keeps every batch dim of a batched MatMul (attention's batch
    and heads) as a loop of one `linalg.generic` contraction, so the planner
    can split the heads. The CPU (and GPU) GEMM kernels take one batch dim:
    this pass collapses the leading batch dims of such a contraction's
    operands, emits `linalg.batch_matmul` and expands the result back.
    Only contractions `C[b..., m, n] += A[b..., m, k] * B[b..., k, n]` with
    a multiply-add body are rewritten.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def LowerCollectivesToRuntime
    : Pass<"autopar-lower-collectives-to-runtime", "mlir::ModuleOp"> {
  let summary = "Lower shard collectives and grid queries to calls into the "
                "autopar runtime";
  let description = [{
    After `shard-partition`, each rank's program talks to the others through
    `shard.all_reduce`, `shard.all_gather`, `shard.reduce_scatter` and
    `shard.all_to_all` on tensors, and asks where it sits with
    `shard.process_multi_index` / `shard.grid_shape`. Upstream's
    `convert-shard-to-mpi` lowers only all-reduce and targets MPI alone; the
    runtime implements every collective behind one interface (MPI on CPUs,
    NCCL on GPUs), so this pass lowers them to its C entry points
    (`autopar_rt_<op>_<type>`, docs/design/artifact.md):

    - each collective becomes `bufferization.to_buffer` of its operand, a
      fresh result buffer, a call taking both as unranked memrefs with the
      grid axis (and gather/scatter/split/concat dims) as `i64`, and
      `bufferization.to_tensor` of the result, so one-shot bufferization
      proceeds as usual;
    - `shard.grid_shape` becomes constants, `shard.process_multi_index` a
      call to `autopar_rt_grid_coord(axis)`;
    - `shard.all_slice` moves no data: it becomes a `tensor.extract_slice`
      of the rank's block, at `autopar_rt_grid_coord(axis)` times the block
      size.

    Collectives over several grid axes at once are reported as errors.
  }];
  let dependentDialects = ["mlir::func::FuncDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::bufferization::BufferizationDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::tensor::TensorDialect"];
}

def EmitPackedEntry : Pass<"autopar-emit-packed-entry", "mlir::ModuleOp"> {
  let summary = "Add `void autopar_entry(void **args)`, the runtime's entry "
                "point, calling the lowered `@main`";
  let description = [{
    After conversion to the LLVM dialect `@main` takes each memref as an
    expanded descriptor (allocated and aligned pointer, offset, sizes,
    strides). The runtime knows only dense buffers, so this pass adds an
    `llvm.func @autopar_entry(!llvm.ptr)` that loads one buffer pointer per
    argument from the array it is given and rebuilds each static, row-major
    descriptor before calling `@main`. The argument shapes come from the
    `autopar.arg_shapes` attribute that `autopar-compile` records on `@main`
    before lowering.
  }];
  let options = [
    Option<"entryName", "entry-name", "std::string", "\"autopar_entry\"",
           "Symbol name of the packed entry point">,
    Option<"mainName", "main-name", "std::string", "\"main\"",
           "The lowered function to call">,
  ];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

def CopiesToLinalg : Pass<"autopar-copies-to-linalg", "mlir::ModuleOp"> {
  let summary = "Rewrite memref.copy into linalg.copy so that copies become "
                "generated loops";
  let description = [{
    `finalize-memref-to-llvm` lowers a `memref.copy` between non-contiguous
    views into a call to MLIR's `memrefCopy` from the C runner utilities,
    which the autopar runtime does not link (it depends on no LLVM/MLIR).
    As `linalg.copy`, every copy lowers to loops like the rest of the
    generated code (LLVM turns contiguous ones back into memcpy).
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

#endif // AUTOPAR_CONVERSION_PASSES
