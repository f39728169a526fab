//===- Linalg.cpp - conv, conv_transpose and pools --------------*- C++ -*-===//
//
// Type inference and reference kernels of the window ops: conv,
// conv_transpose, max_pool, avg_pool, global_avg_pool (matmul and gemm are
// in MatMul.cpp; the compute types they share in ComputeBuffers.h).
// Semantics follow ONNX opset 17; see docs/OPS.md and the notes below for
// the corner cases ONNX leaves open.
//
// Unlike most reference kernels these are written for speed as well as
// clarity, because the interpreter runs whole CNNs (resnet18 in seconds on
// one core): conv is im2col + a cache-blocked GEMM whose innermost loop is
// contiguous, and every kernel works on raw buffers of its compute type.
// See Note [Compute types].
//
//===----------------------------------------------------------------------===//
#include "ir/ops/ComputeBuffers.h"
#include "ir/ops/Internal.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

namespace kiln {
namespace {

using namespace ops;

//===----------------------------------------------------------------------===//
// Window attributes and output sizes
//===----------------------------------------------------------------------===//

/// Conv and pools support this many spatial dims.
constexpr size_t kMaxSpatialDims = 3;

/// Strides, pads and dilations of a window op with the ONNX defaults (all 1,
/// all 0, all 1) filled in, one entry per spatial dim.
struct WindowParams {
  std::vector<int64_t> strides, padsBegin, padsEnd, dilations;
};

/// Checks the rank of `values` (empty means `fill` everywhere) and that each
/// entry is at least `minValue`.
LogicalResult readPerDim(const OpContext &ctx, const char *name, const std::vector<int64_t> &values,
                         size_t count, int64_t fill, int64_t minValue, const char *what,
                         std::vector<int64_t> &out) {
  if (values.empty()) {
    out.assign(count, fill);
    return success();
  }
  if (values.size() != count)
    return ctx.emitError() << name << " " << values << " must have " << count << " entries, "
                           << what;
  for (int64_t v : values)
    if (v < minValue)
      return ctx.emitError() << name << " " << values << " must be "
                             << (minValue > 0 ? "positive" : "non-negative");
  out = values;
  return success();
}

/// Reads the window attributes of an op with `numSpatial` spatial dims;
/// `dilations` is null for ops without them.
FailureOr<WindowParams> readWindowParams(const OpContext &ctx, size_t numSpatial,
                                         const std::vector<int64_t> &strides,
                                         const std::vector<int64_t> &pads,
                                         const std::vector<int64_t> *dilations) {
  WindowParams p;
  std::vector<int64_t> allPads;
  if (failed(readPerDim(ctx, "strides", strides, numSpatial, 1, 1, "one per spatial dim",
                        p.strides)) ||
      failed(readPerDim(ctx, "pads", pads, 2 * numSpatial, 0, 0,
                        "a begin and an end per spatial dim", allPads)))
    return failure();
  if (failed(readPerDim(ctx, "dilations", dilations ? *dilations : std::vector<int64_t>(),
                        numSpatial, 1, 1, "one per spatial dim", p.dilations)))
    return failure();
  p.padsBegin.assign(allPads.begin(), allPads.begin() + static_cast<ptrdiff_t>(numSpatial));
  p.padsEnd.assign(allPads.begin() + static_cast<ptrdiff_t>(numSpatial), allPads.end());
  return p;
}

/// The number of windows of extent `dilation * (kernel - 1) + 1` that fit in
/// `in` padded by `padBegin` and `padEnd` with `stride`; may be <= 0. See
/// Note [Pool ceil_mode]. Saturates instead of overflowing.
int64_t windowCount(int64_t in, int64_t kernel, int64_t dilation, int64_t padBegin, int64_t padEnd,
                    int64_t stride, bool ceilMode) {
  using Wide = __int128;
  const Wide extent = Wide(dilation) * (kernel - 1) + 1;
  const Wide span = Wide(in) + padBegin + padEnd - extent;
  if (span < 0)
    return 0;
  Wide count = (ceilMode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceilMode && (count - 1) * stride >= Wide(in) + padBegin)
    --count;
  return count > std::numeric_limits<int64_t>::max() ? std::numeric_limits<int64_t>::max()
                                                     : static_cast<int64_t>(count);
}

// Note [Pool ceil_mode]
// With ceil_mode, ONNX (since onnx/onnx#5741) and PyTorch drop a last
// window that would start in the end padding, so every window starts inside
// the padded-at-the-front input. avg_pool with count_include_pad divides by
// the window clipped to the padded input (PyTorch's rule), not by the full
// kernel, so the overhanging part of a ceil_mode window is not counted.
// Windows with no input element at all (possible only with pads >= the
// kernel extent, which ONNX does not forbid) give -inf for max_pool and 0 for
// avg_pool.

/// The size of the output along one spatial dim of a window op, or a
/// reported failure when no window fits. `kernel` comes from the weight for
/// conv (so may be symbolic) and from the `kernel` attribute for pools.
/// A symbolic input keeps its symbol when the op preserves sizes (stride 1,
/// total padding = extent - 1), and becomes `?` otherwise.
FailureOr<Dim> windowOutDim(const OpContext &ctx, size_t axis, const Dim &in, const Dim &kernel,
                            const WindowParams &p, bool ceilMode) {
  if (kernel.isSymbolic())
    return Dim::dynamic();
  const int64_t k = kernel.size(), d = p.dilations[axis], s = p.strides[axis];
  const int64_t pb = p.padsBegin[axis], pe = p.padsEnd[axis];
  const __int128 extent = __int128(d) * (k - 1) + 1;
  if (in.isSymbolic()) {
    if (s == 1 && __int128(pb) + pe + 1 == extent)
      return in;
    // floor((in + pads - extent) / stride) + 1; ceil_mode's last-window
    // rule (Note [Pool ceil_mode]) has no closed form here.
    const __int128 shift = __int128(pb) + pe - extent;
    if (ceilMode || shift < -kMaxDim || shift > kMaxDim)
      return Dim::dynamic();
    return floorDiv(addConstant(in, static_cast<int64_t>(shift)), s) + Dim(1);
  }
  int64_t count = windowCount(in.size(), k, d, pb, pe, s, ceilMode);
  if (count < 1)
    return ctx.emitError() << "window of kernel " << k << " and dilation " << d
                           << " does not fit spatial dim " << axis << " of size " << in.size()
                           << " with pads " << pb << " and " << pe;
  return Dim(count);
}

/// Checks that `x` is a [N, C, spatial...] tensor with 1 to 3 spatial dims.
LogicalResult requireWindowInput(const OpContext &ctx, const TensorType &x) {
  if (x.rank() < 3)
    return ctx.emitError() << "input " << x.str()
                           << " must have rank >= 3 (batch, channels, spatial dims)";
  if (static_cast<size_t>(x.rank() - 2) > kMaxSpatialDims)
    return ctx.emitError() << "input " << x.str() << " has " << x.rank() - 2
                           << " spatial dims, at most " << kMaxSpatialDims << " are supported";
  return success();
}

/// Window geometry padded to 3 spatial dims (leading dims of size 1,
/// kernel 1, stride 1, no pads), so one loop nest serves 1-D, 2-D and 3-D.
struct Geometry3 {
  std::array<int64_t, 3> in{1, 1, 1}, kernel{1, 1, 1}, out{1, 1, 1};
  std::array<int64_t, 3> stride{1, 1, 1}, padBegin{0, 0, 0}, padEnd{0, 0, 0}, dilation{1, 1, 1};

