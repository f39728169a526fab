//===- Tensor.h - Host tensors ----------------------------------*- C++ -*-===//
//
// A Tensor is a dense, row-major, statically shaped array in host memory.
// Storage is 64-byte aligned and shared: copying a Tensor shares its bytes
// (a constant handed to the interpreter is not copied), and view() gives a
// zero-copy reinterpretation of the same bytes with another shape. Tensors
// are values in the sense that kernels never write into a tensor they did
// not allocate.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Type.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

class Tensor {
public:
  /// An empty (null) tensor; isNull() is true.
  Tensor() = default;

  /// A zero-filled tensor of `dtype` and static `shape`.
  static Tensor zeros(DType dtype, std::vector<int64_t> shape);
  /// A tensor over bytes someone else owns; `owner` keeps them alive.
  /// `data` must be aligned to the dtype's size.
  static Tensor borrow(DType dtype, std::vector<int64_t> shape, std::shared_ptr<const void> owner,
                       const void *data);
  /// A tensor holding a copy of `bytes` (numElements * dtypeSize bytes).
  static Tensor fromBytes(DType dtype, std::vector<int64_t> shape, const void *bytes);
  /// A 0-d or 1-d tensor from values, converted to `dtype`.
  static Tensor fromDoubles(DType dtype, std::vector<int64_t> shape,
                            const std::vector<double> &values);
  static Tensor fromInts(DType dtype, std::vector<int64_t> shape,
                         const std::vector<int64_t> &values);
  static Tensor scalar(DType dtype, double value) { return fromDoubles(dtype, {}, {value}); }

  bool isNull() const { return !storage_; }
  DType dtype() const { return dtype_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[static_cast<size_t>(i)]; }
  int64_t numel() const { return numElements(shape_); }
  size_t byteSize() const { return static_cast<size_t>(numel()) * dtypeSize(dtype_); }
  TensorType type() const { return TensorType(dtype_, shape_); }
  /// Row-major strides in elements.
  std::vector<int64_t> strides() const;

  const void *rawData() const { return data_; }
  /// Mutable bytes; only for a tensor the caller just created.
  void *mutableRawData() const { return const_cast<void *>(data_); }
  template <typename T> const T *data() const { return static_cast<const T *>(data_); }
  template <typename T> T *mutableData() const { return static_cast<T *>(mutableRawData()); }

  /// Element `i` (flat, row-major) converted to double / int64.
  double getDouble(int64_t i) const;
  int64_t getInt(int64_t i) const;
  /// Stores `v` converted to the dtype (float rounding, integer truncation
  /// toward zero, bool as v != 0).
  void setDouble(int64_t i, double v) const;
  void setInt(int64_t i, int64_t v) const;
  /// All elements as doubles / int64 (for tests and small tensors).
  std::vector<double> toDoubles() const;
  std::vector<int64_t> toInts() const;

  /// The same bytes with another static shape of the same element count.
  Tensor view(std::vector<int64_t> shape) const;
  /// A deep copy.
  Tensor clone() const;
  /// Same dtype, shape and bytes (NaNs compare by bits).
  bool bitwiseEqual(const Tensor &o) const;
  bool operator==(const Tensor &o) const { return bitwiseEqual(o); }
  /// True when every element equals the first.
  bool isSplat() const;
  /// A short description such as `f32[2,3]`.
  std::string str() const { return type().str(); }

private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  std::shared_ptr<const void> storage_;
  const void *data_ = nullptr;
};

/// At most `limit` leading values of `t`, as the CLI prints outputs:
/// "[1.5, -2, ... (1000 values)]".
std::string previewValues(const Tensor &t, int64_t limit);

} // namespace kiln
