//===- FuzzUtil.h - Helpers shared by the fuzz targets ----------*- C++ -*-===//
//
// Readers that take a path (the .npy readers, checkpoint loading) are fuzzed
// through a file in a private scratch directory, rewritten for every input.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_FUZZ_FUZZUTIL_H
#define AUTOPAR_FUZZ_FUZZUTIL_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace autopar::fuzz {

/// A directory of this process, made on first use (under /dev/shm when it
/// exists, else $TMPDIR or /tmp) and removed at exit.
const std::string &scratchDir();

/// Writes \p size bytes at \p data to \p path (replacing it); aborts if it
/// cannot, since that is a problem of the machine, not of the input.
void writeFile(const std::string &path, const uint8_t *data, size_t size);

} // namespace autopar::fuzz

#endif // AUTOPAR_FUZZ_FUZZUTIL_H
