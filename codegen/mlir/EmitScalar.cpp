//===- EmitScalar.cpp - One arith/math hook per scalar primitive ----------===//
//
// The MLIR form of each row of ir/ScalarOps.def, for the semantics written
// there and in ir/ScalarExpr.h (evaluateScalars is the definition these
// match), as codegen/cpu/EmitScalar.cpp writes them in LLVM IR. A row
// without its hook `emitMlir<Enum>` does not link.
//
// Registers: floats in their own type, halves (f16, bf16) in f32 rounded
// to the half after every node (extf of truncf), integers signless of their
// width (an unsigned dtype picks the unsigned op), bool i1. Where arith
// leaves a case undefined (integer division by zero or INT_MIN / -1, shifts
// past the width, float to integer out of range or NaN, ipowi of 0 to a
// negative power) the hook selects Kiln's defined result around it; where
// arith's float min/max differ (-0 against +0), a compare and select.
//
//===----------------------------------------------------------------------===//

#include "codegen/mlir/Internal.h"
#include "ir/DTypeCodec.h"

#include <cmath>
#include <limits>

namespace kiln::mlirgen {

using mlir::Value;
namespace arith = mlir::arith;
namespace math = mlir::math;

mlir::Type registerType(mlir::MLIRContext *ctx, DType t) {
  mlir::Builder b(ctx);
  if (isFloat(t))
    return computeDType(t) == DType::F64 ? mlir::Type(b.getF64Type()) : mlir::Type(b.getF32Type());
  return b.getIntegerType(dtypeBits(t)); // i1 for bool, i4 for i4
}

namespace {

/// A float narrower than f32: computed in f32, rounded after each node.
bool isHalf(DType t) {
  return isFloat(t) && dtypeSize(t) < 4;
}

mlir::Type halfType(mlir::MLIRContext *ctx, DType t) {
  mlir::Builder b(ctx);
  switch (t) {
  case DType::F16:
    return b.getF16Type();
  case DType::BF16:
    return b.getBF16Type();
  case DType::F8E5M2:
    return b.getFloat8E5M2Type();
  default:
    return b.getFloat8E4M3FNType();
  }
}

} // namespace

Value toRegister(mlir::OpBuilder &b, mlir::Location loc, Value v, DType t) {
  if (t == DType::BF16) {
    // The bits shifted into an f32's high half: no bf16 arithmetic for
    // LLVM to form (it lowers bf16 math through a libgcc call GCC 12 lacks).
    Value bits = b.create<arith::ExtUIOp>(loc, b.getI32Type(),
                                          b.create<arith::BitcastOp>(loc, b.getI16Type(), v));
    Value shifted = b.create<arith::ShLIOp>(
        loc, bits, b.create<arith::ConstantOp>(loc, b.getI32IntegerAttr(16)));
    return b.create<arith::BitcastOp>(loc, b.getF32Type(), shifted);
  }
  if (isHalf(t))
    return b.create<arith::ExtFOp>(loc, b.getF32Type(), v);
  return v;
}

Value fromRegister(mlir::OpBuilder &b, mlir::Location loc, Value v, DType t) {
  if (!isHalf(t))
    return v;
  if (miniFloatFormat(t)) {
    // The 8-bit floats saturate to their largest finite value, as their
    // codec stores (DTypeCodec.h); NaN stays NaN.
    double big = roundThroughDType(t, std::numeric_limits<double>::infinity());
    Value hi = b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(static_cast<float>(big)));
    Value lo = b.create<arith::ConstantOp>(loc, b.getF32FloatAttr(static_cast<float>(-big)));
    Value over = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OGT, v, hi);
    Value under = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::OLT, v, lo);
    v = b.create<arith::SelectOp>(loc, over, hi, b.create<arith::SelectOp>(loc, under, lo, v));
  }
  if (t == DType::BF16) {
    // Round to nearest even on the bits, a NaN kept quiet with its sign
    // (floatToBf16 in ir/DType.cpp): LLVM 16 lowers an f32 to bf16
    // truncation to a libgcc call (__truncsfbf2) GCC 12's lacks.
    auto i32 = b.getI32Type();
    auto c = [&](int64_t k) {
      return b.create<arith::ConstantOp>(loc, b.getI32IntegerAttr(static_cast<int32_t>(k)));
    };
    Value bits = b.create<arith::BitcastOp>(loc, i32, v);
    Value hi = b.create<arith::ShRUIOp>(loc, bits, c(16));
    Value rounding =
        b.create<arith::AddIOp>(loc, c(0x7fff), b.create<arith::AndIOp>(loc, hi, c(1)));
    Value rounded =
        b.create<arith::ShRUIOp>(loc, b.create<arith::AddIOp>(loc, bits, rounding), c(16));
    Value nan = b.create<arith::CmpFOp>(loc, arith::CmpFPredicate::UNO, v, v);
    Value quiet = b.create<arith::OrIOp>(loc, hi, c(0x40));
    Value r = b.create<arith::TruncIOp>(loc, b.getI16Type(),
                                        b.create<arith::SelectOp>(loc, nan, quiet, rounded));
    return b.create<arith::BitcastOp>(loc, b.getBF16Type(), r);
  }
  return b.create<arith::TruncFOp>(loc, halfType(b.getContext(), t), v);
}

