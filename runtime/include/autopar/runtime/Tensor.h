//===- Tensor.h - Shapes and tensor descriptions ----------------*- C++ -*-===//

#ifndef AUTOPAR_RUNTIME_TENSOR_H
#define AUTOPAR_RUNTIME_TENSOR_H

#include "autopar/runtime/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace autopar::runtime {

/// A static, row-major shape. An empty shape is a rank-0 tensor (one element).
using Shape = std::vector<int64_t>;

/// Formats \p shape as "[2, 8]" ("[]" for rank 0).
std::string formatShape(const Shape &shape);

/// Number of elements of \p shape; throws Error if a dimension is negative or
/// the count does not fit in int64_t. \p what names the tensor for the message.
int64_t numElements(const Shape &shape, const std::string &what);

/// Number of bytes of a dense tensor; throws Error on overflow.
int64_t byteSize(DType dtype, const Shape &shape, const std::string &what);

/// "float32 [2, 8]": how error messages show a tensor type.
std::string formatTensorType(DType dtype, const Shape &shape);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_TENSOR_H
