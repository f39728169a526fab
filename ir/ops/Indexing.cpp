//===- Indexing.cpp - Gathers and scatters by index tensors, top-k -*- C++ -*-===//
//
// Type inference and reference kernels of the ops that move elements to or
// from positions an index tensor names, and of top_k:
//
//   gather_elements(data, indices) {axis}     out[i] = data[i with i[axis] = indices[i]]
//   scatter_elements(data, indices, updates) {axis, reduction}
//                                             out = data; out[i with i[axis] =
//                                             indices[i]] (op)= updates[i]
//   gather_nd(data, indices) {batch_dims}     out[b, i, rest] = data[b, indices[b, i, :], rest]
//   scatter_nd(data, indices, updates) {reduction}
//                                             out = data; out[indices[i, :], rest]
//                                             (op)= updates[i, rest]
//   top_k(x) {k, axis, largest, sorted}       the k largest (smallest) along axis
//                                             and their indices (i64)
//   top_k(x, k) {axis, largest, sorted}       the same with k a one-element
//                                             integer tensor the run gives
//   nonzero(x)                                i64[rank, count]: the index of each
//                                             non-zero element, row-major order
//
// As ONNX (opsets 11 to 28) defines them. Indices may be negative (counted
// from the end of their dim); one out of range is an error of the kernel.
// Scatters apply updates in index order, so with reduction "none" the last
// of duplicate indices wins (ONNX leaves that order undefined); "add", "mul",
// "max", "min" combine them. top_k orders NaN above every number and equal
// values by index, as ONNX's reference (a stable sort) does; `sorted` false
// is honoured by returning them sorted anyway.
//
// These ops have no kernel lowering: compiled graphs run them on these
// reference kernels (fusion rule F10). nonzero's count, and top_k's k when
// it is an operand, are known only when they run (ValueDependentShape:
// inference gives `?`, the kernel the size): a compile runs them between
// stages (Note [Data-dependent shapes] in codegen/Staged.cpp).
//
//===----------------------------------------------------------------------===//
#include "ir/ops/Internal.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

namespace kiln {
using namespace ops;

namespace {

using Types = std::vector<TensorType>;
using Tensors = std::vector<Tensor>;

FailureOr<int64_t> axisOf(const OpContext &ctx, int64_t axis, int64_t rank) {
  auto n = normalizeAxis(axis, rank);
  if (!n)
    return ctx.emitError() << "axis " << axis << " is out of range for rank " << rank;
  return *n;
}

LogicalResult requireIndices(const OpContext &ctx, unsigned i) {
  DType t = ctx.operandType(i).dtype;
  if (t != DType::I32 && t != DType::I64)
    return ctx.emitError() << "indices must be i32 or i64, got " << ctx.operandType(i).str();
  return success();
}

/// Reports unless `reduction` is a known one; non-"none" ones need numbers.
LogicalResult requireReduction(const OpContext &ctx, const std::string &reduction, DType dt) {
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" &&
      reduction != "min")
    return ctx.emitError()
           << "reduction must be \"none\", \"add\", \"mul\", \"max\" or \"min\", got \""
           << reduction << "\"";
  if (reduction != "none" && (dt == DType::Bool || isStorageDType(dt)))
    return ctx.emitError() << "reduction \"" << reduction
                           << "\" needs a numeric compute dtype, got " << dtypeName(dt);
  return success();
}

/// `k` in [-size, size) as an index into a dim of `size`, or an error.
FailureOr<int64_t> wrapIndex(const OpContext &ctx, int64_t k, int64_t size, int64_t dim) {
  if (k < -size || k >= size)
    return ctx.emitError() << "index " << k << " is out of range for dim " << dim << " of size "
                           << size;
  return k < 0 ? k + size : k;
}

/// out[di] = reduce(out[di], upd[ui]).
void combine(const Tensor &out, int64_t di, const Tensor &upd, int64_t ui,
             const std::string &reduction) {
  if (reduction == "none") {
    copyElement(out, di, upd, ui);
  } else if (isFloat(out.dtype())) {
    double a = out.getDouble(di), b = upd.getDouble(ui);
    double r = reduction == "add"   ? a + b
               : reduction == "mul" ? a * b
               : reduction == "max" ? (std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b))
                                    : (std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b));
    out.setDouble(di, r);
  } else {
    // Integers wrap as the dtype does (setInt truncates).
    int64_t a = out.getInt(di), b = upd.getInt(ui);
    int64_t r = reduction == "add"
                    ? static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b))
                : reduction == "mul"
                    ? static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b))
                : reduction == "max" ? std::max(a, b)
                                     : std::min(a, b);
    out.setInt(di, r);
  }
}

