//===- RandomInputs.cpp - Reproducible random input tensors ---------------===//

#include "autopar/runtime/RandomInputs.h"

#include <cstring>

namespace autopar::runtime {

namespace {

/// SplitMix64's finalizer: a cheap, well-mixed hash of a 64-bit counter. Used
/// counter-style (element i gets mix(key + i)), so the values depend on
/// nothing but the key and the index.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// FNV-1a of the input's name, so that each input gets its own stream and
/// adding an input does not change the others.
uint64_t hashName(const std::string &name) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : name)
    hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

/// One 16-bit float representation step towards -infinity.
uint16_t stepDown16(uint16_t bits) {
  if (bits == 0)
    return 0x8001;
  return (bits & 0x8000) ? bits + 1 : bits - 1;
}

template <typename T> void store(void *data, int64_t i, T value) {
  std::memcpy(static_cast<char *>(data) + i * sizeof(T), &value, sizeof(T));
}

} // namespace

void fillRandom(DType dtype, int64_t numElements, void *data, uint64_t seed,
                const std::string &name, const RandomInputPolicy &policy) {
  uint64_t key = mix(seed ^ hashName(name));
  float low = policy.floatLow, width = policy.floatHigh - policy.floatLow;
  uint64_t intRange = static_cast<uint64_t>(policy.intHigh - policy.intLow);
  if (intRange == 0)
    intRange = 1;
  for (int64_t i = 0; i < numElements; ++i) {
    uint64_t bits = mix(key + static_cast<uint64_t>(i));
    // 24 random bits: every value in [0, 1) a float can hold at that spacing.
    float unit = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
    float real = low + width * unit;
    int64_t integer = policy.intLow + static_cast<int64_t>(bits % intRange);
    switch (dtype) {
    case DType::Float32:
      store(data, i, real);
      break;
    case DType::Float64:
      store(data, i, static_cast<double>(real));
      break;
    case DType::Float16:
    case DType::BFloat16: {
      bool isHalf = dtype == DType::Float16;
      uint16_t half =
          isHalf ? floatToFloat16Bits(real) : floatToBFloat16Bits(real);
      float rounded =
          isHalf ? float16BitsToFloat(half) : bfloat16BitsToFloat(half);
      if (rounded >= policy.floatHigh) // Rounding must not reach the bound.
        half = stepDown16(half);
      store(data, i, half);
      break;
    }
    case DType::Int64:
      store(data, i, integer);
      break;
    case DType::Int32:
      store(data, i, static_cast<int32_t>(integer));
      break;
    case DType::Int16:
      store(data, i, static_cast<int16_t>(integer));
      break;
    case DType::Int8:
      store(data, i, static_cast<int8_t>(integer));
      break;
    case DType::UInt64:
      store(data, i, static_cast<uint64_t>(integer));
      break;
    case DType::UInt32:
      store(data, i, static_cast<uint32_t>(integer));
      break;
    case DType::UInt16:
      store(data, i, static_cast<uint16_t>(integer));
      break;
    case DType::UInt8:
      store(data, i, static_cast<uint8_t>(integer));
      break;
    case DType::Bool:
      store(data, i, static_cast<uint8_t>(bits >> 63));
      break;
    }
  }
}

} // namespace autopar::runtime