  int64_t inVolume() const { return in[0] * in[1] * in[2]; }
  int64_t kernelVolume() const { return kernel[0] * kernel[1] * kernel[2]; }
  int64_t outVolume() const { return out[0] * out[1] * out[2]; }
};

/// Geometry of a window op from the static sizes of its input (`inShape`,
/// [N, C, spatial...]), kernel and output spatial dims.
Geometry3 makeGeometry(const std::vector<int64_t> &inShape, const std::vector<int64_t> &kernel,
                       const std::vector<int64_t> &outShape, const WindowParams &p) {
  Geometry3 g;
  const size_t numSpatial = inShape.size() - 2, off = kMaxSpatialDims - numSpatial;
  for (size_t i = 0; i < numSpatial; ++i) {
    g.in[off + i] = inShape[2 + i];
    g.kernel[off + i] = kernel[i];
    g.out[off + i] = outShape[2 + i];
    g.stride[off + i] = p.strides[i];
    g.padBegin[off + i] = p.padsBegin[i];
    g.padEnd[off + i] = p.padsEnd[i];
    g.dilation[off + i] = p.dilations[i];
  }
  return g;
}

std::vector<int64_t> spatialSizes(const std::vector<int64_t> &shape) {
  return std::vector<int64_t>(shape.begin() + 2, shape.end());
}

//===----------------------------------------------------------------------===//
// Conv kernels
//===----------------------------------------------------------------------===//

/// Sizes of a conv or conv_transpose beyond its window.
struct ConvSizes {
  int64_t batch, inChannels, outChannels, group;
};

/// Fills col[K, rows * out[2]], K = channels * kernelVolume, with the input
/// elements under each kernel tap for output rows [row0, row0 + rows) of
/// the flattened (out[0], out[1]) grid; padding reads as zero.
template <typename T>
void im2col(const Geometry3 &g, int64_t channels, const T *x, int64_t row0, int64_t rows, T *col) {
  const int64_t width = g.out[2];
  for (int64_t c = 0; c < channels; ++c) {
    const T *xc = x + c * g.inVolume();
    for (int64_t kd = 0; kd < g.kernel[0]; ++kd)
      for (int64_t kh = 0; kh < g.kernel[1]; ++kh)
        for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
          const int64_t iwBase = kw * g.dilation[2] - g.padBegin[2];
          for (int64_t r = row0; r < row0 + rows; ++r, col += width) {
            const int64_t id = (r / g.out[1]) * g.stride[0] - g.padBegin[0] + kd * g.dilation[0];
            const int64_t ih = (r % g.out[1]) * g.stride[1] - g.padBegin[1] + kh * g.dilation[1];
            if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
              std::fill(col, col + width, T(0));
              continue;
            }
            const T *src = xc + (id * g.in[1] + ih) * g.in[2];
            for (int64_t ow = 0; ow < width; ++ow) {
              const int64_t iw = iwBase + ow * g.stride[2];
              col[ow] = iw >= 0 && iw < g.in[2] ? src[iw] : T(0);
            }
          }
        }
  }
}

