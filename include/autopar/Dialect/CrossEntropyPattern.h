//===- CrossEntropyPattern.h - Recognising softmax cross-entropy -*- C++
//-*-===//
//
// `F.cross_entropy` as the importer writes it (ONNX SoftmaxCrossEntropyLoss,
// or LogSoftmax then NegativeLogLikelihoodLoss): the log-softmax of the
// logits over the classes, then a one-hot pick of each position's label.
// autopar-fuse-cross-entropy (autopar/Transforms/Passes.td) computes the
// pick with `autopar.softmax_cross_entropy` instead
// (docs/design/cross-entropy.md).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DIALECT_CROSSENTROPYPATTERN_H
#define AUTOPAR_DIALECT_CROSSENTROPYPATTERN_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace autopar {

/// A matched cross-entropy: `picked[p] = sum_c (c == labels[p]) ?
/// log_softmax(logits)[p, c] : 0`, the classes the last dim.
struct CrossEntropyPattern {
  /// The one-hot pick (a generic reducing over the classes).
  mlir::linalg::GenericOp pick;
  /// The log-softmax's ops: a collapse_shape of the log-probabilities if
  /// any, the log-probabilities, the reshapes that drop the reductions'
  /// kept dims, the sum of exponentials, the exponentials, the maximum.
  /// Only the pattern uses them.
  llvm::SmallVector<mlir::Operation *> logSoftmax;
  /// The logits `[Q..., C]` and the labels `[P...]` (integers). The pick
  /// reads the logits' log-probabilities collapsed by `logitsReassociation`
  /// (positions merged, the classes a group of their own) when it is not
  /// empty, as they are otherwise (then P = Q).
  mlir::Value logits, labels;
  llvm::SmallVector<mlir::ReassociationIndices> logitsReassociation;
};

/// The cross-entropy whose one-hot pick is `pick`, or nullopt. The
/// log-probabilities must have no user but the pick (a model that also
/// returns them keeps them).
std::optional<CrossEntropyPattern>
matchCrossEntropyPattern(mlir::Operation *pick);

} // namespace autopar

#endif // AUTOPAR_DIALECT_CROSSENTROPYPATTERN_H
