//===- ExportConv.cpp - Convolutions and pools as linalg ------------------===//
//
// conv: a tensor.pad of the input, then linalg.conv_1d_ncw_fcw /
// conv_2d_nchw_fchw (group 1), linalg.depthwise_conv_2d_nchw_chw (one
// filter per channel) or linalg.conv_2d_ngchw_fgchw (other groups, the
// operands reshaped to and from their grouped forms), and the bias as a
// linalg.generic add; 3-D convolutions are calls.
// max_pool (2-D): a linalg.generic over the padded input with Kiln's max
// (NaN wins; MLIR 16's pooling_nchw_max lowers to maxnum, which drops it).
// avg_pool (2-D): linalg.pooling_nchw_sum over the padded input, ceil_mode's
// extra row and column as more padding, divided by the count of the
// window's points its padding rule counts (the same pooling over a padded
// tensor of ones). global_avg_pool: a reduction. Other ranks and forms are
// calls (Note [MLIR export]).
//
//===----------------------------------------------------------------------===//

#include "codegen/mlir/Internal.h"

#include <cmath>

namespace kiln::mlirgen {

using mlir::AffineMap;
using mlir::Value;
using IterKind = mlir::utils::IteratorType;

namespace {

/// `v` (of `t`) padded on its trailing `low.size()` dims with `value`.
Value padded(Exporter &x, const Location &kl, Value v, const TensorType &t,
             const std::vector<int64_t> &low, const std::vector<int64_t> &high, double value) {
  bool any = false;
  for (size_t i = 0; i < low.size(); ++i)
    any = any || low[i] != 0 || high[i] != 0;
  if (!any)
    return v;
  mlir::Location at = x.loc(kl);
  size_t rank = t.shape.size(), lead = rank - low.size();
  llvm::SmallVector<int64_t> lo(rank, 0), hi(rank, 0), shape;
  for (size_t i = 0; i < low.size(); ++i) {
    lo[lead + i] = low[i];
    hi[lead + i] = high[i];
  }
  for (size_t d = 0; d < rank; ++d)
    shape.push_back(t.shape[d].isStatic() ? t.shape[d].size() + lo[d] + hi[d]
                                          : mlir::ShapedType::kDynamic);
  auto type = mlir::RankedTensorType::get(shape, x.elementType(t.dtype, kl));
  return padTensor(x, at, type, v, lo, hi, x.scalarConstant(t.dtype, value));
}

std::vector<int64_t> orOnes(const std::vector<int64_t> &v, size_t n) {
  return v.empty() ? std::vector<int64_t>(n, 1) : v;
}

/// The lowest value of `t` (a max pool's padding and start).
double lowestOf(DType t) {
  return isFloat(t) ? -INFINITY : static_cast<double>(isSignedInt(t) ? intLowest(t) : 0);
}

/// Adds the channel bias (operand 2 of a conv) to `y`, both in the
/// accumulator's dtype `acc`.
Value addBias(Exporter &x, const Node &n, Value y, DType acc) {
  const TensorType &rt = n.result()->type();
  AffineMap channel = AffineMap::get(static_cast<unsigned>(rt.rank()), 0,
                                     {mlir::getAffineDimExpr(1, &x.ctx_)}, &x.ctx_);
  DType bt = n.operand(2)->type().dtype;
  return pointwise(x, n, TensorType(acc, rt.shape), {y, x.value(n.operand(2))},
                   {identity(x, rt.rank()), channel},
                   [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange a) {
                     Value bias = castScalar(b, l, toRegister(b, l, a[1], bt), bt, acc);
                     Value s = binaryScalar(b, l, ScalarOp::Add, acc, toRegister(b, l, a[0], acc),
                                            bias, x.diag, n.loc());
                     return fromRegister(b, l, s, acc);
                   });
}

} // namespace

LogicalResult exportConv(Exporter &x, const Node &n) {
  ConvOp c(n);
  const TensorType &xt = n.operand(0)->type(), &wt = n.operand(1)->type(), &rt = n.result()->type();
  size_t sp = static_cast<size_t>(xt.rank() - 2);
  int64_t g = c.group();
  const Dim &C = xt.shape[1], &F = wt.shape[0];
  bool depthwise =
      g > 1 && sp == 2 && C.isStatic() && C.size() == g && F.isStatic() && F.size() == g;
  bool grouped = g > 1 && !depthwise && sp == 2 && C.isStatic() && F.isStatic();
  if ((g == 1 && (sp < 1 || sp > 2)) || (g > 1 && !depthwise && !grouped))
    return x.call(n);
  std::vector<int64_t> strides = orOnes(c.strides(), sp), dil = orOnes(c.dilations(), sp);
  std::vector<int64_t> pads = c.pads().empty() ? std::vector<int64_t>(2 * sp, 0) : c.pads();
  std::vector<int64_t> low(pads.begin(), pads.begin() + static_cast<long>(sp)),
      high(pads.begin() + static_cast<long>(sp), pads.end());
  Value in = padded(x, n.loc(), x.value(n.operand(0)), xt, low, high, 0);
  Value w = x.value(n.operand(1));
  mlir::Location at = x.loc(n.loc());
  auto attr = [&](const std::vector<int64_t> &v) { return x.b.getI64TensorAttr(v); };
  // Halves accumulate in f32 and round once, as the reference kernel.
  const DType acc = accumulatorOf(rt.dtype);
  const TensorType accType(acc, rt.shape);
  Value y;
  if (g == 1) {
    Value init = x.filled(accType, 0, n.loc());
    if (!init)
      return failure();
    llvm::SmallVector<Value, 2> ins = {in, w};
    if (sp == 1)
      y = x.b.create<mlir::linalg::Conv1DNcwFcwOp>(at, init.getType(), ins, init, attr(strides),
                                                   attr(dil))
              .getResult(0);
    else
      y = x.b.create<mlir::linalg::Conv2DNchwFchwOp>(at, init.getType(), ins, init, attr(strides),
                                                     attr(dil))
              .getResult(0);
  } else if (depthwise) {
    // filter [C, 1, kh, kw] -> [C, kh, kw]
    Shape fs = {wt.shape[0], wt.shape[2], wt.shape[3]};
    Value f = reshapeTo(x, w, TensorType(wt.dtype, fs), n.loc());
    Value init = x.filled(accType, 0, n.loc());
    if (!f || !init)
      return failure();
    y = x.b.create<mlir::linalg::DepthwiseConv2DNchwChwOp>(
               at, init.getType(), mlir::ValueRange{in, f}, init, attr(strides), attr(dil))
            .getResult(0);
  } else {
    // input [N, C, H, W] -> [N, G, C/G, H, W]; filter [F, C/G, kh, kw] ->
    // [G, F/G, C/G, kh, kw] (the op's filter map is (g, f, c, h, w) despite
    // its name); the result [N, G, F/G, OH, OW] -> [N, F, OH, OW].
    int64_t Cg = C.size() / g, Fg = F.size() / g;
    auto inType = mlir::cast<mlir::RankedTensorType>(in.getType());
    Shape is = {xt.shape[0], Dim(g), Dim(Cg)};
    for (size_t d = 2; d < 4; ++d)
      is.push_back(inType.isDynamicDim(d) ? xt.shape[d] : Dim(inType.getDimSize(d)));
    Value gi = reshapeTo(x, in, TensorType(xt.dtype, is), n.loc());
    Value fw = reshapeTo(
        x, w, TensorType(wt.dtype, {Dim(g), Dim(Fg), Dim(Cg), wt.shape[2], wt.shape[3]}), n.loc());
    if (!gi || !fw)
      return failure();
    TensorType gr(acc, {rt.shape[0], Dim(g), Dim(Fg), rt.shape[2], rt.shape[3]});
    Value init = x.filled(gr, 0, n.loc());
    if (!init)
      return failure();
    Value gy = x.b.create<mlir::linalg::Conv2DNgchwFgchwOp>(
                      at, init.getType(), mlir::ValueRange{gi, fw}, init, attr(strides), attr(dil))
                   .getResult(0);
    y = reshapeTo(x, gy, accType, n.loc());
  }
  if (y && n.numOperands() > 2)
    y = addBias(x, n, y, acc);
  y = narrowed(x, n, y, acc);
  if (!y)
    return failure();
  x.define(n.result(), y);
  return success();
}

LogicalResult exportPool(Exporter &x, const Node &n) {
  const TensorType &xt = n.operand(0)->type(), &rt = n.result()->type();
  DType t = rt.dtype;
  mlir::Location at = x.loc(n.loc());
  if (n.kind() == OpKind::GlobalAvgPool) {
    std::vector<bool> reduced(xt.shape.size(), true);
    reduced[0] = reduced[1] = false;
    const DType acc = isFloat(t) ? DType::F64 : accumulatorOf(t); // as the reference
    Value count = product(x, xt.shape, reduced, n.loc());
    Value sum =
        count ? reduce(x, n, x.value(n.operand(0)), xt, reduced, ScalarOp::Add, 0, acc) : Value();
    if (!sum)
      return failure();
    TensorType kept(t, {xt.shape[0], xt.shape[1]});
    Value mean = pointwise(x, n, kept, {sum}, {identity(x, 2)},
                           [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange a) {
                             Value v =
                                 binaryScalar(b, l, ScalarOp::Div, acc, a[0],
                                              countAsFloat(b, l, count, acc), x.diag, n.loc());
                             return fromRegister(b, l, castScalar(b, l, v, acc, t), t);
                           });
    Value r = mean ? reshapeTo(x, mean, rt, n.loc()) : Value();
    if (!r)
      return failure();
    x.define(n.result(), r);
    return success();
  }
  bool isMax = n.kind() == OpKind::MaxPool;
  std::vector<int64_t> kernel = isMax ? MaxPoolOp(n).kernel() : AvgPoolOp(n).kernel();
  if (kernel.size() != 2 || xt.rank() != 4 || !isFloat(t))
    return x.call(n);
  std::vector<int64_t> strides = orOnes(isMax ? MaxPoolOp(n).strides() : AvgPoolOp(n).strides(), 2);
  std::vector<int64_t> dil = orOnes(isMax ? MaxPoolOp(n).dilations() : AvgPoolOp(n).dilations(), 2);
  std::vector<int64_t> pads = isMax ? MaxPoolOp(n).pads() : AvgPoolOp(n).pads();
  if (pads.empty())
    pads.assign(4, 0);
  std::vector<int64_t> low = {pads[0], pads[1]}, high = {pads[2], pads[3]}, extra = {0, 0};
  for (size_t i = 0; i < 2; ++i) {
    const Dim &in = xt.shape[2 + i], &out = rt.shape[2 + i];
    if (!in.isStatic() || !out.isStatic())
      return x.call(n);
    int64_t needed = (out.size() - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1;
    extra[i] = std::max<int64_t>(0, needed - (in.size() + low[i] + high[i]));
  }
  std::vector<int64_t> highAll = {high[0] + extra[0], high[1] + extra[1]};
  double padValue = isMax ? lowestOf(t) : 0;
  Value in = padded(x, n.loc(), x.value(n.operand(0)), xt, low, highAll, padValue);
  Value window = x.empty(TensorType(t, kernel), n.loc());
  // Averages sum in f64 (as the reference kernel), maxima in the dtype.
  const DType acc = isMax ? t : DType::F64;
  Value init = x.filled(TensorType(acc, rt.shape), padValue, n.loc());
  if (!window || !init)
    return failure();
  auto sAttr = x.b.getI64TensorAttr(strides), dAttr = x.b.getI64TensorAttr(dil);
  Value y;
  if (isMax) {
    // A linalg.generic over (n, c, oh, ow, kh, kw) with Kiln's max (NaN
    // wins, the first of equal values stays): linalg.pooling_nchw_max's
    // arith.maxf is maxnum in MLIR 16, which drops NaN.
    auto d = [&](unsigned i) { return mlir::getAffineDimExpr(i, &x.ctx_); };
    AffineMap read = AffineMap::get(
        6, 0, {d(0), d(1), d(2) * strides[0] + d(4) * dil[0], d(3) * strides[1] + d(5) * dil[1]},
        &x.ctx_);
    AffineMap write = AffineMap::get(6, 0, {d(0), d(1), d(2), d(3)}, &x.ctx_);
    // The window operand gives the (kh, kw) loops their extents.
    AffineMap over = AffineMap::get(6, 0, {d(4), d(5)}, &x.ctx_);
    y = generic(x, at, {in, window}, {read, over, write}, init,
                {IterKind::parallel, IterKind::parallel, IterKind::parallel, IterKind::parallel,
                 IterKind::reduction, IterKind::reduction},
                [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange a) {
                  Value v = binaryScalar(b, l, ScalarOp::Max, t, toRegister(b, l, a[2], t),
                                         toRegister(b, l, a[0], t), x.diag, n.loc());
                  return fromRegister(b, l, v, t);
                });
  } else {
    Value sum = x.b.create<mlir::linalg::PoolingNchwSumOp>(
                       at, init.getType(), mlir::ValueRange{in, window}, init, sAttr, dAttr)
                    .getResult(0);
    // The count of each window: the same pooling over ones, the declared
    // padding counted when count_include_pad, ceil_mode's extra never.
    TensorType plane(acc, {Dim(1), Dim(1), xt.shape[2], xt.shape[3]});
    TensorType counts(acc, {Dim(1), Dim(1), rt.shape[2], rt.shape[3]});
    Value ones = x.filled(plane, 1, n.loc());
    Value cinit = x.filled(counts, 0, n.loc());
    if (!ones || !cinit)
      return failure();
    double counted = AvgPoolOp(n).count_include_pad() ? 1 : 0;
    Value p = padded(x, n.loc(), ones, plane, low, high, counted);
    TensorType mid(acc, {Dim(1), Dim(1), Dim(xt.shape[2].size() + low[0] + high[0]),
                         Dim(xt.shape[3].size() + low[1] + high[1])});
    p = padded(x, n.loc(), p, mid, {0, 0}, extra, 0);
    Value cnt = x.b.create<mlir::linalg::PoolingNchwSumOp>(
                       at, cinit.getType(), mlir::ValueRange{p, window}, cinit, sAttr, dAttr)
                    .getResult(0);
    AffineMap spatial = AffineMap::get(
        4, 0,
        {mlir::getAffineConstantExpr(0, &x.ctx_), mlir::getAffineConstantExpr(0, &x.ctx_),
         mlir::getAffineDimExpr(2, &x.ctx_), mlir::getAffineDimExpr(3, &x.ctx_)},
        &x.ctx_);
    y = pointwise(x, n, rt, {sum, cnt}, {identity(x, 4), spatial},
                  [&](mlir::OpBuilder &b, mlir::Location l, mlir::ValueRange a) {
                    // A window of padding only counts nothing: 0, as the reference.
                    Value zero = b.create<mlir::arith::ConstantOp>(l, b.getF64FloatAttr(0));
                    Value none = b.create<mlir::arith::CmpFOp>(l, mlir::arith::CmpFPredicate::OEQ,
                                                               a[1], zero);
                    Value v = binaryScalar(b, l, ScalarOp::Div, acc, a[0], a[1], x.diag, n.loc());
                    v = b.create<mlir::arith::SelectOp>(l, none, zero, v);
                    return fromRegister(b, l, castScalar(b, l, v, acc, t), t);
                  });
  }
  if (!y)
    return failure();
  x.define(n.result(), y);
  return success();
}

} // namespace kiln::mlirgen