namespace {

/// The state of one scalar body: builder, location, constants.
struct Body {
  mlir::OpBuilder &b;
  mlir::Location loc;

  mlir::Type reg(DType t) { return registerType(b.getContext(), t); }
  Value f(DType t, double v) { return b.create<arith::ConstantOp>(loc, b.getFloatAttr(reg(t), v)); }
  Value i(DType t, int64_t v) {
    return b.create<arith::ConstantOp>(loc, b.getIntegerAttr(reg(t), v));
  }
  Value i1(bool v) { return b.create<arith::ConstantOp>(loc, b.getBoolAttr(v)); }
  /// A float result of dtype `t` rounded to it (halves) from f32.
  Value round(DType t, Value v) {
    if (!isHalf(t))
      return v;
    return toRegister(b, loc, fromRegister(b, loc, v, t), t);
  }
  Value select(Value c, Value x, Value y) { return b.create<arith::SelectOp>(loc, c, x, y); }
  Value cmpi(arith::CmpIPredicate p, Value x, Value y) {
    return b.create<arith::CmpIOp>(loc, p, x, y);
  }
  Value cmpf(arith::CmpFPredicate p, Value x, Value y) {
    return b.create<arith::CmpFOp>(loc, p, x, y);
  }
  Value bitOr(Value x, Value y) { return b.create<arith::OrIOp>(loc, x, y); }
  Value bitAnd(Value x, Value y) { return b.create<arith::AndIOp>(loc, x, y); }
  int64_t lowest(DType t) { return intLowest(t); }
};

using Args = const Value *;

template <typename Op, unsigned Arity> Value floatOp(Body &w, DType t, Args a) {
  Value r;
  if constexpr (Arity == 1)
    r = w.b.create<Op>(w.loc, a[0]);
  else
    r = w.b.create<Op>(w.loc, a[0], a[1]);
  return w.round(t, r);
}

/// A float function of an integer operand: computed in f64 and cast back
/// (viaDouble in ir/ScalarExpr.cpp).
template <typename Op> Value floatUnary(Body &w, const ScalarNode &n, Args a) {
  if (isFloat(n.type))
    return floatOp<Op, 1>(w, n.type, a);
  Value d = castScalar(w.b, w.loc, a[0], n.type, DType::F64);
  Value r = w.b.create<Op>(w.loc, d);
  return castScalar(w.b, w.loc, r, DType::F64, n.type);
}

} // namespace

