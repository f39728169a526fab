//===- InlineMath.cpp - Transcendentals emitted as LLVM IR ----------------===//
//
// exp (f32 and f64) as straight-line IR: range reduction, a polynomial and a
// scaling by a power of two, with no call, so that the loop vectorizer
// widens it to the kernel's vector width and the scalar remainder computes
// the same operations. Used on AVX-512 targets and where there is no
// libmvec (VectorMathIsa::inlinesExp); the other transcendentals, and exp
// elsewhere, call libmvec (VectorMath.cpp).
//
// Note [Inline exp]
// ~~~~~~~~~~~~~~~~~
// exp(x) = 2^n * exp(r) with n = round(x / ln 2) and r = x - n ln 2, |r| <=
// ln2/2 (Cody-Waite: ln 2 split in a short high part, whose products with n
// are exact, and a low part):
//
//  - n is rounded by adding 1.5 * 2^23 (2^52 for f64): the sum's low
//    mantissa bits are n, so n as an integer is the sum's bit pattern minus
//    the constant's. No float-to-int conversion, which would be poison for
//    NaN: a NaN input yields garbage scale factors and a NaN polynomial,
//    whose product is NaN.
//  - exp(r) = 1 + r + r^2 P(r): f32 with Cephes' expf minimax P (degree
//    5), f64 with the Taylor series to r^13 (truncation error ~4e-18 at
//    ln2/2). P is evaluated by Estrin's scheme (a chain of log2(degree)
//    steps; Horner's chain of `degree` steps made the f32 kernel 1.5x
//    slower, as the vector loop is not interleaved), 1 + r added last. The
//    steps are llvm.fmuladd: fused on CPUs with FMA, mul and add on the
//    others; the same choice for the vector body and the remainder.
//  - 2^n is applied as two factors 2^(n>>1) and 2^(n - n>>1), both normal,
//    so results from the overflow threshold down through the subnormals are
//    rounded once (the second product). x above `highest` (89 / 710, above
//    the overflow threshold, so the clamp still gives +inf) is clamped to
//    it, which keeps n in the range where the factors are normal.
//  - x < lowest gives +0: Note [Exp below the subnormals] (EmitScalar.cpp).
//    Those lanes compute exp(0), not exp(lowest): a subnormal product costs
//    a microcode assist per lane (causal attention's masked scores are half
//    of its softmax's lanes: with the clamp to `lowest` its kernel was no
//    faster than with libmvec).
//
// Accuracy against double libm / long double expl (CpuMathTest): f32 max
// 1.00 ulp over [-87, 88] (libmvec's expf: 2.62), f64 1.00 ulp over [-700,
// 700]. Speed, 1 thread, best of 5 (`kiln compile F.kir --threads 1 --cpu C
// --profile 100`, f32[4,512,512]): AVX-512 exp 0.46 -> 0.33 ms, softmax 1.12
// -> 0.83 ms; the causal decoder's masked softmax at sequence 512 1.13 ->
// 0.80 ms. With AVX2 libmvec stayed faster (exp 0.46 vs 0.50, softmax 1.10
// vs 1.21 ms); with SSE2 they were level (1.13 vs 1.12, 2.85 both), as
// libmvec's SSE variant runs SSE4.1 code where the CPU has it.
//
// Note [Inline tanh and erf, tried]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// tanh and erf stay libmvec calls, on a measurement (2026-12-05, AVX-512,
// 1 thread, `kiln bench F --threads 1 --runs 100 --no-cache`, each pair
// alternated in one run; f32[4,512,512] alone, and the pointwise zoo
// model, whose one kernel holds 2 erf, 2 tanh and 3 sigmoids):
//
//  - Accurate forms (tanh: x + x^3 P(x^2) below 0.625, else 1 - 2 /
//    (exp(2a) + 1) with the inline exp; erf: x + x P(x^2) below 1, else
//    1 - exp(-a^2) Q(1 / (1 + a/2)); minimax fits): 1.19 and 1.06 ulp,
//    but slower than libmvec: tanh 0.65 vs 0.58 ms, erf 0.85 vs 0.69 ms,
//    the pointwise model 9.2-9.4 vs 7.4 ms (both ranges and an exp per
//    lane, and a dependency chain per iteration too long for the
//    out-of-order window: the kernel's body is ~400 instructions). erf
//    without the division (1 - exp(L(a) - a^2) above 1, L a degree-8
//    fit of log(erfc(a)) + a^2 in a - 2.5, 1.2e-8 absolute): 1.06 ulp,
//    0.84 vs 0.67 ms alone, the pointwise model 7.6-7.8 vs 6.8-7.5 ms.
//  - Clamped odd rationals x P(x^2) / Q(x^2) (degrees 4/4 and 5/5, fit to
//    2e-8 relative): tanh 0.34 vs 0.39 ms, erf 0.34 vs 0.69 ms, the
//    pointwise model 5.2 vs 7.35 ms, but 4.75 and 4.39 ulp in f32 (the
//    rounding of P and Q, each near 1-60, not the fit), above tanh's 4-ulp
//    bound; re-rounding the coefficients to f32 did not lower it (5.0).
//
// A form with both the rational's short chain and <= 2 ulp (P and Q
// arranged so their values round finely, or two-float evaluation of the
// leading terms) is the open lead.
//
//===----------------------------------------------------------------------===//

