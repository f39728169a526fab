//===- Prelude.cuh - What every generated CUDA kernel includes -*- CUDA -*-===//
//
// The helpers of the kernels codegen/cuda/CudaEmitter.cpp writes: the
// storage conversions of the narrow floats, the casts, integer division and
// NaN-propagating max/min with the semantics of ir/ScalarExpr.h, and the
// warp shuffles reductions use. NVRTC compiles it with every kernel (it is
// handed to NVRTC as the header "kiln/Prelude.cuh", with ir/IntPow.h and
// ir/IntShift.h, whose functions the kernels call: one definition of
// integer pow and shifts for every backend).
//
// It is also plain C++: the host emulation of the tests
// (tests/unit/cuda/CudaHost.h) defines the CUDA built-ins it uses and
// compiles kernels with g++, so that their semantics are tested on
// machines without a GPU. Code for the device only is under __CUDA_ARCH__.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/IntPow.h"
#include "ir/IntShift.h"

// Four 4-byte elements at a 16-byte aligned address: one 128-bit load or
// store (Note [Vectorized pointwise kernels] in CudaEmitter.cpp).
template <typename T> struct alignas(16) kiln_vec4 {
  T v[4];
};

// IEEE binary16 in its storage bits <-> float, round to nearest even: the
// device's conversion instructions; the host emulation calls Kiln's own
// (ir/DType.h), declared by CudaHost.h.
__device__ inline float kiln_f16_to_f32(unsigned short h) {
#ifdef __CUDA_ARCH__
  float r;
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
  return r;
#else
  return kiln_host_half_to_float(h);
#endif
}
__device__ inline unsigned short kiln_f32_to_f16(float x) {
#ifdef __CUDA_ARCH__
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(x));
  return h;
#else
  return kiln_host_float_to_half(x);
#endif
}
__device__ inline float kiln_round_f16(float x) {
  return kiln_f16_to_f32(kiln_f32_to_f16(x));
}

// bfloat16: the upper half of a float, rounded to nearest even; a NaN stays
// a (quiet) NaN.
__device__ inline float kiln_round_bf16(float x) {
  unsigned bits = __float_as_uint(x);
  unsigned rounded = (bits + (((bits >> 16) & 1u) + 0x7fffu)) & 0xffff0000u;
  unsigned quiet = (bits | 0x00400000u) & 0xffff0000u;
  return __uint_as_float(x != x ? quiet : rounded);
}
__device__ inline float kiln_bf16_to_f32(unsigned short b) {
  return __uint_as_float(static_cast<unsigned>(b) << 16);
}
__device__ inline unsigned short kiln_f32_to_bf16(float x) {
  return static_cast<unsigned short>(__float_as_uint(kiln_round_bf16(x)) >> 16);
}

// A mini float (f8e4m3fn, ..., f4e2m1fn) from float: floatToMiniFloat of
// ir/DType.cpp (saturate, round to nearest even, subnormals by scaling
// their step to 1, rebias; NaN and an IEEE format's inf by their codes).
// The format's constants come from the emitter, which reads them from
// ir/DType.h. Decoding is a table the emitter writes.
__device__ inline unsigned kiln_encode_mini(float v, unsigned manBits, int bias, float maxFinite,
                                            float step, float smallestNormal, bool fnuz,
                                            bool ieee, unsigned signBit, unsigned nanPos,
                                            unsigned nanNeg, unsigned infCode) {
  const unsigned bits = __float_as_uint(v);
  unsigned sign = (bits >> 31) ? signBit : 0u;
  float a = fabsf(v);
  a = a < maxFinite ? a : maxFinite;
  // Below 2^(manBits+1) after scaling, so adding 2^23 rounds to an integer
  // (nearest even); the _rn forms are never contracted into an FMA.
  // Clamped so that the conversion below stays in range for normal values
  // too (whose code is `normal`, not `sub`).
  float scaled = __fmul_rn(a, step);
  scaled = scaled < 8388608.0f ? scaled : 8388608.0f;
  const unsigned sub =
      static_cast<unsigned>(__fadd_rn(__fadd_rn(scaled, 8388608.0f), -8388608.0f));
  const unsigned drop = 23u - manBits;
  const unsigned abits = __float_as_uint(a);
  const unsigned odd = (abits >> drop) & 1u;
  const unsigned rounded = abits + odd + ((1u << (drop - 1)) - 1u);
  const unsigned normal =
      (rounded >> drop) - (static_cast<unsigned>(127 - bias) << manBits);
  unsigned code = a < smallestNormal ? sub : normal;
  if (fnuz && code == 0u)
    sign = 0u;
  code |= sign;
  if (v != v)
    code = sign ? nanNeg : nanPos;
  if (ieee && fabsf(v) == __uint_as_float(0x7f800000u))
    code = sign | infCode;
  return code & 0xffu;
}

