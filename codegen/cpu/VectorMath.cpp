//===- VectorMath.cpp - Transcendentals through glibc's libmvec -----------===//
//
// Transcendentals (exp, log, tanh, erf, sin, cos, asin, acos, atan, pow) are
// emitted as calls
// to scalar functions that the loop vectorizer replaces with the vector
// functions of glibc's libmvec through our own VecDesc table; exp except on
// AVX-512 targets, where it is inline IR (InlineMath.cpp, Note [Inline
// exp]).
//
// Note [Vector math]
// ~~~~~~~~~~~~~~~~~~
// LLVM 16's built-in vector libraries do not fit: SLEEFGNUABI lists only
// AArch64 names and LIBMVEC_X86 has no tanh or erf, and the vectorizer never
// vectorizes a loop containing an unmapped call. So we register the glibc
// 2.35+ libmvec names ourselves (x86-64 vector function ABI:
// `_ZGV<isa>N<lanes><params>_<name>`, isa b = SSE, d = AVX2, e = AVX-512):
//
//   float:  expf logf tanhf erff sinf cosf asinf acosf atanf (v), powf (vv):
//           16 (e), 8 (d), 4 (b)
//   double: exp log tanh erf sin cos asin acos atan (v), pow (vv):
//           8 (e), 4 (d), 2 (b)
//
// One vector width per host, and the scalar remainder iterations call the
// *same* vector function on a splat (through a noinline wrapper, kiln.expf
// etc., which is what the table maps). So an element's result does not
// depend on whether it fell in a vector body or a remainder, and splitting a
// kernel's outer range across threads gives bit-identical results. Mixing
// libm (scalar tail) with libmvec (vector body), or the SSE and AVX2
// variants, would not. On AVX-512 hosts kernels also get
// "prefer-vector-width"="512" (LLVM's tuning for Intel parts prefers 256
// bits): GCC -O3 -march=native -ffast-math vectorizes the same loops with
// zmm registers and `_ZGVeN16v_` calls, and 16 lanes measured ~1.4x faster
// than 8 on the pointwise benchmark (bench/pointwise_bench.cpp).
//
// Note [Wrapper signatures]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// The wrappers are internal functions, so without care the O3 pipeline may
// rewrite their signatures: when every call of kiln.powf passes the same
// constant exponent (x ** 2 of an exported LayerNorm), IPSCCP propagates it
// into the body and dead-argument elimination drops the parameter. The
// vectorizer then maps the one-argument kiln.powf to the two-argument
// _ZGVeN16vv_powf and calls it with one vector: the exponent register holds
// garbage and every vector-body element is wrong (inf/NaN) while the scalar
// remainder is right. Listing the wrappers in llvm.compiler.used makes them
// address-taken, which both passes respect; CpuJit also verifies each module
// after optimization, so a malformed call is an error, never a wrong answer.
//
// libmvec was chosen over SLEEF because it is about 2.6x faster on the
// GELU/tanh-heavy loops we care about (see the reference notes
// CPU-CODEGEN-NOTES.md); glibc documents up to 4 ulp. Max ulp against
// double libm, sampled over every 112th float of wide ranges (f32, both
// ABIs): erff 4.00 (e) / 1.93 (d) near |x| = 3.65 where erf(x) ~ 1 (absolute
// error < 2.5e-7), expf 2.62, logf 3.90, tanhf 1.37 (e) / 1.03 (d), sinf
// 2.11, cosf 1.93, asinf 2.91, acosf 1.83, atanf 1.11 (e).
// tests/unit/codegen_cpu/CpuMathTest.cpp re-measures them and asserts 4.5
// ulp (4 plus a margin for unsampled inputs). GCC's -ffast-math loops call
// the same functions. The declarations are memory(none): we do not model
// errno, as clang's -fno-math-errno, without which the vectorizer refuses.
// Without libmvec (another libc) the scalar libm functions are called and
// nothing vectorizes them.
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/Internal.h"

#include <llvm/ADT/StringRef.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/IR/Attributes.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/TypeSize.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <vector>

