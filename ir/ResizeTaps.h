//===- ResizeTaps.h - How many inputs a resized element reads ---*- C++ -*-===//
//
// The neighbour counts of resize's interpolation (ir/ops/PadResize.cpp, the
// reference kernel, and codegen/LowerNode.cpp, the kernel lowering, both build
// their taps from these).
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cmath>
#include <cstdint>
#include <string_view>

namespace kiln {

/// The first neighbour, relative to the base, of resize's antialiased
/// filter on a dim downscaled by `scale` < 1 (ONNX's reference): the
/// support (1 linear, 2 cubic) stretched by 1 / scale. The filter reads
/// 2 - 2 * start neighbours.
inline int64_t resizeAntialiasStart(bool cubic, double scale) {
  return static_cast<int64_t>(std::floor((cubic ? -2.0 : -1.0) / scale)) + 1;
}

/// How many inputs one output coordinate of a dim resized by `scale` reads
/// in `mode` (nearest 1, linear 2, cubic 4, more when antialiased).
inline int64_t resizeTapsPerDim(std::string_view mode, bool antialias, double scale) {
  if (mode == "nearest")
    return 1;
  const bool cubic = mode == "cubic";
  if (antialias && scale < 1.0)
    return 2 - 2 * resizeAntialiasStart(cubic, scale);
  return cubic ? 4 : 2;
}

} // namespace kiln
