//===- WeightLocator.cpp - Initializer byte ranges from the wire format ---===//
//
// Walks ModelProto.graph (field 7) -> GraphProto.initializer (field 5) ->
// TensorProto with a minimal protobuf wire-format reader. Length-delimited
// payloads are skipped by offset, so weight pages of the memory-mapped file
// are never read.
//
//===----------------------------------------------------------------------===//

#include "autopar/Import/WeightLocator.h"

#include "llvm/ADT/SmallString.h"

#include <optional>
#include <tuple>

#include "onnx/defs/parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace llvm;
namespace autopar {
namespace {

/// Reads protobuf fields from a byte range of the file.
class WireReader {
public:
  WireReader(const char *begin, const char *end, const char *base)
      : p(begin), end(end), base(base) {}
  bool done() const { return p >= end; }
  bool failed() const { return error; }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64 && p < end; shift += 7) {
      uint8_t byte = *p++;
      v |= uint64_t(byte & 0x7f) << shift;
      if (!(byte & 0x80))
        return v;
    }
    error = true;
    return 0;
  }
  /// Reads a field key; returns false at the end or on error.
  bool next(uint32_t &field, uint32_t &wireType) {
    if (done() || error)
      return false;
    uint64_t key = varint();
    field = key >> 3;
    wireType = key & 7;
    return !error;
  }
  /// A length-delimited payload: [begin, end).
  std::pair<const char *, const char *> bytes() {
    uint64_t len = varint();
    if (error || len > uint64_t(end - p)) {
      error = true;
      return {p, p};
    }
    const char *b = p;
    p += len;
    return {b, p};
  }
  void skip(uint32_t wireType) {
    switch (wireType) {
    case 0:
      varint();
      break;
    case 1:
      p += 8;
      break;
    case 2:
      bytes();
      break;
    case 5:
      p += 4;
      break;
    default:
      error = true;
    }
    if (p > end)
      error = true;
  }
  int64_t offsetOf(const char *q) const { return q - base; }

private:
  const char *p, *end, *base;
  bool error = false;
};

struct TensorInfo {
  std::string name;
  int32_t dataType = 0;
  int64_t numElements = 1;
  bool hasRaw = false, external = false;
  int64_t rawOffset = 0, rawLength = 0;
  /// A fixed-width packed field (float_data, double_data): contiguous bytes.
  bool hasFixed = false;
  int64_t fixedOffset = 0, fixedLength = 0;
  /// Varint-packed values (int32_data, int64_data, uint64_data).
  std::vector<int64_t> varints;
  std::string location;
  int64_t extOffset = 0, extLength = -1;
};

int64_t elementSize(int32_t dataType) {
  switch (dataType) {
  case 11:
  case 7:
  case 13:
    return 8; // double, int64, uint64
  case 1:
  case 6:
  case 12:
    return 4; // float, int32, uint32
  case 10:
  case 16:
  case 5:
  case 4:
    return 2; // f16, bf16, int16, uint16
  case 3:
  case 2:
  case 9:
    return 1; // int8, uint8, bool
  default:
    return 0;
  }
}

bool parseTensor(WireReader r, TensorInfo &t) {
  uint32_t field, wt;
  while (r.next(field, wt)) {
    if (field == 1 && wt == 0) {
      t.numElements *= int64_t(r.varint());
    } else if (field == 1 && wt == 2) {
      auto [b, e] = r.bytes();
      WireReader dims(b, e, b);
      while (!dims.done() && !dims.failed())
        t.numElements *= int64_t(dims.varint());
    } else if (field == 2 && wt == 0) {
      t.dataType = int32_t(r.varint());
    } else if (field == 8 && wt == 2) {
      auto [b, e] = r.bytes();
      t.name.assign(b, e);
    } else if (field == 9 && wt == 2) {
      auto [b, e] = r.bytes();
      t.hasRaw = true;
      t.rawOffset = r.offsetOf(b);
      t.rawLength = e - b;
    } else if ((field == 4 || field == 10) && wt == 2) {
      auto [b, e] = r.bytes();
      t.hasFixed = true;
      t.fixedOffset = r.offsetOf(b);
      t.fixedLength = e - b;
    } else if ((field == 5 || field == 7 || field == 11) && wt == 2) {
      auto [b, e] = r.bytes();
      WireReader vals(b, e, b);
      while (!vals.done() && !vals.failed())
        t.varints.push_back(int64_t(vals.varint()));
    } else if ((field == 5 || field == 7 || field == 11) && wt == 0) {
      t.varints.push_back(int64_t(r.varint()));
    } else if (field == 13 && wt == 2) {
      auto [b, e] = r.bytes();
      WireReader entry(b, e, b);
      std::string key, value;
      uint32_t f2, w2;
      while (entry.next(f2, w2)) {
        if (w2 != 2) {
          entry.skip(w2);
          continue;
        }
        auto [vb, ve] = entry.bytes();
        (f2 == 1 ? key : value).assign(vb, ve);
      }
      // A malformed number makes the tensor, and so the model, corrupt.
      if (key == "location")
        t.location = value;
      else if (key == "offset" &&
               (StringRef(value).getAsInteger(10, t.extOffset) ||
                t.extOffset < 0))
        return false;
      else if (key == "length" &&
               (StringRef(value).getAsInteger(10, t.extLength) ||
                t.extLength < 0))
        return false;
    } else if (field == 14 && wt == 0) {
      t.external = r.varint() == 1;
    } else {
      r.skip(wt);
    }
  }
  return !r.failed();
}

} // namespace

