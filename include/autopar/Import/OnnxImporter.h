//===- OnnxImporter.h - ONNX model to linalg-on-tensors --------*- C++ -*-===//
//
// Imports an ONNX model into a `builtin.module` holding one `func.func @main`
// in linalg-on-tensors form. Parameters (float initializers) become function
// arguments that carry their initializer name; their bytes are never read.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IMPORT_ONNXIMPORTER_H
#define AUTOPAR_IMPORT_ONNXIMPORTER_H

#include "autopar/Dialect/Attributes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace autopar {

/// Options that steer the import.
struct ImportOptions {
  /// Concrete shapes for graph inputs, by input name (`--input-shape`). A
  /// shape given here overrides the model's dims, static or symbolic.
  llvm::StringMap<llvm::SmallVector<int64_t>> inputShapes;
  /// Integer initializers with at most this many elements are read at import
  /// time as compile-time constants: they are shape data (Reshape targets,
  /// Slice bounds), not weights. Float initializers are never read.
  int64_t maxFoldedInitializerElements = 4096;
  /// Graph inputs frozen to the contents of a .npy file (`--const-input`):
  /// they become compile-time constants instead of entry arguments. Needed
  /// when an input decides a shape (a Reshape target, Slice bounds).
  llvm::StringMap<std::string> constantInputs;
  /// Compiling a training step: an op that updates a parameter as a side
  /// effect of training (BatchNormalization's running statistics, which
  /// PyTorch's exports leave as unused outputs) returns the new value as a
  /// result marked attrs::kUpdate, with PyTorch's arithmetic.
  bool trainingStateUpdates = false;
  /// Import a training-mode model for evaluation: Dropout off whatever its
  /// training_mode, BatchNormalization on its running statistics (its
  /// running-statistics outputs, if used, are the inputs unchanged).
  bool evalMode = false;
  /// Re-importing a model at a smaller batch (one micro-batch of gradient
  /// accumulation): `exportedBatch` is the batch its inputs lead with in the
  /// file (or --input-shape), the inputs now lead with `exportedBatch /
  /// batchRatio`. PyTorch's traced exports bake the batch into Reshape
  /// targets (`x.view(b, t, h, d)` becomes the constant [b, t, h, d]); a
  /// Reshape target whose leading dim is `batchRatio` times the input's,
  /// or whose leading dim the ratio divides when the target does not fit
  /// (a batch merged with other dims), is scaled down by the ratio.
  int64_t batchRatio = 1;
  /// Importing one of N data-parallel replicas of a training step (N > 1):
  /// BatchNormalization's batch statistics are the global batch's, as
  /// PyTorch's SyncBatchNorm computes them: each replica's means are
  /// averaged over the replicas with a `shard.all_reduce` on axis 0 of
  /// `@autopar_grid` (a grid of shape N, made if missing), so the forward,
  /// its gradient and the running statistics equal one rank's.
  int64_t dataParallelReplicas = 1;
};

/// Parses `--const-input` values of the form `NAME=FILE.npy` into
/// `options.constantInputs`.
llvm::LogicalResult parseConstInputFlag(llvm::StringRef flag,
                                        ImportOptions &options,
                                        std::string &error);

/// Parses `--input-shape` values of the form `NAME=D0xD1x...` into
/// `options.inputShapes`. Returns an error message on malformed input.
llvm::LogicalResult parseInputShapeFlag(llvm::StringRef flag,
                                        ImportOptions &options,
                                        std::string &error);

/// Imports the ONNX model at `path` (binary protobuf, or the ONNX textual
/// syntax when the file ends in `.onnxtxt`). Errors are reported as
/// diagnostics located at the ONNX node (name and op type) that caused them.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxFile(mlir::MLIRContext *context,
                                                 llvm::StringRef path,
                                                 const ImportOptions &options);

/// Imports a model already held in memory; `bufferName` names it in errors.
/// `isText` selects the ONNX textual syntax.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxBuffer(mlir::MLIRContext *context, llvm::StringRef buffer,
                 llvm::StringRef bufferName, bool isText,
                 const ImportOptions &options);

/// Registers the dialects the importer emits.
void registerImportDialects(mlir::DialectRegistry &registry);

} // namespace autopar

#endif // AUTOPAR_IMPORT_ONNXIMPORTER_H
