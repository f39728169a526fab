//===- EmitScalar.cpp - One CUDA C hook per scalar primitive --------------===//
//
// The CUDA C expression of each row of ir/ScalarOps.def, for the semantics
// written there and in ir/ScalarExpr.h (evaluateScalars is the definition
// these match), as codegen/cpu/EmitScalar.cpp writes them in LLVM IR.
// Registers follow CudaEmitter.cpp. Unary and binary hooks see the node's
// type; comparisons and casts see the operand type. A row without its hook
// does not link.
//
// Float arithmetic is left to NVRTC's defaults (IEEE division and square
// root, FMA contraction, as the LLVM backend's `contract`); the math
// functions are CUDA's, whose documented error bounds (CUDA C++
// Programming Guide, "Mathematical Functions") are within the op table's
// (docs/NUMERICS.md): 2 ulps for exp, tanh, erf, sin, cos, asin, acos and
// atan in f32, 1 for log, 4 for pow; at most 2 in f64.
//
//===----------------------------------------------------------------------===//

#include "codegen/cuda/Internal.h"

namespace kiln::codegen::cuda {
namespace {

using Args = const std::string *;

std::string paren(const std::string &s) {
  return "(" + s + ")";
}

/// `a op b` wrapping in the unsigned type of the width.
std::string wrapping(DType t, const std::string &a, const char *op, const std::string &b) {
  const std::string W = CudaWriter::wrapType(t);
  return "((" + CudaWriter::regType(t) + ")((" + W + ")" + a + " " + op + " (" + W + ")" + b + "))";
}

std::string floatBinary(CudaWriter &w, DType t, const std::string &a, const char *op,
                        const std::string &b) {
  return w.roundTo(t, paren(a + " " + op + " " + b));
}

/// floor, ceil, rint of a float rounded back; an integer is itself.
std::string rounding(CudaWriter &w, const char *fn, DType t, const std::string &a) {
  if (!isFloat(t))
    return a;
  return w.roundTo(t, std::string(fn) + (t == DType::F64 ? "" : "f") + "(" + a + ")");
}

std::string sqrtOrRsqrt(CudaWriter &w, DType t, const std::string &a, bool reciprocal) {
  if (!isFloat(t)) {
    const std::string r = reciprocal ? "(1.0 / sqrt(" + w.convert(a, t, DType::F64) + "))"
                                     : "sqrt(" + w.convert(a, t, DType::F64) + ")";
    return w.convert(r, DType::F64, t);
  }
  const bool d = t == DType::F64;
  const std::string s = std::string(d ? "sqrt(" : "sqrtf(") + a + ")";
  return w.roundTo(t, reciprocal ? "(" + std::string(d ? "1.0" : "1.0f") + " / " + s + ")" : s);
}

std::string intDivRem(DType t, const std::string &a, const std::string &b, bool div) {
  const std::string T = CudaWriter::regType(t);
  if (isSignedInt(t))
    return div ? "kiln_sdiv<" + T + ", " + CudaWriter::wrapType(t) + ">(" + a + ", " + b + ")"
               : "kiln_srem<" + T + ">(" + a + ", " + b + ")";
  return std::string(div ? "kiln_udiv<" : "kiln_urem<") + T + ">(" + a + ", " + b + ")";
}

std::string maxOrMin(DType t, const std::string &a, const std::string &b, bool max) {
  if (isFloat(t))
    return std::string(max ? "kiln_max(" : "kiln_min(") + a + ", " + b + ")";
  return max ? "(" + a + " < " + b + " ? " + b + " : " + a + ")"
             : "(" + b + " < " + a + " ? " + b + " : " + a + ")";
}

std::string compare(const std::string &a, const char *op, const std::string &b) {
  return "(" + a + " " + op + " " + b + ")";
}

} // namespace

// Leaves (the kernel's are the writer's).
std::string emitCudaConstFloat(CudaWriter &w, const ScalarNode &n, Args, DType) {
  return w.constant(n.type, n.fvalue, static_cast<int64_t>(n.fvalue));
}
std::string emitCudaConstInt(CudaWriter &w, const ScalarNode &n, Args, DType) {
  return w.constant(n.type, n.fvalue, n.ivalue);
}
std::string emitCudaIndex(CudaWriter &w, const ScalarNode &n, Args, DType) {
  return w.leaf(n);
}
std::string emitCudaLoad(CudaWriter &w, const ScalarNode &n, Args, DType) {
  return w.leaf(n);
}
std::string emitCudaStageValue(CudaWriter &w, const ScalarNode &n, Args, DType) {
  return w.leaf(n);
}
std::string emitCudaSize(CudaWriter &w, const ScalarNode &n, Args, DType) {
  return w.leaf(n);
}

// Unary.
std::string emitCudaNeg(CudaWriter &, const ScalarNode &n, Args a, DType) {
  if (isFloat(n.type))
    return "(-" + a[0] + ")";
  if (n.type == DType::Bool)
    return a[0];
  return wrapping(n.type, "0", "-", a[0]);
}
std::string emitCudaAbs(CudaWriter &, const ScalarNode &n, Args a, DType) {
  if (isFloat(n.type))
    return (n.type == DType::F64 ? "fabs(" : "fabsf(") + a[0] + ")";
  if (!isSignedInt(n.type))
    return a[0];
  return "(" + a[0] + " < 0 ? " + wrapping(n.type, "0", "-", a[0]) + " : " + a[0] + ")";
}
std::string emitCudaExp(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  return w.mathCall("exp", n.type, a[0]);
}
std::string emitCudaLog(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  return w.mathCall("log", n.type, a[0]);
}
std::string emitCudaSqrt(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  return sqrtOrRsqrt(w, n.type, a[0], false);
}
std::string emitCudaRsqrt(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  return sqrtOrRsqrt(w, n.type, a[0], true);
}
std::string emitCudaRecip(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  if (isFloat(n.type))
    return w.roundTo(n.type, "(" + w.constant(n.type, 1, 1) + " / " + a[0] + ")");
  if (n.type == DType::Bool)
    return a[0];
  return intDivRem(n.type, w.constant(n.type, 1, 1), a[0], true);
}
std::string emitCudaTanh(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  return w.mathCall("tanh", n.type, a[0]);
}
std::string emitCudaErf(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  return w.mathCall("erf", n.type, a[0]);
}
std::string emitCudaSin(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  return w.mathCall("sin", n.type, a[0]);
}
std::string emitCudaCos(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  return w.mathCall("cos", n.type, a[0]);
}
std::string emitCudaAsin(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  return w.mathCall("asin", n.type, a[0]);
}
std::string emitCudaAcos(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  return w.mathCall("acos", n.type, a[0]);
}
std::string emitCudaAtan(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  return w.mathCall("atan", n.type, a[0]);
}
std::string emitCudaFloor(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  return rounding(w, "floor", n.type, a[0]);
}
std::string emitCudaCeil(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  return rounding(w, "ceil", n.type, a[0]);
}
std::string emitCudaRoundEven(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  return rounding(w, "rint", n.type, a[0]); // nearest even in the default mode
}
std::string emitCudaNot(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  if (n.type != DType::Bool)
    return w.fail("'not' of a " + std::string(dtypeName(n.type)) + " operand");
  return "(!" + a[0] + ")";
}
std::string emitCudaCast(CudaWriter &w, const ScalarNode &n, Args a, DType from) {
  return w.convert(a[0], from, n.type);
}

// Binary. On bools add/max are `or`, mul/min/pow are `and`, sub is `xor`
// (as the LLVM backend).
std::string emitCudaAdd(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  if (n.type == DType::Bool)
    return "(" + a[0] + " || " + a[1] + ")";
  if (isFloat(n.type))
    return floatBinary(w, n.type, a[0], "+", a[1]);
  return wrapping(n.type, a[0], "+", a[1]);
}
std::string emitCudaSub(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  if (n.type == DType::Bool)
    return "(" + a[0] + " != " + a[1] + ")";
  if (isFloat(n.type))
    return floatBinary(w, n.type, a[0], "-", a[1]);
  return wrapping(n.type, a[0], "-", a[1]);
}
std::string emitCudaMul(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  if (n.type == DType::Bool)
    return "(" + a[0] + " && " + a[1] + ")";
  if (isFloat(n.type))
    return floatBinary(w, n.type, a[0], "*", a[1]);
  return wrapping(n.type, a[0], "*", a[1]);
}
std::string emitCudaDiv(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  if (n.type == DType::Bool)
    return a[0];
  if (isFloat(n.type))
    return floatBinary(w, n.type, a[0], "/", a[1]);
  return intDivRem(n.type, a[0], a[1], true);
}
std::string emitCudaRem(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  if (n.type == DType::Bool)
    return "false";
  if (isFloat(n.type))
    return w.roundTo(n.type,
                     (n.type == DType::F64 ? "fmod(" : "fmodf(") + a[0] + ", " + a[1] + ")");
  return intDivRem(n.type, a[0], a[1], false);
}
std::string emitCudaMax(CudaWriter &, const ScalarNode &n, Args a, DType) {
  if (n.type == DType::Bool)
    return "(" + a[0] + " || " + a[1] + ")";
  return maxOrMin(n.type, a[0], a[1], true);
}
std::string emitCudaMin(CudaWriter &, const ScalarNode &n, Args a, DType) {
  if (n.type == DType::Bool)
    return "(" + a[0] + " && " + a[1] + ")";
  return maxOrMin(n.type, a[0], a[1], false);
}
std::string emitCudaPow(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  if (n.type == DType::Bool)
    return "(" + a[0] + " && " + a[1] + ")";
  if (isFloat(n.type))
    return w.mathCall("pow", n.type, a[0], &a[1]);
  return "((" + CudaWriter::regType(n.type) + ")kiln::wrappingIntPow((long long)" + a[0] +
         ", (long long)" + a[1] + "))";
}
std::string emitCudaAnd(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  if (n.type != DType::Bool)
    return w.fail("'and' of " + std::string(dtypeName(n.type)) + " operands");
  return "(" + a[0] + " && " + a[1] + ")";
}
std::string emitCudaOr(CudaWriter &w, const ScalarNode &n, Args a, DType) {
  if (n.type != DType::Bool)
    return w.fail("'or' of " + std::string(dtypeName(n.type)) + " operands");
  return "(" + a[0] + " || " + a[1] + ")";
}

// Comparisons: C's are ordered for floats (false with a NaN) and unsigned
// for unsigned types.
std::string emitCudaEq(CudaWriter &, const ScalarNode &, Args a, DType) {
  return compare(a[0], "==", a[1]);
}
std::string emitCudaLt(CudaWriter &, const ScalarNode &, Args a, DType) {
  return compare(a[0], "<", a[1]);
}
std::string emitCudaLe(CudaWriter &, const ScalarNode &, Args a, DType) {
  return compare(a[0], "<=", a[1]);
}
std::string emitCudaGt(CudaWriter &, const ScalarNode &, Args a, DType) {
  return compare(a[0], ">", a[1]);
}
std::string emitCudaGe(CudaWriter &, const ScalarNode &, Args a, DType) {
  return compare(a[0], ">=", a[1]);
}

// Ternary.
std::string emitCudaSelect(CudaWriter &, const ScalarNode &, Args a, DType) {
  return "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")";
}

