//===- DataMovement.cpp - Reshapes, slices, gathers, pads, resizes -*- C++ -*-===//
//
// Type inference and reference kernels of the ops that move elements without
// arithmetic (reshape, transpose, flatten, squeeze, unsqueeze, concat, split,
// slice, gather, expand, pad, resize) and of the ops that make tensors from
// attributes (constant, shape, constant_of_shape, range, iota). Semantics follow
// ONNX opset 17, with ONNX's shape-like inputs as attributes.
//
// Kernels copy raw elements by dtype size, so every dtype works; reshape,
// flatten, squeeze and unsqueeze return zero-copy views of their input.
//
// Note [Symbolic dims in data movement]
// Inference keeps a symbolic dim only where it provably survives: a dim
// copied unchanged (transpose, squeeze, a full slice, a zero pad), a product
// whose other factors are 1 (flatten), or a reshape `-1` whose element count
// cancels to exactly one input symbol (f32[N,28,28] -> [-1, 784] gives N).
// Anything else that depends on a symbol becomes `?`; it is recomputed on
// concrete types by the interpreter, which re-runs inference per node.
//
//===----------------------------------------------------------------------===//
#include "ir/ops/Internal.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

namespace kiln {
using namespace ops;

namespace {

using Types = std::vector<TensorType>;
using Tensors = std::vector<Tensor>;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
} // namespace

//===----------------------------------------------------------------------===//
// reshape
//===----------------------------------------------------------------------===//

FailureOr<Types> inferReshape(const OpContext &ctx) {
  const TensorType &in = ctx.operandType(0);
  const std::vector<DimExpr> &entries = ReshapeOp(ctx).shape();
  // Entries are sizes, 0 (copy) and -1 (inferred), or expressions of the
  // graph's symbols (`seq`, `4*batch`) that give the dim itself.
  std::string shape = attrStr(Attribute(entries));
  Shape out;
  std::optional<size_t> inferred;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!entries[i].isConstant()) {
      out.push_back(Dim::of(entries[i]));
      continue;
    }
    int64_t v = entries[i].constant();
    if (v == -1) {
      if (inferred)
        return ctx.emitError() << "shape " << shape << " has more than one -1";
      inferred = i;
      out.push_back(Dim::dynamic());
    } else if (v == 0) {
      if (static_cast<int64_t>(i) >= in.rank())
        return ctx.emitError() << "shape " << shape << " copies dim " << i
                               << " with 0 but the input " << in.str() << " has rank " << in.rank();
      out.push_back(in.shape[i]);
    } else if (v < 0) {
      return ctx.emitError() << "shape " << shape << " has invalid size " << v;
    } else {
      out.push_back(Dim(v));
    }
  }

  // Compare element counts: static parts when the symbolic factors agree,
  // else the -1 is the input's count divided by the others' (an expression).
  DimProduct inCount = multiplyDims(in.shape);
  Shape known;
  for (size_t i = 0; i < out.size(); ++i)
    if (i != inferred)
      known.push_back(out[i]);
  DimProduct outCount = multiplyDims(known);
  if (inCount.overflow || outCount.overflow)
    return ctx.emitError() << "cannot reshape " << in.str() << " to shape " << shape
                           << ": element count overflows int64";
  bool sameSymbols =
      inCount.symbolic && outCount.symbolic && *inCount.symbolic == *outCount.symbolic;

  if (sameSymbols) {
    if (!inferred) {
      if (inCount.staticPart != outCount.staticPart)
        return ctx.emitError() << "cannot reshape " << in.str() << " to shape " << shape
                               << ": element counts differ";
    } else {
      if (outCount.staticPart == 0) {
        if (inCount.staticPart != 0)
          return ctx.emitError() << "cannot reshape " << in.str() << " to shape " << shape
                                 << ": element counts differ";
        return ctx.emitError() << "cannot infer the -1 in shape " << shape
                               << " when the other dims have no elements";
      }
      if (inCount.staticPart % outCount.staticPart != 0)
        return ctx.emitError() << "cannot reshape " << in.str() << " to shape " << shape << ": "
                               << inCount.staticPart << " elements are not divisible by "
                               << outCount.staticPart;
      out[*inferred] = Dim(inCount.staticPart / outCount.staticPart);
    }
  } else if (inferred && outCount.staticPart != 0) {
    if (auto q = exactDivDim(toDim(inCount), toDim(outCount)))
      out[*inferred] = *q;
  } else if (!inferred) {
    // Expression entries ([0, 32*S] of [N,S,64]): counts that differ by a
    // constant factor never agree; others are checked once sizes are bound.
    Dim a = toDim(inCount), b = toDim(outCount);
    for (auto q : {exactDivDim(a, b), exactDivDim(b, a)})
      if (q && q->isStatic() && q->size() != 1)
        return ctx.emitError() << "cannot reshape " << in.str() << " to shape " << shape
                               << ": element counts differ";
  }
  return one(ctx, in.dtype, std::move(out));
}

