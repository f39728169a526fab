//===- ExportOps.cpp - Compute ops as linalg ------------------------------===//
//
// Elementwise ops (one linalg.generic each, the body from the op's scalar
// semantics), reductions and normalizations (linalg.generic with reduction
// iterators), matrix products, convolutions and pools (linalg's named ops
// where one fits, else a linalg.generic contraction). Note [MLIR export] in
// MlirExport.cpp.
//
// Accumulation, as the reference kernels (ir/ops) compute: reductions'
// sums and products and the normalizations in f64 (integers in i64), then
// rounded once; matmul, gemm and conv in f32 for halves (the named ops'
// output type), else in their result type.
//
//===----------------------------------------------------------------------===//

#include "codegen/mlir/Internal.h"

#include <numeric>

namespace kiln::mlirgen {

using mlir::AffineExpr;
using mlir::AffineMap;
using mlir::Value;
using IterKind = mlir::utils::IteratorType;

AffineMap broadcastMap(mlir::MLIRContext *ctx, const Shape &operand, const Shape &result) {
  size_t rank = result.size(), r = operand.size();
  llvm::SmallVector<AffineExpr> exprs;
  for (size_t i = 0; i < r; ++i) {
    size_t d = rank - r + i;
    bool broadcast = operand[i].isStatic() && operand[i].size() == 1 &&
                     !(result[d].isStatic() && result[d].size() == 1);
    exprs.push_back(broadcast ? mlir::getAffineConstantExpr(0, ctx)
                              : mlir::getAffineDimExpr(static_cast<unsigned>(d), ctx));
  }
  return AffineMap::get(static_cast<unsigned>(rank), 0, exprs, ctx);
}

/// tensor.empty of n's result `i`, a `?` dim read from an operand of the
/// same (aligned) position that has it.
Value resultInit(Exporter &x, const Node &n, unsigned i) {
  const TensorType &t = n.result(i)->type();
  mlir::RankedTensorType type = x.tensorType(t, n.loc());
  if (!type)
    return {};
  llvm::SmallVector<Value> sizes;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    const Dim &dim = t.shape[d];
    if (dim.isStatic())
      continue;
    Value v;
    if (dim.isDynamic()) {
      for (const kiln::Value *o : n.operands()) {
        const Shape &s = o->type().shape;
        size_t off = t.shape.size() - s.size();
        if (s.size() <= t.shape.size() && d >= off && s[d - off].isDynamic()) {
          v = x.b.create<mlir::tensor::DimOp>(x.loc(n.loc()), x.value(o),
                                              static_cast<int64_t>(d - off));
          break;
        }
      }
    }
    if (!v)
      v = x.dimValue(dim, n.loc());
    if (!v)
      return {};
    sizes.push_back(v);
  }
  return x.b.create<mlir::tensor::EmptyOp>(x.loc(n.loc()), type.getShape(), type.getElementType(),
                                           sizes);
}

/// One linalg.generic over `loops` dims with one result; `body` gets the
/// block arguments (inputs, then the output) and returns what it yields.
Value generic(Exporter &x, mlir::Location at, llvm::ArrayRef<Value> inputs,
              llvm::ArrayRef<AffineMap> maps, Value init, llvm::ArrayRef<IterKind> iterators,
              const BodyFn &body) {
  auto op = x.b.create<mlir::linalg::GenericOp>(
      at, init.getType(), inputs, init, maps, iterators,
      [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange args) {
        b.create<mlir::linalg::YieldOp>(l, body(b, l, args));
      });
  return op.getResult(0);
}

AffineMap identity(Exporter &x, int64_t rank) {
  return AffineMap::getMultiDimIdentityMap(static_cast<unsigned>(rank), &x.ctx_);
}

/// The map of `rank` loops to the dims not in `axes` (a reduced operand).
static AffineMap dropping(Exporter &x, int64_t rank, const std::vector<bool> &reduced) {
  llvm::SmallVector<AffineExpr> exprs;
  for (int64_t d = 0; d < rank; ++d)
    if (!reduced[static_cast<size_t>(d)])
      exprs.push_back(mlir::getAffineDimExpr(static_cast<unsigned>(d), &x.ctx_));
  return AffineMap::get(static_cast<unsigned>(rank), 0, exprs, &x.ctx_);
}

