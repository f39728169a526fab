//===- EmitScalar.cpp - One LLVM hook per scalar primitive ----------------===//
//
// The LLVM IR of each row of ir/ScalarOps.def, for the semantics written
// there and in ir/ScalarExpr.h (evaluateScalars is the definition these
// match). Types in registers follow EmitLLVM.cpp: f16/bf16 as float rounded
// after every node, integers as iN, bool as i1. Unary and binary hooks see
// the node's type `t`; comparisons and casts see the operand type.
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/KernelEmitter.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/Intrinsics.h>

namespace kiln::codegen::cpu {
namespace {

using Builder = llvm::IRBuilder<>;

/// A float intrinsic rounded back to `t`; integers pass through (floor,
/// ceil and roundeven of an integer are the integer).
Value *roundingIntrinsic(KernelEmitter &e, llvm::Intrinsic::ID id, Value *a, DType t) {
  if (!isFloat(t))
    return a;
  return e.roundTo(t, e.builder().CreateUnaryIntrinsic(id, a));
}

/// sqrt or 1/sqrt; integers through double, saturating back.
Value *sqrtOrRsqrt(KernelEmitter &e, Value *a, DType t, bool reciprocal) {
  Builder &b = e.builder();
  if (!isFloat(t)) {
    Value *d = e.convert(a, t, DType::F64);
    Value *r = b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, d);
    if (reciprocal)
      r = b.CreateFDiv(llvm::ConstantFP::get(r->getType(), 1.0), r);
    return e.convert(r, DType::F64, t);
  }
  Value *r = b.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, a);
  if (reciprocal)
    r = b.CreateFDiv(llvm::ConstantFP::get(a->getType(), 1.0), r);
  return e.roundTo(t, r);
}

/// A float binary instruction with `contract` (FMA), rounded back to `t`.
Value *fpBinary(KernelEmitter &e, llvm::Instruction::BinaryOps op, Value *a, Value *b, DType t) {
  llvm::FastMathFlags contract;
  contract.setAllowContract(true);
  Value *r = e.builder().CreateBinOp(op, a, b);
  if (auto *inst = llvm::dyn_cast<llvm::Instruction>(r))
    inst->setFastMathFlags(contract);
  return e.roundTo(t, r);
}

/// Integer division and remainder: x / 0 gives 0 and x / -1 wraps (the
/// reference kernels' behaviour); never trap.
Value *intDivRem(KernelEmitter &e, Value *a, Value *b, DType t, bool div) {
  Builder &B = e.builder();
  Value *zero = llvm::ConstantInt::get(a->getType(), 0);
  Value *one = llvm::ConstantInt::get(a->getType(), 1);
  Value *isZero = B.CreateICmpEQ(b, zero);
  if (!isSignedInt(t)) {
    Value *safe = B.CreateSelect(isZero, one, b);
    Value *r = div ? B.CreateUDiv(a, safe) : B.CreateURem(a, safe);
    return B.CreateSelect(isZero, zero, r);
  }
  Value *isMinusOne = B.CreateICmpEQ(b, llvm::ConstantInt::get(a->getType(), -1, true));
  Value *safe = B.CreateSelect(B.CreateOr(isZero, isMinusOne), one, b);
  Value *r = div ? B.CreateSDiv(a, safe) : B.CreateSRem(a, safe);
  Value *minusOneResult = div ? B.CreateNeg(a) : zero;
  return B.CreateSelect(isZero, zero, B.CreateSelect(isMinusOne, minusOneResult, r));
}