#include "codegen/cpu/Internal.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>

#include <vector>

namespace kiln::codegen::cpu {
namespace {

struct ExpConstants {
  double lowest, highest;
  double roundingShift; // 1.5 * 2^mantissaBits
  double ln2Hi, ln2Lo;
  unsigned mantissaBits;
  int bias;
  /// exp(r) = 1 + r + r^2 P(r): P's coefficients, lowest degree first.
  std::vector<double> poly;
};

const ExpConstants &constantsFor(bool isDouble) {
  static const ExpConstants f32{-104.0,
                                89.0,
                                12582912.0,
                                0.693359375,
                                -2.12194440e-4,
                                23,
                                127,
                                {5.0000001201e-1, 1.6666665459e-1, 4.1665795894e-2, 8.3334519073e-3,
                                 1.3981999507e-3, 1.9875691500e-4}};
  static const ExpConstants f64 = [] {
    ExpConstants c{
        -746.0, 710.0, 6755399441055744.0, 0.693145751953125, 1.42860682030941723212e-6, 52,
        1023,   {}};
    double fact = 1;
    for (int k = 1; k <= 13; ++k) {
      fact *= k;
      if (k >= 2)
        c.poly.push_back(1.0 / fact);
    }
    return c;
  }();
  return isDouble ? f64 : f32;
}

} // namespace

llvm::Value *emitInlineExp(llvm::IRBuilderBase &b, llvm::Value *x) {
  llvm::Type *t = x->getType();
  bool isDouble = t->isDoubleTy();
  const ExpConstants &c = constantsFor(isDouble);
  llvm::Type *it = isDouble ? b.getInt64Ty() : b.getInt32Ty();
  auto fp = [&](double v) { return llvm::ConstantFP::get(t, v); };
  auto fma = [&](llvm::Value *a, llvm::Value *m, llvm::Value *add) {
    return b.CreateIntrinsic(llvm::Intrinsic::fmuladd, {t}, {a, m, add});
  };

  llvm::Value *under = b.CreateFCmpOLT(x, fp(c.lowest));
  llvm::Value *over = b.CreateFCmpOGT(x, fp(c.highest));
  // Lanes below `lowest` compute exp(0): exp(lowest) would end in a
  // subnormal product, which costs a microcode assist per lane on x86.
  llvm::Value *xc = b.CreateSelect(under, fp(0.0), b.CreateSelect(over, fp(c.highest), x));

  llvm::Value *shifted = fma(xc, fp(1.4426950408889634), fp(c.roundingShift));
  llvm::Value *n = b.CreateFSub(shifted, fp(c.roundingShift));
  llvm::Value *shiftBits = b.CreateBitCast(fp(c.roundingShift), it);
  llvm::Value *ni = b.CreateSub(b.CreateBitCast(shifted, it), shiftBits);

  llvm::Value *r = fma(b.CreateFNeg(n), fp(c.ln2Hi), xc);
  r = fma(b.CreateFNeg(n), fp(c.ln2Lo), r);

  // Estrin's scheme: pairs a_2i + a_2i+1 r, then pairs of those with r^2,
  // r^4, ...: a dependency chain of log2(degree) steps instead of Horner's
  // degree steps (the vector loop is not interleaved; its latency is the
  // chain's).
  // 1 + r is added last, small terms first.
  std::vector<llvm::Value *> terms;
  for (double a : c.poly)
    terms.push_back(fp(a));
  llvm::Value *r2 = b.CreateFMul(r, r);
  llvm::Value *power = r;
  while (terms.size() > 1) {
    std::vector<llvm::Value *> next;
    for (size_t i = 0; i + 1 < terms.size(); i += 2)
      next.push_back(fma(terms[i + 1], power, terms[i]));
    if (terms.size() % 2)
      next.push_back(terms.back());
    terms = std::move(next);
    if (terms.size() > 1)
      power = power == r ? r2 : b.CreateFMul(power, power);
  }
  llvm::Value *y = b.CreateFAdd(fma(terms.front(), r2, r), fp(1.0));

  auto powerOfTwo = [&](llvm::Value *e) {
    llvm::Value *biased = b.CreateAdd(e, llvm::ConstantInt::get(it, c.bias));
    return b.CreateBitCast(b.CreateShl(biased, llvm::ConstantInt::get(it, c.mantissaBits)), t);
  };
  llvm::Value *n1 = b.CreateAShr(ni, llvm::ConstantInt::get(it, 1));
  llvm::Value *n2 = b.CreateSub(ni, n1);
  llvm::Value *scaled = b.CreateFMul(b.CreateFMul(y, powerOfTwo(n1)), powerOfTwo(n2));
  return b.CreateSelect(under, fp(0.0), scaled);
}

} // namespace kiln::codegen::cpu