/// The scalar op `op` on two values of dtype `t` in register form.
Value binaryScalar(mlir::OpBuilder &b, mlir::Location l, ScalarOp op, DType t, Value lhs, Value rhs,
                   DiagnosticEngine &diag, const Location &kl) {
  ScalarDag dag;
  ScalarRef z = dag.constInt(DType::I64, 0);
  ScalarRef r = dag.binary(op, dag.load(t, 0, z), dag.load(t, 1, z));
  auto v = emitScalarDag(
      b, l, dag, r, [&](const ScalarNode &s) { return s.slot == 0 ? lhs : rhs; }, kl, diag);
  return failed(v) ? Value() : *v;
}

/// `v` reshaped to `t` (tensor.reshape by a shape tensor of its sizes).
Value reshapeTo(Exporter &x, Value v, const TensorType &t, const Location &l) {
  mlir::RankedTensorType type = x.tensorType(t, l);
  if (!type)
    return {};
  if (v.getType() == type)
    return v;
  mlir::Location at = x.loc(l);
  auto src = mlir::cast<mlir::RankedTensorType>(v.getType());
  if (src.hasStaticShape() && type.hasStaticShape()) {
    // Static: collapse to one dim, then expand (the forms bufferization
    // and other tools take; tensor.reshape is for dynamic shapes).
    auto all = [](int64_t rank) {
      llvm::SmallVector<mlir::ReassociationIndices> r;
      if (rank > 0) {
        r.emplace_back();
        for (int64_t d = 0; d < rank; ++d)
          r.back().push_back(d);
      }
      return r;
    };
    // Rank 0 to or from ones: the empty reassociation.
    if (src.getRank() == 0)
      return x.b.create<mlir::tensor::ExpandShapeOp>(at, type, v, all(0));
    if (type.getRank() == 0)
      return x.b.create<mlir::tensor::CollapseShapeOp>(at, type, v, all(0));
    auto flat = mlir::RankedTensorType::get({src.getNumElements()}, src.getElementType());
    Value f = v;
    if (src.getRank() != 1)
      f = x.b.create<mlir::tensor::CollapseShapeOp>(at, flat, v, all(src.getRank()));
    if (type.getRank() == 1)
      return f;
    return x.b.create<mlir::tensor::ExpandShapeOp>(at, type, f, all(type.getRank()));
  }
  llvm::SmallVector<Value> sizes;
  int unknown = -1; // one `?` is what the others leave of v's elements
  for (size_t d = 0; d < t.shape.size(); ++d) {
    Value s;
    if (t.shape[d].isDynamic() && unknown < 0) {
      unknown = static_cast<int>(d);
      s = x.indexConstant(1);
    } else {
      s = x.dimValue(t.shape[d], l);
    }
    if (!s)
      return {};
    sizes.push_back(s);
  }
  if (unknown >= 0) {
    auto src = mlir::cast<mlir::RankedTensorType>(v.getType());
    Value total = x.indexConstant(1), others = x.indexConstant(1);
    for (int64_t d = 0; d < src.getRank(); ++d)
      total = x.b.create<mlir::arith::MulIOp>(at, total, x.b.create<mlir::tensor::DimOp>(at, v, d));
    for (Value s : sizes)
      others = x.b.create<mlir::arith::MulIOp>(at, others, s);
    // A zero among the others leaves the `?` free: 0 elements either way.
    others = x.b.create<mlir::arith::MaxUIOp>(at, others, x.indexConstant(1));
    sizes[static_cast<size_t>(unknown)] =
        x.b.create<mlir::arith::DivUIOp>(at, total, others); // `others` holds 1 for the `?`
  }
  for (Value &s : sizes)
    s = x.b.create<mlir::arith::IndexCastOp>(at, x.b.getI64Type(), s);
  Value shape;
  if (sizes.empty())
    shape = x.b.create<mlir::arith::ConstantOp>(
        at, mlir::DenseElementsAttr::get(mlir::RankedTensorType::get({0}, x.b.getI64Type()),
                                         llvm::ArrayRef<int64_t>()));
  else
    shape = x.b.create<mlir::tensor::FromElementsOp>(at, sizes);
  return x.b.create<mlir::tensor::ReshapeOp>(at, type, v, shape);
}

