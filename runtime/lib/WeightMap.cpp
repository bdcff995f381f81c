//===- WeightMap.cpp - Parameters read from memory-mapped files -----------===//

#include "autopar/runtime/WeightMap.h"

#include "autopar/runtime/Error.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
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

void *WeightMap::get(const ArgumentDesc &arg) {
  std::string what = "parameter '" + arg.name + "'";
  if (!arg.source)
    throw Error(what + " has no source");
  const TensorSource &source = *arg.source;
  fs::path file(source.file);
  std::string resolved = file.is_absolute()
                             ? file.string()
                             : (fs::path(artifactDir) / file).string();

  int64_t expected = byteSize(arg.dtype, arg.shape, what);
  if (source.length != expected)
    throw Error(what + ": source length " + std::to_string(source.length) +
                " bytes does not match its type " +
                formatTensorType(arg.dtype, arg.shape) + " (" +
                std::to_string(expected) + " bytes), in " + resolved);

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

  if (length == 0) { // Nothing to read; still hand out a valid address.
    alignedCopies.emplace_back(0);
    return alignedCopies.back().data();
  }
  uint8_t *bytes = mapped->data() + offset;
  // Raw data inside an .onnx file sits at whatever offset protobuf put it. An
  // element at a misaligned address is undefined behaviour for the generated
  // code, so such a parameter is copied (the only case where one is).
  if (reinterpret_cast<uintptr_t>(bytes) % dtypeSize(arg.dtype) != 0) {
    alignedCopies.emplace_back(static_cast<size_t>(length));
    std::memcpy(alignedCopies.back().data(), bytes,
                static_cast<size_t>(length));
    return alignedCopies.back().data();
  }
  return bytes;
}

} // namespace autopar::runtime
