//===- OnnxNN.cpp - Converters of neural-network ONNX ops -------*- C++ -*-===//
//
// MatMul, Gemm, Conv, ConvTranspose, MaxPool, AveragePool, the global pools,
// BatchNormalization, InstanceNormalization, LayerNormalization (with its
// Mean / InvStdDev outputs), Softmax, LogSoftmax, Hardmax,
// LpNormalization and MeanVarianceNormalization.
//  - ConvTranspose `output_shape` beyond what the kernel reaches (negative
//    total padding) convolves without it and pads the result with zeros.
//
//  - `auto_pad` (SAME_UPPER, SAME_LOWER, VALID) becomes explicit pads, which
//    needs static spatial dims unless the stride is 1.
//  - InstanceNormalization decomposes into reduce_mean / sub / mul / sqrt.
//  - GlobalMaxPool is reduce_max over the spatial axes.
//  - LpNormalization = x / sum(|x|) (p 1) or x / sqrt(sum(x^2)) (p 2)
//    along `axis`, 0 where that norm is 0 (as ONNX's tests); MeanVarianceNormalization = (x - E[x])
//    / (sqrt(E[x^2] - E[x]^2) + 1e-9) over `axes`, as ONNX's function body.
//  - Softmax and LogSoftmax before opset 13 flatten the input to 2-D at
//    `axis` (default 1) and normalize the second dim; that is a softmax over
//    the last axis when `axis` is the last one, and flatten -> softmax ->
//    reshape otherwise.
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"