Tensor copyOf(const Tensor &t) {
  Tensor out = Tensor::zeros(t.dtype(), t.shape());
  if (t.numel() > 0)
    std::memcpy(out.mutableRawData(), t.rawData(),
                static_cast<size_t>(t.numel()) * dtypeSize(t.dtype()));
  return out;
}

/// Element-wise index ops: `indices` has data's rank and, on every dim but
/// `axis`, at most data's size.
LogicalResult checkElementIndices(const OpContext &ctx, const TensorType &data,
                                  const TensorType &indices, int64_t axis) {
  if (indices.rank() != data.rank())
    return ctx.emitError() << "indices " << indices.str() << " must have the rank of data "
                           << data.str();
  for (int64_t d = 0; d < data.rank(); ++d) {
    const Dim &i = indices.shape[static_cast<size_t>(d)], &x = data.shape[static_cast<size_t>(d)];
    if (d != axis && i.isStatic() && x.isStatic() && i.size() > x.size())
      return ctx.emitError() << "indices " << indices.str() << " is larger than data " << data.str()
                             << " in dim " << d;
  }
  return success();
}

/// Calls fn(i, offset) for each element i of `indices` (row-major), offset
/// being the flat position in `data` it names: i's own index with the
/// entry at `axis` replaced by indices[i]. Fails on an index out of range.
template <typename Fn>
LogicalResult forEachElementIndex(const OpContext &ctx, const Tensor &data, const Tensor &indices,
                                  int64_t axis, Fn fn) {
  if (indices.numel() == 0)
    return success();
  std::vector<int64_t> strides = data.strides(), idx(indices.shape().size(), 0);
  int64_t flat = 0;
  do {
    auto k = wrapIndex(ctx, indices.getInt(flat), data.dim(axis), axis);
    if (failed(k))
      return failure();
    int64_t offset = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      offset += (static_cast<int64_t>(d) == axis ? *k : idx[d]) * strides[d];
    fn(flat++, offset);
  } while (nextIndex(idx, indices.shape()));
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// gather_elements, scatter_elements
//===----------------------------------------------------------------------===//

FailureOr<Types> inferGatherElements(const OpContext &ctx) {
  const TensorType &data = ctx.operandType(0), &indices = ctx.operandType(1);
  if (failed(requireIndices(ctx, 1)))
    return failure();
  auto axis = axisOf(ctx, GatherElementsOp(ctx).axis(), data.rank());
  if (failed(axis) || failed(checkElementIndices(ctx, data, indices, *axis)))
    return failure();
  return Types{TensorType(data.dtype, indices.shape)};
}

FailureOr<Tensors> referenceGatherElements(const OpContext &ctx, std::span<const Tensor> in,
                                           std::span<const TensorType> rt) {
  const Tensor &data = in[0], &indices = in[1];
  auto axis = axisOf(ctx, GatherElementsOp(ctx).axis(), data.rank());
  if (failed(axis))
    return failure();
  Tensor out = Tensor::zeros(rt[0].dtype, staticSizes(rt[0].shape));
  if (failed(forEachElementIndex(ctx, data, indices, *axis,
                                 [&](int64_t i, int64_t src) { copyElement(out, i, data, src); })))
    return failure();
  return Tensors{out};
}

FailureOr<Types> inferScatterElements(const OpContext &ctx) {
  const TensorType &data = ctx.operandType(0), &indices = ctx.operandType(1),
                   &updates = ctx.operandType(2);
  ScatterElementsOp op(ctx);
  if (failed(requireIndices(ctx, 1)) || failed(requireReduction(ctx, op.reduction(), data.dtype)))
    return failure();
  if (updates.dtype != data.dtype || updates.shape != indices.shape)
    return ctx.emitError() << "updates " << updates.str() << " must have data's dtype and the "
                           << "shape of indices " << indices.str();
  auto axis = axisOf(ctx, op.axis(), data.rank());
  if (failed(axis) || failed(checkElementIndices(ctx, data, indices, *axis)))
    return failure();
  return Types{data};
}

FailureOr<Tensors> referenceScatterElements(const OpContext &ctx, std::span<const Tensor> in,
                                            std::span<const TensorType>) {
  const Tensor &data = in[0], &indices = in[1], &updates = in[2];
  ScatterElementsOp op(ctx);
  auto axis = axisOf(ctx, op.axis(), data.rank());
  if (failed(axis))
    return failure();
  Tensor out = copyOf(data);
  if (failed(forEachElementIndex(ctx, data, indices, *axis, [&](int64_t i, int64_t dst) {
        combine(out, dst, updates, i, op.reduction());
      })))
    return failure();
  return Tensors{out};
}

//===----------------------------------------------------------------------===//
// gather_nd, scatter_nd
//===----------------------------------------------------------------------===//

namespace {

/// The index depth r (last dim of indices), checked against data's rank
/// after `batch` leading dims.
FailureOr<int64_t> indexDepth(const OpContext &ctx, const TensorType &data,
                              const TensorType &indices, int64_t batch) {
  if (indices.rank() < 1)
    return ctx.emitError() << "indices " << indices.str() << " must have rank >= 1";
  const Dim &last = indices.shape.back();
  if (!last.isStatic())
    return ctx.emitError() << "indices " << indices.str() << " needs a static last dim";
  int64_t r = last.size();
  if (batch < 0 || batch >= indices.rank() || batch > data.rank())
    return ctx.emitError() << "batch_dims " << batch << " is out of range for indices "
                           << indices.str() << " and data " << data.str();
  if (r < 1 || r > data.rank() - batch)
    return ctx.emitError() << "indices " << indices.str() << " index " << r << " dims, data "
                           << data.str() << " has " << data.rank() - batch
                           << " after the batch dims";
  for (int64_t d = 0; d < batch; ++d) {
    const Dim &a = indices.shape[static_cast<size_t>(d)], &b = data.shape[static_cast<size_t>(d)];
    if (a.isStatic() && b.isStatic() && a != b)
      return ctx.emitError() << "batch dim " << d << " differs: indices " << indices.str()
                             << ", data " << data.str();
  }
  return r;
}

/// The flat offset in `data` of the r-tuple at `tuple` (flat index of its
/// first entry) of `indices`, after batch offset `base`; checks each entry.
FailureOr<int64_t> tupleOffset(const OpContext &ctx, const Tensor &data, const Tensor &indices,
                               int64_t tuple, int64_t r, int64_t batch,
                               const std::vector<int64_t> &strides) {
  int64_t off = 0;
  for (int64_t j = 0; j < r; ++j) {
    int64_t d = batch + j;
    auto k = wrapIndex(ctx, indices.getInt(tuple + j), data.dim(d), d);
    if (failed(k))
      return failure();
    off += *k * strides[static_cast<size_t>(d)];
  }
  return off;
}

int64_t product(const std::vector<int64_t> &s, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i)
    n *= s[i];
  return n;
}

} // namespace