/// Direct conv as im2col + GEMM per (image, group), tiled over output rows
/// so the column buffer stays small. x [N, C, in...], w [M, C/group,
/// kernel...], bias [M] or null, y [N, M, out...] zero-filled.
template <typename T>
void convForward(const Geometry3 &g, const ConvSizes &s, const T *x, const T *w, const T *bias,
                 T *y) {
  const int64_t inGroup = s.inChannels / s.group, outGroup = s.outChannels / s.group;
  const int64_t depth = inGroup * g.kernelVolume(), outVolume = g.outVolume();
  const bool isPointwise = g.kernelVolume() == 1 && g.stride == std::array<int64_t, 3>{1, 1, 1} &&
                           g.padBegin == std::array<int64_t, 3>{0, 0, 0};
  // About 1 MiB of column buffer per tile.
  constexpr int64_t kTileElements = int64_t(1) << 18;
  const int64_t numRows = g.out[0] * g.out[1];
  const int64_t tileRows =
      std::clamp<int64_t>(kTileElements / std::max<int64_t>(1, depth * g.out[2]), 1, numRows);
  std::vector<T> col(isPointwise ? 0 : static_cast<size_t>(depth * tileRows * g.out[2]));

  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t grp = 0; grp < s.group; ++grp) {
      const T *xg = x + (n * s.inChannels + grp * inGroup) * g.inVolume();
      const T *wg = w + grp * outGroup * depth;
      T *yg = y + (n * s.outChannels + grp * outGroup) * outVolume;
      if (bias)
        for (int64_t m = 0; m < outGroup; ++m)
          std::fill(yg + m * outVolume, yg + (m + 1) * outVolume, bias[grp * outGroup + m]);
      if (isPointwise) {
        gemmAccumulate(outGroup, outVolume, depth, wg, depth, 1, xg, g.inVolume(), yg, outVolume);
        continue;
      }
      for (int64_t row0 = 0; row0 < numRows; row0 += tileRows) {
        const int64_t rows = std::min(tileRows, numRows - row0);
        const int64_t cols = rows * g.out[2];
        im2col(g, inGroup, xg, row0, rows, col.data());
        gemmAccumulate(outGroup, cols, depth, wg, depth, 1, col.data(), cols, yg + row0 * g.out[2],
                       outVolume);
      }
    }
}

