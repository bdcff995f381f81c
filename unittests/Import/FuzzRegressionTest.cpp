//===- FuzzRegressionTest.cpp - inputs that crashed the readers -----------===//
//
// Every input scripts/fuzz.sh found crashing the importer or the compiler's
// .npy reader (docs/fuzzing.md), kept under Inputs/fuzz/, now gets an error
// naming the problem; and the variants of each problem found while fixing
// it, built here. None may crash, assert or allocate what the file announces
// before checking that the file holds it.
//
//===----------------------------------------------------------------------===//

#include "Npy.h"

#include "autopar/Import/OnnxImporter.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "onnx/onnx_pb.h"
#include "gtest/gtest.h"

#include <fstream>

using namespace autopar;

namespace {

std::string input(llvm::StringRef name) {
  llvm::SmallString<256> path(AUTOPAR_IMPORT_TEST_INPUTS);
  llvm::sys::path::append(path, "fuzz", name);
  return std::string(path);
}

/// Imports \p bytes as a binary .onnx file; returns the diagnostics, or
/// "(imported)" if the import succeeded.
std::string importError(const std::string &bytes) {
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  std::string messages;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    messages += diag.str() + "\n";
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module = importOnnxBuffer(
      &context, bytes, "model.onnx", /*isText=*/false, ImportOptions());
  return module ? "(imported)" : messages;
}

std::string readFile(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  EXPECT_TRUE(bool(buffer)) << path;
  return buffer ? (*buffer)->getBuffer().str() : "";
}

/// A model whose Reshape takes its target from the int64 initializer `S`.
onnx::ModelProto reshapeModel(const onnx::TensorProto &target) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  onnx::GraphProto *graph = model.mutable_graph();
  auto addValue = [](onnx::ValueInfoProto *v, const char *name) {
    v->set_name(name);
    auto *type = v->mutable_type()->mutable_tensor_type();
    type->set_elem_type(onnx::TensorProto_DataType_FLOAT);
    type->mutable_shape()->add_dim()->set_dim_value(4);
  };
  addValue(graph->add_input(), "X");
  addValue(graph->add_output(), "Y");
  onnx::NodeProto *node = graph->add_node();
  node->set_op_type("Reshape");
  node->add_input("X");
  node->add_input("S");
  node->add_output("Y");
  *graph->add_initializer() = target;
  return model;
}

/// The same Reshape, with its target from a Constant node holding \p value
/// (the importer reads every Constant, of any size).
onnx::ModelProto constantReshapeModel(const onnx::TensorProto &value) {
  onnx::ModelProto model = reshapeModel(value);
  onnx::GraphProto *graph = model.mutable_graph();
  graph->clear_initializer();
  onnx::NodeProto constant;
  constant.set_op_type("Constant");
  constant.add_output("S");
  onnx::AttributeProto *attr = constant.add_attribute();
  attr->set_name("value");
  attr->set_type(onnx::AttributeProto::TENSOR);
  *attr->mutable_t() = value;
  onnx::NodeProto reshape = graph->node(0);
  graph->clear_node();
  *graph->add_node() = constant;
  *graph->add_node() = reshape;
  return model;
}

onnx::TensorProto int64Tensor(std::initializer_list<int64_t> dims) {
  onnx::TensorProto t;
  t.set_name("S");
  t.set_data_type(onnx::TensorProto_DataType_INT64);
  for (int64_t d : dims)
    t.add_dims(d);
  return t;
}

std::string importError(const onnx::ModelProto &model) {
  return importError(model.SerializeAsString());
}

//===----------------------------------------------------------------------===//
// The ONNX importer
//===----------------------------------------------------------------------===//

// Found by autopar-fuzz-onnx: a Mod node without inputs in an opset 9 model
// (Mod exists from opset 10, so there was no schema to check its inputs
// against, and the converter read input 1 of none).
TEST(ImportFuzzRegression, OpNewerThanTheOpsetWithoutInputs) {
  std::string error = importError(readFile(input("mod-opset9-no-inputs.onnx")));
  EXPECT_NE(error.find("(Mod): missing required inputs A, B"),
            std::string::npos)
      << error;
}

// A negative dim of an initializer was allocated as a huge vector.
TEST(ImportFuzzRegression, NegativeInitializerDim) {
  onnx::TensorProto target = int64Tensor({-2});
  target.add_int64_data(4);
  std::string error = importError(reshapeModel(target));
  EXPECT_NE(error.find("initializer 'S' has a negative dimension -2"),
            std::string::npos)
      << error;
}

