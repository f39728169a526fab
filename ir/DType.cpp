//===- DType.cpp - Element types --------------------------------*- C++ -*-===//
#include "ir/DType.h"

#include <array>
#include <cmath>
#include <cstring>

namespace kiln {
namespace {
struct DTypeInfo {
  std::string_view name;
  unsigned bytes, bits;
  bool isFloat, isSigned, compute;
};
constexpr std::array<DTypeInfo, kNumDTypes> kInfos = {{
#define DTYPE(E, N, B, W, F, S, K, C) {N, B, W, F, S, K},
#include "ir/DTypes.def"
}};
} // namespace

std::string_view dtypeName(DType t) {
  return kInfos[static_cast<unsigned>(t)].name;
}
unsigned dtypeSize(DType t) {
  return kInfos[static_cast<unsigned>(t)].bytes;
}
unsigned dtypeBits(DType t) {
  return kInfos[static_cast<unsigned>(t)].bits;
}
bool isStorageDType(DType t) {
  return !kInfos[static_cast<unsigned>(t)].compute;
}
bool isFloat(DType t) {
  return kInfos[static_cast<unsigned>(t)].isFloat;
}
bool isSignedInt(DType t) {
  return !isFloat(t) && kInfos[static_cast<unsigned>(t)].isSigned;
}

DType computeDType(DType t) {
  return isFloat(t) && dtypeBits(t) < 32 ? DType::F32 : t;
}

int64_t intLowest(DType t) {
  const unsigned bits = dtypeBits(t);
  return isSignedInt(t) ? static_cast<int64_t>(~uint64_t(0) << (bits - 1)) : 0;
}
int64_t intHighest(DType t) {
  if (t == DType::Bool)
    return 1;
  const unsigned bits = dtypeBits(t) - (isSignedInt(t) ? 1 : 0);
  return static_cast<int64_t>((uint64_t(1) << bits) - 1);
}

std::optional<DType> dtypeFromName(std::string_view name) {
  for (unsigned i = 0; i < kNumDTypes; ++i)
    if (kInfos[i].name == name)
      return static_cast<DType>(i);
  return std::nullopt;
}

float miniFloatMax(const MiniFloatFormat &f) {
  const int topExp = (1 << f.expBits) - (f.special == MiniFloatFormat::IEEE ? 2 : 1);
  const unsigned topMan = (1u << f.manBits) - (f.special == MiniFloatFormat::FN ? 2 : 1);
  return std::ldexp(static_cast<float>((1u << f.manBits) | topMan),
                    topExp - f.bias - static_cast<int>(f.manBits));
}

uint8_t miniFloatNaN(const MiniFloatFormat &f, bool negative) {
  const unsigned signBit = 1u << (f.expBits + f.manBits);
  switch (f.special) {
  case MiniFloatFormat::FNUZ:
    return static_cast<uint8_t>(signBit);
  case MiniFloatFormat::None:
    return static_cast<uint8_t>(signBit); // -0: the format has no NaN
  case MiniFloatFormat::IEEE:
  case MiniFloatFormat::FN:
    break;
  }
  return static_cast<uint8_t>((negative ? signBit : 0) | (signBit - 1));
}

uint8_t miniFloatInf(const MiniFloatFormat &f) {
  return static_cast<uint8_t>(((1u << f.expBits) - 1) << f.manBits);
}

float miniFloatToFloat(const MiniFloatFormat &f, uint8_t code) {
  const unsigned signBit = 1u << (f.expBits + f.manBits);
  const unsigned expMask = (1u << f.expBits) - 1, manMask = (1u << f.manBits) - 1;
  const unsigned e = (code >> f.manBits) & expMask, m = code & manMask;
  const bool negative = (code & signBit) != 0;
  if (f.special == MiniFloatFormat::FNUZ && code == signBit)
    return NAN;
  if (f.special == MiniFloatFormat::FN && (code & (signBit - 1)) == signBit - 1)
    return negative ? -NAN : NAN;
  if (f.special == MiniFloatFormat::IEEE && e == expMask)
    return m ? (negative ? -NAN : NAN) : (negative ? -INFINITY : INFINITY);
  const float v = e == 0
                      ? std::ldexp(static_cast<float>(m), 1 - f.bias - static_cast<int>(f.manBits))
                      : std::ldexp(static_cast<float>(m | (manMask + 1)),
                                   static_cast<int>(e) - f.bias - static_cast<int>(f.manBits));
  return negative ? -v : v;
}

uint8_t floatToMiniFloat(const MiniFloatFormat &f, float v) {
  if (std::isnan(v))
    return miniFloatNaN(f, std::signbit(v));
  const unsigned sign = std::signbit(v) ? 1u << (f.expBits + f.manBits) : 0;
  if (std::isinf(v) && f.special == MiniFloatFormat::IEEE)
    return static_cast<uint8_t>(sign | miniFloatInf(f));
  const float a = std::fmin(std::fabs(v), miniFloatMax(f));
  unsigned code;
  if (a < std::ldexp(1.0f, 1 - f.bias)) {
    // Subnormal (or zero): scale the subnormal step to 1, round to nearest
    // even; 2^manBits is the smallest normal's code.
    code = static_cast<unsigned>(
        std::nearbyint(std::ldexp(a, f.bias - 1 + static_cast<int>(f.manBits))));
  } else {
    // Round float's mantissa to manBits, ties to even (a carry bumps the
    // exponent), then rebias the exponent.
    uint32_t bits;
    std::memcpy(&bits, &a, 4);
    const unsigned drop = 23 - f.manBits;
    bits += (1u << (drop - 1)) - 1 + ((bits >> drop) & 1);
    code = (bits >> drop) - (static_cast<unsigned>(127 - f.bias) << f.manBits);
  }
  if (code == 0 && f.special == MiniFloatFormat::FNUZ)
    return 0; // no -0
  return static_cast<uint8_t>(sign | code);
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
