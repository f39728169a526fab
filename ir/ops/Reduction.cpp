//===- Reduction.cpp - Hooks of the reductions and normalizations -*- C++ -*-===//
//
// Type inference and reference kernels of reduce_{sum,mean,max,min,prod},
// argmax, softmax, log_softmax, layer_norm and batch_norm.
//
// Float kernels accumulate in double and round once to the result dtype.
// Integer reductions accumulate exactly in int64 (sum and prod wrap) and are
// truncated to the result dtype; integer reduce_mean truncates toward zero.
// An empty reduction gives the identity: 0 for sum, 1 for prod, -inf / +inf
// for float max / min (the dtype's lowest / highest value for integers), NaN
// for a float mean; an integer mean of nothing is an error.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/Internal.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

namespace kiln {
namespace {

using Inputs = std::span<const Tensor>;
using Results = std::span<const TensorType>;
using Outputs = FailureOr<std::vector<Tensor>>;
using Types = FailureOr<std::vector<TensorType>>;

LogicalResult requireNumeric(const OpContext &ctx, unsigned i) {
  if (ctx.operandType(i).dtype != DType::Bool)
    return success();
  return ctx.emitError() << "operand " << i << " must be a numeric tensor, got "
                         << ctx.operandType(i).str();
}

/// Product of sizes[begin, end).
int64_t product(const std::vector<int64_t> &sizes, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i)
    p *= sizes[i];
  return p;
}

/// One result, the operand's type with `shape`.
Types sameDType(const OpContext &ctx, Shape shape) {
  return std::vector<TensorType>{TensorType(ctx.operandType(0).dtype, std::move(shape))};
}

//===----------------------------------------------------------------------===//
// reduce_*
//===----------------------------------------------------------------------===//

enum class ReduceKind { Sum, Mean, Max, Min, Prod };

/// Normalized reduced axes of `axes` (all axes when empty); reports bad ones.
FailureOr<std::vector<bool>> reducedDims(const OpContext &ctx, std::vector<int64_t> axes,
                                         int64_t rank) {
  if (failed(ops::normalizeAxes(ctx, axes, rank)))
    return failure();
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (int64_t a : axes)
    reduced[static_cast<size_t>(a)] = true;
  return reduced;
}

Types inferReduce(const OpContext &ctx, const std::vector<int64_t> &axes, bool keepdims) {
  if (failed(requireNumeric(ctx, 0)))
    return failure();
  const TensorType &x = ctx.operandType(0);
  auto reduced = reducedDims(ctx, axes, x.rank());
  if (failed(reduced))
    return failure();
  Shape shape;
  for (size_t d = 0; d < x.shape.size(); ++d) {
    if (!(*reduced)[d])
      shape.push_back(x.shape[d]);
    else if (keepdims)
      shape.push_back(Dim(1));
  }
  return sameDType(ctx, std::move(shape));
}

/// Calls fn(i, o) for every element i of `sizes` in row-major order, where o
/// is the flat index of its slot in the reduced output.
template <typename Fn>
void forEachReduced(const std::vector<int64_t> &sizes, const std::vector<bool> &reduced, Fn fn) {
  std::vector<int64_t> kept = sizes;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (reduced[d])
      kept[d] = 1;
  std::vector<int64_t> strides = ops::stridesOf(kept);
  for (size_t d = 0; d < sizes.size(); ++d)
    if (reduced[d])
      strides[d] = 0;
  std::vector<int64_t> idx(sizes.size(), 0);
  int64_t numel = numElements(sizes), o = 0;
  for (int64_t i = 0; i < numel; ++i) {
    fn(i, o);
    for (size_t d = sizes.size(); d-- > 0;) {
      if (++idx[d] < sizes[d]) {
        o += strides[d];
        break;
      }
      o -= strides[d] * (sizes[d] - 1);
      idx[d] = 0;
    }
  }
}

Outputs reduce(const OpContext &ctx, ReduceKind kind, const std::vector<int64_t> &axes, Inputs in,
               Results rt) {
  const Tensor &x = in[0];
  auto reduced = reducedDims(ctx, axes, x.rank());
  if (failed(reduced))
    return failure();
  Tensor out = Tensor::zeros(rt[0].dtype, staticSizes(rt[0].shape));
  int64_t count = 1;
  for (size_t d = 0; d < x.shape().size(); ++d)
    if ((*reduced)[d])
      count *= x.shape()[d];
  size_t n = static_cast<size_t>(out.numel());

  if (isFloat(x.dtype())) {
    constexpr double kInf = std::numeric_limits<double>::infinity();
    double init = kind == ReduceKind::Prod  ? 1.0
                  : kind == ReduceKind::Max ? -kInf
                  : kind == ReduceKind::Min ? kInf
                                            : 0.0;
    std::vector<double> acc(n, init);
    forEachReduced(x.shape(), *reduced, [&](int64_t i, int64_t o) {
      double v = x.getDouble(i);
      double &a = acc[static_cast<size_t>(o)];
      switch (kind) {
      case ReduceKind::Sum:
      case ReduceKind::Mean:
        a += v;
        break;
      case ReduceKind::Prod:
        a *= v;
        break;
      case ReduceKind::Max: // NaN propagates
        a = std::isnan(v) || v > a ? v : a;
        break;
      case ReduceKind::Min:
        a = std::isnan(v) || v < a ? v : a;
        break;
      }
    });
    for (size_t o = 0; o < n; ++o)
      out.setDouble(static_cast<int64_t>(o),
                    kind == ReduceKind::Mean ? acc[o] / static_cast<double>(count) : acc[o]);
    return std::vector<Tensor>{std::move(out)};
  }

  if (kind == ReduceKind::Mean && count == 0)
    return ctx.emitError() << "integer mean of an empty reduction";
  int64_t init = kind == ReduceKind::Prod  ? 1
                 : kind == ReduceKind::Max ? intLowest(x.dtype())
                 : kind == ReduceKind::Min ? intHighest(x.dtype())
                                           : 0;
  std::vector<int64_t> acc(n, init);
  forEachReduced(x.shape(), *reduced, [&](int64_t i, int64_t o) {
    uint64_t v = static_cast<uint64_t>(x.getInt(i));
    int64_t &a = acc[static_cast<size_t>(o)];
    switch (kind) {
    case ReduceKind::Sum:
    case ReduceKind::Mean:
      a = static_cast<int64_t>(static_cast<uint64_t>(a) + v);
      break;
    case ReduceKind::Prod:
      a = static_cast<int64_t>(static_cast<uint64_t>(a) * v);
      break;
    case ReduceKind::Max:
      a = std::max(a, x.getInt(i));
      break;
    case ReduceKind::Min:
      a = std::min(a, x.getInt(i));
      break;
    }
  });
  for (size_t o = 0; o < n; ++o)
    out.setInt(static_cast<int64_t>(o), kind == ReduceKind::Mean ? acc[o] / count : acc[o]);
  return std::vector<Tensor>{std::move(out)};
}

//===----------------------------------------------------------------------===//
// Single-axis helpers (argmax, softmax)
//===----------------------------------------------------------------------===//

/// A tensor seen as [outer, axis, inner] around one axis.
struct AxisView {
  int64_t outer, size, inner;
  int64_t offset(int64_t o, int64_t j, int64_t i) const { return (o * size + j) * inner + i; }
};

AxisView viewAround(const std::vector<int64_t> &sizes, int64_t axis) {
  size_t a = static_cast<size_t>(axis);
  return {product(sizes, 0, a), sizes[a], product(sizes, a + 1, sizes.size())};
}

/// The normalized `axis` of operand 0, or an error.
FailureOr<int64_t> singleAxis(const OpContext &ctx, int64_t axis) {
  int64_t rank = ctx.operandType(0).rank();
  auto n = ops::normalizeAxis(axis, rank);
  if (!n)
    return ctx.emitError() << "axis " << axis << " is out of range for rank " << rank;
  return *n;
}

Types inferSoftmaxLike(const OpContext &ctx, int64_t axis) {
  if (failed(ops::requireFloat(ctx, 0)) || failed(singleAxis(ctx, axis)))
    return failure();
  return std::vector<TensorType>{ctx.operandType(0)};
}

/// softmax (or log_softmax) along `axis`, stabilized by subtracting the max.
Outputs softmax(const OpContext &ctx, int64_t axis, bool isLog, Inputs in, Results rt) {
  auto a = singleAxis(ctx, axis);
  if (failed(a))
    return failure();
  const Tensor &x = in[0];
  Tensor out = Tensor::zeros(rt[0].dtype, staticSizes(rt[0].shape));
  AxisView v = viewAround(x.shape(), *a);
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < v.size; ++j)
        max = std::max(max, x.getDouble(v.offset(o, j, i)));
      double sum = 0;
      for (int64_t j = 0; j < v.size; ++j)
        sum += std::exp(x.getDouble(v.offset(o, j, i)) - max);
      for (int64_t j = 0; j < v.size; ++j) {
        double shifted = x.getDouble(v.offset(o, j, i)) - max;
        out.setDouble(v.offset(o, j, i), isLog ? shifted - std::log(sum) : std::exp(shifted) / sum);
      }
    }
  }
  return std::vector<Tensor>{std::move(out)};
}

