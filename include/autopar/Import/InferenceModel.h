//===- InferenceModel.h - The trained model as an inference graph -*- C++
//-*-===//
//
// `autopar-run --train --save-onnx FILE` writes the trained model as an
// inference ONNX model without linking protobuf into the runtime: at compile
// time autopar-compile writes a template (the input model in inference form,
// without the initializers training updates), and the runtime appends those
// initializers with their trained values as protobuf-encoded ModelProto
// fragments, which a protobuf parser merges into the template
// (docs/design/training-artifact.md).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IMPORT_INFERENCEMODEL_H
#define AUTOPAR_IMPORT_INFERENCEMODEL_H

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/LogicalResult.h"

#include <string>

namespace autopar {

/// Writes to `outPath` the ONNX model at `modelPath` in inference form:
/// training-mode Dropout without its `training_mode` input (so, off), and
/// the Constant nodes that only fed it removed;
/// BatchNormalization with `training_mode` 0 and only its output Y (using
/// the running statistics); the initializers named in `updated` left out
/// (the runtime appends their trained values); initializers stored as
/// external data inlined, so the template stands alone. Fails with `error`
/// naming the file (and node) when the model cannot be made so.
llvm::LogicalResult writeInferenceTemplate(llvm::StringRef modelPath,
                                           const llvm::StringSet<> &updated,
                                           llvm::StringRef outPath,
                                           std::string &error);

} // namespace autopar

#endif // AUTOPAR_IMPORT_INFERENCEMODEL_H
