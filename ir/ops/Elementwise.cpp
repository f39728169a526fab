//===- Elementwise.cpp - Hooks of the elementwise ops -----------*- C++ -*-===//
//
// Type inference and reference kernels of every op with the Elementwise
// trait. All of them share one broadcasting driver (forEachBroadcast) and
// differ only in a scalar lambda; see Note [Elementwise arithmetic].
//
//===----------------------------------------------------------------------===//
#include "ir/ScalarExpr.h"
#include "ir/ops/Internal.h"
#include "ir/ops/ScalarLowering.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numbers>
#include <type_traits>

// Note [Elementwise arithmetic]
//
// Float kernels compute in double and round once to the result dtype
// (Tensor::setDouble). Integer kernels compute in int64 with two's
// complement wrap-around (no undefined behaviour on overflow) and are then
// truncated to the result dtype (Tensor::setInt), so i8/i32 arithmetic wraps
// like the hardware does. Integer `div` truncates toward zero like C, and a
// zero divisor is reported as an error; INT64_MIN / -1 wraps to INT64_MIN.
// Integer `pow` is exact repeated squaring; a negative exponent gives
// trunc(1 / base^-e) (so 0 unless |base| == 1) and 0^negative is an error.
// NaN propagates through max, min, relu and clip, as in numpy.

namespace kiln {
namespace {

using Inputs = std::span<const Tensor>;
using Results = std::span<const TensorType>;
using Outputs = FailureOr<std::vector<Tensor>>;
using Types = FailureOr<std::vector<TensorType>>;

constexpr size_t kMaxOperands = 3;

//===----------------------------------------------------------------------===//
// Type inference
//===----------------------------------------------------------------------===//

/// The dtypes an operand may have.
enum class Accepts { Any, Numeric, Float, Bool, Integer };

LogicalResult requireDType(const OpContext &ctx, unsigned i, Accepts accepts) {
  DType t = ctx.operandType(i).dtype;
  switch (accepts) {
  case Accepts::Any:
    return success();
  case Accepts::Float:
    return ops::requireFloat(ctx, i);
  case Accepts::Numeric:
    if (t != DType::Bool)
      return success();
    return ctx.emitError() << "operand " << i << " must be a numeric tensor, got "
                           << ctx.operandType(i).str();
  case Accepts::Bool:
    if (t == DType::Bool)
      return success();
    return ctx.emitError() << "operand " << i << " must be a bool tensor, got "
                           << ctx.operandType(i).str();
  case Accepts::Integer:
    if (isInteger(t))
      return success();
    return ctx.emitError() << "operand " << i << " must be an integer tensor, got "
                           << ctx.operandType(i).str();
  }
  return success();
}

/// Checks every operand's dtype, requires equal dtypes and broadcasts the
/// shapes. The result has `resultDType`, or the operands' dtype.
Types inferPointwise(const OpContext &ctx, Accepts accepts,
                     std::optional<DType> resultDType = std::nullopt) {
  for (unsigned i = 0; i < ctx.numOperands(); ++i)
    if (failed(requireDType(ctx, i, accepts)))
      return failure();
  if (failed(ops::requireSameDType(ctx)))
    return failure();
  auto shape = ops::broadcastShapes(ctx, ctx.operandTypes);
  if (failed(shape))
    return failure();
  return std::vector<TensorType>{
      TensorType(resultDType.value_or(ctx.operandType(0).dtype), shape.take())};
}

Types inferFloatOp(const OpContext &ctx) {
  return inferPointwise(ctx, Accepts::Float);
}
Types inferNumericOp(const OpContext &ctx) {
  return inferPointwise(ctx, Accepts::Numeric);
}

//===----------------------------------------------------------------------===//
// The broadcasting driver
//===----------------------------------------------------------------------===//

/// Calls `fn(i, offsets)` for every element `i` (flat, row-major) of an
/// output of shape `outSizes`, where offsets[k] is the flat offset of the
/// element of in[k] that numpy broadcasting maps to it. Offsets are updated
/// incrementally, and same-shape operands take a flat loop.
template <typename Fn>
void forEachBroadcast(Inputs in, const std::vector<int64_t> &outSizes, Fn &&fn) {
  KILN_ASSERT(in.size() <= kMaxOperands);
  int64_t numel = numElements(outSizes);
  std::array<int64_t, kMaxOperands> off{};
  if (std::all_of(in.begin(), in.end(), [&](const Tensor &t) { return t.shape() == outSizes; })) {
    for (int64_t i = 0; i < numel; ++i) {
      off.fill(i);
      fn(i, off.data());
    }
    return;
  }
  // strides[d][k]: how far in[k]'s offset moves per step along output dim d
  // (0 where in[k] is broadcast along d).
  size_t rank = outSizes.size();
  std::vector<std::array<int64_t, kMaxOperands>> strides(rank, std::array<int64_t, kMaxOperands>{});
  for (size_t k = 0; k < in.size(); ++k) {
    std::vector<int64_t> s = ops::stridesOf(in[k].shape());
    size_t lead = rank - s.size();
    for (size_t d = 0; d < s.size(); ++d)
      strides[lead + d][k] = in[k].shape()[d] == 1 ? 0 : s[d];
  }
  std::vector<int64_t> idx(rank, 0);
  for (int64_t i = 0; i < numel; ++i) {
    fn(i, off.data());
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < outSizes[d]) {
        for (size_t k = 0; k < in.size(); ++k)
          off[k] += strides[d][k];
        break;
      }
      for (size_t k = 0; k < in.size(); ++k)
        off[k] -= strides[d][k] * (outSizes[d] - 1);
      idx[d] = 0;
    }
  }
}

