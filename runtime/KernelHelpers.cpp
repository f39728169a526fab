//===- KernelHelpers.cpp - Functions generated kernels call ---------------===//
//
// Defined in the runtime so that the JIT (codegen/cpu/CpuJit.cpp) and the
// artifact loader (runtime/artifact/) resolve kernels' calls to the same
// code. See runtime/KernelABI.h.
//
//===----------------------------------------------------------------------===//

#include "ir/IntPow.h"
#include "runtime/KernelABI.h"

extern "C" int64_t kiln_cpu_ipow(int64_t base, int64_t exp) {
  return kiln::wrappingIntPow(base, exp);
}
