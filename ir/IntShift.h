//===- IntShift.h - Integer shifts with defined edges -----------*- C++ -*-===//
//
// The shifts of the `shift_left` / `shift_right` ops on a value held as
// int64 (a signed dtype's value, sign-extended; an unsigned one's, which is
// never negative), for a dtype of `bits` bits: the one definition that the
// scalar evaluator and the reference kernels share. A shift amount outside
// [0, bits) shifts every bit out: left gives 0, right gives the sign
// (x < 0 ? -1 : 0); C++ leaves such shifts undefined.
// Right shifts are arithmetic on signed dtypes and logical on unsigned ones.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace kiln {

/// x << y, to be wrapped to the dtype by the caller.
inline int64_t shiftLeft(int64_t x, int64_t y, unsigned bits) {
  return y < 0 || y >= static_cast<int64_t>(bits)
             ? 0
             : static_cast<int64_t>(static_cast<uint64_t>(x) << y);
}

/// x >> y.
inline int64_t shiftRight(int64_t x, int64_t y, unsigned bits) {
  if (y < 0 || y >= static_cast<int64_t>(bits))
    return x < 0 ? -1 : 0;
  return x >> y;
}

} // namespace kiln
