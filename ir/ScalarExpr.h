//===- ScalarExpr.h - Scalar expressions: per-element semantics -*- C++ -*-===//
//
// A small SSA DAG of scalar operations. It is the one place where the
// per-element meaning of an elementwise op is written for code generation:
// each Elementwise op of the table has a `scalar<Class>` hook (in
// ir/ops/Scalar.cpp) that expresses the op over its operands' scalars with
// the primitives below, e.g.
//
//   sigmoid(x)  = recip(1 + exp(-x))
//   gelu(x)     = 0.5 * x * (1 + erf(x * 0.70710678118654752))
//
// Kernels (codegen/KernelIR.h) embed these expressions and every backend
// (LLVM for CPUs, CUDA C) lowers the primitives only. A DAG node is an index
// into ScalarDag::nodes; operands refer to earlier nodes, so the list is in
// topological order. Leaves that read memory or loop indices are defined by
// the kernel IR; this file knows them only as opaque kinds.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/IntPow.h"   // wrappingIntPow
#include "ir/IntShift.h" // shiftLeft, shiftRight

#include "ir/Attribute.h"
#include "ir/DType.h"
#include "ir/Diagnostics.h"
#include "ir/Support.h"

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln {

/// Primitive scalar operations, one per row of ir/ScalarOps.def. Every
/// backend implements all of them.
///
/// Exact meaning (evaluateScalars is the executable definition):
///   - float nodes compute in double and round to their dtype; f16 and bf16
///     round through float (as Tensor::setDouble does), so a backend computes
///     them in f32 and rounds the result of every node;
///   - integer nodes compute in int64 with two's complement wrap-around and
///     truncate to their width; u8 values are 0..255 (unsigned compares);
///   - Div / Rem on integers truncate toward zero; x / 0 = x % 0 = 0 and
///     INT_MIN / -1 wraps (never a trap);
///   - Max / Min on floats: NaN if either operand is NaN, else std::max /
///     std::min, which keep the first operand on ties (max(-0, +0) = -0);
///   - Pow on integers is exact repeated squaring with wrap-around; a
///     negative exponent gives 1 for base 1, +-1 for base -1, else 0;
///   - Cast: Note [Scalar casts] below;
///   - comparisons on floats are ordered (false when either is NaN).
//
// Note [Scalar casts]: Cast float -> int truncates toward zero, saturates to
// the target's range and maps NaN to 0; int -> int wraps; x -> bool is
// x != 0 (NaN -> true); int -> float goes through double.
enum class ScalarOp : uint8_t {
#define SCALAR_OP(E, N, A, C, Cost, Fold, FE, IE) E,
#include "ir/ScalarOps.def"
};

constexpr unsigned kNumScalarOps = 0
#define SCALAR_OP(E, N, A, C, Cost, Fold, FE, IE) +1
#include "ir/ScalarOps.def"
    ;

/// What operands and result a scalar op has (see ir/ScalarOps.def).
enum class ScalarClass : uint8_t {
  Leaf,
  Unary,
  FloatUnary,
  BoolUnary,
  Cast,
  Binary,
  BoolBinary,
  Compare,
  Select,
  IntUnary,
  IntBinary,
};

/// One row of ir/ScalarOps.def.
struct ScalarOpInfo {
  const char *name;
  unsigned arity;
  ScalarClass cls;
  /// Cost of one evaluation in units of an add (the fusion planner's).
  int cost;
  /// Folded by the builder when both operands are i64 constants.
  bool foldI64;
};

const ScalarOpInfo &scalarOpInfo(ScalarOp op);
/// Number of operands of `op`.
inline unsigned scalarArity(ScalarOp op) {
  return scalarOpInfo(op).arity;
}
/// Text name (`exp`, `add`, ...), used by kernel printing.
inline const char *scalarOpName(ScalarOp op) {
  return scalarOpInfo(op).name;
}
inline ScalarClass scalarClass(ScalarOp op) {
  return scalarOpInfo(op).cls;
}

/// A reference to a node of a ScalarDag.
struct ScalarRef {
  int32_t id = -1;
  bool valid() const { return id >= 0; }
  bool operator==(const ScalarRef &o) const = default;
};

struct ScalarNode {
  ScalarOp op;
  DType type;
  std::array<ScalarRef, 3> args{};
  double fvalue = 0;
  int64_t ivalue = 0;
  int32_t slot = 0;
  bool operator==(const ScalarNode &o) const = default;
};

/// An append-only scalar DAG with structural hashing (the same node is
/// created once) and builder helpers that also check operand types.
class ScalarDag {
public:
  const std::vector<ScalarNode> &nodes() const { return nodes_; }
  const ScalarNode &node(ScalarRef r) const { return nodes_[static_cast<size_t>(r.id)]; }
  DType type(ScalarRef r) const { return node(r).type; }

  /// Adds (or finds) a node.
  ScalarRef add(const ScalarNode &n);

  ScalarRef constFloat(DType t, double v);
  ScalarRef constInt(DType t, int64_t v);
  /// A constant of `t` holding `v` (float types get v, others trunc(v)).
  ScalarRef constant(DType t, double v);
  ScalarRef index(int32_t slot);
  /// The i64 run-time size number `slot` (a kernel's symbol, codegen/KernelIR.h).
  ScalarRef size(int32_t slot);
  ScalarRef load(DType t, int32_t buffer, ScalarRef offset);
  ScalarRef stageValue(DType t, int32_t stage);
  ScalarRef unary(ScalarOp op, ScalarRef a);
  ScalarRef binary(ScalarOp op, ScalarRef a, ScalarRef b);
  ScalarRef compare(ScalarOp op, ScalarRef a, ScalarRef b);
  ScalarRef select(ScalarRef c, ScalarRef a, ScalarRef b);
  ScalarRef cast(ScalarRef a, DType to);

  // Shorthands.
  ScalarRef add(ScalarRef a, ScalarRef b) { return binary(ScalarOp::Add, a, b); }
  ScalarRef sub(ScalarRef a, ScalarRef b) { return binary(ScalarOp::Sub, a, b); }
  ScalarRef mul(ScalarRef a, ScalarRef b) { return binary(ScalarOp::Mul, a, b); }
  ScalarRef div(ScalarRef a, ScalarRef b) { return binary(ScalarOp::Div, a, b); }

  /// `%3 = exp f32 %2` lines, one per node.
  std::string str() const;

private:
  std::vector<ScalarNode> nodes_;
  /// Structural hash -> ids of the nodes with that hash.
  std::unordered_map<uint64_t, std::vector<int32_t>> index_;
};

/// A scalar value during evaluation: floats in `f`, integers and bools in `i`.
struct ScalarValue {
  double f = 0;
  int64_t i = 0;
};

/// Evaluates every node of `dag` in order (floats in double, integers in
/// int64, with results rounded to each node's dtype) and returns the values.
/// `leaf` supplies Index, Load, StageValue and Size nodes given the values so far.
/// This is the scalar semantics in executable form: tests compare it with
/// the reference kernels, and the kernel interpreter runs on it.
std::vector<ScalarValue> evaluateScalars(
    const ScalarDag &dag,
    const std::function<ScalarValue(const ScalarNode &, const std::vector<ScalarValue> &)> &leaf);

struct OpInfo;

/// The scalar semantics of an Elementwise op (defined in ir/ops/Scalar.cpp,
/// next to the reference kernels): builds the op's result from its
/// operands' scalars (already of the operand dtypes) into `dag`. Fails, with
/// a diagnostic at `loc`, for ops without the Elementwise trait.
FailureOr<ScalarRef> lowerElementwise(const OpInfo &info, std::span<const Attribute> attrs,
                                      std::span<const ScalarRef> operands, DType resultType,
                                      ScalarDag &dag, const Location &loc, DiagnosticEngine &diag);

} // namespace kiln