/// Where the bytes of tensor `t` are.
static WeightSource toSource(const TensorInfo &t, StringRef dir,
                             StringRef absPath, StringRef data,
                             bool copyBytes) {
  WeightSource src;
  int64_t size = elementSize(t.dataType);
  int64_t expected = size * t.numElements;
  if (t.external) {
    SmallString<256> file(dir);
    sys::path::append(file, t.location);
    src.file = std::string(file);
    src.offset = t.extOffset;
    src.length = t.extLength >= 0 ? t.extLength : expected;
  } else if (t.hasRaw || t.hasFixed) {
    src.file = std::string(absPath);
    src.offset = t.hasRaw ? t.rawOffset : t.fixedOffset;
    src.length = t.hasRaw ? t.rawLength : t.fixedLength;
    if (copyBytes) {
      src.bytes = data.substr(src.offset, src.length).str();
      src.file.clear();
    }
  } else {
    // Varint-packed: decode to the element type's little-endian bytes.
    src.bytes.resize(t.varints.size() * size);
    for (size_t i = 0; i < t.varints.size(); ++i) {
      uint64_t v = uint64_t(t.varints[i]);
      std::memcpy(&src.bytes[i * size], &v, size);
    }
    src.length = src.bytes.size();
  }
  return src;
}

/// Walks the serialized model in `data`. With `copyBytes`, in-model data is
/// returned as bytes rather than as ranges of the file `absPath`.
static Expected<StringMap<WeightSource>> locateInBuffer(StringRef data,
                                                        StringRef modelPath,
                                                        StringRef absPath,
                                                        bool copyBytes) {
  StringRef dir = sys::path::parent_path(absPath);
  const char *base = data.data();
  auto corrupt = [&] {
    return createStringError(inconvertibleErrorCode(),
                             "%s: corrupt protobuf while locating weights",
                             modelPath.str().c_str());
  };

  StringMap<WeightSource> result;
  WireReader model(base, base + data.size(), base);
  uint32_t field, wt;
  while (model.next(field, wt)) {
    if (field != 7 || wt != 2) {
      model.skip(wt);
      continue;
    }
    auto [gb, ge] = model.bytes();
    WireReader graph(gb, ge, base);
    while (graph.next(field, wt)) {
      if (field == 1 && wt == 2) {
        // A Constant node's `value` tensor, named by the node's output.
        auto [nb, ne] = graph.bytes();
        WireReader node(nb, ne, base);
        std::string opType, output;
        std::optional<TensorInfo> value;
        uint32_t f, w;
        while (node.next(f, w)) {
          if (f == 4 && w == 2) {
            auto [b, e] = node.bytes();
            opType.assign(b, e);
          } else if (f == 2 && w == 2) {
            auto [b, e] = node.bytes();
            if (output.empty())
              output.assign(b, e);
          } else if (f == 5 && w == 2) {
            auto [ab, ae] = node.bytes();
            WireReader attr(ab, ae, base);
            std::string name;
            const char *tb = nullptr, *te = nullptr;
            uint32_t af, aw;
            while (attr.next(af, aw)) {
              if (af == 1 && aw == 2) {
                auto [b, e] = attr.bytes();
                name.assign(b, e);
              } else if (af == 5 && aw == 2) {
                std::tie(tb, te) = attr.bytes();
              } else {
                attr.skip(aw);
              }
            }
            if (name == "value" && tb) {
              TensorInfo t;
              if (!parseTensor(WireReader(tb, te, base), t))
                return corrupt();
              value = t;
            }
          } else {
            node.skip(w);
          }
        }
        if (opType == "Constant" && value && !output.empty())
          result[output] = toSource(*value, dir, absPath, data, copyBytes);
        continue;
      }
      if (field != 5 || wt != 2) {
        graph.skip(wt);
        continue;
      }
      auto [tb, te] = graph.bytes();
      TensorInfo t;
      if (!parseTensor(WireReader(tb, te, base), t))
        return corrupt();
      result[t.name] = toSource(t, dir, absPath, data, copyBytes);
    }
    if (graph.failed())
      return corrupt();
  }
  if (model.failed())
    return corrupt();
  return result;
}

Expected<StringMap<WeightSource>> locateInitializers(StringRef modelPath) {
  auto buffer = MemoryBuffer::getFile(modelPath, /*IsText=*/false,
                                      /*RequiresNullTerminator=*/false);
  if (!buffer)
    return createStringError(buffer.getError(), "%s: cannot open the model: %s",
                             modelPath.str().c_str(),
                             buffer.getError().message().c_str());
  SmallString<256> absPath(modelPath);
  sys::fs::make_absolute(absPath);
  if (!modelPath.ends_with(".onnxtxt"))
    return locateInBuffer((*buffer)->getBuffer(), modelPath, absPath,
                          /*copyBytes=*/false);
  // The textual syntax has no byte ranges to map: serialize it and copy.
  onnx::ModelProto model;
  onnx::Status status =
      onnx::OnnxParser::Parse(model, (*buffer)->getBuffer().str().c_str());
  if (!status.IsOK())
    return createStringError(
        inconvertibleErrorCode(), "%s: not valid ONNX text syntax: %s",
        modelPath.str().c_str(), status.ErrorMessage().c_str());
  std::string serialized = model.SerializeAsString();
  return locateInBuffer(serialized, modelPath, absPath, /*copyBytes=*/true);
}

} // namespace autopar
