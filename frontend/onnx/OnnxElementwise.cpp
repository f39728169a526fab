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
//   Dropout(x)           = x (inference, or training with ratio 0)
//   Mod(a, b), fmod=1    = a - trunc(a / b) * b  (C's fmod; integer div
//                          truncates, trunc(q) = where(q < 0, ceil q, floor q))
//   Mod(a, b), fmod=0    = a - floor(a / b) * b  for floats; for integers the
//                          truncated remainder r, plus b where r and b have
//                          opposite signs (Python's %)
//   IsInf(x)             = or(x == inf, x == -inf)  (per detect_* attribute)
//   Shrink(x)            = where(x < -l, x + bias, where(x > l, x - bias, 0))
//   Tan(x)               = sin(x) / cos(x)
//   Sinh(x), Cosh(x)     = (exp(x) -+ exp(-x)) / 2
//   Asinh(x)             = sign(x) * log(|x| + sqrt(x^2 + 1))
//   Acosh(x)             = log(x + sqrt(x^2 - 1))
//   Atanh(x)             = log((1 + x) / (1 - x)) / 2
// These decompositions round each step to the element type, so they can be
// a few ulps off a correctly rounded result (fmod of floats: a - t*b is
// exact only when t*b is; fine for the moderate quotients models compute).
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"
#include "ir/DTypeCodec.h"

#include <cmath>