FailureOr<Tensors> referenceReshape(const OpContext &, std::span<const Tensor> inputs,
                                    std::span<const TensorType> resultTypes) {
  return Tensors{inputs[0].view(staticSizes(resultTypes[0].shape))};
}

//===----------------------------------------------------------------------===//
// transpose
//===----------------------------------------------------------------------===//

namespace {
/// The permutation of `transpose` (reversed dims when `perm` is empty).
FailureOr<std::vector<int64_t>> resolvePerm(const OpContext &ctx, int64_t rank) {
  std::vector<int64_t> perm = TransposeOp(ctx).perm();
  if (perm.empty()) {
    for (int64_t i = rank; i-- > 0;)
      perm.push_back(i);
    return perm;
  }
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  bool ok = static_cast<int64_t>(perm.size()) == rank;
  for (size_t i = 0; ok && i < perm.size(); ++i) {
    ok = perm[i] >= 0 && perm[i] < rank && !seen[static_cast<size_t>(perm[i])];
    if (ok)
      seen[static_cast<size_t>(perm[i])] = true;
  }
  if (!ok)
    return ctx.emitError() << "perm " << perm << " is not a permutation of rank " << rank;
  return perm;
}
} // namespace

FailureOr<Types> inferTranspose(const OpContext &ctx) {
  const TensorType &in = ctx.operandType(0);
  auto perm = resolvePerm(ctx, in.rank());
  if (failed(perm))
    return failure();
  Shape out;
  for (int64_t p : *perm)
    out.push_back(in.shape[static_cast<size_t>(p)]);
  return one(ctx, in.dtype, std::move(out));
}

FailureOr<Tensors> referenceTranspose(const OpContext &ctx, std::span<const Tensor> inputs,
                                      std::span<const TensorType> resultTypes) {
  const Tensor &in = inputs[0];
  auto perm = resolvePerm(ctx, in.rank());
  if (failed(perm))
    return failure();
  Tensor out = allocResult(resultTypes);
  std::vector<int64_t> inStrides = in.strides();
  forEachIndex(out.shape(), [&](const std::vector<int64_t> &idx, int64_t flat) {
    int64_t src = 0;
    for (size_t i = 0; i < idx.size(); ++i)
      src += idx[i] * inStrides[static_cast<size_t>((*perm)[i])];
    copyElement(out, flat, in, src);
  });
  return Tensors{out};
}

//===----------------------------------------------------------------------===//
// flatten
//===----------------------------------------------------------------------===//

FailureOr<Types> inferFlatten(const OpContext &ctx) {
  const TensorType &in = ctx.operandType(0);
  int64_t axis = FlattenOp(ctx).axis();
  int64_t rank = in.rank();
  // Unlike most axes, flatten's may equal the rank (giving [numel, 1]).
  if (axis < -rank || axis > rank)
    return ctx.emitError() << "axis " << axis << " is out of range for rank " << rank;
  if (axis < 0)
    axis += rank;
  std::span<const Dim> dims(in.shape);
  auto outer = productDim(ctx, dims.first(static_cast<size_t>(axis)));
  if (failed(outer))
    return failure();
  auto inner = productDim(ctx, dims.subspan(static_cast<size_t>(axis)));
  if (failed(inner))
    return failure();
  return one(ctx, in.dtype, Shape{*outer, *inner});
}

FailureOr<Tensors> referenceFlatten(const OpContext &, std::span<const Tensor> inputs,
                                    std::span<const TensorType> resultTypes) {
  return Tensors{inputs[0].view(staticSizes(resultTypes[0].shape))};
}

//===----------------------------------------------------------------------===//
// squeeze / unsqueeze
//===----------------------------------------------------------------------===//

