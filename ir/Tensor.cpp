//===- Tensor.cpp - Host tensors --------------------------------*- C++ -*-===//
#include "ir/Tensor.h"

#include "ir/DTypeCodec.h"

#include "ir/Support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <new>

namespace kiln {
namespace {
constexpr size_t kAlign = 64;

std::shared_ptr<const void> allocate(size_t bytes) {
  size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  if (rounded == 0)
    rounded = kAlign;
  void *p = ::operator new(rounded, std::align_val_t(kAlign));
  std::memset(p, 0, rounded);
  return std::shared_ptr<const void>(
      p, [](const void *q) { ::operator delete(const_cast<void *>(q), std::align_val_t(kAlign)); });
}

template <typename T> T load(const void *p, int64_t i) {
  T v;
  std::memcpy(&v, static_cast<const char *>(p) + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <typename T> void store(void *p, int64_t i, T v) {
  std::memcpy(static_cast<char *>(p) + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

} // namespace

Tensor Tensor::zeros(DType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.storage_ = allocate(t.byteSize());
  t.data_ = t.storage_.get();
  return t;
}

Tensor Tensor::borrow(DType dtype, std::vector<int64_t> shape, std::shared_ptr<const void> owner,
                      const void *data) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.storage_ = std::move(owner);
  t.data_ = data;
  return t;
}

Tensor Tensor::fromBytes(DType dtype, std::vector<int64_t> shape, const void *bytes) {
  Tensor t = zeros(dtype, std::move(shape));
  if (t.byteSize())
    std::memcpy(t.mutableRawData(), bytes, t.byteSize());
  return t;
}

Tensor Tensor::fromDoubles(DType dtype, std::vector<int64_t> shape,
                           const std::vector<double> &values) {
  Tensor t = zeros(dtype, std::move(shape));
  KILN_ASSERT(static_cast<int64_t>(values.size()) == t.numel());
  for (size_t i = 0; i < values.size(); ++i)
    t.setDouble(static_cast<int64_t>(i), values[i]);
  return t;
}

Tensor Tensor::fromInts(DType dtype, std::vector<int64_t> shape,
                        const std::vector<int64_t> &values) {
  Tensor t = zeros(dtype, std::move(shape));
  KILN_ASSERT(static_cast<int64_t>(values.size()) == t.numel());
  for (size_t i = 0; i < values.size(); ++i)
    t.setInt(static_cast<int64_t>(i), values[i]);
  return t;
}

std::vector<int64_t> Tensor::strides() const {
  std::vector<int64_t> s(shape_.size(), 1);
  for (int64_t i = rank() - 2; i >= 0; --i)
    s[static_cast<size_t>(i)] = s[static_cast<size_t>(i + 1)] * shape_[static_cast<size_t>(i + 1)];
  return s;
}

// The element conversions are the codecs of ir/DTypes.def (ir/DTypeCodec.h).
double Tensor::getDouble(int64_t i) const {
  return visitDType(dtype_,
                    [&]<typename C>() { return C::toDouble(load<typename C::Storage>(data_, i)); });
}

int64_t Tensor::getInt(int64_t i) const {
  return visitDType(dtype_,
                    [&]<typename C>() { return C::toInt(load<typename C::Storage>(data_, i)); });
}

void Tensor::setDouble(int64_t i, double v) const {
  void *p = mutableRawData();
  visitDType(dtype_, [&]<typename C>() { store<typename C::Storage>(p, i, C::fromDouble(v)); });
}

void Tensor::setInt(int64_t i, int64_t v) const {
  void *p = mutableRawData();
  visitDType(dtype_, [&]<typename C>() { store<typename C::Storage>(p, i, C::fromInt(v)); });
}

std::vector<double> Tensor::toDoubles() const {
  std::vector<double> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i)
    out[static_cast<size_t>(i)] = getDouble(i);
  return out;
}

std::vector<int64_t> Tensor::toInts() const {
  std::vector<int64_t> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i)
    out[static_cast<size_t>(i)] = getInt(i);
  return out;
}

Tensor Tensor::view(std::vector<int64_t> shape) const {
  KILN_ASSERT(numElements(shape) == numel());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  return fromBytes(dtype_, shape_, data_);
}

bool Tensor::bitwiseEqual(const Tensor &o) const {
  if (dtype_ != o.dtype_ || shape_ != o.shape_)
    return false;
  return byteSize() == 0 || std::memcmp(data_, o.data_, byteSize()) == 0;
}

bool Tensor::isSplat() const {
  size_t es = dtypeSize(dtype_);
  const char *p = static_cast<const char *>(data_);
  for (int64_t i = 1; i < numel(); ++i)
    if (std::memcmp(p, p + static_cast<size_t>(i) * es, es) != 0)
      return false;
  return true;
}

std::string previewValues(const Tensor &t, int64_t limit) {
  std::string s = "[";
  const int64_t n = std::min<int64_t>(t.numel(), limit);
  for (int64_t i = 0; i < n; ++i) {
    char buf[64];
    if (isFloat(t.dtype()))
      std::snprintf(buf, sizeof(buf), "%.6g", t.getDouble(i));
    else
      std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(t.getInt(i)));
    s += (i ? ", " : "") + std::string(buf);
  }
  if (t.numel() > n)
    s += std::string(n ? ", " : "") + "... (" + std::to_string(t.numel()) + " values)";
  return s + "]";
}

} // namespace kiln
