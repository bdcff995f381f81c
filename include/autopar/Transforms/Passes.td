//===- Passes.td - autopar transformation passes -----------*- tablegen -*-===//

#ifndef AUTOPAR_TRANSFORMS_PASSES
#define AUTOPAR_TRANSFORMS_PASSES

include "mlir/Pass/PassBase.td"

def FuseAttention : Pass<"autopar-fuse-attention", "mlir::func::FuncOp"> {
  let summary = "Rewrite scaled dot-product attention into autopar.attention";
  let description = [{
    Finds `softmax(scale * Q K^T + mask) V` as the importer writes it (two
    contractions around a row softmax, with scaling by constants, an additive
    mask, or a `masked_fill` by a constant condition in between) and replaces
    it by one `autopar.attention`, which the backends lower to
    FlashAttention-2 kernels: the `S x T` scores are never stored. A
    constant mask that is zero on and below the diagonal and very negative
    above it becomes the `causal` flag. Query, key and value are transposed
    into `[B, H, S, D]` order where the model had them otherwise; rank-3
    attention (`[B*H, S, D]`) gets a unit batch dim.

    Only f32 attention is fused (the kernels' type; mixed precision demotes
    the fused op later). Patterns with anything else between the pieces
    (attention dropout, a scale not known at compile time) or whose
    intermediates have other users stay as they are: correct, unfused.
    docs/design/attention.md has the contract.
  }];
  let options = [
    Option<"maxHeadDim", "max-head-dim", "int64_t", /*default=*/"0",
           "Fuse only head dims up to this (0: any); the GPU kernels take "
           "up to 128">,
    Option<"headDimMultiple", "head-dim-multiple", "int64_t",
           /*default=*/"1",
           "Fuse only head dims that are multiples of this (GPU: 8)">,
  ];
  let dependentDialects = ["autopar::AutoparDialect",
                           "mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def FuseElementwise : Pass<"autopar-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Fuse elementwise producers into consumers that read each "
                "produced element once";
  let description = [{
    Fusing chains such as bias + residual + GELU into one `linalg.generic`
    saves a round trip through memory per op. Upstream
    `linalg-fuse-elementwise-ops` fuses a producer into any consumer, even
    one whose loops do not all index the fused operand: fused into a matmul
    written as a generic, a LayerNorm or GELU is then recomputed for every
    step of the reduction (measured: a small GPT ran 70x slower). It also
    propagates reshapes, turning named contractions into generics that the
    backends no longer recognize as GEMMs.

    This pass applies only the elementwise fusion patterns, and only where
    the consumer's indexing map of the fused operand is a permutation: every
    consumer iteration reads a distinct producer element, so nothing is
    recomputed. Named ops (matmul, convolution, transpose) are never
    consumers, so they stay recognizable.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def ApproximateMath : Pass<"autopar-approximate-math"> {
  let summary = "Replace erf, tanh and exp by vectorizable polynomial "
                "approximations";
  let description = [{
    LLVM lowers `math.erf` and `math.tanh` to scalar libm calls, which stop
    the loop vectorizer: in a GPT-style model the GELU's `erff` calls took a
    third of the CPU time. MLIR's polynomial approximations (accurate to a
    few ulp in f32, far inside the 1e-4 tolerance autopar is checked against)
    are plain arithmetic that vectorizes with the rest of the fused loop.
  }];
  let dependentDialects = ["mlir::math::MathDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::vector::VectorDialect"];
}

def MixedPrecision : Pass<"autopar-mixed-precision", "mlir::func::FuncOp"> {
  let summary = "Store parameters and activations in bf16 or f16, computing "
                "in f32 and accumulating GEMMs and reductions in f32";
  let description = [{
    `--precision bf16|fp16` on a GPU cluster (docs/design/gpu-backend.md):
    halves the bytes every kernel moves and lets the GEMMs run on tensor
    cores, while keeping the arithmetic in f32. Runs on tensors, after
    elementwise fusion (so that the activations it demotes are the ones that
    are materialized between kernels):

    - f32 parameters of `@main` (arguments with `autopar.parameter`) get the
      low type; their `autopar.dtype` is updated (the runtime converts the
      f32 bytes of the model when it uploads them);
    - an all-parallel `linalg.generic` producing an f32 tensor whose output
      is not read in the body (an elementwise kernel) stores it in the low
      type (`arith.truncf` before the yield), unless `@main` returns it:
      graph outputs keep their type;
    - a low-typed value is read in f32 by its consumers: a `linalg.generic`
      input (`arith.extf` inside the body), a `tensor.extract`, reshapes and
      slices (which carry the low type on); other consumers get an explicit
      f32 copy each, made right before them (marked `read_copy`
      with its own number, as are `f32-gemms`' extended operands, so that
      CSE does not merge the forward's copy with the backward's and keep
      it between them);
    - `linalg.matmul` / `linalg.batch_matmul` take both operands in the low
      type (truncating any f32 one) and keep their f32 result: the GEMM
      kernels accumulate in f32;
    - reductions (generics with reduction loops) keep their f32
      accumulators and outputs;
    - without `f32-gemms` (the GPU) the fused ops read and write the low
      type as their kernels do: `autopar.attention`'s query, key, value and
      out (and the gradient's), and `autopar.softmax_cross_entropy`'s logits
      and the gradient's d_logits; lse, nll and the masks stay f32. With
      `f32-gemms` they read f32 copies;
    - without `f32-gemms`, a GEMM that starts from zero and whose f32 result
      is only rounded to the low type (the LM head's logits in front of the
      fused cross-entropy) writes the low type itself: the kernels round
      their f32 accumulator once, as the rounding did, and neither the f32
      result nor the pass that rounds it is left.

    Graph inputs and outputs keep the model's types.

    For mixed-precision training (`keep-parameters`, docs/training.md,
    "Mixed precision") the parameters stay f32 (the master weights the
    optimizer updates) and are rounded to the low type where a GEMM reads
    them; the pass runs on the forward and backward, before the optimizer is
    added, so gradients (results) stay f32. `f32-gemms` (CPU, whose BLAS
    kernels are f32 only) feeds each GEMM its low-typed operands extended
    back to f32: the same products, accumulated in f32.

    `f32-loss-head` keeps the loss head in f32, as PyTorch's autocast runs
    log-softmax, the losses and their reductions in f32: every generic from
    which a returned scalar (the loss) is reached without passing a GEMM or
    a convolution (the log-probabilities, the per-sample losses, their mean)
    keeps its f32 outputs. Without it the loss itself is computed from
    low-typed per-sample values and is only as precise as the low type.
  }];
  let options = [
    Option<"type", "type", "autopar::LowPrecision",
           "autopar::LowPrecision::BF16", "The storage type",
           [{::llvm::cl::values(
      clEnumValN(autopar::LowPrecision::BF16, "bf16", "bfloat16"),
      clEnumValN(autopar::LowPrecision::F16, "f16", "IEEE half"))}]>,
    Option<"keepParameters", "keep-parameters", "bool", "false",
           "Keep f32 parameters f32 (master weights for training)">,
    Option<"f32Gemms", "f32-gemms", "bool", "false",
           "GEMMs read low-typed operands extended to f32 (f32-only "
           "kernels)">,
    Option<"f32LossHead", "f32-loss-head", "bool", "false",
           "Keep what computes a returned scalar (the loss) after the last "
           "GEMM or convolution in f32">,
  ];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::tensor::TensorDialect"];
}

def AutoparPlan : Pass<"autopar-plan", "mlir::ModuleOp"> {
  let summary = "Choose a 3D-parallel plan and annotate the module with it";
  let description = [{
    Plans `@main` for a cluster (see Planner.h): data, tensor and pipeline
    parallelism, ZeRO stage, micro-batches, recomputation, stage boundaries
    and the tensor-parallel sharding of every op, chosen by predicted step
    time under a memory limit. The module gets a `shard.grid @autopar_grid`
    of shape dp x tp, `shard.shard` annotations (the batch of every
    activation split over dp wherever it is the outer factor of a dim, else
    gathered; each split op's parameters and result over tp) that upstream
    `sharding-propagation` and `shard-partition` accept, an `autopar.plan`
    dictionary and an `autopar.stage` on every op. Options pin parts of the
    plan like `autopar-compile`'s flags; a plan that cannot exist is an
    error saying why.
  }];
  let options = [
    Option<"cluster", "cluster", "std::string", "\"local:1\"",
           "Cluster: a preset (local:N, dgx-h100:NODES, ...) or JSON file">,
    Option<"mode", "mode", "autopar::PlanModeOption",
           "autopar::PlanModeOption::Infer", "What the plan runs",
           [{::llvm::cl::values(
      clEnumValN(autopar::PlanModeOption::Infer, "infer", "inference"),
      clEnumValN(autopar::PlanModeOption::Train, "train", "training steps"))}]>,
    Option<"precision", "precision", "autopar::PlanPrecisionOption",
           "autopar::PlanPrecisionOption::Auto",
           "Precision (default: bf16 on GPUs, fp32 on CPUs)",
           [{::llvm::cl::values(
      clEnumValN(autopar::PlanPrecisionOption::Auto, "auto",
                 "the cluster's default"),
      clEnumValN(autopar::PlanPrecisionOption::FP32, "fp32", "fp32"),
      clEnumValN(autopar::PlanPrecisionOption::BF16, "bf16", "bf16"),
      clEnumValN(autopar::PlanPrecisionOption::FP16, "fp16", "fp16"))}]>,
    Option<"dp", "dp", "int64_t", "0", "Pin data parallelism">,
    Option<"tp", "tp", "int64_t", "0", "Pin tensor parallelism">,
    Option<"pp", "pp", "int64_t", "0", "Pin pipeline parallelism">,
    Option<"zero", "zero", "int64_t", "-1", "Pin the ZeRO stage">,
    Option<"microBatchSize", "micro-batch-size", "int64_t", "0",
           "Pin the micro-batch size">,
    Option<"recompute", "recompute", "autopar::PlanRecomputeOption",
           "autopar::PlanRecomputeOption::Auto", "Pin recomputation",
           [{::llvm::cl::values(
      clEnumValN(autopar::PlanRecomputeOption::Auto, "auto",
                 "the planner chooses"),
      clEnumValN(autopar::PlanRecomputeOption::None, "none", "none"),
      clEnumValN(autopar::PlanRecomputeOption::Selective, "selective",
                 "attention's inner activations"),
      clEnumValN(autopar::PlanRecomputeOption::Full, "full",
                 "every layer's forward"))}]>,
    Option<"sequenceParallel", "sequence-parallel", "std::string", "",
           "Pin sequence parallelism: on or off (default: the cost "
           "decides)">,
  ];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def ReplicateGraphIO : Pass<"autopar-replicate-graph-io", "mlir::ModuleOp"> {
  let summary = "Keep `@main`'s graph inputs and outputs whole on every "
                "rank of a tensor-parallel group";
  let description = [{
    Runs after `autopar-plan` on a tensor-parallel group's program (a
    replica's, or a pipeline stage's), before `sharding-propagation`. The
    runtime hands every rank of the group the whole input and expects the
    whole output: each graph input (an argument without `autopar.parameter`)
    and each returned value is annotated as replicated on `@autopar_grid`,
    so that `shard-partition` inserts the gathers a split result needs and a
    user that needs an input split slices it. Parameters keep the split the
    plan chose (each rank loads its block).

    A plan that splits nothing (small ops on fast links: every op
    replicated) leaves the program as it is on every rank: the pass then
    removes the grid instead, since upstream partitioning fails on a
    program whose only shardings are replicated ones.
  }];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def SplitPipelineStages : Pass<"autopar-split-pipeline-stages",
                               "mlir::ModuleOp"> {
  let summary = "Split @main into one program per pipeline stage";
  let description = [{
    Reads the `autopar.stage` of every op of `@main` (set by `autopar-plan`)
    and replaces `@main` by nested modules `@stage0`, `@stage1`, ..., each
    holding a `func.func @main` that the CPU backend compiles on its own.
    Stage k's `@main` takes the parameters and graph inputs its ops use
    (argument attributes copied from `@main`), then the activations stage
    k-1 sends (`autopar.activation_in`); it returns the activations stage
    k+1 needs (`autopar.activation_out`), then the graph outputs it computes.
    Activations carry a name (from the ONNX node that computed them), an
    `autopar.dtype` and their `autopar.peer_stage`.

    Stages exchange data only with their neighbours: a value that a later,
    non-adjacent stage needs is passed through every stage in between, so
    that each stage receives from one rank and sends to one rank per
    micro-batch and the runtime's schedule stays a chain. Constants and
    other operand-free pure ops are cloned into every stage that uses them
    rather than sent. A graph output that is an argument or a constant
    comes from stage 0.

    Errors: an op without `autopar.stage`, one that uses a value computed
    in a later stage (stages must not decrease along def-use chains), and a
    value other than a statically shaped tensor that crosses a stage
    boundary.
  }];
}

def LowerEmbeddings : Pass<"autopar-lower-embeddings", "mlir::func::FuncOp"> {
  let summary = "Turn `autopar.embedding` back into a linalg.generic";
  let description = [{
    After partitioning, each `autopar.embedding` becomes a `linalg.generic`
    over its result that reads the table through `tensor.extract`, as the
    importer writes a Gather: the backends know nothing of autopar's ops.
    With a row offset (a rank's block of a vocabulary split over ranks) the
    ids outside the rank's rows read zero.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def UnifyResultAnnotations
    : Pass<"autopar-unify-result-annotations", "mlir::func::FuncOp"> {
  let summary = "Give each op result one `shard.shard` annotation, as "
                "`shard-partition` requires";
  let description = [{
    Runs after `sharding-propagation`. Upstream propagation (release 22)
    annotates an op's result once per set of users it visits, and compares
    shardings by SSA value: a value that the forward and the backward of a
    training step both read ends up with two result annotations, even two
    equal ones, which `shard-partition` cannot take. The first annotation
    stays; the users of every other one read the first instead (their own
    `annotate_for_users` annotations then convert, if a sharding differs).
    A rank-0 tensor made by an op in the function's body and read without
    an annotation (the step's learning rate, its gradient norm) gets a
    replicated one: `shard-partition` needs one per result, and a sum over
    split loops that makes it is then all-reduced.
  }];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def FoldEqualRankChoices
    : Pass<"autopar-fold-equal-rank-choices", "mlir::func::FuncOp"> {
  let summary = "Replace a choice by rank between two equal constant fills "
                "with the fill";
  let description = [{
    Runs after `shard-partition`. A reduction split over a group of ranks
    starts from its init on the group's first rank and from the combiner's
    neutral element on the others (an `scf.if` on the rank), so that the
    all-reduce adds the init once. Upstream's linalg model makes that choice
    for every split contraction, also where the init is the neutral element
    already (a matmul's zero fill). Both branches are then the same tensor,
    but bufferization gives the else branch its own buffer, freed where the
    `scf.if`'s block ends: every rank but the first kept a row-parallel
    matmul's partial result for the whole training step (2 MB more on rank 1
    of the bundled GPT under tp 2).

    Each result of an `scf.if` whose branches yield tensors filled with the
    same constant (`linalg.fill` of a constant or a splat constant; float
    zeros of either sign count as one) becomes the one defined above the
    `scf.if`; the `scf.if` is then dead.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect"];
}

def FoldInitCollectives
    : Pass<"autopar-fold-init-collectives", "mlir::func::FuncOp"> {
  let summary = "Make a collective's result in place where its input is a "
                "tensor no rank computed";
  let description = [{
    Runs after `shard-partition`. Upstream's partitioning reshards every
    operand an op's sharding asks for, the inits of its results included: a
    `tensor.empty` that CSE shared between ops of different shardings, or a
    zero fill, went through an all-to-all or an all-gather, moving bytes no
    rank had computed. The tiny GPT's training step under tp 2 made 68
    all-to-alls, 17 all-gathers and 36 all-slices of such inits per step.

    A collective (`all_gather`, `all_slice`, `all_to_all`, `all_reduce`,
    `reduce_scatter`) whose input is a `tensor.empty` becomes a
    `tensor.empty` of its result type; one whose input is a fill of a
    constant (`linalg.fill` of a constant or a splat constant) becomes that
    fill at its result type, where the collective keeps the constant: data
    movement always; a reduction when it is max, min, the mean, bitwise and
    or or, a sum of zeros or a product of ones.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def CheckPartitionable
    : Pass<"autopar-check-partitionable", "mlir::func::FuncOp"> {
  let summary = "Check that `shard-partition` can partition the annotated "
                "function";
  let description = [{
    Upstream `shard-partition` asserts what it needs of its input, and a
    release build of MLIR crashes where an assertion would have failed: a
    tensor argument without exactly one `shard.shard` user, a result without
    exactly one annotation, an operand not read through an annotation, an op
    without a ShardingInterface that is not fully replicated, a convolution
    or pool split along a window dim (only its channel and batch loops
    partition), an attention split along other dims than its batch and
    heads, or unevenly (a grouped-query attention's key/value heads must
    divide by the heads' split; its unused log-sum-exp needs no
    annotation). Run between
    `sharding-propagation` and `shard-partition`, this pass reports the first
    such op as an error naming it (and the ONNX node it came from), so that
    a plan that cannot be partitioned fails cleanly.
  }];
}

def ExposeProjectionParts
    : Pass<"autopar-expose-projection-parts", "mlir::func::FuncOp"> {
  let summary = "Give the parts of a fused projection (attention's QKV) a "
                "dim of their own";
  let description = [{
    A fused projection computes several results with one MatMul, whose
    columns are then cut apart (GPT's `c_attn` followed by Split into Q, K
    and V). Splitting those columns over tensor-parallel ranks (Megatron's
    column-parallel Linear) gives rank 0 all of Q and half of K: the parts
    do not line up with the ranks' blocks, and every part would have to be
    gathered. This pass rewrites `matmul(A, W[K, P*N])`, its reshape, an
    elementwise op with a bias `b[P*N]`, and the P slices of width N into
    the same computation over `W[K, P, N]` and `b[P, N]` (the parameters'
    bytes viewed with another shape), whose slices take one index of the
    part dim. Splitting the N dim then gives each rank its block of every
    part, and the parts' consumers (attention heads) stay split without any
    collective. Only fused projections whose parameters and intermediate
    results have no other use are rewritten.

    The contraction is a `linalg.generic` marked `autopar.projection_parts`;
    `autopar-merge-projection-parts` turns it back into a `linalg.matmul`
    once partitioned.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def SinkMergingReshapes
    : Pass<"autopar-sink-merging-reshapes", "mlir::func::FuncOp"> {
  let summary = "Carry dims that a reshape merges apart through the linalg "
                "ops around it";
  let description = [{
    torch's MultiheadAttention works on `[seq, batch * heads, d]`: the
    importer writes that Reshape as a split of `heads * d` followed by a
    merge of `batch` and `heads`. With one batch item per replica the merged
    dim is the heads, and tensor parallelism splits it; with more, the heads
    are the inner factor of the merged dim, a block split of it falls
    between batch items, and the attention is not split by heads.

    This pass moves such merges (and the splits that undo them) across the
    linalg ops they feed (upstream's reshape-by-expansion patterns), so that
    transposes, the attention's batched matmuls, softmax and scaling iterate
    over `batch` and `heads` apart, as GPT's attention does. It applies only
    to reshapes that merge dims of size > 1, and never to ops that read
    through windows or to contractions without a batch dim (a matmul turned
    into a generic over a split M would no longer reach BLAS or cuBLAS); the
    backends collapse the new batch dims again
    (`autopar-collapse-batched-contractions`). `autopar-compile` runs it on
    every imported program, before planning.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def MergeProjectionParts
    : Pass<"autopar-merge-projection-parts", "mlir::func::FuncOp"> {
  let summary = "Turn the part-wise contractions of "
                "`autopar-expose-projection-parts` back into matmuls";
  let description = [{
    `C[m, p, n] = A[m, k] * W[k, p, n]` is a matmul over the collapsed
    `(p, n)` columns; the backends know matmuls, not this generic.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}


def SplitSharedInits
    : Pass<"autopar-split-shared-inits", "mlir::func::FuncOp"> {
  let summary = "Give every op that writes into a shared `tensor.empty` or "
                "constant `linalg.fill` an init of its own";
  let description = [{
    Runs just before bufferization. CSE merges identical empty tensors and
    zero fills, so many structured ops name one tensor as their init;
    One-Shot Bufferize then copies the shared buffer for every writer whose
    predecessor's result is still live. Cloning the init (and the empty
    tensor a fill fills) before each writer but the first lets each one
    bufferize to a fresh allocation, filled, not copied. A linalg op whose
    body never reads its init gets an empty tensor instead of a fill. Reads
    of the shared value are left alone.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::tensor::TensorDialect"];
}

def AddCrossEntropyLoss
    : Pass<"autopar-add-cross-entropy-loss", "mlir::ModuleOp"> {
  let summary = "Add PyTorch's cross-entropy loss to a model that returns "
                "logits";
  let description = [{
    For `autopar-compile --mode train --loss cross-entropy:OUTPUT`, on a model
    whose graph has no loss: OUTPUT, float logits `[batch..., classes]`, gets
    `F.cross_entropy`'s loss with its defaults (softmax over the last dim,
    mean over the positions whose label is not `ignore-index`). @main gains
    an int64 input `labels` of OUTPUT's shape without its last dim (after the
    other inputs) and a result named `loss`; the other results stay.

    ```mlir
    func.func @main(..., %x: tensor<8x16xf32>) -> (tensor<8x10xf32> {autopar.output = "logits"})
    // becomes
    func.func @main(..., %x: tensor<8x16xf32>, %labels: tensor<8xi64> {autopar.input = "labels"})
        -> (tensor<8x10xf32> {autopar.output = "logits"}, tensor<f32> {autopar.output = "loss"})
    ```

    With `fused` each position's loss is one `autopar.softmax_cross_entropy`
    (one pass over each row of logits, a one-pass gradient: no
    probabilities, no f32 copy of bf16 logits; docs/design/cross-entropy.md);
    without, the loss is linalg generics (a max, a sum of exponentials and a
    one-hot pick over the classes) that any backend and any sharding take.
    Either way the mean over the valid positions is a generic.

    Errors name the output: no output of that name (the outputs are listed),
    not float logits of rank >= 2, an existing output `loss` or input
    `labels`.
  }];
  let options = [
    Option<"output", "output", "std::string", "\"\"",
           "Name of the graph output holding the logits">,
    Option<"fused", "fused", "bool", "false",
           "Compute each position's loss with autopar.softmax_cross_entropy">,
    Option<"ignoreIndex", "ignore-index", "int64_t", "-100",
           "Labels with this value count neither in the sum nor in the mean "
           "(PyTorch's default)">,
  ];
  let dependentDialects = ["autopar::AutoparDialect",
                           "mlir::linalg::LinalgDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::math::MathDialect",
                           "mlir::tensor::TensorDialect"];
}

def FuseCrossEntropy
    : Pass<"autopar-fuse-cross-entropy", "mlir::func::FuncOp"> {
  let summary = "Compute an imported softmax cross-entropy with "
                "autopar.softmax_cross_entropy";
  let description = [{
    Finds the loss that ONNX `SoftmaxCrossEntropyLoss` (what `F.cross_entropy`
    exports to) and `LogSoftmax` + `NegativeLogLikelihoodLoss` import as: the
    log-softmax of the logits over their last dim (a max, the exponentials,
    their sum, the log-probabilities) and a one-hot pick of each position's
    label. The pick becomes one `autopar.softmax_cross_entropy` (one pass
    over each row, and a one-pass gradient that keeps no probabilities:
    docs/design/cross-entropy.md) and a small elementwise op on its `nll`:

    ```mlir
    // picked[p] = sum_c (c == labels[p]) ? log_softmax(x)[p, c] : 0 becomes
    %nll, %lse = autopar.softmax_cross_entropy ins(%x, %labels64 ...) ...
    %picked = linalg.generic ... // 0 <= labels[p] < C ? -nll[p] : 0
    ```

    The class weights, the ignored labels and the reduction stay as the
    importer wrote them, so the loss and its gradient are the unfused ones'
    (a label out of range picks nothing in both). Integer labels other than
    i64 are sign-extended first.

    Fused only where the classes are the last dim (rank-2 scores, as GPT
    exports write `logits.view(-1, V)`), the logits are f32 (mixed
    precision lowers the op later) and the log-probabilities have no other
    user; other losses stay as they are, correct and unfused. A training step
    is fused before it is differentiated.
  }];
  let dependentDialects = ["autopar::AutoparDialect",
                           "mlir::linalg::LinalgDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::tensor::TensorDialect"];
}

def Differentiate : Pass<"autopar-differentiate", "mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of @main's loss with respect "
                "to its trainable parameters";
  let description = [{
    The first step of training (docs/training.md): `@main(params, inputs) ->
    (outputs)` becomes `@main(params, inputs) -> (loss, gradients...)`, on
    linalg-on-tensors, before any planning, so the planner, the partitioner
    and the backends see the backward pass as ordinary IR.

    - The loss is the result named by `loss` (its `autopar.output` name), or
      else the only scalar float result. It must be a float scalar.
    - Trained: every float parameter (`autopar.parameter`) the loss depends
      on, except those matching a `freeze` glob. They get `autopar.trainable`;
      each gradient result carries `autopar.gradient` = the parameter's name,
      in argument order. Other results are dropped.
    - The adjoint of a linalg op is a linalg op over the same iteration
      domain with the body differentiated; reshapes, slices, padding and
      concatenation get their linear transposes; 2-D matmuls stay matmuls.
    - Every op on the path without a gradient rule is reported in one error
      that lists op types, ONNX nodes and counts.
    - With `loss-scale` (fp16 training) the loss is multiplied by the scale
      first (a generic marked `autopar.loss_scaling`), so the backward starts
      from the scale; the returned loss and gradients are scaled and
      `autopar-apply-optimizer` divides the scale out.
    - With `phase-marks` the forward begins with a call of the runtime's
      `autopar_rt_step_phase(0)` and the backward with one of
      `autopar_rt_step_phase(1)`: autopar-run measures the bytes the
      forward allocates that are still live when the backward begins, the
      activations kept for the backward
      (runtime/include/autopar/runtime/BufferAccounting.h). CPU steps only.
      The calls are `llvm.call`s of an `llvm.func` declaration, which a
      tensor-parallel step's partitioner clones (a `func.func` declaration
      would stop it).
  }];
  let options = [
    Option<"loss", "loss", "std::string", "\"\"",
           "Name of the graph output that is the loss (default: the only "
           "scalar float output)">,
    ListOption<"freeze", "freeze", "std::string",
               "Globs of parameter names to keep fixed">,
    Option<"lossScale", "loss-scale", "double", "0.0",
           "fp16 loss scaling: the loss returned and differentiated is the "
           "loss times this (0: none)">,
    Option<"dynamicLossScale", "dynamic-loss-scale", "bool", "false",
           "Add the optimizer state loss_scaler.scale_offset to the scale "
           "(dynamic loss scaling; autopar-apply-optimizer updates it)">,
    Option<"phaseMarks", "phase-marks", "bool", "false",
           "Call autopar_rt_step_phase where the forward and the backward "
           "begin, for autopar-run's activation measurement">,
  ];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::LLVM::LLVMDialect",
                           "mlir::math::MathDialect",
                           "mlir::tensor::TensorDialect"];
}


def Rematerialize : Pass<"autopar-rematerialize", "mlir::ModuleOp"> {
  let summary = "Recompute forward values in the backward of a "
                "differentiated @main";
  let description = [{
    Recomputation as rematerialisation in the IR (TRAINING.md; the plan's
    `recompute`). Runs right after `autopar-differentiate`, whose backward
    follows the op that makes the returned loss. Each forward value the
    backward reads and `mode` recomputes is computed again, by a clone of
    its op (and of the recomputed ops it reads) placed before the first
    backward op that reads it, and every backward use reads the clone; the
    forward's value then dies in the forward. Clones carry
    `autopar.recomputed`, so that CSE does not merge them back.

    - `selective` (Korthikanti et al.; the planner's model): memory-bound
      ops (elementwise ops, normalisations, softmax, reshapes) are
      recomputed; GEMM and convolution outputs, and ops that read the random
      seed (Dropout's masks), are kept.
    - `full`: every forward op the backward reads is recomputed, except
      the segment boundaries, which are kept (Megatron's per-layer
      checkpoints): the ops after which a single value computed from the
      data is live, as the planner cuts segments. The op making the loss is
      no boundary.
    - `none`: nothing changes.

    Only values the trained parameters flow into are recomputed: labels,
    masks and a mean's count of valid targets (which
    `autopar-accumulate-gradients` replaces by one in the backward) are
    kept, and constants and empty tensors are never cloned. Under a
    tensor-parallel plan a `shard.shard` of an argument (a parameter's
    layout) is never cloned; any other annotation is cloned with the
    value it annotates, in both modes, so a kept value is the one its op
    made, laid out as that op laid it out, and a resharding the backward
    reads (a GEMM's all-gathered input) is repeated there. Annotations
    count as the value they annotate when boundaries are looked for.
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"none\"",
           "none, selective or full">,
  ];
}

def AccumulateGradients
    : Pass<"autopar-accumulate-gradients", "mlir::ModuleOp"> {
  let summary = "One training step over several micro-batches: sum their "
                "gradients as one big batch would";
  let description = [{
    Runs between `autopar-differentiate` and `autopar-apply-optimizer` when a
    step's batch is cut into `micro-batches` parts (DeepSpeed's
    `gradient_accumulation_steps`; docs/training.md, "Gradient
    accumulation"). @main, differentiated for one micro-batch, becomes the
    private `@main_micro_batch`; the new `@main` takes every input with
    `micro-batches` times its leading dim, calls it once per micro-batch in
    an `scf.for` and returns what the differentiated @main returned, for the
    whole batch:

    - The loss is normalised as one big batch: a loss `num / den` whose
      `den` does not depend on the trained parameters (a mean over the valid
      targets, `ignore_index` excluded, class weights summed) becomes
      `sum(num) / sum(den)` over the micro-batches, and each gradient is
      divided by the same `sum(den)`; a loss that is a sum is summed; any
      other loss is averaged (DeepSpeed's `loss / gradient_accumulation_steps`).
    - Parameters the forward updates itself (BatchNorm's running
      statistics, `autopar.update`) carry from one micro-batch to the next,
      as consecutive PyTorch forward passes update them.
    - Training-mode Dropout indexes its masks by global sample: the
      forward's `autopar.sample_offset` argument (the call's first sample
      in the global batch) is `(r x micro-batches + k) x b` for
      micro-batch k of replica r, b its samples, so every split draws the
      masks of one call on the whole batch; @main loses the argument. With
      one call per step (micro-batches=1, data-parallel=1) it becomes 0.

    ```mlir
    func.func @main(%w: tensor<4x3xf32> {autopar.parameter = "w"}, %x: tensor<2x4xf32> {autopar.input = "x"})
        -> (tensor<f32> {autopar.output = "loss"}, tensor<4x3xf32> {autopar.gradient = "w"})
    // with micro-batches=3 becomes
    func.func private @main_micro_batch(%w: tensor<4x3xf32>, %x: tensor<2x4xf32>) -> (tensor<f32>, tensor<4x3xf32>, tensor<f32>)
    func.func @main(%w: tensor<4x3xf32> {autopar.parameter = "w"}, %x: tensor<6x4xf32> {autopar.input = "x"})
        -> (tensor<f32> {autopar.output = "loss"}, tensor<4x3xf32> {autopar.gradient = "w"}) {
      %sums:3 = scf.for %k = %c0 to %c3 step %c1 iter_args(...) {
        %xk = tensor.extract_slice %x[%k * 2, 0] [2, 4] [1, 1]
        %r:3 = func.call @main_micro_batch(%w, %xk)
        ...
    ```

    With `data-parallel=N` (N > 1), @main is one of N data-parallel
    replicas, each with its share of the global batch: the sums (the loss,
    every gradient, a ratio loss's denominator) are flattened into one
    bucket per element type and added over the replicas with one
    `shard.all_reduce` on grid axis 0 of `@autopar_grid` (made, of shape N,
    if the module has none) before the normalisation, and an averaged loss
    is divided by `micro-batches x N`. Every replica then
    holds the gradients of the whole global batch, normalised as one rank
    would normalise them. Parameters the forward updates (BatchNorm's
    running statistics) are carried when the forward shares its statistics
    over the replicas (it holds a `shard.all_reduce`, as the importer writes
    a replica's BatchNorm), and refused otherwise.

    With `zero-stage` 2 or 3 (ZeRO's sharded gradients), the gradient of
    a trained parameter whose dim 0 divides by `data-parallel` is not
    all-reduced but reduce-scattered: one `shard.reduce_scatter` per
    element type over a bucket whose row r holds block r (dim 0) of every
    such gradient, and @main returns replica r's block of it
    (docs/distributed-training.md, "ZeRO"). The other sums are
    all-reduced as before.
  }];
  let options = [
    Option<"microBatches", "micro-batches", "int64_t", "1",
           "Micro-batches per step">,
    Option<"dataParallel", "data-parallel", "int64_t", "1",
           "Data-parallel replicas whose sums are all-reduced (1: none; "
           "with micro-batches=1 too, @main keeps its shape)">,
    Option<"zeroStage", "zero-stage", "int64_t", "0",
           "ZeRO stage: from 2 on, the gradients ZeRO shards are "
           "reduce-scattered (each replica returns its block)">,
    Option<"bucket", "bucket", "bool", "true",
           "All-reduce the sums over the replicas in one flat bucket per "
           "element type; false: one all-reduce per tensor (a tensor-"
           "parallel step, whose gradients are blocks a flat bucket would "
           "gather)">,
  ];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::scf::SCFDialect",
                           "mlir::func::FuncDialect",
                           "mlir::tensor::TensorDialect",
                           "mlir::shard::ShardDialect"];
}

def ApplyOptimizer : Pass<"autopar-apply-optimizer", "mlir::ModuleOp"> {
  let summary = "Turn @main's loss and gradients into one training step: "
                "clipping, learning-rate schedule and optimizer update";
  let description = [{
    Runs after `autopar-differentiate` (docs/training.md). The update is IR,
    with PyTorch's arithmetic (`torch.optim.SGD/Adam/AdamW` single-tensor
    code, `clip_grad_norm_`) and DeepSpeed's schedules (`WarmupLR`,
    `WarmupDecayLR`, `WarmupCosineLR`), so the planner and partitioner see
    it like any other op.

    `@main(params, inputs) -> (loss, gradients)` becomes
    `@main(params, optimizer_states, step, inputs) -> (loss, lr, grad_norm,
    updates)` (docs/design/training-artifact.md):
    - one optimizer state per trained parameter and role (`momentum` for SGD
      with momentum, `exp_avg` and `exp_avg_sq` for Adam/AdamW), argument
      attributes `autopar.optimizer_state` (the role) and `autopar.state_of`;
    - `step` (tensor<i64>, `autopar.step`): the 1-based number of the step;
      the learning rate is the schedule's value at iteration `step - 1`
      (DeepSpeed's `last_batch_iteration`), computed in f64;
    - results `lr` and `grad_norm` (`autopar.metric`): the rate used and the
      global L2 norm of the gradients before clipping;
    - one `autopar.update` result per trained parameter and state: its new
      value.

    With `loss-scale` (fp16, after `autopar-differentiate` with the same
    scale) the loss and gradients are divided by the scale first; a step
    whose gradients are not finite (an overflow) leaves every parameter and
    state as it was. The learning rate and Adam's bias corrections count
    the applied steps (the state `loss_scaler.applied_steps`), as DeepSpeed
    does not step its scheduler on an overflow. Dynamic scaling updates
    `loss_scaler.scale_offset`, `.iter`, `.last_overflow` and
    `.hysteresis_used` (all zero at the start) as DeepSpeed's
    `DynamicLossScaler.update_scale`. Metrics `loss_scale` (the scale this
    step used) and `overflow` (1 if the step was skipped) are added.

    With `zero-stage` 1 to 3 and `data-parallel` N > 1 (ZeRO's sharded
    optimizer; docs/distributed-training.md, "ZeRO"), a trained parameter
    whose dim 0 divides by N is updated by blocks: replica r (coordinate r
    on axis 0 of `@autopar_grid`) holds block r (dim 0) of its optimizer
    states (arguments of the block's shape), takes block r of the
    parameter and of its gradient (`shard.all_slice`; a gradient that
    `autopar-accumulate-gradients` already reduce-scattered is used as
    it is), updates the block, and the new parameter is put together
    again by one `shard.all_gather` per element type. The global norm adds
    the blocks' sums of squares over the replicas (one all-reduce) to the
    replicated gradients'. Other parameters are updated whole, as without
    ZeRO.

    With `pipeline-stages` P > 1 (pipeline-parallel training,
    docs/distributed-training.md), @main is one stage's step and holds that
    stage's parameters only: the sum of squares is all-reduced over axis 2
    of `@autopar_grid` (dp x tp x P) before the square root, so that every
    stage clips by the global norm.

    A parameter argument marked `autopar.tp_split` is this rank's block of
    a tensor-parallel split (a pipeline stage's step, built after its
    programs were partitioned): the blocks' sum of squares is all-reduced
    over axis 1 (tp) before it joins the replicated parameters' (counted
    once). ZeRO shards such a block as any parameter (its dim 0 over the
    replicas: PyTorch FSDP2's layout over TP), and the sum of squares of
    those blocks is all-reduced over axis 0 first, then with the other tp
    blocks' over axis 1. A parameter
    marked `autopar.tied_copy` (a tied weight an earlier stage holds and
    counts) adds nothing to the stage's sum.
  }];
  let options = [
    Option<"optimizer", "optimizer", "autopar::OptimizerKind",
           "autopar::OptimizerKind::SGD", "The update rule", [{::llvm::cl::values(
      clEnumValN(autopar::OptimizerKind::SGD, "sgd", "torch.optim.SGD"),
      clEnumValN(autopar::OptimizerKind::Adam, "adam",
                 "torch.optim.Adam (L2 weight decay)"),
      clEnumValN(autopar::OptimizerKind::AdamW, "adamw",
                 "torch.optim.AdamW (decoupled weight decay)"))}]>,
    Option<"lr", "lr", "double", "1e-3", "Learning rate (the schedule's "
           "peak)">,
    Option<"momentum", "momentum", "double", "0.0", "SGD momentum">,
    Option<"dampening", "dampening", "double", "0.0", "SGD dampening">,
    Option<"nesterov", "nesterov", "bool", "false", "SGD Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", "0.0", "Weight decay">,
    Option<"beta1", "beta1", "double", "0.9", "Adam beta1">,
    Option<"beta2", "beta2", "double", "0.999", "Adam beta2">,
    Option<"eps", "eps", "double", "1e-8", "Adam epsilon">,
    Option<"clip", "clip", "double", "0.0",
           "Clip the global gradient norm to this (0: no clipping)">,
    Option<"schedule", "schedule", "autopar::LrSchedule",
           "autopar::LrSchedule::Constant", "The learning-rate schedule",
           [{::llvm::cl::values(
      clEnumValN(autopar::LrSchedule::Constant, "constant", "lr throughout"),
      clEnumValN(autopar::LrSchedule::Warmup, "warmup", "DeepSpeed WarmupLR"),
      clEnumValN(autopar::LrSchedule::WarmupDecay, "warmup-decay",
                 "DeepSpeed WarmupDecayLR"),
      clEnumValN(autopar::LrSchedule::WarmupCosine, "warmup-cosine",
                 "DeepSpeed WarmupCosineLR"))}]>,
    Option<"warmupType", "warmup-type", "autopar::WarmupType",
           "autopar::WarmupType::Log", "How the warm-up rises",
           [{::llvm::cl::values(
      clEnumValN(autopar::WarmupType::Log, "log", "log(iteration + 1) / "
                 "log(warmup steps)"),
      clEnumValN(autopar::WarmupType::Linear, "linear",
                 "iteration / warmup steps"))}]>,
    Option<"warmupMinLr", "warmup-min-lr", "double", "0.0",
           "WarmupLR/WarmupDecayLR: the rate at iteration 0">,
    Option<"warmupMaxLr", "warmup-max-lr", "double", "0.001",
           "WarmupLR/WarmupDecayLR: the rate after warm-up">,
    Option<"warmupSteps", "warmup-steps", "int64_t", "1000",
           "Warm-up iterations">,
    Option<"totalSteps", "total-steps", "int64_t", "0",
           "WarmupDecayLR/WarmupCosineLR: the iteration the schedule ends at">,
    Option<"warmupMinRatio", "warmup-min-ratio", "double", "0.0",
           "WarmupCosineLR: the rate's ratio to lr at iteration 0">,
    Option<"cosMinRatio", "cos-min-ratio", "double", "0.0001",
           "WarmupCosineLR: the ratio at the end">,
    Option<"lossScale", "loss-scale", "double", "0.0",
           "fp16: the (initial) loss scale autopar-differentiate applied; "
           "0: no loss scaling">,
    Option<"dynamicLossScale", "dynamic-loss-scale", "bool", "false",
           "fp16: DeepSpeed's dynamic loss scaler">,
    Option<"lossScaleWindow", "loss-scale-window", "int64_t", "1000",
           "Dynamic scaling: steps without overflow before the scale doubles">,
    Option<"hysteresis", "hysteresis", "int64_t", "2",
           "Dynamic scaling: overflows before the scale halves">,
    Option<"consecutiveHysteresis", "consecutive-hysteresis", "bool", "false",
           "Dynamic scaling: a step without overflow restores the hysteresis">,
    Option<"minLossScale", "min-loss-scale", "double", "1.0",
           "Dynamic scaling: the smallest scale">,
    Option<"zeroStage", "zero-stage", "int64_t", "0",
           "ZeRO stage: from 1 on, optimizer states are sharded over the "
           "data-parallel replicas">,
    Option<"dataParallel", "data-parallel", "int64_t", "1",
           "Data-parallel replicas (axis 0 of @autopar_grid) ZeRO shards "
           "over">,
    Option<"pipelineStages", "pipeline-stages", "int64_t", "1",
           "Pipeline stages (axis 2 of @autopar_grid, dp x tp x pp), each "
           "updating its own parameters: the global norm's sum of squares "
           "is all-reduced over them">,
  ];
  let dependentDialects = ["mlir::linalg::LinalgDialect",
                           "mlir::arith::ArithDialect",
                           "mlir::math::MathDialect",
                           "mlir::tensor::TensorDialect",
                           "mlir::shard::ShardDialect"];
}

def ShardTrainingState
    : Pass<"autopar-shard-training-state", "mlir::ModuleOp"> {
  let summary = "Lay out a tensor-parallel training step's optimizer "
                "states and updates as their parameters";
  let description = [{
    Runs on a training step whose forward a tensor-parallel plan annotated
    (`autopar-plan`, then `autopar-differentiate` and
    `autopar-apply-optimizer`), before `sharding-propagation`
    (docs/distributed-training.md, "Tensor parallelism"). A rank keeps its
    block of each split parameter from step to step, so everything the step
    carries for it is laid out the same way:
    - each optimizer state argument (`autopar.state_of`) of its parameter's
      shape gets its parameter's annotation (replicated for another shape);
    - each returned update (`autopar.update`) leaves as the argument it
      replaces: `shard-partition` then returns each rank's block;
    - the optimizer's reads of a parameter go through the parameter's one
      annotation, as `shard-partition` requires of block arguments;
    - the inputs and the other results are whole on every rank; rank-0
      tensors (the step number, the loss, the metrics) are never annotated,
      as shard-partition does not partition them, and the annotations the
      plan gave them go (`autopar-unify-result-annotations` gives each one
      after propagation);
    - a parameter that @main passes to a call (a data-parallel replica's
      forward and backward, outlined) takes the annotation the callee reads
      it with.

    A module without `@autopar_grid` (a plan that splits nothing) is left
    as it is.
  }];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

#endif // AUTOPAR_TRANSFORMS_PASSES