Value padTensor(Exporter &x, mlir::Location at, mlir::RankedTensorType type, Value v,
                llvm::ArrayRef<int64_t> low, llvm::ArrayRef<int64_t> high, Value value) {
  llvm::SmallVector<mlir::OpFoldResult> lo, hi;
  for (int64_t l : low)
    lo.push_back(x.b.getIndexAttr(l));
  for (int64_t h : high)
    hi.push_back(x.b.getIndexAttr(h));
  return x.b.create<mlir::tensor::PadOp>(at, type, v, lo, hi, value).getResult();
}

/// The dtype of accumulation for a sum or product of `t`.
DType accumulatorOf(DType t) {
  return computeDType(t);
}

/// `x` reduced over the dims marked in `reduced` with `op` from `start`,
/// as a tensor of the kept dims in `acc` (the accumulator dtype); `dtype`
/// is x's. `pre` maps each element (register form) before it is combined.
Value reduce(Exporter &x, const Node &n, Value input, const TensorType &inType,
             const std::vector<bool> &reduced, ScalarOp op, double start, DType acc,
             const std::function<Value(mlir::OpBuilder &, mlir::Location, Value)> &pre) {
  Shape kept;
  llvm::SmallVector<IterKind> iters;
  for (size_t d = 0; d < inType.shape.size(); ++d) {
    iters.push_back(reduced[d] ? IterKind::reduction : IterKind::parallel);
    if (!reduced[d])
      kept.push_back(inType.shape[d]);
  }
  Value init = x.filled(TensorType(acc, kept), start, n.loc());
  if (!init)
    return {};
  DType in = inType.dtype;
  bool ok = true;
  Value r = generic(
      x, x.loc(n.loc()), {input}, {identity(x, inType.rank()), dropping(x, inType.rank(), reduced)},
      init, iters, [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange a) {
        Value e = toRegister(b, l, a[0], in);
        if (in != acc)
          e = castScalar(b, l, e, in, acc);
        if (pre)
          e = pre(b, l, e);
        Value v = binaryScalar(b, l, op, acc, toRegister(b, l, a[1], acc), e, x.diag, n.loc());
        ok = ok && v;
        return v ? fromRegister(b, l, v, acc) : a[1];
      });
  return ok ? r : Value();
}

/// A pointwise map of `inputs` (read through `maps`) into a tensor of `t`.
Value pointwise(Exporter &x, const Node &n, const TensorType &t, llvm::ArrayRef<Value> inputs,
                llvm::ArrayRef<AffineMap> maps, const BodyFn &body) {
  Value init = x.empty(t, n.loc());
  if (!init)
    return {};
  llvm::SmallVector<AffineMap> all(maps.begin(), maps.end());
  all.push_back(identity(x, t.rank()));
  llvm::SmallVector<IterKind> iters(static_cast<size_t>(t.rank()), IterKind::parallel);
  return generic(x, x.loc(n.loc()), inputs, all, init, iters, body);
}

/// An index value as a float of `t` (a count to divide by).
Value countAsFloat(mlir::OpBuilder &b, mlir::Location l, Value count, DType t) {
  Value i = b.create<mlir::arith::IndexCastOp>(l, b.getI64Type(), count);
  return castScalar(b, l, i, DType::I64, t);
}

Value product(Exporter &x, const Shape &s, const std::vector<bool> &which, const Location &l) {
  Value p = x.indexConstant(1);
  for (size_t d = 0; d < s.size(); ++d)
    if (which[d]) {
      Value v = x.dimValue(s[d], l);
      if (!v)
        return {};
      p = x.b.create<mlir::arith::MulIOp>(x.loc(l), p, v);
    }
  return p;
}