// Infinities and NaN without literals of them.
__device__ inline float kiln_inf_f32() {
  return __uint_as_float(0x7f800000u);
}
__device__ inline float kiln_nan_f32() {
  return __uint_as_float(0x7fc00000u);
}
__device__ inline double kiln_inf_f64() {
  return __longlong_as_double(0x7ff0000000000000LL);
}
__device__ inline double kiln_nan_f64() {
  return __longlong_as_double(0x7ff8000000000000LL);
}

// Max / min of floats: NaN if either is NaN, else std::max / std::min
// (the first operand on ties).
template <typename T> __device__ inline T kiln_max(T a, T b) {
  return (a != a || b != b) ? a + b : (a < b ? b : a);
}
template <typename T> __device__ inline T kiln_min(T a, T b) {
  return (a != a || b != b) ? a + b : (b < a ? b : a);
}

// Float -> integer cast: truncate toward zero, saturate to [lo, hi], NaN
// gives 0 (Note [Scalar casts] in ir/ScalarExpr.h).
__device__ inline long long kiln_float_to_int(double x, long long lo, long long hi) {
  if (x != x)
    return 0;
  if (x <= static_cast<double>(lo))
    return lo;
  if (x >= static_cast<double>(hi))
    return hi;
  return static_cast<long long>(x);
}

// An integer wrapped to `bits` (a sub-byte dtype held in a byte).
__device__ inline long long kiln_wrap_signed(long long v, unsigned bits) {
  const unsigned long long m = (1ull << bits) - 1ull, low = static_cast<unsigned long long>(v) & m;
  return low >= (1ull << (bits - 1)) ? static_cast<long long>(low) - (1ll << bits)
                                     : static_cast<long long>(low);
}
__device__ inline long long kiln_wrap_unsigned(long long v, unsigned bits) {
  return static_cast<long long>(static_cast<unsigned long long>(v) & ((1ull << bits) - 1ull));
}

// Integer division and remainder: x / 0 = x % 0 = 0 and x / -1 wraps
// (never a trap). U is the unsigned type the arithmetic wraps in.
template <typename T, typename U> __device__ inline T kiln_sdiv(T a, T b) {
  if (b == 0)
    return 0;
  if (b == -1)
    return static_cast<T>(U(0) - static_cast<U>(a));
  return static_cast<T>(a / b);
}
template <typename T> __device__ inline T kiln_srem(T a, T b) {
  return b == 0 || b == -1 ? T(0) : static_cast<T>(a % b);
}
template <typename T> __device__ inline T kiln_udiv(T a, T b) {
  return b == 0 ? T(0) : static_cast<T>(a / b);
}
template <typename T> __device__ inline T kiln_urem(T a, T b) {
  return b == 0 ? T(0) : static_cast<T>(a % b);
}

// A register exchanged with the lane `mask` away (all 32 lanes take part).
__device__ inline float kiln_shfl_xor(float v, int m) {
  return __shfl_xor_sync(0xffffffffu, v, m);
}
__device__ inline double kiln_shfl_xor(double v, int m) {
  return __shfl_xor_sync(0xffffffffu, v, m);
}
__device__ inline long long kiln_shfl_xor(long long v, int m) {
  return __shfl_xor_sync(0xffffffffu, v, m);
}
__device__ inline int kiln_shfl_xor(int v, int m) {
  return __shfl_xor_sync(0xffffffffu, v, m);
}
__device__ inline unsigned kiln_shfl_xor(unsigned v, int m) {
  return __shfl_xor_sync(0xffffffffu, v, m);
}
__device__ inline short kiln_shfl_xor(short v, int m) {
  return static_cast<short>(__shfl_xor_sync(0xffffffffu, static_cast<int>(v), m));
}
__device__ inline unsigned short kiln_shfl_xor(unsigned short v, int m) {
  return static_cast<unsigned short>(__shfl_xor_sync(0xffffffffu, static_cast<int>(v), m));
}
__device__ inline signed char kiln_shfl_xor(signed char v, int m) {
  return static_cast<signed char>(__shfl_xor_sync(0xffffffffu, static_cast<int>(v), m));
}
__device__ inline unsigned char kiln_shfl_xor(unsigned char v, int m) {
  return static_cast<unsigned char>(__shfl_xor_sync(0xffffffffu, static_cast<int>(v), m));
}
__device__ inline bool kiln_shfl_xor(bool v, int m) {
  return __shfl_xor_sync(0xffffffffu, static_cast<int>(v), m) != 0;
}

// Lane 0's register in every lane (all 32 lanes take part).
template <typename T> __device__ inline T kiln_shfl_first(T v) {
  if constexpr (sizeof(T) < 4) {
    return static_cast<T>(__shfl_sync(0xffffffffu, static_cast<int>(v), 0));
  } else {
    return __shfl_sync(0xffffffffu, v, 0);
  }
}