FailureOr<Types> inferGatherND(const OpContext &ctx) {
  const TensorType &data = ctx.operandType(0), &indices = ctx.operandType(1);
  int64_t batch = GatherNDOp(ctx).batch_dims();
  if (failed(requireIndices(ctx, 1)))
    return failure();
  auto r = indexDepth(ctx, data, indices, batch);
  if (failed(r))
    return failure();
  Shape out(indices.shape.begin(), indices.shape.end() - 1);
  out.insert(out.end(), data.shape.begin() + batch + *r, data.shape.end());
  return Types{TensorType(data.dtype, std::move(out))};
}

FailureOr<Tensors> referenceGatherND(const OpContext &ctx, std::span<const Tensor> in,
                                     std::span<const TensorType> rt) {
  const Tensor &data = in[0], &indices = in[1];
  int64_t batch = GatherNDOp(ctx).batch_dims();
  int64_t r = indices.shape().back();
  Tensor out = Tensor::zeros(rt[0].dtype, staticSizes(rt[0].shape));
  std::vector<int64_t> strides = data.strides();
  const std::vector<int64_t> &ds = data.shape(), &is = indices.shape();
  int64_t batches = product(ds, 0, static_cast<size_t>(batch));
  int64_t perBatch = product(is, static_cast<size_t>(batch), is.size() - 1);
  int64_t slab = product(ds, static_cast<size_t>(batch + r), ds.size());
  int64_t batchStride = batch > 0 ? strides[static_cast<size_t>(batch - 1)] : 0;
  int64_t o = 0;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t t = 0; t < perBatch; ++t) {
      auto off = tupleOffset(ctx, data, indices, (b * perBatch + t) * r, r, batch, strides);
      if (failed(off))
        return failure();
      for (int64_t e = 0; e < slab; ++e)
        copyElement(out, o++, data, b * batchStride + *off + e);
    }
  return Tensors{out};
}

