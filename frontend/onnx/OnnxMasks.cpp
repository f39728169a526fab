//===- OnnxMasks.cpp - Converters of ops built from constant maps -*- C++ -*-===//
//
// Ops whose result is a constant mask, table or gather map of a shape known
// at import time, applied to the data: Trilu (a triangle mask, or an iota
// column and row for symbolic sizes), EyeLike (a constant), OneHot (a
// comparison with an iota), CumSum (a matmul with a 0-1 triangle) and
// ScatterND with constant indices (a gather map).
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::onnximport {

Value *triangleMask(NodeContext &ctx, const std::vector<DimExpr> &shape, int64_t k, bool upper) {
  // |j - i| < 2^62 for any real size, so a k beyond +-2^62 keeps all or none.
  constexpr int64_t kFar = int64_t(1) << 62;
  k = std::clamp(k, -kFar, kFar);
  // A column [rows, 1] of i and a row [1, cols] of j, broadcast by the
  // subtraction: small enough to fold to constants once sizes are bound,
  // leaving one elementwise kernel (full [rows, cols] iotas would exceed
  // the fold limit at long sequences and run on the reference kernel).
  Value *i = ctx.create(OpKind::Iota, {}, {{"shape", std::vector<DimExpr>{shape[0], 1}}});
  Value *j = ctx.create(OpKind::Iota, {},
                        {{"shape", std::vector<DimExpr>{1, shape[1]}}, {"axis", int64_t(1)}});
  if (!i || !j)
    return nullptr;
  Value *diff = ctx.create(OpKind::Sub, {j, i});
  // upper: j - i >= k, i.e. j - i > k - 1; lower: j - i <= k, i.e. j - i < k + 1.
  Value *bound = ctx.constant(Tensor::fromInts(DType::I64, {}, {upper ? k - 1 : k + 1}));
  return ctx.create(upper ? OpKind::Greater : OpKind::Less, {diff, bound});
}

namespace {

using Values = std::vector<Value *>;

//===----------------------------------------------------------------------===//
// Masks and one-hot encodings built from constants
//===----------------------------------------------------------------------===//

/// A normalized axis of a rank-`rank` value, or an error.
std::optional<int64_t> normalizeAxis(NodeContext &ctx, int64_t axis, int64_t rank, const Value *x) {
  if (axis < -rank || axis >= rank) {
    ctx.emitError() << "axis " << axis << " is out of range for " << x->type().str();
    return std::nullopt;
  }
  return axis < 0 ? axis + rank : axis;
}

/// Trilu of an input whose last two dims are symbolic (a causal mask of a
/// sequence length): where(triangleMask(...), x, 0).
Value *symbolicTrilu(NodeContext &ctx, Value *x, int64_t k, bool upper) {
  int64_t rank = x->type().rank();
  std::vector<DimExpr> shape;
  for (int64_t d : {rank - 2, rank - 1}) {
    auto e = x->type().shape[static_cast<size_t>(d)].expr();
    if (!e) {
      ctx.emitError() << "dim " << d << " of " << x->type().str()
                      << " is neither a size nor an expression of the graph's symbols";
      return nullptr;
    }
    shape.push_back(*e);
  }
  Value *mask = triangleMask(ctx, shape, k, upper);
  if (!mask)
    return nullptr;
  return ctx.create(OpKind::Where, {mask, x, ctx.scalarLike(x, 0.0)});
}

/// Trilu = where(mask, x, 0) with a constant [N, M] mask of the kept
/// triangle (j - i >= k for upper, j - i <= k for lower).
Values convertTrilu(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  int64_t k = 0;
  if (ctx.hasInput(1)) {
    auto kv = ctx.scalarInput(1, "k");
    if (!kv)
      return {};
    // Clamped before the conversion (a double beyond int64 has none);
    // |j - i| < 2^62 for any real size, so such a k keeps all or none.
    k = static_cast<int64_t>(std::clamp(*kv, -0x1p62, 0x1p62));
  }
  bool upper = ctx.attrInt("upper", 1) != 0;
  if (!x)
    return {};
  int64_t rank = x->type().rank();
  if (rank < 2) {
    ctx.emitError() << "needs an input of rank >= 2, got " << x->type().str();
    return {};
  }
  const Dim &rows = x->type().shape[static_cast<size_t>(rank - 2)];
  const Dim &cols = x->type().shape[static_cast<size_t>(rank - 1)];
  if (!rows.isStatic() || !cols.isStatic())
    return {symbolicTrilu(ctx, x, k, upper)};
  auto n = ctx.staticDim(x, rank - 2), m = ctx.staticDim(x, rank - 1);
  if (!n || !m)
    return {};
  Tensor mask = Tensor::zeros(DType::Bool, {*n, *m});
  for (int64_t i = 0; i < *n; ++i)
    for (int64_t j = 0; j < *m; ++j)
      mask.setInt(i * *m + j, upper ? j - i >= k : j - i <= k);
  return {ctx.create(OpKind::Where, {ctx.constant(std::move(mask)), x, ctx.scalarLike(x, 0.0)})};
}

std::string checkEyeLike(const onnx::NodeProto &node, int64_t) {
  const onnx::AttributeProto *a = findAttr(node, "dtype");
  if (a && !dtypeFromOnnx(static_cast<int32_t>(a->i())))
    return "dtype " + onnxTypeName(static_cast<int32_t>(a->i())) + " is not supported";
  return "";
}

/// EyeLike: a constant of the input's (static, 2-D) shape.
Values convertEyeLike(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  if (!x)
    return {};
  if (x->type().rank() != 2 || !x->type().isStatic()) {
    ctx.emitError() << "needs a static 2-D input, got " << x->type().str();
    return {};
  }
  DType dtype = x->type().dtype;
  if (ctx.hasAttr("dtype")) {
    auto d = dtypeFromOnnx(static_cast<int32_t>(ctx.attrInt("dtype", 1)));
    if (!d) {
      ctx.emitError() << "unsupported dtype";
      return {};
    }
    dtype = *d;
  }
  int64_t k = ctx.attrInt("k", 0);
  Ints shape = staticSizes(x->type().shape);
  Tensor eye = Tensor::zeros(dtype, shape);
  for (int64_t i = 0; i < shape[0]; ++i)
    if (i + k >= 0 && i + k < shape[1])
      eye.setDouble(i * shape[1] + i + k, 1.0);
  return {ctx.constant(std::move(eye))};
}

/// OneHot = where(unsqueeze(indices, axis) == iota, on, off); negative
/// indices count from `depth`; non-integer indices are truncated.
Values convertOneHot(NodeContext &ctx) {
  Value *indices = ctx.input(0, "indices");
  auto depth = ctx.scalarInput(1, "depth");
  Value *values = ctx.input(2, "values");
  if (!indices || !depth || !values)
    return {};
  if (values->type().rank() != 1 || values->type().shape[0] != Dim(2)) {
    ctx.emitError() << "values must hold [off, on], got " << values->type().str();
    return {};
  }
  int64_t rank = indices->type().rank() + 1;
  auto axis = normalizeAxis(ctx, ctx.attrInt("axis", -1), rank, indices);
  int64_t n = static_cast<int64_t>(*depth);
  if (!axis)
    return {};
  if (n < 1) {
    ctx.emitError() << "depth must be at least 1, got " << *depth;
    return {};
  }
  Value *idx = ctx.castTo(indices, DType::I64);
  Value *wrapped = ctx.create(
      OpKind::Where, {ctx.create(OpKind::Less, {idx, ctx.scalarLike(idx, 0.0)}),
                      ctx.create(OpKind::Add, {idx, ctx.scalarLike(idx, double(n))}), idx});
  Value *u = ctx.create(OpKind::Unsqueeze, {wrapped}, {{"axes", Ints{*axis}}});
  Ints iotaShape(static_cast<size_t>(rank - *axis), 1);
  iotaShape[0] = n;
  Tensor iota = Tensor::zeros(DType::I64, iotaShape);
  for (int64_t i = 0; i < n; ++i)
    iota.setInt(i, i);
  Value *hit = ctx.create(OpKind::Equal, {u, ctx.constant(std::move(iota))});
  Value *off = ctx.create(OpKind::Gather, {values, ctx.constant(Tensor::scalar(DType::I64, 0))});
  Value *on = ctx.create(OpKind::Gather, {values, ctx.constant(Tensor::scalar(DType::I64, 1))});
  return {ctx.create(OpKind::Where, {hit, on, off})};
}

/// CumSum = matmul with a constant 0/1 matrix T[i, j] = "element i adds to
/// sum j" (i <= j; i < j exclusive; reversed: i >= j, i > j), along the last
/// axis (the axis is swapped there and back).
Values convertCumSum(NodeContext &ctx) {
  Value *x = ctx.input(0, "x");
  auto axisIn = ctx.intsInput(1, "axis");
  bool exclusive = ctx.attrInt("exclusive", 0) != 0;
  bool reverse = ctx.attrInt("reverse", 0) != 0;
  if (!x || !axisIn)
    return {};
  if (axisIn->size() != 1) {
    ctx.emitError() << "input 1 (axis) must hold one value";
    return {};
  }
  int64_t rank = x->type().rank();
  auto axis = normalizeAxis(ctx, (*axisIn)[0], rank, x);
  if (!axis)
    return {};
  auto n = ctx.staticDim(x, *axis);
  if (!n)
    return {};
  Tensor tri = Tensor::zeros(x->type().dtype, {*n, *n});
  for (int64_t i = 0; i < *n; ++i)
    for (int64_t j = 0; j < *n; ++j) {
      bool adds = reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j);
      tri.setDouble(i * *n + j, adds ? 1.0 : 0.0);
    }
  Ints perm;
  for (int64_t i = 0; i < rank; ++i)
    perm.push_back(i);
  std::swap(perm[static_cast<size_t>(*axis)], perm.back());
  bool swap = *axis != rank - 1;
  Value *xt = swap ? ctx.create(OpKind::Transpose, {x}, {{"perm", perm}}) : x;
  Value *y = ctx.create(OpKind::MatMul, {xt, ctx.constant(std::move(tri))});
  return {swap ? ctx.create(OpKind::Transpose, {y}, {{"perm", perm}}) : y};
}

/// ScatterND. With indices known at import time, static shapes and no
/// repeated index under a reduction (what exporters write: swin's masks), a
/// constant map says which element of the flattened updates lands on each
/// element of data (-1: none), so the result is
///   where(mask, gather(reshape(updates, [-1]), map), data)
/// (with add / mul applied to data for those reductions): index maps the
/// fusion planner compiles. Otherwise the scatter_nd op (a reference kernel).
Values convertScatterND(NodeContext &ctx) {
  Value *data = ctx.input(0, "data");
  Value *indexValue = ctx.input(1, "indices");
  Value *updates = ctx.input(2, "updates");
  std::string reduction = ctx.attrString("reduction", "none");
  if (!data || !indexValue || !updates)
    return {};
  auto op = [&] {
    return Values{
        ctx.create(OpKind::ScatterND, {data, indexValue, updates}, {{"reduction", reduction}})};
  };
  const Tensor *indices = constantOf(indexValue);
  if (!indices || !data->type().isStatic() || !updates->type().isStatic() ||
      (reduction != "none" && reduction != "add" && reduction != "mul"))
    return op();
  Ints shape = staticSizes(data->type().shape);
  int64_t rank = static_cast<int64_t>(shape.size());
  int64_t k = indices->rank() ? indices->shape().back() : 0;
  if (!isInteger(indices->dtype()) || k < 1 || k > rank) {
    ctx.emitError() << "indices " << indices->str() << " do not index data " << data->type().str();
    return {};
  }
  int64_t count = indices->numel() / k, slice = 1;
  for (int64_t i = k; i < rank; ++i)
    slice *= shape[static_cast<size_t>(i)];
  if (numElements(staticSizes(updates->type().shape)) != count * slice) {
    ctx.emitError() << "updates " << updates->type().str() << " do not match indices "
                    << indices->str() << " into " << data->type().str();
    return {};
  }
  Tensor map = Tensor::zeros(DType::I64, shape);
  Tensor mask = Tensor::zeros(DType::Bool, shape);
  for (int64_t u = 0; u < count; ++u) {
    int64_t offset = 0;
    for (int64_t j = 0; j < k; ++j) {
      int64_t dim = shape[static_cast<size_t>(j)];
      int64_t v = indices->getInt(u * k + j);
      if (v < -dim || v >= dim) {
        ctx.emitError() << "index " << v << " is out of range for dim " << j << " of "
                        << data->type().str();
        return {};
      }
      offset = offset * dim + (v < 0 ? v + dim : v);
    }
    for (int64_t s = 0; s < slice; ++s) {
      int64_t at = offset * slice + s;
      if (mask.getInt(at) && reduction != "none")
        return op(); // repeated indices combine: the kernel does that
      mask.setInt(at, 1);
      map.setInt(at, u * slice + s);
    }
  }
  Value *flat = ctx.create(OpKind::Reshape, {updates}, {{"shape", Ints{-1}}});
  Value *picked = ctx.create(OpKind::Gather, {flat, ctx.constant(std::move(map))});
  if (reduction == "add")
    picked = ctx.create(OpKind::Add, {data, picked});
  else if (reduction == "mul")
    picked = ctx.create(OpKind::Mul, {data, picked});
  return {ctx.create(OpKind::Where, {ctx.constant(std::move(mask)), picked, data})};
}

const Converter kConverters[] = {
    {"CumSum", 11, convertCumSum}, {"EyeLike", 9, convertEyeLike, checkEyeLike},
    {"OneHot", 11, convertOneHot}, {"ScatterND", 11, convertScatterND},
    {"Trilu", 14, convertTrilu},
};

} // namespace

std::span<const Converter> maskConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