FailureOr<Types> inferSqueeze(const OpContext &ctx) {
  const TensorType &in = ctx.operandType(0);
  std::vector<int64_t> axes = SqueezeOp(ctx).axes();
  std::vector<bool> drop(in.shape.size(), false);
  if (axes.empty()) {
    // Only dims known to be 1 are removed; a symbolic dim stays.
    for (size_t i = 0; i < in.shape.size(); ++i)
      drop[i] = in.shape[i].isStatic() && in.shape[i].size() == 1;
  } else {
    std::vector<int64_t> given = axes;
    if (failed(normalizeAxes(ctx, axes, in.rank())))
      return failure();
    for (size_t i = 0; i < axes.size(); ++i) {
      const Dim &d = in.shape[static_cast<size_t>(axes[i])];
      // A symbolic dim is assumed to be 1; the interpreter checks it.
      if (d.isStatic() && d.size() != 1)
        return ctx.emitError() << "cannot squeeze axis " << given[i] << " of " << in.str()
                               << ": its size is " << d.size() << ", not 1";
      drop[static_cast<size_t>(axes[i])] = true;
    }
  }
  Shape out;
  for (size_t i = 0; i < in.shape.size(); ++i)
    if (!drop[i])
      out.push_back(in.shape[i]);
  return one(ctx, in.dtype, std::move(out));
}

FailureOr<Tensors> referenceSqueeze(const OpContext &, std::span<const Tensor> inputs,
                                    std::span<const TensorType> resultTypes) {
  return Tensors{inputs[0].view(staticSizes(resultTypes[0].shape))};
}

FailureOr<Types> inferUnsqueeze(const OpContext &ctx) {
  const TensorType &in = ctx.operandType(0);
  std::vector<int64_t> axes = UnsqueezeOp(ctx).axes();
  int64_t outRank = in.rank() + static_cast<int64_t>(axes.size());
  if (failed(normalizeAxes(ctx, axes, outRank)))
    return failure();
  std::vector<bool> inserted(static_cast<size_t>(outRank), false);
  for (int64_t a : axes)
    inserted[static_cast<size_t>(a)] = true;
  Shape out;
  size_t next = 0;
  for (size_t i = 0; i < inserted.size(); ++i)
    out.push_back(inserted[i] ? Dim(1) : in.shape[next++]);
  return one(ctx, in.dtype, std::move(out));
}

FailureOr<Tensors> referenceUnsqueeze(const OpContext &, std::span<const Tensor> inputs,
                                      std::span<const TensorType> resultTypes) {
  return Tensors{inputs[0].view(staticSizes(resultTypes[0].shape))};
}

//===----------------------------------------------------------------------===//
// concat / split
//===----------------------------------------------------------------------===//

FailureOr<Types> inferConcat(const OpContext &ctx) {
  if (failed(requireSameDType(ctx)))
    return failure();
  const TensorType &first = ctx.operandType(0);
  int64_t rank = first.rank();
  auto axis = resolveAxis(ctx, ConcatOp(ctx).axis(), rank);
  if (failed(axis))
    return failure();
  Shape out = first.shape;
  size_t ax = static_cast<size_t>(*axis);
  Shape axisDims{first.shape[ax]};
  for (unsigned i = 1; i < ctx.numOperands(); ++i) {
    const TensorType &t = ctx.operandType(i);
    if (t.rank() != rank)
      return ctx.emitError() << "operand " << i << " has type " << t.str() << " but operand 0 has "
                             << first.str() << ": ranks differ";
    for (size_t d = 0; d < out.size(); ++d) {
      if (d == ax)
        continue;
      const Dim &a = out[d], &b = t.shape[d];
      if (a == b)
        continue;
      if (a.isStatic() && b.isStatic())
        return ctx.emitError() << "operand " << i << " has type " << t.str()
                               << " which does not match " << first.str() << " in dim " << d;
      ctx.assumeEqual(a, b);
      if (a.isSymbolic() && b.isStatic())
        out[d] = b; // a symbol meets a static size: the size wins
    }
    axisDims.push_back(t.shape[ax]);
  }
  // The concatenated dim: the sum of the operands' (static or an expression).
  int64_t sum = 0;
  Dim total(0);
  for (const Dim &d : axisDims) {
    if (d.isStatic() && __builtin_add_overflow(sum, d.size(), &sum))
      return ctx.emitError() << "concatenated dim " << *axis << " overflows int64";
    total = total + d;
  }
  out[ax] = total;
  return one(ctx, first.dtype, std::move(out));
}

