//===- ComputeBuffers.h - Compute types of the linalg kernels --*- C++ -*-===//
//
// Private to ir/ops: the compute type each contraction and window reference
// kernel runs in (Note [Compute types]), buffers that read and write a
// tensor as that type, and the blocked GEMM the matmul, gemm and conv
// kernels share (MatMul.cpp, Linalg.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Tensor.h"

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace kiln::ops {

//===----------------------------------------------------------------------===//
// Compute types and buffers
//===----------------------------------------------------------------------===//

// Note [Compute types]
// Each kernel is a template over its compute type T: double for f64, float
// for f32, f16 and bf16 (half types are widened to float, computed, and
// rounded once on the way out), uint64_t for the integer dtypes (matmul
// only): unsigned arithmetic wraps without undefined behaviour, and its low
// bits are the two's complement result, so results wrap to the dtype like
// numpy. When a tensor's dtype stores
// exactly T, the kernel reads and writes its bytes directly; otherwise
// InputBuffer / OutputBuffer convert through a temporary. f32 products are
// accumulated in float, as every production backend does.

/// Calls `fn(T{})` with the compute type of `dtype`. See Note [Compute types].
template <typename Fn> decltype(auto) withComputeType(DType dtype, Fn &&fn) {
  if (dtype == DType::F64)
    return fn(double{});
  if (isFloat(dtype))
    return fn(float{});
  return fn(uint64_t{});
}

/// Calls `fn(T{})` with the compute type of the float `dtype`.
template <typename Fn> decltype(auto) withFloatComputeType(DType dtype, Fn &&fn) {
  if (dtype == DType::F64)
    return fn(double{});
  return fn(float{});
}

/// True when elements of `dtype` are stored as T.
template <typename T> bool storesAs(DType dtype) {
  if constexpr (std::is_same_v<T, float>)
    return dtype == DType::F32;
  else if constexpr (std::is_same_v<T, double>)
    return dtype == DType::F64;
  else
    return dtype == DType::I64; // same-width signed and unsigned may alias
}

/// A tensor's elements as T: its own bytes when its dtype stores T, else a
/// converted copy.
template <typename T> class InputBuffer {
public:
  explicit InputBuffer(const Tensor &t) {
    if (storesAs<T>(t.dtype())) {
      data_ = t.data<T>();
      return;
    }
    copy_.resize(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) {
      if constexpr (std::is_integral_v<T>)
        copy_[static_cast<size_t>(i)] = static_cast<T>(t.getInt(i));
      else
        copy_[static_cast<size_t>(i)] = static_cast<T>(t.getDouble(i));
    }
    data_ = copy_.data();
  }
  const T *data() const { return data_; }

private:
  std::vector<T> copy_;
  const T *data_ = nullptr;
};

/// A zero-filled T buffer for writing a fresh tensor's elements: the tensor's
/// own bytes when its dtype stores T, else a copy that finish() converts back.
template <typename T> class OutputBuffer {
public:
  explicit OutputBuffer(const Tensor &t) : tensor_(t) {
    if (storesAs<T>(t.dtype())) {
      data_ = t.mutableData<T>();
      return;
    }
    copy_.assign(static_cast<size_t>(t.numel()), T(0));
    data_ = copy_.data();
  }
  T *data() const { return data_; }
  /// Stores the computed values into the tensor (a no-op for direct ones).
  void finish() const {
    for (size_t i = 0; i < copy_.size(); ++i) {
      if constexpr (std::is_integral_v<T>)
        tensor_.setInt(static_cast<int64_t>(i), static_cast<int64_t>(copy_[i]));
      else
        tensor_.setDouble(static_cast<int64_t>(i), static_cast<double>(copy_[i]));
    }
  }

private:
  Tensor tensor_;
  std::vector<T> copy_;
  T *data_ = nullptr;
};

//===----------------------------------------------------------------------===//
// GEMM
//===----------------------------------------------------------------------===//

/// C[i, j] += sum_k A(i, k) * B[k, j] for i < m, j < n, k < kDepth, where
/// A(i, k) = a[i * aRowStride + k * aColStride] (so A may be transposed),
/// B is row-major with row stride ldb and C row-major with row stride ldc.
/// Loops are blocked over n and k so a block of B stays in cache, and four
/// rows of C are updated per pass over a row of B; the innermost loop runs
/// contiguously over j and vectorizes.
template <typename T>
void gemmAccumulate(int64_t m, int64_t n, int64_t kDepth, const T *a, int64_t aRowStride,
                    int64_t aColStride, const T *b, int64_t ldb, T *c, int64_t ldc) {
  constexpr int64_t kBlockN = 256, kBlockK = 128;
  for (int64_t j0 = 0; j0 < n; j0 += kBlockN) {
    const int64_t nb = std::min(kBlockN, n - j0);
    for (int64_t k0 = 0; k0 < kDepth; k0 += kBlockK) {
      const int64_t k1 = std::min(k0 + kBlockK, kDepth);
      int64_t i = 0;
      for (; i + 4 <= m; i += 4) {
        T *__restrict c0 = c + i * ldc + j0;
        T *__restrict c1 = c0 + ldc;
        T *__restrict c2 = c1 + ldc;
        T *__restrict c3 = c2 + ldc;
        for (int64_t k = k0; k < k1; ++k) {
          const T *ak = a + i * aRowStride + k * aColStride;
          const T a0 = ak[0], a1 = ak[aRowStride], a2 = ak[2 * aRowStride], a3 = ak[3 * aRowStride];
          const T *__restrict bk = b + k * ldb + j0;
          for (int64_t j = 0; j < nb; ++j) {
            const T bv = bk[j];
            c0[j] += a0 * bv;
            c1[j] += a1 * bv;
            c2[j] += a2 * bv;
            c3[j] += a3 * bv;
          }
        }
      }
      for (; i < m; ++i) {
        T *__restrict c0 = c + i * ldc + j0;
        for (int64_t k = k0; k < k1; ++k) {
          const T a0 = a[i * aRowStride + k * aColStride];
          const T *__restrict bk = b + k * ldb + j0;
          for (int64_t j = 0; j < nb; ++j)
            c0[j] += a0 * bk[j];
        }
      }
    }
  }
}

} // namespace kiln::ops
