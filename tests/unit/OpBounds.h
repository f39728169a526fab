//===- OpBounds.h - An op's accuracy bound, as the tests apply it -*- C++ -*-===//
//
// The bound itself is the `ulps` column of ir/Ops.def (OpInfo::ulps); this
// header says how ScalarTest and the op matrix apply it to one element:
//
//   - a composite (its scalar lowering is more than one primitive, so it
//     rounds intermediates and may cancel): within `ulps` ulps of the result
//     dtype, or within `ulps` half-ulps of 1.0 absolute;
//   - one primitive applied to the operands (exp(x), a / b, cast): within
//     `ulps` ulps, no absolute floor. Its scalar lowering, evaluated in
//     double, is exact (Note [Scalar precision]); compiled code may use the
//     libmvec bound of the column.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Builder.h"
#include "ir/ScalarExpr.h"

#include <span>
#include <vector>

namespace kiln::testing {

/// Half an ulp of 1.0 in `t` (the absolute floor's unit).
inline double halfUlpOfOne(DType t) {
  return t == DType::F64    ? 0x1p-53
         : t == DType::F16  ? 0x1p-11
         : t == DType::BF16 ? 0x1p-8
                            : 0x1p-24;
}

/// Whether `info`'s scalar lowering on operands of `operandTypes` is one
/// primitive applied to the loaded operands.
inline bool lowersToOnePrimitive(const OpInfo &info, std::span<const Attribute> attrs,
                                 std::span<const DType> operandTypes, DType result) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector quiet(diag);
  ScalarDag dag;
  std::vector<ScalarRef> operands;
  for (size_t k = 0; k < operandTypes.size(); ++k)
    operands.push_back(
        dag.load(operandTypes[k], static_cast<int32_t>(k), dag.constInt(DType::I64, 0)));
  auto r = lowerElementwise(info, attrs, operands, result, dag, Location(), diag);
  if (failed(r) || dag.node(*r).op == ScalarOp::Load)
    return false;
  for (ScalarRef a : dag.node(*r).args)
    if (a.valid() && dag.node(a).op != ScalarOp::Load)
      return false;
  return true;
}

struct Bound {
  int64_t ulps = 0;
  /// Differences up to this absolute value pass too.
  double abs = 0;
};

/// The bound of compiled code for one element of `info` (header comment).
inline Bound compiledBound(const OpInfo &info, DType result, bool onePrimitive) {
  return {info.ulps, onePrimitive ? 0.0 : info.ulps * halfUlpOfOne(result)};
}

} // namespace kiln::testing