FailureOr<Tensors> referenceConcat(const OpContext &ctx, std::span<const Tensor> inputs,
                                   std::span<const TensorType> resultTypes) {
  Tensor out = allocResult(resultTypes);
  auto axis = resolveAxis(ctx, ConcatOp(ctx).axis(), out.rank());
  if (failed(axis))
    return failure();
  size_t ax = static_cast<size_t>(*axis);
  size_t es = dtypeSize(out.dtype());
  int64_t outer = productOf(out.shape(), 0, ax);
  int64_t inner = productOf(out.shape(), ax + 1, out.shape().size());
  // Row-major: for each outer index, the operands' slabs follow each other.
  char *dst = bytesOf(out);
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor &in : inputs) {
      size_t slab = static_cast<size_t>(in.dim(*axis) * inner) * es;
      std::memcpy(dst, constBytesOf(in) + static_cast<size_t>(o) * slab, slab);
      dst += slab;
    }
  }
  return Tensors{out};
}

FailureOr<Types> inferSplit(const OpContext &ctx) {
  const TensorType &in = ctx.operandType(0);
  SplitOp op(ctx);
  auto axis = resolveAxis(ctx, op.axis(), in.rank());
  if (failed(axis))
    return failure();
  size_t ax = static_cast<size_t>(*axis);
  const Dim &dim = in.shape[ax];
  unsigned n = ctx.numResults;
  const std::vector<int64_t> &sizes = op.sizes();
  Types results(n, in);
  if (sizes.empty()) {
    Dim part = Dim::dynamic();
    if (n == 1) {
      part = dim;
    } else if (dim.isStatic()) {
      if (dim.size() % n != 0)
        return ctx.emitError() << "dim " << *axis << " of " << in.str() << " cannot be split into "
                               << n << " equal parts";
      part = Dim(dim.size() / n);
    } else if (auto q = exactDivDim(dim, Dim(n))) {
      part = *q;
    }
    for (TensorType &t : results)
      t.shape[ax] = part;
    return results;
  }
  if (sizes.size() != n)
    return ctx.emitError() << "sizes " << sizes << " has " << sizes.size()
                           << " entries but the op has " << n << " results";
  int64_t sum = 0;
  for (size_t i = 0; i < n; ++i) {
    if (sizes[i] < 0)
      return ctx.emitError() << "sizes " << sizes << " has a negative size " << sizes[i];
    if (__builtin_add_overflow(sum, sizes[i], &sum))
      return ctx.emitError() << "sizes " << sizes << " overflow int64";
    results[i].shape[ax] = Dim(sizes[i]);
  }
  if (dim.isStatic() && sum != dim.size())
    return ctx.emitError() << "sizes " << sizes << " sum to " << sum << " but dim " << *axis
                           << " of " << in.str() << " has size " << dim.size();
  return results;
}

FailureOr<Tensors> referenceSplit(const OpContext &ctx, std::span<const Tensor> inputs,
                                  std::span<const TensorType> resultTypes) {
  const Tensor &in = inputs[0];
  auto axis = resolveAxis(ctx, SplitOp(ctx).axis(), in.rank());
  if (failed(axis))
    return failure();
  size_t ax = static_cast<size_t>(*axis);
  size_t es = dtypeSize(in.dtype());
  int64_t outer = productOf(in.shape(), 0, ax);
  int64_t inner = productOf(in.shape(), ax + 1, in.shape().size());
  Tensors outs;
  for (size_t i = 0; i < resultTypes.size(); ++i)
    outs.push_back(allocResult(resultTypes, i));
  const char *src = constBytesOf(in);
  for (int64_t o = 0; o < outer; ++o) {
    for (const Tensor &out : outs) {
      size_t slab = static_cast<size_t>(out.dim(*axis) * inner) * es;
      std::memcpy(bytesOf(out) + static_cast<size_t>(o) * slab, src, slab);
      src += slab;
    }
  }
  return outs;
}

//===----------------------------------------------------------------------===//
// slice
//===----------------------------------------------------------------------===//

