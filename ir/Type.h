//===- Type.h - Dims, shapes and tensor types -------------------*- C++ -*-===//
//
// A Dim is a known size, a symbolic size (a named symbol `N` or an
// expression over symbols such as `2*S+1`, see DimExpr.h) or an anonymous
// dynamic size (`?`). A Shape is a list of dims; a TensorType pairs a shape
// with a dtype. Text form: `f32[64,784]`, `f32[N,3,224,224]`, `i64[]` (a
// scalar), `f32[?,8]`, `f32[N,S*64]`.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"
#include "ir/DimExpr.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

/// One dimension of a shape.
class Dim {
public:
  /// A static dim of `size` (>= 0).
  Dim(int64_t size = 0) : size_(size) {}
  /// A symbolic dim named `symbol`; an empty name means an anonymous `?`.
  static Dim symbolic(std::string symbol);
  static Dim dynamic() { return symbolic(""); }
  /// The dim of an expression: static when it is a constant (a negative
  /// constant, never a valid size, gives `?`).
  static Dim of(const DimExpr &e);

  bool isStatic() const { return size_ >= 0; }
  bool isSymbolic() const { return size_ < 0; }
  /// True for an anonymous `?` (no expression known).
  bool isDynamic() const { return size_ < 0 && !expr_; }
  /// The size of a static dim; callers check isStatic() first.
  int64_t size() const { return size_; }
  /// The symbol of a dim that is one symbol (`N`); empty for `?`, a static
  /// dim and an expression such as `N+1`.
  const std::string &symbol() const;
  /// The dim as an expression (a constant for a static dim); nullopt for `?`.
  std::optional<DimExpr> expr() const;
  std::string str() const;

  bool operator==(const Dim &o) const;
  bool operator!=(const Dim &o) const { return !(*this == o); }

private:
  int64_t size_;
  /// The expression of a symbolic dim; null for `?` and static dims.
  std::shared_ptr<const DimExpr> expr_;
};

// Dim arithmetic: static operands give a static result, symbolic ones an
// expression (see DimExpr.h); `?` or an overflow anywhere gives `?`.
Dim operator+(const Dim &a, const Dim &b);
Dim operator-(const Dim &a, const Dim &b);
Dim operator*(const Dim &a, const Dim &b);
/// `d + c` for any integer `c` (Dim(c) holds only sizes >= 0).
Dim addConstant(const Dim &d, int64_t c);
/// Floor / ceiling division and modulo by a positive constant.
Dim floorDiv(const Dim &a, int64_t c);
Dim ceilDiv(const Dim &a, int64_t c);
Dim mod(const Dim &a, int64_t c);
Dim minDim(const Dim &a, const Dim &b);
Dim maxDim(const Dim &a, const Dim &b);
/// `a / b` when `b` divides `a` exactly (see DimExpr::exactDiv); nullopt
/// when it does not or either is `?`.
std::optional<Dim> exactDivDim(const Dim &a, const Dim &b);
/// The dim with symbols bound to sizes replaced; `?` stays `?`.
Dim substituteDim(const Dim &d, const std::map<std::string, int64_t> &values);
/// The size of `d` with symbols bound; nullopt for `?` or an unbound symbol.
std::optional<int64_t> evaluateDim(const Dim &d, const std::map<std::string, int64_t> &values);

/// A list of dims, outermost first.
using Shape = std::vector<Dim>;

/// Builds a static shape from sizes.
Shape makeShape(const std::vector<int64_t> &sizes);
bool isStatic(const Shape &s);
/// Sizes of a static shape; callers check isStatic() first.
std::vector<int64_t> staticSizes(const Shape &s);
/// Product of the dims of a static shape (callers know it fits: a shape
/// that came from a verified type or an allocated tensor).
int64_t numElements(const std::vector<int64_t> &sizes);
/// Product of `sizes` for untrusted shapes: nullopt when a size is negative
/// or the product overflows int64.
std::optional<int64_t> checkedNumElements(const std::vector<int64_t> &sizes);
/// `count * elementBytes`, or nullopt when it exceeds `limit` bytes.
std::optional<size_t> checkedByteSize(int64_t count, size_t elementBytes, size_t limit);
/// The largest tensor a file (.kir constant, .npy, ONNX tensor) may hold.
constexpr size_t kMaxTensorFileBytes = size_t(1) << 36; // 64 GiB
/// `[2,N,3]` as text.
std::string shapeStr(const Shape &s);
std::string sizesStr(const std::vector<int64_t> &sizes);

/// A dtype and a shape.
struct TensorType {
  DType dtype = DType::F32;
  Shape shape;

  TensorType() = default;
  TensorType(DType t, Shape s) : dtype(t), shape(std::move(s)) {}
  TensorType(DType t, const std::vector<int64_t> &sizes) : dtype(t), shape(makeShape(sizes)) {}

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  bool isStatic() const { return kiln::isStatic(shape); }
  /// `f32[2,3]`.
  std::string str() const;
  bool operator==(const TensorType &o) const { return dtype == o.dtype && shape == o.shape; }
  bool operator!=(const TensorType &o) const { return !(*this == o); }
};

/// True when `t` says at least what `general` says: the same dtype and
/// rank, and each dim equal to general's unless general's is `?` (the
/// result of a value-dependent op once its kernel has run, or as a
/// frontend recorded it).
bool refines(const TensorType &t, const TensorType &general);

} // namespace kiln
