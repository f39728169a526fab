//===- KernelABI.h - How the runtime calls generated kernels ----*- C++ -*-===//
//
// The contract between code generators and the runtime. It has no
// dependency on the compiler: a compiled artifact runs without LLVM.
//
//===----------------------------------------------------------------------===//
#pragma once

#include <cstdint>

namespace kiln::runtime {

/// A generated kernel: runs outer points [begin, end) of its iteration
/// space; `buffers` are its inputs then its outputs (dense, row-major,
/// aligned to 64 bytes). Kernels are reentrant: disjoint ranges may run on
/// different threads at once.
using KernelFn = void (*)(void *const *buffers, int64_t begin, int64_t end);

} // namespace kiln::runtime
