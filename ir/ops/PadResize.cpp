//===- PadResize.cpp - Pad and resize ------------------------*- C++ -*-===//
//
// Type inference and reference kernels of pad (constant, reflect, edge, wrap) and
// resize (nearest, linear and cubic, every coordinate transformation mode), the
// data movement ops whose reference kernels compute source coordinates.
// Shared helpers are in ir/ops/Internal.h.
//
//===----------------------------------------------------------------------===//
#include "ir/ResizeTaps.h"
#include "ir/ops/Internal.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

namespace kiln {
using namespace ops;

namespace {
using Types = std::vector<TensorType>;
using Tensors = std::vector<Tensor>;
} // namespace

//===----------------------------------------------------------------------===//
// pad
//===----------------------------------------------------------------------===//

namespace {
/// Maps a coordinate `i` outside [0, n) back into it by reflecting about the
/// edges without repeating them (numpy "reflect"), periodically for pads
/// wider than the dim. `n` >= 1.
int64_t reflectIndex(int64_t i, int64_t n) {
  if (n == 1)
    return 0;
  int64_t period = 2 * (n - 1);
  i %= period;
  if (i < 0)
    i += period;
  return i < n ? i : period - i;
}
} // namespace

FailureOr<Types> inferPad(const OpContext &ctx) {
  const TensorType &in = ctx.operandType(0);
  PadOp op(ctx);
  if (failed(requireOneOf(ctx, "mode", op.mode(), {"constant", "reflect", "edge", "wrap"})))
    return failure();
  const std::vector<int64_t> &pads = op.pads();
  int64_t rank = in.rank();
  if (static_cast<int64_t>(pads.size()) != 2 * rank)
    return ctx.emitError() << "pads " << pads << " has " << pads.size() << " entries but the input "
                           << in.str() << " needs " << 2 * rank;
  // Bounded pads keep every coordinate the kernel computes within int64.
  for (int64_t p : pads)
    if (p < -kMaxDim || p > kMaxDim)
      return ctx.emitError() << "pads " << pads << " has an entry beyond +-2^62";
  Shape out = in.shape;
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t before = pads[i], after = pads[i + static_cast<size_t>(rank)];
    int64_t total;
    if (__builtin_add_overflow(before, after, &total))
      return ctx.emitError() << "pads " << pads << " overflow int64";
    const Dim &d = in.shape[i];
    if (d.isSymbolic()) {
      out[i] = addConstant(d, total);
      continue;
    }
    int64_t size;
    if (__builtin_add_overflow(d.size(), total, &size))
      return ctx.emitError() << "pads " << pads << " overflow int64";
    if (size < 0)
      return ctx.emitError() << "pads " << pads << " crop dim " << i << " of " << in.str()
                             << " below size 0";
    if (op.mode() != "constant" && d.size() == 0 && size > 0)
      return ctx.emitError() << "cannot " << op.mode() << "-pad dim " << i << " of " << in.str()
                             << ": it is empty";
    out[i] = Dim(size);
  }
  return one(ctx, in.dtype, std::move(out));
}

FailureOr<Tensors> referencePad(const OpContext &ctx, std::span<const Tensor> inputs,
                                std::span<const TensorType> resultTypes) {
  const Tensor &in = inputs[0];
  PadOp op(ctx);
  const std::vector<int64_t> &pads = op.pads();
  bool isConstant = op.mode() == "constant", isEdge = op.mode() == "edge",
       isWrap = op.mode() == "wrap";
  double value = op.value();
  Tensor out = allocResult(resultTypes);
  std::vector<int64_t> inStrides = in.strides();
  size_t rank = static_cast<size_t>(in.rank());
  forEachIndex(out.shape(), [&](const std::vector<int64_t> &idx, int64_t flat) {
    int64_t src = 0;
    for (size_t d = 0; d < rank; ++d) {
      int64_t n = in.dim(static_cast<int64_t>(d));
      int64_t i = idx[d] - pads[d]; // a negative pad crops: the coordinate moves right
      if (i < 0 || i >= n) {
        if (isConstant) {
          out.setDouble(flat, value);
          return;
        }
        i = isEdge   ? std::clamp<int64_t>(i, 0, n - 1)
            : isWrap ? (i % n + n) % n // periodic (numpy "wrap")
                     : reflectIndex(i, n);
      }
      src += i * inStrides[d];
    }
    copyElement(out, flat, in, src);
  });
  return Tensors{out};
}

//===----------------------------------------------------------------------===//
// resize
//===----------------------------------------------------------------------===//