/// Calls a scalar function of 1, 2 or 3 arguments on `args`.
template <typename T, typename Fn> auto applyScalar(Fn &fn, const T *args) {
  if constexpr (std::is_invocable_v<Fn &, T>)
    return fn(args[0]);
  else if constexpr (std::is_invocable_v<Fn &, T, T>)
    return fn(args[0], args[1]);
  else
    return fn(args[0], args[1], args[2]);
}

/// Applies `fn` (doubles to double) elementwise; the result, of type rt[0],
/// is rounded to its dtype. f32 operands and result skip the dtype switch.
template <typename Fn> Outputs mapFloat(Inputs in, Results rt, Fn fn) {
  Tensor out = Tensor::zeros(rt[0].dtype, staticSizes(rt[0].shape));
  std::array<double, kMaxOperands> args{};
  bool allF32 = out.dtype() == DType::F32 && std::all_of(in.begin(), in.end(), [](const Tensor &t) {
                  return t.dtype() == DType::F32;
                });
  if (allF32) {
    std::array<const float *, kMaxOperands> src{};
    for (size_t k = 0; k < in.size(); ++k)
      src[k] = in[k].data<float>();
    float *dst = out.mutableData<float>();
    forEachBroadcast(in, out.shape(), [&](int64_t i, const int64_t *off) {
      for (size_t k = 0; k < in.size(); ++k)
        args[k] = src[k][off[k]];
      dst[i] = static_cast<float>(applyScalar(fn, args.data()));
    });
  } else {
    forEachBroadcast(in, out.shape(), [&](int64_t i, const int64_t *off) {
      for (size_t k = 0; k < in.size(); ++k)
        args[k] = in[k].getDouble(off[k]);
      out.setDouble(i, static_cast<double>(applyScalar(fn, args.data())));
    });
  }
  return std::vector<Tensor>{std::move(out)};
}

/// Applies `fn` (int64s to int64) elementwise; the result, of type rt[0], is
/// truncated to its dtype.
template <typename Fn> Outputs mapInt(Inputs in, Results rt, Fn fn) {
  Tensor out = Tensor::zeros(rt[0].dtype, staticSizes(rt[0].shape));
  std::array<int64_t, kMaxOperands> args{};
  forEachBroadcast(in, out.shape(), [&](int64_t i, const int64_t *off) {
    for (size_t k = 0; k < in.size(); ++k)
      args[k] = in[k].getInt(off[k]);
    out.setInt(i, static_cast<int64_t>(applyScalar(fn, args.data())));
  });
  return std::vector<Tensor>{std::move(out)};
}

/// mapFloat when `compute` is a float dtype, else mapInt.
template <typename FloatFn, typename IntFn>
Outputs mapNumeric(DType compute, Inputs in, Results rt, FloatFn floatFn, IntFn intFn) {
  if (isFloat(compute))
    return mapFloat(in, rt, floatFn);
  return mapInt(in, rt, intFn);
}

