//===- NpyTest.cpp - .npy reading and writing -----------------------------===//

#include "autopar/runtime/Npy.h"
#include "autopar/runtime/Error.h"

#include "TestUtil.h"

#include "gtest/gtest.h"

#include <cstring>
#include <numeric>

using namespace autopar::runtime;
using namespace autopar::runtime::test;

namespace {

/// A .npy file of format \p major with header dict \p dict (padded the way
/// NumPy pads) followed by \p data.
std::string makeNpy(int major, const std::string &dict,
                    const std::string &data) {
  size_t lengthBytes = major == 1 ? 2 : 4;
  std::string header = dict;
  size_t total = 8 + lengthBytes + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string bytes = "\x93NUMPY";
  bytes += static_cast<char>(major);
  bytes += '\0';
  for (size_t i = 0; i < lengthBytes; ++i)
    bytes += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return bytes + header + data;
}

std::string readError(const std::string &path) {
  try {
    readNpy(path);
  } catch (const Error &error) {
    return error.what();
  }
  return "(no error)";
}

TEST(NpyTest, RoundTripsEveryDType) {
  TempDir dir;
  const DType all[] = {DType::Float32,  DType::Float64, DType::Float16,
                       DType::BFloat16, DType::Int64,   DType::Int32,
                       DType::Int16,    DType::Int8,    DType::UInt64,
                       DType::UInt32,   DType::UInt16,  DType::UInt8,
                       DType::Bool};
  const Shape shapes[] = {{}, {3}, {2, 3, 4}, {0, 5}};
  for (DType dtype : all) {
    for (const Shape &shape : shapes) {
      int64_t bytes = byteSize(dtype, shape, "test");
      std::vector<uint8_t> data(static_cast<size_t>(bytes));
      for (size_t i = 0; i < data.size(); ++i)
        data[i] = static_cast<uint8_t>(dtype == DType::Bool ? i % 2 : i * 7);
      std::string path = dir.file("t.npy");
      writeNpy(path, dtype, shape, data.data());
      NpyArray array = readNpy(path);
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + formatShape(shape));
      EXPECT_EQ(array.dtype, npyStorageDType(dtype));
      EXPECT_EQ(array.shape, shape);
      ASSERT_EQ(array.data.size(), data.size());
      EXPECT_EQ(std::memcmp(array.data.data(), data.data(), data.size()), 0);
    }
  }
}

