//===- CpuJit.h - Kernels to machine code with LLVM 16 ----------*- C++ -*-===//
//
// Lowers codegen Kernels to LLVM IR with IRBuilder, optimizes with the O3
// pipeline for the host TargetMachine (so AVX2/AVX-512 vectorization
// happens, with transcendental calls mapped to vector math functions), and
// JIT-compiles them in process with ORC LLJIT.
//
// Kernel ABI (runtime/KernelABI.h): every kernel is
//   void name(void *const *buffers, int64_t begin, int64_t end)
// with `buffers` = the kernel's inputs then outputs, running outer points
// [begin, end), so the runtime can split the outer range across threads.
//
// Only this library includes LLVM headers.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/KernelIR.h"
#include "codegen/cpu/CpuTarget.h"
#include "ir/Diagnostics.h"
#include "runtime/KernelABI.h"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::codegen::cpu {

/// The most loops a kernel's inner loop is split into where a condition on
/// the inner index changes (Note [Inner loops split where a condition
/// changes] in InnerIndex.cpp); a stage needing more keeps one loop.
inline constexpr size_t kMaxInnerLoops = 65;
/// A range of a split inner loop at most this long is vectorized without
/// interleaving or unrolling (Note [Inner loops split where a condition
/// changes]).
inline constexpr int64_t kShortInnerRange = 64;

struct CpuJitOptions {
  /// The CPU kernels are compiled for (resolveCpuTarget; default: native).
  CpuTarget target;
  /// LLVM optimization level (0-3).
  int optLevel = 3;
  /// Dump folder for per-kernel LLVM IR (before and after optimization); empty: none.
  std::string dumpDir;
};

/// One kernel to compile with compileAll().
struct KernelJob {
  const Kernel *kernel = nullptr;
  Schedule schedule;
};

/// A JIT session. Compiled code lives as long as the CpuJit; executables
/// hold a shared_ptr to it.
class CpuJit {
public:
  static FailureOr<std::shared_ptr<CpuJit>> create(const CpuJitOptions &opts,
                                                   DiagnosticEngine &diag);
  virtual ~CpuJit();

  /// Compiles `k` and returns its entry point. LLVM failures become
  /// diagnostics naming the kernel.
  virtual FailureOr<runtime::KernelFn> compile(const Kernel &k, const Schedule &s,
                                               DiagnosticEngine &diag) = 0;
  /// Compiles every job on up to `threads` threads (Note [Parallel kernel
  /// compiles]); entry i is jobs[i]'s. A failure is a diagnostic naming
  /// the kernel.
  virtual FailureOr<std::vector<runtime::KernelFn>>
  compileAll(std::span<const KernelJob> jobs, int threads, DiagnosticEngine &diag) = 0;
  /// The LLVM IR of `k` after optimization (`kiln compile --emit=llvm`).
  virtual FailureOr<std::string> emitLLVM(const Kernel &k, const Schedule &s, bool optimized,
                                          DiagnosticEngine &diag) = 0;
  /// The host CPU name and features LLVM detected (for reports).
  virtual std::string targetDescription() const = 0;
  /// The relocatable object compile() produced `fn` from (what artifacts
  /// store); null for a function this JIT did not compile.
  virtual std::shared_ptr<const runtime::KernelObject> objectOf(runtime::KernelFn fn) const = 0;
};

/// The threads compileAll() is given by the compiler: the CPUs this process
/// may run on (its affinity mask, which container CPU sets restrict), not
/// the machine's.
int compileThreads();

/// "16.0.6": the LLVM the JIT links.
std::string llvmVersion();

} // namespace kiln::codegen::cpu