/// conv_transpose as GEMM + col2im per (image, group): col = W_g^T * X_g,
/// then each column entry is added to the output element its tap hits.
/// x [N, C, in...], w [C, M/group, kernel...], bias [M] or null, y [N, M,
/// out...] zero-filled. Here `g.in` is the op's input and `g.out` its output.
template <typename T>
void convTransposeForward(const Geometry3 &g, const ConvSizes &s, const T *x, const T *w,
                          const T *bias, T *y) {
  const int64_t inGroup = s.inChannels / s.group, outGroup = s.outChannels / s.group;
  const int64_t taps = outGroup * g.kernelVolume(), inVolume = g.inVolume();
  const int64_t outVolume = g.outVolume();
  std::vector<T> col(static_cast<size_t>(taps * inVolume));
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t grp = 0; grp < s.group; ++grp) {
      const T *xg = x + (n * s.inChannels + grp * inGroup) * inVolume;
      const T *wg = w + grp * inGroup * taps;
      T *yg = y + (n * s.outChannels + grp * outGroup) * outVolume;
      std::fill(col.begin(), col.end(), T(0));
      gemmAccumulate(taps, inVolume, inGroup, wg, 1, taps, xg, inVolume, col.data(), inVolume);
      const T *src = col.data();
      for (int64_t m = 0; m < outGroup; ++m)
        for (int64_t kd = 0; kd < g.kernel[0]; ++kd)
          for (int64_t kh = 0; kh < g.kernel[1]; ++kh)
            for (int64_t kw = 0; kw < g.kernel[2]; ++kw)
              for (int64_t id = 0; id < g.in[0]; ++id)
                for (int64_t ih = 0; ih < g.in[1]; ++ih, src += g.in[2]) {
                  const int64_t od = id * g.stride[0] - g.padBegin[0] + kd * g.dilation[0];
                  const int64_t oh = ih * g.stride[1] - g.padBegin[1] + kh * g.dilation[1];
                  if (od < 0 || od >= g.out[0] || oh < 0 || oh >= g.out[1])
                    continue;
                  T *dst = yg + m * outVolume + (od * g.out[1] + oh) * g.out[2];
                  for (int64_t iw = 0; iw < g.in[2]; ++iw) {
                    const int64_t ow = iw * g.stride[2] - g.padBegin[2] + kw * g.dilation[2];
                    if (ow >= 0 && ow < g.out[2])
                      dst[ow] += src[iw];
                  }
                }
      if (bias)
        for (int64_t m = 0; m < outGroup; ++m) {
          T *row = yg + m * outVolume;
          for (int64_t i = 0; i < outVolume; ++i)
            row[i] += bias[grp * outGroup + m];
        }
    }
}

