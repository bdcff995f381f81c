//===- Crc32.cpp - CRC-32 (zlib's polynomial) -----------------------------===//
//
// The byte-at-a-time table method: fast enough that checksumming a
// checkpoint costs less than writing it, and no dependency on zlib for the
// runtime's sake of building anywhere.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/Crc32.h"

#include <array>

namespace autopar::runtime {
namespace {

/// table[b]: the CRC of the single byte b, for the reflected polynomial.
std::array<uint32_t, 256> makeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int k = 0; k < 8; ++k)
      c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[b] = c;
  }
  return table;
}

} // namespace

uint32_t crc32(uint32_t crc, const void *data, size_t size) {
  static const std::array<uint32_t, 256> Table = makeTable();
  const unsigned char *bytes = static_cast<const unsigned char *>(data);
  // zlib's convention: the register starts and ends inverted, so that a
  // running CRC can be passed back in.
  uint32_t c = ~crc;
  for (size_t i = 0; i < size; ++i)
    c = Table[(c ^ bytes[i]) & 0xff] ^ (c >> 8);
  return ~c;
}

namespace {

/// \p matrix (32 columns over GF(2)) times \p vector.
uint32_t gf2Times(const std::array<uint32_t, 32> &matrix, uint32_t vector) {
  uint32_t sum = 0;
  for (size_t n = 0; vector; vector >>= 1, ++n)
    if (vector & 1)
      sum ^= matrix[n];
  return sum;
}

std::array<uint32_t, 32> gf2Square(const std::array<uint32_t, 32> &matrix) {
  std::array<uint32_t, 32> square{};
  for (size_t n = 0; n < 32; ++n)
    square[n] = gf2Times(matrix, matrix[n]);
  return square;
}

} // namespace

uint32_t crc32Combine(uint32_t first, uint32_t second, uint64_t secondSize) {
  // zlib's method: appending n zero bytes to a message is a linear map of its
  // CRC register; squaring the one-zero-bit operator gives the operators for
  // 2, 4, 8, ... zero bits, applied for the bits of n. The CRC of a then b is
  // that of a shifted by b's length, plus b's.
  if (secondSize == 0)
    return first;
  std::array<uint32_t, 32> odd{}, even{};
  odd[0] = 0xEDB88320u; // One zero bit.
  for (size_t n = 1; n < 32; ++n)
    odd[n] = 1u << (n - 1);
  even = gf2Square(odd); // Two zero bits.
  odd = gf2Square(even); // Four zero bits.
  uint64_t length = secondSize;
  do {
    // One zero byte at the first pass, then 2, 4, ... bytes.
    even = gf2Square(odd);
    if (length & 1)
      first = gf2Times(even, first);
    length >>= 1;
    if (length == 0)
      break;
    odd = gf2Square(even);
    if (length & 1)
      first = gf2Times(odd, first);
    length >>= 1;
  } while (length != 0);
  return first ^ second;
}

} // namespace autopar::runtime