namespace kiln::onnximport {
namespace {

using Values = std::vector<Value *>;

template <OpKind Kind> Values convertUnary(NodeContext &ctx) {
  return {unary(ctx, Kind)};
}

template <OpKind Kind> Values convertBinary(NodeContext &ctx) {
  return {ctx.create(Kind, {ctx.input(0, "A"), ctx.input(1, "B")})};
}

/// Entry `i` of shape values of length `n` or 1 (a broadcast).
const SymInt &broadcastEntry(const SymInts &e, size_t i) {
  return e[e.size() == 1 ? 0 : i];
}

/// The length of the entry-wise result of shape values, or nullopt when
/// they do not broadcast.
std::optional<size_t> broadcastLength(std::initializer_list<const SymInts *> values) {
  size_t n = 1;
  for (const SymInts *e : values)
    n = std::max(n, e->size());
  for (const SymInts *e : values)
    if (e->size() != n && e->size() != 1)
      return std::nullopt;
  return n;
}

/// One entry of Equal on shape values: known when both sides are, when
/// both are one expression (true), or when an expression of sizes (>= 0)
/// meets a negative number (false): torch 1.13's `expand(b, -1, -1)`
/// compares [b, -1, -1] with -1 entry by entry.
SymInt equalEntry(const SymInt &a, const SymInt &b) {
  auto sizeVsNegative = [](const SymInt &size, const SymInt &number) {
    return size.expr && size.expr->isProvablyNonNegative() && number.isKnown() && *number.value < 0;
  };
  auto x = a.asExpr(), y = b.asExpr();
  if (a.isKnown() && b.isKnown())
    return SymInt::of(*a.value == *b.value);
  if (x && y && *x == *y)
    return SymInt::of(1);
  if (sizeVsNegative(a, b) || sizeVsNegative(b, a))
    return SymInt::of(0);
  return SymInt::unknown();
}

/// One entry of `a <op> b` for shape values; unknown when it has no
/// expression (ONNX's integer Div truncates: an expression divides only
/// when it is provably >= 0 and the divisor a positive constant).
SymInt shapeEntry(OpKind kind, const SymInt &a, const SymInt &b) {
  if (kind == OpKind::Equal)
    return equalEntry(a, b);
  auto x = a.asExpr(), y = b.asExpr();
  if (!x || !y)
    return SymInt::unknown();
  std::optional<DimExpr> r;
  switch (kind) {
  case OpKind::Add:
    r = add(*x, *y);
    break;
  case OpKind::Sub:
    r = DimExpr::sub(*x, *y);
    break;
  case OpKind::Mul:
    r = mul(*x, *y);
    break;
  case OpKind::Div:
    if (x->isConstant() && y->isConstant() && y->constant() != 0 &&
        !(x->constant() == INT64_MIN && y->constant() == -1))
      r = DimExpr(x->constant() / y->constant());
    else if (y->isConstant() && y->constant() > 0 && x->isProvablyNonNegative())
      r = DimExpr::floorDiv(*x, y->constant());
    break;
  default:
    break;
  }
  return r ? SymInt::ofExpr(*r) : SymInt::unknown();
}

/// Add/Sub/Mul/Div/Equal; on shape values (Note [Shape values]) the
/// result's entries are computed too (shapeEntry), entry by entry with a
/// length-1 side broadcast.
template <OpKind Kind> Values convertShapeBinary(NodeContext &ctx) {
  Value *a = ctx.input(0, "A"), *b = ctx.input(1, "B");
  Value *out = ctx.create(Kind, {a, b});
  DType t = out ? out->type().dtype : DType::F32;
  if (!out || constantOf(out) || isFloat(t) || out->type().rank() > 1)
    return {out};
  auto ea = ctx.shapeValueOf(a), eb = ctx.shapeValueOf(b);
  if (!ea || !eb)
    return {out};
  auto n = broadcastLength({&*ea, &*eb});
  if (!n)
    return {out};
  SymInts entries;
  for (size_t i = 0; i < *n; ++i)
    entries.push_back(shapeEntry(Kind, broadcastEntry(*ea, i), broadcastEntry(*eb, i)));
  ctx.setShapeValue(out, std::move(entries));
  return {out};
}

Values convertIdentity(NodeContext &ctx) {
  // A sequence passes through as the same value (Note [Sequences]).
  if (ctx.isSequenceInput(0)) {
    const Sequence *seq = ctx.sequenceInput(0, "input");
    return {seq ? ctx.sequence(*seq) : nullptr};
  }
  return {ctx.input(0, "input")};
}

Values convertDropout(NodeContext &ctx) {
  Value *x = ctx.input(0, "data");
  if (ctx.opset() >= 12 && ctx.hasInput(2)) {
    auto training = ctx.scalarInput(2, "training_mode");
    // Training with ratio 0 drops nothing and scales by 1/(1 - 0): the
    // identity (PyTorch exports attention dropout p=0 this way).
    std::optional<double> ratio = 0.5;
    if (training && *training != 0.0 && ctx.hasInput(1))
      ratio = ctx.scalarInput(1, "ratio");
    if (training && *training != 0.0 && ratio && *ratio != 0.0)
      ctx.emitError() << "training_mode is true with ratio " << *ratio
                      << " (a random mask); Kiln imports models for inference only";
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

/// Where; on shape values whose condition entries are all known, the
/// result's entries are picked from X and Y.
Values convertWhere(NodeContext &ctx) {
  Value *c = ctx.input(0, "condition"), *x = ctx.input(1, "X"), *y = ctx.input(2, "Y");
  Value *out = ctx.create(OpKind::Where, {c, x, y});
  if (!out || constantOf(out) || out->type().rank() > 1)
    return {out};
  auto ec = ctx.shapeValueOf(c), ex = ctx.shapeValueOf(x), ey = ctx.shapeValueOf(y);
  if (!ec || !ex || !ey)
    return {out};
  auto n = broadcastLength({&*ec, &*ex, &*ey});
  if (!n || !std::all_of(ec->begin(), ec->end(), [](const SymInt &e) { return e.isKnown(); }))
    return {out};
  SymInts entries;
  for (size_t i = 0; i < *n; ++i)
    entries.push_back(*broadcastEntry(*ec, i).value != 0 ? broadcastEntry(*ex, i)
                                                         : broadcastEntry(*ey, i));
  ctx.setShapeValue(out, std::move(entries));
  return {out};
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

/// `x` in a dtype Kiln computes on: a storage float (f8e4m3fn, ...) as f32,
/// which keeps its NaN and inf, a storage integer as i32; else `x`.
Value *computable(NodeContext &ctx, Value *x) {
  if (!x || !isStorageDType(x->type().dtype))
    return x;
  return ctx.castTo(x, isFloat(x->type().dtype) ? DType::F32 : DType::I32);
}

Values convertIsNaN(NodeContext &ctx) {
  Value *x = computable(ctx, ctx.input(0, "X"));
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

} // namespace

Value *castSaturating(NodeContext &ctx, Value *x, DType to, bool saturate) {
  const MiniFloatFormat *f = miniFloatFormat(to);
  if (!x || !f || f->special == MiniFloatFormat::None)
    return ctx.castTo(x, to);
  const float top = miniFloatMax(*f);
  if (saturate) // Kiln's cast keeps inf where the format has it; ONNX clips it
    return ctx.castTo(f->special == MiniFloatFormat::IEEE
                          ? ctx.create(OpKind::Clip, {ctx.castTo(x, DType::F32)},
                                       {{"min", -double(top)}, {"max", double(top)}})
                          : x,
                      to);
  Value *y = ctx.castTo(x, to);
  // A value rounds beyond the largest finite one from the midpoint to the
  // next code up, and at the midpoint when the largest has an odd mantissa
  // (ties to even): x > mid, or x > the float below mid.
  const float mid = top + std::ldexp(1.0f, std::ilogb(top) - static_cast<int>(f->manBits) - 1);
  const bool oddTop = (floatToMiniFloat(*f, top) & 1) != 0;
  Value *xf = ctx.castTo(x, DType::F32);
  Value *over =
      ctx.create(OpKind::Greater, {ctx.create(OpKind::Abs, {xf}),
                                   ctx.scalarLike(xf, oddTop ? std::nextafter(mid, 0.0f) : mid)});
  auto code = [&](uint8_t c) {
    Tensor t = Tensor::zeros(to, {});
    t.mutableData<uint8_t>()[0] = c;
    return ctx.constant(std::move(t));
  };
  // +-inf (all-ones exponent, mantissa 0) or NaN, with x's sign where the
  // format has one (as the codec and ml_dtypes give).
  const auto sign = static_cast<uint8_t>(1u << (f->expBits + f->manBits));
  const bool ieee = f->special == MiniFloatFormat::IEEE;
  const uint8_t positive = ieee ? miniFloatInf(*f) : miniFloatNaN(*f, false);
  const uint8_t negative = ieee ? static_cast<uint8_t>(sign | positive) : miniFloatNaN(*f, true);
  Value *special =
      positive == negative
          ? code(positive)
          : ctx.create(OpKind::Where, {ctx.create(OpKind::Less, {xf, ctx.scalarLike(xf, 0.0)}),
                                       code(negative), code(positive)});
  return ctx.create(OpKind::Where, {over, special, y});
}

namespace {

Values convertCast(NodeContext &ctx) {
  int64_t to = ctx.attrInt("to", -1);
  std::optional<DType> dtype = dtypeFromOnnx(static_cast<int32_t>(to));
  if (!dtype) {
    ctx.emitError() << "attribute 'to' names unsupported type "
                    << onnxTypeName(static_cast<int32_t>(to));
    return {};
  }
  Value *x = ctx.input(0, "input");
  Value *out = castSaturating(ctx, x, *dtype, ctx.attrInt("saturate", 1) != 0);
  // An integer cast of a shape value to i32 or i64 keeps its entries (a
  // narrower integer could wrap them).
  if (out && x && out != x && isInteger(*dtype) && dtypeBits(*dtype) >= 32 &&
      isInteger(x->type().dtype) && !constantOf(x))
    if (auto entries = ctx.shapeValueOf(x))
      ctx.setShapeValue(out, *entries);
  return {out};
}

Values convertCastLike(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  Value *like = ctx.input(1, "target_type");
  if (!like)
    return {};
  return {castSaturating(ctx, x, like->type().dtype, ctx.attrInt("saturate", 1) != 0)};
}

std::string checkMod(const onnx::NodeProto &node, int64_t) {
  int64_t fmod = attrIntOr(node, "fmod", 0);
  if (fmod != 0 && fmod != 1)
    return "fmod=" + std::to_string(fmod) + " is not supported (0 or 1)";
  return "";
}

Values convertMod(NodeContext &ctx) {
  Value *a = ctx.input(0, "A");
  Value *b = ctx.input(1, "B");
  bool cStyle = ctx.attrInt("fmod", 0) != 0;
  if (!a || !b)
    return {};
  DType dtype = a->type().dtype;
  if (b->type().dtype != dtype || dtype == DType::Bool) {
    ctx.emitError() << "needs two numeric inputs of one dtype, got " << a->type().str() << " and "
                    << b->type().str();
    return {};
  }
  Value *zero = ctx.scalarLike(a, 0.0);
  Value *q = ctx.create(OpKind::Div, {a, b});
  if (isFloat(dtype)) {
    Value *t = cStyle ? ctx.create(OpKind::Where,
                                   {ctx.create(OpKind::Less, {q, zero}),
                                    ctx.create(OpKind::Ceil, {q}), ctx.create(OpKind::Floor, {q})})
                      : ctx.create(OpKind::Floor, {q});
    Value *r = ctx.create(OpKind::Sub, {a, ctx.create(OpKind::Mul, {t, b})});
    // A finite a by an infinite b: a - t * b is nan (0 * inf); fmod gives a,
    // and the floored mod (numpy's) gives a when a and b agree in sign or a
    // is zero, else b.
    Value *inf = ctx.scalarLike(a, INFINITY);
    Value *bInf = ctx.create(OpKind::Equal, {ctx.create(OpKind::Abs, {b}), inf});
    Value *aFinite = ctx.create(OpKind::Less, {ctx.create(OpKind::Abs, {a}), inf});
    Value *inner = a;
    if (!cStyle) {
      Value *opposite =
          ctx.create(OpKind::Or, {ctx.create(OpKind::And, {ctx.create(OpKind::Less, {a, zero}),
                                                           ctx.create(OpKind::Greater, {b, zero})}),
                                  ctx.create(OpKind::And, {ctx.create(OpKind::Greater, {a, zero}),
                                                           ctx.create(OpKind::Less, {b, zero})})});
      inner = ctx.create(OpKind::Where, {opposite, b, a});
    }
    return {ctx.create(OpKind::Where, {ctx.create(OpKind::And, {bInf, aFinite}), inner, r})};
  }
  // Integer division truncates: r has a's sign.
  Value *r = ctx.create(OpKind::Sub, {a, ctx.create(OpKind::Mul, {q, b})});
  if (cStyle)
    return {r};
  Value *rNeg = ctx.create(OpKind::Less, {r, zero});
  Value *rPos = ctx.create(OpKind::Greater, {r, zero});
  Value *bNeg = ctx.create(OpKind::Less, {b, zero});
  Value *bPos = ctx.create(OpKind::Greater, {b, zero});
  Value *opposite = ctx.create(
      OpKind::Or, {ctx.create(OpKind::And, {rNeg, bPos}), ctx.create(OpKind::And, {rPos, bNeg})});
  return {ctx.create(OpKind::Where, {opposite, ctx.create(OpKind::Add, {r, b}), r})};
}

Values convertIsInf(NodeContext &ctx) {
  Value *x = computable(ctx, ctx.input(0, "X"));
  bool neg = ctx.attrInt("detect_negative", 1) != 0;
  bool pos = ctx.attrInt("detect_positive", 1) != 0;
  Value *isPos = ctx.create(OpKind::Equal, {x, ctx.scalarLike(x, INFINITY)});
  Value *isNeg = ctx.create(OpKind::Equal, {x, ctx.scalarLike(x, -INFINITY)});
  if (pos && neg)
    return {ctx.create(OpKind::Or, {isPos, isNeg})};
  if (pos)
    return {isPos};
  if (neg)
    return {isNeg};
  return {ctx.create(OpKind::And, {isPos, isNeg})}; // all false
}

Values convertShrink(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  double lambd = ctx.attrFloat("lambd", 0.5);
  double bias = ctx.attrFloat("bias", 0.0);
  Value *below = ctx.create(OpKind::Less, {x, ctx.scalarLike(x, -lambd)});
  Value *above = ctx.create(OpKind::Greater, {x, ctx.scalarLike(x, lambd)});
  Value *inner =
      ctx.create(OpKind::Where, {above, ctx.create(OpKind::Sub, {x, ctx.scalarLike(x, bias)}),
                                 ctx.scalarLike(x, 0.0)});
  return {ctx.create(OpKind::Where,
                     {below, ctx.create(OpKind::Add, {x, ctx.scalarLike(x, bias)}), inner})};
}

Values convertTan(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  return {ctx.create(OpKind::Div, {ctx.create(OpKind::Sin, {x}), ctx.create(OpKind::Cos, {x})})};
}

/// Sinh (sign -1) and Cosh (sign +1): (exp(x) + sign * exp(-x)) / 2.
template <int Sign> Values convertHyperbolic(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  Value *ep = ctx.create(OpKind::Exp, {x});
  Value *en = ctx.create(OpKind::Exp, {ctx.create(OpKind::Neg, {x})});
  Value *sum = ctx.create(Sign > 0 ? OpKind::Add : OpKind::Sub, {ep, en});
  return {ctx.create(OpKind::Mul, {sum, ctx.scalarLike(x, 0.5)})};
}

Values convertAsinh(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  Value *ax = ctx.create(OpKind::Abs, {x});
  Value *root = ctx.create(OpKind::Sqrt, {ctx.create(OpKind::Add, {ctx.create(OpKind::Mul, {x, x}),
                                                                   ctx.scalarLike(x, 1.0)})});
  Value *mag = ctx.create(OpKind::Log, {ctx.create(OpKind::Add, {ax, root})});
  return {ctx.create(OpKind::Mul, {ctx.create(OpKind::Sign, {x}), mag})};
}

Values convertAcosh(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  Value *root = ctx.create(OpKind::Sqrt, {ctx.create(OpKind::Sub, {ctx.create(OpKind::Mul, {x, x}),
                                                                   ctx.scalarLike(x, 1.0)})});
  return {ctx.create(OpKind::Log, {ctx.create(OpKind::Add, {x, root})})};
}

Values convertAtanh(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  Value *one = ctx.scalarLike(x, 1.0);
  Value *ratio = ctx.create(OpKind::Div,
                            {ctx.create(OpKind::Add, {one, x}), ctx.create(OpKind::Sub, {one, x})});
  return {ctx.create(OpKind::Mul, {ctx.create(OpKind::Log, {ratio}), ctx.scalarLike(x, 0.5)})};
}

/// Mish (opset 18) = x * tanh(softplus(x)).
Values convertMish(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  return {ctx.create(OpKind::Mul, {x, ctx.create(OpKind::Tanh, {unary(ctx, OpKind::Softplus)})})};
}

std::string checkGelu(const onnx::NodeProto &node, int64_t) {
  std::string approximate = attrStringOr(node, "approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return "approximate '" + approximate + "' is not supported";
  return "";
}

Values convertBitShift(NodeContext &ctx) {
  const std::string direction = ctx.attrString("direction", "");
  if (direction != "LEFT" && direction != "RIGHT") {
    ctx.emitError() << "direction must be 'LEFT' or 'RIGHT', got '" << direction << "'";
    return {};
  }
  return {ctx.create(direction == "LEFT" ? OpKind::ShiftLeft : OpKind::ShiftRight,
                     {ctx.input(0, "X"), ctx.input(1, "Y")})};
}

Values convertGelu(NodeContext &ctx) {
  return {unary(ctx, OpKind::Gelu, {{"approximate", ctx.attrString("approximate", "none")}})};
}

const Converter kConverters[] = {
    {"Abs", 6, convertUnary<OpKind::Abs>},
    {"Acosh", 9, convertAcosh},
    {"Add", 7, convertShapeBinary<OpKind::Add>},
    {"And", 7, convertBinary<OpKind::And>},
    {"Cast", 9, convertCast, checkCast},
    {"CastLike", 15, convertCastLike},
    {"Asinh", 9, convertAsinh},
    {"Atanh", 9, convertAtanh},
    {"BitShift", 11, convertBitShift},
    {"BitwiseAnd", 18, convertBinary<OpKind::BitwiseAnd>},
    {"BitwiseNot", 18, convertUnary<OpKind::BitwiseNot>},
    {"BitwiseOr", 18, convertBinary<OpKind::BitwiseOr>},
    {"BitwiseXor", 18, convertBinary<OpKind::BitwiseXor>},
    {"Ceil", 6, convertUnary<OpKind::Ceil>},
    {"Celu", 12, convertCelu},
    {"Clip", 11, convertClip},
    {"Acos", 7, convertUnary<OpKind::Acos>},
    {"Asin", 7, convertUnary<OpKind::Asin>},
    {"Atan", 7, convertUnary<OpKind::Atan>},
    {"Cos", 7, convertUnary<OpKind::Cos>},
    {"Cosh", 9, convertHyperbolic<1>},
    {"Div", 7, convertShapeBinary<OpKind::Div>},
    {"Dropout", 10, convertDropout},
    {"Elu", 6, convertElu},
    {"Equal", 11, convertShapeBinary<OpKind::Equal>},
    {"Erf", 9, convertUnary<OpKind::Erf>},
    {"Exp", 6, convertUnary<OpKind::Exp>},
    {"Floor", 6, convertUnary<OpKind::Floor>},
    {"Gelu", 20, convertGelu, checkGelu},
    {"Greater", 9, convertBinary<OpKind::Greater>},
    {"GreaterOrEqual", 12, convertOrEqual<OpKind::Greater>},
    {"HardSigmoid", 6, convertHardSigmoid},
    {"HardSwish", 14, convertUnary<OpKind::HardSwish>},
    {"Identity", 1, convertIdentity},
    {"IsInf", 10, convertIsInf},
    {"IsNaN", 9, convertIsNaN},
    {"LeakyRelu", 6, convertLeakyRelu},
    {"Less", 9, convertBinary<OpKind::Less>},
    {"LessOrEqual", 12, convertOrEqual<OpKind::Less>},
    {"Log", 6, convertUnary<OpKind::Log>},
    {"Max", 8, convertVariadic<OpKind::Max>},
    {"Mean", 8, convertMean},
    {"Min", 8, convertVariadic<OpKind::Min>},
    {"Mish", 18, convertMish},
    {"Mod", 10, convertMod, checkMod},
    {"Mul", 7, convertShapeBinary<OpKind::Mul>},
    {"Neg", 6, convertUnary<OpKind::Neg>},
    {"Not", 1, convertUnary<OpKind::Not>},
    {"Or", 7, convertBinary<OpKind::Or>},
    {"Pow", 7, convertPow},
    {"PRelu", 9, convertPRelu},
    {"Reciprocal", 6, convertUnary<OpKind::Reciprocal>},
    {"Relu", 6, convertUnary<OpKind::Relu>},
    {"Round", 11, convertUnary<OpKind::Round>},
    {"Selu", 6, convertSelu},
    {"Shrink", 9, convertShrink},
    {"Sigmoid", 6, convertUnary<OpKind::Sigmoid>},
    {"Sign", 9, convertUnary<OpKind::Sign>},
    {"Sin", 7, convertUnary<OpKind::Sin>},
    {"Sinh", 9, convertHyperbolic<-1>},
    {"Softplus", 1, convertUnary<OpKind::Softplus>},
    {"Softsign", 1, convertSoftsign},
    {"Sqrt", 6, convertUnary<OpKind::Sqrt>},
    {"Sub", 7, convertShapeBinary<OpKind::Sub>},
    {"Sum", 8, convertVariadic<OpKind::Add>},
    {"Tan", 7, convertTan},
    {"Tanh", 6, convertUnary<OpKind::Tanh>},
    {"ThresholdedRelu", 10, convertThresholdedRelu},
    {"Where", 9, convertWhere},
    {"Xor", 7, convertXor},
};

} // namespace

std::span<const Converter> elementwiseConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
