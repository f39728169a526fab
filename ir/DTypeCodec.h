//===- DTypeCodec.h - How each dtype is stored and converted ----*- C++ -*-===//
//
// One codec per element type, named by the Codec column of ir/DTypes.def: its
// storage type and its conversions from and to double and int64. These are
// the conversions every path of Kiln agrees on (docs/NUMERICS.md): a float
// stored as f16 or bf16 rounds through float to nearest even; a float stored
// as an integer truncates toward zero and saturates, NaN -> 0; an integer
// stored as a narrower integer wraps; anything stored as bool is x != 0.
// `visitDType` is the one switch over dtypes; code that needs a per-dtype
// behaviour calls it instead of writing its own switch.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"
#include "ir/Support.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace kiln {

template <typename T> struct FloatCodec {
  using Storage = T;
  static double toDouble(Storage s) { return static_cast<double>(s); }
  static int64_t toInt(Storage s) { return saturatingFloatToInt<int64_t>(toDouble(s)); }
  static Storage fromDouble(double v) { return static_cast<T>(v); }
  static Storage fromInt(int64_t v) { return fromDouble(static_cast<double>(v)); }
};

struct HalfCodec {
  using Storage = uint16_t;
  static double toDouble(Storage s) { return halfToFloat(s); }
  static int64_t toInt(Storage s) { return saturatingFloatToInt<int64_t>(toDouble(s)); }
  static Storage fromDouble(double v) { return floatToHalf(static_cast<float>(v)); }
  static Storage fromInt(int64_t v) { return fromDouble(static_cast<double>(v)); }
};

struct Bf16Codec {
  using Storage = uint16_t;
  static double toDouble(Storage s) { return bf16ToFloat(s); }
  static int64_t toInt(Storage s) { return saturatingFloatToInt<int64_t>(toDouble(s)); }
  static Storage fromDouble(double v) { return floatToBf16(static_cast<float>(v)); }
  static Storage fromInt(int64_t v) { return fromDouble(static_cast<double>(v)); }
};

template <typename T> struct IntCodec {
  using Storage = T;
  static double toDouble(Storage s) { return static_cast<double>(s); }
  static int64_t toInt(Storage s) { return static_cast<int64_t>(s); }
  static Storage fromDouble(double v) { return saturatingFloatToInt<T>(v); }
  static Storage fromInt(int64_t v) { return static_cast<T>(v); }
};

/// The formats of ir/DType.h's MiniFloatFormat, one code per byte.
template <MiniFloatFormat F> struct MiniFloatCodec {
  using Storage = uint8_t;
  static constexpr const MiniFloatFormat &kFormat = F;
  static double toDouble(Storage s) { return miniFloatToFloat(F, s); }
  static int64_t toInt(Storage s) { return saturatingFloatToInt<int64_t>(toDouble(s)); }
  static Storage fromDouble(double v) { return floatToMiniFloat(F, static_cast<float>(v)); }
  static Storage fromInt(int64_t v) { return fromDouble(static_cast<double>(v)); }
};

/// A `Bits`-wide integer, one per byte (sign-extended when `Signed`): an
/// integer wraps into it, a float truncates and saturates, as IntCodec.
template <unsigned Bits, bool Signed> struct SubByteIntCodec {
  using Storage = std::conditional_t<Signed, int8_t, uint8_t>;
  static constexpr int64_t kLowest = Signed ? -(int64_t(1) << (Bits - 1)) : 0;
  static constexpr int64_t kHighest = (int64_t(1) << (Signed ? Bits - 1 : Bits)) - 1;
  static double toDouble(Storage s) { return static_cast<double>(s); }
  static int64_t toInt(Storage s) { return static_cast<int64_t>(s); }
  static Storage fromDouble(double v) {
    return static_cast<Storage>(std::clamp(saturatingFloatToInt<int64_t>(v), kLowest, kHighest));
  }
  static Storage fromInt(int64_t v) {
    const uint64_t low = static_cast<uint64_t>(v) & ((uint64_t(1) << Bits) - 1);
    return static_cast<Storage>(Signed && low >= (uint64_t(1) << (Bits - 1))
                                    ? static_cast<int64_t>(low) - (int64_t(1) << Bits)
                                    : static_cast<int64_t>(low));
  }
};

// Named so that DTypes.def's rows hold no commas.
using I4Codec = SubByteIntCodec<4, true>;
using U4Codec = SubByteIntCodec<4, false>;
using I2Codec = SubByteIntCodec<2, true>;
using U2Codec = SubByteIntCodec<2, false>;

struct BoolCodec {
  using Storage = uint8_t;
  static double toDouble(Storage s) { return s ? 1.0 : 0.0; }
  static int64_t toInt(Storage s) { return s ? 1 : 0; }
  static Storage fromDouble(double v) { return v != 0.0 ? 1 : 0; }
  static Storage fromInt(int64_t v) { return v != 0 ? 1 : 0; }
};

/// Calls `fn.template operator()<Codec>()` with the codec of `t`.
template <typename Fn> decltype(auto) visitDType(DType t, Fn &&fn) {
  switch (t) {
#define DTYPE(E, N, B, W, F, S, K, C)                                                              \
  case DType::E:                                                                                   \
    return fn.template operator()<C>();
#include "ir/DTypes.def"
  }
  kiln_unreachable("bad dtype");
}

/// The format of a MiniFloatCodec dtype; nullptr for any other.
inline const MiniFloatFormat *miniFloatFormat(DType t) {
  return visitDType(t, []<typename C>() -> const MiniFloatFormat * {
    if constexpr (requires { C::kFormat; })
      return &C::kFormat;
    else
      return nullptr;
  });
}

/// `v` stored as `t` and read back as double (what Tensor::setDouble then
/// getDouble give).
inline double roundThroughDType(DType t, double v) {
  return visitDType(t, [&]<typename C>() { return C::toDouble(C::fromDouble(v)); });
}
/// `v` stored as `t` and read back as int64 (Tensor::setInt then getInt).
inline int64_t wrapThroughDType(DType t, int64_t v) {
  return visitDType(t, [&]<typename C>() { return C::toInt(C::fromInt(v)); });
}
/// The float `v` stored as `t` and read back as int64 (Tensor::setDouble then
/// getInt).
inline int64_t floatThroughDType(DType t, double v) {
  return visitDType(t, [&]<typename C>() { return C::toInt(C::fromDouble(v)); });
}

} // namespace kiln