namespace {
/// The normalized attributes of a slice: one entry per sliced axis. A bound
/// may be an expression over the graph's symbols (`seq`), bound to a number
/// before the reference kernel runs (see Note [Symbolic attributes]).
struct SliceSpec {
  std::vector<DimExpr> starts, ends;
  std::vector<int64_t> axes, steps;
};

std::string boundsStr(const std::vector<DimExpr> &v) {
  return attrStr(Attribute(v));
}

FailureOr<SliceSpec> resolveSlice(const OpContext &ctx, int64_t rank) {
  SliceOp op(ctx);
  SliceSpec s{op.starts(), op.ends(), op.axes(), op.steps()};
  size_t n = s.starts.size();
  if (s.ends.size() != n)
    return ctx.emitError() << "starts " << boundsStr(s.starts) << " and ends " << boundsStr(s.ends)
                           << " have different lengths";
  if (s.axes.empty())
    for (size_t i = 0; i < n; ++i)
      s.axes.push_back(static_cast<int64_t>(i));
  else if (s.axes.size() != n)
    return ctx.emitError() << "axes " << s.axes << " and starts " << boundsStr(s.starts)
                           << " have different lengths";
  if (s.steps.empty())
    s.steps.assign(n, 1);
  else if (s.steps.size() != n)
    return ctx.emitError() << "steps " << s.steps << " and starts " << boundsStr(s.starts)
                           << " have different lengths";
  for (int64_t step : s.steps)
    if (step == 0)
      return ctx.emitError() << "steps " << s.steps << " has a zero step";
  if (failed(normalizeAxes(ctx, s.axes, rank)))
    return failure();
  return s;
}

/// Where one axis of a slice starts, its step, and how many elements it takes,
/// with ONNX's clamping of start and end to the dim.
struct SliceRange {
  int64_t start = 0, step = 1, count = 0;
};

SliceRange clampSlice(int64_t start, int64_t end, int64_t step, int64_t dim) {
  SliceRange r;
  r.step = step;
  if (dim == 0)
    return r;
  if (start < 0)
    start += dim;
  if (end < 0)
    end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    if (end > start)
      r.count = (end - start - 1) / step + 1;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    if (start > end) // -step may not fit in int64 (step == INT64_MIN)
      r.count = static_cast<int64_t>(static_cast<uint64_t>(start - end - 1) /
                                     (0 - static_cast<uint64_t>(step))) +
                1;
  }
  r.start = start;
  return r;
}

/// True when the slice provably takes a whole dim of unknown size in order
/// (start 0, end INT64_MAX, step 1) or reversed (start -1, end INT64_MIN,
/// step -1): the result keeps the dim's symbol.
bool takesWholeDim(int64_t start, int64_t end, int64_t step) {
  if (step == 1)
    return start == 0 && end == kInt64Max;
  if (step == -1)
    return (start == -1 || start == kInt64Max) && end == kInt64Min;
  return false;
}
/// The element count of a slice of dim `d` (symbolic, or sliced by a
/// symbolic bound) with a positive step: each bound clamped into [0, d] (a
/// negative constant counts from the end), then ceil((hi - lo) / step), at
/// least 0. `?` for a negative step. A start >= 0 needs no clamp: hi <= d,
/// so a start past d gives 0 anyway. A symbolic bound is taken as >= 0 (an
/// expression of sizes); the exact ONNX rule applies once it is a number.
Dim symbolicSliceCount(const Dim &d, const DimExpr &start, const DimExpr &end, int64_t step) {
  if (step <= 0)
    return Dim::dynamic();
  // `d + b` for a negative constant bound (no negation: b may be INT64_MIN).
  auto fromEnd = [&](int64_t b) { return maxDim(addConstant(d, b), Dim(0)); };
  Dim hi = !end.isConstant()             ? minDim(Dim::of(end), d)
           : end.constant() == kInt64Max ? d
           : end.constant() >= 0         ? minDim(Dim(end.constant()), d)
                                         : fromEnd(end.constant());
  Dim lo = !start.isConstant()     ? Dim::of(start)
           : start.constant() >= 0 ? Dim(start.constant())
                                   : fromEnd(start.constant());
  // The last k (`x[-k:]`): min(k, d). k = INT64_MIN has no int64 negation;
  // it takes the whole dim like any k past d (through `span` below).
  bool lastK = end.isConstant() && end.constant() == kInt64Max && start.isConstant() &&
               start.constant() < 0 && start.constant() != kInt64Min;
  Dim span = lastK ? minDim(Dim(-start.constant()), d) : maxDim(hi - lo, Dim(0));
  return step == 1 ? span : ceilDiv(span, step);
}
} // namespace