/// Max / min. Floats: NaN if either is NaN, else std::max / std::min (which
/// keep `a` on ties, so max(+0, -0) = +0 and max(-0, +0) = -0, like the
/// reference kernels).
Value *maxOrMin(KernelEmitter &e, Value *a, Value *b, DType t, bool max) {
  Builder &B = e.builder();
  if (!isFloat(t)) {
    bool s = isSignedInt(t);
    llvm::Intrinsic::ID id = max ? (s ? llvm::Intrinsic::smax : llvm::Intrinsic::umax)
                                 : (s ? llvm::Intrinsic::smin : llvm::Intrinsic::umin);
    return B.CreateBinaryIntrinsic(id, a, b);
  }
  Value *takeB = max ? B.CreateFCmpOLT(a, b) : B.CreateFCmpOLT(b, a);
  Value *r = B.CreateSelect(takeB, b, a);
  Value *unordered = B.CreateFCmpUNO(a, b);
  return B.CreateSelect(unordered, llvm::ConstantFP::getNaN(a->getType()), r);
}

/// A comparison: ordered for floats, signed or unsigned by the integer type.
Value *compare(KernelEmitter &e, Value *a, Value *b, DType t, llvm::CmpInst::Predicate f,
               llvm::CmpInst::Predicate s, llvm::CmpInst::Predicate u) {
  Builder &B = e.builder();
  if (isFloat(t))
    return B.CreateFCmp(f, a, b);
  return B.CreateICmp(isSignedInt(t) ? s : u, a, b);
}

} // namespace

// Leaves.
Value *emitScalarConstFloat(KernelEmitter &e, const ScalarNode &n, Value *const *, DType) {
  return e.constantOf(n.type, n.fvalue, static_cast<int64_t>(n.fvalue));
}
Value *emitScalarConstInt(KernelEmitter &e, const ScalarNode &n, Value *const *, DType) {
  return e.constantOf(n.type, n.fvalue, n.ivalue);
}
Value *emitScalarIndex(KernelEmitter &e, const ScalarNode &n, Value *const *, DType) {
  return e.emitIndex(n);
}
Value *emitScalarLoad(KernelEmitter &e, const ScalarNode &n, Value *const *, DType) {
  return e.emitLoad(n);
}
Value *emitScalarStageValue(KernelEmitter &e, const ScalarNode &n, Value *const *, DType) {
  return e.emitStageValue(n);
}
Value *emitScalarSize(KernelEmitter &e, const ScalarNode &n, Value *const *, DType) {
  return e.emitSize(n);
}

