//===- ExportMovement.cpp - Data movement as tensor and linalg ops --------===//
//
//   reshape, flatten, squeeze, unsqueeze   tensor.reshape
//   transpose                              linalg.transpose
//   expand                                 linalg.generic (a broadcast map)
//   concat                                 tensor.insert_slice into a tensor.empty
//   slice, split                           tensor.extract_slice (positive
//                                          steps), linalg.generic (negative)
//   pad (constant)                         tensor.pad
//   gather                                 linalg.generic with tensor.extract
//   shape, constant_of_shape               arith.constant / tensor.from_elements,
//                                          linalg.fill
// The rest (gather_elements, gather_nd, scatters, resize, other pads) are
// calls (Note [MLIR export] in MlirExport.cpp).
//
//===----------------------------------------------------------------------===//

#include "codegen/mlir/Internal.h"

namespace kiln::mlirgen {

using mlir::AffineExpr;
using mlir::AffineMap;
using mlir::OpFoldResult;
using mlir::Value;

namespace {

/// A size as a static attribute when it is one, else an index value.
OpFoldResult foldResult(Exporter &x, const Dim &d, const Location &l) {
  if (d.isStatic())
    return x.b.getIndexAttr(d.size());
  Value v = x.dimValue(d, l);
  return v ? OpFoldResult(v) : OpFoldResult();
}

void define(Exporter &x, const Node &n, Value v, unsigned i = 0) {
  x.define(n.result(i), v);
}

/// A tensor.empty of n's result whose non-static dims are read from the
/// operands with tensor.dim: dim d is `size(d)`.
Value emptyOf(Exporter &x, const Node &n, const std::function<Value(size_t)> &size) {
  const TensorType &t = n.result()->type();
  mlir::RankedTensorType type = x.tensorType(t, n.loc());
  if (!type)
    return {};
  llvm::SmallVector<Value> sizes;
  for (size_t d = 0; d < t.shape.size(); ++d)
    if (!t.shape[d].isStatic())
      sizes.push_back(size(d));
  return x.b.create<mlir::tensor::EmptyOp>(x.loc(n.loc()), type.getShape(), type.getElementType(),
                                           sizes);
}

Value dimOf(Exporter &x, const Node &n, unsigned operand, size_t d) {
  return x.b.create<mlir::tensor::DimOp>(x.loc(n.loc()), x.value(n.operand(operand)),
                                         static_cast<int64_t>(d));
}

LogicalResult transpose(Exporter &x, const Node &n) {
  std::vector<int64_t> perm = TransposeOp(n).perm();
  int64_t rank = n.operand(0)->type().rank();
  if (perm.empty())
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  Value init =
      emptyOf(x, n, [&](size_t d) { return dimOf(x, n, 0, static_cast<size_t>(perm[d])); });
  if (!init)
    return failure();
  define(x, n,
         x.b.create<mlir::linalg::TransposeOp>(x.loc(n.loc()), x.value(n.operand(0)), init, perm)
             .getResult()[0]);
  return success();
}

LogicalResult concat(Exporter &x, const Node &n) {
  const TensorType &rt = n.result()->type();
  int64_t axis = ConcatOp(n).axis();
  if (axis < 0)
    axis += rt.rank();
  size_t ax = static_cast<size_t>(axis);
  mlir::Location at = x.loc(n.loc());
  // Sizes from the operands: the axis' is the sum of theirs.
  auto size = [&](unsigned i, size_t d) -> OpFoldResult {
    const Dim &dim = n.operand(i)->type().shape[d];
    if (dim.isStatic())
      return x.b.getIndexAttr(dim.size());
    return dimOf(x, n, i, d);
  };
  auto value = [&](OpFoldResult f) -> Value {
    if (auto v = f.dyn_cast<Value>())
      return v;
    return x.indexConstant(mlir::cast<mlir::IntegerAttr>(f.get<mlir::Attribute>()).getInt());
  };
  Value acc = emptyOf(x, n, [&](size_t d) {
    if (d != ax)
      return value(size(0, d));
    Value total = x.indexConstant(0);
    for (unsigned i = 0; i < n.numOperands(); ++i)
      total = x.b.create<mlir::arith::AddIOp>(at, total, value(size(i, d)));
    return total;
  });
  if (!acc)
    return failure();
  int64_t staticOffset = 0;
  Value dynamicOffset;
  for (unsigned i = 0; i < n.numOperands(); ++i) {
    const Shape &s = n.operand(i)->type().shape;
    llvm::SmallVector<OpFoldResult> offsets, sizes, strides;
    for (size_t d = 0; d < s.size(); ++d) {
      if (d != ax)
        offsets.push_back(x.b.getIndexAttr(0));
      else if (dynamicOffset)
        offsets.push_back(dynamicOffset);
      else
        offsets.push_back(x.b.getIndexAttr(staticOffset));
      sizes.push_back(size(i, d));
      strides.push_back(x.b.getIndexAttr(1));
    }
    acc = x.b.create<mlir::tensor::InsertSliceOp>(at, x.value(n.operand(i)), acc, offsets, sizes,
                                                  strides);
    if (s[ax].isStatic() && !dynamicOffset) {
      staticOffset += s[ax].size();
    } else {
      Value base = dynamicOffset ? dynamicOffset : x.indexConstant(staticOffset);
      dynamicOffset = x.b.create<mlir::arith::AddIOp>(at, base, value(size(i, ax)));
    }
  }
  define(x, n, acc);
  return success();
}

/// Slice `src` (of `in`) into result `i` of `n` along dims `axes` from the
/// given starts with the given steps; false in `handled` for what it cannot
/// write (a negative step or a start over a symbolic size).
LogicalResult sliceInto(Exporter &x, const Node &n, unsigned i, const TensorType &in,
                        const std::vector<int64_t> &axes, const std::vector<DimExpr> &starts,
                        const std::vector<int64_t> &steps, bool &handled) {
  const TensorType &rt = n.result(i)->type();
  size_t rank = in.shape.size();
  std::vector<Dim> start(rank, Dim(0));
  std::vector<int64_t> step(rank, 1);
  for (size_t k = 0; k < axes.size(); ++k) {
    size_t d = static_cast<size_t>(axes[k] < 0 ? axes[k] + static_cast<int64_t>(rank) : axes[k]);
    int64_t st = k < steps.size() ? steps[k] : 1;
    step[d] = st;
    const DimExpr &s = starts[k];
    const Dim &size = in.shape[d];
    if (s.isConstant()) {
      int64_t v = s.constant();
      if (size.isStatic()) {
        int64_t n0 = size.size();
        if (v < 0)
          v += n0;
        v = st > 0 || n0 == 0 ? std::clamp<int64_t>(v, 0, n0) : std::clamp<int64_t>(v, 0, n0 - 1);
        start[d] = Dim(v);
      } else if (v >= 0 && st > 0) {
        start[d] = Dim(v);
      } else {
        handled = false;
        return success();
      }
    } else if (st > 0) {
      start[d] = Dim::of(s); // a symbolic start the import kept in range
    } else {
      handled = false;
      return success();
    }
  }
  bool negative = false;
  for (int64_t s : step)
    negative = negative || s < 0;
  Value src = x.value(n.operand(0));
  mlir::Location at = x.loc(n.loc());
  if (!negative) {
    llvm::SmallVector<OpFoldResult> offsets, sizes, strides;
    for (size_t d = 0; d < rank; ++d) {
      offsets.push_back(foldResult(x, start[d], n.loc()));
      sizes.push_back(foldResult(x, rt.shape[d], n.loc()));
      strides.push_back(x.b.getIndexAttr(step[d]));
      if (!offsets.back() || !sizes.back())
        return failure();
    }
    mlir::RankedTensorType type = x.tensorType(rt, n.loc());
    if (!type)
      return failure();
    define(x, n, x.b.create<mlir::tensor::ExtractSliceOp>(at, type, src, offsets, sizes, strides),
           i);
    return success();
  }
  // A negative step: a generic reading start + step * i (static starts).
  llvm::SmallVector<AffineExpr> exprs;
  for (size_t d = 0; d < rank; ++d) {
    if (!start[d].isStatic()) {
      handled = false;
      return success();
    }
    exprs.push_back(mlir::getAffineDimExpr(static_cast<unsigned>(d), &x.ctx_) * step[d] +
                    start[d].size());
  }
  AffineMap read = AffineMap::get(static_cast<unsigned>(rank), 0, exprs, &x.ctx_);
  Value r = pointwise(x, n, rt, {src}, {read},
                      [](mlir::OpBuilder &, mlir::Location, mlir::ValueRange a) { return a[0]; });
  if (!r)
    return failure();
  define(x, n, r, i);
  return success();
}

/// An integer index of dtype `t` as an `index` (unsigned ones zero-extended).
Value indexOf(mlir::OpBuilder &b, mlir::Location l, Value v, DType t) {
  if (isSignedInt(t))
    return b.create<mlir::arith::IndexCastOp>(l, b.getIndexType(), v);
  return b.create<mlir::arith::IndexCastUIOp>(l, b.getIndexType(), v);
}

LogicalResult gather(Exporter &x, const Node &n) {
  const TensorType &dt = n.operand(0)->type(), &it = n.operand(1)->type(), &rt = n.result()->type();
  int64_t axis = GatherOp(n).axis();
  if (axis < 0)
    axis += dt.rank();
  int64_t ri = it.rank();
  llvm::SmallVector<AffineExpr> idx;
  for (int64_t d = 0; d < ri; ++d)
    idx.push_back(mlir::getAffineDimExpr(static_cast<unsigned>(axis + d), &x.ctx_));
  AffineMap indexMap = AffineMap::get(static_cast<unsigned>(rt.rank()), 0, idx, &x.ctx_);
  Value data = x.value(n.operand(0));
  Value axisSize = dimOf(x, n, 0, static_cast<size_t>(axis));
  DType itype = it.dtype;
  // Result dims: data's before the axis, the indices', data's after it.
  Value init = emptyOf(x, n, [&](size_t d) {
    int64_t di = static_cast<int64_t>(d);
    if (di < axis)
      return dimOf(x, n, 0, d);
    if (di < axis + ri)
      return dimOf(x, n, 1, static_cast<size_t>(di - axis));
    return dimOf(x, n, 0, static_cast<size_t>(di - ri + 1));
  });
  if (!init)
    return failure();
  llvm::SmallVector<mlir::utils::IteratorType> iters(static_cast<size_t>(rt.rank()),
                                                     mlir::utils::IteratorType::parallel);
  Value r = generic(
      x, x.loc(n.loc()), {x.value(n.operand(1))}, {indexMap, identity(x, rt.rank())}, init, iters,
      [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange a) {
        // A negative index counts from the end. Where the export checks
        // indices, the read is clamped into the axis (the flag below says
        // when it had to be); else it is unchecked, as ONNX leaves it.
        Value i = indexOf(b, l, a[0], itype);
        if (isSignedInt(itype)) {
          Value zero = b.create<mlir::arith::ConstantIndexOp>(l, 0);
          Value neg = b.create<mlir::arith::CmpIOp>(l, mlir::arith::CmpIPredicate::slt, i, zero);
          i = b.create<mlir::arith::SelectOp>(l, neg, b.create<mlir::arith::AddIOp>(l, i, axisSize),
                                              i);
        }
        if (x.options.checkIndices) {
          Value zero = b.create<mlir::arith::ConstantIndexOp>(l, 0);
          Value last = b.create<mlir::arith::SubIOp>(l, axisSize,
                                                     b.create<mlir::arith::ConstantIndexOp>(l, 1));
          i = b.create<mlir::arith::MaxSIOp>(l, zero, b.create<mlir::arith::MinSIOp>(l, i, last));
        }
        llvm::SmallVector<Value> at;
        for (int64_t d = 0; d < dt.rank(); ++d) {
          if (d < axis)
            at.push_back(b.create<mlir::linalg::IndexOp>(l, static_cast<uint64_t>(d)));
          else if (d == axis)
            at.push_back(i);
          else
            at.push_back(b.create<mlir::linalg::IndexOp>(l, static_cast<uint64_t>(d - 1 + ri)));
        }
        return b.create<mlir::tensor::ExtractOp>(l, data, at).getResult();
      });
  if (!r)
    return failure();
  define(x, n, r);
  if (x.options.checkIndices) {
    // One i1: some index outside [-size, size) of the axis.
    Value flag = x.filled(TensorType(DType::Bool, Shape{}), 0, n.loc());
    if (!flag)
      return failure();
    llvm::SmallVector<mlir::utils::IteratorType> all(static_cast<size_t>(ri),
                                                     mlir::utils::IteratorType::reduction);
    AffineMap none = AffineMap::get(static_cast<unsigned>(ri), 0, {}, &x.ctx_);
    flag = generic(x, x.loc(n.loc()), {x.value(n.operand(1))}, {identity(x, ri), none}, flag, all,
                   [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange a) -> Value {
                     Value i = indexOf(b, l, a[0], itype);
                     Value bad = b.create<mlir::arith::CmpIOp>(l, mlir::arith::CmpIPredicate::sge,
                                                               i, axisSize);
                     if (isSignedInt(itype)) {
                       Value lo = b.create<mlir::arith::CmpIOp>(
                           l, mlir::arith::CmpIPredicate::slt, i,
                           b.create<mlir::arith::SubIOp>(
                               l, b.create<mlir::arith::ConstantIndexOp>(l, 0), axisSize));
                       bad = b.create<mlir::arith::OrIOp>(l, bad, lo);
                     }
                     return b.create<mlir::arith::OrIOp>(l, a[1], bad);
                   });
    x.indexChecks.emplace_back(flag, n.loc());
  }
  return success();
}

LogicalResult shapeOf(Exporter &x, const Node &n) {
  const Shape &s = n.operand(0)->type().shape;
  ShapeOfOp op(n);
  int64_t rank = static_cast<int64_t>(s.size());
  auto clampIndex = [&](int64_t v) {
    if (v < 0)
      v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  int64_t lo = clampIndex(op.start()), hi = clampIndex(op.end());
  mlir::Location at = x.loc(n.loc());
  llvm::SmallVector<Value> dims;
  for (int64_t d = lo; d < hi; ++d) {
    const Dim &dim = s[static_cast<size_t>(d)];
    Value v = dim.isDynamic() ? Value(x.b.create<mlir::tensor::DimOp>(at, x.value(n.operand(0)), d))
                              : x.dimValue(dim, n.loc());
    if (!v)
      return failure();
    dims.push_back(x.b.create<mlir::arith::IndexCastOp>(at, x.b.getI64Type(), v));
  }
  mlir::RankedTensorType type = x.tensorType(n.result()->type(), n.loc());
  if (!type)
    return failure();
  if (dims.empty())
    define(x, n,
           x.b.create<mlir::arith::ConstantOp>(
               at, mlir::DenseElementsAttr::get(type, llvm::ArrayRef<int64_t>())));
  else
    define(x, n, x.b.create<mlir::tensor::FromElementsOp>(at, type, dims));
  return success();
}

} // namespace

LogicalResult exportMovement(Exporter &x, const Node &n, bool &handled) {
  handled = true;
  const TensorType &rt = n.result()->type();
  switch (n.kind()) {
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze: {
    Value r = reshapeTo(x, x.value(n.operand(0)), rt, n.loc());
    if (!r)
      return failure();
    define(x, n, r);
    return success();
  }
  case OpKind::Transpose:
    return transpose(x, n);
  case OpKind::Expand: {
    const TensorType &in = n.operand(0)->type();
    Value r =
        pointwise(x, n, rt, {x.value(n.operand(0))}, {broadcastMap(&x.ctx_, in.shape, rt.shape)},
                  [](mlir::OpBuilder &, mlir::Location, mlir::ValueRange a) { return a[0]; });
    if (!r)
      return failure();
    define(x, n, r);
    return success();
  }
  case OpKind::Concat:
    return concat(x, n);
  case OpKind::Slice: {
    SliceOp s(n);
    std::vector<int64_t> axes = s.axes();
    if (axes.empty())
      for (size_t k = 0; k < s.starts().size(); ++k)
        axes.push_back(static_cast<int64_t>(k));
    return sliceInto(x, n, 0, n.operand(0)->type(), axes, s.starts(), s.steps(), handled);
  }
  case OpKind::Split: {
    const TensorType &in = n.operand(0)->type();
    int64_t axis = SplitOp(n).axis();
    if (axis < 0)
      axis += in.rank();
    DimExpr offset(0);
    for (unsigned i = 0; i < n.numResults(); ++i) {
      if (failed(sliceInto(x, n, i, in, {axis}, {offset}, {1}, handled)))
        return failure();
      if (!handled)
        return success();
      std::optional<DimExpr> size = n.result(i)->type().shape[static_cast<size_t>(axis)].expr();
      std::optional<DimExpr> next = size ? add(offset, *size) : std::nullopt;
      if (!next) {
        handled = false;
        return success();
      }
      offset = *next;
    }
    return success();
  }
  case OpKind::Pad: {
    PadOp p(n);
    const TensorType &in = n.operand(0)->type();
    std::vector<int64_t> pads = p.pads();
    size_t r = in.shape.size();
    bool negative = false;
    for (int64_t v : pads)
      negative = negative || v < 0;
    if (p.mode() != "constant" || negative || pads.size() != 2 * r) {
      handled = false;
      return success();
    }
    // Through the conv's padder: every dim is trailing.
    std::vector<int64_t> low(pads.begin(), pads.begin() + static_cast<long>(r)),
        high(pads.begin() + static_cast<long>(r), pads.end());
    Value src = x.value(n.operand(0));
    mlir::Location at = x.loc(n.loc());
    llvm::SmallVector<int64_t> shape;
    for (size_t d = 0; d < r; ++d)
      shape.push_back(in.shape[d].isStatic() ? in.shape[d].size() + low[d] + high[d]
                                             : mlir::ShapedType::kDynamic);
    auto type = mlir::RankedTensorType::get(shape, x.elementType(in.dtype, n.loc()));
    Value v = padTensor(x, at, type, src, low, high, x.scalarConstant(in.dtype, p.value()));
    mlir::RankedTensorType want = x.tensorType(rt, n.loc());
    if (!want)
      return failure();
    if (v.getType() != want)
      v = x.b.create<mlir::tensor::CastOp>(at, want, v);
    define(x, n, v);
    return success();
  }
  case OpKind::Gather:
    return gather(x, n);
  case OpKind::ShapeOf:
    return shapeOf(x, n);
  case OpKind::ConstantOfShape: {
    ConstantOfShapeOp c(n);
    Value r = x.filled(rt, c.value(), n.loc());
    if (!r)
      return failure();
    define(x, n, r);
    return success();
  }
  default:
    handled = false;
    return success();
  }
}

} // namespace kiln::mlirgen
