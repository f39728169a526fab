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

#include <bit>
#include <cmath>
#include <limits>
#include <sstream>

namespace kiln {

//===----------------------------------------------------------------------===//
// Op properties
//===----------------------------------------------------------------------===//

unsigned scalarArity(ScalarOp op) {
  switch (op) {
  case ScalarOp::ConstFloat:
  case ScalarOp::ConstInt:
  case ScalarOp::Index:
  case ScalarOp::StageValue:
    return 0;
  case ScalarOp::Load:
  case ScalarOp::Neg:
  case ScalarOp::Abs:
  case ScalarOp::Exp:
  case ScalarOp::Log:
  case ScalarOp::Sqrt:
  case ScalarOp::Rsqrt:
  case ScalarOp::Recip:
  case ScalarOp::Tanh:
  case ScalarOp::Erf:
  case ScalarOp::Sin:
  case ScalarOp::Cos:
  case ScalarOp::Floor:
  case ScalarOp::Ceil:
  case ScalarOp::RoundEven:
  case ScalarOp::Not:
  case ScalarOp::Cast:
    return 1;
  case ScalarOp::Add:
  case ScalarOp::Sub:
  case ScalarOp::Mul:
  case ScalarOp::Div:
  case ScalarOp::Rem:
  case ScalarOp::Max:
  case ScalarOp::Min:
  case ScalarOp::Pow:
  case ScalarOp::And:
  case ScalarOp::Or:
  case ScalarOp::Eq:
  case ScalarOp::Lt:
  case ScalarOp::Le:
  case ScalarOp::Gt:
  case ScalarOp::Ge:
    return 2;
  case ScalarOp::Select:
    return 3;
  }
  kiln_unreachable("bad scalar op");
}

const char *scalarOpName(ScalarOp op) {
  switch (op) {
  case ScalarOp::ConstFloat:
    return "constf";
  case ScalarOp::ConstInt:
    return "consti";
  case ScalarOp::Index:
    return "index";
  case ScalarOp::Load:
    return "load";
  case ScalarOp::StageValue:
    return "stage";
  case ScalarOp::Neg:
    return "neg";
  case ScalarOp::Abs:
    return "abs";
  case ScalarOp::Exp:
    return "exp";
  case ScalarOp::Log:
    return "log";
  case ScalarOp::Sqrt:
    return "sqrt";
  case ScalarOp::Rsqrt:
    return "rsqrt";
  case ScalarOp::Recip:
    return "recip";
  case ScalarOp::Tanh:
    return "tanh";
  case ScalarOp::Erf:
    return "erf";
  case ScalarOp::Sin:
    return "sin";
  case ScalarOp::Cos:
    return "cos";
  case ScalarOp::Floor:
    return "floor";
  case ScalarOp::Ceil:
    return "ceil";
  case ScalarOp::RoundEven:
    return "roundeven";
  case ScalarOp::Not:
    return "not";
  case ScalarOp::Cast:
    return "cast";
  case ScalarOp::Add:
    return "add";
  case ScalarOp::Sub:
    return "sub";
  case ScalarOp::Mul:
    return "mul";
  case ScalarOp::Div:
    return "div";
  case ScalarOp::Rem:
    return "rem";
  case ScalarOp::Max:
    return "max";
  case ScalarOp::Min:
    return "min";
  case ScalarOp::Pow:
    return "pow";
  case ScalarOp::And:
    return "and";
  case ScalarOp::Or:
    return "or";
  case ScalarOp::Eq:
    return "eq";
  case ScalarOp::Lt:
    return "lt";
  case ScalarOp::Le:
    return "le";
  case ScalarOp::Gt:
    return "gt";
  case ScalarOp::Ge:
    return "ge";
  case ScalarOp::Select:
    return "select";
  }
  kiln_unreachable("bad scalar op");
}

//===----------------------------------------------------------------------===//
// Rounding to a dtype
//===----------------------------------------------------------------------===//

namespace {

/// `v` stored as float dtype `t` and read back (Tensor::setDouble/getDouble).
double roundFloat(DType t, double v) {
  switch (t) {
  case DType::F32:
    return static_cast<float>(v);
  case DType::F16:
    return halfToFloat(floatToHalf(static_cast<float>(v)));
  case DType::BF16:
    return bf16ToFloat(floatToBf16(static_cast<float>(v)));
  default:
    return v;
  }
}

/// `v` truncated to integer dtype `t` (Tensor::setInt), bool as v != 0.
int64_t wrapInt(DType t, int64_t v) {
  switch (t) {
  case DType::I8:
    return static_cast<int8_t>(v);
  case DType::U8:
    return static_cast<uint8_t>(v);
  case DType::I32:
    return static_cast<int32_t>(v);
  case DType::Bool:
    return v != 0;
  default:
    return v;
  }
}

/// A float converted to integer dtype `t`: truncation toward zero,
/// saturating, NaN -> 0; bool is v != 0 (Tensor::setDouble).
int64_t floatToIntType(DType t, double v) {
  switch (t) {
  case DType::I8:
    return saturatingFloatToInt<int8_t>(v);
  case DType::U8:
    return saturatingFloatToInt<uint8_t>(v);
  case DType::I32:
    return saturatingFloatToInt<int32_t>(v);
  case DType::I64:
    return saturatingFloatToInt<int64_t>(v);
  case DType::Bool:
    return v != 0.0;
  default:
    kiln_unreachable("not an integer dtype");
  }
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

bool isFloatOnlyUnary(ScalarOp op) {
  switch (op) {
  case ScalarOp::Exp:
  case ScalarOp::Log:
  case ScalarOp::Sqrt:
  case ScalarOp::Rsqrt:
  case ScalarOp::Recip:
  case ScalarOp::Tanh:
  case ScalarOp::Erf:
  case ScalarOp::Sin:
  case ScalarOp::Cos:
  case ScalarOp::Floor:
  case ScalarOp::Ceil:
  case ScalarOp::RoundEven:
    return true;
  default:
    return false;
  }
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
  KILN_ASSERT(scalarArity(op) == 1 && op != ScalarOp::Load && op != ScalarOp::Cast);
  DType t = type(a);
  if (op == ScalarOp::Not)
    KILN_ASSERT(t == DType::Bool && "'not' takes a bool");
  else if (isFloatOnlyUnary(op))
    KILN_ASSERT(isFloat(t) && "float-only scalar op on a non-float operand");
  else
    KILN_ASSERT(t != DType::Bool && "arithmetic on a bool");
  ScalarNode n{op, t};
  n.args[0] = a;
  return add(n);
}

ScalarRef ScalarDag::binary(ScalarOp op, ScalarRef a, ScalarRef b) {
  KILN_ASSERT(scalarArity(op) == 2 && op < ScalarOp::Eq && "not a binary arithmetic op");
  DType t = type(a);
  KILN_ASSERT(type(b) == t && "binary operands must have one type");
  if (op == ScalarOp::And || op == ScalarOp::Or)
    KILN_ASSERT(t == DType::Bool && "'and'/'or' take bools");
  else
    KILN_ASSERT(t != DType::Bool && "arithmetic on bools");
  // Fold i64 index arithmetic on constants and with identities; the
  // semantics are exact, so this changes no value.
  if (t == DType::I64) {
    const ScalarNode &na = node(a), &nb = node(b);
    bool ca = na.op == ScalarOp::ConstInt, cb = nb.op == ScalarOp::ConstInt;
    if (ca && cb) {
      int64_t x = na.ivalue, y = nb.ivalue;
      switch (op) {
      case ScalarOp::Add:
        return constInt(t, wrapAdd(x, y));
      case ScalarOp::Sub:
        return constInt(t, wrapSub(x, y));
      case ScalarOp::Mul:
        return constInt(t, wrapMul(x, y));
      case ScalarOp::Div:
        return constInt(t, intDiv(x, y));
      case ScalarOp::Rem:
        return constInt(t, intRem(x, y));
      case ScalarOp::Max:
        return constInt(t, std::max(x, y));
      case ScalarOp::Min:
        return constInt(t, std::min(x, y));
      default:
        break;
      }
    }
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
  KILN_ASSERT(op >= ScalarOp::Eq && op <= ScalarOp::Ge && "not a comparison");
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

ScalarValue evalUnary(const ScalarNode &n, const ScalarValue &a, DType argType) {
  ScalarValue r;
  if (n.op == ScalarOp::Cast) {
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
  if (n.op == ScalarOp::Not) {
    r.i = a.i == 0;
    return r;
  }
  if (!isFloat(n.type)) {
    switch (n.op) {
    case ScalarOp::Neg:
      r.i = wrapInt(n.type, wrapNeg(a.i));
      return r;
    case ScalarOp::Abs:
      r.i = wrapInt(n.type, a.i < 0 ? wrapNeg(a.i) : a.i);
      return r;
    case ScalarOp::Floor:
    case ScalarOp::Ceil:
    case ScalarOp::RoundEven:
      r.i = a.i;
      return r;
    default: {
      // Float-only math on an integer: through double, back by truncation.
      ScalarNode fn = n;
      fn.type = DType::F64;
      ScalarValue fa;
      fa.f = static_cast<double>(a.i);
      r.i = floatToIntType(n.type, evalUnary(fn, fa, DType::F64).f);
      return r;
    }
    }
  }
  double x = a.f, v = 0;
  switch (n.op) {
  case ScalarOp::Neg:
    v = -x;
    break;
  case ScalarOp::Abs:
    v = std::fabs(x);
    break;
  case ScalarOp::Exp:
    v = std::exp(x);
    break;
  case ScalarOp::Log:
    v = std::log(x);
    break;
  case ScalarOp::Sqrt:
    v = std::sqrt(x);
    break;
  case ScalarOp::Rsqrt:
    v = 1.0 / std::sqrt(x);
    break;
  case ScalarOp::Recip:
    v = 1.0 / x;
    break;
  case ScalarOp::Tanh:
    v = std::tanh(x);
    break;
  case ScalarOp::Erf:
    v = std::erf(x);
    break;
  case ScalarOp::Sin:
    v = std::sin(x);
    break;
  case ScalarOp::Cos:
    v = std::cos(x);
    break;
  case ScalarOp::Floor:
    v = std::floor(x);
    break;
  case ScalarOp::Ceil:
    v = std::ceil(x);
    break;
  case ScalarOp::RoundEven:
    v = roundHalfToEven(x);
    break;
  default:
    kiln_unreachable("not a unary op");
  }
  r.f = roundFloat(n.type, v);
  return r;
}

ScalarValue evalBinary(const ScalarNode &n, const ScalarValue &a, const ScalarValue &b,
                       DType argType) {
  ScalarValue r;
  if (n.op >= ScalarOp::Eq && n.op <= ScalarOp::Ge) {
    bool c = false;
    if (isFloat(argType)) {
      double x = a.f, y = b.f;
      c = n.op == ScalarOp::Eq   ? x == y
          : n.op == ScalarOp::Lt ? x < y
          : n.op == ScalarOp::Le ? x <= y
          : n.op == ScalarOp::Gt ? x > y
                                 : x >= y;
    } else {
      int64_t x = a.i, y = b.i;
      c = n.op == ScalarOp::Eq   ? x == y
          : n.op == ScalarOp::Lt ? x < y
          : n.op == ScalarOp::Le ? x <= y
          : n.op == ScalarOp::Gt ? x > y
                                 : x >= y;
    }
    r.i = c;
    return r;
  }
  if (isFloat(n.type)) {
    double x = a.f, y = b.f, v = 0;
    switch (n.op) {
    case ScalarOp::Add:
      v = x + y;
      break;
    case ScalarOp::Sub:
      v = x - y;
      break;
    case ScalarOp::Mul:
      v = x * y;
      break;
    case ScalarOp::Div:
      v = x / y;
      break;
    case ScalarOp::Rem:
      v = std::fmod(x, y);
      break;
    case ScalarOp::Max:
      v = std::isnan(x) || std::isnan(y) ? nan() : std::max(x, y);
      break;
    case ScalarOp::Min:
      v = std::isnan(x) || std::isnan(y) ? nan() : std::min(x, y);
      break;
    case ScalarOp::Pow:
      v = std::pow(x, y);
      break;
    default:
      kiln_unreachable("bad float binary op");
    }
    r.f = roundFloat(n.type, v);
    return r;
  }
  int64_t x = a.i, y = b.i, v = 0;
  switch (n.op) {
  case ScalarOp::Add:
    v = wrapAdd(x, y);
    break;
  case ScalarOp::Sub:
    v = wrapSub(x, y);
    break;
  case ScalarOp::Mul:
    v = wrapMul(x, y);
    break;
  case ScalarOp::Div:
    v = intDiv(x, y);
    break;
  case ScalarOp::Rem:
    v = intRem(x, y);
    break;
  case ScalarOp::Max:
    v = std::max(x, y);
    break;
  case ScalarOp::Min:
    v = std::min(x, y);
    break;
  case ScalarOp::Pow:
    v = wrappingIntPow(x, y);
    break;
  case ScalarOp::And:
    v = x != 0 && y != 0;
    break;
  case ScalarOp::Or:
    v = x != 0 || y != 0;
    break;
  default:
    kiln_unreachable("bad integer binary op");
  }
  r.i = wrapInt(n.type, v);
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
      r = leaf(n, vals);
      if (isFloat(n.type))
        r.f = roundFloat(n.type, r.f);
      else
        r.i = wrapInt(n.type, r.i);
      break;
    case ScalarOp::Select:
      r = arg(0).i != 0 ? arg(1) : arg(2);
      break;
    default:
      if (scalarArity(n.op) == 1)
        r = evalUnary(n, arg(0), dag.type(n.args[0]));
      else
        r = evalBinary(n, arg(0), arg(1), dag.type(n.args[0]));
      break;
    }
    vals.push_back(r);
  }
  return vals;
}

int64_t wrappingIntPow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 1)
      return 1;
    if (base == -1)
      return exp % 2 == 0 ? 1 : -1;
    return 0;
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  for (uint64_t e = static_cast<uint64_t>(exp); e > 0; e >>= 1) {
    if (e & 1)
      result *= b;
    b *= b;
  }
  return static_cast<int64_t>(result);
}

} // namespace kiln