/// Shared type inference of conv and conv_transpose. The weight is
/// [M, C/group, kernel...] for conv and [C, M/group, kernel...] for
/// conv_transpose; `outputPadding` is null for conv.
FailureOr<std::vector<TensorType>>
inferConvLike(const OpContext &ctx, bool isTranspose, const std::vector<int64_t> &strides,
              const std::vector<int64_t> &pads, const std::vector<int64_t> &dilations,
              int64_t group, const std::vector<int64_t> *outputPadding) {
  const TensorType &x = ctx.operandType(0), &w = ctx.operandType(1);
  if (failed(requireFloat(ctx, 0)) || failed(requireSameDType(ctx)) ||
      failed(requireWindowInput(ctx, x)))
    return failure();
  if (w.rank() != x.rank())
    return ctx.emitError() << "weight " << w.str() << " must have the rank of the input "
                           << x.str();
  if (group < 1)
    return ctx.emitError() << "group " << group << " must be positive";
  const size_t numSpatial = static_cast<size_t>(x.rank() - 2);
  auto params = readWindowParams(ctx, numSpatial, strides, pads, &dilations);
  if (failed(params))
    return failure();
  std::vector<int64_t> outPadding;
  if (outputPadding && failed(readPerDim(ctx, "output_padding", *outputPadding, numSpatial, 0, 0,
                                         "one per spatial dim", outPadding)))
    return failure();

  // Channels: conv reads C = w[1] * group and writes M = w[0]; conv_transpose
  // reads C = w[0] and writes M = w[1] * group.
  const Dim &inChannels = x.shape[1];
  const Dim &weightIn = isTranspose ? w.shape[0] : w.shape[1];
  const Dim &weightOut = isTranspose ? w.shape[1] : w.shape[0];
  if (!isTranspose && inChannels.isStatic() && weightIn.isStatic() &&
      inChannels.size() != __int128(weightIn.size()) * group)
    return ctx.emitError() << "input channels " << inChannels.size()
                           << " do not match weight channels " << weightIn.size() << " * group "
                           << group;
  if (isTranspose && inChannels.isStatic() && weightIn.isStatic() &&
      inChannels.size() != weightIn.size())
    return ctx.emitError() << "input channels " << inChannels.size()
                           << " do not match weight dim 0 of " << w.str();
  if (isTranspose && inChannels.isStatic() && inChannels.size() % group != 0)
    return ctx.emitError() << "input channels " << inChannels.size()
                           << " are not divisible by group " << group;
  if (!isTranspose && weightOut.isStatic() && weightOut.size() % group != 0)
    return ctx.emitError() << "output channels " << weightOut.size()
                           << " are not divisible by group " << group;
  Dim outChannels = weightOut;
  if (isTranspose && weightOut.isStatic() &&
      __int128(weightOut.size()) * group > std::numeric_limits<int64_t>::max())
    return ctx.emitError() << "output channels " << weightOut.size() << " * group " << group
                           << " overflow";
  if (isTranspose && weightOut.isStatic())
    outChannels = Dim(weightOut.size() * group);
  else if (isTranspose)
    outChannels = Dim::dynamic();
  if (ctx.numOperands() == 3) {
    const TensorType &bias = ctx.operandType(2);
    if (bias.rank() != 1 ||
        (bias.shape[0].isStatic() && outChannels.isStatic() && bias.shape[0] != outChannels))
      return ctx.emitError() << "bias " << bias.str() << " must have shape [" << outChannels.str()
                             << "]";
  }

  Shape out{x.shape[0], outChannels};
  for (size_t i = 0; i < numSpatial; ++i) {
    const Dim &kernel = w.shape[2 + i];
    if (kernel.isStatic() && kernel.size() == 0)
      return ctx.emitError() << "weight " << w.str() << " has an empty kernel";
    if (!isTranspose) {
      auto dim = windowOutDim(ctx, i, x.shape[2 + i], kernel, *params, /*ceilMode=*/false);
      if (failed(dim))
        return failure();
      out.push_back(*dim);
      continue;
    }
    // ONNX: out = stride * (in - 1) + output_padding + extent - pads.
    const int64_t s = params->strides[i], d = params->dilations[i];
    if (outPadding[i] >= s && outPadding[i] >= d)
      return ctx.emitError() << "output_padding " << *outputPadding
                             << " must be smaller than the stride or the dilation in spatial dim "
                             << i;
    const Dim &in = x.shape[2 + i];
    if (in.isSymbolic() || kernel.isSymbolic()) {
      // stride * (in - 1) + output_padding + dilation * (kernel - 1) + 1 - pads.
      out.push_back(addConstant(Dim(s) * addConstant(in, -1) + Dim(d) * addConstant(kernel, -1),
                                outPadding[i] + 1 - params->padsBegin[i] - params->padsEnd[i]));
      continue;
    }
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    const __int128 stretched = __int128(s) * (in.size() - 1);
    const __int128 extent = __int128(d) * (kernel.size() - 1) + 1;
    if (stretched > kMax || extent > kMax)
      return ctx.emitError() << "output size of spatial dim " << i << " overflows (stride " << s
                             << ", dilation " << d << ")";
    const __int128 size =
        stretched + outPadding[i] + extent - params->padsBegin[i] - params->padsEnd[i];
    if (size < 1 || size > kMax)
      return ctx.emitError() << "output size " << static_cast<long long>(size) << " of spatial dim "
                             << i << " is not positive (input " << x.str() << ", weight " << w.str()
                             << ", pads " << pads << ")";
    out.push_back(Dim(static_cast<int64_t>(size)));
  }
  return std::vector<TensorType>{TensorType(x.dtype, std::move(out))};
}

