//===- Npy.cpp - Reading .npy files into import-time constants ------------===//
//
// `--const-input NAME=FILE.npy` freezes a graph input to known values, which
// autopar needs when the input decides a shape (a Reshape target, Slice
// bounds, ...). The runtime has its own .npy code; this reader stays here so
// the compiler does not link the runtime (which uses exceptions) into LLVM
// code built without them.
//
//===----------------------------------------------------------------------===//

#include "Npy.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstring>

using namespace mlir;
namespace autopar::import {

/// The ONNX type of a NumPy descr, or UNDEFINED.
static OnnxDType dtypeOfDescr(llvm::StringRef descr) {
  return llvm::StringSwitch<OnnxDType>(descr)
      .Cases({"<f4", "=f4"}, onnx::TensorProto_DataType_FLOAT)
      .Cases({"<f8", "=f8"}, onnx::TensorProto_DataType_DOUBLE)
      .Cases({"<f2", "=f2"}, onnx::TensorProto_DataType_FLOAT16)
      .Cases({"<i8", "=i8"}, onnx::TensorProto_DataType_INT64)
      .Cases({"<i4", "=i4"}, onnx::TensorProto_DataType_INT32)
      .Cases({"<i2", "=i2"}, onnx::TensorProto_DataType_INT16)
      .Case("|i1", onnx::TensorProto_DataType_INT8)
      .Cases({"<u8", "=u8"}, onnx::TensorProto_DataType_UINT64)
      .Cases({"<u4", "=u4"}, onnx::TensorProto_DataType_UINT32)
      .Cases({"<u2", "=u2"}, onnx::TensorProto_DataType_UINT16)
      .Case("|u1", onnx::TensorProto_DataType_UINT8)
      .Case("|b1", onnx::TensorProto_DataType_BOOL)
      .Default(onnx::TensorProto_DataType_UNDEFINED);
}

/// The quoted value following `'key':` in the header dictionary.
static llvm::StringRef headerValue(llvm::StringRef header,
                                   llvm::StringRef key) {
  size_t at = header.find(("'" + key + "'").str());
  if (at == llvm::StringRef::npos)
    return "";
  llvm::StringRef rest = header.substr(at + key.size() + 2).ltrim();
  if (!rest.consume_front(":"))
    return "";
  return rest.ltrim();
}

LogicalResult readNpyFile(llvm::StringRef path, ConstTensor &result,
                          std::string &error) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    error = "cannot read " + path.str() + ": " + buffer.getError().message();
    return failure();
  }
  llvm::StringRef data = (*buffer)->getBuffer();
  if (!data.starts_with("\x93NUMPY") || data.size() < 10) {
    error = path.str() + " is not a .npy file";
    return failure();
  }
  uint8_t major = data[6];
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = uint8_t(data[8]) | (size_t(uint8_t(data[9])) << 8);
    headerStart = 10;
  } else {
    if (data.size() < 12) {
      error = path.str() + " is truncated";
      return failure();
    }
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= size_t(uint8_t(data[8 + i])) << (8 * i);
    headerStart = 12;
  }
  if (headerStart + headerLen > data.size()) {
    error = path.str() + " is truncated";
    return failure();
  }
  llvm::StringRef header = data.substr(headerStart, headerLen);
  // Each value must be there and quoted or parenthesized as numpy writes it.
  llvm::StringRef descr = headerValue(header, "descr");
  if (!descr.consume_front("'") || descr.find('\'') == llvm::StringRef::npos) {
    error = path.str() + " has a malformed .npy header (no 'descr' string)";
    return failure();
  }
  descr = descr.take_until([](char c) { return c == '\''; });
  OnnxDType dtype = dtypeOfDescr(descr);
  if (dtype == onnx::TensorProto_DataType_UNDEFINED) {
    error = path.str() + " has dtype '" + descr.str() +
            "', which autopar does not read";
    return failure();
  }
  if (headerValue(header, "fortran_order").starts_with("True")) {
    error = path.str() + " is Fortran-ordered; save it in C order";
    return failure();
  }
  llvm::StringRef shapeText = headerValue(header, "shape");
  if (!shapeText.consume_front("(") ||
      shapeText.find(')') == llvm::StringRef::npos) {
    error = path.str() + " has a malformed .npy header (no 'shape' tuple)";
    return failure();
  }
  shapeText = shapeText.take_until([](char c) { return c == ')'; });
  llvm::SmallVector<llvm::StringRef> parts;
  shapeText.split(parts, ',', -1, /*KeepEmpty=*/false);
  llvm::SmallVector<int64_t> shape;
  for (llvm::StringRef part : parts) {
    int64_t d;
    if (part.trim().getAsInteger(10, d)) {
      error = path.str() + " has a malformed shape";
      return failure();
    }
    shape.push_back(d);
  }
  // Check the shape against the data present before allocating for it.
  std::string dimsError;
  if (failed(checkTensorDims(shape, dimsError))) {
    error = path.str() + " " + dimsError;
    return failure();
  }
  int64_t bytes = getNumElements(shape) * dtypeSize(dtype);
  llvm::StringRef raw = data.substr(headerStart + headerLen);
  if (static_cast<int64_t>(raw.size()) != bytes) {
    error = path.str() + " holds " + std::to_string(raw.size()) +
            " bytes of data, but its header announces " +
            std::to_string(bytes) + " (" + descr.str() + ", " +
            std::to_string(getNumElements(shape)) + " elements)";
    return failure();
  }
  result = ConstTensor::zeros(dtype, shape);
  return decodeRawTensor(raw, result, error);
}

} // namespace autopar::import
