//===- AutoparOps.td - autopar's own ops -------------------*- tablegen -*-===//
//
// Ops for what upstream dialects cannot say in a form that sharding
// understands (autopar.embedding: between the planner's annotation and the
// end of partitioning), and fused ops the backends lower to kernels
// (autopar.attention and its gradient: from autopar-fuse-attention to the
// kernel calls, docs/design/attention.md; autopar.softmax_cross_entropy and
// its gradient: from autopar-add-cross-entropy-loss to the kernel calls,
// docs/design/cross-entropy.md).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DIALECT_AUTOPAROPS
#define AUTOPAR_DIALECT_AUTOPAROPS

include "mlir/Dialect/Shard/Interfaces/ShardingInterface.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Autopar_Dialect : Dialect {
  let name = "autopar";
  let cppNamespace = "::autopar";
  let summary = "autopar's ops for partitioning what upstream cannot";
  let description = [{
    Upstream's `shard` dialect partitions ops through their ShardingInterface.
    An embedding lookup imported from ONNX Gather is a `linalg.generic` that
    reads its table through `tensor.extract` inside its body: the table is not
    an operand, so no sharding can reach it. `autopar.embedding` makes the
    table an operand and says how the lookup splits.

    The dialect also owns the `autopar.*` attributes the importer and the
    passes put on `@main`, its arguments and results, and on ops
    (docs/design/training-artifact.md, docs/design/artifact.md); their names
    are `autopar::attrs::k*` (autopar/Dialect/Attributes.h) and the dialect
    verifies their types wherever they appear.
  }];
  let discardableAttrs = (ins
    // @main's arguments and results (the importer).
    "::mlir::StringAttr":$parameter,
    "::mlir::StringAttr":$input,
    "::mlir::StringAttr":$output,
    "::mlir::StringAttr":$dtype,
    // The module (the importer, autopar-plan).
    "::mlir::StringAttr":$model,
    "::mlir::DictionaryAttr":$plan,
    // Pipeline stages (autopar-plan, autopar-split-pipeline-stages).
    "::mlir::IntegerAttr":$stage,
    "::mlir::StringAttr":$activation_in,
    "::mlir::StringAttr":$activation_out,
    "::mlir::IntegerAttr":$peer_stage,
    // A training step (autopar-differentiate, autopar-apply-optimizer).
    "::mlir::UnitAttr":$trainable,
    "::mlir::StringAttr":$gradient,
    "::mlir::StringAttr":$optimizer_state,
    "::mlir::StringAttr":$state_of,
    "::mlir::UnitAttr":$step,
    "::mlir::UnitAttr":$seed,
    "::mlir::UnitAttr":$sample_offset,
    "::mlir::StringAttr":$metric,
    "::mlir::StringAttr":$update,
    "::mlir::UnitAttr":$loss_scaling,
    // ZeRO-3 (autopar-accumulate-gradients): a parameter argument that is
    // one of this many blocks along dim 0.
    "::mlir::IntegerAttr":$zero_blocks,
    // Tensor parallelism within pipeline stages: a parameter argument that
    // is this rank's block, along this dim, of a split over axis 1 (tp).
    "::mlir::IntegerAttr":$tp_split,
    // Tied weights across pipeline stages: a trained parameter argument of
    // a stage's step that another, earlier stage also holds (and counts in
    // the global norm, and checkpoints).
    "::mlir::UnitAttr":$tied_copy,
    // Pipeline-parallel training (lib/Driver/PipelineTraining.cpp): a
    // forward value the stage's backward reads, kept per micro-batch; a
    // sum over the micro-batches (the step's gradients and loss).
    "::mlir::StringAttr":$residual,
    "::mlir::StringAttr":$accumulator,
    // autopar-rematerialize: a forward op's clone in the backward.
    "::mlir::UnitAttr":$recomputed,
    // Markers of later passes.
    "::mlir::UnitAttr":$projection_parts,
    "::mlir::ArrayAttr":$arg_shapes,
    "::mlir::DenseI64ArrayAttr":$noalias_pointer_args,
    // CPU threads (autopar-linalg-to-loops, autopar-outline-loop-nests): a
    // loop whose iterations write disjoint elements, and an outlined
    // function running a range of such a loop's iterations.
    "::mlir::IntegerAttr":$parallel,
    "::mlir::DenseI64ArrayAttr":$parallel_range
  );
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
}

class Autopar_Op<string mnemonic, list<Trait> traits = []>
    : Op<Autopar_Dialect, mnemonic, traits>;