/// Shared reference of conv and conv_transpose.
FailureOr<std::vector<Tensor>>
referenceConvLike(const OpContext &ctx, bool isTranspose, std::span<const Tensor> inputs,
                  std::span<const TensorType> resultTypes, const std::vector<int64_t> &strides,
                  const std::vector<int64_t> &pads, const std::vector<int64_t> &dilations,
                  int64_t group) {
  const Tensor &x = inputs[0], &w = inputs[1];
  const size_t numSpatial = static_cast<size_t>(x.rank() - 2);
  auto params = readWindowParams(ctx, numSpatial, strides, pads, &dilations);
  if (failed(params))
    return failure();
  Tensor y = Tensor::zeros(resultTypes[0].dtype, staticSizes(resultTypes[0].shape));
  if (y.numel() == 0)
    return std::vector<Tensor>{y};
  if (x.numel() == 0) {
    // No input element reaches the output, only the bias does.
    const int64_t plane = y.numel() / (y.dim(0) * y.dim(1));
    if (inputs.size() == 3)
      for (int64_t i = 0; i < y.numel(); ++i)
        y.setDouble(i, inputs[2].getDouble((i / plane) % y.dim(1)));
    return std::vector<Tensor>{y};
  }
  const std::vector<int64_t> kernel = spatialSizes(w.shape());
  // conv_transpose runs the window from its output back to its input, so its
  // geometry has the two swapped.
  Geometry3 g = isTranspose ? makeGeometry(y.shape(), kernel, x.shape(), *params)
                            : makeGeometry(x.shape(), kernel, y.shape(), *params);
  if (isTranspose)
    std::swap(g.in, g.out);
  const ConvSizes sizes{x.dim(0), x.dim(1), y.dim(1), group};
  withFloatComputeType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    InputBuffer<T> xb(x), wb(w);
    std::optional<InputBuffer<T>> bb;
    if (inputs.size() == 3)
      bb.emplace(inputs[2]);
    OutputBuffer<T> yb(y);
    const T *bias = bb ? bb->data() : nullptr;
    if (isTranspose)
      convTransposeForward(g, sizes, xb.data(), wb.data(), bias, yb.data());
    else
      convForward(g, sizes, xb.data(), wb.data(), bias, yb.data());
    yb.finish();
  });
  return std::vector<Tensor>{y};
}

//===----------------------------------------------------------------------===//
// Pool kernels
//===----------------------------------------------------------------------===//

/// max_pool over `planes` [in...] planes of x into [out...] planes of y;
/// padding never wins (an all-padding window gives -inf).
template <typename T> void maxPoolForward(const Geometry3 &g, int64_t planes, const T *x, T *y) {
  for (int64_t p = 0; p < planes; ++p, x += g.inVolume())
    for (int64_t od = 0; od < g.out[0]; ++od)
      for (int64_t oh = 0; oh < g.out[1]; ++oh)
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          T best = -std::numeric_limits<T>::infinity();
          for (int64_t kd = 0; kd < g.kernel[0]; ++kd) {
            const int64_t id = od * g.stride[0] - g.padBegin[0] + kd * g.dilation[0];
            if (id < 0 || id >= g.in[0])
              continue;
            for (int64_t kh = 0; kh < g.kernel[1]; ++kh) {
              const int64_t ih = oh * g.stride[1] - g.padBegin[1] + kh * g.dilation[1];
              if (ih < 0 || ih >= g.in[1])
                continue;
              const T *row = x + (id * g.in[1] + ih) * g.in[2];
              for (int64_t kw = 0; kw < g.kernel[2]; ++kw) {
                const int64_t iw = ow * g.stride[2] - g.padBegin[2] + kw * g.dilation[2];
                if (iw < 0 || iw >= g.in[2])
                  continue;
                const T v = row[iw];
                // A NaN wins and then stays: nothing compares greater.
                if (v > best || std::isnan(v))
                  best = v;
              }
            }
          }
          *y++ = best;
        }
}

/// avg_pool over `planes` [in...] planes of x into [out...] planes of y,
/// summing in double.
template <typename T>
void avgPoolForward(const Geometry3 &g, int64_t planes, bool countIncludePad, const T *x, T *y) {
  // Per dim and output index: the input positions of the window's taps
  // (start + k * dilation) inside the input, and the count of its taps
  // inside the padded input. See Note [Pool ceil_mode].
  std::array<std::vector<std::vector<int64_t>>, 3> taps;
  std::array<std::vector<int64_t>, 3> padded;
  for (size_t a = 0; a < 3; ++a)
    for (int64_t o = 0; o < g.out[a]; ++o) {
      const int64_t start = o * g.stride[a] - g.padBegin[a];
      std::vector<int64_t> inside;
      int64_t inPadded = 0;
      for (int64_t k = 0; k < g.kernel[a]; ++k) {
        const int64_t i = start + k * g.dilation[a];
        if (i >= 0 && i < g.in[a])
          inside.push_back(i);
        if (i >= -g.padBegin[a] && i < g.in[a] + g.padEnd[a])
          ++inPadded;
      }
      taps[a].push_back(std::move(inside));
      padded[a].push_back(inPadded);
    }
  for (int64_t p = 0; p < planes; ++p, x += g.inVolume())
    for (int64_t od = 0; od < g.out[0]; ++od)
      for (int64_t oh = 0; oh < g.out[1]; ++oh)
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          const std::vector<int64_t> &td = taps[0][static_cast<size_t>(od)],
                                     &th = taps[1][static_cast<size_t>(oh)],
                                     &tw = taps[2][static_cast<size_t>(ow)];
          double sum = 0;
          for (int64_t id : td)
            for (int64_t ih : th) {
              const T *row = x + (id * g.in[1] + ih) * g.in[2];
              for (int64_t iw : tw)
                sum += static_cast<double>(row[iw]);
            }
          const int64_t count = countIncludePad
                                    ? padded[0][static_cast<size_t>(od)] *
                                          padded[1][static_cast<size_t>(oh)] *
                                          padded[2][static_cast<size_t>(ow)]
                                    : static_cast<int64_t>(td.size() * th.size() * tw.size());
          *y++ = count > 0 ? static_cast<T>(sum / static_cast<double>(count)) : T(0);
        }
}

