//===- WeightLocatorTest.cpp - initializer byte ranges --------------------===//
//
// Builds small models with the ONNX protobuf API, serializes them, and checks
// that every located range holds exactly the initializer's bytes.
//
//===----------------------------------------------------------------------===//

#include "autopar/Import/WeightLocator.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "onnx/onnx_pb.h"
#include "gtest/gtest.h"

#include <fstream>

using namespace autopar;

namespace {

/// A temporary directory removed at the end of the test.
struct TempDir {
  llvm::SmallString<128> path;
  TempDir() { llvm::sys::fs::createUniqueDirectory("autopar-wl", path); }
  ~TempDir() { llvm::sys::fs::remove_directories(path); }
  std::string file(llvm::StringRef name) const {
    llvm::SmallString<128> p(path);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
};

void save(const onnx::ModelProto &model, const std::string &path) {
  std::ofstream os(path, std::ios::binary);
  model.SerializeToOstream(&os);
}

std::string readRange(const WeightSource &src) {
  if (src.file.empty())
    return src.bytes;
  auto buffer = llvm::MemoryBuffer::getFile(src.file);
  if (!buffer)
    return "<unreadable>";
  return (*buffer)->getBuffer().substr(src.offset, src.length).str();
}

} // namespace

TEST(WeightLocator, RawFloatDataIsARangeOfTheModel) {
  TempDir dir;
  onnx::ModelProto model;
  onnx::TensorProto *w = model.mutable_graph()->add_initializer();
  w->set_name("fc.weight");
  w->set_data_type(onnx::TensorProto_DataType_FLOAT);
  w->add_dims(2);
  w->add_dims(2);
  float values[] = {1.5f, -2.0f, 3.25f, 4.0f};
  w->set_raw_data(std::string(reinterpret_cast<char *>(values), 16));
  save(model, dir.file("m.onnx"));

  auto located = locateInitializers(dir.file("m.onnx"));
  ASSERT_TRUE(bool(located)) << llvm::toString(located.takeError());
  ASSERT_EQ(located->count("fc.weight"), 1u);
  const WeightSource &src = (*located)["fc.weight"];
  EXPECT_FALSE(src.file.empty());
  EXPECT_EQ(src.length, 16);
  EXPECT_EQ(readRange(src), std::string(reinterpret_cast<char *>(values), 16));
}

TEST(WeightLocator, PackedFloatFieldIsARange) {
  TempDir dir;
  onnx::ModelProto model;
  onnx::TensorProto *w = model.mutable_graph()->add_initializer();
  w->set_name("b");
  w->set_data_type(onnx::TensorProto_DataType_FLOAT);
  w->add_dims(3);
  for (float v : {0.5f, 1.0f, -7.0f})
    w->add_float_data(v);
  save(model, dir.file("m.onnx"));
  auto located = locateInitializers(dir.file("m.onnx"));
  ASSERT_TRUE(bool(located));
  float expected[] = {0.5f, 1.0f, -7.0f};
  EXPECT_EQ(readRange((*located)["b"]),
            std::string(reinterpret_cast<char *>(expected), 12));
}

TEST(WeightLocator, VarintInt64FieldIsDecoded) {
  TempDir dir;
  onnx::ModelProto model;
  onnx::TensorProto *w = model.mutable_graph()->add_initializer();
  w->set_name("shape");
  w->set_data_type(onnx::TensorProto_DataType_INT64);
  w->add_dims(2);
  w->add_int64_data(-1);
  w->add_int64_data(300);
  save(model, dir.file("m.onnx"));
  auto located = locateInitializers(dir.file("m.onnx"));
  ASSERT_TRUE(bool(located));
  const WeightSource &src = (*located)["shape"];
  EXPECT_TRUE(src.file.empty());
  int64_t expected[] = {-1, 300};
  EXPECT_EQ(src.bytes, std::string(reinterpret_cast<char *>(expected), 16));
}

TEST(WeightLocator, ExternalDataNamesTheSideFile) {
  TempDir dir;
  onnx::ModelProto model;
  onnx::TensorProto *w = model.mutable_graph()->add_initializer();
  w->set_name("big");
  w->set_data_type(onnx::TensorProto_DataType_FLOAT);
  w->add_dims(4);
  w->set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
  auto *loc = w->add_external_data();
  loc->set_key("location");
  loc->set_value("weights.bin");
  auto *off = w->add_external_data();
  off->set_key("offset");
  off->set_value("64");
  save(model, dir.file("m.onnx"));
  // The side file need not exist to locate (planning never reads weights).
  auto located = locateInitializers(dir.file("m.onnx"));
  ASSERT_TRUE(bool(located));
  const WeightSource &src = (*located)["big"];
  EXPECT_EQ(src.file, dir.file("weights.bin"));
  EXPECT_EQ(src.offset, 64);
  EXPECT_EQ(src.length, 16);
}

TEST(WeightLocator, CorruptFileIsAnError) {
  TempDir dir;
  {
    std::ofstream os(dir.file("bad.onnx"), std::ios::binary);
    os << "\x3a\xff\xff\xff\xff\x0f garbage"; // graph field with a huge length
  }
  auto located = locateInitializers(dir.file("bad.onnx"));
  ASSERT_FALSE(bool(located));
  EXPECT_NE(llvm::toString(located.takeError()).find("corrupt"),
            std::string::npos);
}

TEST(WeightLocator, MissingFileIsAnError) {
  auto located = locateInitializers("/nonexistent/model.onnx");
  ASSERT_FALSE(bool(located));
  EXPECT_NE(llvm::toString(located.takeError()).find("cannot open"),
            std::string::npos);
}

TEST(WeightLocator, ConstantNodeValueIsNamedByItsOutput) {
  // Paddle2ONNX stores weights in Constant nodes; they are located like
  // initializers, under the node's output name.
  TempDir dir;
  onnx::ModelProto model;
  onnx::NodeProto *node = model.mutable_graph()->add_node();
  node->set_op_type("Constant");
  node->add_output("conv1.w");
  onnx::AttributeProto *attr = node->add_attribute();
  attr->set_name("value");
  attr->set_type(onnx::AttributeProto_AttributeType_TENSOR);
  onnx::TensorProto *t = attr->mutable_t();
  t->set_data_type(onnx::TensorProto_DataType_FLOAT);
  t->add_dims(3);
  float values[] = {1.0f, 2.0f, 3.0f};
  t->set_raw_data(std::string(reinterpret_cast<char *>(values), 12));
  save(model, dir.file("m.onnx"));
  auto located = locateInitializers(dir.file("m.onnx"));
  ASSERT_TRUE(bool(located)) << llvm::toString(located.takeError());
  ASSERT_EQ(located->count("conv1.w"), 1u);
  EXPECT_EQ(readRange((*located)["conv1.w"]),
            std::string(reinterpret_cast<char *>(values), 12));
}