namespace kiln::onnximport {
namespace {

using Values = std::vector<Value *>;

Values convertMatMul(NodeContext &ctx) {
  return {ctx.create(OpKind::MatMul, {ctx.input(0, "A"), ctx.input(1, "B")})};
}

Values convertGemm(NodeContext &ctx) {
  std::vector<Value *> ins{ctx.input(0, "A"), ctx.input(1, "B")};
  if (Value *c = ctx.optionalInput(2))
    ins.push_back(c);
  return {ctx.create(OpKind::Gemm, ins,
                     {{"alpha", ctx.attrFloat("alpha", 1.0)},
                      {"beta", ctx.attrFloat("beta", 1.0)},
                      {"trans_a", ctx.attrInt("transA", 0) != 0},
                      {"trans_b", ctx.attrInt("transB", 0) != 0}})};
}

//===----------------------------------------------------------------------===//
// Window ops
//===----------------------------------------------------------------------===//

std::string checkAutoPad(const onnx::NodeProto &node, int64_t) {
  std::string autoPad = attrStringOr(node, "auto_pad", "NOTSET");
  if (autoPad != "NOTSET" && autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER" &&
      autoPad != "VALID")
    return "auto_pad '" + autoPad + "' is not supported";
  return "";
}

/// The explicit pads of a window op: `pads` for NOTSET, zeros for VALID, or
/// the SAME_UPPER / SAME_LOWER padding that makes out = ceil(in / stride).
std::optional<Ints> windowPads(NodeContext &ctx, Value *x, const Ints &kernel) {
  size_t n = kernel.size();
  std::string autoPad = ctx.attrString("auto_pad", "NOTSET");
  Ints pads = ctx.attrInts("pads");
  if (autoPad == "NOTSET")
    return pads;
  if (autoPad == "VALID")
    return Ints(2 * n, 0);
  Ints strides = ctx.attrInts("strides", Ints(n, 1));
  Ints dilations = ctx.attrInts("dilations", Ints(n, 1));
  if (strides.size() != n || dilations.size() != n ||
      x->type().rank() != static_cast<int64_t>(n) + 2) {
    ctx.emitError() << "strides " << strides << ", dilations " << dilations << " and input "
                    << x->type().str() << " do not match kernel " << kernel;
    return std::nullopt;
  }
  Ints out(2 * n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Dim &in = x->type().shape[i + 2];
    int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
    int64_t total;
    if (in.isStatic()) {
      int64_t outSize = (in.size() + strides[i] - 1) / strides[i];
      total = std::max<int64_t>(0, (outSize - 1) * strides[i] + extent - in.size());
    } else if (strides[i] == 1) {
      total = extent - 1;
    } else {
      ctx.emitError() << "auto_pad " << autoPad << " with stride " << strides[i]
                      << " needs a static spatial dim, got " << x->type().str();
      return std::nullopt;
    }
    bool upper = autoPad == "SAME_UPPER";
    out[i] = upper ? total / 2 : total - total / 2;
    out[i + n] = total - out[i];
  }
  return out;
}

/// The spatial kernel of a conv: from the weight's shape, checked against
/// `kernel_shape` when given.
std::optional<Ints> convKernel(NodeContext &ctx, Value *w) {
  if (!w)
    return std::nullopt;
  Ints kernel;
  for (size_t i = 2; i < w->type().shape.size(); ++i) {
    const Dim &d = w->type().shape[i];
    if (!d.isStatic()) {
      ctx.emitError() << "needs a weight with a static kernel, got " << w->type().str();
      return std::nullopt;
    }
    kernel.push_back(d.size());
  }
  if (ctx.hasAttr("kernel_shape") && ctx.attrInts("kernel_shape") != kernel) {
    ctx.emitError() << "kernel_shape " << ctx.attrInts("kernel_shape")
                    << " does not match the weight " << w->type().str();
    return std::nullopt;
  }
  return kernel;
}

Values convertConv(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  Value *w = ctx.input(1, "W");
  auto kernel = convKernel(ctx, w);
  if (!x || !kernel)
    return {};
  auto pads = windowPads(ctx, x, *kernel);
  if (!pads)
    return {};
  std::vector<Value *> ins{x, w};
  if (Value *b = ctx.optionalInput(2))
    ins.push_back(b);
  return {ctx.create(OpKind::Conv, ins,
                     {{"strides", ctx.attrInts("strides")},
                      {"pads", *pads},
                      {"dilations", ctx.attrInts("dilations")},
                      {"group", ctx.attrInt("group", 1)}})};
}

Values convertConvTranspose(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  Value *w = ctx.input(1, "W");
  auto kernel = convKernel(ctx, w);
  if (!x || !kernel)
    return {};
  size_t n = kernel->size();
  std::string autoPad = ctx.attrString("auto_pad", "NOTSET");
  Ints strides = ctx.attrInts("strides", Ints(n, 1));
  Ints dilations = ctx.attrInts("dilations", Ints(n, 1));
  Ints outputPadding = ctx.attrInts("output_padding", Ints(n, 0));
  Ints pads = ctx.attrInts("pads");
  Ints outputShape = ctx.attrInts("output_shape");
  if (autoPad == "VALID")
    pads = Ints(2 * n, 0);
  if (!outputShape.empty() || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    // Pads that give the requested output size (ONNX's total_padding rule).
    if (strides.size() != n || dilations.size() != n || outputPadding.size() != n ||
        x->type().rank() != static_cast<int64_t>(n) + 2) {
      ctx.emitError() << "strides, dilations or output_padding do not match kernel " << *kernel;
      return {};
    }
    if (outputShape.size() > n)
      outputShape.erase(outputShape.begin(), outputShape.end() - static_cast<ptrdiff_t>(n));
    pads.assign(2 * n, 0);
    for (size_t i = 0; i < n; ++i) {
      const Dim &in = x->type().shape[i + 2];
      if (!in.isStatic()) {
        ctx.emitError() << "output_shape or auto_pad needs static spatial dims, got "
                        << x->type().str();
        return {};
      }
      int64_t want = outputShape.empty() ? in.size() * strides[i] : outputShape[i];
      int64_t total = strides[i] * (in.size() - 1) + outputPadding[i] +
                      ((*kernel)[i] - 1) * dilations[i] + 1 - want;
      // ONNX's rule with floor division (as its reference computes it), so a
      // negative total (an output larger than the kernel reaches) puts the
      // extra zeros at the end for NOTSET and SAME_LOWER, at the start for
      // SAME_UPPER.
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      bool upper = autoPad == "SAME_UPPER";
      pads[i] = upper ? half : total - half;
      pads[i + n] = total - pads[i];
    }
  }
  // Negative pads grow the output with zeros: convolve without them, then
  // pad the result.
  Ints convPads = pads, extra;
  bool grow = false;
  for (size_t i = 0; i < pads.size(); ++i)
    if (pads[i] < 0) {
      convPads[i] = 0;
      grow = true;
    }
  if (grow) {
    size_t n2 = pads.size() / 2;
    extra.assign(2 * (n2 + 2), 0);
    for (size_t i = 0; i < n2; ++i) {
      extra[i + 2] = std::max<int64_t>(0, -pads[i]);
      extra[i + 2 + n2 + 2] = std::max<int64_t>(0, -pads[i + n2]);
    }
  }
  std::vector<Value *> ins{x, w};
  if (Value *b = ctx.optionalInput(2))
    ins.push_back(b);
  Value *y = ctx.create(OpKind::ConvTranspose, ins,
                        {{"strides", ctx.attrInts("strides")},
                         {"pads", convPads},
                         {"dilations", ctx.attrInts("dilations")},
                         {"group", ctx.attrInt("group", 1)},
                         {"output_padding", ctx.attrInts("output_padding")}});
  if (grow)
    y = ctx.create(OpKind::Pad, {y}, {{"pads", extra}});
  return {y};
}

/// A pool node's window: kernel_shape and the explicit pads it implies.
struct PoolWindow {
  Ints kernel, pads;
};

std::optional<PoolWindow> poolWindow(NodeContext &ctx, Value *x) {
  if (!ctx.hasAttr("kernel_shape")) {
    ctx.emitError() << "missing attribute 'kernel_shape'";
    return std::nullopt;
  }
  PoolWindow w{ctx.attrInts("kernel_shape"), {}};
  auto pads = x ? windowPads(ctx, x, w.kernel) : std::nullopt;
  if (!pads)
    return std::nullopt;
  w.pads = std::move(*pads);
  return w;
}

/// avg_pool of `in` over the node's window, strides and ceil_mode.
Value *averagePool(NodeContext &ctx, Value *in, const PoolWindow &w, bool countIncludePad) {
  return ctx.create(OpKind::AvgPool, {in},
                    {{"kernel", w.kernel},
                     {"strides", ctx.attrInts("strides")},
                     {"pads", w.pads},
                     {"ceil_mode", ctx.attrInt("ceil_mode", 0) != 0},
                     {"count_include_pad", countIncludePad},
                     {"dilations", ctx.attrInts("dilations")}});
}

std::string checkMaxPool(const onnx::NodeProto &node, int64_t opset) {
  std::string s = checkAutoPad(node, opset);
  if (s.empty() && attrIntOr(node, "storage_order", 0) != 0)
    s = "storage_order=1 is not supported";
  return s;
}

Values convertMaxPool(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  if (x && ctx.isOutputUsed(1)) {
    ctx.emitError() << "the Indices output is not supported";
    return {};
  }
  auto w = poolWindow(ctx, x);
  if (!w)
    return {};
  return {ctx.create(OpKind::MaxPool, {x},
                     {{"kernel", w->kernel},
                      {"strides", ctx.attrInts("strides")},
                      {"pads", w->pads},
                      {"dilations", ctx.attrInts("dilations")},
                      {"ceil_mode", ctx.attrInt("ceil_mode", 0) != 0}})};
}

Values convertAveragePool(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  auto w = poolWindow(ctx, x);
  if (!w)
    return {};
  return {averagePool(ctx, x, *w, ctx.attrInt("count_include_pad", 0) != 0)};
}

std::string checkLpPool(const onnx::NodeProto &node, int64_t opset) {
  // Opset 18 adds ceil_mode, whose windows past the padding the average
  // would not count.
  std::string s = checkAutoPad(node, opset);
  if (s.empty() && attrIntOr(node, "ceil_mode", 0) != 0)
    s = "ceil_mode=1 is not supported";
  return s;
}

/// LpPool = (sum over the window of |x|^p)^(1/p): avg_pool of |x|^p counting
/// the padding (zeros, which add nothing to the sum) times the window size.
Values convertLpPool(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  auto w = poolWindow(ctx, x);
  if (!w)
    return {};
  double p = static_cast<double>(ctx.attrInt("p", 2));
  if (p <= 0) {
    ctx.emitError() << "p " << p << " must be positive";
    return {};
  }
  int64_t window = 1;
  for (int64_t k : w->kernel)
    window *= k;
  Value *a = ctx.create(OpKind::Abs, {x});
  Value *powered = p == 1   ? a
                   : p == 2 ? ctx.create(OpKind::Mul, {a, a})
                            : ctx.create(OpKind::Pow, {a, ctx.scalarLike(x, p)});
  Value *avg = averagePool(ctx, powered, *w, true);
  Value *sum = ctx.create(OpKind::Mul, {avg, ctx.scalarLike(x, static_cast<double>(window))});
  if (p == 1)
    return {sum};
  if (p == 2)
    return {ctx.create(OpKind::Sqrt, {sum})};
  return {ctx.create(OpKind::Pow, {sum, ctx.scalarLike(x, 1.0 / p)})};
}

Ints spatialAxes(const Value *x) {
  Ints axes;
  for (int64_t i = 2; x && i < x->type().rank(); ++i)
    axes.push_back(i);
  return axes;
}

Values convertGlobalAveragePool(NodeContext &ctx) {
  return {unary(ctx, OpKind::GlobalAvgPool)};
}

Values convertGlobalMaxPool(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  return {ctx.create(OpKind::ReduceMax, {x}, {{"axes", spatialAxes(x)}, {"keepdims", true}})};
}

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

std::string checkBatchNorm(const onnx::NodeProto &node, int64_t opset) {
  if (opset >= 14 && attrIntOr(node, "training_mode", 0) != 0)
    return "training_mode=1 is not supported";
  return "";
}

Values convertBatchNorm(NodeContext &ctx) {
  for (size_t i = 1; i < ctx.numOutputs(); ++i)
    if (ctx.isOutputUsed(i)) {
      ctx.emitError() << "output " << i << " (training statistics) is not supported";
      return {};
    }
  return {ctx.create(OpKind::BatchNorm,
                     {ctx.input(0, "X"), ctx.input(1, "scale"), ctx.input(2, "B"),
                      ctx.input(3, "input_mean"), ctx.input(4, "input_var")},
                     {{"epsilon", ctx.attrFloat("epsilon", 1e-5)}})};
}

std::string checkGroupNorm(const onnx::NodeProto &node, int64_t) {
  if (attrIntOr(node, "num_groups", 0) <= 0)
    return "attribute 'num_groups' is missing or not positive";
  int64_t stash = attrIntOr(node, "stash_type", 1);
  if (!dtypeFromOnnx(static_cast<int32_t>(stash)))
    return "stash_type " + onnxTypeName(static_cast<int32_t>(stash)) + " is not supported";
  return "";
}

/// GroupNormalization: x [N, C, spatial...] viewed as [N, G, C/G * spatial]
/// is normalized over its last axis by layer_norm (one normalization
/// kernel, with a unit scale), then the affine: scale and bias are per
/// group at opset 18 ([G], applied in the grouped view) and per channel
/// from opset 21 ([C], applied in the input's shape).
/// x [N, C, spatial...] normalized in `groups` groups of channels: viewed as
/// [N, G, C/G * spatial], normalized over the last axis by layer_norm (a unit
/// scale: one row kernel) in `stash`, then scaled and shifted per group
/// (scale, bias [G], in the grouped view) or per channel ([C], in x's
/// shape). nullptr after an error.
Value *groupNormalize(NodeContext &ctx, Value *x, int64_t groups, Value *scale, Value *bias,
                      bool perChannel, double epsilon, DType stash) {
  int64_t rank = x->type().rank();
  if (rank < 3) {
    ctx.emitError() << "needs an input of rank >= 3, got " << x->type().str();
    return nullptr;
  }
  auto channels = ctx.staticDim(x, 1);
  if (!channels)
    return nullptr;
  if (groups <= 0 || *channels % groups != 0) {
    ctx.emitError() << groups << " groups do not divide the " << *channels << " channels of "
                    << x->type().str();
    return nullptr;
  }
  int64_t affine = perChannel ? *channels : groups;
  for (Value *p : {scale, bias})
    if (p->type().rank() != 1 || p->type().shape[0] != Dim(affine)) {
      ctx.emitError() << "needs scale and bias of shape [" << affine << "] (per "
                      << (perChannel ? "channel" : "group") << "), got " << p->type().str();
      return nullptr;
    }
  // The shape to return to (0 copies the batch dim, which may be symbolic).
  Ints back{0, *channels};
  int64_t per = *channels / groups;
  for (int64_t i = 2; i < rank; ++i) {
    auto d = ctx.staticDim(x, i);
    if (!d)
      return nullptr;
    back.push_back(*d);
    per *= *d;
  }
  DType dt = x->type().dtype;
  Value *xs = ctx.castTo(x, stash);
  Value *g = ctx.create(OpKind::Reshape, {xs}, {{"shape", Ints{0, groups, -1}}});
  Value *ones = ctx.create(OpKind::ConstantOfShape, {},
                           {{"shape", Ints{per}}, {"value", 1.0}, {"dtype", stash}});
  Value *n =
      ctx.create(OpKind::LayerNorm, {g, ones}, {{"axis", int64_t(-1)}, {"epsilon", epsilon}});
  n = ctx.castTo(n, dt);
  Ints trailing;
  for (int64_t i = 1; i < (perChannel ? rank - 1 : 2); ++i)
    trailing.push_back(i);
  Value *s = ctx.create(OpKind::Unsqueeze, {scale}, {{"axes", trailing}});
  Value *b = ctx.create(OpKind::Unsqueeze, {bias}, {{"axes", trailing}});
  if (!perChannel)
    n = ctx.create(OpKind::Add, {ctx.create(OpKind::Mul, {n, s}), b});
  Value *y = ctx.create(OpKind::Reshape, {n}, {{"shape", back}});
  if (perChannel)
    y = ctx.create(OpKind::Add, {ctx.create(OpKind::Mul, {y, s}), b});
  return y;
}

/// GroupNormalization: scale and bias per group at opset 18, per channel
/// from opset 21.
Values convertGroupNorm(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  Value *scale = ctx.input(1, "scale");
  Value *bias = ctx.input(2, "bias");
  if (!x || !scale || !bias)
    return {};
  auto stash = dtypeFromOnnx(static_cast<int32_t>(ctx.attrInt("stash_type", 1)));
  return {groupNormalize(ctx, x, ctx.attrInt("num_groups", 1), scale, bias, ctx.opset() >= 21,
                         ctx.attrFloat("epsilon", 1e-5), stash.value_or(x->type().dtype))};
}

/// InstanceNormalization: group normalization with one channel per group
/// (PyTorch's GroupNorm exports as it with a reshape before opset 18). With
/// a dynamic channel or spatial dim (no static grouped view), reductions
/// over the spatial axes instead: (x - mean) / sqrt(var + epsilon) * s + b.
Values convertInstanceNorm(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  Value *scale = ctx.input(1, "scale");
  Value *bias = ctx.input(2, "B");
  if (!x || !scale || !bias)
    return {};
  if (x->type().rank() < 3) {
    ctx.emitError() << "needs an input of rank >= 3, got " << x->type().str();
    return {};
  }
  double epsilon = ctx.attrFloat("epsilon", 1e-5);
  bool staticView = true;
  for (int64_t i = 1; i < x->type().rank(); ++i)
    staticView = staticView && x->type().shape[static_cast<size_t>(i)].isStatic();
  if (staticView)
    return {groupNormalize(ctx, x, x->type().shape[1].size(), scale, bias, false, epsilon,
                           x->type().dtype)};
  Ints axes = spatialAxes(x);
  Ints trailing; // [C] -> [C, 1, ..., 1]
  for (int64_t i = 1; i <= static_cast<int64_t>(axes.size()); ++i)
    trailing.push_back(i);
  Value *mean = ctx.create(OpKind::ReduceMean, {x}, {{"axes", axes}, {"keepdims", true}});
  Value *centered = ctx.create(OpKind::Sub, {x, mean});
  Value *var = ctx.create(OpKind::ReduceMean, {ctx.create(OpKind::Mul, {centered, centered})},
                          {{"axes", axes}, {"keepdims", true}});
  Value *denom =
      ctx.create(OpKind::Sqrt, {ctx.create(OpKind::Add, {var, ctx.scalarLike(x, epsilon)})});
  Value *normalized = ctx.create(OpKind::Div, {centered, denom});
  Value *s = ctx.create(OpKind::Unsqueeze, {scale}, {{"axes", trailing}});
  Value *b = ctx.create(OpKind::Unsqueeze, {bias}, {{"axes", trailing}});
  return {ctx.create(OpKind::Add, {ctx.create(OpKind::Mul, {normalized, s}), b})};
}

/// RMSNormalization (opset 23) = x * rsqrt(mean(x * x) + epsilon) * scale
/// over axes [axis, rank), in `stash_type` (f32 by default) as ONNX's
/// reference.
Values convertRMSNorm(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  Value *scale = ctx.input(1, "scale");
  if (!x || !scale)
    return {};
  int64_t rank = x->type().rank();
  int64_t axis = ctx.attrInt("axis", -1);
  if (axis < -rank || axis >= rank) {
    ctx.emitError() << "axis " << axis << " is out of range for " << x->type().str();
    return {};
  }
  if (axis < 0)
    axis += rank;
  Ints axes;
  for (int64_t i = axis; i < rank; ++i)
    axes.push_back(i);
  auto stash = dtypeFromOnnx(static_cast<int32_t>(ctx.attrInt("stash_type", 1)));
  DType dt = x->type().dtype;
  Value *xs = ctx.castTo(x, stash.value_or(DType::F32));
  Value *ms = ctx.create(OpKind::ReduceMean, {ctx.create(OpKind::Mul, {xs, xs})},
                         {{"axes", axes}, {"keepdims", true}});
  Value *inv = ctx.create(
      OpKind::Rsqrt,
      {ctx.create(OpKind::Add, {ms, ctx.scalarLike(ms, ctx.attrFloat("epsilon", 1e-5))})});
  Value *y = ctx.castTo(ctx.create(OpKind::Mul, {xs, inv}), dt);
  return {ctx.create(OpKind::Mul, {y, ctx.castTo(scale, dt)})};
}

std::string checkLayerNorm(const onnx::NodeProto &node, int64_t) {
  int64_t stash = attrIntOr(node, "stash_type", 1);
  if (!dtypeFromOnnx(static_cast<int32_t>(stash)))
    return "stash_type " + onnxTypeName(static_cast<int32_t>(stash)) + " is not supported";
  return "";
}

/// Y is Kiln's layer_norm. The optional Mean and InvStdDev outputs (shape of
/// X with the normalized axes kept as 1, dtype `stash_type`) are computed
/// beside it when used: mean = reduce_mean(x), inv = rsqrt(reduce_mean((x -
/// mean)^2) + epsilon) over axes [axis, rank), in the stash dtype.
Values convertLayerNorm(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  std::vector<Value *> ins{x, ctx.input(1, "Scale")};
  if (Value *b = ctx.optionalInput(2))
    ins.push_back(b);
  int64_t axis = ctx.attrInt("axis", -1);
  double epsilon = ctx.attrFloat("epsilon", 1e-5);
  Values outs{ctx.create(OpKind::LayerNorm, ins, {{"axis", axis}, {"epsilon", epsilon}})};
  if (!x || (!ctx.isOutputUsed(1) && !ctx.isOutputUsed(2)))
    return outs;
  int64_t rank = x->type().rank();
  if (axis < -rank || axis >= rank) {
    ctx.emitError() << "axis " << axis << " is out of range for " << x->type().str();
    return {};
  }
  if (axis < 0)
    axis += rank;
  Ints axes;
  for (int64_t i = axis; i < rank; ++i)
    axes.push_back(i);
  auto stash = dtypeFromOnnx(static_cast<int32_t>(ctx.attrInt("stash_type", 1)));
  Value *xs = ctx.castTo(x, stash.value_or(DType::F32));
  Value *mean = ctx.create(OpKind::ReduceMean, {xs}, {{"axes", axes}, {"keepdims", true}});
  Value *centered = ctx.create(OpKind::Sub, {xs, mean});
  Value *var = ctx.create(OpKind::ReduceMean, {ctx.create(OpKind::Mul, {centered, centered})},
                          {{"axes", axes}, {"keepdims", true}});
  Value *inv =
      ctx.create(OpKind::Rsqrt, {ctx.create(OpKind::Add, {var, ctx.scalarLike(var, epsilon)})});
  outs.push_back(mean);
  outs.push_back(inv);
  return outs;
}

/// Softmax and LogSoftmax; see the file comment for opsets before 13.
template <OpKind Kind> Values convertSoftmax(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  if (!x)
    return {};
  if (ctx.opset() >= 13)
    return {ctx.create(Kind, {x}, {{"axis", ctx.attrInt("axis", -1)}})};
  int64_t rank = x->type().rank();
  int64_t axis = ctx.attrInt("axis", 1);
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1)) {
    ctx.emitError() << "axis " << axis << " is out of range for " << x->type().str();
    return {};
  }
  if (axis < 0)
    axis += rank;
  if (axis == rank - 1 || rank == 0)
    return {ctx.create(Kind, {x}, {{"axis", int64_t(-1)}})};
  // Flatten to [outer, inner], normalize the inner dim, restore the shape.
  Ints back;
  int unknown = 0;
  for (const Dim &d : x->type().shape) {
    back.push_back(d.isStatic() ? d.size() : -1);
    unknown += !d.isStatic();
  }
  if (unknown > 1) {
    ctx.emitError() << "opset " << ctx.opset() << " semantics (flatten at axis " << axis
                    << ") need at most one dynamic dim, got " << x->type().str();
    return {};
  }
  Value *flat = ctx.create(OpKind::Flatten, {x}, {{"axis", axis}});
  Value *y = ctx.create(Kind, {flat}, {{"axis", int64_t(-1)}});
  return {ctx.create(OpKind::Reshape, {y}, {{"shape", back}})};
}

