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
    semantics of the linalg ops exactly. When the last op before the
    contraction that touches memory is a `linalg.fill` of zeros into its
    output (a fresh result), the fill is dropped and the `_overwrite_`
    variant of the kernel (`@autopar_cpu_matmul_overwrite_f32`, ...) stores
    the sum instead (BLAS `beta = 0`): one pass over the output less.
    Callees are declared private with
    `llvm.emit_c_interface`, so each memref reaches the runtime as a pointer
    to its descriptor (see docs/design/artifact.md). Other element types keep
    their linalg form and lower to loops.
  }];
  let dependentDialects = ["mlir::func::FuncDialect"];
}

def LowerAttentionToKernels
    : Pass<"autopar-lower-attention-to-kernels", "mlir::ModuleOp"> {
  let summary = "Replace bufferized autopar.attention and attention_grad with "
                "calls of the runtime's FlashAttention kernels";
  let description = [{
    Runs after bufferization, beside the contraction lowering. Rewrites

    - `autopar.attention` into `call @<prefix>attention_fwd_<t>(%q, %k, %v,
      %mask, %out, %lse, %scale, %flags)`;
    - `autopar.attention_grad` into `call @<prefix>attention_bwd_<t>(%q, %k,
      %v, %mask, %out, %lse, %dout, %dq, %dk, %dv, %scale, %flags)`;

    with `<prefix>` `autopar_cpu_` or `autopar_cuda_`, `<t>` the query's
    element type (`f32`; on CUDA also `bf16`), `%scale` an f32 and `%flags`
    an i32 (bit 0 causal, bit 1 a mask is present; without one, a view of
    `%lse` stands in and is not read). For CUDA, inputs whose innermost dim
    is strided are copied to contiguous buffers first. The kernel ABI is in
    docs/design/attention.md.
  }];
  let options = [
    Option<"library", "library", "std::string", /*default=*/"\"cpu\"",
           "The kernel library: cpu or cuda">,
  ];
  let dependentDialects = ["mlir::func::FuncDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::arith::ArithDialect"];
}

def LowerCrossEntropyToKernels
    : Pass<"autopar-lower-cross-entropy-to-kernels", "mlir::ModuleOp"> {
  let summary = "Replace bufferized autopar.softmax_cross_entropy and its "
                "gradient with calls of the runtime's kernels";
  let description = [{
    Runs after bufferization, beside the attention lowering. Rewrites

    - `autopar.softmax_cross_entropy` into `call
      @<prefix>cross_entropy_fwd_<t>(%logits, %labels, %nll, %lse, %ignore)`;
    - `autopar.softmax_cross_entropy_grad` into `call
      @<prefix>cross_entropy_bwd_<t>(%logits, %labels, %lse, %d_nll,
      %d_logits, %ignore)`;

    with `<prefix>` `autopar_cpu_` or `autopar_cuda_`, `<t>` the logits'
    element type (`f32`; on CUDA also `bf16`) and `%ignore` the ignore
    index (i64). The kernels see the positions as one dim: the logits and
    their gradient as `[N, C]`, the rest as `[N]`, collapsed from `[P..., C]`
    (an operand whose layout cannot be collapsed is copied to a dense buffer
    first; an output that cannot is an error). The kernel ABI is in
    docs/design/cross-entropy.md.
  }];
  let options = [
    Option<"library", "library", "std::string", /*default=*/"\"cpu\"",
           "The kernel library: cpu or cuda">,
  ];
  let dependentDialects = ["mlir::func::FuncDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::arith::ArithDialect"];
}
def LowerContractionsToCudaKernels
    : Pass<"autopar-lower-contractions-to-cuda-kernels", "mlir::ModuleOp"> {
  let summary = "Replace matmuls on memrefs with calls to the runtime's "
                "cuBLASLt-backed GEMM kernels";
  let description = [{
    The GPU counterpart of `autopar-lower-contractions-to-cpu-kernels`, with
    the same patterns and call convention (docs/design/gpu-backend.md). Runs
    after bufferization. Rewrites:

    - `linalg.matmul` (default maps, or A or B transposed) into
      `call @autopar_cuda_matmul_<a>_<c>(%A, %B, %C)`, a transposed operand
      passed as a `memref.transpose` view;
    - `linalg.batch_matmul` (default maps) into
      `call @autopar_cuda_batch_matmul_<a>_<c>`;

    where A and B share the element type `<a>` (`f32`, `bf16` or `f16`) and
    C has type `<c>` (`f32`, or `<a>`); the kernels accumulate in fp32 into
    C (`C += A * B`). When a zero fill of C comes right before the product
    (a fresh result), the fill is dropped and the `_overwrite_` kernel
    (`C = A * B`, cuBLASLt with beta 0) is called instead: one kernel and one
    pass over C fewer. There are no convolution kernels: convolutions reach
    the GEMMs through `autopar-conv-to-im2col-gemm` before bufferization.
    Other contractions keep their linalg form and become GPU loops.
  }];
  let dependentDialects = ["mlir::func::FuncDialect"];
}

