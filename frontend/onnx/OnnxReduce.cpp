//===- OnnxReduce.cpp - Converters of ONNX reductions -----------*- C++ -*-===//
//
// ReduceSum/Mean/Max/Min/Prod map one to one; the others decompose:
//   ReduceL1(x)        = reduce_sum(abs(x))
//   ReduceL2(x)        = sqrt(reduce_sum(x * x))
//   ReduceSumSquare(x) = reduce_sum(x * x)
//   ReduceLogSum(x)    = log(reduce_sum(x))
//   ReduceLogSumExp(x) = log(reduce_sum(exp(x - m))) + m, m = reduce_max(x)
//   ArgMin(x)          = argmax(neg(x))
// `axes` is an input for ReduceSum from opset 13 and for all the others
// from opset 18 (an attribute before). With `noop_with_empty_axes` and no
// axes the op is the identity; otherwise no axes means all axes.
// ReduceMax / ReduceMin take bool from opset 20 (any / all): reduced as
// u8 and cast back.
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"

namespace kiln::onnximport {
namespace {

using Values = std::vector<Value *>;

/// What a reduction reads from its node.
struct ReduceSpec {
  Value *x = nullptr;
  Ints axes;
  bool keepdims = true;
  bool identity = false; // noop_with_empty_axes with no axes
};

std::optional<ReduceSpec> readReduce(NodeContext &ctx, bool axesAsInput) {
  ReduceSpec s;
  s.x = ctx.input(0, "data");
  s.keepdims = ctx.attrInt("keepdims", 1) != 0;
  if (axesAsInput) {
    if (ctx.hasInput(1)) {
      auto axes = ctx.intsInput(1, "axes");
      if (!axes)
        return std::nullopt;
      s.axes = *axes;
    }
    s.identity = s.axes.empty() && ctx.attrInt("noop_with_empty_axes", 0) != 0;
  } else {
    s.axes = ctx.attrInts("axes");
  }
  if (!s.x)
    return std::nullopt;
  return s;
}

/// The reduction of `x` by `kind`; `x` itself when the node reduces
/// nothing (noop_with_empty_axes), so that a decomposition keeps its
/// elementwise part (ReduceL1 of nothing is abs(x)), as the ONNX reference
/// does.
Value *reduce(NodeContext &ctx, OpKind kind, Value *x, const ReduceSpec &s, bool keepdims) {
  if (s.identity)
    return x;
  return ctx.create(kind, {x}, {{"axes", s.axes}, {"keepdims", keepdims}});
}

/// ReduceSum reads its axes from an input from opset 13, the others from 18.
bool axesInInput(NodeContext &ctx) {
  return ctx.opset() >= 18 || (ctx.opType() == "ReduceSum" && ctx.opset() >= 13);
}

template <OpKind Kind> Values convertReduce(NodeContext &ctx) {
  auto s = readReduce(ctx, axesInInput(ctx));
  if (!s)
    return {};
  if ((Kind == OpKind::ReduceMax || Kind == OpKind::ReduceMin) &&
      s->x->type().dtype == DType::Bool) {
    Value *r = reduce(ctx, Kind, ctx.castTo(s->x, DType::U8), *s, s->keepdims);
    return {ctx.castTo(r, DType::Bool)};
  }
  return {reduce(ctx, Kind, s->x, *s, s->keepdims)};
}

Values convertReduceL1(NodeContext &ctx) {
  auto s = readReduce(ctx, axesInInput(ctx));
  if (!s)
    return {};
  return {reduce(ctx, OpKind::ReduceSum, ctx.create(OpKind::Abs, {s->x}), *s, s->keepdims)};
}

Values convertReduceSumSquare(NodeContext &ctx) {
  auto s = readReduce(ctx, axesInInput(ctx));
  if (!s)
    return {};
  return {reduce(ctx, OpKind::ReduceSum, ctx.create(OpKind::Mul, {s->x, s->x}), *s, s->keepdims)};
}

Values convertReduceL2(NodeContext &ctx) {
  Values sum = convertReduceSumSquare(ctx);
  if (sum.empty())
    return {};
  return {ctx.create(OpKind::Sqrt, {sum.front()})};
}

Values convertReduceLogSum(NodeContext &ctx) {
  auto s = readReduce(ctx, axesInInput(ctx));
  if (!s)
    return {};
  return {ctx.create(OpKind::Log, {reduce(ctx, OpKind::ReduceSum, s->x, *s, s->keepdims)})};
}

Values convertReduceLogSumExp(NodeContext &ctx) {
  auto s = readReduce(ctx, axesInInput(ctx));
  if (!s)
    return {};
  // Shifted by the maximum so that exp cannot overflow.
  Value *m = reduce(ctx, OpKind::ReduceMax, s->x, *s, true);
  Value *e = ctx.create(OpKind::Exp, {ctx.create(OpKind::Sub, {s->x, m})});
  Value *l = ctx.create(OpKind::Log, {reduce(ctx, OpKind::ReduceSum, e, *s, s->keepdims)});
  Value *mOut = s->keepdims ? m : reduce(ctx, OpKind::ReduceMax, s->x, *s, false);
  return {ctx.create(OpKind::Add, {l, mOut})};
}

std::vector<NamedAttr> argAttrs(NodeContext &ctx) {
  return {{"axis", ctx.attrInt("axis", 0)},
          {"keepdims", ctx.attrInt("keepdims", 1) != 0},
          {"select_last_index", ctx.attrInt("select_last_index", 0) != 0}};
}

Values convertArgMax(NodeContext &ctx) {
  return {unary(ctx, OpKind::ArgMax, argAttrs(ctx))};
}

Values convertArgMin(NodeContext &ctx) {
  Value *x = ctx.input(0, "data");
  if (x && !isFloat(x->type().dtype) && !isSignedInt(x->type().dtype)) {
    ctx.emitError() << "needs a float or signed integer input, got " << x->type().str();
    return {};
  }
  return {ctx.create(OpKind::ArgMax, {ctx.create(OpKind::Neg, {x})}, argAttrs(ctx))};
}

const Converter kConverters[] = {
    {"ArgMax", 11, convertArgMax},
    {"ArgMin", 11, convertArgMin},
    {"ReduceL1", 11, convertReduceL1},
    {"ReduceL2", 11, convertReduceL2},
    {"ReduceLogSum", 11, convertReduceLogSum},
    {"ReduceLogSumExp", 11, convertReduceLogSumExp},
    {"ReduceMax", 11, convertReduce<OpKind::ReduceMax>},
    {"ReduceMean", 11, convertReduce<OpKind::ReduceMean>},
    {"ReduceMin", 11, convertReduce<OpKind::ReduceMin>},
    {"ReduceProd", 11, convertReduce<OpKind::ReduceProd>},
    {"ReduceSum", 11, convertReduce<OpKind::ReduceSum>},
    {"ReduceSumSquare", 11, convertReduceSumSquare},
};

} // namespace

std::span<const Converter> reduceConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
