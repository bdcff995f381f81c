//===- TensorFiles.cpp - Input and output tensors as .npy files -----------===//

#include "autopar/runtime/TensorFiles.h"

#include "autopar/runtime/Error.h"
#include "autopar/runtime/Npy.h"

#include <cstring>
#include <filesystem>

namespace autopar::runtime {

std::string tensorFileName(const std::string &name) {
  std::string file = name;
  for (char &c : file)
    if (c == '/')
      c = '_';
  return file + ".npy";
}

void createDirectory(const std::string &dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error || !std::filesystem::is_directory(dir))
    throw Error("cannot create directory " + dir + ": " +
                (error ? error.message() : "a file is in the way"));
}

void readTensorFile(const std::string &path, const ArgumentDesc &arg,
                    void *data) {
  std::string what =
      std::string(argumentKindName(arg.kind)) + " '" + arg.name + "'";
  NpyArray array;
  try {
    array = readNpy(path);
  } catch (const Error &error) {
    throw Error(what + ": " + error.what());
  }
  DType expected = npyStorageDType(arg.dtype);
  if (array.dtype != expected || array.shape != arg.shape) {
    std::string note = arg.dtype == DType::BFloat16
                           ? " (bfloat16 is stored as uint16 bits)"
                           : "";
    throw Error(what + ": " + path + " holds " +
                formatTensorType(array.dtype, array.shape) + ", expected " +
                formatTensorType(expected, arg.shape) + note);
  }
  std::memcpy(data, array.data.data(), array.data.size());
}

void writeTensorFile(const std::string &path, const ArgumentDesc &arg,
                     const void *data) {
  writeNpy(path, arg.dtype, arg.shape, data);
}

} // namespace autopar::runtime
