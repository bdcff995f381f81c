//===- WeightMap.h - Parameters read from memory-mapped files ---*- C++ -*-===//
//
// Parameters stay in the files the compiler points at (the ONNX model, its
// external-data files, constants.bin). Each file is memory-mapped once, and a
// parameter is a pointer into the mapping, so only the pages a rank touches are
// read.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_WEIGHTMAP_H
#define AUTOPAR_RUNTIME_WEIGHTMAP_H

#include "autopar/runtime/HostBuffer.h"
#include "autopar/runtime/Manifest.h"

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace autopar::runtime {

/// A whole file mapped copy-on-write: generated code may write to a parameter
/// (as a training step will) without touching the file.
class MappedFile {
public:
  /// Maps \p path; throws Error naming it if it cannot be opened or mapped.
  explicit MappedFile(const std::string &path);
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  uint8_t *data() { return base; }
  size_t size() const { return length; }

private:
  uint8_t *base = nullptr;
  size_t length = 0;
};

/// Resolves parameter arguments to memory.
class WeightMap {
public:
  /// Relative source files are resolved against \p artifactDir.
  explicit WeightMap(std::string artifactDir);

  /// A pointer to the bytes of parameter \p arg. Throws Error naming the
  /// parameter and the file if the file cannot be mapped, the byte range lies
  /// outside it, or the length does not match the parameter's dtype and
  /// (global) shape. The pointer stays valid for the WeightMap's lifetime.
  ///
  /// A split parameter's source holds the whole tensor (`globalShape`); the
  /// result is the block of the rank at \p coords (its coordinate on the
  /// split axis): a pointer into the mapping when the block is contiguous
  /// (split along dim 0, or only size-1 dims before it) and aligned to the
  /// element size, otherwise a dense copy made here, once. A parameter cut
  /// twice (`innerSplit`: ZeRO-3's blocks of a tensor-parallel block) needs
  /// the \p grid too.
  void *get(const ArgumentDesc &arg, const GridVector &coords = {},
            const GridVector &grid = {});

  /// Number of distinct files mapped so far.
  size_t numMappedFiles() const { return files.size(); }

private:
  MappedFile &mapFile(const std::string &resolvedPath);

  std::string artifactDir;
  /// Keyed by canonical path, so each file is mapped once.
  std::map<std::string, std::unique_ptr<MappedFile>> files;
  /// Parameters whose offset is not aligned to their element size, and
  /// blocks of split parameters that are strided in their file, copied.
  std::vector<HostBuffer> alignedCopies;
};

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_WEIGHTMAP_H
