//===- DTypes.cpp - ONNX element types and constant tensors ---------------===//

#include "ImporterImpl.h"
#include "Npy.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstring>

using namespace mlir;
namespace autopar::import {

using onnx::TensorProto_DataType;

bool isFloatDType(OnnxDType t) {
  return t == onnx::TensorProto_DataType_FLOAT ||
         t == onnx::TensorProto_DataType_DOUBLE ||
         t == onnx::TensorProto_DataType_FLOAT16 ||
         t == onnx::TensorProto_DataType_BFLOAT16;
}
bool isSignedIntDType(OnnxDType t) {
  return t == onnx::TensorProto_DataType_INT8 ||
         t == onnx::TensorProto_DataType_INT16 ||
         t == onnx::TensorProto_DataType_INT32 ||
         t == onnx::TensorProto_DataType_INT64;
}
bool isUnsignedIntDType(OnnxDType t) {
  return t == onnx::TensorProto_DataType_UINT8 ||
         t == onnx::TensorProto_DataType_UINT16 ||
         t == onnx::TensorProto_DataType_UINT32 ||
         t == onnx::TensorProto_DataType_UINT64;
}
bool isBoolDType(OnnxDType t) { return t == onnx::TensorProto_DataType_BOOL; }

std::string dtypeName(OnnxDType t) {
  switch (t) {
  case onnx::TensorProto_DataType_FLOAT:
    return "float32";
  case onnx::TensorProto_DataType_DOUBLE:
    return "float64";
  case onnx::TensorProto_DataType_FLOAT16:
    return "float16";
  case onnx::TensorProto_DataType_BFLOAT16:
    return "bfloat16";
  case onnx::TensorProto_DataType_INT8:
    return "int8";
  case onnx::TensorProto_DataType_INT16:
    return "int16";
  case onnx::TensorProto_DataType_INT32:
    return "int32";
  case onnx::TensorProto_DataType_INT64:
    return "int64";
  case onnx::TensorProto_DataType_UINT8:
    return "uint8";
  case onnx::TensorProto_DataType_UINT16:
    return "uint16";
  case onnx::TensorProto_DataType_UINT32:
    return "uint32";
  case onnx::TensorProto_DataType_UINT64:
    return "uint64";
  case onnx::TensorProto_DataType_BOOL:
    return "bool";
  case onnx::TensorProto_DataType_STRING:
    return "string";
  case onnx::TensorProto_DataType_COMPLEX64:
    return "complex64";
  case onnx::TensorProto_DataType_COMPLEX128:
    return "complex128";
  default:
    return "<type " + std::to_string(t) + ">";
  }
}

Type getElementType(MLIRContext *ctx, OnnxDType t) {
  switch (t) {
  case onnx::TensorProto_DataType_FLOAT:
    return Float32Type::get(ctx);
  case onnx::TensorProto_DataType_DOUBLE:
    return Float64Type::get(ctx);
  case onnx::TensorProto_DataType_FLOAT16:
    return Float16Type::get(ctx);
  case onnx::TensorProto_DataType_BFLOAT16:
    return BFloat16Type::get(ctx);
  case onnx::TensorProto_DataType_INT8:
  case onnx::TensorProto_DataType_UINT8:
    return IntegerType::get(ctx, 8);
  case onnx::TensorProto_DataType_INT16:
  case onnx::TensorProto_DataType_UINT16:
    return IntegerType::get(ctx, 16);
  case onnx::TensorProto_DataType_INT32:
  case onnx::TensorProto_DataType_UINT32:
    return IntegerType::get(ctx, 32);
  case onnx::TensorProto_DataType_INT64:
  case onnx::TensorProto_DataType_UINT64:
    return IntegerType::get(ctx, 64);
  case onnx::TensorProto_DataType_BOOL:
    return IntegerType::get(ctx, 1);
  default:
    return nullptr;
  }
}

int64_t dtypeSize(OnnxDType t) {
  switch (t) {
  case onnx::TensorProto_DataType_DOUBLE:
  case onnx::TensorProto_DataType_INT64:
  case onnx::TensorProto_DataType_UINT64:
    return 8;
  case onnx::TensorProto_DataType_FLOAT:
  case onnx::TensorProto_DataType_INT32:
  case onnx::TensorProto_DataType_UINT32:
    return 4;
  case onnx::TensorProto_DataType_FLOAT16:
  case onnx::TensorProto_DataType_BFLOAT16:
  case onnx::TensorProto_DataType_INT16:
  case onnx::TensorProto_DataType_UINT16:
    return 2;
  case onnx::TensorProto_DataType_INT8:
  case onnx::TensorProto_DataType_UINT8:
  case onnx::TensorProto_DataType_BOOL:
    return 1;
  default:
    return 0;
  }
}

int64_t getNumElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

LogicalResult checkTensorDims(llvm::ArrayRef<int64_t> shape,
                              std::string &error) {
  constexpr int64_t kMaxElements = int64_t(1) << 59; // Times 8 bytes < 2^62.
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      error = "has a negative dimension " + std::to_string(d);
      return failure();
    }
    if (d != 0 && n > kMaxElements / d) {
      error = "has more elements than autopar can address";
      return failure();
    }
    n *= d;
  }
  return success();
}