Value castScalar(mlir::OpBuilder &b, mlir::Location loc, Value v, DType from, DType to) {
  Body w{b, loc};
  if (from == to)
    return v;
  mlir::Type rt = w.reg(to);
  if (to == DType::Bool) {
    if (isFloat(from)) // NaN != 0
      return w.cmpf(arith::CmpFPredicate::UNE, v, w.f(from, 0));
    return w.cmpi(arith::CmpIPredicate::ne, v, w.i(from, 0));
  }
  if (from == DType::Bool) {
    if (isFloat(to))
      return b.create<arith::UIToFPOp>(loc, rt, v);
    return b.create<arith::ExtUIOp>(loc, rt, v);
  }
  if (isFloat(from) && isFloat(to)) {
    // Registers are f32 or f64; the node rounds halves afterwards.
    unsigned fb = w.reg(from).getIntOrFloatBitWidth(), tb = rt.getIntOrFloatBitWidth();
    Value r = v;
    if (fb < tb)
      r = b.create<arith::ExtFOp>(loc, rt, v);
    else if (fb > tb)
      r = b.create<arith::TruncFOp>(loc, rt, v);
    return w.round(to, r);
  }
  if (!isFloat(from) && isFloat(to)) {
    // Through double (Note [Scalar casts]), then rounded to the target.
    mlir::Type f64 = b.getF64Type();
    Value d = isSignedInt(from) ? b.create<arith::SIToFPOp>(loc, f64, v).getResult()
                                : b.create<arith::UIToFPOp>(loc, f64, v).getResult();
    if (rt == f64)
      return d;
    return w.round(to, b.create<arith::TruncFOp>(loc, rt, d));
  }
  if (!isFloat(from) && !isFloat(to)) {
    unsigned fb = w.reg(from).getIntOrFloatBitWidth(), tb = rt.getIntOrFloatBitWidth();
    if (fb == tb)
      return v;
    if (fb > tb)
      return b.create<arith::TruncIOp>(loc, rt, v);
    return isSignedInt(from) ? b.create<arith::ExtSIOp>(loc, rt, v).getResult()
                             : b.create<arith::ExtUIOp>(loc, rt, v).getResult();
  }
  // Float to integer: truncation toward zero, saturated, NaN -> 0. The
  // bounds are powers of two, exact in every float type (or infinite).
  DType ft = from;
  double lo = static_cast<double>(w.lowest(to));
  double hi = std::ldexp(1.0, static_cast<int>(dtypeBits(to)) - (isSignedInt(to) ? 1 : 0));
  Value isNan = w.cmpf(arith::CmpFPredicate::UNO, v, v);
  Value tooBig = w.cmpf(arith::CmpFPredicate::OGE, v, w.f(ft, hi));
  Value tooSmall = w.cmpf(arith::CmpFPredicate::OLT, v, w.f(ft, lo));
  Value outside = w.bitOr(isNan, w.bitOr(tooBig, tooSmall));
  Value safe = w.select(outside, w.f(ft, 0), v);
  Value r = isSignedInt(to) ? b.create<arith::FPToSIOp>(loc, rt, safe).getResult()
                            : b.create<arith::FPToUIOp>(loc, rt, safe).getResult();
  r = w.select(tooSmall, w.i(to, w.lowest(to)), r);
  r = w.select(tooBig, w.i(to, intHighest(to)), r);
  return w.select(isNan, w.i(to, 0), r);
}

