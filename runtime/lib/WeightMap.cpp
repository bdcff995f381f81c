//===- WeightMap.cpp - Parameters read from memory-mapped files -----------===//

#include "autopar/runtime/WeightMap.h"

#include "autopar/runtime/Error.h"
#include "autopar/runtime/TensorLayout.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <optional>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace autopar::runtime {

MappedFile::MappedFile(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error(path + ": cannot open: " + std::strerror(errno));
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    int saved = errno;
    ::close(fd);
    throw Error(path + ": cannot stat: " + std::strerror(saved));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    throw Error(path + ": not a regular file");
  }
  length = static_cast<size_t>(info.st_size);
  if (length > 0) {
    // MAP_PRIVATE with write access: a program that updates a parameter in
    // place gets its own copy of the touched pages; the file never changes.
    void *address =
        ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) {
      int saved = errno;
      ::close(fd);
      throw Error(path + ": cannot memory-map " + std::to_string(length) +
                  " bytes: " + std::strerror(saved));
    }
    base = static_cast<uint8_t *>(address);
  }
  ::close(fd); // The mapping keeps the file alive.
}

MappedFile::~MappedFile() {
  if (base)
    ::munmap(base, length);
}

WeightMap::WeightMap(std::string artifactDir)
    : artifactDir(std::move(artifactDir)) {}

MappedFile &WeightMap::mapFile(const std::string &resolvedPath) {
  std::error_code ignored;
  fs::path canonical = fs::weakly_canonical(resolvedPath, ignored);
  std::string key = canonical.empty() ? resolvedPath : canonical.string();
  std::unique_ptr<MappedFile> &slot = files[key];
  if (!slot) {
    try {
      slot = std::make_unique<MappedFile>(resolvedPath);
    } catch (...) {
      files.erase(key);
      throw;
    }
  }
  return *slot;
}

void *WeightMap::get(const ArgumentDesc &arg, const GridVector &coords,
                     const GridVector &grid) {
  std::string what = "parameter '" + arg.name + "'";
  if (!arg.source)
    throw Error(what + " has no source");
  const TensorSource &source = *arg.source;
  fs::path file(source.file);
  std::string resolved = file.is_absolute()
                             ? file.string()
                             : (fs::path(artifactDir) / file).string();

  // The source holds the whole tensor; a split parameter's rank takes one
  // block of it (the manifest parser checked global_shape against shape).
  const Shape &whole =
      arg.split && !arg.globalShape.empty() ? arg.globalShape : arg.shape;
  int64_t expected = byteSize(arg.dtype, whole, what);
  if (source.length != expected)
    throw Error(what + ": source length " + std::to_string(source.length) +
                " bytes does not match its " +
                (arg.split ? "global type " : "type ") +
                formatTensorType(arg.dtype, whole) + " (" +
                std::to_string(expected) + " bytes" +
                (arg.split ? "; the source holds the whole tensor, of which "
                             "each rank takes a block " +
                                 formatShape(arg.shape)
                           : std::string()) +
                "), in " + resolved);

  int64_t block = 0, parts = 1;
  std::optional<BlockSplit> blocks;
  std::optional<TensorBox> box;
  if (arg.innerSplit) {
    // A block of a block: its box, which the file holds strided.
    if (grid.empty())
      throw Error("internal error: " + what +
                  " is cut twice, and loading its block needs the grid");
    box = arg.boxAt(grid, coords);
    if (box->sizes != arg.shape)
      throw Error(what + ": its block of " + formatShape(whole) + " is " +
                  formatShape(box->sizes) + ", but its shape is " +
                  formatShape(arg.shape));
  } else if (arg.split) {
    size_t axis = static_cast<size_t>(arg.split->axis);
    block = coords[axis];
    if (arg.shape.size() != whole.size() || arg.split->dim < 0 ||
        arg.split->dim >= static_cast<int64_t>(whole.size()) ||
        arg.shape[arg.split->dim] == 0 ||
        whole[arg.split->dim] % arg.shape[arg.split->dim] != 0)
      throw Error(what + ": global shape " + formatShape(whole) +
                  " is not a whole number of blocks " + formatShape(arg.shape) +
                  " along dim " + std::to_string(arg.split->dim));
    parts = whole[arg.split->dim] / arg.shape[arg.split->dim];
    if (block < 0 || block >= parts)
      throw Error(what + ": coordinate " + std::to_string(block) + " on axis " +
                  std::string(gridAxisName(arg.split->axis)) +
                  " is outside its " + std::to_string(parts) + " blocks");
    blocks.emplace(whole, arg.split->dim, parts, dtypeSize(arg.dtype), what);
  }

  MappedFile *mapped;
  try {
    mapped = &mapFile(resolved);
  } catch (const Error &error) {
    throw Error(what + ": " + error.what());
  }
  uint64_t size = mapped->size();
  uint64_t offset = static_cast<uint64_t>(source.offset);
  uint64_t length = static_cast<uint64_t>(source.length);
  if (offset > size || length > size - offset)
    throw Error(what + ": bytes [" + std::to_string(offset) + ", " +
                std::to_string(offset + length) + ") lie outside " + resolved +
                " (" + std::to_string(size) + " bytes)");

  uint8_t *bytes = mapped->data() + offset;
  size_t blockLength = static_cast<size_t>(length);
  if (box) {
    blockLength = static_cast<size_t>(byteSize(arg.dtype, arg.shape, what));
    alignedCopies.emplace_back(blockLength);
    if (blockLength > 0)
      packBox(bytes, whole, *box, dtypeSize(arg.dtype),
              alignedCopies.back().data());
    return alignedCopies.back().data();
  }
  if (blocks) {
    blockLength = blocks->blockBytes();
    if (!blocks->blocksAreContiguous()) {
      // A block along an inner dimension is strided in the file: copy it
      // once, at load, into dense aligned memory.
      alignedCopies.emplace_back(blockLength);
      if (blockLength > 0)
        blocks->pack(bytes, block, alignedCopies.back().data());
      return alignedCopies.back().data();
    }
    bytes += static_cast<size_t>(block) * blockLength;
  }

  if (blockLength == 0) { // Nothing to read; still hand out a valid address.
    alignedCopies.emplace_back(0);
    return alignedCopies.back().data();
  }
  // Raw data inside an .onnx file sits at whatever offset protobuf put it. An
  // element at a misaligned address is undefined behaviour for the generated
  // code, so such a parameter is copied (the only case where one is).
  if (reinterpret_cast<uintptr_t>(bytes) % dtypeSize(arg.dtype) != 0) {
    alignedCopies.emplace_back(blockLength);
    std::memcpy(alignedCopies.back().data(), bytes, blockLength);
    return alignedCopies.back().data();
  }
  return bytes;
}

} // namespace autopar::runtime