FailureOr<Types> inferSlice(const OpContext &ctx) {
  const TensorType &in = ctx.operandType(0);
  auto spec = resolveSlice(ctx, in.rank());
  if (failed(spec))
    return failure();
  Shape out = in.shape;
  for (size_t i = 0; i < spec->axes.size(); ++i) {
    Dim &d = out[static_cast<size_t>(spec->axes[i])];
    const DimExpr &start = spec->starts[i], &end = spec->ends[i];
    int64_t step = spec->steps[i];
    if (!start.isConstant() || !end.isConstant())
      d = symbolicSliceCount(d, start, end, step);
    else if (d.isStatic())
      d = Dim(clampSlice(start.constant(), end.constant(), step, d.size()).count);
    else if (!takesWholeDim(start.constant(), end.constant(), step))
      d = symbolicSliceCount(d, start, end, step);
  }
  return one(ctx, in.dtype, std::move(out));
}

FailureOr<Tensors> referenceSlice(const OpContext &ctx, std::span<const Tensor> inputs,
                                  std::span<const TensorType> resultTypes) {
  const Tensor &in = inputs[0];
  auto spec = resolveSlice(ctx, in.rank());
  if (failed(spec))
    return failure();
  auto begins = constantInts(spec->starts), ends = constantInts(spec->ends);
  if (!begins || !ends)
    return ctx.emitError() << "starts " << boundsStr(spec->starts) << " and ends "
                           << boundsStr(spec->ends) << " name symbols no input binds";
  std::vector<int64_t> starts(static_cast<size_t>(in.rank()), 0);
  std::vector<int64_t> steps(static_cast<size_t>(in.rank()), 1);
  for (size_t i = 0; i < spec->axes.size(); ++i) {
    size_t a = static_cast<size_t>(spec->axes[i]);
    SliceRange r = clampSlice((*begins)[i], (*ends)[i], spec->steps[i], in.dim(spec->axes[i]));
    starts[a] = r.start;
    steps[a] = r.step;
  }
  Tensor out = allocResult(resultTypes);
  std::vector<int64_t> inStrides = in.strides();
  forEachIndex(out.shape(), [&](const std::vector<int64_t> &idx, int64_t flat) {
    int64_t src = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      src += (starts[d] + idx[d] * steps[d]) * inStrides[d];
    copyElement(out, flat, in, src);
  });
  return Tensors{out};
}

//===----------------------------------------------------------------------===//
// gather
//===----------------------------------------------------------------------===//

FailureOr<Types> inferGather(const OpContext &ctx) {
  const TensorType &data = ctx.operandType(0);
  const TensorType &indices = ctx.operandType(1);
  if (indices.dtype != DType::I32 && indices.dtype != DType::I64)
    return ctx.emitError() << "indices must be i32 or i64, got " << indices.str();
  auto axis = resolveAxis(ctx, GatherOp(ctx).axis(), data.rank());
  if (failed(axis))
    return failure();
  size_t ax = static_cast<size_t>(*axis);
  Shape out(data.shape.begin(), data.shape.begin() + static_cast<std::ptrdiff_t>(ax));
  out.insert(out.end(), indices.shape.begin(), indices.shape.end());
  out.insert(out.end(), data.shape.begin() + static_cast<std::ptrdiff_t>(ax) + 1, data.shape.end());
  return one(ctx, data.dtype, std::move(out));
}

FailureOr<Tensors> referenceGather(const OpContext &ctx, std::span<const Tensor> inputs,
                                   std::span<const TensorType> resultTypes) {
  const Tensor &data = inputs[0], &indices = inputs[1];
  auto axis = resolveAxis(ctx, GatherOp(ctx).axis(), data.rank());
  if (failed(axis))
    return failure();
  size_t ax = static_cast<size_t>(*axis);
  int64_t axisSize = data.dim(*axis);
  std::vector<int64_t> picks(static_cast<size_t>(indices.numel()));
  for (int64_t j = 0; j < indices.numel(); ++j) {
    int64_t k = indices.getInt(j);
    if (k < -axisSize || k >= axisSize)
      return ctx.emitError() << "index " << k << " is out of range for axis " << *axis
                             << " of size " << axisSize;
    picks[static_cast<size_t>(j)] = k < 0 ? k + axisSize : k;
  }
  Tensor out = allocResult(resultTypes);
  size_t es = dtypeSize(data.dtype());
  int64_t outer = productOf(data.shape(), 0, ax);
  size_t slab = static_cast<size_t>(productOf(data.shape(), ax + 1, data.shape().size())) * es;
  char *dst = bytesOf(out);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k : picks) {
      std::memcpy(dst, constBytesOf(data) + static_cast<size_t>(o * axisSize + k) * slab, slab);
      dst += slab;
    }
  }
  return Tensors{out};
}