/// Whether `v` at a later index replaces the current `best` of argmax. NaN
/// counts as the largest value, as in numpy.
template <typename T> bool beats(T v, T best, bool selectLast) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(best))
      return selectLast && std::isnan(v);
    if (std::isnan(v))
      return true;
  }
  return selectLast ? v >= best : v > best;
}

} // namespace

//===----------------------------------------------------------------------===//
// Hooks
//===----------------------------------------------------------------------===//

Types inferReduceMax(const OpContext &ctx) {
  return inferReduce(ctx, ReduceMaxOp(ctx).axes(), ReduceMaxOp(ctx).keepdims());
}
Outputs referenceReduceMax(const OpContext &ctx, Inputs in, Results rt) {
  return reduce(ctx, ReduceKind::Max, ReduceMaxOp(ctx).axes(), in, rt);
}

Types inferReduceMean(const OpContext &ctx) {
  return inferReduce(ctx, ReduceMeanOp(ctx).axes(), ReduceMeanOp(ctx).keepdims());
}
Outputs referenceReduceMean(const OpContext &ctx, Inputs in, Results rt) {
  return reduce(ctx, ReduceKind::Mean, ReduceMeanOp(ctx).axes(), in, rt);
}

Types inferReduceMin(const OpContext &ctx) {
  return inferReduce(ctx, ReduceMinOp(ctx).axes(), ReduceMinOp(ctx).keepdims());
}
Outputs referenceReduceMin(const OpContext &ctx, Inputs in, Results rt) {
  return reduce(ctx, ReduceKind::Min, ReduceMinOp(ctx).axes(), in, rt);
}

