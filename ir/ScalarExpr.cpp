//===- ScalarExpr.cpp - Scalar expressions: per-element semantics ---------===//
//
// The ScalarDag (structural hashing, type-checked builders, text form) and
// evaluateScalars, the executable definition of every primitive. The
// evaluator mirrors the reference kernels' arithmetic (see Note [Elementwise
// arithmetic] in ir/ops/Elementwise.cpp): floats compute in double and are
// rounded to the node's dtype the way Tensor::setDouble stores them (f16 and
// bf16 through float), integers compute in int64 with two's complement
// wrap-around and are truncated to the node's width.
//
//===----------------------------------------------------------------------===//
#include "ir/ScalarExpr.h"

#include "ir/Attribute.h"
#include "ir/DTypeCodec.h"

#include <bit>
#include <cmath>
#include <limits>
#include <sstream>

namespace kiln {

//===----------------------------------------------------------------------===//
// Op properties
//===----------------------------------------------------------------------===//

const ScalarOpInfo &scalarOpInfo(ScalarOp op) {
  static constexpr ScalarOpInfo kTable[] = {
#define SCALAR_OP(E, N, A, C, Cost, Fold, FE, IE) {N, A, ScalarClass::C, Cost, Fold},
#include "ir/ScalarOps.def"
  };
  return kTable[static_cast<size_t>(op)];
}

//===----------------------------------------------------------------------===//
// Rounding to a dtype
//===----------------------------------------------------------------------===//

namespace {

/// `v` stored as float dtype `t` and read back (Tensor::setDouble/getDouble).
double roundFloat(DType t, double v) {
  return isFloat(t) ? roundThroughDType(t, v) : v;
}

/// `v` truncated to integer dtype `t` (Tensor::setInt), bool as v != 0.
int64_t wrapInt(DType t, int64_t v) {
  return isFloat(t) ? v : wrapThroughDType(t, v);
}

/// A float converted to integer dtype `t`: truncation toward zero,
/// saturating, NaN -> 0; bool is v != 0 (Tensor::setDouble).
int64_t floatToIntType(DType t, double v) {
  KILN_ASSERT(!isFloat(t) && "not an integer dtype");
  return floatThroughDType(t, v);
}

bool sameBits(double a, double b) {
  return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b);
}

bool nodesEqual(const ScalarNode &a, const ScalarNode &b) {
  return a.op == b.op && a.type == b.type && a.args == b.args && sameBits(a.fvalue, b.fvalue) &&
         a.ivalue == b.ivalue && a.slot == b.slot;
}

uint64_t hashNode(const ScalarNode &n) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  mix(static_cast<uint64_t>(n.op));
  mix(static_cast<uint64_t>(n.type));
  for (const ScalarRef &r : n.args)
    mix(static_cast<uint64_t>(static_cast<uint32_t>(r.id)));
  mix(std::bit_cast<uint64_t>(n.fvalue));
  mix(static_cast<uint64_t>(n.ivalue));
  mix(static_cast<uint64_t>(static_cast<uint32_t>(n.slot)));
  return h;
}

int64_t wrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
int64_t wrapMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
int64_t wrapNeg(int64_t a) {
  return static_cast<int64_t>(0 - static_cast<uint64_t>(a));
}

/// Integer division and remainder: truncation toward zero, x / 0 = 0,
/// x % 0 = 0, INT64_MIN / -1 wraps.
int64_t intDiv(int64_t a, int64_t b) {
  if (b == 0)
    return 0;
  if (b == -1)
    return wrapNeg(a);
  return a / b;
}
int64_t intRem(int64_t a, int64_t b) {
  if (b == 0 || b == -1)
    return 0;
  return a % b;
}

double roundHalfToEven(double x) {
  if (std::fabs(x - std::trunc(x)) == 0.5)
    return 2.0 * std::round(x / 2.0);
  return std::round(x);
}

double nan() {
  return std::numeric_limits<double>::quiet_NaN();
}

