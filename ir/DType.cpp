//===- DType.cpp - Element types --------------------------------*- C++ -*-===//
#include "ir/DType.h"

#include <array>
#include <cmath>
#include <cstring>

namespace kiln {
namespace {
struct DTypeInfo {
  std::string_view name;
  unsigned bytes;
  bool isFloat;
  bool isSigned;
};
constexpr std::array<DTypeInfo, kNumDTypes> kInfos = {{
#define DTYPE(E, N, B, F, S, C) {N, B, F, S},
#include "ir/DTypes.def"
}};
} // namespace

std::string_view dtypeName(DType t) {
  return kInfos[static_cast<unsigned>(t)].name;
}
unsigned dtypeSize(DType t) {
  return kInfos[static_cast<unsigned>(t)].bytes;
}
bool isFloat(DType t) {
  return kInfos[static_cast<unsigned>(t)].isFloat;
}
bool isSignedInt(DType t) {
  return !isFloat(t) && kInfos[static_cast<unsigned>(t)].isSigned;
}

int64_t intLowest(DType t) {
  const unsigned bits = 8 * dtypeSize(t);
  return isSignedInt(t) ? static_cast<int64_t>(~uint64_t(0) << (bits - 1)) : 0;
}
int64_t intHighest(DType t) {
  if (t == DType::Bool)
    return 1;
  const unsigned bits = 8 * dtypeSize(t) - (isSignedInt(t) ? 1 : 0);
  return static_cast<int64_t>((uint64_t(1) << bits) - 1);
}

std::optional<DType> dtypeFromName(std::string_view name) {
  for (unsigned i = 0; i < kNumDTypes; ++i)
    if (kInfos[i].name == name)
      return static_cast<DType>(i);
  return std::nullopt;
}

float halfToFloat(uint16_t h) {
  uint32_t sign = (h >> 15) & 1, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float v;
  if (exp == 0)
    v = std::ldexp(static_cast<float>(mant), -24);
  else if (exp == 31)
    v = mant ? NAN : INFINITY;
  else
    v = std::ldexp(static_cast<float>(mant | 0x400), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffff;
  if (absx >= 0x7f800000) // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00 | (absx > 0x7f800000 ? 0x200 : 0));
  if (absx >= 0x477ff000) // rounds to >= 65520: overflow to inf
    return static_cast<uint16_t>(sign | 0x7c00);
  if (absx < 0x38800000) { // subnormal half (or zero)
    float a;
    std::memcpy(&a, &absx, 4);
    // Scale so that the half subnormal step (2^-24) becomes 1, then round to nearest even.
    float scaled = a * 16777216.0f;
    uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t mant = absx & 0x7fffff;
  int32_t exp = static_cast<int32_t>(absx >> 23) - 127 + 15;
  uint32_t half = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
    ++half;
  return static_cast<uint16_t>(sign | half);
}

float bf16ToFloat(uint16_t b) {
  uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

uint16_t floatToBf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000)
    return static_cast<uint16_t>((x >> 16) | 0x40);
  uint32_t rounding = 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

} // namespace kiln