/// Hardmax (opset 13: one axis) = cast(argmax(x, axis, keepdims) == iota).
/// argmax picks the first of equal maxima, as ONNX's Hardmax does.
Values convertHardmax(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  if (!x)
    return {};
  int64_t rank = x->type().rank();
  int64_t axis = ctx.attrInt("axis", -1);
  if (axis < -rank || axis >= rank) {
    ctx.emitError() << "axis " << axis << " is out of range for " << x->type().str();
    return {};
  }
  if (axis < 0)
    axis += rank;
  const Dim &d = x->type().shape[static_cast<size_t>(axis)];
  if (!d.isStatic()) {
    ctx.emitError() << "needs a static dim at axis " << axis << ", got " << x->type().str();
    return {};
  }
  // [n, 1, ..., 1]: the index along `axis`, broadcast over the dims after it.
  Ints iotaShape(static_cast<size_t>(rank - axis), 1);
  iotaShape[0] = d.size();
  Tensor iota = Tensor::zeros(DType::I64, iotaShape);
  for (int64_t i = 0; i < d.size(); ++i)
    iota.setInt(i, i);
  Value *am = ctx.create(OpKind::ArgMax, {x}, {{"axis", axis}, {"keepdims", true}});
  Value *hit = ctx.create(OpKind::Equal, {am, ctx.constant(std::move(iota))});
  return {ctx.castTo(hit, x->type().dtype)};
}