TEST(NpyTest, WritesNumPysHeaderLayout) {
  TempDir dir;
  float values[6] = {0, 1, 2, 3, 4, 5};
  writeNpy(dir.file("a.npy"), DType::Float32, {2, 3}, values);
  std::string bytes = readFile(dir.file("a.npy"));
  ASSERT_GE(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  size_t headerLength =
      static_cast<uint8_t>(bytes[8]) | static_cast<uint8_t>(bytes[9]) << 8;
  EXPECT_EQ((10 + headerLength) % 64, 0u);
  std::string header = bytes.substr(10, headerLength);
  EXPECT_EQ(header.rfind("{'descr': '<f4', 'fortran_order': False, "
                         "'shape': (2, 3), }",
                         0),
            0u)
      << header;
  EXPECT_EQ(header.back(), '\n');
  EXPECT_EQ(bytes.size(), 10 + headerLength + sizeof(values));

  writeNpy(dir.file("b.npy"), DType::BFloat16, {3}, values);
  EXPECT_NE(readFile(dir.file("b.npy")).find("'descr': '<u2'"),
            std::string::npos);
  EXPECT_NE(readFile(dir.file("b.npy")).find("'shape': (3,)"),
            std::string::npos);
  writeNpy(dir.file("c.npy"), DType::Bool, {}, values);
  EXPECT_NE(readFile(dir.file("c.npy")).find("'descr': '|b1'"),
            std::string::npos);
  EXPECT_NE(readFile(dir.file("c.npy")).find("'shape': ()"), std::string::npos);
}

TEST(NpyTest, ReadsVersions2And3AndPythonVariants) {
  TempDir dir;
  std::vector<int32_t> values = {1, -2, 3};
  for (int major : {2, 3}) {
    writeFile(dir.file("v.npy"),
              makeNpy(major,
                      "{'descr': '<i4', 'fortran_order': False, "
                      "'shape': (3,), }",
                      bytesOf(values)));
    NpyArray array = readNpy(dir.file("v.npy"));
    EXPECT_EQ(array.dtype, DType::Int32);
    EXPECT_EQ(array.shape, Shape{3});
    EXPECT_EQ(std::memcmp(array.data.data(), values.data(), 12), 0);
  }
  // Double quotes, no trailing comma, keys in another order, Python 2 longs.
  writeFile(dir.file("p.npy"),
            makeNpy(1,
                    "{\"shape\": (1L, 3L), \"fortran_order\": False, "
                    "\"descr\": \"<i4\"}",
                    bytesOf(values)));
  NpyArray array = readNpy(dir.file("p.npy"));
  EXPECT_EQ(array.shape, (Shape{1, 3}));
  // A Fortran-ordered vector is the same bytes as a C-ordered one.
  writeFile(dir.file("f.npy"),
            makeNpy(1,
                    "{'descr': '|u1', 'fortran_order': True, 'shape': (2,), }",
                    "ab"));
  EXPECT_EQ(readNpy(dir.file("f.npy")).dtype, DType::UInt8);
}

TEST(NpyTest, ReportsBadFiles) {
  TempDir dir;
  std::string data(24, '\0');
  auto check = [&](const std::string &bytes, const std::string &expected) {
    std::string path = dir.file("bad.npy");
    writeFile(path, bytes);
    std::string message = readError(path);
    EXPECT_NE(message.find(path), std::string::npos) << message;
    EXPECT_NE(message.find(expected), std::string::npos)
        << "expected \"" << expected << "\" in: " << message;
  };
  check(makeNpy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                data),
        "Fortran-ordered arrays are not supported");
  check(makeNpy(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (3,), }",
                data),
        "unsupported dtype '<c8'");
  check(makeNpy(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (6,), }",
                data),
        "big-endian dtype '>f4' is not supported");
  check(makeNpy(1,
                "{'descr': [('a', '<f4')], 'fortran_order': False, "
                "'shape': (6,), }",
                data),
        "structured dtypes are not supported");
  check(makeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (7,), }",
                data),
        "truncated: the header says float32 [7] (28 bytes of data), but the "
        "file has 24");
  check(makeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }",
                data),
        "corrupt");
  check(makeNpy(1, "{'descr': '<f4', 'fortran_order': False}", data),
        "the header must have 'descr', 'fortran_order' and 'shape'");
  check(makeNpy(1, "{'descr': '<f4', 'fortran_order': Maybe, 'shape': (6,)}",
                data),
        "expected True or False");
  check(makeNpy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-6,)}",
                data),
        "expected a dimension");
  check(makeNpy(4, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}",
                data),
        "unsupported .npy format version 4.0");
  check(std::string("\x93NUMPY\x01\x00\xff\x00{'descr'", 17),
        "truncated .npy header");
  check(std::string("\x93NUMPY\x02\x00\x10", 9), "truncated .npy header");
  check("PK\x03\x04 this is a zip file", "not a .npy file");
  check("", "not a .npy file");
  EXPECT_NE(readError(dir.file("missing.npy")).find("cannot open"),
            std::string::npos);
}

// Found by autopar-fuzz-npy (Inputs/fuzz/npy-header-length-4gib.npy): a
// 41-byte version 2 file whose header length says 4 GiB; the reader
// allocated the header before reading it, and ran out of memory.
TEST(NpyTest, ChecksTheHeaderLengthAgainstTheFileSize) {
  std::string path =
      AUTOPAR_RUNTIME_TEST_INPUTS "/fuzz/npy-header-length-4gib.npy";
  std::string message = readError(path);
  EXPECT_NE(message.find(path + ": truncated .npy header (4283339636 bytes "
                                "announced, the file has 41)"),
            std::string::npos)
      << message;
}

TEST(NpyTest, WriteToMissingDirectoryFails) {
  TempDir dir;
  float value = 1;
  std::string path = dir.file("no/such/dir/x.npy");
  try {
    writeNpy(path, DType::Float32, {}, &value);
    FAIL() << "expected an error";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos);
  }
}

} // namespace
