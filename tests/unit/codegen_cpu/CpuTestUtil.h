//===- CpuTestUtil.h - Helpers for the LLVM CPU backend tests --*- C++ -*-===//
//
// Typed host buffers with deterministic random contents, one shared JIT per
// test binary, and a differential runner: compile a kernel, run it, run
// interpretKernel on copies of the same inputs, and compare every output
// element with a per-dtype tolerance.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/KernelIR.h"
#include "codegen/cpu/CpuJit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
#include <random>
#include <string>
#include <vector>

namespace kiln::codegen::cpu::test {

/// A std::allocator that aligns to 64 bytes, as the runtime's buffers are.
template <typename T> struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <typename U> Aligned64(const Aligned64<U> &) {}
  T *allocate(size_t n) {
    return static_cast<T *>(::operator new(n * sizeof(T), std::align_val_t(64)));
  }
  void deallocate(T *p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  bool operator==(const Aligned64 &) const { return true; }
};

/// A dense buffer of `dtype` elements.
struct HostBuffer {
  DType dtype = DType::F32;
  int64_t size = 0;
  std::vector<uint8_t, Aligned64<uint8_t>> bytes;

  HostBuffer(DType t, int64_t n)
      : dtype(t), size(n), bytes(static_cast<size_t>(std::max<int64_t>(n, 1)) * dtypeSize(t), 0) {}
  void *data() { return bytes.data(); }
  const void *data() const { return bytes.data(); }

  double getDouble(int64_t i) const;
  int64_t getInt(int64_t i) const;
  void set(int64_t i, double v);     // floats and ints (truncated, wrapped) alike
  void setInt(int64_t i, int64_t v); // wrapped to an integer dtype
};

/// Fills `b` with values uniform in [lo, hi] (integers: rounded; bool: 0/1).
void fillRandom(HostBuffer &b, double lo, double hi, uint32_t seed);

/// The JIT shared by all tests of the binary (created once).
CpuJit &sharedJit();

/// Tolerance of a comparison: |got - want| <= atol + rtol * |want|; NaN
/// must match NaN, infinities must match exactly.
struct Tolerance {
  double rtol = 0;
  double atol = 0;
};
/// Default tolerance for results of `t` after a few basic operations.
Tolerance defaultTolerance(DType t);

/// Compiles `k`, runs it over [0, numOuter) on `inputs`, runs
/// interpretKernel on the same inputs, and expects every output element to
/// match within `tol` (integers and bools exactly). Returns the JIT outputs.
std::vector<HostBuffer>
checkAgainstInterpreter(const Kernel &k, const std::vector<HostBuffer> &inputs, Tolerance tol);

/// Runs a compiled kernel on buffers (inputs then outputs).
void runKernel(runtime::KernelFn fn, std::vector<HostBuffer *> buffers, int64_t begin, int64_t end);

/// Distance in units in the last place between two floats (0 when equal,
/// huge when one is NaN and the other is not).
double ulpDistance(float got, double want);

} // namespace kiln::codegen::cpu::test