Values convertLpNormalization(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  const int64_t p = ctx.attrInt("p", 2);
  if (p != 1 && p != 2) {
    ctx.emitError() << "p must be 1 or 2, got " << p;
    return {};
  }
  if (!x)
    return {};
  Ints axes{ctx.attrInt("axis", -1)};
  if (!ctx.normalizeAxes(axes, x->type().rank()))
    return {};
  Value *mag = p == 1 ? ctx.create(OpKind::Abs, {x}) : ctx.create(OpKind::Mul, {x, x});
  Value *norm = ctx.create(OpKind::ReduceSum, {mag}, {{"axes", axes}, {"keepdims", true}});
  if (p == 2)
    norm = ctx.create(OpKind::Sqrt, {norm});
  Value *zero = ctx.scalarLike(x, 0.0);
  return {ctx.create(OpKind::Where, {ctx.create(OpKind::Equal, {norm, zero}), zero,
                                     ctx.create(OpKind::Div, {x, norm})})};
}

Values convertMeanVarianceNormalization(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  if (!x)
    return {};
  Ints axes = ctx.attrInts("axes", Ints{0, 2, 3});
  if (!ctx.normalizeAxes(axes, x->type().rank()))
    return {};
  std::vector<NamedAttr> attrs = {{"axes", axes}, {"keepdims", true}};
  Value *mean = ctx.create(OpKind::ReduceMean, {x}, attrs);
  Value *meanOfSquares = ctx.create(OpKind::ReduceMean, {ctx.create(OpKind::Mul, {x, x})}, attrs);
  Value *variance = ctx.create(OpKind::Sub, {meanOfSquares, ctx.create(OpKind::Mul, {mean, mean})});
  Value *den =
      ctx.create(OpKind::Add, {ctx.create(OpKind::Sqrt, {variance}), ctx.scalarLike(x, 1e-9)});
  return {ctx.create(OpKind::Div, {ctx.create(OpKind::Sub, {x, mean}), den})};
}