FailureOr<Types> inferResize(const OpContext &ctx) {
  const TensorType &in = ctx.operandType(0);
  ResizeOp op(ctx);
  if (failed(requireOneOf(ctx, "mode", op.mode(), {"nearest", "linear", "cubic"})) ||
      failed(requireOneOf(ctx, "coordinate_transformation_mode",
                          op.coordinate_transformation_mode(),
                          {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                           "half_pixel_symmetric", "tf_crop_and_resize"})) ||
      failed(requireOneOf(ctx, "nearest_mode", op.nearest_mode(),
                          {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})))
    return failure();
  if (op.mode() != "nearest" && failed(requireFloat(ctx, 0)))
    return failure();
  if (op.mode() != "nearest" && isStorageDType(ctx.operandType(0).dtype))
    return ctx.emitError() << "mode \"" << op.mode() << "\" interpolates, which a storage dtype ("
                           << ctx.operandType(0).str() << ") does not take: cast it first";
  const bool crop = op.coordinate_transformation_mode() == "tf_crop_and_resize";
  for (double r : op.roi())
    if (!std::isfinite(r))
      return ctx.emitError() << "roi has a value that is not finite (" << formatDouble(r) << ")";
  if (op.roi().size() != (crop ? 2 * static_cast<size_t>(in.rank()) : 0))
    return ctx.emitError() << "roi has " << op.roi().size() << " entries; "
                           << (crop ? "tf_crop_and_resize needs a start and an end per dim of "
                                    : "only tf_crop_and_resize takes one, for ")
                           << in.str();
  const std::vector<double> &scales = op.scales();
  const std::vector<int64_t> &sizes = op.sizes();
  if (scales.empty() && sizes.empty())
    return ctx.emitError() << "one of scales and sizes must be given";
  for (const auto &[name, count] :
       {std::pair{"scales", scales.size()}, std::pair{"sizes", sizes.size()}})
    if (count != 0 && static_cast<int64_t>(count) != in.rank())
      return ctx.emitError() << name << " has " << count << " entries but the input " << in.str()
                             << " has rank " << in.rank();
  // With both, sizes give the result's shape and scales the coordinate
  // mapping (ONNX's keep_aspect_ratio_policy).
  const size_t count = static_cast<size_t>(in.rank());
  Shape out = in.shape;
  for (size_t i = 0; i < count; ++i) {
    const Dim &d = in.shape[i];
    if (!scales.empty()) {
      double s = scales[i];
      if (!(s > 0.0) || !std::isfinite(s))
        return ctx.emitError() << "scale " << formatDouble(s) << " of dim " << i
                               << " is not a positive number";
    }
    if (sizes.empty()) {
      const double s = scales[i];
      if (d.isSymbolic()) {
        // An integer scale multiplies exactly; any other needs the size.
        if (s != 1.0)
          out[i] =
              s == std::floor(s) && s < 1024.0 ? d * Dim(static_cast<int64_t>(s)) : Dim::dynamic();
        continue;
      }
      double size = std::floor(static_cast<double>(d.size()) * s);
      if (size >= kMaxDimAsDouble)
        return ctx.emitError() << "scale " << formatDouble(s) << " makes dim " << i << " of "
                               << in.str() << " too large";
      out[i] = Dim(static_cast<int64_t>(size));
    } else {
      if (sizes[i] < 0)
        return ctx.emitError() << "sizes " << sizes << " has a negative size " << sizes[i];
      out[i] = Dim(sizes[i]);
    }
    if (d.isStatic() && d.size() == 0 && out[i].size() > 0)
      return ctx.emitError() << "cannot resize empty dim " << i << " of " << in.str() << " to "
                             << out[i].size();
  }
  return one(ctx, in.dtype, std::move(out));
}

