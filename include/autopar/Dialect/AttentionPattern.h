//===- AttentionPattern.h - Recognising attention ---------------*- C++ -*-===//
//
// softmax(scale * Q K^T + mask) V as the importer writes it: two
// contractions around a row softmax (docs/design/attention.md). The
// planner prices a match as FlashAttention (no S x T tensor in memory), and
// autopar-fuse-attention (autopar/Transforms/Passes.td) replaces it by
// `autopar.attention`.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DIALECT_ATTENTIONPATTERN_H
#define AUTOPAR_DIALECT_ATTENTIONPATTERN_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>

namespace autopar {

/// Masked scores at or below this are "no attention": the softmax gives them
/// an exact zero in f32 (exp(-1e4) underflows once shifted by the max), so a
/// masked_fill needs a fill this low, and a mask of such values above the
/// diagonal and zeros on and below it is the causal mask.
constexpr double kAttentionMaskedBelow = -1e4;

/// Which attention to recognise.
struct AttentionPatternOptions {
  /// Head dims up to this (0: any).
  int64_t maxHeadDim = 0;
  /// Head dims that are multiples of this.
  int64_t headDimMultiple = 1;
};

/// The head dims the CUDA attention kernels take (multiples of 8, at most
/// 128): the GPU pipeline fuses only those, and the planner prices only
/// those as fused on a GPU cluster.
inline AttentionPatternOptions cudaAttentionKernelLimits() {
  return AttentionPatternOptions{/*maxHeadDim=*/128, /*headDimMultiple=*/8};
}

/// A matched attention, from its score contraction to its output one.
struct AttentionPattern {
  mlir::linalg::LinalgOp scores, output;
  /// The elementwise and softmax ops between them, users first.
  llvm::SmallVector<mlir::Operation *> interior;
  /// The operands as the contractions read them, through these maps (over
  /// the loops of `scores`, and of `output` for the value). The query is
  /// read unscaled (a constant scale of it or of the key is in `scale`).
  /// Key and value may be read from before a repeat over the query heads
  /// (grouped-query attention exported as Expand + Reshape or
  /// repeat_interleave): then their maps read a batch loop `l` as
  /// `l floordiv g` or not at all (`kvRepeat`).
  mlir::Value query, key, value;
  mlir::AffineMap queryMap, keyMap, valueMap;
  /// The ops between those operands and the contractions (the scales, the
  /// repeats looked through): the fused op does not need them, though they
  /// may have other users.
  llvm::SmallVector<mlir::Operation *> operandOps;
  unsigned batchDims = 0;
  /// Per batch dim of the scores: 1 when key and value read it as it is,
  /// g > 1 when g consecutive query heads share a key/value head
  /// (`l floordiv g`), 0 when they do not read it (shared by all).
  llvm::SmallVector<int64_t> kvRepeat;
  /// The scores' batch dims in the fused op's order (those read as they are
  /// first, then the one repeated, then the broadcast ones): the first
  /// `outerBatch` (0 or 1) of them make its B, the others its H (a unit B
  /// when 0).
  llvm::SmallVector<unsigned> batchOrder;
  unsigned outerBatch = 0;
  /// Loops of `scores`: batch..., i (queries), j (keys), d (head dim).
  llvm::SmallVector<unsigned> scoreBatch;
  unsigned i = 0, j = 0, d = 0;
  /// Loops of `output`: batch..., i, j (summed), e (value dim).
  llvm::SmallVector<unsigned> outBatch;
  unsigned oi = 0, oj = 0, oe = 0;
  double scale = 1;
  /// The additive mask as its generic read it (`maskMap` over the scores'
  /// dims), and its values when known at compile time.
  mlir::Value mask;
  mlir::AffineMap maskMap;
  mlir::DenseFPElementsAttr maskConstant;
  /// A masked_fill whose condition is known only at run time: the mask is
  /// `maskFill` where the condition is `maskedWhenTrue`, else 0.
  mlir::Value maskCondition;
  double maskFill = 0;
  bool maskedWhenTrue = true;
  /// Set when the mask is built (autopar-fuse-attention): a constant causal
  /// mask becomes this flag.
  bool causal = false;
};

/// The attention whose output contraction is `output`, or nullopt.
std::optional<AttentionPattern>
matchAttentionPattern(mlir::Operation *output,
                      const AttentionPatternOptions &options = {});

/// Whether the pattern's mask is the causal one, over (i, j) only: 0 where
/// j <= i and at most kAttentionMaskedBelow above. Its values come from a
/// constant, or are computed at compile time when the mask is made only of
/// constants, fills and index arithmetic (an exported Trilu and Where).
/// `cache`, when given, keeps each evaluated mask's answer: a model's layers
/// share one mask, evaluated once.
bool isCausalMask(const AttentionPattern &pattern,
                  llvm::DenseMap<mlir::Value, bool> *cache = nullptr);

} // namespace autopar

#endif // AUTOPAR_DIALECT_ATTENTIONPATTERN_H