//===----------------------------------------------------------------------===//
// expand
//===----------------------------------------------------------------------===//

namespace {
/// A symbolic shape attribute as dims (Note [Symbolic attributes]); an error
/// for a negative constant entry.
FailureOr<Shape> shapeAttr(const OpContext &ctx, const std::vector<DimExpr> &shape) {
  Shape out;
  for (const DimExpr &e : shape) {
    if (e.isConstant() && e.constant() < 0)
      return ctx.emitError() << "shape " << attrStr(Attribute(shape)) << " has a negative size "
                             << e.constant();
    out.push_back(Dim::of(e));
  }
  return out;
}
} // namespace

FailureOr<Types> inferExpand(const OpContext &ctx) {
  const TensorType &in = ctx.operandType(0);
  auto target = shapeAttr(ctx, ExpandOp(ctx).shape());
  if (failed(target))
    return failure();
  const Shape &shape = *target;
  // Numpy broadcasting of the input's shape against `shape`, in both
  // directions (a 1 in `shape` keeps the input's dim).
  size_t rank = std::max(in.shape.size(), shape.size());
  Shape out(rank, Dim(1));
  size_t inOff = rank - in.shape.size(), shapeOff = rank - shape.size();
  for (size_t i = 0; i < rank; ++i) {
    std::optional<Dim> a, b;
    if (i >= inOff)
      a = in.shape[i - inOff];
    if (i >= shapeOff)
      b = shape[i - shapeOff];
    if (!a || !b) {
      out[i] = a ? *a : *b;
    } else if ((b->isStatic() && b->size() == 1) || *a == *b) {
      out[i] = *a;
    } else if (a->isSymbolic() || a->size() == 1) {
      out[i] = *b; // a symbol must be 1 or equal to the target size
    } else if (b->isSymbolic()) {
      out[i] = *a; // a symbolic target entry is 1 or the input's size
    } else {
      return ctx.emitError() << "cannot expand " << in.str() << " to shape "
                             << attrStr(Attribute(ExpandOp(ctx).shape())) << " (dim " << i << ": "
                             << a->size() << " vs " << b->size() << ")";
    }
  }
  return one(ctx, in.dtype, std::move(out));
}

FailureOr<Tensors> referenceExpand(const OpContext &, std::span<const Tensor> inputs,
                                   std::span<const TensorType> resultTypes) {
  const Tensor &in = inputs[0];
  Tensor out = allocResult(resultTypes);
  forEachIndex(out.shape(), [&](const std::vector<int64_t> &idx, int64_t flat) {
    copyElement(out, flat, in, broadcastOffset(idx, in.shape()));
  });
  return Tensors{out};
}

//===----------------------------------------------------------------------===//
// constant / shape / constant_of_shape / range
//===----------------------------------------------------------------------===//

FailureOr<Types> inferConstant(const OpContext &ctx) {
  const Tensor &value = ConstantOp(ctx).value();
  if (value.isNull())
    return ctx.emitError() << "has no value";
  return Types{value.type()};
}

FailureOr<Tensors> referenceConstant(const OpContext &ctx, std::span<const Tensor>,
                                     std::span<const TensorType>) {
  return Tensors{ConstantOp(ctx).value()};
}

namespace {
/// The [begin, end) dims `shape` returns, clamped like ONNX Shape-15.
std::pair<int64_t, int64_t> shapeRange(const OpContext &ctx, int64_t rank) {
  ShapeOfOp op(ctx);
  auto clampToRank = [rank](int64_t i) {
    if (i < 0)
      i += rank;
    return std::clamp<int64_t>(i, 0, rank);
  };
  int64_t begin = clampToRank(op.start()), end = clampToRank(op.end());
  return {begin, std::max(begin, end)};
}
} // namespace

