//===- DTypeTest.cpp - Element types and 16-bit float conversion ----------===//

#include "autopar/runtime/DType.h"
#include "autopar/runtime/Error.h"
#include "autopar/runtime/Tensor.h"

#include "gtest/gtest.h"

#include <cmath>
#include <limits>
#include <vector>

using namespace autopar::runtime;

namespace {

TEST(DTypeTest, NamesAndSizes) {
  struct Case {
    const char *name;
    size_t size;
  } cases[] = {{"float32", 4}, {"float64", 8}, {"float16", 2}, {"bfloat16", 2},
               {"int64", 8},   {"int32", 4},   {"int16", 2},   {"int8", 1},
               {"uint64", 8},  {"uint32", 4},  {"uint16", 2},  {"uint8", 1},
               {"bool", 1}};
  for (const Case &c : cases) {
    std::optional<DType> dtype = parseDType(c.name);
    ASSERT_TRUE(dtype) << c.name;
    EXPECT_EQ(dtypeName(*dtype), c.name);
    EXPECT_EQ(dtypeSize(*dtype), c.size) << c.name;
  }
  EXPECT_FALSE(parseDType("float"));
  EXPECT_FALSE(parseDType("complex64"));
  EXPECT_NE(allDTypeNames().find("bfloat16"), std::string::npos);
}

TEST(DTypeTest, Float16RoundsToNearestEven) {
  EXPECT_EQ(floatToFloat16Bits(0.0f), 0x0000);
  EXPECT_EQ(floatToFloat16Bits(-0.0f), 0x8000);
  EXPECT_EQ(floatToFloat16Bits(1.0f), 0x3c00);
  EXPECT_EQ(floatToFloat16Bits(-2.0f), 0xc000);
  EXPECT_EQ(floatToFloat16Bits(65504.0f), 0x7bff);
  EXPECT_EQ(floatToFloat16Bits(65520.0f), 0x7c00); // Ties to even: Inf.
  EXPECT_EQ(floatToFloat16Bits(65519.0f), 0x7bff);
  EXPECT_EQ(floatToFloat16Bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(floatToFloat16Bits(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(floatToFloat16Bits(std::ldexp(1.0f, -25)), 0x0000); // Tie: even.
  EXPECT_EQ(floatToFloat16Bits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(floatToFloat16Bits(std::ldexp(3.0f, -25)), 0x0002); // Tie: even.
  EXPECT_EQ(floatToFloat16Bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(floatToFloat16Bits(1.0f + std::ldexp(3.0f, -11)), 0x3c02);
  EXPECT_EQ(floatToFloat16Bits(std::nanf("")) & 0x7e00, 0x7e00);
  // Every half value survives a round trip through float.
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    uint16_t half = static_cast<uint16_t>(bits);
    if ((half & 0x7c00) == 0x7c00 && (half & 0x3ff))
      continue; // NaN payloads are not preserved.
    EXPECT_EQ(floatToFloat16Bits(float16BitsToFloat(half)), half) << bits;
  }
}

TEST(DTypeTest, BFloat16RoundsToNearestEven) {
  EXPECT_EQ(floatToBFloat16Bits(1.0f), 0x3f80);
  EXPECT_EQ(floatToBFloat16Bits(-1.0f), 0xbf80);
  EXPECT_EQ(floatToBFloat16Bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(floatToBFloat16Bits(1.0f + std::ldexp(3.0f, -8)), 0x3f82);
  EXPECT_EQ(floatToBFloat16Bits(std::nanf("")) & 0x7fc0, 0x7fc0);
  EXPECT_EQ(bfloat16BitsToFloat(0x4049), 3.140625f);
}

TEST(DTypeTest, ConvertsFloat32BuffersWithRoundingAndSpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> values = {1.0f,
                               -2.5f,
                               1.0f + std::ldexp(1.0f, -8),  // bf16 tie: even
                               1.0f + std::ldexp(3.0f, -8),  // bf16 tie: up
                               1.0f + std::ldexp(1.0f, -11), // f16 tie: even
                               65520.0f, // f16: rounds to infinity
                               inf,
                               -inf,
                               std::nanf(""),
                               -0.0f};
  int64_t n = static_cast<int64_t>(values.size());
  std::vector<uint16_t> bf16(values.size()), f16(values.size());
  convertFromFloat32(values.data(), n, DType::BFloat16, bf16.data());
  convertFromFloat32(values.data(), n, DType::Float16, f16.data());
  std::vector<uint16_t> expectedBf16 = {0x3f80, 0xc020, 0x3f80, 0x3f82, 0x3f80,
                                        0x4780, 0x7f80, 0xff80, 0,      0x8000};
  std::vector<uint16_t> expectedF16 = {0x3c00, 0xc100, 0x3c04, 0x3c0c, 0x3c00,
                                       0x7c00, 0x7c00, 0xfc00, 0,      0x8000};
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) {
      // NaN stays a quiet NaN.
      EXPECT_EQ(bf16[i] & 0x7fc0, 0x7fc0) << i;
      EXPECT_EQ(f16[i] & 0x7e00, 0x7e00) << i;
      continue;
    }
    EXPECT_EQ(bf16[i], expectedBf16[i]) << "bfloat16 of " << values[i];
    EXPECT_EQ(f16[i], expectedF16[i]) << "float16 of " << values[i];
  }

  // Back to float32: exact, and NaN is NaN.
  std::vector<float> back(values.size());
  convertToFloat32(bf16.data(), DType::BFloat16, n, back.data());
  EXPECT_EQ(back[1], -2.5f);
  EXPECT_EQ(back[6], inf);
  EXPECT_TRUE(std::isnan(back[8]));
  convertToFloat32(f16.data(), DType::Float16, n, back.data());
  EXPECT_EQ(back[5], inf);
  EXPECT_TRUE(std::isnan(back[8]));
  EXPECT_TRUE(std::signbit(back[9]));

  std::vector<float> copy(values.size());
  convertFromFloat32(values.data(), n, DType::Float32, copy.data());
  EXPECT_EQ(copy[3], values[3]);
  EXPECT_TRUE(isConvertibleFromFloat32(DType::BFloat16));
  EXPECT_TRUE(isConvertibleFromFloat32(DType::Float16));
  EXPECT_FALSE(isConvertibleFromFloat32(DType::Int8));
  EXPECT_FALSE(isConvertibleFromFloat32(DType::Float64));
}

TEST(TensorTest, CountsAndFormats) {
  EXPECT_EQ(numElements({}, "t"), 1);
  EXPECT_EQ(numElements({2, 0, 3}, "t"), 0);
  EXPECT_EQ(byteSize(DType::Float64, {2, 3}, "t"), 48);
  EXPECT_EQ(formatShape({}), "[]");
  EXPECT_EQ(formatTensorType(DType::Int8, {2, 8}), "int8 [2, 8]");
  EXPECT_THROW(numElements({-1}, "t"), Error);
  EXPECT_THROW(numElements({int64_t(1) << 40, int64_t(1) << 40}, "t"), Error);
  EXPECT_THROW(byteSize(DType::Int64, {int64_t(1) << 61}, "t"), Error);
}

} // namespace