/// Shared type inference of max_pool and avg_pool.
FailureOr<std::vector<TensorType>> inferPool(const OpContext &ctx,
                                             const std::vector<int64_t> &kernel,
                                             const std::vector<int64_t> &strides,
                                             const std::vector<int64_t> &pads,
                                             const std::vector<int64_t> *dilations, bool ceilMode) {
  const TensorType &x = ctx.operandType(0);
  if (failed(requireFloat(ctx, 0)) || failed(requireWindowInput(ctx, x)))
    return failure();
  const size_t numSpatial = static_cast<size_t>(x.rank() - 2);
  if (kernel.size() != numSpatial)
    return ctx.emitError() << "kernel " << kernel << " must have " << numSpatial
                           << " entries, one per spatial dim of the input " << x.str();
  for (int64_t k : kernel)
    if (k < 1)
      return ctx.emitError() << "kernel " << kernel << " must be positive";
  auto params = readWindowParams(ctx, numSpatial, strides, pads, dilations);
  if (failed(params))
    return failure();
  Shape out{x.shape[0], x.shape[1]};
  for (size_t i = 0; i < numSpatial; ++i) {
    auto dim = windowOutDim(ctx, i, x.shape[2 + i], Dim(kernel[i]), *params, ceilMode);
    if (failed(dim))
      return failure();
    out.push_back(*dim);
  }
  return std::vector<TensorType>{TensorType(x.dtype, std::move(out))};
}

/// Runs `fn(geometry, planes, x, y)`, a pool kernel, on raw buffers; an
/// empty input gives `emptyValue` everywhere.
template <typename Fn>
FailureOr<std::vector<Tensor>>
referencePool(const OpContext &ctx, const Tensor &x, const TensorType &resultType,
              const std::vector<int64_t> &kernel, const std::vector<int64_t> &strides,
              const std::vector<int64_t> &pads, const std::vector<int64_t> *dilations,
              double emptyValue, Fn &&fn) {
  auto params = readWindowParams(ctx, static_cast<size_t>(x.rank() - 2), strides, pads, dilations);
  if (failed(params))
    return failure();
  Tensor y = Tensor::zeros(resultType.dtype, staticSizes(resultType.shape));
  if (y.numel() == 0)
    return std::vector<Tensor>{y};
  if (x.numel() == 0) {
    for (int64_t i = 0; i < y.numel(); ++i)
      y.setDouble(i, emptyValue);
    return std::vector<Tensor>{y};
  }
  const Geometry3 g = makeGeometry(x.shape(), kernel, y.shape(), *params);
  const int64_t planes = x.dim(0) * x.dim(1);
  withFloatComputeType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    InputBuffer<T> xb(x);
    OutputBuffer<T> yb(y);
    fn(g, planes, xb.data(), yb.data());
    yb.finish();
  });
  return std::vector<Tensor>{y};
}

} // namespace

//===----------------------------------------------------------------------===//
// conv and conv_transpose
//===----------------------------------------------------------------------===//

FailureOr<std::vector<TensorType>> inferConv(const OpContext &ctx) {
  ConvOp op(ctx);
  return inferConvLike(ctx, /*isTranspose=*/false, op.strides(), op.pads(), op.dilations(),
                       op.group(), nullptr);
}

