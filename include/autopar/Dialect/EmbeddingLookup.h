//===- EmbeddingLookup.h - Recognising embedding lookups --------*- C++ -*-===//
//
// The importer turns ONNX Gather with run-time indices into a linalg.generic
// that reads its table through tensor.extract in its body (Shape.cpp). The
// planner prices such a lookup as an op with the table as an operand, and
// partitioning replaces it by `autopar.embedding` (AutoparOps.td), whose
// ShardingInterface can split the vocabulary. This header recognises both
// forms; raising and lowering are in autopar/Transforms/Embedding.h.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_DIALECT_EMBEDDINGLOOKUP_H
#define AUTOPAR_DIALECT_EMBEDDINGLOOKUP_H

#include "mlir/IR/Value.h"

#include <optional>

namespace mlir {
class Operation;
} // namespace mlir

namespace autopar {

/// Rows of `table` picked by `ids`, ONNX Gather on axis 0.
struct EmbeddingLookup {
  mlir::Value table, ids;
  int64_t numRows = 0; ///< rows of the whole table (ids are clamped to it)
};

/// An `autopar.embedding`, or the importer's gather generic on axis 0 of a
/// table defined outside it; nullopt for anything else.
std::optional<EmbeddingLookup> matchEmbeddingLookup(mlir::Operation *op);

} // namespace autopar

#endif // AUTOPAR_DIALECT_EMBEDDINGLOOKUP_H
