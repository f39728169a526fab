//===- Type.cpp - Dims, shapes and tensor types -----------------*- C++ -*-===//
#include "ir/Type.h"

#include <algorithm>

namespace kiln {

Dim Dim::symbolic(std::string symbol) {
  Dim d(-1);
  if (!symbol.empty())
    d.expr_ = std::make_shared<const DimExpr>(DimExpr::symbol(std::move(symbol)));
  return d;
}

Dim Dim::of(const DimExpr &e) {
  if (e.isConstant())
    return e.constant() >= 0 ? Dim(e.constant()) : Dim::dynamic();
  Dim d(-1);
  d.expr_ = std::make_shared<const DimExpr>(e);
  return d;
}

const std::string &Dim::symbol() const {
  static const std::string empty;
  return expr_ ? expr_->symbolName() : empty;
}

std::optional<DimExpr> Dim::expr() const {
  if (isStatic())
    return DimExpr(size_);
  if (expr_)
    return *expr_;
  return std::nullopt;
}

std::string Dim::str() const {
  if (isStatic())
    return std::to_string(size_);
  return expr_ ? expr_->str() : "?";
}

bool Dim::operator==(const Dim &o) const {
  if (size_ != o.size_)
    return false;
  if (!expr_ || !o.expr_)
    return !expr_ && !o.expr_;
  return *expr_ == *o.expr_;
}

namespace {

/// `f` on both dims' expressions; `?` when either is `?` or `f` fails.
template <typename F> Dim combine(const Dim &a, const Dim &b, F f) {
  auto x = a.expr(), y = b.expr();
  if (!x || !y)
    return Dim::dynamic();
  std::optional<DimExpr> r = f(*x, *y);
  return r ? Dim::of(*r) : Dim::dynamic();
}

} // namespace

Dim operator+(const Dim &a, const Dim &b) {
  return combine(a, b, [](const DimExpr &x, const DimExpr &y) { return add(x, y); });
}
Dim operator-(const Dim &a, const Dim &b) {
  return combine(a, b, [](const DimExpr &x, const DimExpr &y) { return DimExpr::sub(x, y); });
}
Dim operator*(const Dim &a, const Dim &b) {
  return combine(a, b, [](const DimExpr &x, const DimExpr &y) { return mul(x, y); });
}
Dim addConstant(const Dim &d, int64_t c) {
  auto e = d.expr();
  if (!e)
    return d;
  auto r = add(*e, DimExpr(c));
  return r ? Dim::of(*r) : Dim::dynamic();
}
Dim floorDiv(const Dim &a, int64_t c) {
  return combine(a, Dim(c),
                 [c](const DimExpr &x, const DimExpr &) { return DimExpr::floorDiv(x, c); });
}
Dim ceilDiv(const Dim &a, int64_t c) {
  return combine(a, Dim(c),
                 [c](const DimExpr &x, const DimExpr &) { return DimExpr::ceilDiv(x, c); });
}
Dim mod(const Dim &a, int64_t c) {
  return combine(a, Dim(c), [c](const DimExpr &x, const DimExpr &) { return DimExpr::mod(x, c); });
}
Dim minDim(const Dim &a, const Dim &b) {
  return combine(a, b, [](const DimExpr &x, const DimExpr &y) {
    return std::optional<DimExpr>(DimExpr::min(x, y));
  });
}
Dim maxDim(const Dim &a, const Dim &b) {
  return combine(a, b, [](const DimExpr &x, const DimExpr &y) {
    return std::optional<DimExpr>(DimExpr::max(x, y));
  });
}

std::optional<Dim> exactDivDim(const Dim &a, const Dim &b) {
  auto x = a.expr(), y = b.expr();
  if (!x || !y)
    return std::nullopt;
  auto r = DimExpr::exactDiv(*x, *y);
  if (!r)
    return std::nullopt;
  return Dim::of(*r);
}

Dim substituteDim(const Dim &d, const std::map<std::string, int64_t> &values) {
  auto e = d.expr();
  if (!e || d.isStatic())
    return d;
  std::map<std::string, DimExpr> subst;
  for (const auto &[name, v] : values)
    subst.emplace(name, DimExpr(v));
  auto r = e->substitute(subst);
  return r ? Dim::of(*r) : Dim::dynamic();
}

std::optional<int64_t> evaluateDim(const Dim &d, const std::map<std::string, int64_t> &values) {
  auto e = d.expr();
  if (!e)
    return std::nullopt;
  return e->evaluate(values);
}

Shape makeShape(const std::vector<int64_t> &sizes) {
  return Shape(sizes.begin(), sizes.end());
}

bool refines(const TensorType &t, const TensorType &general) {
  if (t.dtype != general.dtype || t.rank() != general.rank())
    return false;
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (!general.shape[d].isDynamic() && t.shape[d] != general.shape[d])
      return false;
  return true;
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