Types inferReduceProd(const OpContext &ctx) {
  return inferReduce(ctx, ReduceProdOp(ctx).axes(), ReduceProdOp(ctx).keepdims());
}
Outputs referenceReduceProd(const OpContext &ctx, Inputs in, Results rt) {
  return reduce(ctx, ReduceKind::Prod, ReduceProdOp(ctx).axes(), in, rt);
}

Types inferReduceSum(const OpContext &ctx) {
  return inferReduce(ctx, ReduceSumOp(ctx).axes(), ReduceSumOp(ctx).keepdims());
}
Outputs referenceReduceSum(const OpContext &ctx, Inputs in, Results rt) {
  return reduce(ctx, ReduceKind::Sum, ReduceSumOp(ctx).axes(), in, rt);
}

Types inferArgMax(const OpContext &ctx) {
  ArgMaxOp op(ctx);
  if (failed(requireNumeric(ctx, 0)))
    return failure();
  auto axis = singleAxis(ctx, op.axis());
  if (failed(axis))
    return failure();
  const TensorType &x = ctx.operandType(0);
  const Dim &d = x.shape[static_cast<size_t>(*axis)];
  if (d.isStatic() && d.size() == 0)
    return ctx.emitError() << "axis " << op.axis() << " of " << x.str() << " is empty";
  Shape shape;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i != *axis)
      shape.push_back(x.shape[static_cast<size_t>(i)]);
    else if (op.keepdims())
      shape.push_back(Dim(1));
  }
  return std::vector<TensorType>{TensorType(DType::I64, std::move(shape))};
}
Outputs referenceArgMax(const OpContext &ctx, Inputs in, Results rt) {
  ArgMaxOp op(ctx);
  auto axis = singleAxis(ctx, op.axis());
  if (failed(axis))
    return failure();
  const Tensor &x = in[0];
  Tensor out = Tensor::zeros(rt[0].dtype, staticSizes(rt[0].shape));
  AxisView v = viewAround(x.shape(), *axis);
  if (v.size == 0 && out.numel() > 0)
    return ctx.emitError() << "axis " << op.axis() << " of " << x.str() << " is empty";
  bool isF = isFloat(x.dtype());
  for (int64_t o = 0; o < v.outer; ++o) {
    for (int64_t i = 0; i < v.inner; ++i) {
      int64_t best = 0;
      for (int64_t j = 1; j < v.size; ++j) {
        int64_t cand = v.offset(o, j, i), cur = v.offset(o, best, i);
        bool better = isF ? beats(x.getDouble(cand), x.getDouble(cur), op.select_last_index())
                          : beats(x.getInt(cand), x.getInt(cur), op.select_last_index());
        if (better)
          best = j;
      }
      out.setInt(o * v.inner + i, best);
    }
  }
  return std::vector<Tensor>{std::move(out)};
}