namespace {
/// The integer output length of a resized length (ONNX: floor).
int64_t outLenOf(double resized) {
  return static_cast<int64_t>(std::floor(resized));
}

/// The input coordinate that output coordinate `x` of a resized dim maps to.
/// `resized` is the dim's resized length as ONNX defines it: scale * inLen,
/// a fraction when the op has scales (align_corners with scale 0.6 on 4
/// maps through 2.4 - 1, not through the integer output length 2 - 1).
/// tf_crop_and_resize maps onto the dim's part [roiStart, roiEnd] (as
/// fractions of inLen - 1).
double originalCoordinate(const std::string &mode, int64_t x, double scale, int64_t inLen,
                          double resized, double roiStart, double roiEnd) {
  double xf = static_cast<double>(x);
  if (mode == "tf_crop_and_resize") {
    const double span = (roiEnd - roiStart) * static_cast<double>(inLen - 1);
    return (resized == 1.0 ? span / 2.0 : xf * span / (resized - 1.0)) +
           roiStart * static_cast<double>(inLen - 1);
  }
  if (mode == "asymmetric")
    return xf / scale;
  if (mode == "align_corners")
    return resized == 1.0 ? 0.0 : xf * static_cast<double>(inLen - 1) / (resized - 1.0);
  if (mode == "pytorch_half_pixel" && resized == 1.0)
    return 0.0;
  if (mode == "half_pixel_symmetric") {
    // Centred: shifted by the part of the input the integer output drops.
    double adjustment = static_cast<double>(outLenOf(resized)) / resized;
    double center = static_cast<double>(inLen) / 2.0;
    return center * (1.0 - adjustment) + (xf + 0.5) / scale - 0.5;
  }
  return (xf + 0.5) / scale - 0.5; // half_pixel, pytorch_half_pixel
}

double roundNearest(const std::string &mode, double x) {
  if (mode == "floor")
    return std::floor(x);
  if (mode == "ceil")
    return std::ceil(x);
  if (x - std::floor(x) == 0.5)
    return mode == "round_prefer_ceil" ? std::ceil(x) : std::floor(x);
  return std::floor(x + 0.5);
}

/// An input index and its weight.
struct Tap {
  int64_t index;
  double weight;
};

/// The four taps of cubic interpolation at coordinate `c` of a dim of
/// `inLen` (ONNX's reference): the neighbours floor(c) - 1 .. floor(c) + 2
/// (c - 2 .. c + 1 for an integer c, the ratio then 1), read at the edge
/// beyond it, weighted by Keys' cubic with coefficient `a`; with
/// `excludeOutside` the taps beyond the edge get weight 0 and the rest are
/// renormalized. Taps of weight 0 are left out, as linear's are (so an inf
/// beside an exact sample does not give NaN). codegen/LowerNode.cpp builds
/// the same formula in scalar code.
std::vector<Tap> cubicTaps(double c, int64_t inLen, double a, bool excludeOutside) {
  double base = std::floor(c), r = c - base;
  if (r == 0.0)
    base -= 1.0, r = 1.0;
  const double r1 = r + 1.0, s = 1.0 - r, s1 = s + 1.0;
  const double w[4] = {((a * r1 - 5.0 * a) * r1 + 8.0 * a) * r1 - 4.0 * a,
                       ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                       ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0,
                       ((a * s1 - 5.0 * a) * s1 + 8.0 * a) * s1 - 4.0 * a};
  std::vector<Tap> taps;
  double sum = 0.0;
  for (int k = 0; k < 4; ++k) {
    const double i = base - 1.0 + k;
    const bool inside = i >= 0.0 && i <= static_cast<double>(inLen - 1);
    const double weight = excludeOutside && !inside ? 0.0 : w[k];
    sum += weight;
    taps.push_back(
        {static_cast<int64_t>(std::clamp(i, 0.0, static_cast<double>(inLen - 1))), weight});
  }
  std::vector<Tap> kept;
  for (Tap &t : taps)
    if (t.weight != 0.0)
      kept.push_back({t.index, excludeOutside ? t.weight / sum : t.weight});
  return kept;
}
/// The filter at distance `x`: the triangle, or Keys' cubic with `a`.
double antialiasWeight(bool cubic, double a, double x) {
  x = std::fabs(x);
  if (!cubic)
    return std::max(0.0, 1.0 - x);
  if (x <= 1.0)
    return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  return x < 2.0 ? ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a : 0.0;
}

/// The taps of antialiased linear or cubic interpolation (ONNX's
/// reference, `_linear_coeffs_antialias` / `_cubic_coeffs_antialias`) at
/// coordinate `c` when downscaling by `scale` < 1: the filter stretched by
/// 1 / scale, over the 2 - 2 start neighbours base + start .. base - start + 1
/// (base and the ratio r as cubicTaps's), weighted by the filter at
/// (i - r) * scale and normalized to sum 1; read at the edge beyond it, or
/// left out and renormalized with `excludeOutside`. codegen/LowerNode.cpp
/// builds the same in scalar code.
std::vector<Tap> antialiasTaps(bool cubic, double c, int64_t inLen, double scale, double a,
                               bool excludeOutside) {
  double base = std::floor(c), r = c - base;
  if (r == 0.0)
    base -= 1.0, r = 1.0;
  const int64_t start = resizeAntialiasStart(cubic, scale);
  std::vector<Tap> taps;
  double sum = 0.0;
  for (int64_t i = start; i < 2 - start; ++i) {
    const double w = antialiasWeight(cubic, a, (static_cast<double>(i) - r) * scale);
    sum += w;
    taps.push_back({static_cast<int64_t>(base) + i, w});
  }
  double kept = 0.0;
  for (Tap &t : taps) {
    t.weight /= sum;
    if (excludeOutside && (t.index < 0 || t.index >= inLen))
      t.weight = 0.0;
    kept += t.weight;
    t.index = std::clamp<int64_t>(t.index, 0, inLen - 1);
  }
  std::vector<Tap> out;
  for (Tap &t : taps)
    if (t.weight != 0.0)
      out.push_back({t.index, excludeOutside ? t.weight / kept : t.weight});
  return out;
}
} // namespace