namespace {

// Leaves: constants here; loads are the caller's (emitScalarDag).
Value emitMlirConstFloat(Body &w, const ScalarNode &n, Args, DType) {
  return w.f(n.type, n.fvalue);
}
Value emitMlirConstInt(Body &w, const ScalarNode &n, Args, DType) {
  if (n.type == DType::Bool)
    return w.i1(n.ivalue != 0);
  return w.i(n.type, n.ivalue);
}
Value emitMlirIndex(Body &, const ScalarNode &, Args, DType) {
  return {};
}
Value emitMlirLoad(Body &, const ScalarNode &, Args, DType) {
  return {};
}
Value emitMlirStageValue(Body &, const ScalarNode &, Args, DType) {
  return {};
}
Value emitMlirSize(Body &, const ScalarNode &, Args, DType) {
  return {};
}

// Unary.
Value emitMlirNeg(Body &w, const ScalarNode &n, Args a, DType) {
  if (isFloat(n.type))
    return w.b.create<arith::NegFOp>(w.loc, a[0]);
  return w.b.create<arith::SubIOp>(w.loc, w.i(n.type, 0), a[0]);
}
Value emitMlirAbs(Body &w, const ScalarNode &n, Args a, DType) {
  if (isFloat(n.type))
    return w.b.create<math::AbsFOp>(w.loc, a[0]);
  if (!isSignedInt(n.type))
    return a[0];
  return w.b.create<math::AbsIOp>(w.loc, a[0]); // INT_MIN stays INT_MIN, as wrapNeg
}
Value emitMlirExp(Body &w, const ScalarNode &n, Args a, DType) {
  return floatUnary<math::ExpOp>(w, n, a);
}
Value emitMlirLog(Body &w, const ScalarNode &n, Args a, DType) {
  return floatUnary<math::LogOp>(w, n, a);
}
Value emitMlirSqrt(Body &w, const ScalarNode &n, Args a, DType) {
  return floatUnary<math::SqrtOp>(w, n, a);
}
Value emitMlirRsqrt(Body &w, const ScalarNode &n, Args a, DType) {
  return floatUnary<math::RsqrtOp>(w, n, a);
}
Value emitMlirRecip(Body &w, const ScalarNode &n, Args a, DType) {
  if (isFloat(n.type))
    return w.round(n.type, w.b.create<arith::DivFOp>(w.loc, w.f(n.type, 1), a[0]));
  Value d = castScalar(w.b, w.loc, a[0], n.type, DType::F64);
  Value r = w.b.create<arith::DivFOp>(w.loc, w.f(DType::F64, 1), d);
  return castScalar(w.b, w.loc, r, DType::F64, n.type);
}
Value emitMlirTanh(Body &w, const ScalarNode &n, Args a, DType) {
  return floatUnary<math::TanhOp>(w, n, a);
}
Value emitMlirErf(Body &w, const ScalarNode &n, Args a, DType) {
  return floatUnary<math::ErfOp>(w, n, a);
}
Value emitMlirSin(Body &w, const ScalarNode &n, Args a, DType) {
  return floatUnary<math::SinOp>(w, n, a);
}
Value emitMlirCos(Body &w, const ScalarNode &n, Args a, DType) {
  return floatUnary<math::CosOp>(w, n, a);
}
Value emitMlirAtan(Body &w, const ScalarNode &n, Args a, DType) {
  return floatUnary<math::AtanOp>(w, n, a);
}
// MLIR 16's math dialect has no asin/acos: atan2 of x and sqrt((1-x)(1+x))
// in f64 (no cancellation near ±1), NaN outside [-1, 1] as asin's.
Value arcSine(Body &w, const ScalarNode &n, Value x, bool cosine) {
  Value d = castScalar(w.b, w.loc, x, n.type, DType::F64);
  Value one = w.f(DType::F64, 1);
  Value s = w.b.create<math::SqrtOp>(
      w.loc, w.b.create<arith::MulFOp>(w.loc, w.b.create<arith::SubFOp>(w.loc, one, d),
                                       w.b.create<arith::AddFOp>(w.loc, one, d)));
  Value r =
      cosine ? w.b.create<math::Atan2Op>(w.loc, s, d) : w.b.create<math::Atan2Op>(w.loc, d, s);
  return castScalar(w.b, w.loc, r, DType::F64, n.type);
}
Value emitMlirAsin(Body &w, const ScalarNode &n, Args a, DType) {
  return arcSine(w, n, a[0], false);
}
Value emitMlirAcos(Body &w, const ScalarNode &n, Args a, DType) {
  return arcSine(w, n, a[0], true);
}
// Rounding an integer is the integer itself.
Value emitMlirFloor(Body &w, const ScalarNode &n, Args a, DType) {
  return isFloat(n.type) ? floatOp<math::FloorOp, 1>(w, n.type, a) : a[0];
}
Value emitMlirCeil(Body &w, const ScalarNode &n, Args a, DType) {
  return isFloat(n.type) ? floatOp<math::CeilOp, 1>(w, n.type, a) : a[0];
}
Value emitMlirRoundEven(Body &w, const ScalarNode &n, Args a, DType) {
  return isFloat(n.type) ? floatOp<math::RoundEvenOp, 1>(w, n.type, a) : a[0];
}
Value emitMlirNot(Body &w, const ScalarNode &, Args a, DType) {
  return w.b.create<arith::XOrIOp>(w.loc, a[0], w.i1(true));
}
Value emitMlirCast(Body &w, const ScalarNode &n, Args a, DType from) {
  return castScalar(w.b, w.loc, a[0], from, n.type);
}

// Binary. On bools add/max are `or`, mul/min/pow/div are `and`, sub is
// `xor` (as the LLVM backend); rem is 0.
Value emitMlirAdd(Body &w, const ScalarNode &n, Args a, DType) {
  if (n.type == DType::Bool)
    return w.bitOr(a[0], a[1]);
  if (isFloat(n.type))
    return floatOp<arith::AddFOp, 2>(w, n.type, a);
  return w.b.create<arith::AddIOp>(w.loc, a[0], a[1]);
}
Value emitMlirSub(Body &w, const ScalarNode &n, Args a, DType) {
  if (n.type == DType::Bool)
    return w.b.create<arith::XOrIOp>(w.loc, a[0], a[1]);
  if (isFloat(n.type))
    return floatOp<arith::SubFOp, 2>(w, n.type, a);
  return w.b.create<arith::SubIOp>(w.loc, a[0], a[1]);
}
Value emitMlirMul(Body &w, const ScalarNode &n, Args a, DType) {
  if (n.type == DType::Bool)
    return w.bitAnd(a[0], a[1]);
  if (isFloat(n.type))
    return floatOp<arith::MulFOp, 2>(w, n.type, a);
  return w.b.create<arith::MulIOp>(w.loc, a[0], a[1]);
}
/// Integer x / y or x % y with Kiln's results where arith's are undefined:
/// 0 for y == 0, and INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0.
Value intDivRem(Body &w, const ScalarNode &n, Args a, bool rem) {
  DType t = n.type;
  Value zero = w.i(t, 0);
  Value byZero = w.cmpi(arith::CmpIPredicate::eq, a[1], zero);
  Value overflow = w.i1(false);
  if (isSignedInt(t))
    overflow = w.bitAnd(w.cmpi(arith::CmpIPredicate::eq, a[0], w.i(t, intLowest(t))),
                        w.cmpi(arith::CmpIPredicate::eq, a[1], w.i(t, -1)));
  Value safe = w.select(w.bitOr(byZero, overflow), w.i(t, 1), a[1]);
  Value r;
  if (rem)
    r = isSignedInt(t) ? w.b.create<arith::RemSIOp>(w.loc, a[0], safe).getResult()
                       : w.b.create<arith::RemUIOp>(w.loc, a[0], safe).getResult();
  else
    r = isSignedInt(t) ? w.b.create<arith::DivSIOp>(w.loc, a[0], safe).getResult()
                       : w.b.create<arith::DivUIOp>(w.loc, a[0], safe).getResult();
  // INT_MIN / 1 is INT_MIN already; INT_MIN % 1 is 0.
  return w.select(byZero, zero, r);
}
Value emitMlirDiv(Body &w, const ScalarNode &n, Args a, DType) {
  if (n.type == DType::Bool)
    return w.bitAnd(a[0], a[1]);
  if (isFloat(n.type))
    return floatOp<arith::DivFOp, 2>(w, n.type, a);
  return intDivRem(w, n, a, false);
}
Value emitMlirRem(Body &w, const ScalarNode &n, Args a, DType) {
  if (n.type == DType::Bool)
    return w.i1(false);
  if (isFloat(n.type))
    return floatOp<arith::RemFOp, 2>(w, n.type, a);
  return intDivRem(w, n, a, true);
}
/// Float max/min: NaN when either is, else the first operand unless the
/// second is strictly greater (smaller), as std::max (std::min).
Value floatMinMax(Body &w, DType t, Args a, bool max) {
  Value takeSecond =
      w.cmpf(max ? arith::CmpFPredicate::OLT : arith::CmpFPredicate::OGT, a[0], a[1]);
  Value r = w.select(takeSecond, a[1], a[0]);
  Value nan = w.cmpf(arith::CmpFPredicate::UNO, a[0], a[1]);
  return w.select(nan, w.f(t, std::numeric_limits<double>::quiet_NaN()), r);
}
Value emitMlirMax(Body &w, const ScalarNode &n, Args a, DType) {
  if (n.type == DType::Bool)
    return w.bitOr(a[0], a[1]);
  if (isFloat(n.type))
    return floatMinMax(w, n.type, a, true);
  return isSignedInt(n.type) ? w.b.create<arith::MaxSIOp>(w.loc, a[0], a[1]).getResult()
                             : w.b.create<arith::MaxUIOp>(w.loc, a[0], a[1]).getResult();
}
Value emitMlirMin(Body &w, const ScalarNode &n, Args a, DType) {
  if (n.type == DType::Bool)
    return w.bitAnd(a[0], a[1]);
  if (isFloat(n.type))
    return floatMinMax(w, n.type, a, false);
  return isSignedInt(n.type) ? w.b.create<arith::MinSIOp>(w.loc, a[0], a[1]).getResult()
                             : w.b.create<arith::MinUIOp>(w.loc, a[0], a[1]).getResult();
}
Value emitMlirPow(Body &w, const ScalarNode &n, Args a, DType) {
  DType t = n.type;
  if (t == DType::Bool)
    return w.bitAnd(a[0], a[1]);
  if (isFloat(t))
    return floatOp<math::PowFOp, 2>(w, t, a);
  // ipowi: 1 and -1 to a negative power are +-1, others 0 (ir/IntPow.h);
  // math.ipowi leaves 0 to a negative power undefined. Unsigned operands
  // are zero-extended to i64 (ipowi's exponent is signed), the result
  // wrapped back.
  if (!isSignedInt(t)) {
    Value x = castScalar(w.b, w.loc, a[0], t, DType::I64);
    Value y = castScalar(w.b, w.loc, a[1], t, DType::I64);
    return castScalar(w.b, w.loc, w.b.create<math::IPowIOp>(w.loc, x, y), DType::I64, t);
  }
  Value r = w.b.create<math::IPowIOp>(w.loc, a[0], a[1]);
  Value zeroBase = w.cmpi(arith::CmpIPredicate::eq, a[0], w.i(t, 0));
  Value negative = w.cmpi(arith::CmpIPredicate::slt, a[1], w.i(t, 0));
  return w.select(w.bitAnd(zeroBase, negative), w.i(t, 0), r);
}
Value emitMlirAnd(Body &w, const ScalarNode &, Args a, DType) {
  return w.bitAnd(a[0], a[1]);
}
Value emitMlirOr(Body &w, const ScalarNode &, Args a, DType) {
  return w.bitOr(a[0], a[1]);
}

// Comparisons see the operand type: ordered for floats, unsigned
// predicates for unsigned integers and bools.
Value compare(Body &w, DType t, Args a, arith::CmpFPredicate fp, arith::CmpIPredicate sp,
              arith::CmpIPredicate up) {
  if (isFloat(t))
    return w.cmpf(fp, a[0], a[1]);
  return w.cmpi(isSignedInt(t) ? sp : up, a[0], a[1]);
}
Value emitMlirEq(Body &w, const ScalarNode &, Args a, DType t) {
  return compare(w, t, a, arith::CmpFPredicate::OEQ, arith::CmpIPredicate::eq,
                 arith::CmpIPredicate::eq);
}
Value emitMlirLt(Body &w, const ScalarNode &, Args a, DType t) {
  return compare(w, t, a, arith::CmpFPredicate::OLT, arith::CmpIPredicate::slt,
                 arith::CmpIPredicate::ult);
}
Value emitMlirLe(Body &w, const ScalarNode &, Args a, DType t) {
  return compare(w, t, a, arith::CmpFPredicate::OLE, arith::CmpIPredicate::sle,
                 arith::CmpIPredicate::ule);
}
Value emitMlirGt(Body &w, const ScalarNode &, Args a, DType t) {
  return compare(w, t, a, arith::CmpFPredicate::OGT, arith::CmpIPredicate::sgt,
                 arith::CmpIPredicate::ugt);
}
Value emitMlirGe(Body &w, const ScalarNode &, Args a, DType t) {
  return compare(w, t, a, arith::CmpFPredicate::OGE, arith::CmpIPredicate::sge,
                 arith::CmpIPredicate::uge);
}
Value emitMlirSelect(Body &w, const ScalarNode &, Args a, DType) {
  return w.select(a[0], a[1], a[2]);
}

// Bitwise.
Value emitMlirBitAnd(Body &w, const ScalarNode &, Args a, DType) {
  return w.bitAnd(a[0], a[1]);
}
Value emitMlirBitOr(Body &w, const ScalarNode &, Args a, DType) {
  return w.bitOr(a[0], a[1]);
}
Value emitMlirBitXor(Body &w, const ScalarNode &, Args a, DType) {
  return w.b.create<arith::XOrIOp>(w.loc, a[0], a[1]);
}
Value emitMlirBitNot(Body &w, const ScalarNode &n, Args a, DType) {
  return w.b.create<arith::XOrIOp>(w.loc, a[0], w.i(n.type, -1));
}
/// Shifts by an amount outside [0, bits) give what ir/IntShift.h defines
/// (arith leaves them poison): 0 left; right, -1 for a negative signed
/// value, else 0. Unsigned values shift logically.
Value shift(Body &w, const ScalarNode &n, Args a, bool left) {
  DType t = n.type;
  int64_t bits = 8 * static_cast<int64_t>(dtypeSize(t));
  Value inRange = w.bitAnd(w.cmpi(arith::CmpIPredicate::sge, a[1], w.i(t, 0)),
                           w.cmpi(arith::CmpIPredicate::slt, a[1], w.i(t, bits)));
  if (!isSignedInt(t)) // unsigned amounts are never negative
    inRange = w.cmpi(arith::CmpIPredicate::ult, a[1], w.i(t, bits));
  Value amount = w.select(inRange, a[1], w.i(t, 0));
  Value r, outside = w.i(t, 0);
  if (left) {
    r = w.b.create<arith::ShLIOp>(w.loc, a[0], amount);
  } else if (isSignedInt(t)) {
    r = w.b.create<arith::ShRSIOp>(w.loc, a[0], amount);
    outside = w.select(w.cmpi(arith::CmpIPredicate::slt, a[0], w.i(t, 0)), w.i(t, -1), w.i(t, 0));
  } else {
    r = w.b.create<arith::ShRUIOp>(w.loc, a[0], amount);
  }
  return w.select(inRange, r, outside);
}
Value emitMlirShl(Body &w, const ScalarNode &n, Args a, DType) {
  return shift(w, n, a, true);
}
Value emitMlirShr(Body &w, const ScalarNode &n, Args a, DType) {
  return shift(w, n, a, false);
}

using MlirHook = Value (*)(Body &, const ScalarNode &, Args, DType);

MlirHook mlirScalarHook(ScalarOp op) {
  static constexpr MlirHook kHooks[] = {
#define SCALAR_OP(E, N, A, C, Cost, Fold, FE, IE) &emitMlir##E,
#include "ir/ScalarOps.def"
  };
  return kHooks[static_cast<size_t>(op)];
}

} // namespace

