//===- OnnxQuantize.cpp - Converters of the ONNX quantization ops -*- C++ -*-===//
//
// The linear quantization ops, decomposed into Kiln ops as ONNX's reference
// computes them (onnx/reference/ops). A scale or zero point is a scalar
// (per tensor), a vector along `axis` (per axis) or, with `block_size`, a
// tensor of x's rank whose `axis` dim has one entry per block:
//
//   DequantizeLinear(x, s, zp) = cast((f32(x) - f32(zp)) * f32(s), s's dtype)
//   QuantizeLinear(x, s, zp)   = cast(clip(f32(round(x / s)) + zp, lo, hi), T)
//                                T: zp's dtype, else output_dtype, else u8;
//                                [lo, hi] its range; round: half to even
//   DynamicQuantizeLinear(x)   = QuantizeLinear(x, s, zp) with
//                                s  = (max(0, max x) - min(0, min x)) / 255
//                                     (1 / 255 when that range is 0),
//                                zp = u8(clip(round(-min(0, min x) / s), 0, 255))
//   MatMulInteger(a, b, za, zb) = matmul(i32(a) - i32(za), i32(b) - i32(zb))
//   QLinearMatMul(a, sa, za, b, sb, zb, sy, zy)
//                              = cast(clip(round(f64(C) * f64(sa * sb / sy)
//                                + f64(zy)), lo, hi), zy's dtype),
//                                C = MatMulInteger(a, b, za, zb), exact in i32
//
// T may also be an 8-bit float (no rounding to integers, no zero point:
// cast(x / s, T) with `saturate` as Cast's) or f4e2m1fn (cast(x / s + zp,
// T), always saturating). A blocked scale is spread over its block with a
// gather of constant indices (i / block_size along the axis), which needs
// that dim static.
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"
#include "ir/DTypeCodec.h"

#include <cmath>