Types inferSoftmax(const OpContext &ctx) {
  return inferSoftmaxLike(ctx, SoftmaxOp(ctx).axis());
}
Outputs referenceSoftmax(const OpContext &ctx, Inputs in, Results rt) {
  return softmax(ctx, SoftmaxOp(ctx).axis(), /*isLog=*/false, in, rt);
}

Types inferLogSoftmax(const OpContext &ctx) {
  return inferSoftmaxLike(ctx, LogSoftmaxOp(ctx).axis());
}
Outputs referenceLogSoftmax(const OpContext &ctx, Inputs in, Results rt) {
  return softmax(ctx, LogSoftmaxOp(ctx).axis(), /*isLog=*/true, in, rt);
}

//===----------------------------------------------------------------------===//
// Normalizations
//===----------------------------------------------------------------------===//

namespace {

LogicalResult checkEpsilon(const OpContext &ctx, double epsilon) {
  if (!(epsilon >= 0))
    return ctx.emitError() << "epsilon must be non-negative, got " << formatDouble(epsilon);
  return success();
}

/// Whether dim `d` of an operand can stand for dim `want` (equal, 1 when
/// `allowOne`, or unknown).
bool dimFits(const Dim &d, const Dim &want, bool allowOne) {
  if (d == want || d.isSymbolic() || want.isSymbolic())
    return true;
  return allowOne && d.size() == 1;
}

const char *const kLayerNormOperands[] = {"x", "scale", "bias"};
const char *const kBatchNormOperands[] = {"x", "scale", "bias", "mean", "var"};

} // namespace

