//===- Crc32Test.cpp - CRC-32 against known vectors -----------------------===//

#include "autopar/runtime/Crc32.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <string>

using namespace autopar::runtime;

namespace {

uint32_t crcOf(const std::string &text) {
  return crc32(0, text.data(), text.size());
}

TEST(Crc32Test, KnownVectors) {
  // The check value of CRC-32/ISO-HDLC (zlib), and zlib.crc32 of the others.
  EXPECT_EQ(crcOf("123456789"), 0xCBF43926u);
  EXPECT_EQ(crcOf(""), 0u);
  EXPECT_EQ(crcOf("a"), 0xE8B7BE43u);
  EXPECT_EQ(crcOf("The quick brown fox jumps over the lazy dog"), 0x414FA339u);
  EXPECT_EQ(crcOf(std::string(32, '\0')), 0x190A55ADu);
}

TEST(Crc32Test, ContinuesAcrossPieces) {
  std::string text = "The quick brown fox jumps over the lazy dog";
  uint32_t running = 0;
  for (size_t i = 0; i < text.size(); i += 5)
    running =
        crc32(running, text.data() + i, std::min<size_t>(5, text.size() - i));
  EXPECT_EQ(running, crcOf(text));
}

TEST(Crc32Test, DetectsAFlippedBit) {
  std::string text = "123456789";
  text[4] ^= 0x10;
  EXPECT_NE(crcOf(text), 0xCBF43926u);
}

} // namespace
