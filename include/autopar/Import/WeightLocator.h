//===- WeightLocator.h - Where each ONNX initializer's bytes live -*- C++ -*-//
//
// The runtime memory-maps weights straight from the ONNX file (or its
// external-data files). The compiler therefore needs each initializer's file,
// byte offset and length, found here by walking the protobuf wire format of
// the model without touching the weight bytes themselves.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_IMPORT_WEIGHTLOCATOR_H
#define AUTOPAR_IMPORT_WEIGHTLOCATOR_H

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>

namespace autopar {

/// Where one initializer's little-endian, row-major bytes are.
struct WeightSource {
  /// Absolute path of the file holding the bytes; empty when the model stores
  /// the values in a form that is not the raw bytes (varint-packed integer
  /// fields): then `bytes` holds them, decoded.
  std::string file;
  int64_t offset = 0;
  int64_t length = 0;
  std::string bytes;
};

/// Locates every initializer of the ONNX model at `modelPath`.
llvm::Expected<llvm::StringMap<WeightSource>>
locateInitializers(llvm::StringRef modelPath);

} // namespace autopar

#endif // AUTOPAR_IMPORT_WEIGHTLOCATOR_H
