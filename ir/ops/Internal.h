//===- Internal.h - Helpers shared by the op families -----------*- C++ -*-===//
//
// Private to ir/ops/: shape helpers (broadcasting, axis normalization) and
// index helpers for reference kernels.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Ops.h"
#include "ir/Tensor.h"

#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kiln::ops {

/// Numpy broadcasting of operand shapes. Symbolic rules: equal dims stay;
/// 1 yields to the other; a symbol against a static size > 1 takes the
/// static size; two different symbols (or expressions) are assumed equal
/// (OpContext::assumeEqual) and give the lone symbol, else the first; `?`
/// against a symbol gives `?`. Static mismatches are
/// reported as "operands have incompatible shapes ...".
FailureOr<Shape> broadcastShapes(const OpContext &ctx, std::span<const TensorType> types);

/// `axis` in [-rank, rank) mapped to [0, rank); nullopt when out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);
/// Normalizes `axes` in place; reports the first bad or repeated axis.
LogicalResult normalizeAxes(const OpContext &ctx, std::vector<int64_t> &axes, int64_t rank,
                            const char *what = "axis");

/// Reports unless operand `i` has one of the float dtypes.
LogicalResult requireFloat(const OpContext &ctx, unsigned i);
/// Reports unless all operands have the same dtype.
LogicalResult requireSameDType(const OpContext &ctx);

/// Row-major strides of static `sizes`.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &sizes);
/// The flat offset in a tensor of shape `inShape` (right-aligned to the
/// output rank, broadcasting size-1 dims) of the output multi-index `idx`.
int64_t broadcastOffset(const std::vector<int64_t> &idx, const std::vector<int64_t> &inShape);
/// Advances a row-major multi-index; false after the last one.
bool nextIndex(std::vector<int64_t> &idx, const std::vector<int64_t> &sizes);

//===----------------------------------------------------------------------===//
// Helpers of the data movement and indexing families
//===----------------------------------------------------------------------===//

/// Sizes above this are rejected by inference (they cannot be allocated,
/// and products of them would overflow).
constexpr int64_t kMaxDim = int64_t(1) << 62;
constexpr double kMaxDimAsDouble = static_cast<double>(kMaxDim);

/// A product of dims split into its static part and its symbolic factors.
struct DimProduct {
  int64_t staticPart = 1;
  /// The product of the symbolic factors (1 when there are none); nullopt
  /// when a factor is an anonymous `?` or the product overflows.
  std::optional<DimExpr> symbolic = DimExpr(1);
  bool overflow = false;
};

DimProduct multiplyDims(std::span<const Dim> dims);
/// The product as one dim: static, an expression, 0 when a factor is 0, or `?`.
Dim toDim(const DimProduct &p);
/// The product of `dims` as one dim; reports overflow.
FailureOr<Dim> productDim(const OpContext &ctx, std::span<const Dim> dims);
/// A single result type; reports a static element count that overflows
/// int64 (such a tensor could never be allocated, and the interpreter's
/// element counts would wrap).
FailureOr<std::vector<TensorType>> one(const OpContext &ctx, DType dtype, Shape shape);
/// A zero tensor of result type `i`.
Tensor allocResult(std::span<const TensorType> resultTypes, size_t i = 0);
char *bytesOf(const Tensor &t);
const char *constBytesOf(const Tensor &t);
/// Copies element `srcIndex` of `src` to element `dstIndex` of `dst` (raw
/// bytes: every dtype).
void copyElement(const Tensor &dst, int64_t dstIndex, const Tensor &src, int64_t srcIndex);
int64_t productOf(const std::vector<int64_t> &sizes, size_t begin, size_t end);
/// Normalizes a single axis or reports it.
FailureOr<int64_t> resolveAxis(const OpContext &ctx, int64_t axis, int64_t rank);
bool isOneOf(const std::string &s, std::initializer_list<const char *> options);
/// Reports unless `value` of attribute `name` is one of `options`.
LogicalResult requireOneOf(const OpContext &ctx, const char *name, const std::string &value,
                           std::initializer_list<const char *> options);

/// Calls fn(multiIndex, flatIndex) for every element of `sizes` in row-major
/// order; nothing for an empty shape.
template <typename Fn> void forEachIndex(const std::vector<int64_t> &sizes, Fn fn) {
  if (numElements(sizes) == 0)
    return;
  std::vector<int64_t> idx(sizes.size(), 0);
  int64_t flat = 0;
  do
    fn(idx, flat++);
  while (nextIndex(idx, sizes));
}

} // namespace kiln::ops