// Unary.
Value *emitScalarNeg(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  if (isFloat(n.type))
    return e.builder().CreateFNeg(args[0]);
  if (n.type == DType::Bool)
    return args[0];
  return e.builder().CreateNeg(args[0]);
}
Value *emitScalarAbs(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  if (isFloat(n.type))
    return e.builder().CreateUnaryIntrinsic(llvm::Intrinsic::fabs, args[0]);
  if (!isSignedInt(n.type))
    return args[0];
  return e.builder().CreateBinaryIntrinsic(llvm::Intrinsic::abs, args[0], e.builder().getFalse());
}
// Note [Exp below the subnormals]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// exp(x) rounds to +0 for x < -104 (f32; exp(-104) ~ 6.8e-46 is under half
// the least subnormal, 7.0e-46) and for x < -746 (f64). libmvec computes
// such lanes, -inf among them, by calling scalar expf once per lane, and
// causal attention's masked scores (-inf, or x - max with a huge
// negative x) are half of all its exps: at sequence 512 the scalar
// callouts took more time than the vector code. So those lanes take the
// exp of 0 and their result is replaced by 0: the same value, in vector
// code. NaN compares false and still gives NaN. The inline exp (Note
// [Inline exp]) applies the same rule.
Value *emitScalarExp(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  Builder &b = e.builder();
  if (e.vectorMathIsa().inlinesExp()) {
    // Integers compute in double and convert back (saturating), as mathCall.
    if (!isFloat(n.type))
      return e.convert(emitInlineExp(b, e.convert(args[0], n.type, DType::F64)), DType::F64,
                       n.type);
    return e.roundTo(n.type, emitInlineExp(b, args[0]));
  }
  if (!isFloat(n.type))
    return e.mathCall(MathFn::Exp, n.type, args[0]);
  Value *x = args[0];
  double lowest = n.type == DType::F64 ? -746.0 : -104.0;
  Value *under = b.CreateFCmpOLT(x, llvm::ConstantFP::get(x->getType(), lowest));
  Value *zero = llvm::ConstantFP::get(x->getType(), 0.0);
  Value *r = e.mathCall(MathFn::Exp, n.type, b.CreateSelect(under, zero, x));
  return b.CreateSelect(under, zero, r);
}
// Note [Log of zero and negative numbers]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// libmvec's logf computes a lane whose input is zero (result -inf) or
// negative (NaN) by calling scalar logf for it: f32[4,512,512] of random
// normal inputs took 9.8 ms, of their ReLU (half zeros) 10.0 ms, of their
// absolute values 0.33 ms (`kiln bench F --threads 1`). Such lanes take
// the log of 1 and their result is replaced by -inf or NaN: the same values
// (NaNs of any payload are equal), in vector code: 0.36 ms for the normal
// inputs. NaN compares false and still goes to libmvec.
Value *emitScalarLog(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  if (!isFloat(n.type))
    return e.mathCall(MathFn::Log, n.type, args[0]);
  Builder &b = e.builder();
  Value *x = args[0];
  llvm::Type *t = x->getType();
  Value *zero = llvm::ConstantFP::get(t, 0.0);
  Value *special = b.CreateFCmpOLE(x, zero);
  Value *r =
      e.mathCall(MathFn::Log, n.type, b.CreateSelect(special, llvm::ConstantFP::get(t, 1.0), x));
  Value *limit = b.CreateSelect(b.CreateFCmpOLT(x, zero), llvm::ConstantFP::getNaN(t),
                                llvm::ConstantFP::getInfinity(t, true));
  // Rounded like mathCall's result: a mini float without infinities holds
  // -inf as its most negative finite value.
  return e.roundTo(n.type, b.CreateSelect(special, limit, r));
}
Value *emitScalarSqrt(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  return sqrtOrRsqrt(e, args[0], n.type, false);
}
Value *emitScalarRsqrt(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  return sqrtOrRsqrt(e, args[0], n.type, true);
}
Value *emitScalarRecip(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  Value *a = args[0];
  if (isFloat(n.type))
    return e.roundTo(n.type, e.builder().CreateFDiv(llvm::ConstantFP::get(a->getType(), 1.0), a));
  Value *divArgs[2] = {e.constantOf(n.type, 1, 1), a};
  return emitScalarDiv(e, n, divArgs, n.type);
}
Value *emitScalarTanh(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  return e.mathCall(MathFn::Tanh, n.type, args[0]);
}
Value *emitScalarErf(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  return e.mathCall(MathFn::Erf, n.type, args[0]);
}
Value *emitScalarSin(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  return e.mathCall(MathFn::Sin, n.type, args[0]);
}
Value *emitScalarCos(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  return e.mathCall(MathFn::Cos, n.type, args[0]);
}
Value *emitScalarAsin(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  return e.mathCall(MathFn::Asin, n.type, args[0]);
}
Value *emitScalarAcos(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  return e.mathCall(MathFn::Acos, n.type, args[0]);
}
Value *emitScalarAtan(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  return e.mathCall(MathFn::Atan, n.type, args[0]);
}
Value *emitScalarFloor(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  return roundingIntrinsic(e, llvm::Intrinsic::floor, args[0], n.type);
}
Value *emitScalarCeil(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  return roundingIntrinsic(e, llvm::Intrinsic::ceil, args[0], n.type);
}
Value *emitScalarRoundEven(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  return roundingIntrinsic(e, llvm::Intrinsic::roundeven, args[0], n.type);
}
Value *emitScalarNot(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  if (isFloat(n.type))
    return e.failValue("'not' of a float operand");
  return e.builder().CreateNot(args[0]);
}
Value *emitScalarCast(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType argType) {
  return e.convert(args[0], argType, n.type);
}