int64_t ConstTensor::numElements() const { return getNumElements(shape); }

ConstTensor ConstTensor::zeros(OnnxDType dtype, llvm::ArrayRef<int64_t> shape) {
  ConstTensor t;
  t.dtype = dtype;
  t.shape.assign(shape.begin(), shape.end());
  if (t.isFloat())
    t.floats.assign(t.numElements(), 0.0);
  else
    t.ints.assign(t.numElements(), 0);
  return t;
}

/// Wraps `v` to the range of integer type `t`, as a C conversion does.
static int64_t wrapToType(OnnxDType t, int64_t v) {
  switch (t) {
  case onnx::TensorProto_DataType_INT8:
    return static_cast<int8_t>(v);
  case onnx::TensorProto_DataType_UINT8:
    return static_cast<uint8_t>(v);
  case onnx::TensorProto_DataType_INT16:
    return static_cast<int16_t>(v);
  case onnx::TensorProto_DataType_UINT16:
    return static_cast<uint16_t>(v);
  case onnx::TensorProto_DataType_INT32:
    return static_cast<int32_t>(v);
  case onnx::TensorProto_DataType_UINT32:
    return static_cast<uint32_t>(v);
  case onnx::TensorProto_DataType_BOOL:
    return v != 0;
  default:
    return v;
  }
}

void ConstTensor::set(int64_t i, double v) {
  if (isFloat()) {
    floats[i] = v;
    return;
  }
  if (isBoolDType(dtype)) {
    ints[i] = v != 0.0;
    return;
  }
  ints[i] = wrapToType(dtype, static_cast<int64_t>(v));
}

void ConstTensor::setInt(int64_t i, int64_t v) {
  if (isFloat())
    floats[i] = static_cast<double>(v);
  else
    ints[i] = wrapToType(dtype, v);
}

/// Decodes a 16-bit float (IEEE half or bfloat16) to double.
static double decodeHalf(OnnxDType t, uint16_t bits) {
  const llvm::fltSemantics &sem = t == onnx::TensorProto_DataType_BFLOAT16
                                      ? llvm::APFloat::BFloat()
                                      : llvm::APFloat::IEEEhalf();
  llvm::APFloat f(sem, llvm::APInt(16, bits));
  bool lost;
  f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
            &lost);
  return f.convertToDouble();
}

/// Decodes little-endian raw bytes into `result`.
static LogicalResult decodeRaw(llvm::StringRef raw, ConstTensor &result,
                               std::string &error) {
  int64_t n = result.numElements();
  int64_t size = dtypeSize(result.dtype);
  if (static_cast<int64_t>(raw.size()) != n * size) {
    error = "holds " + std::to_string(raw.size()) + " bytes, expected " +
            std::to_string(n * size) + " for " + std::to_string(n) + " " +
            dtypeName(result.dtype) + " elements";
    return failure();
  }
  const char *p = raw.data();
  for (int64_t i = 0; i < n; ++i, p += size) {
    switch (result.dtype) {
    case onnx::TensorProto_DataType_FLOAT: {
      float v;
      std::memcpy(&v, p, 4);
      result.floats[i] = v;
      break;
    }
    case onnx::TensorProto_DataType_DOUBLE:
      std::memcpy(&result.floats[i], p, 8);
      break;
    case onnx::TensorProto_DataType_FLOAT16:
    case onnx::TensorProto_DataType_BFLOAT16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      result.floats[i] = decodeHalf(result.dtype, v);
      break;
    }
    default: {
      uint64_t v = 0;
      std::memcpy(&v, p, size);
      // Sign-extend signed types; wrapToType also truncates unsigned ones.
      int64_t sv = static_cast<int64_t>(v);
      if (isSignedIntDType(result.dtype) && size < 8) {
        int shift = 64 - 8 * size;
        sv = static_cast<int64_t>(v << shift) >> shift;
      }
      result.setInt(i, sv);
      break;
    }
    }
  }
  return success();
}

LogicalResult decodeRawTensor(llvm::StringRef raw, ConstTensor &result,
                              std::string &error) {
  return decodeRaw(raw, result, error);
}