def Autopar_EmbeddingOp : Autopar_Op<"embedding", [
    Pure,
    DeclareOpInterfaceMethods<ShardingInterface, [
      "getLoopIteratorTypes", "getReductionLoopIteratorKinds",
      "getIndexingMaps", "partition"]>]> {
  let summary = "Rows of a table picked by integer ids (ONNX Gather, axis 0)";
  let description = [{
    `result[i..., j...] = table[ids[i...] - row_offset, j...]` for the ids
    in `[row_offset, row_offset + dim(table, 0))`, and zero for the others.
    Ids are first taken as ONNX Gather takes them against the whole table of
    `num_rows` rows: a negative id counts from the end, and an id out of range
    is clamped into it.

    Without `row_offset` and with `num_rows` the table's rows this is the
    plain lookup. A rank holding rows `[row_offset, row_offset + n)` of a
    vocabulary split over ranks contributes its rows and zeros elsewhere, so
    the sum over the ranks is the lookup: Megatron-LM's vocabulary-parallel
    embedding. Its sharding loops are the ids' dims, the table's row dims
    after the first, and the vocabulary as a sum reduction; splitting the
    vocabulary leaves a partial sum that partitioning all-reduces.

    ```mlir
    %e = autopar.embedding %table[%ids] {num_rows = 512 : i64}
        : tensor<512x128xf32>, tensor<2x32xi64> -> tensor<2x32x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$table,
                       RankedTensorOf<[AnySignlessInteger]>:$ids,
                       Optional<Index>:$row_offset,
                       I64Attr:$num_rows);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $table `[` $ids `]` (`offset` $row_offset^)? attr-dict `:` type($table)
    `,` type($ids) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The maps of the table, the ids and the result over the sharding
    /// loops of a lookup with ids of rank `idsRank` and a result of rank
    /// `resultRank`: the result's dims, then the vocabulary.
    static ::llvm::SmallVector<::mlir::AffineMap>
    getLookupMaps(::mlir::MLIRContext *ctx, int64_t idsRank,
                  int64_t resultRank);
  }];
}

//===----------------------------------------------------------------------===//
// Fused attention (docs/design/attention.md)
//===----------------------------------------------------------------------===//

class Autopar_AttentionBase<string mnemonic, list<Trait> traits = []>
    : Autopar_Op<mnemonic, !listconcat(traits, [
        AttrSizedOperandSegments,
        DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
        DestinationStyleOpInterface])> {
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let hasVerifier = 1;
  let assemblyFormat = [{
    `ins` `(` $query `,` $key `,` $value (`mask` $mask^)?
      (`saved` `(` $saved^ `:` type($saved) `)`)? `:`
      type($query) `,` type($key) `,` type($value) (`,` type($mask)^)? `)`
    `outs` `(` $outputs `:` type($outputs) `)` attr-dict (`->` type($results)^)?
  }];
  code commonClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputsMutable();
    }
    /// The kernel flags: bit 0 causal, bit 1 a mask is present.
    int32_t getKernelFlags() {
      return (getCausal() ? 1 : 0) | (getMask() ? 2 : 0);
    }
  }];
}

def Autopar_AttentionOp : Autopar_AttentionBase<"attention"> {
  let summary = "Scaled dot-product attention, fused (FlashAttention-2)";
  let description = [{
    `out[b,h,i,:] = sum_j softmax_j(scale * q[b,h,i,:].k[b,g(h),j,:] +
    mask[b,h,i,j])[j] * v[b,g(h),j,:]` over the keys `j` the query sees: all
    of them, or with `causal` those with `j <= i`. `g(h) = h / (H / Hkv)`:
    with fewer key/value heads than query heads (grouped-query attention)
    each key/value head serves `H / Hkv` consecutive query heads. `lse` is
    each row's log-sum-exp, `log(sum_j exp(s_ij))` in f32, which the
    gradient uses to recompute the probabilities instead of keeping the
    `S x T` matrix. A row with no visible key gives zeros and `-inf`.

    Shapes: query `[B, H, S, D]`, key `[B, Hkv, T, D]`, value
    `[B, Hkv, T, E]`, the optional additive mask rank 4 with each dim its
    full size or 1 (broadcast), outputs `out [B, H, S, E]` (the query's
    element type) and `lse [B, H, S]` (f32). With tensors the outputs are
    destinations and the op returns them; with memrefs it writes them.

    ```mlir
    %o, %lse = autopar.attention ins(%q, %k, %v : tensor<2x4x16x8xf32>,
        tensor<2x4x16x8xf32>, tensor<2x4x16x8xf32>)
        outs(%o0, %l0 : tensor<2x4x16x8xf32>, tensor<2x4x16xf32>)
        {scale = 0.35355339 : f64, causal}
        -> tensor<2x4x16x8xf32>, tensor<2x4x16xf32>
    ```
  }];
  let arguments = (ins AnyShaped:$query, AnyShaped:$key, AnyShaped:$value,
                       Optional<AnyShaped>:$mask,
                       Variadic<AnyShaped>:$saved,
                       Variadic<AnyShaped>:$outputs,
                       F64Attr:$scale, UnitAttr:$causal);
  let extraClassDeclaration = commonClassDeclaration # [{
    ::mlir::Value getOutInit() { return getOutputs()[0]; }
    ::mlir::Value getLseInit() { return getOutputs()[1]; }
  }];
}

def Autopar_AttentionGradOp : Autopar_AttentionBase<"attention_grad"> {
  let summary = "The gradients of autopar.attention's query, key and value";
  let description = [{
    Given the forward's operands, its `out` and `lse` and the gradient of
    `out` (`saved = (out, lse, d_out)`), writes `d_query`, `d_key` and
    `d_value` (`outputs`, overwritten): FlashAttention-2's backward, which
    recomputes each tile's probabilities from `lse`. Key and value gradients
    sum over the query heads that share a key/value head. The mask is a
    constant of the step and gets no gradient.
  }];
  let arguments = (ins AnyShaped:$query, AnyShaped:$key, AnyShaped:$value,
                       Optional<AnyShaped>:$mask,
                       Variadic<AnyShaped>:$saved,
                       Variadic<AnyShaped>:$outputs,
                       F64Attr:$scale, UnitAttr:$causal);
  let extraClassDeclaration = commonClassDeclaration;
}

//===----------------------------------------------------------------------===//
// Fused softmax cross-entropy (docs/design/cross-entropy.md)
//===----------------------------------------------------------------------===//

class Autopar_CrossEntropyBase<string mnemonic, list<Trait> traits = []>
    : Autopar_Op<mnemonic, !listconcat(traits, [
        AttrSizedOperandSegments,
        DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
        DestinationStyleOpInterface])> {
  let results = (outs Variadic<AnyRankedTensor>:$results);
  let hasVerifier = 1;
  let assemblyFormat = [{
    `ins` `(` $logits `,` $labels
      (`saved` `(` $saved^ `:` type($saved) `)`)? `:`
      type($logits) `,` type($labels) `)`
    `outs` `(` $outputs `:` type($outputs) `)` attr-dict (`->` type($results)^)?
  }];
  let arguments = (ins AnyShaped:$logits, AnyShaped:$labels,
                       Variadic<AnyShaped>:$saved,
                       Variadic<AnyShaped>:$outputs,
                       I64Attr:$ignore_index);
  code commonClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getOutputsMutable();
    }
  }];
}

def Autopar_SoftmaxCrossEntropyOp
    : Autopar_CrossEntropyBase<"softmax_cross_entropy"> {
  let summary = "Per-position softmax cross-entropy, fused";
  let description = [{
    For each position `p` of the logits' leading dims and the classes `c` of
    the last: `lse[p] = log(sum_c exp(x[p, c]))` and
    `nll[p] = lse[p] - x[p, labels[p]]`, or 0 where `labels[p]` is
    `ignore_index`. One pass over each row (the online softmax: a running
    maximum and a rescaled sum), so neither the probabilities nor an f32
    copy of low-precision logits is formed. A label outside `[0, C)` that is
    not `ignore_index` picks no logit (`nll = lse`), as the unfused one-hot
    pick does. The mean over the valid positions is left to the caller.

    Shapes: logits `[P..., C]` (f32, bf16 or f16), labels `[P...]` (i64),
    outputs `nll [P...]` and `lse [P...]` (f32). With tensors the outputs
    are destinations and the op returns them; with memrefs it writes them.

    ```mlir
    %nll, %lse = autopar.softmax_cross_entropy ins(%x, %y :
        tensor<4x16x50xf32>, tensor<4x16xi64>)
        outs(%n0, %l0 : tensor<4x16xf32>, tensor<4x16xf32>)
        {ignore_index = -100 : i64} -> tensor<4x16xf32>, tensor<4x16xf32>
    ```
  }];
  let extraClassDeclaration = commonClassDeclaration # [{
    ::mlir::Value getNllInit() { return getOutputs()[0]; }
    ::mlir::Value getLseInit() { return getOutputs()[1]; }
  }];
}

def Autopar_SoftmaxCrossEntropyGradOp
    : Autopar_CrossEntropyBase<"softmax_cross_entropy_grad"> {
  let summary = "The gradient of autopar.softmax_cross_entropy's logits";
  let description = [{
    Given the forward's operands, its `lse` and the gradient of `nll`
    (`saved = (lse, d_nll)`, both f32 `[P...]`), writes
    `d_logits[p, c] = d_nll[p] * (exp(x[p, c] - lse[p]) - [c == labels[p]])`,
    or 0 for the whole row where `labels[p]` is `ignore_index` (`outputs`,
    overwritten, the logits' shape and element type): one pass that reads
    the logits and writes their gradient, the probabilities recomputed from
    `lse`.
  }];
  let extraClassDeclaration = commonClassDeclaration;
}

#endif // AUTOPAR_DIALECT_AUTOPAROPS