/// Max / min on floats: NaN if either is NaN, else std::max / std::min.
double nanMax(double x, double y) {
  return std::isnan(x) || std::isnan(y) ? nan() : std::max(x, y);
}
double nanMin(double x, double y) {
  return std::isnan(x) || std::isnan(y) ? nan() : std::min(x, y);
}

/// The `floatEval` column of ir/ScalarOps.def.
double evalFloatOp(ScalarOp op, double x, [[maybe_unused]] double y) {
  switch (op) {
#define SCALAR_OP(E, N, A, C, Cost, Fold, FE, IE)                                                  \
  case ScalarOp::E:                                                                                \
    return static_cast<double>(FE);
#include "ir/ScalarOps.def"
  }
  kiln_unreachable("bad scalar op");
}

/// The `intEval` column of ir/ScalarOps.def, before wrapping to `t`.
int64_t evalIntOp(ScalarOp op, DType t, int64_t x, [[maybe_unused]] int64_t y) {
  // Float math on an integer: in double, back by truncation.
  auto viaDouble = [&] { return floatToIntType(t, evalFloatOp(op, static_cast<double>(x), 0)); };
  switch (op) {
#define SCALAR_OP(E, N, A, C, Cost, Fold, FE, IE)                                                  \
  case ScalarOp::E:                                                                                \
    return static_cast<int64_t>(IE);
#include "ir/ScalarOps.def"
  }
  kiln_unreachable("bad scalar op");
}

} // namespace

//===----------------------------------------------------------------------===//
// ScalarDag
//===----------------------------------------------------------------------===//

ScalarRef ScalarDag::add(const ScalarNode &n) {
  for (unsigned i = 0; i < scalarArity(n.op); ++i)
    KILN_ASSERT(n.args[i].valid() && n.args[i].id < static_cast<int32_t>(nodes_.size()) &&
                "operands must be earlier nodes");
  uint64_t h = hashNode(n);
  std::vector<int32_t> &bucket = index_[h];
  for (int32_t id : bucket)
    if (nodesEqual(nodes_[static_cast<size_t>(id)], n))
      return ScalarRef{id};
  auto id = static_cast<int32_t>(nodes_.size());
  nodes_.push_back(n);
  bucket.push_back(id);
  return ScalarRef{id};
}

ScalarRef ScalarDag::constFloat(DType t, double v) {
  KILN_ASSERT(isFloat(t) && "constFloat of a non-float type");
  ScalarNode n{ScalarOp::ConstFloat, t};
  n.fvalue = roundFloat(t, v);
  return add(n);
}

ScalarRef ScalarDag::constInt(DType t, int64_t v) {
  KILN_ASSERT(!isFloat(t) && "constInt of a float type");
  ScalarNode n{ScalarOp::ConstInt, t};
  n.ivalue = wrapInt(t, v);
  return add(n);
}

ScalarRef ScalarDag::constant(DType t, double v) {
  if (isFloat(t))
    return constFloat(t, v);
  return constInt(t, floatToIntType(t, v));
}

ScalarRef ScalarDag::index(int32_t slot) {
  ScalarNode n{ScalarOp::Index, DType::I64};
  n.slot = slot;
  return add(n);
}

ScalarRef ScalarDag::size(int32_t slot) {
  ScalarNode n{ScalarOp::Size, DType::I64};
  n.slot = slot;
  return add(n);
}

ScalarRef ScalarDag::load(DType t, int32_t buffer, ScalarRef offset) {
  KILN_ASSERT(type(offset) == DType::I64 && "load offsets are i64");
  ScalarNode n{ScalarOp::Load, t};
  n.slot = buffer;
  n.args[0] = offset;
  return add(n);
}

ScalarRef ScalarDag::stageValue(DType t, int32_t stage) {
  ScalarNode n{ScalarOp::StageValue, t};
  n.slot = stage;
  return add(n);
}

