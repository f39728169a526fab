//===- DType.h - Element types ----------------------------------*- C++ -*-===//
//
// The element types of tensors, generated from DTypes.def, and the scalar
// conversions between their storage and double / int64 that the reference
// kernels use.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

enum class DType : uint8_t {
#define DTYPE(E, N, B, W, F, S, K, C) E,
#include "ir/DTypes.def"
};

constexpr unsigned kNumDTypes = 0
#define DTYPE(E, N, B, W, F, S, K, C) +1
#include "ir/DTypes.def"
    ;

/// The text name of `t` ("f32", "bool", ...).
std::string_view dtypeName(DType t);
/// Looks a dtype up by its text name; nullopt when there is none.
std::optional<DType> dtypeFromName(std::string_view name);
/// Bytes per element in a buffer.
unsigned dtypeSize(DType t);
/// Bits of an element's value (4 for i4, whose buffer holds a byte each).
unsigned dtypeBits(DType t);
bool isFloat(DType t);
/// A storage dtype (the `compute` column of DTypes.def is false): held,
/// moved and cast, never computed on.
bool isStorageDType(DType t);
bool isSignedInt(DType t);
inline bool isInteger(DType t) {
  return !isFloat(t) && t != DType::Bool;
}

/// The dtype reductions and float math on `t` compute in: f32 for the
/// floats narrower than f32 (f16, bf16, the mini floats; Note [Scalar
/// precision] in ir/ops/Scalar.cpp), else `t` itself.
DType computeDType(DType t);

/// The smallest and largest value of an integer or bool dtype.
int64_t intLowest(DType t);
int64_t intHighest(DType t);

/// A float format of at most 8 bits (the OCP/ONNX 8-bit floats, the 4-bit
/// e2m1): sign, `expBits`, `manBits`, exponent `bias`, and which codes are
/// special.
struct MiniFloatFormat {
  enum Special : uint8_t {
    IEEE, ///< the all-ones exponent is inf (mantissa 0) or NaN, as binary16
    FN,   ///< one NaN per sign (all ones below the sign), no inf
    FNUZ, ///< one NaN (the code of -0), no inf, no -0
    None, ///< no inf nor NaN (a NaN is stored as -0, as ONNX's reference does)
  };
  unsigned expBits, manBits;
  int bias;
  Special special;
};
inline constexpr MiniFloatFormat kF8E4M3FN{4, 3, 7, MiniFloatFormat::FN};
inline constexpr MiniFloatFormat kF8E4M3FNUZ{4, 3, 8, MiniFloatFormat::FNUZ};
inline constexpr MiniFloatFormat kF8E5M2{5, 2, 15, MiniFloatFormat::IEEE};
inline constexpr MiniFloatFormat kF8E5M2FNUZ{5, 2, 16, MiniFloatFormat::FNUZ};
inline constexpr MiniFloatFormat kF4E2M1FN{2, 1, 1, MiniFloatFormat::None};

/// The largest finite value of `f`.
float miniFloatMax(const MiniFloatFormat &f);
/// The code of NaN (with `negative` sign where the format has one).
uint8_t miniFloatNaN(const MiniFloatFormat &f, bool negative);
/// The code of +inf of an IEEE-special format (with the sign bit: -inf).
uint8_t miniFloatInf(const MiniFloatFormat &f);
/// A code of `f` -> float (exact).
float miniFloatToFloat(const MiniFloatFormat &f, uint8_t code);
/// float -> the nearest code of `f`, ties to even, saturating: a finite
/// value beyond the largest finite one becomes it (ONNX's Cast default,
/// saturate=1), and so does inf where `f` has none; an IEEE format keeps
/// inf (so that moving a stored inf keeps it).
uint8_t floatToMiniFloat(const MiniFloatFormat &f, float v);

/// IEEE binary16 <-> float, round to nearest even.
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
/// bfloat16 <-> float, round to nearest even.
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);

} // namespace kiln
