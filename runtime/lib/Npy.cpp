//===- Npy.cpp - NumPy .npy files -----------------------------------------===//
//
// The format: the magic "\x93NUMPY", a version byte pair, the header length
// (2 bytes in version 1, 4 in versions 2 and 3), then a Python dict literal
// such as {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }, padded
// with spaces to a multiple of 64 bytes and ended by '\n', then the raw data.
// See numpy/lib/format.py.
//
//===----------------------------------------------------------------------===//

#include "autopar/runtime/Npy.h"

#include "autopar/runtime/Error.h"

#include <cstring>
#include <fstream>
#include <limits>
#include <optional>

namespace autopar::runtime {

namespace {

constexpr char Magic[] = "\x93NUMPY";
constexpr size_t MagicSize = 6;

struct DescrEntry {
  const char *code; // The descr without its byte-order character.
  DType dtype;
};

constexpr DescrEntry DescrTable[] = {
    {"f4", DType::Float32}, {"f8", DType::Float64}, {"f2", DType::Float16},
    {"i8", DType::Int64},   {"i4", DType::Int32},   {"i2", DType::Int16},
    {"i1", DType::Int8},    {"u8", DType::UInt64},  {"u4", DType::UInt32},
    {"u2", DType::UInt16},  {"u1", DType::UInt8},   {"b1", DType::Bool},
};

/// The fields of a .npy header dict.
struct NpyHeader {
  std::string descr;
  bool fortranOrder = false;
  Shape shape;
};

/// Parses the Python dict literal of a .npy header. It accepts exactly what
/// numpy.save writes (string keys; string, bool and int-tuple values) and
/// reports anything else as malformed rather than guessing.
class HeaderParser {
public:
  HeaderParser(std::string_view text, const std::string &path)
      : text(text), path(path) {}

  NpyHeader parse() {
    NpyHeader header;
    bool sawDescr = false, sawOrder = false, sawShape = false;
    expect('{');
    while (!consume('}')) {
      std::string key = parseString();
      expect(':');
      if (key == "descr") {
        skipSpace();
        if (pos < text.size() && text[pos] == '[')
          fail("structured dtypes are not supported");
        header.descr = parseString();
        sawDescr = true;
      } else if (key == "fortran_order") {
        header.fortranOrder = parseBool();
        sawOrder = true;
      } else if (key == "shape") {
        header.shape = parseShape();
        sawShape = true;
      } else {
        fail("unexpected key '" + key + "'");
      }
      if (!consume(',')) {
        expect('}');
        break;
      }
    }
    if (!sawDescr || !sawOrder || !sawShape)
      fail("the header must have 'descr', 'fortran_order' and 'shape'");
    return header;
  }

private:
  [[noreturn]] void fail(const std::string &what) {
    throw Error(path + ": malformed .npy header (" + what +
                "): " + std::string(text));
  }

  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }

  bool consume(char c) {
    skipSpace();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }

  void expect(char c) {
    if (!consume(c))
      fail(std::string("expected '") + c + "'");
  }

  std::string parseString() {
    skipSpace();
    if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"'))
      fail("expected a string");
    char quote = text[pos++];
    size_t end = text.find(quote, pos);
    if (end == std::string_view::npos)
      fail("unterminated string");
    std::string value(text.substr(pos, end - pos));
    pos = end + 1;
    return value;
  }

  bool parseBool() {
    skipSpace();
    for (auto [word, value] : {std::pair{"True", true}, {"False", false}}) {
      size_t length = std::strlen(word);
      if (text.substr(pos, length) == word) {
        pos += length;
        return value;
      }
    }
    fail("expected True or False");
  }

  Shape parseShape() {
    Shape shape;
    expect('(');
    while (!consume(')')) {
      skipSpace();
      size_t start = pos;
      int64_t dim = 0;
      while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
        int digit = text[pos++] - '0';
        if (dim > (std::numeric_limits<int64_t>::max() - digit) / 10)
          fail("dimension too large");
        dim = dim * 10 + digit;
      }
      if (pos == start)
        fail("expected a dimension");
      consume('L'); // Python 2 wrote long integers as "3L".
      shape.push_back(dim);
      if (!consume(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }

  std::string_view text;
  const std::string &path;
  size_t pos = 0;
};

DType dtypeFromDescr(const std::string &descr, const std::string &path) {
  std::string supported =
      "supported: <f4 <f8 <f2 <i8 <i4 <i2 |i1 <u8 <u4 <u2 |u1 |b1";
  if (descr.size() >= 2) {
    char order = descr[0];
    std::string code = descr.substr(1);
    for (const DescrEntry &entry : DescrTable) {
      if (code != entry.code)
        continue;
      bool singleByte = dtypeSize(entry.dtype) == 1;
      if (order == '<' || order == '|' || order == '=' || singleByte)
        return entry.dtype;
      if (order == '>')
        throw Error(path + ": big-endian dtype '" + descr +
                    "' is not supported; save it little-endian, e.g. "
                    "a.astype(a.dtype.newbyteorder('<'))");
    }
  }
  throw Error(path + ": unsupported dtype '" + descr + "' (" + supported + ")");
}

uint32_t readLittleEndian(const unsigned char *bytes, size_t count) {
  uint32_t value = 0;
  for (size_t i = 0; i < count; ++i)
    value |= static_cast<uint32_t>(bytes[i]) << (8 * i);
  return value;
}

std::string formatHeader(DType dtype, const Shape &shape) {
  std::string dims;
  for (int64_t dim : shape)
    dims += std::to_string(dim) + ", ";
  if (shape.size() > 1)
    dims.resize(dims.size() - 2); // "(2, 3)", but "(3,)" for rank 1.
  else if (shape.size() == 1)
    dims.resize(dims.size() - 1);
  return "{'descr': '" + npyDescr(dtype) +
         "', 'fortran_order': False, 'shape': (" + dims + "), }";
}

} // namespace

DType npyStorageDType(DType dtype) {
  return dtype == DType::BFloat16 ? DType::UInt16 : dtype;
}

std::string npyDescr(DType dtype) {
  DType storage = npyStorageDType(dtype);
  for (const DescrEntry &entry : DescrTable)
    if (entry.dtype == storage)
      return (dtypeSize(storage) == 1 ? "|" : "<") + std::string(entry.code);
  return "<f4"; // Unreachable: the table covers every storage dtype.
}

NpyLayout readNpyLayout(const std::string &path) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file)
    throw Error(path + ": cannot open: " + std::strerror(errno));
  int64_t fileSize = static_cast<int64_t>(file.tellg());
  file.seekg(0);