ScalarRef ScalarDag::unary(ScalarOp op, ScalarRef a) {
  ScalarClass cls = scalarClass(op);
  KILN_ASSERT((cls == ScalarClass::Unary || cls == ScalarClass::FloatUnary ||
               cls == ScalarClass::BoolUnary || cls == ScalarClass::IntUnary) &&
              "not a unary op");
  DType t = type(a);
  if (cls == ScalarClass::IntUnary)
    KILN_ASSERT(isInteger(t) && "bitwise op on a non-integer operand");
  else if (cls == ScalarClass::BoolUnary)
    KILN_ASSERT(t == DType::Bool && "'not' takes a bool");
  else if (cls == ScalarClass::FloatUnary)
    KILN_ASSERT(isFloat(t) && "float-only scalar op on a non-float operand");
  else
    KILN_ASSERT(t != DType::Bool && "arithmetic on a bool");
  ScalarNode n{op, t};
  n.args[0] = a;
  return add(n);
}

ScalarRef ScalarDag::binary(ScalarOp op, ScalarRef a, ScalarRef b) {
  ScalarClass cls = scalarClass(op);
  KILN_ASSERT((cls == ScalarClass::Binary || cls == ScalarClass::BoolBinary ||
               cls == ScalarClass::IntBinary) &&
              "not a binary arithmetic op");
  DType t = type(a);
  KILN_ASSERT(type(b) == t && "binary operands must have one type");
  if (cls == ScalarClass::IntBinary)
    KILN_ASSERT(isInteger(t) && "bitwise op on non-integer operands");
  else if (cls == ScalarClass::BoolBinary)
    KILN_ASSERT(t == DType::Bool && "'and'/'or' take bools");
  else
    KILN_ASSERT(t != DType::Bool && "arithmetic on bools");
  // Fold i64 index arithmetic on constants and with identities; the
  // semantics are exact, so this changes no value.
  if (t == DType::I64) {
    const ScalarNode &na = node(a), &nb = node(b);
    bool ca = na.op == ScalarOp::ConstInt, cb = nb.op == ScalarOp::ConstInt;
    if (ca && cb && scalarOpInfo(op).foldI64)
      return constInt(t, evalIntOp(op, t, na.ivalue, nb.ivalue));
    if (cb && nb.ivalue == 0 && (op == ScalarOp::Add || op == ScalarOp::Sub))
      return a;
    if (ca && na.ivalue == 0 && op == ScalarOp::Add)
      return b;
    if (cb && nb.ivalue == 1 && (op == ScalarOp::Mul || op == ScalarOp::Div))
      return a;
    if (ca && na.ivalue == 1 && op == ScalarOp::Mul)
      return b;
    if (((cb && nb.ivalue == 0) || (ca && na.ivalue == 0)) && op == ScalarOp::Mul)
      return constInt(t, 0);
    if (cb && nb.ivalue == 1 && op == ScalarOp::Rem)
      return constInt(t, 0);
  }
  ScalarNode n{op, t};
  n.args = {a, b, ScalarRef{}};
  return add(n);
}

ScalarRef ScalarDag::compare(ScalarOp op, ScalarRef a, ScalarRef b) {
  KILN_ASSERT(scalarClass(op) == ScalarClass::Compare && "not a comparison");
  KILN_ASSERT(type(a) == type(b) && "compared operands must have one type");
  ScalarNode n{op, DType::Bool};
  n.args = {a, b, ScalarRef{}};
  return add(n);
}

ScalarRef ScalarDag::select(ScalarRef c, ScalarRef a, ScalarRef b) {
  KILN_ASSERT(type(c) == DType::Bool && "select condition must be bool");
  KILN_ASSERT(type(a) == type(b) && "select arms must have one type");
  if (a == b)
    return a;
  const ScalarNode &nc = node(c);
  if (nc.op == ScalarOp::ConstInt)
    return nc.ivalue ? a : b;
  ScalarNode n{ScalarOp::Select, type(a)};
  n.args = {c, a, b};
  return add(n);
}

ScalarRef ScalarDag::cast(ScalarRef a, DType to) {
  if (type(a) == to)
    return a;
  ScalarNode n{ScalarOp::Cast, to};
  n.args[0] = a;
  return add(n);
}

