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

TEST(Crc32Test, CombinesTheCrcsOfPieces) {
  std::string text(3000, '\0');
  for (size_t i = 0; i < text.size(); ++i)
    text[i] = static_cast<char>(i * 131 + 7);
  for (size_t split : {size_t(0), size_t(1), size_t(64), size_t(1000),
                       size_t(2999), size_t(3000)}) {
    uint32_t first = crc32(0, text.data(), split);
    uint32_t second = crc32(0, text.data() + split, text.size() - split);
    EXPECT_EQ(crc32Combine(first, second, text.size() - split), crcOf(text))
        << "split at " << split;
  }
}

TEST(Crc32Test, DetectsAFlippedBit) {
  std::string text = "123456789";
  text[4] ^= 0x10;
  EXPECT_NE(crcOf(text), 0xCBF43926u);
}

} // namespace