// Two's complement arithmetic without signed-overflow UB.
int64_t wrap(uint64_t v) {
  return static_cast<int64_t>(v);
}
int64_t wrapAdd(int64_t a, int64_t b) {
  return wrap(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrapSub(int64_t a, int64_t b) {
  return wrap(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t wrapMul(int64_t a, int64_t b) {
  return wrap(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
int64_t wrapNeg(int64_t a) {
  return wrap(0 - static_cast<uint64_t>(a));
}

double nanOr(double a, double b, double value) {
  return std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::quiet_NaN() : value;
}

double sign(double x) {
  if (std::isnan(x))
    return x;
  return (x > 0) - (x < 0);
}

double sigmoid(double x) {
  if (x >= 0)
    return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

/// Round half to even, independent of the floating-point environment.
double roundHalfToEven(double x) {
  if (std::fabs(x - std::trunc(x)) == 0.5)
    return 2.0 * std::round(x / 2.0);
  return std::round(x);
}

} // namespace

//===----------------------------------------------------------------------===//
// Float math
//===----------------------------------------------------------------------===//

Types inferCeil(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceCeil(const OpContext &, Inputs in, Results rt) {
  return mapFloat(in, rt, [](double x) { return std::ceil(x); });
}

template <> ScalarRef scalar<OpKind::Ceil>(ScalarLowering &L) {
  return L.un(ScalarOp::Ceil, L.x[0]);
}

Types inferAsin(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceAsin(const OpContext &, Inputs in, Results rt) {
  return mapFloat(in, rt, [](double x) { return std::asin(x); });
}
template <> ScalarRef scalar<OpKind::Asin>(ScalarLowering &L) {
  return L.un(ScalarOp::Asin, L.x[0]);
}

Types inferAcos(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceAcos(const OpContext &, Inputs in, Results rt) {
  return mapFloat(in, rt, [](double x) { return std::acos(x); });
}
template <> ScalarRef scalar<OpKind::Acos>(ScalarLowering &L) {
  return L.un(ScalarOp::Acos, L.x[0]);
}

Types inferAtan(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceAtan(const OpContext &, Inputs in, Results rt) {
  return mapFloat(in, rt, [](double x) { return std::atan(x); });
}
template <> ScalarRef scalar<OpKind::Atan>(ScalarLowering &L) {
  return L.un(ScalarOp::Atan, L.x[0]);
}

Types inferCos(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceCos(const OpContext &, Inputs in, Results rt) {
  return mapFloat(in, rt, [](double x) { return std::cos(x); });
}

template <> ScalarRef scalar<OpKind::Cos>(ScalarLowering &L) {
  return L.un(ScalarOp::Cos, L.x[0]);
}

Types inferElu(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceElu(const OpContext &ctx, Inputs in, Results rt) {
  double alpha = EluOp(ctx).alpha();
  return mapFloat(in, rt, [=](double x) { return x > 0 ? x : alpha * std::expm1(x); });
}

template <> ScalarRef scalar<OpKind::Elu>(ScalarLowering &L) {
  // x > 0 ? x : alpha * expm1(x)
  double alpha = EluOp(L.attrs).alpha();
  ScalarRef neg = L.mul(L.c(alpha), L.expm1(L.x[0]));
  return L.sel(L.dag.compare(ScalarOp::Gt, L.x[0], L.c(0)), L.x[0], neg);
}

Types inferErf(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceErf(const OpContext &, Inputs in, Results rt) {
  return mapFloat(in, rt, [](double x) { return std::erf(x); });
}

template <> ScalarRef scalar<OpKind::Erf>(ScalarLowering &L) {
  return L.un(ScalarOp::Erf, L.x[0]);
}

Types inferExp(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceExp(const OpContext &, Inputs in, Results rt) {
  return mapFloat(in, rt, [](double x) { return std::exp(x); });
}

template <> ScalarRef scalar<OpKind::Exp>(ScalarLowering &L) {
  return L.un(ScalarOp::Exp, L.x[0]);
}

Types inferFloor(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceFloor(const OpContext &, Inputs in, Results rt) {
  return mapFloat(in, rt, [](double x) { return std::floor(x); });
}

template <> ScalarRef scalar<OpKind::Floor>(ScalarLowering &L) {
  return L.un(ScalarOp::Floor, L.x[0]);
}

Types inferGelu(const OpContext &ctx) {
  const std::string &approximate = GeluOp(ctx).approximate();
  if (approximate != "none" && approximate != "tanh")
    return ctx.emitError() << "approximate must be \"none\" or \"tanh\", got \"" << approximate
                           << "\"";
  return inferFloatOp(ctx);
}
Outputs referenceGelu(const OpContext &ctx, Inputs in, Results rt) {
  double k = std::sqrt(2.0 / std::numbers::pi);
  if (GeluOp(ctx).approximate() == "tanh")
    return mapFloat(in, rt, [=](double x) {
      return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
    });
  return mapFloat(in, rt, [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); });
}

template <> ScalarRef scalar<OpKind::Gelu>(ScalarLowering &L) {
  ScalarRef v = L.x[0];
  if (GeluOp(L.attrs).approximate() == "tanh") {
    // 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3), as
    // x / (1 + exp(-2u)): the same value without 1 + tanh(u) cancelling
    // for negative x.
    ScalarRef cube = L.mul(L.mul(v, v), v);
    ScalarRef u2 =
        L.mul(L.c(2 * std::sqrt(2.0 / std::numbers::pi)), L.add(v, L.mul(L.c(0.044715), cube)));
    return L.div(v, L.add(L.c(1), L.un(ScalarOp::Exp, L.un(ScalarOp::Neg, u2))));
  }
  // 0.5 x (1 + erf(x / sqrt(2))), as PyTorch computes it: for x < -3 the
  // sum cancels, an absolute error below 1e-7 |x| (no erfc primitive).
  ScalarRef erf = L.un(ScalarOp::Erf, L.mul(v, L.c(1.0 / std::numbers::sqrt2)));
  return L.mul(L.mul(L.c(0.5), v), L.add(L.c(1), erf));
}

Types inferHardSigmoid(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceHardSigmoid(const OpContext &ctx, Inputs in, Results rt) {
  double alpha = HardSigmoidOp(ctx).alpha(), beta = HardSigmoidOp(ctx).beta();
  return mapFloat(
      in, rt, [=](double x) { return std::isnan(x) ? x : std::clamp(alpha * x + beta, 0.0, 1.0); });
}

template <> ScalarRef scalar<OpKind::HardSigmoid>(ScalarLowering &L) {
  // clamp(alpha x + beta, 0, 1); NaN stays NaN through the compares.
  HardSigmoidOp op(L.attrs);
  ScalarRef v = L.add(L.mul(L.c(op.alpha()), L.x[0]), L.c(op.beta()));
  return L.clamp(v, L.c(0), L.c(1));
}

Types inferHardSwish(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceHardSwish(const OpContext &, Inputs in, Results rt) {
  return mapFloat(
      in, rt, [](double x) { return std::isnan(x) ? x : x * std::clamp(x / 6.0 + 0.5, 0.0, 1.0); });
}

template <> ScalarRef scalar<OpKind::HardSwish>(ScalarLowering &L) {
  // x * clamp(x / 6 + 0.5, 0, 1)
  ScalarRef v = L.add(L.div(L.x[0], L.c(6)), L.c(0.5));
  return L.mul(L.x[0], L.clamp(v, L.c(0), L.c(1)));
}

Types inferLeakyRelu(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceLeakyRelu(const OpContext &ctx, Inputs in, Results rt) {
  double alpha = LeakyReluOp(ctx).alpha();
  return mapFloat(in, rt, [=](double x) { return x >= 0 ? x : alpha * x; });
}

template <> ScalarRef scalar<OpKind::LeakyRelu>(ScalarLowering &L) {
  // x >= 0 ? x : alpha x
  double alpha = LeakyReluOp(L.attrs).alpha();
  ScalarRef neg = L.mul(L.c(alpha), L.x[0]);
  return L.sel(L.dag.compare(ScalarOp::Ge, L.x[0], L.c(0)), L.x[0], neg);
}

Types inferLog(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceLog(const OpContext &, Inputs in, Results rt) {
  return mapFloat(in, rt, [](double x) { return std::log(x); });
}

template <> ScalarRef scalar<OpKind::Log>(ScalarLowering &L) {
  return L.un(ScalarOp::Log, L.x[0]);
}

Types inferReciprocal(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceReciprocal(const OpContext &, Inputs in, Results rt) {
  return mapFloat(in, rt, [](double x) { return 1.0 / x; });
}

template <> ScalarRef scalar<OpKind::Reciprocal>(ScalarLowering &L) {
  return L.un(ScalarOp::Recip, L.x[0]);
}

Types inferRound(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceRound(const OpContext &, Inputs in, Results rt) {
  return mapFloat(in, rt, roundHalfToEven);
}

template <> ScalarRef scalar<OpKind::Round>(ScalarLowering &L) {
  return L.un(ScalarOp::RoundEven, L.x[0]);
}

Types inferRsqrt(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceRsqrt(const OpContext &, Inputs in, Results rt) {
  return mapFloat(in, rt, [](double x) { return 1.0 / std::sqrt(x); });
}

template <> ScalarRef scalar<OpKind::Rsqrt>(ScalarLowering &L) {
  return L.un(ScalarOp::Rsqrt, L.x[0]);
}

Types inferSigmoid(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceSigmoid(const OpContext &, Inputs in, Results rt) {
  return mapFloat(in, rt, sigmoid);
}

template <> ScalarRef scalar<OpKind::Sigmoid>(ScalarLowering &L) {
  // e = exp(-|x|); (x >= 0 ? 1 : e) / (1 + e): the reference's two
  // branches with one exp.
  ScalarRef ex = L.un(ScalarOp::Exp, L.un(ScalarOp::Neg, L.un(ScalarOp::Abs, L.x[0])));
  ScalarRef num = L.sel(L.dag.compare(ScalarOp::Ge, L.x[0], L.c(0)), L.c(1), ex);
  return L.div(num, L.add(L.c(1), ex));
}

Types inferSin(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceSin(const OpContext &, Inputs in, Results rt) {
  return mapFloat(in, rt, [](double x) { return std::sin(x); });
}

template <> ScalarRef scalar<OpKind::Sin>(ScalarLowering &L) {
  return L.un(ScalarOp::Sin, L.x[0]);
}

Types inferSoftplus(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceSoftplus(const OpContext &, Inputs in, Results rt) {
  // log(1 + exp(x)), without overflow for large x.
  return mapFloat(in, rt, [](double x) {
    return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  });
}

template <> ScalarRef scalar<OpKind::Softplus>(ScalarLowering &L) {
  // max(x, 0) + log1p(exp(-|x|)): the reference's two branches in one.
  ScalarRef ex = L.un(ScalarOp::Exp, L.un(ScalarOp::Neg, L.un(ScalarOp::Abs, L.x[0])));
  ScalarRef pos = L.sel(L.dag.compare(ScalarOp::Gt, L.x[0], L.c(0)), L.x[0], L.c(0));
  return L.add(pos, L.log1p(ex));
}

Types inferSqrt(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceSqrt(const OpContext &, Inputs in, Results rt) {
  return mapFloat(in, rt, [](double x) { return std::sqrt(x); });
}

template <> ScalarRef scalar<OpKind::Sqrt>(ScalarLowering &L) {
  return L.un(ScalarOp::Sqrt, L.x[0]);
}

Types inferTanh(const OpContext &ctx) {
  return inferFloatOp(ctx);
}
Outputs referenceTanh(const OpContext &, Inputs in, Results rt) {
  return mapFloat(in, rt, [](double x) { return std::tanh(x); });
}

template <> ScalarRef scalar<OpKind::Tanh>(ScalarLowering &L) {
  return L.un(ScalarOp::Tanh, L.x[0]);
}

//===----------------------------------------------------------------------===//
// Arithmetic on floats and integers
//===----------------------------------------------------------------------===//

Types inferAbs(const OpContext &ctx) {
  return inferNumericOp(ctx);
}
Outputs referenceAbs(const OpContext &ctx, Inputs in, Results rt) {
  return mapNumeric(
      ctx.operandType(0).dtype, in, rt, [](double x) { return std::fabs(x); },
      [](int64_t x) { return x < 0 ? wrapNeg(x) : x; });
}

template <> ScalarRef scalar<OpKind::Abs>(ScalarLowering &L) {
  return L.un(ScalarOp::Abs, L.x[0]);
}

Types inferAdd(const OpContext &ctx) {
  return inferNumericOp(ctx);
}
Outputs referenceAdd(const OpContext &ctx, Inputs in, Results rt) {
  return mapNumeric(
      ctx.operandType(0).dtype, in, rt, [](double a, double b) { return a + b; }, wrapAdd);
}

template <> ScalarRef scalar<OpKind::Add>(ScalarLowering &L) {
  return L.bin(ScalarOp::Add, L.x[0], L.x[1]);
}

Types inferClip(const OpContext &ctx) {
  ClipOp op(ctx);
  if (std::isnan(op.min()) || std::isnan(op.max()))
    return ctx.emitError() << "bounds must not be nan, got min " << formatDouble(op.min())
                           << " and max " << formatDouble(op.max());
  return inferNumericOp(ctx);
}
Outputs referenceClip(const OpContext &ctx, Inputs in, Results rt) {
  // min(max(x, lo), hi) as in numpy: every element is `hi` when lo > hi.
  double lo = ClipOp(ctx).min(), hi = ClipOp(ctx).max();
  if (isFloat(ctx.operandType(0).dtype))
    return mapFloat(in, rt, [=](double x) {
      if (std::isnan(x))
        return x;
      return std::min(std::max(x, lo), hi);
    });
  // Integers clamp to the integers inside the bounds, saturated to int64.
  auto toInt = [](double v) {
    if (v <= -0x1p63)
      return std::numeric_limits<int64_t>::min();
    if (v >= 0x1p63)
      return std::numeric_limits<int64_t>::max();
    return static_cast<int64_t>(v);
  };
  int64_t ilo = toInt(std::ceil(lo)), ihi = toInt(std::floor(hi));
  return mapInt(in, rt, [=](int64_t x) { return std::min(std::max(x, ilo), ihi); });
}

template <> ScalarRef scalar<OpKind::Clip>(ScalarLowering &L) {
  ClipOp op(L.attrs);
  if (L.isFloat)
    return L.stdMin(L.stdMax(L.x[0], L.c(op.min())), L.c(op.max()));
  // Integers clamp in int64 to the integers inside the bounds, then wrap
  // to the dtype like the reference's store.
  ScalarLowering e64 = L.withType(DType::I64);
  ScalarRef v = L.dag.cast(L.x[0], DType::I64);
  ScalarRef lo = L.dag.constInt(DType::I64, saturateToInt64(std::ceil(op.min())));
  ScalarRef hi = L.dag.constInt(DType::I64, saturateToInt64(std::floor(op.max())));
  return e64.stdMin(e64.stdMax(v, lo), hi);
}

Types inferDiv(const OpContext &ctx) {
  return inferNumericOp(ctx);
}
Outputs referenceDiv(const OpContext &ctx, Inputs in, Results rt) {
  bool divByZero = false;
  auto out = mapNumeric(
      ctx.operandType(0).dtype, in, rt, [](double a, double b) { return a / b; },
      [&](int64_t a, int64_t b) -> int64_t {
        if (b == 0) {
          divByZero = true;
          return 0;
        }
        if (b == -1)
          return wrapNeg(a); // INT64_MIN / -1 overflows
        return a / b;
      });
  if (divByZero)
    return ctx.emitError() << "integer division by zero";
  return out;
}

template <> ScalarRef scalar<OpKind::Div>(ScalarLowering &L) {
  return L.bin(ScalarOp::Div, L.x[0], L.x[1]);
}

Types inferMax(const OpContext &ctx) {
  return inferNumericOp(ctx);
}
Outputs referenceMax(const OpContext &ctx, Inputs in, Results rt) {
  return mapNumeric(
      ctx.operandType(0).dtype, in, rt,
      [](double a, double b) { return nanOr(a, b, std::max(a, b)); },
      [](int64_t a, int64_t b) { return std::max(a, b); });
}

template <> ScalarRef scalar<OpKind::Max>(ScalarLowering &L) {
  return L.bin(ScalarOp::Max, L.x[0], L.x[1]);
}

Types inferMin(const OpContext &ctx) {
  return inferNumericOp(ctx);
}
Outputs referenceMin(const OpContext &ctx, Inputs in, Results rt) {
  return mapNumeric(
      ctx.operandType(0).dtype, in, rt,
      [](double a, double b) { return nanOr(a, b, std::min(a, b)); },
      [](int64_t a, int64_t b) { return std::min(a, b); });
}

template <> ScalarRef scalar<OpKind::Min>(ScalarLowering &L) {
  return L.bin(ScalarOp::Min, L.x[0], L.x[1]);
}

Types inferMul(const OpContext &ctx) {
  return inferNumericOp(ctx);
}
Outputs referenceMul(const OpContext &ctx, Inputs in, Results rt) {
  return mapNumeric(
      ctx.operandType(0).dtype, in, rt, [](double a, double b) { return a * b; }, wrapMul);
}

template <> ScalarRef scalar<OpKind::Mul>(ScalarLowering &L) {
  return L.bin(ScalarOp::Mul, L.x[0], L.x[1]);
}

Types inferNeg(const OpContext &ctx) {
  return inferNumericOp(ctx);
}
Outputs referenceNeg(const OpContext &ctx, Inputs in, Results rt) {
  return mapNumeric(
      ctx.operandType(0).dtype, in, rt, [](double x) { return -x; }, wrapNeg);
}

template <> ScalarRef scalar<OpKind::Neg>(ScalarLowering &L) {
  return L.un(ScalarOp::Neg, L.x[0]);
}

Types inferPow(const OpContext &ctx) {
  return inferNumericOp(ctx);
}
Outputs referencePow(const OpContext &ctx, Inputs in, Results rt) {
  bool zeroToNegative = false;
  auto out = mapNumeric(
      ctx.operandType(0).dtype, in, rt, [](double a, double b) { return std::pow(a, b); },
      [&](int64_t a, int64_t b) {
        zeroToNegative |= a == 0 && b < 0;
        return wrappingIntPow(a, b);
      });
  if (zeroToNegative)
    return ctx.emitError() << "integer 0 raised to a negative power";
  return out;
}

template <> ScalarRef scalar<OpKind::Pow>(ScalarLowering &L) {
  return L.bin(ScalarOp::Pow, L.x[0], L.x[1]);
}

Types inferRelu(const OpContext &ctx) {
  return inferNumericOp(ctx);
}
Outputs referenceRelu(const OpContext &ctx, Inputs in, Results rt) {
  return mapNumeric(
      ctx.operandType(0).dtype, in, rt, [](double x) { return std::isnan(x) || x > 0 ? x : 0.0; },
      [](int64_t x) { return std::max<int64_t>(x, 0); });
}

template <> ScalarRef scalar<OpKind::Relu>(ScalarLowering &L) {
  // NaN or x > 0 ? x : 0, i.e. x <= 0 ? +0 : x (so relu(-0) = +0).
  return L.sel(L.dag.compare(ScalarOp::Le, L.x[0], L.c(0)), L.c(0), L.x[0]);
}

Types inferSign(const OpContext &ctx) {
  return inferNumericOp(ctx);
}
Outputs referenceSign(const OpContext &ctx, Inputs in, Results rt) {
  return mapNumeric(ctx.operandType(0).dtype, in, rt, sign,
                    [](int64_t x) -> int64_t { return (x > 0) - (x < 0); });
}

template <> ScalarRef scalar<OpKind::Sign>(ScalarLowering &L) {
  ScalarRef zero = L.c(0);
  ScalarRef rest =
      L.isFloat ? L.sel(L.dag.compare(ScalarOp::Eq, L.x[0], L.x[0]), zero, L.x[0]) : zero;
  rest = L.sel(L.lt(L.x[0], zero), L.c(-1), rest);
  return L.sel(L.dag.compare(ScalarOp::Gt, L.x[0], zero), L.c(1), rest);
}

Types inferSub(const OpContext &ctx) {
  return inferNumericOp(ctx);
}
Outputs referenceSub(const OpContext &ctx, Inputs in, Results rt) {
  return mapNumeric(
      ctx.operandType(0).dtype, in, rt, [](double a, double b) { return a - b; }, wrapSub);
}

template <> ScalarRef scalar<OpKind::Sub>(ScalarLowering &L) {
  return L.bin(ScalarOp::Sub, L.x[0], L.x[1]);
}

//===----------------------------------------------------------------------===//
// Comparisons and logic
//===----------------------------------------------------------------------===//

Types inferEqual(const OpContext &ctx) {
  return inferPointwise(ctx, Accepts::Any, DType::Bool);
}
Outputs referenceEqual(const OpContext &ctx, Inputs in, Results rt) {
  return mapNumeric(
      ctx.operandType(0).dtype, in, rt, [](double a, double b) { return a == b; },
      [](int64_t a, int64_t b) { return a == b; });
}

template <> ScalarRef scalar<OpKind::Equal>(ScalarLowering &L) {
  return L.dag.compare(ScalarOp::Eq, L.x[0], L.x[1]);
}

Types inferGreater(const OpContext &ctx) {
  return inferPointwise(ctx, Accepts::Numeric, DType::Bool);
}
Outputs referenceGreater(const OpContext &ctx, Inputs in, Results rt) {
  return mapNumeric(
      ctx.operandType(0).dtype, in, rt, [](double a, double b) { return a > b; },
      [](int64_t a, int64_t b) { return a > b; });
}

template <> ScalarRef scalar<OpKind::Greater>(ScalarLowering &L) {
  return L.dag.compare(ScalarOp::Gt, L.x[0], L.x[1]);
}

Types inferLess(const OpContext &ctx) {
  return inferPointwise(ctx, Accepts::Numeric, DType::Bool);
}
Outputs referenceLess(const OpContext &ctx, Inputs in, Results rt) {
  return mapNumeric(
      ctx.operandType(0).dtype, in, rt, [](double a, double b) { return a < b; },
      [](int64_t a, int64_t b) { return a < b; });
}

template <> ScalarRef scalar<OpKind::Less>(ScalarLowering &L) {
  return L.dag.compare(ScalarOp::Lt, L.x[0], L.x[1]);
}

Types inferAnd(const OpContext &ctx) {
  return inferPointwise(ctx, Accepts::Bool);
}
Outputs referenceAnd(const OpContext &, Inputs in, Results rt) {
  return mapInt(in, rt, [](int64_t a, int64_t b) { return a && b; });
}

template <> ScalarRef scalar<OpKind::And>(ScalarLowering &L) {
  return L.bin(ScalarOp::And, L.x[0], L.x[1]);
}

Types inferOr(const OpContext &ctx) {
  return inferPointwise(ctx, Accepts::Bool);
}
Outputs referenceOr(const OpContext &, Inputs in, Results rt) {
  return mapInt(in, rt, [](int64_t a, int64_t b) { return a || b; });
}

template <> ScalarRef scalar<OpKind::Or>(ScalarLowering &L) {
  return L.bin(ScalarOp::Or, L.x[0], L.x[1]);
}

Types inferNot(const OpContext &ctx) {
  return inferPointwise(ctx, Accepts::Bool);
}
Outputs referenceNot(const OpContext &, Inputs in, Results rt) {
  return mapInt(in, rt, [](int64_t a) { return !a; });
}

template <> ScalarRef scalar<OpKind::Not>(ScalarLowering &L) {
  return L.un(ScalarOp::Not, L.x[0]);
}

//===----------------------------------------------------------------------===//
// Selection and conversion
//===----------------------------------------------------------------------===//

Types inferWhere(const OpContext &ctx) {
  if (failed(requireDType(ctx, 0, Accepts::Bool)))
    return failure();
  const TensorType &x = ctx.operandType(1), &y = ctx.operandType(2);
  if (x.dtype != y.dtype)
    return ctx.emitError() << "operands 1 and 2 must have the same dtype, got " << x.str()
                           << " and " << y.str();
  auto shape = ops::broadcastShapes(ctx, ctx.operandTypes);
  if (failed(shape))
    return failure();
  return std::vector<TensorType>{TensorType(x.dtype, shape.take())};
}
Outputs referenceWhere(const OpContext &ctx, Inputs in, Results rt) {
  return mapNumeric(
      ctx.operandType(1).dtype, in, rt, [](double c, double x, double y) { return c ? x : y; },
      [](int64_t c, int64_t x, int64_t y) { return c ? x : y; });
}

template <> ScalarRef scalar<OpKind::Where>(ScalarLowering &L) {
  return L.sel(L.x[0], L.x[1], L.x[2]);
}

Types inferCast(const OpContext &ctx) {
  return std::vector<TensorType>{TensorType(CastOp(ctx).to(), ctx.operandType(0).shape)};
}
Outputs referenceCast(const OpContext &ctx, Inputs in, Results rt) {
  // The conversion is the store itself: floats round, float -> int truncates
  // toward zero (saturating, NaN -> 0), int -> int wraps, x -> bool is x != 0.
  return mapNumeric(
      ctx.operandType(0).dtype, in, rt, [](double x) { return x; }, [](int64_t x) { return x; });
}

template <> ScalarRef scalar<OpKind::Cast>(ScalarLowering &L) {
  // The conversion is the cast itself (Note in ScalarExpr.h).
  return L.x[0];
}

//===----------------------------------------------------------------------===//
// Bitwise, on integers (ONNX BitwiseAnd/Or/Xor/Not, opset 18)
//===----------------------------------------------------------------------===//

Types inferBitwiseAnd(const OpContext &ctx) {
  return inferPointwise(ctx, Accepts::Integer);
}
Outputs referenceBitwiseAnd(const OpContext &, Inputs in, Results rt) {
  return mapInt(in, rt, [](int64_t a, int64_t b) { return a & b; });
}
template <> ScalarRef scalar<OpKind::BitwiseAnd>(ScalarLowering &L) {
  return L.bin(ScalarOp::BitAnd, L.x[0], L.x[1]);
}

Types inferBitwiseNot(const OpContext &ctx) {
  return inferPointwise(ctx, Accepts::Integer);
}
Outputs referenceBitwiseNot(const OpContext &, Inputs in, Results rt) {
  return mapInt(in, rt, [](int64_t a) { return ~a; });
}
template <> ScalarRef scalar<OpKind::BitwiseNot>(ScalarLowering &L) {
  return L.un(ScalarOp::BitNot, L.x[0]);
}

Types inferBitwiseOr(const OpContext &ctx) {
  return inferPointwise(ctx, Accepts::Integer);
}
Outputs referenceBitwiseOr(const OpContext &, Inputs in, Results rt) {
  return mapInt(in, rt, [](int64_t a, int64_t b) { return a | b; });
}
template <> ScalarRef scalar<OpKind::BitwiseOr>(ScalarLowering &L) {
  return L.bin(ScalarOp::BitOr, L.x[0], L.x[1]);
}

Types inferBitwiseXor(const OpContext &ctx) {
  return inferPointwise(ctx, Accepts::Integer);
}
Outputs referenceBitwiseXor(const OpContext &, Inputs in, Results rt) {
  return mapInt(in, rt, [](int64_t a, int64_t b) { return a ^ b; });
}
template <> ScalarRef scalar<OpKind::BitwiseXor>(ScalarLowering &L) {
  return L.bin(ScalarOp::BitXor, L.x[0], L.x[1]);
}

// Shifts (ONNX BitShift, PyTorch's bitwise_left_shift / bitwise_right_shift):
// ir/IntShift.h defines them, amounts beyond the width included.
Types inferShiftLeft(const OpContext &ctx) {
  return inferPointwise(ctx, Accepts::Integer);
}
Outputs referenceShiftLeft(const OpContext &ctx, Inputs in, Results rt) {
  const unsigned bits = 8 * dtypeSize(ctx.operandType(0).dtype);
  return mapInt(in, rt, [=](int64_t a, int64_t b) { return shiftLeft(a, b, bits); });
}
template <> ScalarRef scalar<OpKind::ShiftLeft>(ScalarLowering &L) {
  return L.bin(ScalarOp::Shl, L.x[0], L.x[1]);
}

Types inferShiftRight(const OpContext &ctx) {
  return inferPointwise(ctx, Accepts::Integer);
}
Outputs referenceShiftRight(const OpContext &ctx, Inputs in, Results rt) {
  const unsigned bits = 8 * dtypeSize(ctx.operandType(0).dtype);
  return mapInt(in, rt, [=](int64_t a, int64_t b) { return shiftRight(a, b, bits); });
}
template <> ScalarRef scalar<OpKind::ShiftRight>(ScalarLowering &L) {
  return L.bin(ScalarOp::Shr, L.x[0], L.x[1]);
}

} // namespace kiln
