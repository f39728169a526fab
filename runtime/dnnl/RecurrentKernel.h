//===- RecurrentKernel.h - Kiln's own small recurrent layers -----*- C++ -*-===//
//
// A recurrent layer computed by Kiln itself, the second implementation of a
// RecurrentStep next to oneDNN's primitive (Note [Recurrent layers] in
// codegen/cpu/dnnl/Recurrent.cpp says when each is used). Per direction:
// the input projections of all steps as one register-blocked GEMM, then per
// step the recurrent product of the few batch rows with R^T (kept in
// registers across the batch rows, so each weight is loaded once per
// step) followed by the gate math with vectorized exp. The code is
// portable C++ with GCC vector extensions, compiled three times (AVX-512,
// AVX2 and SSE2) and picked by oneDNN's effective ISA, which --cpu caps.
//
// Cells: LSTM, LBR GRU and RNN (tanh). Weights come in oneDNN's layouts and
// gate orders (RecurrentStep's plain weights), so the two implementations
// share them.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/dnnl/RecurrentStep.h"

#include <cstddef>
#include <new>
#include <vector>

namespace kiln::runtime::onednn {

/// An allocator of 64-byte aligned memory: the kernel's vector loads of
/// its weights then never straddle two cache lines (which halved the
/// recurrent GEMM's speed, measured on AVX-512).
template <class T> struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U> CacheLineAllocator(const CacheLineAllocator<U> &) {}
  T *allocate(std::size_t n) {
    return static_cast<T *>(::operator new(n * sizeof(T), std::align_val_t(64)));
  }
  void deallocate(T *p, std::size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <class U> bool operator==(const CacheLineAllocator<U> &) const { return true; }
};

class RecurrentKernel {
public:
  /// Whether this implementation computes `cell` (not GRU with
  /// linear_before_reset 0).
  static bool supports(RecurrentSpec::Cell cell);
  /// `weightsLayer` [D, I, G, H], `weightsIter` [D, H, G, H], `bias` [D,
  /// Gb, H] as RecurrentStep takes them.
  RecurrentKernel(const RecurrentSpec &spec, const std::vector<float> &weightsLayer,
                  const std::vector<float> &weightsIter, const std::vector<float> &bias);
  /// Runs on x, h0 (or null), c0 (or null), writing y ([S, D, B, H]), y_h
  /// and y_c (LSTM); a bidirectional layer runs its directions on two
  /// threads when `threads` >= 2. False when its scratch memory cannot be
  /// allocated.
  bool run(const float *x, const float *h0, const float *c0, float *y, float *yh, float *yc,
           int threads) const;
  /// Bytes of the padded weights.
  uint64_t bytes() const;
  /// The instruction set of the code it runs ("avx512", "avx2", "sse2").
  const char *isa() const;

private:
  RecurrentSpec spec_;
  int level_ = 0;
  /// Columns of the gate dimension, padded to a multiple of 64.
  int64_t cols_ = 0;
  /// Per direction: W^T [I, cols], R^T [H, cols] (in the GEMM's column
  /// panels, RecurrentKernelBody.inc), the bias of the input
  /// projection and the bias added to the recurrent product [cols].
  std::vector<float, CacheLineAllocator<float>> wt_, rt_, inBias_, recBias_;
};

} // namespace kiln::runtime::onednn
