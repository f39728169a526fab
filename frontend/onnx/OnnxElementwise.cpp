//===- OnnxElementwise.cpp - Converters of elementwise ONNX ops -*- C++ -*-===//
//
// Unary and binary math, comparisons, logic, activations, Clip, Cast,
// Where, the variadic Max/Min/Sum/Mean, and the aliases Identity and
// Dropout (inference). Ops without a Kiln op of their own decompose into
// primitive ones:
//   LessOrEqual(a, b)    = or(less(a, b), equal(a, b))      (NaN-correct)
//   GreaterOrEqual(a, b) = or(greater(a, b), equal(a, b))
//   Xor(a, b)            = and(or(a, b), not(and(a, b)))
//   PRelu(x, s)          = where(less(x, 0), mul(x, s), x)
//   Selu(x)              = gamma * elu(x, alpha)
//   Celu(x)              = alpha * elu(x / alpha)
//   Softsign(x)          = x / (1 + abs(x))
//   ThresholdedRelu(x)   = where(greater(x, alpha), x, 0)
//   IsNaN(x)             = not(equal(x, x))
//   Mean(x...)           = (x0 + x1 + ...) / n
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"

namespace kiln::onnximport {
namespace {

using Values = std::vector<Value *>;

template <OpKind Kind> Values convertUnary(NodeContext &ctx) {
  return {unary(ctx, Kind)};
}

template <OpKind Kind> Values convertBinary(NodeContext &ctx) {
  return {ctx.create(Kind, {ctx.input(0, "A"), ctx.input(1, "B")})};
}

Values convertIdentity(NodeContext &ctx) {
  return {ctx.input(0, "input")};
}

Values convertDropout(NodeContext &ctx) {
  Value *x = ctx.input(0, "data");
  if (ctx.opset() >= 12 && ctx.hasInput(2)) {
    auto training = ctx.scalarInput(2, "training_mode");
    if (training && *training != 0.0)
      ctx.emitError() << "training_mode is true; Kiln imports models for inference only";
  }
  Values outs{x};
  if (ctx.isOutputUsed(1)) {
    // In inference the mask keeps everything.
    if (!x || !x->type().isStatic()) {
      ctx.emitError() << "the mask output needs a static input shape";
      return outs;
    }
    outs.push_back(ctx.create(
        OpKind::ConstantOfShape, {},
        {{"shape", staticSizes(x->type().shape)}, {"value", 1.0}, {"dtype", DType::Bool}}));
  }
  return outs;
}

Values convertPow(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  Value *y = ctx.input(1, "Y");
  // ONNX lets the exponent have another dtype; the result has the base's.
  if (x && y)
    y = ctx.castTo(y, x->type().dtype);
  return {ctx.create(OpKind::Pow, {x, y})};
}

template <OpKind Strict> Values convertOrEqual(NodeContext &ctx) {
  Value *a = ctx.input(0, "A"), *b = ctx.input(1, "B");
  return {ctx.create(OpKind::Or, {ctx.create(Strict, {a, b}), ctx.create(OpKind::Equal, {a, b})})};
}

Values convertXor(NodeContext &ctx) {
  Value *a = ctx.input(0, "A"), *b = ctx.input(1, "B");
  Value *both = ctx.create(OpKind::And, {a, b});
  return {
      ctx.create(OpKind::And, {ctx.create(OpKind::Or, {a, b}), ctx.create(OpKind::Not, {both})})};
}

Values convertWhere(NodeContext &ctx) {
  return {
      ctx.create(OpKind::Where, {ctx.input(0, "condition"), ctx.input(1, "X"), ctx.input(2, "Y")})};
}

/// Max, Min, Sum: a left-to-right chain of the binary op.
template <OpKind Kind> Values convertVariadic(NodeContext &ctx) {
  if (ctx.numInputs() == 0) {
    ctx.emitError() << "needs at least one input";
    return {};
  }
  Value *acc = ctx.input(0, "data_0");
  for (size_t i = 1; i < ctx.numInputs(); ++i)
    acc = ctx.create(Kind, {acc, ctx.input(i, "data")});
  return {acc};
}

Values convertMean(NodeContext &ctx) {
  Values sums = convertVariadic<OpKind::Add>(ctx);
  if (sums.empty() || ctx.numInputs() == 1)
    return sums;
  Value *sum = sums.front();
  return {
      ctx.create(OpKind::Div, {sum, ctx.scalarLike(sum, static_cast<double>(ctx.numInputs()))})};
}

Values convertLeakyRelu(NodeContext &ctx) {
  return {unary(ctx, OpKind::LeakyRelu, {{"alpha", ctx.attrFloat("alpha", 0.01)}})};
}

Values convertElu(NodeContext &ctx) {
  return {unary(ctx, OpKind::Elu, {{"alpha", ctx.attrFloat("alpha", 1.0)}})};
}

Values convertSelu(NodeContext &ctx) {
  double alpha = ctx.attrFloat("alpha", 1.67326319217681884765625);
  double gamma = ctx.attrFloat("gamma", 1.05070102214813232421875);
  Value *e = unary(ctx, OpKind::Elu, {{"alpha", alpha}});
  return {ctx.create(OpKind::Mul, {e, ctx.scalarLike(e, gamma)})};
}

Values convertCelu(NodeContext &ctx) {
  double alpha = ctx.attrFloat("alpha", 1.0);
  if (alpha == 0.0) {
    ctx.emitError() << "alpha must not be 0";
    return {};
  }
  Value *x = ctx.input(0, "X");
  Value *scaled = ctx.create(OpKind::Div, {x, ctx.scalarLike(x, alpha)});
  Value *e = ctx.create(OpKind::Elu, {scaled}, {{"alpha", 1.0}});
  return {ctx.create(OpKind::Mul, {e, ctx.scalarLike(x, alpha)})};
}

Values convertHardSigmoid(NodeContext &ctx) {
  return {unary(ctx, OpKind::HardSigmoid,
                {{"alpha", ctx.attrFloat("alpha", 0.2)}, {"beta", ctx.attrFloat("beta", 0.5)}})};
}

Values convertSoftsign(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  Value *den = ctx.create(OpKind::Add, {ctx.scalarLike(x, 1.0), ctx.create(OpKind::Abs, {x})});
  return {ctx.create(OpKind::Div, {x, den})};
}

Values convertThresholdedRelu(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  double alpha = ctx.attrFloat("alpha", 1.0);
  Value *keep = ctx.create(OpKind::Greater, {x, ctx.scalarLike(x, alpha)});
  return {ctx.create(OpKind::Where, {keep, x, ctx.scalarLike(x, 0.0)})};
}

Values convertPRelu(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  Value *slope = ctx.input(1, "slope");
  Value *negative = ctx.create(OpKind::Less, {x, ctx.scalarLike(x, 0.0)});
  return {ctx.create(OpKind::Where, {negative, ctx.create(OpKind::Mul, {x, slope}), x})};
}

Values convertIsNaN(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  return {ctx.create(OpKind::Not, {ctx.create(OpKind::Equal, {x, x})})};
}

Values convertClip(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  std::vector<NamedAttr> attrs;
  // Constant bounds become attributes; computed ones become max / min.
  const char *names[] = {"min", "max"};
  OpKind kinds[] = {OpKind::Max, OpKind::Min};
  Value *computed[2] = {nullptr, nullptr};
  for (size_t i = 1; i <= 2; ++i) {
    Value *bound = ctx.optionalInput(i);
    if (!bound)
      continue;
    if (const Tensor *t = constantOf(bound)) {
      if (t->numel() != 1) {
        ctx.emitError() << "input " << i << " (" << names[i - 1] << ") must hold one value, got "
                        << t->str();
        return {};
      }
      attrs.emplace_back(names[i - 1], t->getDouble(0));
    } else {
      computed[i - 1] = bound;
    }
  }
  Value *y = ctx.create(OpKind::Clip, {x}, std::move(attrs));
  for (size_t i = 0; i < 2; ++i)
    if (computed[i])
      y = ctx.create(kinds[i], {y, computed[i]});
  return {y};
}

std::string checkCast(const onnx::NodeProto &node, int64_t) {
  int64_t to = attrIntOr(node, "to", -1);
  if (!dtypeFromOnnx(static_cast<int32_t>(to)))
    return "casts to " + onnxTypeName(static_cast<int32_t>(to)) + ", which Kiln does not support";
  return "";
}

Values convertCast(NodeContext &ctx) {
  int64_t to = ctx.attrInt("to", -1);
  std::optional<DType> dtype = dtypeFromOnnx(static_cast<int32_t>(to));
  if (!dtype) {
    ctx.emitError() << "attribute 'to' names unsupported type "
                    << onnxTypeName(static_cast<int32_t>(to));
    return {};
  }
  return {ctx.castTo(ctx.input(0, "input"), *dtype)};
}

Values convertCastLike(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  Value *like = ctx.input(1, "target_type");
  if (!like)
    return {};
  return {ctx.castTo(x, like->type().dtype)};
}

const Converter kConverters[] = {
    {"Abs", 11, 17, convertUnary<OpKind::Abs>},
    {"Add", 11, 17, convertBinary<OpKind::Add>},
    {"And", 11, 17, convertBinary<OpKind::And>},
    {"Cast", 11, 17, convertCast, checkCast},
    {"CastLike", 15, 17, convertCastLike},
    {"Ceil", 11, 17, convertUnary<OpKind::Ceil>},
    {"Celu", 12, 17, convertCelu},
    {"Clip", 11, 17, convertClip},
    {"Cos", 11, 17, convertUnary<OpKind::Cos>},
    {"Div", 11, 17, convertBinary<OpKind::Div>},
    {"Dropout", 11, 17, convertDropout},
    {"Elu", 11, 17, convertElu},
    {"Equal", 11, 17, convertBinary<OpKind::Equal>},
    {"Erf", 11, 17, convertUnary<OpKind::Erf>},
    {"Exp", 11, 17, convertUnary<OpKind::Exp>},
    {"Floor", 11, 17, convertUnary<OpKind::Floor>},
    {"Greater", 11, 17, convertBinary<OpKind::Greater>},
    {"GreaterOrEqual", 12, 17, convertOrEqual<OpKind::Greater>},
    {"HardSigmoid", 11, 17, convertHardSigmoid},
    {"HardSwish", 14, 17, convertUnary<OpKind::HardSwish>},
    {"Identity", 11, 17, convertIdentity},
    {"IsNaN", 11, 17, convertIsNaN},
    {"LeakyRelu", 11, 17, convertLeakyRelu},
    {"Less", 11, 17, convertBinary<OpKind::Less>},
    {"LessOrEqual", 12, 17, convertOrEqual<OpKind::Less>},
    {"Log", 11, 17, convertUnary<OpKind::Log>},
    {"Max", 11, 17, convertVariadic<OpKind::Max>},
    {"Mean", 11, 17, convertMean},
    {"Min", 11, 17, convertVariadic<OpKind::Min>},
    {"Mul", 11, 17, convertBinary<OpKind::Mul>},
    {"Neg", 11, 17, convertUnary<OpKind::Neg>},
    {"Not", 11, 17, convertUnary<OpKind::Not>},
    {"Or", 11, 17, convertBinary<OpKind::Or>},
    {"Pow", 11, 17, convertPow},
    {"PRelu", 11, 17, convertPRelu},
    {"Reciprocal", 11, 17, convertUnary<OpKind::Reciprocal>},
    {"Relu", 11, 17, convertUnary<OpKind::Relu>},
    {"Round", 11, 17, convertUnary<OpKind::Round>},
    {"Selu", 11, 17, convertSelu},
    {"Sigmoid", 11, 17, convertUnary<OpKind::Sigmoid>},
    {"Sign", 11, 17, convertUnary<OpKind::Sign>},
    {"Sin", 11, 17, convertUnary<OpKind::Sin>},
    {"Softplus", 11, 17, convertUnary<OpKind::Softplus>},
    {"Softsign", 11, 17, convertSoftsign},
    {"Sqrt", 11, 17, convertUnary<OpKind::Sqrt>},
    {"Sub", 11, 17, convertBinary<OpKind::Sub>},
    {"Sum", 11, 17, convertVariadic<OpKind::Add>},
    {"Tanh", 11, 17, convertUnary<OpKind::Tanh>},
    {"ThresholdedRelu", 11, 17, convertThresholdedRelu},
    {"Where", 11, 17, convertWhere},
    {"Xor", 11, 17, convertXor},
};

} // namespace

std::span<const Converter> elementwiseConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
