//===- TensorFiles.h - Input and output tensors as .npy files ---*- C++ -*-===//
//
// autopar-run reads graph inputs from, and writes graph outputs to, one .npy
// file per tensor named after the tensor (INTERFACES.md).
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_TENSORFILES_H
#define AUTOPAR_RUNTIME_TENSORFILES_H

#include "autopar/runtime/Manifest.h"

#include <string>

namespace autopar::runtime {

/// The file name of tensor \p name: "<name>.npy", with every '/' replaced by
/// '_' because ONNX tensor names (e.g. "/head/Gemm_output_0") may contain it.
std::string tensorFileName(const std::string &name);

/// Creates directory \p dir and its parents, if missing; throws Error if that
/// fails or a file is in the way.
void createDirectory(const std::string &dir);

/// Reads \p path into \p data (byteSize of \p arg bytes). Throws Error naming
/// the tensor and the file, with the expected and actual dtype and shape, if
/// the file does not hold exactly \p arg's dtype (bfloat16 as uint16) and
/// shape.
void readTensorFile(const std::string &path, const ArgumentDesc &arg,
                    void *data);

/// Writes \p arg's tensor at \p data to \p path.
void writeTensorFile(const std::string &path, const ArgumentDesc &arg,
                     const void *data);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_TENSORFILES_H