FailureOr<std::vector<Tensor>> referenceConv(const OpContext &ctx, std::span<const Tensor> inputs,
                                             std::span<const TensorType> resultTypes) {
  ConvOp op(ctx);
  return referenceConvLike(ctx, /*isTranspose=*/false, inputs, resultTypes, op.strides(), op.pads(),
                           op.dilations(), op.group());
}

FailureOr<std::vector<TensorType>> inferConvTranspose(const OpContext &ctx) {
  ConvTransposeOp op(ctx);
  return inferConvLike(ctx, /*isTranspose=*/true, op.strides(), op.pads(), op.dilations(),
                       op.group(), &op.output_padding());
}

FailureOr<std::vector<Tensor>> referenceConvTranspose(const OpContext &ctx,
                                                      std::span<const Tensor> inputs,
                                                      std::span<const TensorType> resultTypes) {
  ConvTransposeOp op(ctx);
  return referenceConvLike(ctx, /*isTranspose=*/true, inputs, resultTypes, op.strides(), op.pads(),
                           op.dilations(), op.group());
}

//===----------------------------------------------------------------------===//
// Pools
//===----------------------------------------------------------------------===//

FailureOr<std::vector<TensorType>> inferMaxPool(const OpContext &ctx) {
  MaxPoolOp op(ctx);
  return inferPool(ctx, op.kernel(), op.strides(), op.pads(), &op.dilations(), op.ceil_mode());
}

FailureOr<std::vector<Tensor>> referenceMaxPool(const OpContext &ctx,
                                                std::span<const Tensor> inputs,
                                                std::span<const TensorType> resultTypes) {
  MaxPoolOp op(ctx);
  return referencePool(
      ctx, inputs[0], resultTypes[0], op.kernel(), op.strides(), op.pads(), &op.dilations(),
      -std::numeric_limits<double>::infinity(),
      [](const Geometry3 &g, int64_t planes, auto x, auto y) { maxPoolForward(g, planes, x, y); });
}

FailureOr<std::vector<TensorType>> inferAvgPool(const OpContext &ctx) {
  AvgPoolOp op(ctx);
  return inferPool(ctx, op.kernel(), op.strides(), op.pads(), &op.dilations(), op.ceil_mode());
}

FailureOr<std::vector<Tensor>> referenceAvgPool(const OpContext &ctx,
                                                std::span<const Tensor> inputs,
                                                std::span<const TensorType> resultTypes) {
  AvgPoolOp op(ctx);
  const bool countIncludePad = op.count_include_pad();
  return referencePool(ctx, inputs[0], resultTypes[0], op.kernel(), op.strides(), op.pads(),
                       &op.dilations(), 0.0,
                       [&](const Geometry3 &g, int64_t planes, auto x, auto y) {
                         avgPoolForward(g, planes, countIncludePad, x, y);
                       });
}

// global_avg_pool averages each [N, C] plane over all its spatial dims (any
// number of them) and keeps them as size-1 dims.
FailureOr<std::vector<TensorType>> inferGlobalAvgPool(const OpContext &ctx) {
  const TensorType &x = ctx.operandType(0);
  if (failed(requireFloat(ctx, 0)))
    return failure();
  if (x.rank() < 3)
    return ctx.emitError() << "input " << x.str()
                           << " must have rank >= 3 (batch, channels, spatial dims)";
  Shape out{x.shape[0], x.shape[1]};
  out.resize(x.shape.size(), Dim(1));
  return std::vector<TensorType>{TensorType(x.dtype, std::move(out))};
}

FailureOr<std::vector<Tensor>> referenceGlobalAvgPool(const OpContext &,
                                                      std::span<const Tensor> inputs,
                                                      std::span<const TensorType> resultTypes) {
  const Tensor &x = inputs[0];
  Tensor y = Tensor::zeros(resultTypes[0].dtype, staticSizes(resultTypes[0].shape));
  const int64_t planes = x.dim(0) * x.dim(1), volume = planes ? x.numel() / planes : 0;
  withFloatComputeType(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    InputBuffer<T> xb(x);
    OutputBuffer<T> yb(y);
    for (int64_t p = 0; p < planes; ++p) {
      double sum = 0;
      for (int64_t i = 0; i < volume; ++i)
        sum += static_cast<double>(xb.data()[p * volume + i]);
      yb.data()[p] = static_cast<T>(sum / static_cast<double>(volume));
    }
    yb.finish();
  });
  return std::vector<Tensor>{y};
}

} // namespace kiln