def ConvToIm2colGemm
    : Pass<"autopar-conv-to-im2col-gemm", "mlir::func::FuncOp"> {
  let summary = "Rewrite 2-D convolutions on tensors as im2col followed by "
                "a GEMM named op";
  let description = [{
    The GPU runtime has GEMM kernels only (cuBLASLt), so convolutions are
    turned into GEMMs here, on tensors, with upstream's im2col rewrite
    (`linalg::rewriteInIm2Col`): a `linalg.generic` gathers the input
    patches into a column tensor `Col[n, c*kh*kw, oh*ow]`, and the
    convolution becomes `Out[n, f, oh*ow] += F[f, c*kh*kw] * Col[n, ...]`.

    Upstream writes that product as a `linalg.generic` whose filter operand
    has no batch dim; this pass turns it into a named op the GEMM lowering
    recognizes: a `linalg.matmul` when the batch is 1, otherwise a
    `linalg.batch_matmul` of the filter broadcast over the batch (a copy of
    `n` filters, far smaller than the column tensor itself).

    Only `linalg.conv_2d_nchw_fchw` with unit dilations and static shapes is
    rewritten (what upstream supports); grouped, depthwise and dilated
    convolutions keep their linalg form and become GPU loops.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect",
                           "mlir::affine::AffineDialect",
                           "mlir::arith::ArithDialect"];
}

def ParallelDimsOutermost
    : Pass<"autopar-parallel-dims-outermost", "mlir::func::FuncOp"> {
  let summary = "Interchange the loops of linalg ops on memrefs so that all "
                "parallel dims come before the reduction dims";
  let description = [{
    `convert-linalg-to-parallel-loops` makes one `scf.parallel` of the
    leading parallel dims and sequential `scf.for` loops of the rest. A
    reduction over a leading dim (ReduceMean over axis 0, a transposed
    softmax) would therefore put a sequential loop on the host around the
    parallel work. On memrefs, any linalg op with a reduction dim before a
    parallel one is generalized and interchanged so that its parallel dims
    are outermost (in their order) and its reduction dims innermost (in
    theirs): each GPU thread then owns one output element and runs the
    reduction sequentially. Reductions stay in their original order, so
    results do not change.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def WrapSequentialCodeForGpu
    : Pass<"autopar-gpu-wrap-sequential-code", "mlir::func::FuncOp"> {
  let summary = "Wrap host-side memory accesses outside parallel loops into "
                "one-iteration scf.parallel loops, so they run on the GPU";
  let description = [{
    On a GPU target every buffer lives in device memory, so the host code
    must not read or write any. After `convert-linalg-to-parallel-loops`,
    some work is left outside `scf.parallel`: full reductions to a scalar
    (a sequential `scf.for` nest), fills and copies of rank-0 buffers (a
    bare `memref.store`). This pass groups each run of such ops at the top
    level of the function (with the pure ops computing values they use)
    into a one-iteration `scf.parallel`, which the GPU mapping turns into a
    one-thread kernel. That is correct but sequential; see
    docs/design/gpu-backend.md for what a faster reduction would do.

    What stays on the host: allocation and deallocation, `memref.get_global`,
    view ops (subview, reshape, cast, transpose), calls (GEMM kernels,
    collectives), `scf.parallel` loops, ops without memory effects, and
    loops or branches whose bodies hold such host work (a training step's
    loop over micro-batches), whose blocks are processed the same way.

    A scalar a group computes and later code uses (a training step's
    learning rate or Adam's bias correction, computed from the step counter
    and read by every update kernel) is stored into a device scalar at the
    end of the group and loaded again inside each kernel that uses it, or
    right before a host op, where the load joins the next group. Only a
    value the host itself needs (a size, an offset, a loop bound, a call's
    scalar argument) cannot be moved to the device and is reported as an
    error.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::arith::ArithDialect"];
}

def TileParallelLoopsForGpu
    : Pass<"autopar-gpu-tile-parallel-loops", "mlir::func::FuncOp"> {
  let summary = "Collapse each outermost scf.parallel to one dim and tile it "
                "into blocks of threads";
  let description = [{
    Prepares parallel loops for `gpu-map-parallel-loops`, which maps the
    outer loop of a nest to the grid and the next one to the threads of a
    block. Every outermost `scf.parallel` is collapsed into one dim (so a
    loop of any rank fills the blocks, and consecutive threads touch
    consecutive elements of the innermost dim: coalesced accesses) and
    tiled by `block-size` with constant inner bounds (a guard skips the
    tail). A loop with fewer iterations than `block-size` becomes one block
    of exactly that many threads.
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", "256",
           "Threads per block">,
  ];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::arith::ArithDialect"];
}

def GpuWarpReductions
    : Pass<"autopar-gpu-warp-reductions", "mlir::func::FuncOp"> {
  let summary = "Reduce each row of a linalg reduction with one warp: "
                "coalesced loads and a shuffle tree";
  let description = [{
    Without it every reduction becomes one GPU thread per output element
    that walks its row alone: consecutive threads read addresses a row
    apart (no coalescing), and the accumulator goes through memory at each
    step. Softmax and layer norm then cost several times the memory traffic
    they need (measured on an H100: bench/RESULTS.md).

    Runs on buffers after `autopar-parallel-dims-outermost` (parallel dims
    first) and before `convert-linalg-to-parallel-loops`. A `linalg.generic`
    qualifies when it has one output, indexed by its parallel dims in order,
    its loops are parallel dims followed by one or more reduction dims of
    static size at least `min-reduction-size` in all, its body ends in
    `yield combine(out, v)` (or `combine(v, out)`) where `combine` is
    `arith.addf`, `mulf`, `maximumf`, `minimumf`, `maxnumf` or `minnumf` on
    `f32` and `out` is used nowhere else, every other op of the body is
    free of memory effects, and its largest input's innermost dim is a
    reduction loop (a column reduction, whose lanes would read elements a
    row apart, keeps a thread per output: consecutive threads read
    consecutive columns). It becomes

        scf.parallel (%row..., %lane) = (0, ...) to (R..., 32) {
          %p = scf.for %k = %lane to K step 32 iter_args(%a = identity) {
            // the body on row %row, reduction index %k (delinearized)
            scf.yield combine(%a, v)
          }
          // five gpu.shuffle xor steps: every lane holds the row's total
          scf.if %lane == 0 { out[%row] = combine(out[%row], %p) }
        }

    `autopar-gpu-tile-parallel-loops` collapses the nest with the lane
    fastest and cuts blocks of a multiple of 32 threads, so each warp holds
    one row and the shuffles stay inside it. Other reductions keep the
    thread-per-element form. The order of the additions changes (a tree
    instead of a sequence), as in every parallel reduction.
  }];
  let options = [
    Option<"minReductionSize", "min-reduction-size", "int64_t", "32",
           "Rows shorter than this keep one thread per output element">,
  ];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::gpu::GPUDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::affine::AffineDialect",
                           "mlir::arith::ArithDialect"];
}

def SplitColumnReductions
    : Pass<"autopar-split-column-reductions", "mlir::func::FuncOp"> {
  let summary = "Reduce the rows of a tensor to a few columns in two stages, "
                "each reading memory coalesced";
  let description = [{
    A training step's bias and LayerNorm parameter gradients sum a
    [tokens, features] tensor over its tokens: few outputs (768 for GPT-2
    small), each a long reduction over a strided column. A warp per output
    reads 32 rows apart, and a thread per output has too few threads to hide
    the memory's latency: on an H100 such sums were a quarter of GPT-2
    small's step (bench/RESULTS.md). On tensors, this pass rewrites a
    `linalg.generic` whose loops are parallel and reduction loops (static;
    `min-reduced` reduced elements or more, `max-outputs` outputs or
    fewer), whose output is indexed by the parallel loops, whose largest
    input has a parallel loop as its innermost dim (a column reduction; a
    row reduction reads contiguously already), and whose body ends in
    `yield combine(out, v)` (as `autopar-split-full-reductions`'s), into

        partial[o..., p] = combine over rest, other reductions of v
                           (the largest reduction loop r = p * (R / P) + rest,
                            P = `max-parts` or the largest power of two
                            dividing R below it; inputs reading r expanded)
        out[o...]        = combine over p of partial[o..., p]

    The first stage has P times the outputs, a thread each, consecutive
    threads reading consecutive columns; the second reduces P contiguous
    partials per output (a warp each on a GPU). The order of the
    combinations changes, as in any parallel reduction.

    Not in the GPU pipeline yet: with it (and warp reductions restricted to
    contiguous rows) GPT-2 small's step got slower on an H100, 58.0 to 65.1
    ms of GPU time, the first stage still latency-bound (bench/RESULTS.md,
    2026-11-27); kept as a tested starting point for block-level column
    reductions.
  }];
  let options = [
    Option<"maxOutputs", "max-outputs", "int64_t", "65536",
           "Reductions with more outputs have threads enough">,
    Option<"minReduced", "min-reduced", "int64_t", "1024",
           "Shorter reductions are left whole">,
    Option<"maxParts", "max-parts", "int64_t", "512",
           "Partial results per output (at most)">,
  ];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect",
                           "mlir::arith::ArithDialect"];
}

def SplitFullReductions
    : Pass<"autopar-split-full-reductions", "mlir::func::FuncOp"> {
  let summary = "Reduce a large tensor to a scalar in two stages: one "
                "partial result per outer index, then their combination";
  let description = [{
    A reduction of a whole tensor to a scalar (a training step's gradient
    norm: the sum of the squares of every gradient) has no parallel dim, so
    `autopar-gpu-warp-reductions` gives it one warp: GPT-2's token embedding
    gradient, 38.6M elements, took 119 ms on an H100. On tensors, this pass
    rewrites a `linalg.generic` whose loops are all reductions (two or more,
    static, `min-size` elements or more), whose output is a scalar and whose
    body ends in `yield combine(out, v)` (`arith.addf`, `mulf`, `maximumf`,
    `minimumf`, `maxnumf` or `minnumf`, `out` used nowhere else) into

        partial[d0] = combine over d1... of v       (the same body; d0 parallel)
        out         = combine over d0 of partial[d0]

    with `partial` starting at the combiner's identity. The first stage is a
    row reduction (a warp per row on a GPU), the second reduces one value
    per row. The order of the combinations changes, as in any parallel
    reduction. Run in the GPU pipeline only: a CPU reduces sequentially
    either way.
  }];
  let options = [
    Option<"minSize", "min-size", "int64_t", "65536",
           "Smaller reductions are left whole">,
  ];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect",
                           "mlir::arith::ArithDialect"];
}

def GpuHostMemory : Pass<"autopar-gpu-host-memory", "mlir::func::FuncOp"> {
  let summary = "Move the host code's buffers to device memory: "
                "memref.alloc/dealloc to gpu.alloc/dealloc, constants "
                "copied to the device";
  let description = [{
    Runs after `convert-parallel-loops-to-gpu`, on the host code (anything
    outside `gpu.launch`):

    - `memref.alloc` and `memref.alloca` become `gpu.alloc` (the runtime's
      stream-ordered caching allocator), `memref.dealloc` becomes
      `gpu.dealloc`; an `alloca` gets its `gpu.dealloc` before each return;
    - `memref.get_global` (a constant the bufferization put in a global)
      becomes a device buffer filled by `gpu.memcpy` from the host global,
      freed before each return, so kernels and library calls only ever see
      device pointers.
  }];
  let dependentDialects = ["mlir::gpu::GPUDialect"];
}

def MergeGpuModules : Pass<"autopar-merge-gpu-modules", "mlir::ModuleOp"> {
  let summary = "Merge the gpu.modules that kernel outlining made (one per "
                "kernel) into one";
  let description = [{
    `gpu-kernel-outlining` puts each kernel in its own `gpu.module`, which
    would make one `ptxas` run, one cubin and one module load per kernel
    (hundreds for a transformer). This pass moves every kernel into one
    `gpu.module` named `module-name`, renaming each kernel after the module
    it came from (unique, e.g. `@main_kernel_3`) and updating the
    `gpu.launch_func` ops. Symbols cloned into several modules (globals)
    are kept once.
  }];
  let options = [
    Option<"moduleName", "module-name", "std::string", "\"autopar_kernels\"",
           "Name of the merged gpu.module">,
  ];
  let dependentDialects = ["mlir::gpu::GPUDialect"];
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
    a multiply-add body (whose operands may be extended by `arith.extf`
    first: a mixed-precision training step's attention) are rewritten.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def OneHotReductionsToScatter
    : Pass<"autopar-one-hot-reductions-to-scatter", "mlir::func::FuncOp"> {
  let summary = "Turn a one-hot reduction (an embedding's gradient) into a "
                "scatter-add";
  let description = [{
    autopar-differentiate writes the gradient of a Gather (an embedding
    lookup) as a reduction over every (row, token, column):
    `out[v, h] += (idx[n] == v) ? dy[n, h] : 0`. That is vocabulary x tokens
    x hidden work: for GPT-2 small's token embedding at 8192 tokens, 1.36 s
    of a 5.3 s training step on an H100. On buffers, this pass rewrites such
    a `linalg.generic` into a loop nest over the tokens and columns that
    adds each `dy[n, h]` to `out[idx[n], h]`: tokens x hidden work.

    - `atomic=true` (GPU): an `scf.parallel` whose adds are
      `memref.atomic_rmw`. The adds of tokens that share a row are atomic,
      so their order, and the last bits of the sum, vary from run to run.
    - `atomic=false` (CPU): an `scf.for` nest, tokens outermost in the
      reduction's own order, with a load, an add and a store: every row
      receives the same adds in the same order as the one-hot reduction,
      so the result is bitwise the same.

    The row is computed from the index by the body's own (pure)
    arithmetic, which clamps or wraps it as the gather did; a row outside
    the output is skipped, as the one-hot reduction skips it.

    Matched: two inputs, an integer one indexed by reduction loops only and
    a float one (possibly extended by `arith.extf`) indexed by those loops
    and the output's other loops; one output indexed by a parallel loop that
    no input reads (the row) and the others; the body
    `out + select(f(index) == linalg.index(row), value, 0)`.
  }];
  let options = [
    Option<"atomic", "atomic", "bool", "true",
           "Parallel loops with atomic adds (GPU); false: sequential loops "
           "in the reduction's order (CPU, deterministic)">,
  ];
  let dependentDialects = ["mlir::scf::SCFDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::arith::ArithDialect"];
}

def FoldTransposesIntoMatmuls
    : Pass<"autopar-fold-transposes-into-matmuls", "mlir::func::FuncOp"> {
  let summary = "Read a transposed operand of a matmul or batch_matmul in "
                "place instead of materializing the transpose";
  let description = [{
    ONNX exports spell `x @ W.T` as `Transpose(W)` feeding `MatMul` (a tied
    language-model head, attention's `K^T`). Imported as it stands, the
    transpose becomes a copy of the whole tensor every step, and the GEMM
    then reads a matrix whose rows may not be 16-byte aligned (GPT-2's
    `[768, 50257]` bf16): cuBLASLt falls back to slow kernels. The GEMM
    kernels of both backends take a transposed operand as a strided view for
    free, so on tensors, before bufferization, an operand of `linalg.matmul`
    (`linalg.batch_matmul`) that is a transpose of its two (last two) dims —
    `linalg.transpose`, or a copy-only `linalg.generic` whose maps permute
    them — is replaced by the transpose's input, and the operand's indexing
    map swapped. The transpose stays for its other users, if any.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def DistinctResults : Pass<"autopar-distinct-results", "mlir::func::FuncOp"> {
  let summary = "Give every result of a function a value of its own, so "
                "that each bufferizes to its own out-param";
  let description = [{
    Runs just before bufferization. A function may return one value twice:
    two zero gradients or cotangents that CSE merged into one `linalg.fill`
    (a BatchNorm stage of a pipeline returns the zero cotangents of its
    running statistics), or an argument returned as two results. Each result
    becomes an out-param the runtime allocates, and upstream's
    `buffer-results-to-out-params` (with `hoist-static-allocs`) crashes on a
    buffer returned twice. Every repeat is therefore replaced by a value of
    its own: a constant fill (or constant) cloned, anything else copied into
    a fresh tensor with `linalg.copy`. The first occurrence stays.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def ForwardResultsToOutParams
    : Pass<"autopar-forward-results-to-out-params", "mlir::func::FuncOp"> {
  let summary = "Compute a result whose buffer is a reshaped allocation "
                "directly in its out-param, dropping the final copy";
  let description = [{
    Runs right after `buffer-results-to-out-params`, which hoists a result
    allocated as it is (its `hoist-static-allocs`) but copies any other into
    the out-param. A result produced as `expand_shape`/`collapse_shape` of a
    fresh `memref.alloc` (a language model's logits: a GEMM on
    `[batch * seq, vocab]` reshaped to `[batch, seq, vocab]`) was therefore
    copied whole at the end of every step (1.6 GB for GPT-2 small at batch
    8: 1.4 ms on an H100). When the out-param is used by that
    `memref.copy` alone and the allocation by the reshape, views of it and
    ops before the copy, the allocation is replaced by the inverse reshape
    of the out-param (identity layout, so the view is contiguous) and the
    copy is erased.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def DeallocateAtLastUse
    : Pass<"autopar-deallocate-at-last-use", "mlir::func::FuncOp"> {
  let summary = "Free each buffer right after its last use instead of at the "
                "end of its block";
  let description = [{
    Runs after `buffer-deallocation-pipeline`, whose
    `ownership-based-buffer-deallocation` frees every buffer a block owns at
    the end of that block. A training step is one block (or one loop body
    per micro-batch): every forward and backward temporary stayed allocated
    until the step's end, so the step needed the memory of all its values at
    once, and recomputation saved none (the tiny GPT of examples/tiny-gpt
    peaked at 117 MB where its forward keeps 36 MB for the backward).

    Each unconditional `memref.dealloc` of a buffer is moved to right after
    the last op of its block that uses the buffer or any value that may
    alias it (views, casts, reshapes, loop-carried copies:
    `BufferViewFlowAnalysis`), a use in a nested region counting as a use by
    the op of the block that holds it. A buffer an op outside the block
    uses, or that a block argument may alias, keeps its dealloc where it
    is. Deallocs under an ownership condition (`scf.if`) stay as they are.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
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

    Each op has its `OpConversionPattern`, applied with a `ConversionTarget`
    that makes every shard collective and grid query illegal; first an
    `all_slice` of a sum `all_reduce` is folded into a `reduce_scatter`.
    A collective of bf16 or f16 tensors (mixed precision) runs on f32: its
    operand is widened and its result rounded back (linalg generics), since
    MPI has no 16-bit float type; data movement stays exact, and sums
    accumulate in f32 before one rounding.
    Collectives the runtime cannot run (over several grid axes at once, other
    reductions, other element types or dynamic shapes) are all reported, each
    at its op, before anything is rewritten.
  }];
  let dependentDialects = ["mlir::func::FuncDialect",
                           "mlir::linalg::LinalgDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::bufferization::BufferizationDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::tensor::TensorDialect"];
}

def RecordArgumentShapes
    : Pass<"autopar-record-argument-shapes", "mlir::ModuleOp"> {
  let summary = "Record the static shape of each of `@main`'s memref "
                "arguments for the packed entry";
  let description = [{
    Runs once the program is bufferized and `@main`'s results are
    out-params, before the memref types are lowered away: sets
    `autopar.arg_shapes` on `@main` (one dense i64 array per argument), which
    `autopar-emit-packed-entry` reads to rebuild each descriptor. Every
    argument must be a static, row-major memref (the runtime passes dense
    buffers); anything else is an error naming the argument's type.
  }];
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
    `autopar.arg_shapes` attribute that `autopar-record-argument-shapes`
    records on `@main` before lowering.
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

def CollapseContiguousLoops
    : Pass<"autopar-collapse-contiguous-loops", "mlir::func::FuncOp"> {
  let summary = "Merge the loops of an elementwise linalg.generic on "
                "contiguous buffers that walk memory as one";
  let description = [{
    Runs on buffers, before `convert-linalg-to-loops`. An all-parallel
    `linalg.generic` over `[N, C, H, W]` becomes four nested loops whose
    innermost runs W times; LLVM fully unrolls a short innermost loop and
    then vectorizes the one around it with gathers and scatters (the ReLU
    backward of a 32x32 image ran at a fifth of memory speed). Adjacent loop
    dims that every operand reads as adjacent dims of a contiguous
    (identity-layout) buffer, or not at all, are merged into one
    (`linalg::collapseOpIterationDims`, with `memref.collapse_shape` views):
    a ReLU over `[N, C, H, W]` becomes one loop over N*C*H*W, a per-channel
    BatchNorm scale over `[N, C, H*W]`.

    ```mlir
    linalg.generic {indexing_maps = [#id4, #id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
        ins(%a : memref<16x32x32x32xf32>) outs(%b : memref<16x32x32x32xf32>)
    // becomes
    %a1 = memref.collapse_shape %a [[0, 1, 2, 3]] : memref<16x32x32x32xf32> into memref<524288xf32>
    %b1 = memref.collapse_shape %b [[0, 1, 2, 3]] : memref<16x32x32x32xf32> into memref<524288xf32>
    linalg.generic {indexing_maps = [#id1, #id1], iterator_types = ["parallel"]} ins(%a1 : ...) outs(%b1 : ...)
    ```
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect",
                           "mlir::linalg::LinalgDialect"];
}

def LinalgToLoops : Pass<"autopar-linalg-to-loops", "mlir::func::FuncOp"> {
  let summary = "Lower linalg ops on memrefs to scf.for loops, marking the "
                "loop whose iterations may run on different threads";
  let description = [{
    Upstream's `convert-linalg-to-loops`, plus one mark per op: the first
    loop with more than one iteration, when every loop around it has one
    (the batch of 1 of an NCHW tensor), walks a parallel dim, and that dim
    is a result of every output's indexing map, so that two iterations never
    write the same element, gets `autopar.parallel = N` (N: the iterations
    of the loops inside it, the work of one iteration).
    `autopar-outline-loop-nests` splits such a loop among the kernel threads.

    ```mlir
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a : memref<8x16xf32>) outs(%b : memref<8x16xf32>) { ... }
    // becomes
    scf.for %i = %c0 to %c8 step %c1 {
      scf.for %j = %c0 to %c16 step %c1 { ... }
    } {autopar.parallel = 16 : i64}
    ```
  }];
  let dependentDialects = ["mlir::scf::SCFDialect",
                           "mlir::affine::AffineDialect",
                           "mlir::memref::MemRefDialect"];
}

def OutlineLoopNests : Pass<"autopar-outline-loop-nests", "mlir::ModuleOp"> {
  let summary = "Move each top-level loop nest of a function into a function "
                "of its own that LLVM does not inline";
  let description = [{
    After `convert-linalg-to-loops` a compiled step is one function holding
    every loop nest of the model; a training step of a small GPT has
    hundreds. LLVM's loop passes (IndVarSimplify above all) are superlinear
    in the size of the function they run on: on such a step they took 70% of
    a 45-second compile. Each top-level `scf.for` without results becomes a
    call to `@<function>_loop<N>`, whose arguments are the values the nest
    reads from outside; constants are cloned into it, so loop bounds stay
    known to LLVM. The outlined functions have internal linkage and LLVM's
    `noinline`: inlined back, they would rebuild the one big function.

    A nest whose loop is marked `autopar.parallel = W` (by
    `autopar-linalg-to-loops`; every loop around it in the nest runs once)
    is outlined with two more index arguments, the first and last iteration
    of that loop to run, and the function gets
    `autopar.parallel_range = array<i64: N, W>` (N: the loop's iterations).
    The call passes 0 and N: the whole loop, until
    `autopar-parallel-loop-calls` hands the range to the kernel threads.

    ```mlir
    func.func @main(%a: memref<4xf32>) {
      scf.for %i = %c0 to %c4 step %c1 { ... %a ... }
    // becomes
    func.func @main(%a: memref<4xf32>) {
      call @main_loop0(%a) : (memref<4xf32>) -> ()
    func.func private @main_loop0(%a: memref<4xf32>) attributes
        {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]}
    ```
  }];
  let dependentDialects = ["mlir::func::FuncDialect", "mlir::LLVM::LLVMDialect",
                           "mlir::arith::ArithDialect"];
}

def ParallelLoopCalls : Pass<"autopar-parallel-loop-calls", "mlir::ModuleOp"> {
  let summary = "Run the calls of outlined parallel loops on the kernel "
                "threads";
  let description = [{
    Runs after `convert-func-to-llvm`. An `llvm.func @f` carrying
    `autopar.parallel_range = array<i64: N, W>` (its last two arguments are
    the range of iterations it runs, of N, each of about W elements of work)
    gets a companion `@f_range(ptr, i64, i64)` that loads `@f`'s other
    arguments from a struct and calls it on the range. Each call
    `llvm.call @f(args..., first, last)` stores `args` into a struct on the
    stack and becomes
    `llvm.call @autopar_cpu_parallel_for(@f_range, struct, N, W)`, which the
    runtime splits among its kernel threads (or runs whole on the caller
    when the work is small).
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

def MarkNoAlias : Pass<"autopar-mark-noalias", "mlir::ModuleOp"> {
  let summary = "Set `llvm.noalias` on the lowered pointer arguments that "
                "`autopar-outline-loop-nests` recorded";
  let description = [{
    Runs after `convert-func-to-llvm`. An `llvm.func` carrying
    `autopar.noalias_pointer_args = array<i64: ...>` gets `llvm.noalias` on
    those arguments (the aligned pointers of memrefs that alias no other
    argument) and loses the attribute.
  }];
  let dependentDialects = ["mlir::LLVM::LLVMDialect"];
}

#endif // AUTOPAR_CONVERSION_PASSES
