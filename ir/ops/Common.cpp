//===- Common.cpp - Helpers shared by the op families -----------*- C++ -*-===//
#include "ir/ops/Internal.h"

#include <algorithm>

namespace kiln::ops {

FailureOr<Shape> broadcastShapes(const OpContext &ctx, std::span<const TensorType> types) {
  size_t rank = 0;
  for (const TensorType &t : types)
    rank = std::max(rank, t.shape.size());
  Shape out(rank, Dim(1));
  for (const TensorType &t : types) {
    size_t off = rank - t.shape.size();
    for (size_t i = 0; i < t.shape.size(); ++i) {
      Dim &o = out[off + i];
      const Dim &d = t.shape[i];
      if (o == d || (d.isStatic() && d.size() == 1))
        continue;
      if (o.isStatic() && o.size() == 1) {
        o = d;
      } else if (o.isStatic() && d.isStatic()) {
        auto diag = ctx.emitError();
        diag << "operands have incompatible shapes";
        for (const TensorType &x : types)
          diag << " " << shapeStr(x.shape);
        diag << " (dim " << off + i << ": " << o.size() << " vs " << d.size() << ")";
        return failure();
      } else if (o.isStatic()) {
        // o is a static size > 1, d symbolic: keep o.
      } else if (d.isStatic()) {
        o = d;
      } else {
        o = Dim::dynamic();
      }
    }
  }
  return out;
}

std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

LogicalResult normalizeAxes(const OpContext &ctx, std::vector<int64_t> &axes, int64_t rank,
                            const char *what) {
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t &a : axes) {
    auto n = normalizeAxis(a, rank);
    if (!n)
      return ctx.emitError() << what << " " << a << " is out of range for rank " << rank;
    if (seen[static_cast<size_t>(*n)])
      return ctx.emitError() << what << " " << a << " is repeated";
    seen[static_cast<size_t>(*n)] = true;
    a = *n;
  }
  return success();
}

LogicalResult requireFloat(const OpContext &ctx, unsigned i) {
  DType t = ctx.operandType(i).dtype;
  if (!isFloat(t))
    return ctx.emitError() << "operand " << i << " must be a float tensor, got "
                           << ctx.operandType(i).str();
  return success();
}

LogicalResult requireSameDType(const OpContext &ctx) {
  for (unsigned i = 1; i < ctx.numOperands(); ++i)
    if (ctx.operandType(i).dtype != ctx.operandType(0).dtype)
      return ctx.emitError() << "operands must have the same dtype, got "
                             << ctx.operandType(0).str() << " and " << ctx.operandType(i).str();
  return success();
}

std::vector<int64_t> stridesOf(const std::vector<int64_t> &sizes) {
  std::vector<int64_t> s(sizes.size(), 1);
  for (size_t i = sizes.size(); i-- > 1;)
    s[i - 1] = s[i] * sizes[i];
  return s;
}

int64_t broadcastOffset(const std::vector<int64_t> &idx, const std::vector<int64_t> &inShape) {
  size_t off = idx.size() - inShape.size();
  int64_t flat = 0;
  for (size_t i = 0; i < inShape.size(); ++i)
    flat = flat * inShape[i] + (inShape[i] == 1 ? 0 : idx[off + i]);
  return flat;
}

bool nextIndex(std::vector<int64_t> &idx, const std::vector<int64_t> &sizes) {
  for (size_t i = idx.size(); i-- > 0;) {
    if (++idx[i] < sizes[i])
      return true;
    idx[i] = 0;
  }
  return false;
}

} // namespace kiln::ops