LogicalResult exportElementwise(Exporter &x, const Node &n) {
  const TensorType &rt = n.result()->type();
  Value init = resultInit(x, n);
  if (!init)
    return failure();
  ScalarDag dag;
  std::vector<ScalarRef> ops;
  llvm::SmallVector<Value> inputs;
  llvm::SmallVector<AffineMap> maps;
  for (unsigned i = 0; i < n.numOperands(); ++i) {
    const TensorType &ot = n.operand(i)->type();
    ops.push_back(dag.load(ot.dtype, static_cast<int32_t>(i), dag.constInt(DType::I64, 0)));
    inputs.push_back(x.value(n.operand(i)));
    maps.push_back(broadcastMap(&x.ctx_, ot.shape, rt.shape));
  }
  maps.push_back(identity(x, rt.rank()));
  auto root = lowerElementwise(n.info(), n.attrs(), ops, rt.dtype, dag, n.loc(), x.diag);
  if (failed(root))
    return failure();
  bool ok = true;
  llvm::SmallVector<IterKind> iters(static_cast<size_t>(rt.rank()), IterKind::parallel);
  Value r =
      generic(x, x.loc(n.loc()), inputs, maps, init, iters,
              [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange a) {
                auto v = emitScalarDag(
                    b, l, dag, *root,
                    [&](const ScalarNode &s) {
                      return toRegister(b, l, a[static_cast<size_t>(s.slot)],
                                        n.operand(static_cast<unsigned>(s.slot))->type().dtype);
                    },
                    n.loc(), x.diag);
                if (failed(v)) {
                  ok = false;
                  return a.back();
                }
                return fromRegister(b, l, *v, rt.dtype);
              });
  if (!ok)
    return failure();
  x.define(n.result(), r);
  return success();
}

LogicalResult exportReduction(Exporter &x, const Node &n) {
  const TensorType &in = n.operand(0)->type();
  const TensorType &out = n.result()->type();
  std::vector<int64_t> axes = std::get<std::vector<int64_t>>(n.attr(0));
  std::vector<bool> reduced(in.shape.size(), axes.empty());
  for (int64_t a : axes)
    reduced[static_cast<size_t>(a < 0 ? a + in.rank() : a)] = true;
  DType t = in.dtype;
  ScalarOp op = ScalarOp::Add;
  double start = 0;
  switch (n.kind()) {
  case OpKind::ReduceMax:
    op = ScalarOp::Max;
    start = isFloat(t) ? -INFINITY : static_cast<double>(isSignedInt(t) ? intLowest(t) : 0);
    break;
  case OpKind::ReduceMin:
    op = ScalarOp::Min;
    start = isFloat(t) ? INFINITY : static_cast<double>(intHighest(t));
    break;
  case OpKind::ReduceProd:
    op = ScalarOp::Mul;
    start = 1;
    break;
  default:
    break;
  }
  // Sums and products as the reference kernels: floats in f64, integers in
  // i64 (a mean divides there, truncating, then wraps to the dtype).
  DType acc = op == ScalarOp::Max || op == ScalarOp::Min ? t : isFloat(t) ? DType::F64 : DType::I64;
  Value r = reduce(x, n, x.value(n.operand(0)), in, reduced, op, start, acc);
  if (!r)
    return failure();
  Shape kept;
  for (size_t d = 0; d < in.shape.size(); ++d)
    if (!reduced[d])
      kept.push_back(in.shape[d]);
  if (n.kind() == OpKind::ReduceMean || acc != t) {
    Value count = n.kind() == OpKind::ReduceMean ? product(x, in.shape, reduced, n.loc()) : Value();
    if (n.kind() == OpKind::ReduceMean && !count)
      return failure();
    r = pointwise(x, n, TensorType(t, kept), {r}, {identity(x, static_cast<int64_t>(kept.size()))},
                  [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange a) {
                    Value v = toRegister(b, l, a[0], acc);
                    if (count)
                      v = binaryScalar(b, l, ScalarOp::Div, acc, v, countAsFloat(b, l, count, acc),
                                       x.diag, n.loc());
                    return fromRegister(b, l, castScalar(b, l, v, acc, t), t);
                  });
    if (!r)
      return failure();
  }
  r = reshapeTo(x, r, out, n.loc());
  if (!r)
    return failure();
  x.define(n.result(), r);
  return success();
}

