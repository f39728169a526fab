//===- Scalar.cpp - Scalar semantics of the elementwise ops -----*- C++ -*-===//
//
// lowerElementwise: each op with the Elementwise trait expressed once over
// its operands' scalars with the primitives of ir/ScalarExpr.h. Code
// generation (codegen/) and every backend read these expressions; the
// reference kernels next door (Elementwise.cpp) are what they must match.
// See Note [Scalar precision].
//
//===----------------------------------------------------------------------===//
#include "ir/ScalarExpr.h"

#include "ir/Ops.h"

#include <cmath>
#include <limits>
#include <numbers>

// Note [Scalar precision]
//
// The reference kernels compute each op in double and round once to the
// result dtype. Here an op computes in its *compute type*: the operand dtype,
// except f16 and bf16, which compute in f32 (as PyTorch does on CPUs). Ops
// that are one primitive (add, exp, sqrt, max, ...) therefore give exactly
// the reference's bits: IEEE f32 arithmetic equals double arithmetic rounded
// once to f32 for +, -, *, / and sqrt, and the evaluator computes the
// transcendental primitives in double. Composite ops (sigmoid, gelu,
// softplus, elu, leaky_relu, hard_sigmoid, hard_swish, batch-norm-like
// arithmetic) round their intermediates to f32, so they are a few ulps off
// the reference instead of exact: keeping them in f32 is what lets the
// backends vectorize them at full width. Each composite is written in a form
// without catastrophic cancellation where the reference has none (sigmoid
// on the negative side, softplus via an accurate log1p, elu via an accurate
// expm1). Comparisons and selections mirror the reference's std::max /
// std::min / std::clamp order, so signed zeros and NaNs come out the same.

namespace kiln {
namespace {

/// Builds expressions of one compute type.
struct Emitter {
  ScalarDag &dag;
  DType type;

