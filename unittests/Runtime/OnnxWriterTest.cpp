//===- OnnxWriterTest.cpp - Protobuf-encoded ONNX initializers ------------===//

#include "autopar/runtime/Error.h"
#include "autopar/runtime/OnnxWriter.h"

#include "gtest/gtest.h"

#include <cstdio>
#include <fstream>
#include <iterator>

using namespace autopar::runtime;

namespace {

std::string bytes(std::initializer_list<int> values) {
  std::string s;
  for (int v : values)
    s.push_back(static_cast<char>(v));
  return s;
}

TEST(OnnxWriterTest, EncodesAnInitializerAsAModelFragment) {
  float data[2] = {1.0f, -2.0f};
  std::string got =
      encodeInitializerFragment({"w", DType::Float32, {2}, data});
  // TensorProto: dims=2 (field 1), data_type=1 (field 2), name="w" (field 8),
  // raw_data = 8 bytes (field 9).
  std::string tensor = bytes({0x08, 0x02, 0x10, 0x01, 0x42, 0x01, 'w', 0x4A,
                              0x08}) +
                       std::string(reinterpret_cast<const char *>(data), 8);
  // GraphProto.initializer is field 5, ModelProto.graph field 7, both
  // length-delimited.
  std::string graph = bytes({0x2A, static_cast<int>(tensor.size())}) + tensor;
  std::string model = bytes({0x3A, static_cast<int>(graph.size())}) + graph;
  EXPECT_EQ(got, model);
}

TEST(OnnxWriterTest, LongFieldsUseMultiByteLengths) {
  std::vector<float> data(100, 0.5f); // 400 bytes: the length needs 2 bytes
  std::string got =
      encodeInitializerFragment({"big", DType::Float32, {10, 10}, data.data()});
  // The raw_data key and its varint length 400 = 0x90 0x03.
  EXPECT_NE(got.find(bytes({0x4A, 0x90, 0x03})), std::string::npos);
  EXPECT_EQ(got.size(), 3u + 3u + (2 + 2 + 2 + 5 + 3 + 400));
}

TEST(OnnxWriterTest, DataTypesAreOnnxNumbers) {
  EXPECT_EQ(onnxDataType(DType::Float32), 1);
  EXPECT_EQ(onnxDataType(DType::Int64), 7);
  EXPECT_EQ(onnxDataType(DType::Bool), 9);
  EXPECT_EQ(onnxDataType(DType::Float16), 10);
  EXPECT_EQ(onnxDataType(DType::BFloat16), 16);
}

TEST(OnnxWriterTest, AppendsFragmentsToTheTemplateAtomically) {
  std::string dir = ::testing::TempDir();
  std::string templatePath = dir + "/onnx-writer-template.onnx";
  std::string outPath = dir + "/onnx-writer-out.onnx";
  {
    std::ofstream t(templatePath, std::ios::binary);
    t << "TEMPLATE";
  }
  int64_t value = 7;
  writeOnnxWithInitializers(templatePath, {{"n", DType::Int64, {}, &value}},
                            outPath);
  std::ifstream in(outPath, std::ios::binary);
  std::string written((std::istreambuf_iterator<char>(in)),
                      std::istreambuf_iterator<char>());
  EXPECT_EQ(written, "TEMPLATE" + encodeInitializerFragment(
                                      {"n", DType::Int64, {}, &value}));
  std::ifstream temporary(outPath + ".tmp");
  EXPECT_FALSE(temporary.good()) << "the temporary file was left behind";
}

TEST(OnnxWriterTest, AMissingTemplateIsAClearError) {
  try {
    writeOnnxWithInitializers("/nonexistent/template.onnx", {},
                              ::testing::TempDir() + "/never.onnx");
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/template.onnx"),
              std::string::npos);
    EXPECT_NE(std::string(e.what()).find("recompile"), std::string::npos);
  }
}

} // namespace