// Dims whose product overflows, or is far more than the data present, were
// allocated before the data was counted.
TEST(ImportFuzzRegression, InitializerDimsBeyondItsData) {
  onnx::TensorProto huge = int64Tensor({int64_t(1) << 40, int64_t(1) << 40});
  huge.add_int64_data(4);
  std::string error = importError(reshapeModel(huge));
  EXPECT_NE(error.find("has more elements than autopar can address"),
            std::string::npos)
      << error;

  // 2^31 elements is no overflow, but only 8 bytes are there: the error
  // comes before a 16 GiB allocation. (An initializer that large is a
  // parameter, never read; a Constant is read.)
  onnx::TensorProto large = int64Tensor({int64_t(1) << 31});
  large.set_raw_data(std::string(8, '\0'));
  error = importError(constantReshapeModel(large));
  EXPECT_NE(error.find("holds 8 bytes, expected 17179869184"),
            std::string::npos)
      << error;
  onnx::TensorProto typed = int64Tensor({int64_t(1) << 31});
  typed.add_int64_data(4);
  error = importError(constantReshapeModel(typed));
  EXPECT_NE(error.find("holds 1 values, expected 2147483648"),
            std::string::npos)
      << error;
}

// A non-numeric external data offset threw std::invalid_argument from
// std::stoll, which nothing caught.
TEST(ImportFuzzRegression, MalformedExternalDataOffset) {
  onnx::TensorProto target = int64Tensor({1});
  target.set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
  auto *location = target.add_external_data();
  location->set_key("location");
  location->set_value("weights.bin");
  auto *offset = target.add_external_data();
  offset->set_key("offset");
  offset->set_value("x12");
  std::string error = importError(reshapeModel(target));
  EXPECT_NE(error.find("has external data with an invalid offset 'x12'"),
            std::string::npos)
      << error;
}

//===----------------------------------------------------------------------===//
// The compiler's .npy reader (--const-input)
//===----------------------------------------------------------------------===//

std::string npyError(const std::string &path) {
  import::ConstTensor tensor;
  std::string error;
  if (succeeded(import::readNpyFile(path, tensor, error)))
    return "(read)";
  return error;
}

/// A version 1.0 .npy file with \p header (padded as numpy pads it) and
/// \p data.
std::string writeNpy(const std::string &name, std::string header,
                     const std::string &data) {
  llvm::SmallString<128> path;
  llvm::sys::fs::createTemporaryFile(name, "npy", path);
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::ofstream os(std::string(path), std::ios::binary);
  os << "\x93NUMPY" << '\x01' << '\x00' << char(header.size() & 0xff)
     << char(header.size() >> 8) << header << data;
  return std::string(path);
}

// Found by autopar-fuzz-npy: a header without a 'shape' key (the key's
// closing quote mutated away); the reader dropped the first character of an
// empty value and read far past it.
TEST(ImportFuzzRegression, NpyWithoutShape) {
  std::string error = npyError(input("npy-no-shape-key.npy"));
  EXPECT_NE(error.find("has a malformed .npy header (no 'shape' tuple)"),
            std::string::npos)
      << error;
}

TEST(ImportFuzzRegression, NpyWithoutDescr) {
  std::string path =
      writeNpy("no-descr", "{'fortran_order': False, 'shape': (2,), }",
               std::string(8, '\0'));
  std::string error = npyError(path);
  llvm::sys::fs::remove(path);
  EXPECT_NE(error.find("has a malformed .npy header (no 'descr' string)"),
            std::string::npos)
      << error;
}

TEST(ImportFuzzRegression, NpyNegativeOrHugeShape) {
  std::string path = writeNpy(
      "negative", "{'descr': '<i4', 'fortran_order': False, 'shape': (-3,), }",
      std::string(12, '\0'));
  std::string error = npyError(path);
  llvm::sys::fs::remove(path);
  EXPECT_NE(error.find("has a negative dimension -3"), std::string::npos)
      << error;

  path = writeNpy("huge",
                  "{'descr': '<i4', 'fortran_order': False, 'shape': "
                  "(4294967296, 4294967296), }",
                  std::string(12, '\0'));
  error = npyError(path);
  llvm::sys::fs::remove(path);
  EXPECT_NE(error.find("has more elements than autopar can address"),
            std::string::npos)
      << error;

  // Announces 2^32 int32 elements and holds 12 bytes: refused before the
  // 32 GiB allocation.
  path = writeNpy(
      "large",
      "{'descr': '<i4', 'fortran_order': False, 'shape': (4294967296,), }",
      std::string(12, '\0'));
  error = npyError(path);
  llvm::sys::fs::remove(path);
  EXPECT_NE(error.find("holds 12 bytes of data, but its header announces "
                       "17179869184"),
            std::string::npos)
      << error;
}

} // namespace