// Binary. On bools (which the builders only make through fusion of bool
// elementwise ops) add/max are `or`, mul/min/pow are `and`, sub is `xor`.
Value *emitScalarAdd(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  if (n.type == DType::Bool)
    return e.builder().CreateOr(args[0], args[1]);
  if (isFloat(n.type))
    return fpBinary(e, llvm::Instruction::FAdd, args[0], args[1], n.type);
  return e.builder().CreateAdd(args[0], args[1]);
}
Value *emitScalarSub(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  if (n.type == DType::Bool)
    return e.builder().CreateXor(args[0], args[1]);
  if (isFloat(n.type))
    return fpBinary(e, llvm::Instruction::FSub, args[0], args[1], n.type);
  return e.builder().CreateSub(args[0], args[1]);
}
Value *emitScalarMul(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  if (n.type == DType::Bool)
    return e.builder().CreateAnd(args[0], args[1]);
  if (isFloat(n.type))
    return fpBinary(e, llvm::Instruction::FMul, args[0], args[1], n.type);
  return e.builder().CreateMul(args[0], args[1]);
}
Value *emitScalarDiv(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  if (n.type == DType::Bool)
    return args[0];
  if (isFloat(n.type))
    return fpBinary(e, llvm::Instruction::FDiv, args[0], args[1], n.type);
  return intDivRem(e, args[0], args[1], n.type, true);
}
Value *emitScalarRem(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  if (n.type == DType::Bool)
    return e.builder().getFalse();
  if (isFloat(n.type))
    return e.roundTo(n.type, e.builder().CreateFRem(args[0], args[1]));
  return intDivRem(e, args[0], args[1], n.type, false);
}
Value *emitScalarMax(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  if (n.type == DType::Bool)
    return e.builder().CreateOr(args[0], args[1]);
  return maxOrMin(e, args[0], args[1], n.type, true);
}
Value *emitScalarMin(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  if (n.type == DType::Bool)
    return e.builder().CreateAnd(args[0], args[1]);
  return maxOrMin(e, args[0], args[1], n.type, false);
}
Value *emitScalarPow(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  Builder &B = e.builder();
  if (n.type == DType::Bool)
    return B.CreateAnd(args[0], args[1]);
  if (isFloat(n.type))
    return e.mathCall(MathFn::Pow, n.type, args[0], args[1]);
  llvm::FunctionCallee helper = e.module().getOrInsertFunction(
      kIntPowHelper, llvm::FunctionType::get(e.i64(), {e.i64(), e.i64()}, false));
  if (auto *f = llvm::dyn_cast<llvm::Function>(helper.getCallee())) {
    f->setDoesNotAccessMemory();
    f->setDoesNotThrow();
    f->addFnAttr(llvm::Attribute::WillReturn);
  }
  bool s = isSignedInt(n.type);
  Value *r = B.CreateCall(
      helper, {B.CreateIntCast(args[0], e.i64(), s), B.CreateIntCast(args[1], e.i64(), s)});
  return B.CreateTrunc(r, args[0]->getType());
}
Value *emitScalarAnd(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  if (isFloat(n.type))
    return e.failValue("'and' of float operands");
  return e.builder().CreateAnd(args[0], args[1]);
}
Value *emitScalarOr(KernelEmitter &e, const ScalarNode &n, Value *const *args, DType) {
  if (isFloat(n.type))
    return e.failValue("'or' of float operands");
  return e.builder().CreateOr(args[0], args[1]);
}

