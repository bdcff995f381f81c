//===- Crc32.h - CRC-32 of checkpoint chunks --------------------*- C++ -*-===//
//
// Checkpoints store a CRC-32 per chunk so that a flipped bit on disk is an
// error naming the tensor rather than a silently different model. The
// polynomial is zlib's (IEEE 802.3, reflected 0xEDB88320), so `zlib.crc32`
// and `binascii.crc32` in Python check the same files.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_CRC32_H
#define AUTOPAR_RUNTIME_CRC32_H

#include <cstddef>
#include <cstdint>

namespace autopar::runtime {

/// Continues the CRC-32 \p crc (0 to start) over \p size bytes at \p data:
/// crc32(crc32(0, a), b) == crc32 of a followed by b, as zlib's crc32().
uint32_t crc32(uint32_t crc, const void *data, size_t size);

/// The CRC-32 of a followed by b from crc32(0, a) (\p first), crc32(0, b)
/// (\p second) and b's length, as zlib's crc32_combine(): a chunk's CRC from
/// the CRCs of its blocks, without a second pass over the bytes.
uint32_t crc32Combine(uint32_t first, uint32_t second, uint64_t secondSize);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_CRC32_H
