//===- RandomInputsTest.cpp - Reproducible random inputs ------------------===//

#include "autopar/runtime/RandomInputs.h"

#include "gtest/gtest.h"

#include <cstring>
#include <vector>

using namespace autopar::runtime;

namespace {

TEST(RandomInputsTest, FloatsAreInRangeAndReproducible) {
  std::vector<float> a(10000), b(10000), c(10000), d(10000);
  fillRandom(DType::Float32, 10000, a.data(), 7, "x");
  fillRandom(DType::Float32, 10000, b.data(), 7, "x");
  fillRandom(DType::Float32, 10000, c.data(), 8, "x");
  fillRandom(DType::Float32, 10000, d.data(), 7, "y");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
  float low = 1, high = -1, sum = 0;
  for (float v : a) {
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
    low = std::min(low, v);
    high = std::max(high, v);
    sum += v;
  }
  EXPECT_LT(low, -0.99f);
  EXPECT_GT(high, 0.99f);
  EXPECT_NEAR(sum / 10000, 0.0f, 0.05f);
}

TEST(RandomInputsTest, IntegersStayInZeroToTen) {
  std::vector<int64_t> ids(1000);
  fillRandom(DType::Int64, 1000, ids.data(), 0, "input_ids");
  std::vector<int> seen(10, 0);
  for (int64_t id : ids) {
    ASSERT_GE(id, 0);
    ASSERT_LT(id, 10);
    ++seen[static_cast<size_t>(id)];
  }
  for (int count : seen)
    EXPECT_GT(count, 0);
  std::vector<uint8_t> bools(1000);
  fillRandom(DType::Bool, 1000, bools.data(), 0, "mask");
  for (uint8_t v : bools)
    EXPECT_LE(v, 1);
}

TEST(RandomInputsTest, SixteenBitFloatsStayBelowTheBound) {
  for (DType dtype : {DType::Float16, DType::BFloat16}) {
    std::vector<uint16_t> bits(20000);
    fillRandom(dtype, 20000, bits.data(), 1, "h");
    for (uint16_t b : bits) {
      float v = dtype == DType::Float16 ? float16BitsToFloat(b)
                                        : bfloat16BitsToFloat(b);
      ASSERT_GE(v, -1.0f);
      ASSERT_LT(v, 1.0f);
    }
  }
}

TEST(RandomInputsTest, HonoursACustomPolicy) {
  RandomInputPolicy policy;
  policy.intLow = 100;
  policy.intHigh = 103;
  std::vector<int32_t> values(100);
  fillRandom(DType::Int32, 100, values.data(), 0, "labels", policy);
  for (int32_t v : values) {
    EXPECT_GE(v, 100);
    EXPECT_LT(v, 103);
  }
}

} // namespace
