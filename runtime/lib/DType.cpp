//===- DType.cpp - Element types of artifact tensors ----------------------===//

#include "autopar/runtime/DType.h"

#include <cstring>

namespace autopar::runtime {

namespace {
struct DTypeInfo {
  DType dtype;
  std::string_view name;
  size_t size;
};

// In the order artifact.md lists them, which is also the order error messages
// show them in.
constexpr DTypeInfo DTypeTable[] = {
    {DType::Float32, "float32", 4}, {DType::Float64, "float64", 8},
    {DType::Float16, "float16", 2}, {DType::BFloat16, "bfloat16", 2},
    {DType::Int64, "int64", 8},     {DType::Int32, "int32", 4},
    {DType::Int16, "int16", 2},     {DType::Int8, "int8", 1},
    {DType::UInt64, "uint64", 8},   {DType::UInt32, "uint32", 4},
    {DType::UInt16, "uint16", 2},   {DType::UInt8, "uint8", 1},
    {DType::Bool, "bool", 1},
};

const DTypeInfo &info(DType dtype) {
  for (const DTypeInfo &entry : DTypeTable)
    if (entry.dtype == dtype)
      return entry;
  return DTypeTable[0]; // Unreachable: the table covers the enum.
}

uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float bitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}
} // namespace

std::optional<DType> parseDType(std::string_view name) {
  for (const DTypeInfo &entry : DTypeTable)
    if (entry.name == name)
      return entry.dtype;
  return std::nullopt;
}

std::string_view dtypeName(DType dtype) { return info(dtype).name; }

size_t dtypeSize(DType dtype) { return info(dtype).size; }

bool isFloatingPoint(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float64 ||
         dtype == DType::Float16 || dtype == DType::BFloat16;
}

bool isInteger(DType dtype) {
  return !isFloatingPoint(dtype) && dtype != DType::Bool;
}

std::string allDTypeNames() {
  std::string names;
  for (const DTypeInfo &entry : DTypeTable) {
    if (!names.empty())
      names += ", ";
    names += entry.name;
  }
  return names;
}

uint16_t floatToFloat16Bits(float value) {
  uint32_t f = floatBits(value);
  uint32_t sign = (f >> 16) & 0x8000u;
  f &= 0x7fffffffu;
  if (f >= 0x7f800000u) // Inf stays Inf; NaN stays a (quiet) NaN.
    return static_cast<uint16_t>(sign | 0x7c00u |
                                 (f > 0x7f800000u ? 0x0200u : 0u));
  if (f >= 0x477ff000u) // 65520 and above round to Inf.
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (f >= 0x38800000u) { // A normal half: rebias the exponent, round.
    uint32_t half = ((f >> 23) - 112) << 10 | (f & 0x007fffffu) >> 13;
    uint32_t rest = f & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
      ++half; // A carry into the exponent is still the right value.
    return static_cast<uint16_t>(sign | half);
  }
  if (f < 0x33000000u) // Below half the smallest subnormal: zero.
    return static_cast<uint16_t>(sign);
  // A subnormal half counts units of 2^-24.
  uint32_t exponent = f >> 23;
  uint32_t mantissa = (f & 0x007fffffu) | 0x00800000u;
  uint32_t shift = 126 - exponent;
  uint32_t half = mantissa >> shift;
  uint32_t rest = mantissa & ((1u << shift) - 1);
  uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (half & 1u)))
    ++half;
  return static_cast<uint16_t>(sign | half);
}

uint16_t floatToBFloat16Bits(float value) {
  uint32_t f = floatBits(value);
  if ((f & 0x7fffffffu) > 0x7f800000u) // NaN: keep it a quiet NaN.
    return static_cast<uint16_t>((f >> 16) | 0x0040u);
  f += 0x7fffu + ((f >> 16) & 1u);
  return static_cast<uint16_t>(f >> 16);
}

float float16BitsToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0) {
    float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31)
    return bitsToFloat(sign | 0x7f800000u | mantissa << 13);
  return bitsToFloat(sign | (exponent + 112) << 23 | mantissa << 13);
}

float bfloat16BitsToFloat(uint16_t bits) {
  return bitsToFloat(static_cast<uint32_t>(bits) << 16);
}

bool isConvertibleFromFloat32(DType to) {
  return to == DType::Float32 || to == DType::Float16 || to == DType::BFloat16;
}

void convertFromFloat32(const float *from, int64_t count, DType to, void *out) {
  if (to == DType::Float32) {
    std::memcpy(out, from, static_cast<size_t>(count) * sizeof(float));
    return;
  }
  uint16_t (*convert)(float) =
      to == DType::Float16 ? floatToFloat16Bits : floatToBFloat16Bits;
  uint16_t *bits = static_cast<uint16_t *>(out);
  for (int64_t i = 0; i < count; ++i)
    bits[i] = convert(from[i]);
}

void convertToFloat32(const void *from, DType type, int64_t count, float *out) {
  if (type == DType::Float32) {
    std::memcpy(out, from, static_cast<size_t>(count) * sizeof(float));
    return;
  }
  float (*convert)(uint16_t) =
      type == DType::Float16 ? float16BitsToFloat : bfloat16BitsToFloat;
  const uint16_t *bits = static_cast<const uint16_t *>(from);
  for (int64_t i = 0; i < count; ++i)
    out[i] = convert(bits[i]);
}

} // namespace autopar::runtime