namespace kiln::codegen::cpu {

VectorMathIsa VectorMathIsa::fromFeatures(std::string_view features) {
  auto has = [&](std::string_view f) {
    size_t pos = 0;
    while ((pos = features.find(f, pos)) != std::string_view::npos) {
      size_t end = pos + f.size();
      bool startOk = pos > 0 && features[pos - 1] == '+';
      bool endOk = end == features.size() || features[end] == ',';
      if (startOk && endOk)
        return true;
      pos = end;
    }
    return false;
  };
  VectorMathIsa isa;
  // Every x86-64 CPU runs the `b` variants (libmvec has an SSE2 fallback).
  isa.abi = has("avx512f") ? Abi::Avx512 : has("avx2") && has("fma") ? Abi::Avx2 : Abi::Sse;
  return isa;
}

const char *VectorMathIsa::name() const {
  switch (abi) {
  case Abi::None:
    return "none, exp inline";
  case Abi::Sse:
    return "libmvec sse (_ZGVb)";
  case Abi::Avx2:
    return "libmvec avx2 (_ZGVd)";
  case Abi::Avx512:
    return "libmvec avx512 (_ZGVe), exp inline";
  }
  return "none";
}

namespace {

struct MathNames {
  const char *libm;    // libm's scalar function
  const char *wrapper; // our scalar wrapper around the vector function
  const char *sse;     // _ZGVb
  const char *avx2;    // _ZGVd
  const char *avx512;  // _ZGVe
};

// clang-format off
#define KILN_F32(N, P) \
  MathNames{#N "f", "kiln." #N "f", "_ZGVbN4" P "_" #N "f", "_ZGVdN8" P "_" #N "f", "_ZGVeN16" P "_" #N "f"}
#define KILN_F64(N, P) \
  MathNames{#N, "kiln." #N, "_ZGVbN2" P "_" #N, "_ZGVdN4" P "_" #N, "_ZGVeN8" P "_" #N}
// clang-format on

struct MathRow {
  MathFn fn;
  MathNames f32, f64;
};

const MathRow kMathRows[] = {
    {MathFn::Exp, KILN_F32(exp, "v"), KILN_F64(exp, "v")},
    {MathFn::Log, KILN_F32(log, "v"), KILN_F64(log, "v")},
    {MathFn::Tanh, KILN_F32(tanh, "v"), KILN_F64(tanh, "v")},
    {MathFn::Erf, KILN_F32(erf, "v"), KILN_F64(erf, "v")},
    {MathFn::Sin, KILN_F32(sin, "v"), KILN_F64(sin, "v")},
    {MathFn::Cos, KILN_F32(cos, "v"), KILN_F64(cos, "v")},
    {MathFn::Asin, KILN_F32(asin, "v"), KILN_F64(asin, "v")},
    {MathFn::Acos, KILN_F32(acos, "v"), KILN_F64(acos, "v")},
    {MathFn::Atan, KILN_F32(atan, "v"), KILN_F64(atan, "v")},
    {MathFn::Pow, KILN_F32(pow, "vv"), KILN_F64(pow, "vv")},
};

#undef KILN_F32
#undef KILN_F64

const MathNames &namesOf(MathFn fn, bool isDouble) {
  for (const MathRow &row : kMathRows)
    if (row.fn == fn)
      return isDouble ? row.f64 : row.f32;
  return kMathRows[0].f32;
}

unsigned lanes(const VectorMathIsa &isa, bool isDouble) {
  unsigned bytes = isa.abi == VectorMathIsa::Abi::Avx512 ? 64
                   : isa.abi == VectorMathIsa::Abi::Avx2 ? 32
                                                         : 16;
  return bytes / (isDouble ? 8 : 4);
}

const char *vectorName(const MathNames &names, const VectorMathIsa &isa) {
  switch (isa.abi) {
  case VectorMathIsa::Abi::Avx512:
    return names.avx512;
  case VectorMathIsa::Abi::Avx2:
    return names.avx2;
  default:
    return names.sse;
  }
}

void markPure(llvm::Function *f) {
  f->setDoesNotAccessMemory();
  f->setDoesNotThrow();
  f->addFnAttr(llvm::Attribute::WillReturn);
  f->addFnAttr(llvm::Attribute::NoSync);
}

} // namespace

llvm::FunctionCallee getMathFunction(llvm::Module &m, MathFn fn, llvm::Type *type,
                                     const VectorMathIsa &isa) {
  bool isDouble = type->isDoubleTy();
  const MathNames &names = namesOf(fn, isDouble);
  unsigned arity = fn == MathFn::Pow ? 2 : 1;
  std::vector<llvm::Type *> params(arity, type);
  auto *fnType = llvm::FunctionType::get(type, params, false);
  if (isa.abi == VectorMathIsa::Abi::None) {
    llvm::FunctionCallee callee = m.getOrInsertFunction(names.libm, fnType);
    if (auto *f = llvm::dyn_cast<llvm::Function>(callee.getCallee()))
      markPure(f);
    return callee;
  }
  if (llvm::Function *existing = m.getFunction(names.wrapper))
    return existing;

  // define internal T @kiln.expf(T %x) noinline memory(none) {
  //   %v = call <N x T> @_ZGVdN8v_expf(<N x T> splat %x)
  //   ret T extractelement %v, 0
  // }
  unsigned n = lanes(isa, isDouble);
  auto *vecType = llvm::FixedVectorType::get(type, n);
  std::vector<llvm::Type *> vecParams(arity, vecType);
  const char *vecName = vectorName(names, isa);
  llvm::FunctionCallee vecFn =
      m.getOrInsertFunction(vecName, llvm::FunctionType::get(vecType, vecParams, false));
  if (auto *f = llvm::dyn_cast<llvm::Function>(vecFn.getCallee()))
    markPure(f);
  auto *wrapper =
      llvm::Function::Create(fnType, llvm::GlobalValue::InternalLinkage, names.wrapper, m);
  markPure(wrapper);
  wrapper->addFnAttr(llvm::Attribute::NoInline);
  // The wrapper's signature must stay the vector function's (Note [Wrapper
  // signatures]): in llvm.compiler.used it counts as address-taken, which
  // keeps IPSCCP and dead-argument elimination off its parameters.
  llvm::appendToCompilerUsed(m, {wrapper});
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(m.getContext(), "entry", wrapper));
  std::vector<llvm::Value *> args;
  for (unsigned i = 0; i < arity; ++i)
    args.push_back(b.CreateVectorSplat(n, wrapper->getArg(i)));
  llvm::Value *v = b.CreateCall(vecFn, args);
  b.CreateRet(b.CreateExtractElement(v, uint64_t(0)));
  return wrapper;
}

void addVectorMathMappings(llvm::TargetLibraryInfoImpl &tli, const VectorMathIsa &isa) {
  if (isa.abi == VectorMathIsa::Abi::None)
    return;
  std::vector<llvm::VecDesc> descs;
  for (const MathRow &row : kMathRows)
    for (bool isDouble : {false, true}) {
      const MathNames &names = isDouble ? row.f64 : row.f32;
      descs.push_back({names.wrapper, vectorName(names, isa),
                       llvm::ElementCount::getFixed(lanes(isa, isDouble))});
    }
  tli.addVectorizableFunctions(descs);
}

} // namespace kiln::codegen::cpu