LogicalResult exportNormalization(Exporter &x, const Node &n) {
  const TensorType &in = n.operand(0)->type();
  DType t = in.dtype;
  int64_t rank = in.rank();
  Value xv = x.value(n.operand(0));
  mlir::Location at = x.loc(n.loc());
  const DType acc = DType::F64; // as the reference kernels compute
  if (!isFloat(t))
    return x.call(n);
  auto reg = [&](mlir::OpBuilder &b, mlir::Location l, Value v) { return toRegister(b, l, v, t); };
  auto bin = [&](mlir::OpBuilder &b, mlir::Location l, ScalarOp op, Value p, Value q) {
    return binaryScalar(b, l, op, acc, p, q, x.diag, n.loc());
  };
  auto un = [&](mlir::OpBuilder &b, mlir::Location l, ScalarOp op, Value p) {
    ScalarDag dag;
    ScalarRef r = dag.unary(op, dag.load(acc, 0, dag.constInt(DType::I64, 0)));
    auto v = emitScalarDag(
        b, l, dag, r, [&](const ScalarNode &) { return p; }, n.loc(), x.diag);
    return failed(v) ? p : *v; // the hooks of these unary ops do not fail
  };
  auto cst = [&](mlir::OpBuilder &b, mlir::Location l, double v) -> Value {
    return b.create<mlir::arith::ConstantOp>(l, b.getFloatAttr(registerType(&x.ctx_, acc), v));
  };
  Value r;
  if (n.kind() == OpKind::BatchNorm) {
    // (x - mean[c]) * scale[c] / sqrt(var[c] + eps) + bias[c], c = dim 1.
    double eps = BatchNormOp(n).epsilon();
    AffineMap channel = AffineMap::get(static_cast<unsigned>(rank), 0,
                                       {mlir::getAffineDimExpr(1, &x.ctx_)}, &x.ctx_);
    llvm::SmallVector<Value> ins = {xv};
    for (unsigned i = 1; i < 5; ++i)
      ins.push_back(x.value(n.operand(i)));
    r = pointwise(x, n, in, ins, {identity(x, rank), channel, channel, channel, channel},
                  [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange a) {
                    Value v = bin(b, l, ScalarOp::Sub, reg(b, l, a[0]), reg(b, l, a[3]));
                    v = bin(b, l, ScalarOp::Mul, v, reg(b, l, a[1]));
                    Value s = un(b, l, ScalarOp::Sqrt,
                                 bin(b, l, ScalarOp::Add, reg(b, l, a[4]), cst(b, l, eps)));
                    v = bin(b, l, ScalarOp::Add, bin(b, l, ScalarOp::Div, v, s), reg(b, l, a[2]));
                    return fromRegister(b, l, v, t);
                  });
  } else {
    int64_t axis = n.kind() == OpKind::LayerNorm ? LayerNormOp(n).axis()
                   : n.kind() == OpKind::Softmax ? SoftmaxOp(n).axis()
                                                 : LogSoftmaxOp(n).axis();
    if (axis < 0)
      axis += rank;
    std::vector<bool> reduced(static_cast<size_t>(rank), false);
    for (int64_t d = axis; d < rank; ++d)
      if (n.kind() == OpKind::LayerNorm || d == axis)
        reduced[static_cast<size_t>(d)] = true;
    AffineMap full = identity(x, rank), kept = dropping(x, rank, reduced);
    if (n.kind() == OpKind::LayerNorm) {
      // mean, then the mean of squared deviations, then the affine map.
      double eps = LayerNormOp(n).epsilon();
      Value count = product(x, in.shape, reduced, n.loc());
      if (!count)
        return failure();
      Value sum = reduce(x, n, xv, in, reduced, ScalarOp::Add, 0, acc);
      if (!sum)
        return failure();
      Value cnt = countAsFloat(x.b, at, count, acc);
      // The squared deviations need the mean at each point: one more pass.
      Shape keptShape;
      for (size_t d = 0; d < in.shape.size(); ++d)
        if (!reduced[d])
          keptShape.push_back(in.shape[d]);
      Value var0 = x.filled(TensorType(acc, keptShape), 0, n.loc());
      if (!var0)
        return failure();
      llvm::SmallVector<IterKind> iters;
      for (bool red : reduced)
        iters.push_back(red ? IterKind::reduction : IterKind::parallel);
      Value var =
          generic(x, at, {xv, sum}, {full, kept, kept}, var0, iters,
                  [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange a) {
                    Value mean = bin(b, l, ScalarOp::Div, a[1], cnt);
                    Value e = castScalar(b, l, reg(b, l, a[0]), t, acc);
                    Value dev = bin(b, l, ScalarOp::Sub, e, mean);
                    return bin(b, l, ScalarOp::Add, a[2], bin(b, l, ScalarOp::Mul, dev, dev));
                  });
      // scale (and bias) broadcast against the input's trailing dims.
      llvm::SmallVector<Value> ins = {xv, sum, var, x.value(n.operand(1))};
      llvm::SmallVector<AffineMap> maps = {
          full, kept, kept, broadcastMap(&x.ctx_, n.operand(1)->type().shape, in.shape)};
      if (n.numOperands() > 2) {
        ins.push_back(x.value(n.operand(2)));
        maps.push_back(broadcastMap(&x.ctx_, n.operand(2)->type().shape, in.shape));
      }
      r = pointwise(
          x, n, in, ins, maps, [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange a) {
            Value mean = bin(b, l, ScalarOp::Div, a[1], cnt);
            Value v = bin(b, l, ScalarOp::Div, a[2], cnt);
            Value inv = un(b, l, ScalarOp::Rsqrt, bin(b, l, ScalarOp::Add, v, cst(b, l, eps)));
            Value e = castScalar(b, l, reg(b, l, a[0]), t, acc);
            Value y = bin(b, l, ScalarOp::Mul, bin(b, l, ScalarOp::Sub, e, mean), inv);
            y = bin(b, l, ScalarOp::Mul, y, castScalar(b, l, reg(b, l, a[3]), t, acc));
            if (a.size() > 5)
              y = bin(b, l, ScalarOp::Add, y, castScalar(b, l, reg(b, l, a[4]), t, acc));
            return fromRegister(b, l, castScalar(b, l, y, acc, t), t);
          });
    } else {
      // softmax: exp(x - max) / sum; log_softmax: x - max - log(sum).
      bool log = n.kind() == OpKind::LogSoftmax;
      Value max = reduce(x, n, xv, in, reduced, ScalarOp::Max, -INFINITY, acc);
      if (!max)
        return failure();
      Shape keptShape;
      for (size_t d = 0; d < in.shape.size(); ++d)
        if (!reduced[d])
          keptShape.push_back(in.shape[d]);
      Value sum0 = x.filled(TensorType(acc, keptShape), 0, n.loc());
      if (!sum0)
        return failure();
      llvm::SmallVector<IterKind> iters;
      for (bool red : reduced)
        iters.push_back(red ? IterKind::reduction : IterKind::parallel);
      Value sum = generic(x, at, {xv, max}, {full, kept, kept}, sum0, iters,
                          [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange a) {
                            Value e = castScalar(b, l, reg(b, l, a[0]), t, acc);
                            Value ex = un(b, l, ScalarOp::Exp, bin(b, l, ScalarOp::Sub, e, a[1]));
                            return bin(b, l, ScalarOp::Add, a[2], ex);
                          });
      r = pointwise(x, n, in, {xv, max, sum}, {full, kept, kept},
                    [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange a) {
                      Value e = castScalar(b, l, reg(b, l, a[0]), t, acc);
                      Value d = bin(b, l, ScalarOp::Sub, e, a[1]);
                      Value y = log ? bin(b, l, ScalarOp::Sub, d, un(b, l, ScalarOp::Log, a[2]))
                                    : bin(b, l, ScalarOp::Div, un(b, l, ScalarOp::Exp, d), a[2]);
                      return fromRegister(b, l, castScalar(b, l, y, acc, t), t);
                    });
    }
  }
  if (!r)
    return failure();
  x.define(n.result(), r);
  return success();
}

