//===- OnnxWriter.h - Trained initializers appended to an ONNX model -*- C++
//-*-===//
//
// The runtime links no protobuf. A protobuf parser merges an embedded message
// field that occurs twice and appends to a repeated field, so the bytes of a
// ModelProto followed by the bytes of `ModelProto { graph { initializer {...} }
// }` parse as the first model with that initializer added. --save-onnx writes
// the compile-time inference template (InferenceModel.h in the compiler)
// followed by one such fragment per trained tensor.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_ONNXWRITER_H
#define AUTOPAR_RUNTIME_ONNXWRITER_H

#include "autopar/runtime/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace autopar::runtime {

/// A tensor to add to the model's initializers.
struct OnnxInitializer {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void *data = nullptr; ///< dense, row-major, dtypeSize(dtype) each
};

/// ONNX's TensorProto.DataType number of \p dtype.
int onnxDataType(DType dtype);

/// The protobuf bytes of `ModelProto { graph { initializer { dims,
/// data_type, name, raw_data } } }` for \p tensor.
std::string encodeInitializerFragment(const OnnxInitializer &tensor);

/// Writes \p templatePath's bytes followed by one fragment per tensor to
/// \p outPath, atomically (a temporary file renamed into place). Throws
/// Error naming the file; a model over 2 GiB, which protobuf parsers refuse,
/// is an error too.
void writeOnnxWithInitializers(const std::string &templatePath,
                               const std::vector<OnnxInitializer> &tensors,
                               const std::string &outPath);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_ONNXWRITER_H
