//===- KernelABI.h - How the runtime calls generated kernels ----*- C++ -*-===//
//
// The contract between code generators and the runtime. It has no
// dependency on the compiler: a compiled artifact runs without LLVM.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>
#include <string>

namespace kiln::runtime {

/// A generated kernel: runs outer points [begin, end) of its iteration
/// space; `buffers` are its inputs then its outputs (dense, row-major,
/// aligned to 64 bytes), and for a kernel with run-time sizes then a
/// pointer to their int64 values (Step::sizes). Kernels are reentrant:
/// disjoint ranges may run on different threads at once.
using KernelFn = void (*)(void *const *buffers, int64_t begin, int64_t end);

/// A kernel's machine code as the code generator emitted it: an ELF64
/// x86-64 relocatable object (position independent, small code model) that
/// defines the global function `symbol` with the KernelFn signature and
/// refers to nothing but libm/libmvec functions and the helpers below.
/// What an artifact stores (runtime/artifact/) and its loader links.
struct KernelObject {
  std::string symbol;
  std::string elf;
};

} // namespace kiln::runtime

/// Helpers generated kernels may call (resolved by the JIT and by the
/// artifact loader alike): integer power with wrapping multiplication,
/// ir/IntPow.h's wrappingIntPow (the reference's own function).
extern "C" int64_t kiln_cpu_ipow(int64_t base, int64_t exp);
