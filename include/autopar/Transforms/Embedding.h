//===- Embedding.h - Embedding lookups for partitioning ---------*- C++ -*-===//
//
// Partitioning replaces the importer's embedding lookup (recognised by
// autopar/Dialect/EmbeddingLookup.h) by `autopar.embedding`, whose
// ShardingInterface can split the vocabulary; after partitioning,
// `autopar-lower-embeddings` turns it back into a linalg.generic.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_TRANSFORMS_EMBEDDING_H
#define AUTOPAR_TRANSFORMS_EMBEDDING_H

#include "autopar/Dialect/EmbeddingLookup.h"

#include "mlir/IR/Value.h"

#include <optional>

namespace mlir {
class OpBuilder;
class Operation;
} // namespace mlir

namespace autopar {

/// Replaces the importer's gather generic `op` (matchEmbeddingLookup) by an
/// `autopar.embedding` and returns it.
mlir::Operation *raiseEmbeddingLookup(mlir::Operation *op);

} // namespace autopar

#endif // AUTOPAR_TRANSFORMS_EMBEDDING_H