FailureOr<Value> emitScalarDag(mlir::OpBuilder &b, mlir::Location loc, const ScalarDag &dag,
                               ScalarRef root, const std::function<Value(const ScalarNode &)> &leaf,
                               const Location &kilnLoc, DiagnosticEngine &diag) {
  Body w{b, loc};
  // Only what the root uses (a load's offset is the leaf's business).
  std::vector<bool> used(static_cast<size_t>(root.id) + 1, false);
  used[static_cast<size_t>(root.id)] = true;
  for (int32_t id = root.id; id >= 0; --id) {
    const ScalarNode &n = dag.nodes()[static_cast<size_t>(id)];
    if (!used[static_cast<size_t>(id)] || n.op == ScalarOp::Load)
      continue;
    for (unsigned k = 0; k < scalarArity(n.op); ++k)
      used[static_cast<size_t>(n.args[k].id)] = true;
  }
  std::vector<Value> values(dag.nodes().size());
  for (size_t id = 0; id <= static_cast<size_t>(root.id); ++id) {
    const ScalarNode &n = dag.nodes()[id];
    if (!used[id])
      continue;
    if (n.op == ScalarOp::Load || n.op == ScalarOp::Index) {
      values[id] = leaf(n);
      continue;
    }
    if (n.op == ScalarOp::StageValue || n.op == ScalarOp::Size)
      return diag.emitError(kilnLoc)
             << "the MLIR export has no form for the scalar leaf '" << scalarOpName(n.op) << "'";
    Value args[3];
    DType from = n.type;
    for (unsigned k = 0; k < scalarArity(n.op); ++k) {
      args[k] = values[static_cast<size_t>(n.args[k].id)];
      if (k == 0)
        from = dag.type(n.args[0]);
    }
    if (scalarClass(n.op) == ScalarClass::Compare || n.op == ScalarOp::Select)
      from = dag.type(n.args[scalarClass(n.op) == ScalarClass::Compare ? 0 : 1]);
    values[id] = mlirScalarHook(n.op)(w, n, args, from);
  }
  return values[static_cast<size_t>(root.id)];
}

} // namespace kiln::mlirgen
