//===- Common.cpp - Helpers shared by the op families -----------*- C++ -*-===//
#include "ir/ops/Internal.h"

#include <algorithm>
#include <cstring>

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
      } else if (o.isDynamic() || d.isDynamic()) {
        o = Dim::dynamic();
      } else {
        // Two different symbols or expressions (`N` and `M`, `seq` and
        // `min(seq,64)`): assumed equal, as torch.export's guards do, not
        // one of them 1; the result keeps a lone symbol over an expression,
        // else the first. Runs check the assumption (DimEquality).
        ctx.assumeEqual(o, d);
        if (o.symbol().empty() && !d.symbol().empty())
          o = d;
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

//===----------------------------------------------------------------------===//
// Helpers of the data movement and indexing families
//===----------------------------------------------------------------------===//

DimProduct multiplyDims(std::span<const Dim> dims) {
  DimProduct p;
  for (const Dim &d : dims) {
    if (d.isStatic()) {
      if (__builtin_mul_overflow(p.staticPart, d.size(), &p.staticPart))
        p.overflow = true;
    } else if (auto e = d.expr(); e && p.symbolic) {
      p.symbolic = mul(*p.symbolic, *e);
    } else {
      p.symbolic.reset();
    }
  }
  return p;
}

Dim toDim(const DimProduct &p) {
  if (p.staticPart == 0)
    return Dim(0);
  if (!p.symbolic)
    return Dim::dynamic();
  auto e = mul(*p.symbolic, DimExpr(p.staticPart));
  return e ? Dim::of(*e) : Dim::dynamic();
}

/// The product of `dims` as one dim; reports overflow.
FailureOr<Dim> productDim(const OpContext &ctx, std::span<const Dim> dims) {
  DimProduct p = multiplyDims(dims);
  if (p.overflow)
    return ctx.emitError() << "dims " << shapeStr(Shape(dims.begin(), dims.end()))
                           << " have more elements than fit in int64";
  return toDim(p);
}

/// A single result type; reports a static element count that overflows
/// int64 (such a tensor could never be allocated, and the interpreter's
/// element counts would wrap).
FailureOr<std::vector<TensorType>> one(const OpContext &ctx, DType dtype, Shape shape) {
  if (multiplyDims(shape).overflow)
    return ctx.emitError() << "result type " << TensorType(dtype, shape).str()
                           << " has more elements than fit in int64";
  return std::vector<TensorType>{TensorType(dtype, std::move(shape))};
}

Tensor allocResult(std::span<const TensorType> resultTypes, size_t i) {
  return Tensor::zeros(resultTypes[i].dtype, staticSizes(resultTypes[i].shape));
}

char *bytesOf(const Tensor &t) {
  return static_cast<char *>(t.mutableRawData());
}
const char *constBytesOf(const Tensor &t) {
  return static_cast<const char *>(t.rawData());
}

/// Copies element `srcIndex` of `src` to element `dstIndex` of `dst`.
void copyElement(const Tensor &dst, int64_t dstIndex, const Tensor &src, int64_t srcIndex) {
  size_t es = dtypeSize(src.dtype());
  std::memcpy(bytesOf(dst) + static_cast<size_t>(dstIndex) * es,
              constBytesOf(src) + static_cast<size_t>(srcIndex) * es, es);
}

int64_t productOf(const std::vector<int64_t> &sizes, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i)
    n *= sizes[i];
  return n;
}

/// Normalizes a single axis or reports it.
FailureOr<int64_t> resolveAxis(const OpContext &ctx, int64_t axis, int64_t rank) {
  auto n = normalizeAxis(axis, rank);
  if (!n)
    return ctx.emitError() << "axis " << axis << " is out of range for rank " << rank;
  return *n;
}

bool isOneOf(const std::string &s, std::initializer_list<const char *> options) {
  for (const char *o : options)
    if (s == o)
      return true;
  return false;
}

/// Reports unless `value` of attribute `name` is one of `options`.
LogicalResult requireOneOf(const OpContext &ctx, const char *name, const std::string &value,
                           std::initializer_list<const char *> options) {
  if (isOneOf(value, options))
    return success();
  auto d = ctx.emitError();
  d << name << " '" << value << "' is not one of";
  const char *sep = " ";
  for (const char *o : options) {
    d << sep << "'" << o << "'";
    sep = ", ";
  }
  return failure();
}

} // namespace kiln::ops
