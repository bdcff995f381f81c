//===- OnnxWriter.cpp - Trained initializers appended to an ONNX model ----===//
//
// See OnnxWriter.h. The protobuf wire format: a field is a varint key
// (field number << 3 | wire type) followed by a varint (type 0) or by a
// varint length and that many bytes (type 2).
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/OnnxWriter.h"
#include "autopar/runtime/Error.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace autopar::runtime {
namespace {

void putVarint(std::string &out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void putVarintField(std::string &out, int field, uint64_t v) {
  putVarint(out, static_cast<uint64_t>(field) << 3 | 0);
  putVarint(out, v);
}

void putBytesField(std::string &out, int field, const void *data, size_t size) {
  putVarint(out, static_cast<uint64_t>(field) << 3 | 2);
  putVarint(out, size);
  out.append(static_cast<const char *>(data), size);
}

// Field numbers of onnx.proto (ONNX 1.12).
constexpr int kModelGraph = 7;
constexpr int kGraphInitializer = 5;
constexpr int kTensorDims = 1, kTensorDataType = 2, kTensorName = 8,
              kTensorRawData = 9;

} // namespace

int onnxDataType(DType dtype) {
  switch (dtype) {
  case DType::Float32:
    return 1;
  case DType::UInt8:
    return 2;
  case DType::Int8:
    return 3;
  case DType::UInt16:
    return 4;
  case DType::Int16:
    return 5;
  case DType::Int32:
    return 6;
  case DType::Int64:
    return 7;
  case DType::Bool:
    return 9;
  case DType::Float16:
    return 10;
  case DType::Float64:
    return 11;
  case DType::UInt32:
    return 12;
  case DType::UInt64:
    return 13;
  case DType::BFloat16:
    return 16;
  }
  return 0;
}

std::string encodeInitializerFragment(const OnnxInitializer &tensor) {
  int64_t elements = 1;
  for (int64_t d : tensor.shape)
    elements *= d;
  std::string proto;
  for (int64_t d : tensor.shape)
    putVarintField(proto, kTensorDims, static_cast<uint64_t>(d));
  putVarintField(proto, kTensorDataType,
                 static_cast<uint64_t>(onnxDataType(tensor.dtype)));
  putBytesField(proto, kTensorName, tensor.name.data(), tensor.name.size());
  putBytesField(proto, kTensorRawData, tensor.data,
                static_cast<size_t>(elements) * dtypeSize(tensor.dtype));
  std::string graph;
  putBytesField(graph, kGraphInitializer, proto.data(), proto.size());
  std::string model;
  putBytesField(model, kModelGraph, graph.data(), graph.size());
  return model;
}

void writeOnnxWithInitializers(const std::string &templatePath,
                               const std::vector<OnnxInitializer> &tensors,
                               const std::string &outPath) {
  std::ifstream in(templatePath, std::ios::binary);
  if (!in)
    throw Error("--save-onnx: cannot read the artifact's inference template " +
                templatePath + ": " + std::strerror(errno) +
                " (recompile the model with this autopar-compile)");
  std::string bytes((std::istreambuf_iterator<char>(in)),
                    std::istreambuf_iterator<char>());
  for (const OnnxInitializer &tensor : tensors)
    bytes += encodeInitializerFragment(tensor);
  // Protobuf parsers refuse messages of 2 GiB and more.
  if (bytes.size() >= (uint64_t(1) << 31))
    throw Error("--save-onnx " + outPath + ": the model would be " +
                std::to_string(bytes.size() >> 20) +
                " MiB, over protobuf's 2 GiB limit; write the trained "
                "parameters with --outputs DIR instead");
  std::string temporary = outPath + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out)
      throw Error("--save-onnx: cannot write " + temporary + ": " +
                  std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out)
      throw Error("--save-onnx: writing " + temporary +
                  " failed: " + std::strerror(errno));
  }
  if (std::rename(temporary.c_str(), outPath.c_str()) != 0)
    throw Error("--save-onnx: cannot rename " + temporary + " to " + outPath +
                ": " + std::strerror(errno));
}

} // namespace autopar::runtime