FailureOr<Types> inferShapeOf(const OpContext &ctx) {
  auto [begin, end] = shapeRange(ctx, ctx.operandType(0).rank());
  return one(ctx, DType::I64, Shape{Dim(end - begin)});
}

FailureOr<Tensors> referenceShapeOf(const OpContext &ctx, std::span<const Tensor> inputs,
                                    std::span<const TensorType> resultTypes) {
  const Tensor &in = inputs[0];
  auto [begin, end] = shapeRange(ctx, in.rank());
  Tensor out = allocResult(resultTypes);
  for (int64_t i = begin; i < end; ++i)
    out.setInt(i - begin, in.dim(i));
  return Tensors{out};
}

FailureOr<Types> inferConstantOfShape(const OpContext &ctx) {
  ConstantOfShapeOp op(ctx);
  auto shape = shapeAttr(ctx, op.shape());
  if (failed(shape))
    return failure();
  return one(ctx, op.dtype(), std::move(*shape));
}

FailureOr<Tensors> referenceConstantOfShape(const OpContext &ctx, std::span<const Tensor>,
                                            std::span<const TensorType> resultTypes) {
  Tensor out = allocResult(resultTypes);
  double value = ConstantOfShapeOp(ctx).value();
  if (value != 0.0 || std::signbit(value))
    for (int64_t i = 0; i < out.numel(); ++i)
      out.setDouble(i, value);
  return Tensors{out};
}

FailureOr<Types> inferRange(const OpContext &ctx) {
  RangeOp op(ctx);
  double start = op.start(), limit = op.limit(), delta = op.delta();
  if (op.dtype() == DType::Bool)
    return ctx.emitError() << "dtype bool is not supported";
  if (!std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta))
    return ctx.emitError() << "start " << formatDouble(start) << ", limit " << formatDouble(limit)
                           << " and delta " << formatDouble(delta) << " must be finite";
  if (delta == 0.0)
    return ctx.emitError() << "delta must not be 0";
  double length = std::max(std::ceil((limit - start) / delta), 0.0);
  if (!(length < kMaxDimAsDouble))
    return ctx.emitError() << "range from " << formatDouble(start) << " to " << formatDouble(limit)
                           << " by " << formatDouble(delta) << " has too many elements";
  return one(ctx, op.dtype(), Shape{Dim(static_cast<int64_t>(length))});
}

FailureOr<Tensors> referenceRange(const OpContext &ctx, std::span<const Tensor>,
                                  std::span<const TensorType> resultTypes) {
  RangeOp op(ctx);
  Tensor out = allocResult(resultTypes);
  for (int64_t i = 0; i < out.numel(); ++i)
    out.setDouble(i, op.start() + static_cast<double>(i) * op.delta());
  return Tensors{out};
}

// iota: the index along `axis` of a `shape` that may be symbolic, as
// start + index * delta (XLA's iota, with a start and a step): what a
// Range or a Trilu mask whose size comes from a sequence length imports to.
FailureOr<Types> inferIota(const OpContext &ctx) {
  IotaOp op(ctx);
  if (op.dtype() == DType::Bool)
    return ctx.emitError() << "dtype bool is not supported";
  if (!std::isfinite(op.start()) || !std::isfinite(op.delta()))
    return ctx.emitError() << "start " << formatDouble(op.start()) << " and delta "
                           << formatDouble(op.delta()) << " must be finite";
  auto shape = shapeAttr(ctx, op.shape());
  if (failed(shape))
    return failure();
  if (failed(resolveAxis(ctx, op.axis(), static_cast<int64_t>(shape->size()))))
    return failure();
  return one(ctx, op.dtype(), std::move(*shape));
}

FailureOr<Tensors> referenceIota(const OpContext &ctx, std::span<const Tensor>,
                                 std::span<const TensorType> resultTypes) {
  IotaOp op(ctx);
  Tensor out = allocResult(resultTypes);
  auto axis = resolveAxis(ctx, op.axis(), out.rank());
  if (failed(axis))
    return failure();
  size_t a = static_cast<size_t>(*axis);
  forEachIndex(out.shape(), [&](const std::vector<int64_t> &idx, int64_t flat) {
    out.setDouble(flat, op.start() + static_cast<double>(idx[a]) * op.delta());
  });
  return Tensors{out};
}

} // namespace kiln
