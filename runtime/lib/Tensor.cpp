//===- Tensor.cpp - Shapes and tensor descriptions ------------------------===//

#include "autopar/runtime/Tensor.h"

#include "autopar/runtime/Error.h"

#include <limits>

namespace autopar::runtime {

std::string formatShape(const Shape &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

int64_t numElements(const Shape &shape, const std::string &what) {
  int64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0)
      throw Error(what + ": negative dimension in shape " + formatShape(shape));
    if (dim != 0 && count > std::numeric_limits<int64_t>::max() / dim)
      throw Error(what + ": shape " + formatShape(shape) +
                  " has too many elements");
    count *= dim;
  }
  return count;
}

int64_t byteSize(DType dtype, const Shape &shape, const std::string &what) {
  int64_t count = numElements(shape, what);
  int64_t size = static_cast<int64_t>(dtypeSize(dtype));
  if (count > std::numeric_limits<int64_t>::max() / size)
    throw Error(what + ": shape " + formatShape(shape) + " is too large");
  return count * size;
}

std::string formatTensorType(DType dtype, const Shape &shape) {
  return std::string(dtypeName(dtype)) + " " + formatShape(shape);
}

} // namespace autopar::runtime
