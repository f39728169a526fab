//===- Internal.h - Helpers shared by the op families -----------*- C++ -*-===//
//
// Private to ir/ops/: shape helpers (broadcasting, axis normalization) and
// index helpers for reference kernels.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Ops.h"
#include "ir/Tensor.h"

#include <optional>
#include <span>
#include <vector>

namespace kiln::ops {

/// Numpy broadcasting of operand shapes. Symbolic rules: equal dims stay;
/// 1 yields to the other; a symbol against a static size > 1 takes the
/// static size; two different symbols give `?`. Static mismatches are
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

} // namespace kiln::ops
