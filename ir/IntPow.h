//===- IntPow.h - Integer power with wrap-around ----------------*- C++ -*-===//
//
// Header-only, so that the runtime's kernel helper (runtime/KernelHelpers.cpp,
// what compiled kernels call) and the reference semantics
// (ir/ScalarExpr.h) are this one function.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace kiln {

/// Integer power as every path of Kiln computes it: exact with two's
/// complement wrap-around; a negative exponent gives trunc(1 / base^-exp)
/// (so 0 except for bases 1 and -1, and 0 for base 0, which the reference
/// kernel reports as an error instead).
inline int64_t wrappingIntPow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 1)
      return 1;
    if (base == -1)
      return exp % 2 == 0 ? 1 : -1;
    return 0;
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  for (uint64_t e = static_cast<uint64_t>(exp); e > 0; e >>= 1) {
    if (e & 1)
      result *= b;
    b *= b;
  }
  return static_cast<int64_t>(result);
}

} // namespace kiln