const Converter kConverters[] = {
    {"AveragePool", 11, convertAveragePool, checkAutoPad},
    {"BatchNormalization", 9, convertBatchNorm, checkBatchNorm},
    {"Conv", 11, convertConv, checkAutoPad},
    {"ConvTranspose", 11, convertConvTranspose, checkAutoPad},
    {"Gemm", 11, convertGemm},
    {"GlobalAveragePool", 1, convertGlobalAveragePool},
    {"GlobalMaxPool", 1, convertGlobalMaxPool},
    {"GroupNormalization", 18, convertGroupNorm, checkGroupNorm},
    {"Hardmax", 13, convertHardmax},
    {"InstanceNormalization", 6, convertInstanceNorm},
    {"LayerNormalization", 17, convertLayerNorm, checkLayerNorm},
    {"LogSoftmax", 11, convertSoftmax<OpKind::LogSoftmax>},
    {"LpNormalization", 1, convertLpNormalization},
    {"LpPool", 11, convertLpPool, checkLpPool},
    {"MatMul", 9, convertMatMul},
    {"MaxPool", 11, convertMaxPool, checkMaxPool},
    {"MeanVarianceNormalization", 9, convertMeanVarianceNormalization},
    {"RMSNormalization", 23, convertRMSNorm, checkLayerNorm},
    {"Softmax", 11, convertSoftmax<OpKind::Softmax>},
};

} // namespace

std::span<const Converter> nnConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
