//===- ScalarLowering.h - Context of the elementwise scalar hooks -*- C++ -*-===//
//
// Private to ir/ops/: what each elementwise op's scalar hook (`scalar<K>`,
// defined next to its reference kernel in Elementwise.cpp) builds its
// expression with. lowerElementwise (Scalar.cpp) prepares the operands in
// the compute type (Note [Scalar precision] there), calls the hook from the
// op table, and casts the result to the result dtype.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Ops.h"
#include "ir/ScalarExpr.h"

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace kiln {

struct ScalarLowering {
  ScalarDag &dag;
  /// The compute type: the operand dtype, f32 for f16/bf16.
  DType type;
  /// The node's attributes (the op's typed view reads them).
  std::span<const Attribute> attrs;
  /// The operands, cast to `type` (where's condition and cast's operand
  /// keep their own dtype).
  std::vector<ScalarRef> x;
  /// Whether the operands are floats.
  bool isFloat = false;

  /// The same context computing in `t`.
  ScalarLowering withType(DType t) const { return ScalarLowering{dag, t, attrs, x, isFloat}; }

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
  ScalarRef isNan(ScalarRef v) { return un(ScalarOp::Not, dag.compare(ScalarOp::Eq, v, v)); }
  /// log(1 + u), accurate for small u (Goldberg): u when 1 + u rounds to
  /// 1, else log(1 + u) * u / ((1 + u) - 1).
  ScalarRef log1p(ScalarRef u) {
    ScalarRef w = add(c(1), u);
    ScalarRef scaled = div(mul(un(ScalarOp::Log, w), u), sub(w, c(1)));
    return sel(dag.compare(ScalarOp::Eq, w, c(1)), u, scaled);
  }
  /// exp(x) - 1, accurate near 0: 2t / (1 - t) with t = tanh(x / 2).
  ScalarRef expm1(ScalarRef v) {
    ScalarRef t = un(ScalarOp::Tanh, mul(v, c(0.5)));
    return div(mul(c(2), t), sub(c(1), t));
  }
};

/// Saturating double -> int64 (the integer bounds of clip).
inline int64_t saturateToInt64(double v) {
  if (v <= -0x1p63)
    return std::numeric_limits<int64_t>::min();
  if (v >= 0x1p63)
    return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(v);
}

} // namespace kiln