  unsigned char prefix[12];
  auto readExactly = [&](void *out, size_t count) {
    file.read(static_cast<char *>(out), static_cast<std::streamsize>(count));
    return static_cast<size_t>(file.gcount()) == count;
  };
  if (!readExactly(prefix, MagicSize + 2) ||
      std::memcmp(prefix, Magic, MagicSize) != 0)
    throw Error(path + ": not a .npy file (no \\x93NUMPY magic)");
  unsigned major = prefix[6], minor = prefix[7];
  if (major < 1 || major > 3)
    throw Error(path + ": unsupported .npy format version " +
                std::to_string(major) + "." + std::to_string(minor));
  size_t lengthBytes = major == 1 ? 2 : 4;
  if (!readExactly(prefix + 8, lengthBytes))
    throw Error(path + ": truncated .npy header");
  size_t headerLength = readLittleEndian(prefix + 8, lengthBytes);
  // The length is the file's word: check it against the file's size before
  // allocating for it.
  if (static_cast<int64_t>(MagicSize + 2 + lengthBytes + headerLength) >
      fileSize)
    throw Error(
        path + ": truncated .npy header (" + std::to_string(headerLength) +
        " bytes announced, the file has " + std::to_string(fileSize) + ")");
  std::string headerText(headerLength, '\0');
  if (!readExactly(headerText.data(), headerLength))
    throw Error(path + ": truncated .npy header (" +
                std::to_string(headerLength) + " bytes announced)");

  NpyHeader header = HeaderParser(headerText, path).parse();
  NpyLayout layout;
  layout.dtype = dtypeFromDescr(header.descr, path);
  layout.shape = header.shape;
  if (header.fortranOrder && layout.shape.size() > 1)
    throw Error(path + ": Fortran-ordered arrays are not supported; save a "
                       "C-ordered array (np.ascontiguousarray)");

  layout.dataBytes = byteSize(layout.dtype, layout.shape, path);
  layout.dataOffset =
      static_cast<int64_t>(MagicSize + 2 + lengthBytes + headerLength);
  int64_t available = fileSize - layout.dataOffset;
  if (available != layout.dataBytes)
    throw Error(
        path + ": " + (available < layout.dataBytes ? "truncated" : "corrupt") +
        ": the header says " + formatTensorType(layout.dtype, layout.shape) +
        " (" + std::to_string(layout.dataBytes) +
        " bytes of data), but the file has " + std::to_string(available));
  return layout;
}

NpyArray readNpy(const std::string &path) {
  NpyLayout layout = readNpyLayout(path);
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw Error(path + ": cannot open: " + std::strerror(errno));
  file.seekg(layout.dataOffset);
  NpyArray array;
  array.dtype = layout.dtype;
  array.shape = layout.shape;
  array.data = HostBuffer(static_cast<size_t>(layout.dataBytes));
  file.read(static_cast<char *>(array.data.data()),
            static_cast<std::streamsize>(layout.dataBytes));
  if (static_cast<int64_t>(file.gcount()) != layout.dataBytes)
    throw Error(path + ": read error");
  return array;
}

void writeNpy(const std::string &path, DType dtype, const Shape &shape,
              const void *data) {
  int64_t dataBytes = byteSize(dtype, shape, path);
  std::string header = formatHeader(dtype, shape);
  // Pad so that the data starts on a 64-byte boundary, as NumPy does.
  size_t lengthBytes = 2;
  unsigned char major = 1;
  size_t total = MagicSize + 2 + lengthBytes + header.size() + 1;
  if (total - MagicSize - 2 - lengthBytes > 0xffff) {
    lengthBytes = 4;
    major = 2;
    total += 2;
  }
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';

  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file)
    throw Error(path + ": cannot create: " + std::strerror(errno));
  file.write(Magic, MagicSize);
  file.put(static_cast<char>(major));
  file.put(0);
  for (size_t i = 0; i < lengthBytes; ++i)
    file.put(static_cast<char>((header.size() >> (8 * i)) & 0xff));
  file << header;
  file.write(static_cast<const char *>(data),
             static_cast<std::streamsize>(dataBytes));
  file.close();
  if (!file)
    throw Error(path + ": write error: " + std::strerror(errno));
}

} // namespace autopar::runtime
