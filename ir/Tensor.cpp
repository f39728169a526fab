//===- Tensor.cpp - Host tensors --------------------------------*- C++ -*-===//
#include "ir/Tensor.h"

#include "ir/Support.h"

#include <cmath>
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

double Tensor::getDouble(int64_t i) const {
  switch (dtype_) {
  case DType::F32:
    return load<float>(data_, i);
  case DType::F16:
    return halfToFloat(load<uint16_t>(data_, i));
  case DType::BF16:
    return bf16ToFloat(load<uint16_t>(data_, i));
  case DType::F64:
    return load<double>(data_, i);
  case DType::I8:
    return load<int8_t>(data_, i);
  case DType::U8:
    return load<uint8_t>(data_, i);
  case DType::I32:
    return load<int32_t>(data_, i);
  case DType::I64:
    return static_cast<double>(load<int64_t>(data_, i));
  case DType::Bool:
    return load<uint8_t>(data_, i) ? 1.0 : 0.0;
  }
  kiln_unreachable("bad dtype");
}

int64_t Tensor::getInt(int64_t i) const {
  switch (dtype_) {
  case DType::I8:
    return load<int8_t>(data_, i);
  case DType::U8:
    return load<uint8_t>(data_, i);
  case DType::I32:
    return load<int32_t>(data_, i);
  case DType::I64:
    return load<int64_t>(data_, i);
  case DType::Bool:
    return load<uint8_t>(data_, i) ? 1 : 0;
  default:
    return saturatingFloatToInt<int64_t>(getDouble(i));
  }
}

void Tensor::setDouble(int64_t i, double v) const {
  void *p = mutableRawData();
  switch (dtype_) {
  case DType::F32:
    return store<float>(p, i, static_cast<float>(v));
  case DType::F16:
    return store<uint16_t>(p, i, floatToHalf(static_cast<float>(v)));
  case DType::BF16:
    return store<uint16_t>(p, i, floatToBf16(static_cast<float>(v)));
  case DType::F64:
    return store<double>(p, i, v);
  case DType::I8:
    return store<int8_t>(p, i, saturatingFloatToInt<int8_t>(v));
  case DType::U8:
    return store<uint8_t>(p, i, saturatingFloatToInt<uint8_t>(v));
  case DType::I32:
    return store<int32_t>(p, i, saturatingFloatToInt<int32_t>(v));
  case DType::I64:
    return store<int64_t>(p, i, saturatingFloatToInt<int64_t>(v));
  case DType::Bool:
    return store<uint8_t>(p, i, v != 0.0 ? 1 : 0);
  }
}

void Tensor::setInt(int64_t i, int64_t v) const {
  void *p = mutableRawData();
  switch (dtype_) {
  case DType::I8:
    return store<int8_t>(p, i, static_cast<int8_t>(v));
  case DType::U8:
    return store<uint8_t>(p, i, static_cast<uint8_t>(v));
  case DType::I32:
    return store<int32_t>(p, i, static_cast<int32_t>(v));
  case DType::I64:
    return store<int64_t>(p, i, v);
  case DType::Bool:
    return store<uint8_t>(p, i, v != 0 ? 1 : 0);
  default:
    return setDouble(i, static_cast<double>(v));
  }
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

} // namespace kiln
