//===- Scalar.cpp - Scalar semantics of the elementwise ops -----*- C++ -*-===//
//
// lowerElementwise: each op with the Elementwise trait is expressed once over
// its operands' scalars with the primitives of ir/ScalarExpr.h, by its hook
// `scalar<K>` next to its reference kernel in Elementwise.cpp (what it must
// match). This file prepares the operands in the compute type, calls the
// hook from the op table and casts the result. Code generation (codegen/)
// and every backend read these expressions. See Note [Scalar precision].
//
//===----------------------------------------------------------------------===//
#include "ir/ScalarExpr.h"

#include "ir/Ops.h"
#include "ir/ops/ScalarLowering.h"

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

FailureOr<ScalarRef> lowerElementwise(const OpInfo &info, std::span<const Attribute> attrs,
                                      std::span<const ScalarRef> operands, DType resultType,
                                      ScalarDag &dag, const Location &loc, DiagnosticEngine &diag) {
  if (!info.hasTrait(Elementwise) || !info.scalar)
    return diag.emitError(loc) << "'" << info.mnemonic << "' op is not elementwise";
  if (operands.size() < static_cast<size_t>(info.minOperands))
    return diag.emitError(loc) << "'" << info.mnemonic << "' op expects " << info.minOperands
                               << " operands, got " << operands.size();
  // Ops on the operands' own dtype (integers, bools) and comparisons use the
  // operand dtype; float math uses the compute type.
  DType opType = dag.type(operands[info.kind == OpKind::Where ? 1 : 0]);
  bool isF = isFloat(opType);
  DType ct = isF ? computeDType(opType) : opType;
  ScalarLowering lowering{dag, ct, attrs, {}, isF};
  for (size_t i = 0; i < operands.size(); ++i) {
    bool isCondition = info.kind == OpKind::Where && i == 0;
    lowering.x.push_back(isCondition || info.kind == OpKind::Cast ? operands[i]
                                                                  : dag.cast(operands[i], ct));
  }
  return dag.cast(info.scalar(lowering), resultType);
}

} // namespace kiln