namespace {

/// C = sum_k A * B over a generic's loops; `maps` are A's, B's and the
/// result's. Integer products wrap, floats multiply and add in the result
/// type (as linalg.matmul).
Value contraction(Exporter &x, const Node &n, Value a, Value bv, llvm::ArrayRef<AffineMap> maps,
                  llvm::ArrayRef<IterKind> iters, Value init) {
  DType t = n.result()->type().dtype;
  return generic(
      x, x.loc(n.loc()), {a, bv}, maps, init, iters,
      [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange v) -> Value {
        // Halves multiply and add in f32 (the accumulator, `init`'s type).
        Value p = toRegister(b, l, v[0], t), q = toRegister(b, l, v[1], t);
        if (isFloat(t))
          return b.create<mlir::arith::AddFOp>(l, v[2], b.create<mlir::arith::MulFOp>(l, p, q));
        return b.create<mlir::arith::AddIOp>(l, v[2], b.create<mlir::arith::MulIOp>(l, p, q));
      });
}

AffineExpr dimExpr(Exporter &x, int64_t d) {
  return mlir::getAffineDimExpr(static_cast<unsigned>(d), &x.ctx_);
}

} // namespace

Value narrowed(Exporter &x, const Node &n, Value v, DType acc) {
  const TensorType &rt = n.result()->type();
  if (!v || acc == rt.dtype)
    return v;
  return pointwise(x, n, rt, {v}, {identity(x, rt.rank())},
                   [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange a) {
                     return fromRegister(b, l, castScalar(b, l, a[0], acc, rt.dtype), rt.dtype);
                   });
}

