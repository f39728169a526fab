//===- KernelHelpers.cpp - Functions generated kernels call ---------------===//
//
// Defined in the runtime so that the JIT (codegen/cpu/CpuJit.cpp) and the
// artifact loader (runtime/artifact/) resolve kernels' calls to the same
// code. See runtime/KernelABI.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/KernelABI.h"

extern "C" int64_t kiln_cpu_ipow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 1)
      return 1;
    if (base == -1)
      return exp % 2 == 0 ? 1 : -1;
    return 0;
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  for (uint64_t e = static_cast<uint64_t>(exp); e > 0; e >>= 1) {
    if (e & 1)
      result *= b;
    b *= b;
  }
  return static_cast<int64_t>(result);
}