FailureOr<Types> inferScatterND(const OpContext &ctx) {
  const TensorType &data = ctx.operandType(0), &indices = ctx.operandType(1),
                   &updates = ctx.operandType(2);
  if (failed(requireIndices(ctx, 1)) ||
      failed(requireReduction(ctx, ScatterNDOp(ctx).reduction(), data.dtype)))
    return failure();
  auto r = indexDepth(ctx, data, indices, 0);
  if (failed(r))
    return failure();
  Shape want(indices.shape.begin(), indices.shape.end() - 1);
  want.insert(want.end(), data.shape.begin() + *r, data.shape.end());
  if (updates.dtype != data.dtype || updates.shape != want)
    return ctx.emitError() << "updates " << updates.str() << " must be "
                           << TensorType(data.dtype, want).str() << " for data " << data.str()
                           << " and indices " << indices.str();
  return Types{data};
}

FailureOr<Tensors> referenceScatterND(const OpContext &ctx, std::span<const Tensor> in,
                                      std::span<const TensorType>) {
  const Tensor &data = in[0], &indices = in[1], &updates = in[2];
  const std::string &reduction = ScatterNDOp(ctx).reduction();
  int64_t r = indices.shape().back();
  Tensor out = copyOf(data);
  std::vector<int64_t> strides = data.strides();
  const std::vector<int64_t> &ds = data.shape(), &is = indices.shape();
  int64_t tuples = product(is, 0, is.size() - 1);
  int64_t slab = product(ds, static_cast<size_t>(r), ds.size());
  for (int64_t t = 0; t < tuples; ++t) {
    auto off = tupleOffset(ctx, data, indices, t * r, r, 0, strides);
    if (failed(off))
      return failure();
    for (int64_t e = 0; e < slab; ++e)
      combine(out, *off + e, updates, t * slab + e, reduction);
  }
  return Tensors{out};
}

//===----------------------------------------------------------------------===//
// top_k
//===----------------------------------------------------------------------===//

FailureOr<Types> inferTopK(const OpContext &ctx) {
  const TensorType &x = ctx.operandType(0);
  TopKOp op(ctx);
  if (x.dtype == DType::Bool)
    return ctx.emitError() << "needs a numeric input, got " << x.str();
  auto axis = axisOf(ctx, op.axis(), x.rank());
  if (failed(axis))
    return failure();
  const Dim &d = x.shape[static_cast<size_t>(*axis)];
  Shape out = x.shape;
  if (ctx.numOperands() == 2) { // k given by the run
    const TensorType &k = ctx.operandType(1);
    if (!isInteger(k.dtype) || k.rank() > 1 ||
        (k.isStatic() && numElements(staticSizes(k.shape)) != 1))
      return ctx.emitError() << "k must be one integer, got " << k.str();
    if (op.k() != -1)
      return ctx.emitError() << "k is given twice: the attribute k = " << op.k()
                             << " and an operand";
    out[static_cast<size_t>(*axis)] = Dim::dynamic();
    return Types{TensorType(x.dtype, out), TensorType(DType::I64, out)};
  }
  if (op.k() < 0 || (d.isStatic() && op.k() > d.size()))
    return ctx.emitError() << "k " << op.k() << " is out of range for dim " << *axis << " of "
                           << x.str();
  out[static_cast<size_t>(*axis)] = Dim(op.k());
  return Types{TensorType(x.dtype, out), TensorType(DType::I64, out)};
}