// Bitwise, on the integer's bits.
std::string emitCudaBitAnd(CudaWriter &, const ScalarNode &n, Args a, DType) {
  return wrapping(n.type, a[0], "&", a[1]);
}
std::string emitCudaBitOr(CudaWriter &, const ScalarNode &n, Args a, DType) {
  return wrapping(n.type, a[0], "|", a[1]);
}
std::string emitCudaBitXor(CudaWriter &, const ScalarNode &n, Args a, DType) {
  return wrapping(n.type, a[0], "^", a[1]);
}
std::string emitCudaBitNot(CudaWriter &, const ScalarNode &n, Args a, DType) {
  return "((" + CudaWriter::regType(n.type) + ")~(" + CudaWriter::wrapType(n.type) + ")" + a[0] +
         ")";
}
// Shifts by the storage width's bits (ir/IntShift.h); an amount outside
// [0, bits), negative ones too, gives what IntShift.h defines.
std::string emitCudaShl(CudaWriter &, const ScalarNode &n, Args a, DType) {
  const std::string T = CudaWriter::regType(n.type);
  return "((" + T + ")kiln::shiftLeft((long long)" + a[0] + ", (long long)" + a[1] + ", " +
         std::to_string(8 * dtypeSize(n.type)) + "u))";
}
std::string emitCudaShr(CudaWriter &, const ScalarNode &n, Args a, DType) {
  // Unsigned operands are zero-extended: the logical shift of the width.
  const std::string T = CudaWriter::regType(n.type);
  return "((" + T + ")kiln::shiftRight((long long)" + a[0] + ", (long long)" + a[1] + ", " +
         std::to_string(8 * dtypeSize(n.type)) + "u))";
}

CudaHook cudaScalarHook(ScalarOp op) {
  static constexpr CudaHook kHooks[] = {
#define SCALAR_OP(E, N, A, C, Cost, Fold, FE, IE) &emitCuda##E,
#include "ir/ScalarOps.def"
  };
  return kHooks[static_cast<size_t>(op)];
}

} // namespace kiln::codegen::cuda