namespace kiln::onnximport {
namespace {

using Values = std::vector<Value *>;

/// Scale or zero point `p` shaped to broadcast against `x`: a scalar or
/// one-element vector as it is, a vector along `axis`, or (block_size > 0)
/// a per-block tensor spread over the blocks. nullptr (with an error) when
/// its shape fits none of these.
Value *alongAxis(NodeContext &ctx, Value *p, Value *x, const char *what) {
  if (!p || !x)
    return nullptr;
  const int64_t rank = x->type().rank();
  int64_t axis = ctx.attrInt("axis", 1);
  const int64_t block = ctx.attrInt("block_size", 0);
  const TensorType &pt = p->type();
  if (pt.rank() == 0)
    return p;
  if (block == 0 && pt.isStatic() && numElements(staticSizes(pt.shape)) == 1)
    return ctx.create(OpKind::Reshape, {p}, {{"shape", Ints{}}});
  if (axis < -rank || axis >= rank) {
    ctx.emitError() << "axis " << axis << " is out of range for " << x->type().str();
    return nullptr;
  }
  if (axis < 0)
    axis += rank;
  if (block == 0) {
    if (pt.rank() != 1 || pt.shape[0] != x->type().shape[static_cast<size_t>(axis)]) {
      ctx.emitError() << what << " must be a scalar or a vector along axis " << axis << " of "
                      << x->type().str() << ", got " << pt.str();
      return nullptr;
    }
    Ints shape(static_cast<size_t>(rank), 1);
    shape[static_cast<size_t>(axis)] = -1;
    return ctx.create(OpKind::Reshape, {p}, {{"shape", shape}});
  }
  if (block < 0 || pt.rank() != rank) {
    ctx.emitError() << "with block_size " << block << ", " << what << " must have the rank of "
                    << x->type().str() << ", got " << pt.str();
    return nullptr;
  }
  auto n = ctx.staticDim(x, axis);
  if (!n)
    return nullptr;
  if (pt.shape[static_cast<size_t>(axis)] != Dim((*n + block - 1) / block)) {
    ctx.emitError() << what << " " << pt.str() << " needs one entry per block of " << block
                    << " along axis " << axis << " of " << x->type().str();
    return nullptr;
  }
  Ints index(static_cast<size_t>(*n));
  for (int64_t i = 0; i < *n; ++i)
    index[static_cast<size_t>(i)] = i / block;
  Value *indices = ctx.constant(Tensor::fromInts(DType::I64, {*n}, index));
  return ctx.create(OpKind::Gather, {p, indices}, {{"axis", axis}});
}

/// `v` (integer-valued floats) clipped to the range of `to` and cast to it.
Value *saturateTo(NodeContext &ctx, Value *v, DType to) {
  Value *clipped = ctx.create(
      OpKind::Clip, {v},
      {{"min", static_cast<double>(intLowest(to))}, {"max", static_cast<double>(intHighest(to))}});
  return ctx.castTo(clipped, to);
}

/// The quantized x: clip(f32(round(x / scale)) + zp, lo, hi) as `to`. The
/// division is in x's float type when the scale has it, else in f32.
Value *quantize(NodeContext &ctx, Value *x, Value *scale, Value *zp, DType to) {
  if (!x || !scale)
    return nullptr;
  const DType t = x->type().dtype;
  const DType math = isFloat(t) && scale->type().dtype == t ? t : DType::F32;
  Value *q = ctx.create(OpKind::Round,
                        {ctx.create(OpKind::Div, {ctx.castTo(x, math), ctx.castTo(scale, math)})});
  q = ctx.castTo(q, DType::F32);
  if (zp)
    q = ctx.create(OpKind::Add, {q, ctx.castTo(zp, DType::F32)});
  return saturateTo(ctx, q, to);
}

/// True for the types QuantizeLinear writes: integers and the mini floats.
bool isQuantizedType(DType t) {
  return isInteger(t) || miniFloatFormat(t);
}

/// The dtype of ONNX type number `onnxType` for attribute `attr`; nullopt
/// (with an error) when Kiln lacks it or it is not a quantized type.
std::optional<DType> quantizedType(NodeContext &ctx, int64_t onnxType, const char *attr) {
  auto t = dtypeFromOnnx(static_cast<int32_t>(onnxType));
  if (!t || !isQuantizedType(*t)) {
    ctx.emitError() << attr << " " << onnxTypeName(static_cast<int32_t>(onnxType))
                    << " is not a quantized type Kiln has";
    return std::nullopt;
  }
  return t;
}

/// QuantizeLinear to a mini float: x / scale (in x's float type when the
/// scale has it, else f32), plus zp for f4e2m1fn, cast with `saturate`.
Value *quantizeFloat(NodeContext &ctx, Value *x, Value *scale, Value *zp, DType to) {
  if (!x || !scale)
    return nullptr;
  const DType t = x->type().dtype;
  const DType math = isFloat(t) && scale->type().dtype == t ? t : DType::F32;
  Value *q = ctx.create(OpKind::Div, {ctx.castTo(x, math), ctx.castTo(scale, math)});
  if (zp && to == DType::F4E2M1FN)
    q = ctx.create(OpKind::Add, {ctx.castTo(q, DType::F32), ctx.castTo(zp, DType::F32)});
  return castSaturating(ctx, q, to, ctx.attrInt("saturate", 1) != 0);
}

Values convertDequantizeLinear(NodeContext &ctx) {
  Value *x = ctx.input(0, "x");
  Value *scale = ctx.input(1, "x_scale");
  Value *zp = ctx.optionalInput(2);
  if (!x || !scale)
    return {};
  // Opset 23's output_dtype, when given, must be the scale's type.
  const DType out = scale->type().dtype;
  if (int64_t t = ctx.attrInt("output_dtype", 0);
      t != 0 && dtypeFromOnnx(static_cast<int32_t>(t)) != out) {
    ctx.emitError() << "output_dtype " << onnxTypeName(static_cast<int32_t>(t))
                    << " differs from the scale's type " << dtypeName(out);
    return {};
  }
  Value *v = ctx.castTo(x, DType::F32);
  if (zp)
    v = ctx.create(OpKind::Sub, {v, ctx.castTo(alongAxis(ctx, zp, x, "x_zero_point"), DType::F32)});
  v = ctx.create(OpKind::Mul, {v, ctx.castTo(alongAxis(ctx, scale, x, "x_scale"), DType::F32)});
  return {ctx.castTo(v, out)};
}

Values convertQuantizeLinear(NodeContext &ctx) {
  Value *x = ctx.input(0, "x");
  Value *scale = ctx.input(1, "y_scale");
  Value *zp = ctx.optionalInput(2);
  if (!x || !scale)
    return {};
  std::optional<DType> to = DType::U8;
  const int64_t outputDtype = ctx.attrInt("output_dtype", 0);
  if (outputDtype != 0)
    to = quantizedType(ctx, outputDtype, "output_dtype");
  if (!to)
    return {};
  if (zp && outputDtype != 0 && zp->type().dtype != *to) {
    ctx.emitError() << "output_dtype " << dtypeName(*to) << " differs from y_zero_point's type "
                    << dtypeName(zp->type().dtype);
    return {};
  }
  if (zp)
    to = zp->type().dtype;
  if (ctx.hasAttr("precision")) {
    ctx.emitError() << "the precision attribute (opset 23) is not supported";
    return {};
  }
  if (!isQuantizedType(*to)) {
    ctx.emitError() << "quantizes to " << dtypeName(*to) << ", which is not a quantized type";
    return {};
  }
  if (isFloat(*to))
    return {quantizeFloat(ctx, x, alongAxis(ctx, scale, x, "y_scale"),
                          zp ? alongAxis(ctx, zp, x, "y_zero_point") : nullptr, *to)};
  return {quantize(ctx, x, alongAxis(ctx, scale, x, "y_scale"),
                   zp ? alongAxis(ctx, zp, x, "y_zero_point") : nullptr, *to)};
}

Values convertDynamicQuantizeLinear(NodeContext &ctx) {
  Value *x = ctx.input(0, "x");
  if (!x)
    return {};
  if (x->type().dtype != DType::F32) {
    ctx.emitError() << "needs an f32 input, got " << x->type().str();
    return {};
  }
  const std::vector<NamedAttr> whole = {{"keepdims", false}}; // every axis
  Value *zero = ctx.scalarLike(x, 0.0);
  Value *lo = ctx.create(OpKind::Min, {ctx.create(OpKind::ReduceMin, {x}, whole), zero});
  Value *hi = ctx.create(OpKind::Max, {ctx.create(OpKind::ReduceMax, {x}, whole), zero});
  Value *range = ctx.create(OpKind::Sub, {hi, lo});
  range = ctx.create(OpKind::Where,
                     {ctx.create(OpKind::Equal, {range, zero}), ctx.scalarLike(x, 1.0), range});
  Value *scale = ctx.create(OpKind::Div, {range, ctx.scalarLike(x, 255.0)});
  Value *initialZp = ctx.create(OpKind::Div, {ctx.create(OpKind::Neg, {lo}), scale});
  Value *zp = saturateTo(ctx, ctx.create(OpKind::Round, {initialZp}), DType::U8);
  return {quantize(ctx, x, scale, zp, DType::U8), scale, zp};
}

/// `p`, a scale or zero point of operand A of an integer matmul: a vector is
/// per row of a matrix A ([M, 1]); of a vector A it is A's one row.
Value *perRowOfA(NodeContext &ctx, Value *p, const Value *a) {
  if (p && a && p->type().rank() == 1 && a->type().rank() >= 2)
    return ctx.create(OpKind::Unsqueeze, {p}, {{"axes", Ints{1}}});
  return p;
}

/// (i32(m) - i32(zp)) for operand `m` of an integer matmul (a vector zero
/// point of B is per column); an error for a float operand.
Value *centered(NodeContext &ctx, Value *m, Value *zp, bool isA) {
  if (!m)
    return nullptr;
  if (!isInteger(m->type().dtype)) {
    ctx.emitError() << "needs integer operands, got " << m->type().str();
    return nullptr;
  }
  Value *v = ctx.castTo(m, DType::I32);
  if (!zp)
    return v;
  zp = ctx.castTo(zp, DType::I32);
  return ctx.create(OpKind::Sub, {v, isA ? perRowOfA(ctx, zp, m) : zp});
}

Values convertMatMulInteger(NodeContext &ctx) {
  return {
      ctx.create(OpKind::MatMul, {centered(ctx, ctx.input(0, "A"), ctx.optionalInput(2), true),
                                  centered(ctx, ctx.input(1, "B"), ctx.optionalInput(3), false)})};
}

Values convertQLinearMatMul(NodeContext &ctx) {
  Value *c = ctx.create(OpKind::MatMul,
                        {centered(ctx, ctx.input(0, "a"), ctx.input(2, "a_zero_point"), true),
                         centered(ctx, ctx.input(3, "b"), ctx.input(5, "b_zero_point"), false)});
  Value *as = perRowOfA(ctx, ctx.input(1, "a_scale"), ctx.input(0, "a"));
  Value *factor = ctx.create(OpKind::Div, {ctx.create(OpKind::Mul, {as, ctx.input(4, "b_scale")}),
                                           ctx.input(6, "y_scale")});
  Value *zy = ctx.input(7, "y_zero_point");
  Value *d = ctx.create(OpKind::Mul, {ctx.castTo(c, DType::F64), ctx.castTo(factor, DType::F64)});
  d = ctx.create(OpKind::Round, {ctx.create(OpKind::Add, {d, ctx.castTo(zy, DType::F64)})});
  if (!d || !zy)
    return {};
  return {saturateTo(ctx, d, zy->type().dtype)};
}

const Converter kConverters[] = {
    {"DequantizeLinear", 10, convertDequantizeLinear},
    {"DynamicQuantizeLinear", 11, convertDynamicQuantizeLinear},
    {"MatMulInteger", 10, convertMatMulInteger},
    {"QLinearMatMul", 10, convertQLinearMatMul},
    {"QuantizeLinear", 10, convertQuantizeLinear},
};

} // namespace

std::span<const Converter> quantizeConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