// Comparisons.
Value *emitScalarEq(KernelEmitter &e, const ScalarNode &, Value *const *args, DType t) {
  return compare(e, args[0], args[1], t, llvm::CmpInst::FCMP_OEQ, llvm::CmpInst::ICMP_EQ,
                 llvm::CmpInst::ICMP_EQ);
}
Value *emitScalarLt(KernelEmitter &e, const ScalarNode &, Value *const *args, DType t) {
  return compare(e, args[0], args[1], t, llvm::CmpInst::FCMP_OLT, llvm::CmpInst::ICMP_SLT,
                 llvm::CmpInst::ICMP_ULT);
}
Value *emitScalarLe(KernelEmitter &e, const ScalarNode &, Value *const *args, DType t) {
  return compare(e, args[0], args[1], t, llvm::CmpInst::FCMP_OLE, llvm::CmpInst::ICMP_SLE,
                 llvm::CmpInst::ICMP_ULE);
}
Value *emitScalarGt(KernelEmitter &e, const ScalarNode &, Value *const *args, DType t) {
  return compare(e, args[0], args[1], t, llvm::CmpInst::FCMP_OGT, llvm::CmpInst::ICMP_SGT,
                 llvm::CmpInst::ICMP_UGT);
}
Value *emitScalarGe(KernelEmitter &e, const ScalarNode &, Value *const *args, DType t) {
  return compare(e, args[0], args[1], t, llvm::CmpInst::FCMP_OGE, llvm::CmpInst::ICMP_SGE,
                 llvm::CmpInst::ICMP_UGE);
}

// Ternary.
Value *emitScalarSelect(KernelEmitter &e, const ScalarNode &, Value *const *args, DType) {
  return e.builder().CreateSelect(args[0], args[1], args[2]);
}

// Bitwise, on iN registers.
Value *emitScalarBitAnd(KernelEmitter &e, const ScalarNode &, Value *const *args, DType) {
  return e.builder().CreateAnd(args[0], args[1]);
}
Value *emitScalarBitOr(KernelEmitter &e, const ScalarNode &, Value *const *args, DType) {
  return e.builder().CreateOr(args[0], args[1]);
}
Value *emitScalarBitXor(KernelEmitter &e, const ScalarNode &, Value *const *args, DType) {
  return e.builder().CreateXor(args[0], args[1]);
}
Value *emitScalarBitNot(KernelEmitter &e, const ScalarNode &, Value *const *args, DType) {
  return e.builder().CreateNot(args[0]);
}
// Shifts: an amount outside [0, width) (unsigned compare, so negative ones
// too) gives what ir/IntShift.h defines; the shift instruction itself would
// give poison there, which the select never picks.
Value *emitScalarShl(KernelEmitter &e, const ScalarNode &, Value *const *args, DType) {
  auto &B = e.builder();
  llvm::Type *ty = args[1]->getType();
  Value *inRange = B.CreateICmpULT(args[1], llvm::ConstantInt::get(ty, ty->getScalarSizeInBits()));
  return B.CreateSelect(inRange, B.CreateShl(args[0], args[1]), llvm::Constant::getNullValue(ty));
}
Value *emitScalarShr(KernelEmitter &e, const ScalarNode &, Value *const *args, DType t) {
  auto &B = e.builder();
  llvm::Type *ty = args[1]->getType();
  const unsigned bits = ty->getScalarSizeInBits();
  Value *inRange = B.CreateICmpULT(args[1], llvm::ConstantInt::get(ty, bits));
  if (isSignedInt(t)) // by bits - 1 past the width: the sign everywhere
    return B.CreateAShr(args[0],
                        B.CreateSelect(inRange, args[1], llvm::ConstantInt::get(ty, bits - 1)));
  return B.CreateSelect(inRange, B.CreateLShr(args[0], args[1]), llvm::Constant::getNullValue(ty));
}

ScalarHook scalarHook(ScalarOp op) {
  static constexpr ScalarHook kHooks[] = {
#define SCALAR_OP(E, N, A, C, Cost, Fold, FE, IE) &emitScalar##E,
#include "ir/ScalarOps.def"
  };
  return kHooks[static_cast<size_t>(op)];
}

} // namespace kiln::codegen::cpu