Types inferLayerNorm(const OpContext &ctx) {
  LayerNormOp op(ctx);
  if (failed(ops::requireFloat(ctx, 0)) || failed(ops::requireSameDType(ctx)) ||
      failed(checkEpsilon(ctx, op.epsilon())))
    return failure();
  auto axis = singleAxis(ctx, op.axis());
  if (failed(axis))
    return failure();
  const TensorType &x = ctx.operandType(0);
  Shape normalized(x.shape.begin() + *axis, x.shape.end());
  for (unsigned k = 1; k < ctx.numOperands(); ++k) {
    const Shape &s = ctx.operandType(k).shape;
    bool fits = s.size() <= normalized.size();
    for (size_t d = 0; fits && d < s.size(); ++d)
      fits = dimFits(s[d], normalized[normalized.size() - s.size() + d], /*allowOne=*/true);
    if (!fits)
      return ctx.emitError() << kLayerNormOperands[k] << " shape " << shapeStr(s)
                             << " does not broadcast to the normalized shape "
                             << shapeStr(normalized);
  }
  return std::vector<TensorType>{x};
}
Outputs referenceLayerNorm(const OpContext &ctx, Inputs in, Results rt) {
  LayerNormOp op(ctx);
  auto axis = singleAxis(ctx, op.axis());
  if (failed(axis))
    return failure();
  const Tensor &x = in[0];
  Tensor out = Tensor::zeros(rt[0].dtype, staticSizes(rt[0].shape));
  std::vector<int64_t> normalized(x.shape().begin() + *axis, x.shape().end());
  int64_t outer = product(x.shape(), 0, static_cast<size_t>(*axis));
  int64_t inner = numElements(normalized);
  // Offsets of the scale and bias elements that broadcast to each element
  // of the normalized shape.
  std::vector<int64_t> scaleOff(static_cast<size_t>(inner)), biasOff(static_cast<size_t>(inner));
  std::vector<int64_t> idx(normalized.size(), 0);
  for (int64_t j = 0; j < inner; ++j, ops::nextIndex(idx, normalized)) {
    scaleOff[static_cast<size_t>(j)] = ops::broadcastOffset(idx, in[1].shape());
    if (in.size() > 2)
      biasOff[static_cast<size_t>(j)] = ops::broadcastOffset(idx, in[2].shape());
  }
  for (int64_t o = 0; o < outer; ++o) {
    int64_t base = o * inner;
    double mean = 0, var = 0;
    for (int64_t j = 0; j < inner; ++j)
      mean += x.getDouble(base + j);
    mean /= static_cast<double>(inner);
    for (int64_t j = 0; j < inner; ++j) {
      double c = x.getDouble(base + j) - mean;
      var += c * c;
    }
    var /= static_cast<double>(inner);
    double invStd = 1.0 / std::sqrt(var + op.epsilon());
    for (int64_t j = 0; j < inner; ++j) {
      size_t s = static_cast<size_t>(j);
      double y = (x.getDouble(base + j) - mean) * invStd * in[1].getDouble(scaleOff[s]);
      if (in.size() > 2)
        y += in[2].getDouble(biasOff[s]);
      out.setDouble(base + j, y);
    }
  }
  return std::vector<Tensor>{std::move(out)};
}

Types inferBatchNorm(const OpContext &ctx) {
  const TensorType &x = ctx.operandType(0);
  if (x.rank() < 2)
    return ctx.emitError() << "x must have rank at least 2 ([N, C, ...]), got " << x.str();
  if (failed(ops::requireFloat(ctx, 0)) || failed(ops::requireSameDType(ctx)) ||
      failed(checkEpsilon(ctx, BatchNormOp(ctx).epsilon())))
    return failure();
  const Dim &channels = x.shape[1];
  for (unsigned k = 1; k < ctx.numOperands(); ++k) {
    const TensorType &t = ctx.operandType(k);
    if (t.rank() != 1 || !dimFits(t.shape[0], channels, /*allowOne=*/false))
      return ctx.emitError() << kBatchNormOperands[k] << " must have shape [" << channels.str()
                             << "] (the channels of x), got " << t.str();
  }
  return std::vector<TensorType>{x};
}
Outputs referenceBatchNorm(const OpContext &ctx, Inputs in, Results rt) {
  const Tensor &x = in[0];
  double epsilon = BatchNormOp(ctx).epsilon();
  Tensor out = Tensor::zeros(rt[0].dtype, staticSizes(rt[0].shape));
  AxisView v = viewAround(x.shape(), 1);
  for (int64_t c = 0; c < v.size; ++c) {
    double mul = in[1].getDouble(c) / std::sqrt(in[4].getDouble(c) + epsilon);
    double mean = in[3].getDouble(c), bias = in[2].getDouble(c);
    for (int64_t n = 0; n < v.outer; ++n)
      for (int64_t i = 0; i < v.inner; ++i) {
        int64_t off = v.offset(n, c, i);
        out.setDouble(off, (x.getDouble(off) - mean) * mul + bias);
      }
  }
  return std::vector<Tensor>{std::move(out)};
}

} // namespace kiln
