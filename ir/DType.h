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
#define DTYPE(E, N, B, F, S, C) E,
#include "ir/DTypes.def"
};

constexpr unsigned kNumDTypes = 0
#define DTYPE(E, N, B, F, S, C) +1
#include "ir/DTypes.def"
    ;

/// The text name of `t` ("f32", "bool", ...).
std::string_view dtypeName(DType t);
/// Looks a dtype up by its text name; nullopt when there is none.
std::optional<DType> dtypeFromName(std::string_view name);
/// Bytes per element.
unsigned dtypeSize(DType t);
bool isFloat(DType t);
bool isSignedInt(DType t);
inline bool isInteger(DType t) {
  return !isFloat(t) && t != DType::Bool;
}

/// The smallest and largest value of an integer or bool dtype.
int64_t intLowest(DType t);
int64_t intHighest(DType t);

/// IEEE binary16 <-> float, round to nearest even.
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
/// bfloat16 <-> float, round to nearest even.
float bf16ToFloat(uint16_t b);
uint16_t floatToBf16(float f);

} // namespace kiln
