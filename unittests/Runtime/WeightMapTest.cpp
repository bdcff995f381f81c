//===- WeightMapTest.cpp - Parameters from memory-mapped files ------------===//

#include "autopar/runtime/WeightMap.h"
#include "autopar/runtime/Error.h"

#include "TestUtil.h"

#include "gtest/gtest.h"

#include <cstdint>
#include <cstring>

using namespace autopar::runtime;
using namespace autopar::runtime::test;

namespace {

ArgumentDesc parameter(const std::string &name, Shape shape,
                       const std::string &file, int64_t offset, int64_t length,
                       DType dtype = DType::Float32) {
  ArgumentDesc arg;
  arg.kind = ArgumentKind::Parameter;
  arg.name = name;
  arg.dtype = dtype;
  arg.shape = std::move(shape);
  arg.source = TensorSource{file, offset, length};
  return arg;
}

std::string getError(WeightMap &weights, const ArgumentDesc &arg) {
  try {
    weights.get(arg);
  } catch (const Error &error) {
    return error.what();
  }
  return "(no error)";
}

class WeightMapTest : public ::testing::Test {
protected:
  void SetUp() override {
    // 16 bytes of header, then floats 0..7.
    std::vector<float> values(8);
    for (int i = 0; i < 8; ++i)
      values[i] = static_cast<float>(i);
    writeFile(dir.file("weights.bin"), std::string(16, 'H') + bytesOf(values));
  }

  TempDir dir;
};

TEST_F(WeightMapTest, PointsIntoTheFileAndMapsItOnce) {
  WeightMap weights(dir.path());
  auto *a = static_cast<float *>(
      weights.get(parameter("a", {2, 2}, "weights.bin", 16, 16)));
  auto *b = static_cast<float *>(
      weights.get(parameter("b", {4}, dir.file("weights.bin"), 32, 16)));
  auto *c = static_cast<float *>(
      weights.get(parameter("c", {}, "./sub/../weights.bin", 44, 4)));
  EXPECT_EQ(a[0], 0.0f);
  EXPECT_EQ(a[3], 3.0f);
  EXPECT_EQ(b[0], 4.0f);
  EXPECT_EQ(b[3], 7.0f);
  EXPECT_EQ(c[0], 7.0f);
  EXPECT_EQ(b, a + 4);
  EXPECT_EQ(weights.numMappedFiles(), 1u);
}

TEST_F(WeightMapTest, WritesStayPrivate) {
  WeightMap weights(dir.path());
  auto *a = static_cast<float *>(
      weights.get(parameter("a", {8}, "weights.bin", 16, 32)));
  a[0] = 42.0f;
  EXPECT_EQ(readFile(dir.file("weights.bin")).substr(16, 4),
            std::string(4, '\0'));
}

TEST_F(WeightMapTest, CopiesMisalignedParameters) {
  // int16 values at offset 17 (odd): they must come back at an aligned
  // address with the right contents.
  writeFile(dir.file("odd.bin"),
            std::string(17, 'x') + bytesOf(std::vector<int16_t>{-3, 300}));
  WeightMap weights(dir.path());
  void *data = weights.get(parameter("w", {2}, "odd.bin", 17, 4, DType::Int16));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % 2, 0u);
  int16_t values[2];
  std::memcpy(values, data, 4);
  EXPECT_EQ(values[0], -3);
  EXPECT_EQ(values[1], 300);
  // A byte-sized type at an odd offset needs no copy.
  void *bytes =
      weights.get(parameter("u", {1}, "odd.bin", 17, 1, DType::UInt8));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(bytes) % 2, 1u);
}

TEST_F(WeightMapTest, EmptyParametersGetAnAddress) {
  writeFile(dir.file("empty.bin"), "");
  WeightMap weights(dir.path());
  EXPECT_NE(weights.get(parameter("e", {0, 3}, "empty.bin", 0, 0)), nullptr);
}

TEST_F(WeightMapTest, ReportsBadRanges) {
  WeightMap weights(dir.path());
  std::string file = dir.file("weights.bin");
  std::string message =
      getError(weights, parameter("fc.weight", {4, 2}, "weights.bin", 40, 32));
  EXPECT_NE(message.find("parameter 'fc.weight': bytes [40, 72) lie outside " +
                         file + " (48 bytes)"),
            std::string::npos)
      << message;
  message = getError(
      weights, parameter("fc.bias", {4}, "weights.bin", INT64_MAX - 2, 16));
  EXPECT_NE(message.find("parameter 'fc.bias': bytes ["), std::string::npos)
      << message;
  message =
      getError(weights, parameter("fc.weight", {4, 2}, "weights.bin", 16, 24));
  EXPECT_NE(message.find("parameter 'fc.weight': source length 24 bytes does "
                         "not match its type float32 [4, 2] (32 bytes), in " +
                         file),
            std::string::npos)
      << message;
}