LogicalResult exportMatMul(Exporter &x, const Node &n) {
  const TensorType &at = n.operand(0)->type(), &bt = n.operand(1)->type(), &rt = n.result()->type();
  Value a = x.value(n.operand(0)), bv = x.value(n.operand(1));
  const DType acc = accumulatorOf(rt.dtype);
  Value init = x.filled(TensorType(acc, rt.shape), 0, n.loc());
  if (!init)
    return failure();
  mlir::Location l = x.loc(n.loc());
  mlir::Value r;
  if (at.rank() == 2 && bt.rank() == 2) {
    r = x.b.create<mlir::linalg::MatmulOp>(l, init.getType(), mlir::ValueRange{a, bv}, init)
            .getResult(0);
  } else if (at.rank() == 3 && bt.rank() == 3 && at.shape[0] == bt.shape[0]) {
    r = x.b.create<mlir::linalg::BatchMatmulOp>(l, init.getType(), mlir::ValueRange{a, bv}, init)
            .getResult(0);
  } else {
    // numpy matmul: batch dims broadcast, a 1-D operand has no m (or n).
    int64_t R = rt.rank();
    bool hasM = at.rank() > 1, hasN = bt.rank() > 1;
    int64_t nb = R - (hasM ? 1 : 0) - (hasN ? 1 : 0);
    int64_t m = nb, nDim = nb + (hasM ? 1 : 0), k = R;
    auto operandMap = [&](const TensorType &t, bool isA) {
      llvm::SmallVector<AffineExpr> e;
      if (t.rank() == 1) {
        e.push_back(dimExpr(x, k));
      } else {
        int64_t batch = t.rank() - 2;
        for (int64_t j = 0; j < batch; ++j) {
          int64_t d = nb - batch + j;
          const Dim &od = t.shape[static_cast<size_t>(j)], &res = rt.shape[static_cast<size_t>(d)];
          bool bc = od.isStatic() && od.size() == 1 && !(res.isStatic() && res.size() == 1);
          e.push_back(bc ? mlir::getAffineConstantExpr(0, &x.ctx_) : dimExpr(x, d));
        }
        if (isA) {
          e.push_back(dimExpr(x, m));
          e.push_back(dimExpr(x, k));
        } else {
          e.push_back(dimExpr(x, k));
          e.push_back(dimExpr(x, nDim));
        }
      }
      return AffineMap::get(static_cast<unsigned>(R + 1), 0, e, &x.ctx_);
    };
    llvm::SmallVector<IterKind> iters(static_cast<size_t>(R), IterKind::parallel);
    iters.push_back(IterKind::reduction);
    AffineMap outMap = AffineMap::getMultiDimIdentityMap(static_cast<unsigned>(R), &x.ctx_);
    outMap = AffineMap::get(static_cast<unsigned>(R + 1), 0, outMap.getResults(), &x.ctx_);
    r = contraction(x, n, a, bv, {operandMap(at, true), operandMap(bt, false), outMap}, iters,
                    init);
  }
  r = narrowed(x, n, r, acc);
  if (!r)
    return failure();
  x.define(n.result(), r);
  return success();
}

