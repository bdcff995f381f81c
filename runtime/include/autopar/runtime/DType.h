//===- DType.h - Element types of artifact tensors --------------*- C++ -*-===//
//
// The element types a manifest may name. The names are NumPy's, as in
// docs/design/artifact.md.
//
//===----------------------------------------------------------------------===//

#ifndef AUTOPAR_RUNTIME_DTYPE_H
#define AUTOPAR_RUNTIME_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace autopar::runtime {

/// Element type of a tensor.
enum class DType : uint8_t {
  Float32,
  Float64,
  Float16,
  BFloat16,
  Int64,
  Int32,
  Int16,
  Int8,
  UInt64,
  UInt32,
  UInt16,
  UInt8,
  Bool,
};

/// Parses a NumPy dtype name such as "float32"; std::nullopt if unknown.
std::optional<DType> parseDType(std::string_view name);

/// The NumPy name of \p dtype, e.g. "bfloat16".
std::string_view dtypeName(DType dtype);

/// Size of one element in bytes (bool is one byte, as in NumPy).
size_t dtypeSize(DType dtype);

/// True for float16, bfloat16, float32 and float64.
bool isFloatingPoint(DType dtype);

/// True for the signed and unsigned integer types (not bool).
bool isInteger(DType dtype);

/// All accepted names, comma-separated, for error messages.
std::string allDTypeNames();

/// IEEE binary16 bits of \p value, rounded to nearest even.
uint16_t floatToFloat16Bits(float value);

/// bfloat16 bits of \p value (the top half of its binary32 bits), rounded to
/// nearest even.
uint16_t floatToBFloat16Bits(float value);

/// The float value of IEEE binary16 bits (exact).
float float16BitsToFloat(uint16_t bits);

/// The float value of bfloat16 bits (exact).
float bfloat16BitsToFloat(uint16_t bits);

/// True if float32 values can be converted to \p to (float16, bfloat16 or
/// float32 itself): the conversions a parameter's `source_dtype` may ask for.
bool isConvertibleFromFloat32(DType to);

/// Converts \p count float32 values to \p to, rounding to nearest even (NaN
/// stays NaN, infinities stay infinite, float16 overflows to infinity).
/// \p to must satisfy isConvertibleFromFloat32.
void convertFromFloat32(const float *from, int64_t count, DType to, void *out);

/// Converts \p count values of float16, bfloat16 or float32 \p from to float32
/// (exactly).
void convertToFloat32(const void *from, DType type, int64_t count, float *out);

} // namespace autopar::runtime

#endif // AUTOPAR_RUNTIME_DTYPE_H