FailureOr<Tensors> referenceTopK(const OpContext &ctx, std::span<const Tensor> in,
                                 std::span<const TensorType> rt) {
  const Tensor &x = in[0];
  TopKOp op(ctx);
  auto axis = axisOf(ctx, op.axis(), x.rank());
  if (failed(axis))
    return failure();
  if (in.size() == 2 && in[1].numel() != 1)
    return ctx.emitError() << "k must be one integer, got " << in[1].numel() << " of them";
  const int64_t k = in.size() == 2 ? in[1].getInt(0) : op.k();
  if (k < 0 || k > x.dim(*axis))
    return ctx.emitError() << "k " << k << " is out of range for dim " << *axis << " of "
                           << x.shape();
  std::vector<int64_t> outShape = x.shape();
  outShape[static_cast<size_t>(*axis)] = k;
  Tensor values = Tensor::zeros(rt[0].dtype, outShape);
  Tensor indices = Tensor::zeros(DType::I64, outShape);
  const std::vector<int64_t> &s = x.shape();
  size_t ax = static_cast<size_t>(*axis);
  int64_t outer = product(s, 0, ax), n = s[ax], inner = product(s, ax + 1, s.size());
  bool largest = op.largest(), fl = isFloat(x.dtype());
  std::vector<int64_t> order(static_cast<size_t>(n));
  // a before b: the larger (smaller) first, NaN above every number, equal
  // values by index.
  auto before = [&](int64_t base, int64_t a, int64_t b) {
    int64_t ia = base + a * inner, ib = base + b * inner;
    if (fl) {
      double va = x.getDouble(ia), vb = x.getDouble(ib);
      bool na = std::isnan(va), nb = std::isnan(vb);
      if (na && nb)
        return a < b;
      if (na || nb)
        return largest ? na : nb;
      if (va != vb)
        return largest ? va > vb : va < vb;
    } else {
      int64_t va = x.getInt(ia), vb = x.getInt(ib);
      if (va != vb)
        return largest ? va > vb : va < vb;
    }
    return a < b;
  };
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t base = o * n * inner + i;
      std::iota(order.begin(), order.end(), int64_t(0));
      std::partial_sort(order.begin(), order.begin() + k, order.end(),
                        [&](int64_t a, int64_t b) { return before(base, a, b); });
      for (int64_t j = 0; j < k; ++j) {
        int64_t dst = o * k * inner + j * inner + i;
        copyElement(values, dst, x, base + order[static_cast<size_t>(j)] * inner);
        indices.setInt(dst, order[static_cast<size_t>(j)]);
      }
    }
  return Tensors{values, indices};
}

//===----------------------------------------------------------------------===//
// nonzero
//===----------------------------------------------------------------------===//

FailureOr<Types> inferNonZero(const OpContext &ctx) {
  const TensorType &x = ctx.operandType(0);
  // ONNX's shape inference gives a 0-d input [0, ?], NumPy and ONNX Runtime
  // read it as 1-d ([1, count]): rather than pick one silently, refuse it.
  if (x.rank() == 0)
    return ctx.emitError() << "needs an input of rank >= 1, got " << x.str()
                           << " (reshape a scalar to [1] first)";
  return Types{TensorType(DType::I64, {Dim(x.rank()), Dim::dynamic()})};
}

FailureOr<Tensors> referenceNonZero(const OpContext &, std::span<const Tensor> in,
                                    std::span<const TensorType>) {
  const Tensor &x = in[0];
  const std::vector<int64_t> &s = x.shape();
  const int64_t rank = x.rank();
  // NaN is non-zero (NaN != 0), -0.0 is zero, as in ONNX's reference.
  auto nonzero = [&](int64_t i) {
    return isFloat(x.dtype()) ? x.getDouble(i) != 0.0 : x.getInt(i) != 0;
  };
  int64_t count = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    count += nonzero(i) ? 1 : 0;
  Tensor out = Tensor::zeros(DType::I64, {rank, count});
  int64_t j = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (!nonzero(i))
      continue;
    for (int64_t d = rank - 1, rest = i; d >= 0; --d) {
      out.setInt(d * count + j, rest % s[static_cast<size_t>(d)]);
      rest /= s[static_cast<size_t>(d)];
    }
    ++j;
  }
  return Tensors{out};
}

} // namespace kiln