LogicalResult exportGemm(Exporter &x, const Node &n) {
  GemmOp g(n);
  const TensorType &rt = n.result()->type();
  const DType acc = accumulatorOf(rt.dtype);
  const TensorType accType(acc, rt.shape);
  Value init = x.filled(accType, 0, n.loc());
  if (!init)
    return failure();
  Value a = x.value(n.operand(0)), bv = x.value(n.operand(1));
  mlir::Location l = x.loc(n.loc());
  Value p;
  if (!g.trans_a() && !g.trans_b()) {
    p = x.b.create<mlir::linalg::MatmulOp>(l, init.getType(), mlir::ValueRange{a, bv}, init)
            .getResult(0);
  } else {
    // loops (m, n, k)
    AffineExpr m = dimExpr(x, 0), nn = dimExpr(x, 1), k = dimExpr(x, 2);
    AffineMap am = AffineMap::get(
        3, 0, g.trans_a() ? llvm::ArrayRef<AffineExpr>{k, m} : llvm::ArrayRef<AffineExpr>{m, k},
        &x.ctx_);
    AffineMap bm = AffineMap::get(
        3, 0, g.trans_b() ? llvm::ArrayRef<AffineExpr>{nn, k} : llvm::ArrayRef<AffineExpr>{k, nn},
        &x.ctx_);
    AffineMap cm = AffineMap::get(3, 0, {m, nn}, &x.ctx_);
    p = contraction(x, n, a, bv, {am, bm, cm},
                    {IterKind::parallel, IterKind::parallel, IterKind::reduction}, init);
  }
  bool hasC = n.numOperands() > 2;
  if (g.alpha() != 1.0 || hasC) {
    DType t = acc; // alpha and beta apply in the accumulator's precision
    llvm::SmallVector<Value> ins = {p};
    llvm::SmallVector<AffineMap> maps = {identity(x, 2)};
    if (hasC) {
      ins.push_back(x.value(n.operand(2)));
      maps.push_back(broadcastMap(&x.ctx_, n.operand(2)->type().shape, rt.shape));
    }
    double alpha = g.alpha(), beta = g.beta();
    p = pointwise(x, n, accType, ins, maps,
                  [&](mlir::OpBuilder &b, mlir::Location bl, mlir::ValueRange v) {
                    auto k = [&](double c) {
                      Value d = b.create<mlir::arith::ConstantOp>(bl, b.getF64FloatAttr(c));
                      return castScalar(b, bl, d, DType::F64, t);
                    };
                    Value y = toRegister(b, bl, v[0], t);
                    if (alpha != 1.0)
                      y = binaryScalar(b, bl, ScalarOp::Mul, t, k(alpha), y, x.diag, n.loc());
                    if (hasC) {
                      DType ct = n.operand(2)->type().dtype;
                      Value c = castScalar(b, bl, toRegister(b, bl, v[1], ct), ct, t);
                      if (beta != 1.0)
                        c = binaryScalar(b, bl, ScalarOp::Mul, t, k(beta), c, x.diag, n.loc());
                      y = binaryScalar(b, bl, ScalarOp::Add, t, y, c, x.diag, n.loc());
                    }
                    return fromRegister(b, bl, y, t);
                  });
    if (!p)
      return failure();
  }
  p = narrowed(x, n, p, acc);
  if (!p)
    return failure();
  x.define(n.result(), p);
  return success();
}

} // namespace kiln::mlirgen
