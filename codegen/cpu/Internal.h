//===- Internal.h - Shared helpers of the LLVM CPU backend -----*- C++ -*-===//
//
// Private to codegen/cpu/: the kernel-to-LLVM-IR emitter (EmitLLVM.cpp), the
// vector math table (VectorMath.cpp) and the inline transcendentals
// (InlineMath.cpp), used by the JIT (CpuJit.cpp). Only these files include
// LLVM headers; this header forward-declares what it needs so that it stays
// cheap to include.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/KernelIR.h"

#include <memory>
#include <string>
#include <string_view>

namespace llvm {
class FunctionCallee;
class IRBuilderBase;
class LLVMContext;
class Module;
class TargetLibraryInfoImpl;
class Type;
class Value;
} // namespace llvm

namespace kiln::codegen::cpu {

/// The libmvec vector ABI that transcendentals use (see Note [Vector math]
/// in VectorMath.cpp): `e` (AVX-512: 16 floats, 8 doubles) when the host
/// has AVX512F, else `d` (AVX2: 8 floats, 4 doubles) with AVX2 and FMA,
/// else `b` (SSE: 4 floats, 2 doubles); None without libmvec.
struct VectorMathIsa {
  enum class Abi { None, Sse, Avx2, Avx512 } abi = Abi::None;
  /// The vector width kernels should prefer, in bits (the
  /// "prefer-vector-width" function attribute); 0: the target's default.
  unsigned preferredVectorBits() const { return abi == Abi::Avx512 ? 512 : 0; }
  /// Whether exp is inline IR (Note [Inline exp] in InlineMath.cpp) rather
  /// than libmvec's: with AVX-512, and without libmvec; libmvec's AVX2 and
  /// SSE4.1 code (the SSE variant, picked at run time) measured faster.
  bool inlinesExp() const { return abi == Abi::Avx512 || abi == Abi::None; }
  /// From an LLVM target feature string ("+avx2,+fma,...").
  static VectorMathIsa fromFeatures(std::string_view features);
  const char *name() const;
};

/// The transcendental functions that are lowered to calls (exp only where
/// VectorMathIsa::inlinesExp() is false).
enum class MathFn { Exp, Log, Tanh, Erf, Sin, Cos, Asin, Acos, Atan, Pow };

/// The scalar function for `fn` on `type` (float or double) in `m`, marked
/// memory(none), nounwind and willreturn (clang's -fno-math-errno) so the
/// loop vectorizer may replace it. With a vector ABI it is a small noinline
/// wrapper (`kiln.expf`) that calls the libmvec vector function on a splat,
/// so scalar remainders compute bit-identical results to vector bodies;
/// without one it is libm's function.
llvm::FunctionCallee getMathFunction(llvm::Module &m, MathFn fn, llvm::Type *type,
                                     const VectorMathIsa &isa);

/// exp of `x` (float or double) as inline IR, no call: Note [Inline exp]
/// in InlineMath.cpp. x < -104 (f32) / -746 (f64) gives +0.
llvm::Value *emitInlineExp(llvm::IRBuilderBase &b, llvm::Value *x);

/// Registers the wrapper-to-vector-function mappings for `isa`. The names
/// are string literals, so they outlive `tli`.
void addVectorMathMappings(llvm::TargetLibraryInfoImpl &tli, const VectorMathIsa &isa);

/// Name of the runtime helper for integer pow (defined in CpuJit.cpp and
/// added to the JIT's symbol table).
inline constexpr const char *kIntPowHelper = "kiln_cpu_ipow";

/// Emits `k` as an LLVM module holding the external function `symbol`
/// (runtime/KernelABI.h) and an internal body that takes each buffer as a
/// noalias argument. Returns null with `error` set when the kernel uses
/// something the backend cannot lower (a malformed kernel).
std::unique_ptr<llvm::Module> emitKernelModule(const Kernel &k, const Schedule &s,
                                               const std::string &symbol, const VectorMathIsa &isa,
                                               llvm::LLVMContext &ctx, std::string &error);

} // namespace kiln::codegen::cpu