LogicalResult readTensorProto(const onnx::TensorProto &tensor,
                              llvm::StringRef modelDir, ConstTensor &result,
                              std::string &error) {
  llvm::SmallVector<int64_t> shape(tensor.dims().begin(), tensor.dims().end());
  if (!dtypeSize(tensor.data_type())) {
    error = "has element type " + dtypeName(tensor.data_type()) +
            ", which autopar does not support";
    return failure();
  }
  // The dims come from the file: check them, and that the data is there,
  // before allocating room for the elements they announce.
  if (failed(checkTensorDims(shape, error)))
    return failure();
  int64_t n = getNumElements(shape);
  int64_t bytes = n * static_cast<int64_t>(dtypeSize(tensor.data_type()));

  if (tensor.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto &entry : tensor.external_data()) {
      int64_t *number = entry.key() == "offset"   ? &offset
                        : entry.key() == "length" ? &length
                                                  : nullptr;
      if (entry.key() == "location")
        location = entry.value();
      else if (number &&
               (llvm::StringRef(entry.value()).getAsInteger(10, *number) ||
                *number < 0)) {
        error = "has external data with an invalid " + entry.key() + " '" +
                entry.value() + "'";
        return failure();
      }
    }
    llvm::SmallString<256> path(modelDir);
    llvm::sys::path::append(path, location);
    auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                              /*RequiresNullTerminator=*/false);
    if (!buffer) {
      error = "has external data in '" + std::string(path) +
              "', which cannot be read: " + buffer.getError().message();
      return failure();
    }
    if (length < 0)
      length = bytes;
    int64_t fileSize = static_cast<int64_t>((*buffer)->getBufferSize());
    if (offset > fileSize || length > fileSize - offset) {
      error = "has external data past the end of '" + std::string(path) + "'";
      return failure();
    }
    if (length != bytes) {
      error = "has " + std::to_string(length) +
              " bytes of external data, "
              "expected " +
              std::to_string(bytes) + " for " + std::to_string(n) + " " +
              dtypeName(tensor.data_type()) + " elements";
      return failure();
    }
    result = ConstTensor::zeros(tensor.data_type(), shape);
    return decodeRaw((*buffer)->getBuffer().substr(offset, length), result,
                     error);
  }
  if (tensor.has_raw_data()) {
    if (static_cast<int64_t>(tensor.raw_data().size()) != bytes) {
      error = "holds " + std::to_string(tensor.raw_data().size()) +
              " bytes, expected " + std::to_string(bytes) + " for " +
              std::to_string(n) + " " + dtypeName(tensor.data_type()) +
              " elements";
      return failure();
    }
    result = ConstTensor::zeros(tensor.data_type(), shape);
    return decodeRaw(tensor.raw_data(), result, error);
  }
  int64_t count;
  switch (tensor.data_type()) {
  case onnx::TensorProto_DataType_FLOAT:
    count = tensor.float_data_size();
    break;
  case onnx::TensorProto_DataType_DOUBLE:
    count = tensor.double_data_size();
    break;
  case onnx::TensorProto_DataType_INT64:
    count = tensor.int64_data_size();
    break;
  case onnx::TensorProto_DataType_UINT32:
  case onnx::TensorProto_DataType_UINT64:
    count = tensor.uint64_data_size();
    break;
  default:
    count = tensor.int32_data_size();
    break;
  }
  if (count != n) {
    error = "holds " + std::to_string(count) + " values, expected " +
            std::to_string(n);
    return failure();
  }
  result = ConstTensor::zeros(tensor.data_type(), shape);

  auto checkCount = [&](int64_t count) -> LogicalResult {
    if (count == n)
      return success();
    error = "holds " + std::to_string(count) + " values, expected " +
            std::to_string(n);
    return failure();
  };
  switch (tensor.data_type()) {
  case onnx::TensorProto_DataType_FLOAT:
    if (failed(checkCount(tensor.float_data_size())))
      return failure();
    for (int64_t i = 0; i < n; ++i)
      result.floats[i] = tensor.float_data(i);
    return success();
  case onnx::TensorProto_DataType_DOUBLE:
    if (failed(checkCount(tensor.double_data_size())))
      return failure();
    for (int64_t i = 0; i < n; ++i)
      result.floats[i] = tensor.double_data(i);
    return success();
  case onnx::TensorProto_DataType_INT64:
    if (failed(checkCount(tensor.int64_data_size())))
      return failure();
    for (int64_t i = 0; i < n; ++i)
      result.ints[i] = tensor.int64_data(i);
    return success();
  case onnx::TensorProto_DataType_UINT32:
  case onnx::TensorProto_DataType_UINT64:
    if (failed(checkCount(tensor.uint64_data_size())))
      return failure();
    for (int64_t i = 0; i < n; ++i)
      result.setInt(i, static_cast<int64_t>(tensor.uint64_data(i)));
    return success();
  case onnx::TensorProto_DataType_FLOAT16:
  case onnx::TensorProto_DataType_BFLOAT16:
    if (failed(checkCount(tensor.int32_data_size())))
      return failure();
    for (int64_t i = 0; i < n; ++i)
      result.floats[i] = decodeHalf(
          tensor.data_type(), static_cast<uint16_t>(tensor.int32_data(i)));
    return success();
  default: // INT32, INT16, INT8, UINT16, UINT8, BOOL.
    if (failed(checkCount(tensor.int32_data_size())))
      return failure();
    for (int64_t i = 0; i < n; ++i)
      result.setInt(i, tensor.int32_data(i));
    return success();
  }
}

} // namespace autopar::import