FailureOr<Tensors> referenceResize(const OpContext &ctx, std::span<const Tensor> inputs,
                                   std::span<const TensorType> resultTypes) {
  const Tensor &in = inputs[0];
  ResizeOp op(ctx);
  Tensor out = allocResult(resultTypes);
  if (out.numel() == 0)
    return Tensors{out};
  const bool nearest = op.mode() == "nearest", cubic = op.mode() == "cubic";
  size_t rank = static_cast<size_t>(in.rank());
  // taps[d][x]: the input indices (and weights) output coordinate x of dim d
  // reads. Out-of-range coordinates clamp to the edge, as in ONNX.
  std::vector<std::vector<std::vector<Tap>>> taps(rank);
  // tf_crop_and_resize: the output coordinates of each dim that map outside
  // the input, whose elements are extrapolation_value.
  const bool crop = op.coordinate_transformation_mode() == "tf_crop_and_resize";
  std::vector<std::vector<bool>> outside(rank);
  for (size_t d = 0; d < rank; ++d) {
    int64_t inLen = in.shape()[d], outLen = out.shape()[d];
    double scale = op.scales().empty() ? static_cast<double>(outLen) / static_cast<double>(inLen)
                                       : op.scales()[d];
    double resized =
        op.scales().empty() ? static_cast<double>(outLen) : scale * static_cast<double>(inLen);
    double maxIndex = static_cast<double>(inLen - 1);
    for (int64_t x = 0; x < outLen; ++x) {
      double c = originalCoordinate(op.coordinate_transformation_mode(), x, scale, inLen, resized,
                                    crop ? op.roi()[d] : 0.0, crop ? op.roi()[d + rank] : 1.0);
      outside[d].push_back(crop && (c < 0.0 || c > maxIndex));
      std::vector<Tap> t;
      if (nearest) {
        double r = std::clamp(roundNearest(op.nearest_mode(), c), 0.0, maxIndex);
        t.push_back({static_cast<int64_t>(r), 1.0});
      } else if (op.antialias() && scale < 1.0) {
        t = antialiasTaps(cubic, c, inLen, scale, op.cubic_coeff_a(), op.exclude_outside());
      } else if (cubic) {
        t = cubicTaps(c, inLen, op.cubic_coeff_a(), op.exclude_outside());
      } else {
        c = std::clamp(c, 0.0, maxIndex);
        double lo = std::floor(c);
        double w = c - lo;
        t.push_back({static_cast<int64_t>(lo), 1.0 - w});
        if (w > 0.0)
          t.push_back({static_cast<int64_t>(lo) + 1, w});
      }
      taps[d].push_back(std::move(t));
    }
  }
  std::vector<int64_t> inStrides = in.strides();
  forEachIndex(out.shape(), [&](const std::vector<int64_t> &idx, int64_t flat) {
    for (size_t d = 0; d < rank; ++d)
      if (outside[d][static_cast<size_t>(idx[d])]) {
        out.setDouble(flat, op.extrapolation_value());
        return;
      }
    if (nearest) {
      int64_t src = 0;
      for (size_t d = 0; d < rank; ++d)
        src += taps[d][static_cast<size_t>(idx[d])][0].index * inStrides[d];
      copyElement(out, flat, in, src);
      return;
    }
    // Sum over the corners of the cell: one tap per dim, every combination.
    std::vector<int64_t> numTaps(rank), pick(rank, 0);
    for (size_t d = 0; d < rank; ++d)
      numTaps[d] = static_cast<int64_t>(taps[d][static_cast<size_t>(idx[d])].size());
    double acc = 0.0;
    do {
      int64_t src = 0;
      double weight = 1.0;
      for (size_t d = 0; d < rank; ++d) {
        const Tap &t = taps[d][static_cast<size_t>(idx[d])][static_cast<size_t>(pick[d])];
        src += t.index * inStrides[d];
        weight *= t.weight;
      }
      acc += weight * in.getDouble(src);
    } while (nextIndex(pick, numTaps));
    out.setDouble(flat, acc);
  });
  return Tensors{out};
}

} // namespace kiln