std::string ScalarDag::str() const {
  std::ostringstream os;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const ScalarNode &n = nodes_[i];
    os << "%" << i << " = " << scalarOpName(n.op) << " " << dtypeName(n.type);
    switch (n.op) {
    case ScalarOp::ConstFloat:
      os << " " << formatDouble(n.fvalue);
      break;
    case ScalarOp::ConstInt:
      os << " " << n.ivalue;
      break;
    case ScalarOp::Index:
    case ScalarOp::StageValue:
    case ScalarOp::Size:
      os << " #" << n.slot;
      break;
    case ScalarOp::Load:
      os << " #" << n.slot << "[%" << n.args[0].id << "]";
      break;
    default:
      for (unsigned k = 0; k < scalarArity(n.op); ++k)
        os << (k ? ", %" : " %") << n.args[k].id;
      break;
    }
    os << "\n";
  }
  return os.str();
}

//===----------------------------------------------------------------------===//
// Evaluation
//===----------------------------------------------------------------------===//

namespace {

ScalarValue evalCast(const ScalarNode &n, const ScalarValue &a, DType argType) {
  ScalarValue r;
  DType to = n.type;
  if (isFloat(argType)) {
    if (isFloat(to))
      r.f = roundFloat(to, a.f);
    else
      r.i = floatToIntType(to, a.f);
  } else if (isFloat(to)) {
    r.f = roundFloat(to, static_cast<double>(a.i));
  } else {
    r.i = wrapInt(to, a.i);
  }
  return r;
}

ScalarValue evalCompare(const ScalarNode &n, const ScalarValue &a, const ScalarValue &b,
                        DType argType) {
  ScalarValue r;
  r.i =
      isFloat(argType) ? evalFloatOp(n.op, a.f, b.f) != 0 : evalIntOp(n.op, argType, a.i, b.i) != 0;
  return r;
}

/// Unary and binary arithmetic: float nodes in double rounded to the
/// node's dtype, the others in int64 wrapped to its width.
ScalarValue evalArith(const ScalarNode &n, const ScalarValue &a, const ScalarValue &b) {
  ScalarValue r;
  if (isFloat(n.type))
    r.f = roundFloat(n.type, evalFloatOp(n.op, a.f, b.f));
  else
    r.i = wrapInt(n.type, evalIntOp(n.op, n.type, a.i, b.i));
  return r;
}

} // namespace

std::vector<ScalarValue> evaluateScalars(
    const ScalarDag &dag,
    const std::function<ScalarValue(const ScalarNode &, const std::vector<ScalarValue> &)> &leaf) {
  const std::vector<ScalarNode> &nodes = dag.nodes();
  std::vector<ScalarValue> vals;
  vals.reserve(nodes.size());
  for (const ScalarNode &n : nodes) {
    ScalarValue r;
    auto arg = [&](unsigned k) -> const ScalarValue & {
      return vals[static_cast<size_t>(n.args[k].id)];
    };
    switch (n.op) {
    case ScalarOp::ConstFloat:
      r.f = n.fvalue;
      break;
    case ScalarOp::ConstInt:
      r.i = n.ivalue;
      break;
    case ScalarOp::Index:
    case ScalarOp::Load:
    case ScalarOp::StageValue:
    case ScalarOp::Size:
      r = leaf(n, vals);
      if (isFloat(n.type))
        r.f = roundFloat(n.type, r.f);
      else
        r.i = wrapInt(n.type, r.i);
      break;
    case ScalarOp::Select:
      r = arg(0).i != 0 ? arg(1) : arg(2);
      break;
    case ScalarOp::Cast:
      r = evalCast(n, arg(0), dag.type(n.args[0]));
      break;
    default:
      if (scalarClass(n.op) == ScalarClass::Compare)
        r = evalCompare(n, arg(0), arg(1), dag.type(n.args[0]));
      else
        r = evalArith(n, arg(0), scalarArity(n.op) == 2 ? arg(1) : ScalarValue{});
      break;
    }
    vals.push_back(r);
  }
  return vals;
}

} // namespace kiln
