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

} // namespace autopar::runtime
