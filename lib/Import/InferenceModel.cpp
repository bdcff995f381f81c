//===- InferenceModel.cpp - The trained model as an inference graph -------===//
//
// See InferenceModel.h.
//
//===----------------------------------------------------------------------===//

#include "autopar/Import/InferenceModel.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include "onnx/onnx_pb.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

using namespace llvm;

namespace autopar {
namespace {

std::string describeNode(const onnx::NodeProto &node, int index) {
  return "node '" +
         (node.name().empty() ? "#" + std::to_string(index) : node.name()) +
         "' (" + node.op_type() + ")";
}

/// Reads an external-data initializer's bytes into raw_data.
LogicalResult inlineExternalData(onnx::TensorProto &tensor, StringRef modelDir,
                                 std::string &error) {
  std::string location;
  uint64_t offset = 0, length = 0;
  bool hasLength = false;
  for (const auto &entry : tensor.external_data()) {
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset" || entry.key() == "length") {
      uint64_t &number = entry.key() == "offset" ? offset : length;
      if (StringRef(entry.value()).getAsInteger(10, number)) {
        error = "initializer '" + tensor.name() + "': its external data " +
                entry.key() + " '" + entry.value() + "' is not a number";
        return failure();
      }
      hasLength |= entry.key() == "length";
    }
  }
  SmallString<256> path(modelDir);
  sys::path::append(path, location);
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/false,
                                      /*RequiresNullTerminator=*/false);
  if (!buffer) {
    error = "initializer '" + tensor.name() +
            "': cannot read its external "
            "data " +
            std::string(path) + ": " + buffer.getError().message();
    return failure();
  }
  StringRef bytes = (*buffer)->getBuffer();
  if (offset > bytes.size() || (hasLength && length > bytes.size() - offset)) {
    error = "initializer '" + tensor.name() + "': its external data lies " +
            "past the end of " + std::string(path);
    return failure();
  }
  bytes = bytes.drop_front(offset);
  if (hasLength)
    bytes = bytes.take_front(length);
  tensor.set_raw_data(bytes.str());
  tensor.clear_external_data();
  tensor.set_data_location(onnx::TensorProto_DataLocation_DEFAULT);
  return success();
}

} // namespace

LogicalResult writeInferenceTemplate(StringRef modelPath,
                                     const StringSet<> &updated,
                                     StringRef outPath, std::string &error) {
  auto fail = [&](const Twine &message) {
    error = (modelPath + ": " + message).str();
    return failure();
  };
  auto buffer = MemoryBuffer::getFile(modelPath, /*IsText=*/false,
                                      /*RequiresNullTerminator=*/false);
  if (!buffer)
    return fail("cannot open the model: " + buffer.getError().message());
  onnx::ModelProto model;
  google::protobuf::io::ArrayInputStream raw((*buffer)->getBufferStart(),
                                             (*buffer)->getBufferSize());
  google::protobuf::io::CodedInputStream coded(&raw);
  coded.SetTotalBytesLimit(INT32_MAX);
  if (!model.ParseFromCodedStream(&coded) || !model.has_graph())
    return fail("not a valid ONNX model");
  onnx::GraphProto &graph = *model.mutable_graph();

  // Inference form of the training-mode ops.
  StringSet<> consumed;
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &in : node.input())
      consumed.insert(in);
  for (const onnx::ValueInfoProto &out : graph.output())
    consumed.insert(out.name());
  for (int i = 0; i < graph.node_size(); ++i) {
    onnx::NodeProto &node = *graph.mutable_node(i);
    if (node.op_type() == "Dropout" && node.input_size() > 2) {
      // Without training_mode, Dropout is the identity (its mask all true).
      node.mutable_input()->DeleteSubrange(2, node.input_size() - 2);
      continue;
    }
    if (node.op_type() != "BatchNormalization")
      continue;
    for (onnx::AttributeProto &attr : *node.mutable_attribute())
      if (attr.name() == "training_mode")
        attr.set_i(0);
    for (int k = 1; k < node.output_size(); ++k)
      if (!node.output(k).empty() && consumed.contains(node.output(k)))
        return fail(describeNode(node, i) + ": its training output '" +
                    node.output(k) +
                    "' is used by the graph; an inference model cannot "
                    "produce it");
    node.mutable_output()->DeleteSubrange(1, node.output_size() - 1);
  }

  // The Constant nodes that fed only training_mode inputs are dead now;
  // onnxruntime would warn about each.
  StringSet<> read;
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &in : node.input())
      read.insert(in);
  for (const onnx::ValueInfoProto &out : graph.output())
    read.insert(out.name());
  auto *nodes = graph.mutable_node();
  for (int i = nodes->size() - 1; i >= 0; --i) {
    const onnx::NodeProto &node = nodes->Get(i);
    if (node.op_type() == "Constant" && node.output_size() == 1 &&
        !read.contains(node.output(0)))
      nodes->DeleteSubrange(i, 1);
  }

  // The updated initializers go (the runtime appends their trained values);
  // the rest stand alone.
  SmallString<256> modelDir(sys::path::parent_path(modelPath));
  auto *initializers = graph.mutable_initializer();
  for (int i = initializers->size() - 1; i >= 0; --i) {
    onnx::TensorProto &tensor = *initializers->Mutable(i);
    if (updated.contains(tensor.name())) {
      initializers->DeleteSubrange(i, 1);
      continue;
    }
    if (tensor.data_location() == onnx::TensorProto_DataLocation_EXTERNAL &&
        failed(inlineExternalData(tensor, modelDir, error)))
      return fail(error);
  }
  // Old exporters also list initializers as graph inputs; those stay
  // declared (the appended initializer gives them their values).

  std::string bytes;
  if (!model.SerializeToString(&bytes))
    return fail("the inference model could not be serialized (over 2 GiB?)");
  std::error_code ec;
  raw_fd_ostream os(outPath, ec, sys::fs::OF_None);
  if (ec) {
    error = "cannot write " + outPath.str() + ": " + ec.message();
    return failure();
  }
  os << bytes;
  return success();
}

} // namespace autopar