/// \p arg split over tp along \p dim: its source holds \p global.
ArgumentDesc splitParameter(ArgumentDesc arg, Shape global, int64_t dim) {
  arg.globalShape = std::move(global);
  arg.split = SplitDesc{GridAxis::TP, dim};
  return arg;
}

GridVector tpCoord(int64_t t) { return GridVector{0, t, 0}; }

TEST_F(WeightMapTest, SplitParametersGetTheirBlock) {
  // floats 0..7 at offset 16 as a [2, 4] matrix, cut over tp = 2.
  WeightMap weights(dir.path());
  ArgumentDesc rows =
      splitParameter(parameter("r", {1, 4}, "weights.bin", 16, 32), {2, 4}, 0);
  auto *r0 = static_cast<float *>(weights.get(rows, tpCoord(0)));
  auto *r1 = static_cast<float *>(weights.get(rows, tpCoord(1)));
  EXPECT_EQ(r0[0], 0.0f);
  EXPECT_EQ(r1[0], 4.0f);
  EXPECT_EQ(r1[3], 7.0f);
  // Blocks along dim 0 point into the mapping (no copy).
  auto *whole = static_cast<float *>(
      weights.get(parameter("w", {8}, "weights.bin", 16, 32)));
  EXPECT_EQ(r0, whole);
  EXPECT_EQ(r1, whole + 4);

  // Blocks along dim 1 are strided in the file: copied, dense and aligned.
  ArgumentDesc cols =
      splitParameter(parameter("c", {2, 2}, "weights.bin", 16, 32), {2, 4}, 1);
  for (int64_t t : {0, 1}) {
    auto *c = static_cast<float *>(weights.get(cols, tpCoord(t)));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(c) % HostBuffer::Alignment, 0u);
    EXPECT_EQ(c[0], 2.0f * t);
    EXPECT_EQ(c[1], 2.0f * t + 1);
    EXPECT_EQ(c[2], 2.0f * t + 4);
    EXPECT_EQ(c[3], 2.0f * t + 5);
  }
  // Leading dims of size 1 keep a block contiguous.
  ArgumentDesc inner = splitParameter(
      parameter("i", {1, 1, 4}, "weights.bin", 16, 32), {1, 2, 4}, 1);
  EXPECT_EQ(weights.get(inner, tpCoord(1)), whole + 4);
  EXPECT_EQ(weights.numMappedFiles(), 1u);
}

TEST_F(WeightMapTest, MisalignedBlocksAreCopied) {
  // int16 [2, 2] at offset 17: block 1 along dim 0 starts at 21 (odd).
  writeFile(dir.file("odd.bin"),
            std::string(17, 'x') +
                bytesOf(std::vector<int16_t>{1, 2, -3, 300}));
  WeightMap weights(dir.path());
  ArgumentDesc rows = splitParameter(
      parameter("w", {1, 2}, "odd.bin", 17, 8, DType::Int16), {2, 2}, 0);
  void *data = weights.get(rows, tpCoord(1));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % 2, 0u);
  int16_t values[2];
  std::memcpy(values, data, 4);
  EXPECT_EQ(values[0], -3);
  EXPECT_EQ(values[1], 300);
}

TEST_F(WeightMapTest, ReportsInconsistentSplits) {
  WeightMap weights(dir.path());
  // The source must hold the whole tensor, not the block.
  std::string message = getError(
      weights,
      splitParameter(parameter("fc.weight", {2, 2}, "weights.bin", 16, 16),
                     {2, 4}, 1));
  EXPECT_NE(message.find("parameter 'fc.weight': source length 16 bytes does "
                         "not match its global type float32 [2, 4] (32 "
                         "bytes; the source holds the whole tensor, of which "
                         "each rank takes a block [2, 2])"),
            std::string::npos)
      << message;
  message = getError(weights, splitParameter(parameter("fc.weight", {2, 3},
                                                       "weights.bin", 16, 32),
                                             {2, 4}, 1));
  EXPECT_NE(message.find("parameter 'fc.weight': global shape [2, 4] is not a "
                         "whole number of blocks [2, 3] along dim 1"),
            std::string::npos)
      << message;
  try {
    weights.get(splitParameter(parameter("w", {1, 4}, "weights.bin", 16, 32),
                               {2, 4}, 0),
                tpCoord(2));
    ADD_FAILURE() << "expected an error";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what())
                  .find("parameter 'w': coordinate 2 on axis tp is outside "
                        "its 2 blocks"),
              std::string::npos)
        << error.what();
  }
}

TEST_F(WeightMapTest, ReportsMissingFiles) {
  WeightMap weights(dir.path());
  std::string message =
      getError(weights, parameter("w", {1}, "nope.bin", 0, 4));
  EXPECT_NE(
      message.find("parameter 'w': " + dir.file("nope.bin") + ": cannot open"),
      std::string::npos)
      << message;
  message = getError(weights, parameter("w", {1}, ".", 0, 4));
  EXPECT_NE(message.find("not a regular file"), std::string::npos) << message;
  EXPECT_EQ(weights.numMappedFiles(), 0u);
}

} // namespace