  ScalarRef c(double v) { return dag.constant(type, v); }
  ScalarRef un(ScalarOp op, ScalarRef a) { return dag.unary(op, a); }
  ScalarRef bin(ScalarOp op, ScalarRef a, ScalarRef b) { return dag.binary(op, a, b); }
  ScalarRef add(ScalarRef a, ScalarRef b) { return dag.add(a, b); }
  ScalarRef sub(ScalarRef a, ScalarRef b) { return dag.sub(a, b); }
  ScalarRef mul(ScalarRef a, ScalarRef b) { return dag.mul(a, b); }
  ScalarRef div(ScalarRef a, ScalarRef b) { return dag.div(a, b); }
  ScalarRef lt(ScalarRef a, ScalarRef b) { return dag.compare(ScalarOp::Lt, a, b); }
  ScalarRef sel(ScalarRef cond, ScalarRef a, ScalarRef b) { return dag.select(cond, a, b); }
  /// std::max(a, b): a unless a < b (no NaN handling; NaN in `a` stays).
  ScalarRef stdMax(ScalarRef a, ScalarRef b) { return sel(lt(a, b), b, a); }
  /// std::min(a, b): a unless b < a.
  ScalarRef stdMin(ScalarRef a, ScalarRef b) { return sel(lt(b, a), b, a); }
  /// std::clamp(v, lo, hi): lo if v < lo, else hi if hi < v, else v.
  ScalarRef clamp(ScalarRef v, ScalarRef lo, ScalarRef hi) {
    return sel(lt(v, lo), lo, sel(lt(hi, v), hi, v));
  }
  ScalarRef isNan(ScalarRef x) { return un(ScalarOp::Not, dag.compare(ScalarOp::Eq, x, x)); }
  /// log(1 + u), accurate for small u (Goldberg): u when 1 + u rounds to
  /// 1, else log(1 + u) * u / ((1 + u) - 1).
  ScalarRef log1p(ScalarRef u) {
    ScalarRef w = add(c(1), u);
    ScalarRef scaled = div(mul(un(ScalarOp::Log, w), u), sub(w, c(1)));
    return sel(dag.compare(ScalarOp::Eq, w, c(1)), u, scaled);
  }
  /// exp(x) - 1, accurate near 0: 2t / (1 - t) with t = tanh(x / 2).
  ScalarRef expm1(ScalarRef x) {
    ScalarRef t = un(ScalarOp::Tanh, mul(x, c(0.5)));
    return div(mul(c(2), t), sub(c(1), t));
  }
};

/// The compute type of a float dtype (Note [Scalar precision]).
DType computeType(DType t) {
  return t == DType::F16 || t == DType::BF16 ? DType::F32 : t;
}

/// Saturating double -> int64 for the integer bounds of clip.
int64_t toInt64(double v) {
  if (v <= -0x1p63)
    return std::numeric_limits<int64_t>::min();
  if (v >= 0x1p63)
    return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(v);
}

} // namespace

FailureOr<ScalarRef> lowerElementwise(const OpInfo &info, std::span<const Attribute> attrs,
                                      std::span<const ScalarRef> operands, DType resultType,
                                      ScalarDag &dag, const Location &loc, DiagnosticEngine &diag) {
  if (!info.hasTrait(Elementwise))
    return diag.emitError(loc) << "'" << info.mnemonic << "' op is not elementwise";
  if (operands.size() < static_cast<size_t>(info.minOperands))
    return diag.emitError(loc) << "'" << info.mnemonic << "' op expects " << info.minOperands
                               << " operands, got " << operands.size();
  // Ops on the operands' own dtype (integers, bools) and comparisons use the
  // operand dtype; float math uses the compute type.
  DType opType = dag.type(operands[info.kind == OpKind::Where ? 1 : 0]);
  bool isF = isFloat(opType);
  DType ct = isF ? computeType(opType) : opType;
  Emitter e{dag, ct};
  std::vector<ScalarRef> x;
  for (size_t i = 0; i < operands.size(); ++i) {
    bool isCondition = info.kind == OpKind::Where && i == 0;
    x.push_back(isCondition || info.kind == OpKind::Cast ? operands[i] : dag.cast(operands[i], ct));
  }
  auto done = [&](ScalarRef r) -> FailureOr<ScalarRef> { return dag.cast(r, resultType); };
  auto unaryF = [&](ScalarOp op) { return done(e.un(op, x[0])); };
  auto binaryOp = [&](ScalarOp op) { return done(e.bin(op, x[0], x[1])); };

  switch (info.kind) {
  // Float math: one primitive.
  case OpKind::Ceil:
    return unaryF(ScalarOp::Ceil);
  case OpKind::Cos:
    return unaryF(ScalarOp::Cos);
  case OpKind::Erf:
    return unaryF(ScalarOp::Erf);
  case OpKind::Exp:
    return unaryF(ScalarOp::Exp);
  case OpKind::Floor:
    return unaryF(ScalarOp::Floor);
  case OpKind::Log:
    return unaryF(ScalarOp::Log);
  case OpKind::Reciprocal:
    return unaryF(ScalarOp::Recip);
  case OpKind::Round:
    return unaryF(ScalarOp::RoundEven);
  case OpKind::Rsqrt:
    return unaryF(ScalarOp::Rsqrt);
  case OpKind::Sin:
    return unaryF(ScalarOp::Sin);
  case OpKind::Sqrt:
    return unaryF(ScalarOp::Sqrt);
  case OpKind::Tanh:
    return unaryF(ScalarOp::Tanh);

  // Float math: composites (Note [Scalar precision]).
  case OpKind::Elu: {
    // x > 0 ? x : alpha * expm1(x)
    double alpha = EluOp(attrs).alpha();
    ScalarRef neg = e.mul(e.c(alpha), e.expm1(x[0]));
    return done(e.sel(dag.compare(ScalarOp::Gt, x[0], e.c(0)), x[0], neg));
  }
  case OpKind::Gelu: {
    ScalarRef v = x[0];
    if (GeluOp(attrs).approximate() == "tanh") {
      // 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) (x + 0.044715 x^3), as
      // x / (1 + exp(-2u)): the same value without 1 + tanh(u) cancelling
      // for negative x.
      ScalarRef cube = e.mul(e.mul(v, v), v);
      ScalarRef u2 =
          e.mul(e.c(2 * std::sqrt(2.0 / std::numbers::pi)), e.add(v, e.mul(e.c(0.044715), cube)));
      return done(e.div(v, e.add(e.c(1), e.un(ScalarOp::Exp, e.un(ScalarOp::Neg, u2)))));
    }
    // 0.5 x (1 + erf(x / sqrt(2))), as PyTorch computes it: for x < -3 the
    // sum cancels, an absolute error below 1e-7 |x| (no erfc primitive).
    ScalarRef erf = e.un(ScalarOp::Erf, e.mul(v, e.c(1.0 / std::numbers::sqrt2)));
    return done(e.mul(e.mul(e.c(0.5), v), e.add(e.c(1), erf)));
  }
  case OpKind::HardSigmoid: {
    // clamp(alpha x + beta, 0, 1); NaN stays NaN through the compares.
    HardSigmoidOp op(attrs);
    ScalarRef v = e.add(e.mul(e.c(op.alpha()), x[0]), e.c(op.beta()));
    return done(e.clamp(v, e.c(0), e.c(1)));
  }
  case OpKind::HardSwish: {
    // x * clamp(x / 6 + 0.5, 0, 1)
    ScalarRef v = e.add(e.div(x[0], e.c(6)), e.c(0.5));
    return done(e.mul(x[0], e.clamp(v, e.c(0), e.c(1))));
  }
  case OpKind::LeakyRelu: {
    // x >= 0 ? x : alpha x
    double alpha = LeakyReluOp(attrs).alpha();
    ScalarRef neg = e.mul(e.c(alpha), x[0]);
    return done(e.sel(dag.compare(ScalarOp::Ge, x[0], e.c(0)), x[0], neg));
  }
  case OpKind::Sigmoid: {
    // e = exp(-|x|); (x >= 0 ? 1 : e) / (1 + e): the reference's two
    // branches with one exp.
    ScalarRef ex = e.un(ScalarOp::Exp, e.un(ScalarOp::Neg, e.un(ScalarOp::Abs, x[0])));
    ScalarRef num = e.sel(dag.compare(ScalarOp::Ge, x[0], e.c(0)), e.c(1), ex);
    return done(e.div(num, e.add(e.c(1), ex)));
  }
  case OpKind::Softplus: {
    // max(x, 0) + log1p(exp(-|x|)): the reference's two branches in one.
    ScalarRef ex = e.un(ScalarOp::Exp, e.un(ScalarOp::Neg, e.un(ScalarOp::Abs, x[0])));
    ScalarRef pos = e.sel(dag.compare(ScalarOp::Gt, x[0], e.c(0)), x[0], e.c(0));
    return done(e.add(pos, e.log1p(ex)));
  }

  // Arithmetic on floats and integers.
  case OpKind::Abs:
    return unaryF(ScalarOp::Abs);
  case OpKind::Neg:
    return unaryF(ScalarOp::Neg);
  case OpKind::Add:
    return binaryOp(ScalarOp::Add);
  case OpKind::Sub:
    return binaryOp(ScalarOp::Sub);
  case OpKind::Mul:
    return binaryOp(ScalarOp::Mul);
  case OpKind::Div:
    return binaryOp(ScalarOp::Div);
  case OpKind::Pow:
    return binaryOp(ScalarOp::Pow);
  case OpKind::Max:
    return binaryOp(ScalarOp::Max);
  case OpKind::Min:
    return binaryOp(ScalarOp::Min);
  case OpKind::Relu:
    // NaN or x > 0 ? x : 0, i.e. x <= 0 ? +0 : x (so relu(-0) = +0).
    return done(e.sel(dag.compare(ScalarOp::Le, x[0], e.c(0)), e.c(0), x[0]));
  case OpKind::Sign: {
    ScalarRef zero = e.c(0);
    ScalarRef rest = isF ? e.sel(dag.compare(ScalarOp::Eq, x[0], x[0]), zero, x[0]) : zero;
    rest = e.sel(e.lt(x[0], zero), e.c(-1), rest);
    return done(e.sel(dag.compare(ScalarOp::Gt, x[0], zero), e.c(1), rest));
  }
  case OpKind::Clip: {
    ClipOp op(attrs);
    if (isF)
      return done(e.stdMin(e.stdMax(x[0], e.c(op.min())), e.c(op.max())));
    // Integers clamp in int64 to the integers inside the bounds, then wrap
    // to the dtype like the reference's store.
    Emitter e64{dag, DType::I64};
    ScalarRef v = dag.cast(x[0], DType::I64);
    ScalarRef lo = dag.constInt(DType::I64, toInt64(std::ceil(op.min())));
    ScalarRef hi = dag.constInt(DType::I64, toInt64(std::floor(op.max())));
    return done(e64.stdMin(e64.stdMax(v, lo), hi));
  }

  // Comparisons and logic.
  case OpKind::Equal:
    return done(dag.compare(ScalarOp::Eq, x[0], x[1]));
  case OpKind::Greater:
    return done(dag.compare(ScalarOp::Gt, x[0], x[1]));
  case OpKind::Less:
    return done(dag.compare(ScalarOp::Lt, x[0], x[1]));
  case OpKind::And:
    return binaryOp(ScalarOp::And);
  case OpKind::Or:
    return binaryOp(ScalarOp::Or);
  case OpKind::Not:
    return unaryF(ScalarOp::Not);

  // Selection and conversion.
  case OpKind::Where:
    return done(e.sel(x[0], x[1], x[2]));
  case OpKind::Cast:
    // The conversion is the cast itself (Note in ScalarExpr.h).
    return done(x[0]);

  default:
    return diag.emitError(loc) << "'" << info.mnemonic << "' op has no scalar semantics";
  }
}

} // namespace kiln
