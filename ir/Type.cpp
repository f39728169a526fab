//===- Type.cpp - Dims, shapes and tensor types -----------------*- C++ -*-===//
#include "ir/Type.h"

#include <algorithm>

namespace kiln {

std::string Dim::str() const {
  if (isStatic())
    return std::to_string(size_);
  return symbol_.empty() ? "?" : symbol_;
}

Shape makeShape(const std::vector<int64_t> &sizes) {
  return Shape(sizes.begin(), sizes.end());
}

bool isStatic(const Shape &s) {
  for (const Dim &d : s)
    if (!d.isStatic())
      return false;
  return true;
}

std::vector<int64_t> staticSizes(const Shape &s) {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const Dim &d : s)
    out.push_back(d.isStatic() ? d.size() : -1);
  return out;
}

int64_t numElements(const std::vector<int64_t> &sizes) {
  int64_t n = 1;
  for (int64_t s : sizes)
    n *= s;
  return n;
}

std::optional<int64_t> checkedNumElements(const std::vector<int64_t> &sizes) {
  int64_t n = 1;
  for (int64_t s : sizes)
    if (s < 0 || __builtin_mul_overflow(n, s, &n))
      return std::nullopt;
  return n;
}

std::optional<size_t> checkedByteSize(int64_t count, size_t elementBytes, size_t limit) {
  if (count < 0 || static_cast<uint64_t>(count) > limit / std::max<size_t>(elementBytes, 1))
    return std::nullopt;
  return static_cast<size_t>(count) * elementBytes;
}

std::string shapeStr(const Shape &s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i)
      out += ",";
    out += s[i].str();
  }
  return out + "]";
}

std::string sizesStr(const std::vector<int64_t> &sizes) {
  return shapeStr(makeShape(sizes));
}

std::string TensorType::str() const {
  return std::string(dtypeName(dtype)) + shapeStr(shape);
}

} // namespace kiln
