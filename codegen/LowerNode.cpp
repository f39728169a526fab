//===- LowerNode.cpp - A node's value at an index ----------------*- C++ -*-===//
//
// GroupLowering::computeNode (GroupLowering.h): the scalar a fused node gives
// at a point of the kernel's domain: an elementwise node its scalar
// semantics over its operands at broadcast indices, a data movement node its
// operand at a rewritten index (reshape, transpose, slice, concat, pad,
// gather, resize taps, ...), batch_norm its affine form. Lower.cpp drives
// it. Also detail::resizeLowerable, the resize lowering's tap limit.
//
//===----------------------------------------------------------------------===//
#include "codegen/GroupLowering.h"
#include "ir/ResizeTaps.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace kiln::codegen {

using detail::sizesOf;

namespace lowering {

ScalarRef GroupLowering::computeNode(const Node &n, const Value *v, const Index &idx) {
  std::vector<int64_t> outShape = sizesOf(v);
  auto operandShape = [&](unsigned i) { return sizesOf(n.operand(i)); };
  if (n.hasTrait(Elementwise)) {
    std::vector<ScalarRef> ops;
    for (unsigned i = 0; i < n.numOperands(); ++i)
      ops.push_back(valueAt(n.operand(i), broadcastIndex(idx, operandShape(i))));
    if (failed_)
      return dag().constInt(DType::I64, 0);
    auto r = lowerElementwise(n.info(), n.attrs(), ops, v->type().dtype, dag(), n.loc(), diag_);
    if (r.failed()) {
      failed_ = true;
      return dag().constInt(DType::I64, 0);
    }
    return *r;
  }
  if (detail::isStageNode(n))
    return stageNodeAt(n, idx);
  switch (n.kind()) {
  case OpKind::BatchNorm: {
    // (x - mean[c]) * (scale[c] / sqrt(var[c] + eps)) + bias[c]
    DType ct = computeDType(v->type().dtype);
    Index c{idx[1]};
    auto param = [&](unsigned i) { return dag().cast(valueAt(n.operand(i), c), ct); };
    ScalarRef x = dag().cast(valueAt(n.operand(0), idx), ct);
    ScalarRef eps = dag().constFloat(ct, BatchNormOp(n).epsilon());
    ScalarRef mul = dag().div(param(1), dag().unary(ScalarOp::Sqrt, dag().add(param(4), eps)));
    ScalarRef y = dag().add(dag().mul(dag().sub(x, param(3)), mul), param(2));
    return dag().cast(y, v->type().dtype);
  }
  case OpKind::Reshape:
  case OpKind::Flatten:
  case OpKind::Squeeze:
  case OpKind::Unsqueeze:
    return valueAt(n.operand(0), delinearize(linearize(idx, outShape), operandShape(0)));
  case OpKind::Transpose: {
    std::vector<int64_t> perm = TransposeOp(n).perm();
    if (perm.empty())
      for (size_t i = idx.size(); i-- > 0;)
        perm.push_back(static_cast<int64_t>(i));
    Index in(idx.size());
    for (size_t i = 0; i < idx.size(); ++i)
      in[static_cast<size_t>(perm[i])] = idx[i];
    return valueAt(n.operand(0), in);
  }
  case OpKind::Expand:
    return valueAt(n.operand(0), broadcastIndex(idx, operandShape(0)));
  case OpKind::Slice: {
    SliceOp op(n);
    std::vector<int64_t> in = operandShape(0);
    auto rank = static_cast<int64_t>(in.size());
    Index src = idx;
    std::vector<int64_t> axes = op.axes(), steps = op.steps();
    // Compiled graphs have every symbol bound (Compiler.cpp bindDims).
    std::optional<std::vector<int64_t>> starts = constantInts(op.starts());
    KILN_ASSERT(starts && "slice bounds bound before lowering");
    for (size_t i = 0; i < starts->size(); ++i) {
      int64_t a = axes.empty() ? static_cast<int64_t>(i) : *normalizeAxis(axes[i], rank);
      int64_t step = steps.empty() ? 1 : steps[i];
      int64_t dim = in[static_cast<size_t>(a)];
      int64_t start = (*starts)[i];
      if (start < 0)
        start += dim;
      start =
          step > 0 ? std::clamp<int64_t>(start, 0, dim) : std::clamp<int64_t>(start, 0, dim - 1);
      auto d = static_cast<size_t>(a);
      src[d] = ib_.add(ib_.mul(idx[d], step), ib_.constant(start));
    }
    return valueAt(n.operand(0), src);
  }
  case OpKind::Split: {
    SplitOp op(n);
    std::vector<int64_t> in = operandShape(0);
    auto a = static_cast<size_t>(*normalizeAxis(op.axis(), static_cast<int64_t>(in.size())));
    int64_t offset = 0;
    for (unsigned r = 0; r < v->index(); ++r)
      offset += sizesOf(n.result(r))[a];
    Index src = idx;
    src[a] = ib_.add(idx[a], ib_.constant(offset));
    return valueAt(n.operand(0), src);
  }
  case OpKind::Concat: {
    auto a = static_cast<size_t>(
        *normalizeAxis(ConcatOp(n).axis(), static_cast<int64_t>(outShape.size())));
    // select(t < end_0, x_0, select(t < end_1, x_1, ...)) with each piece
    // read at a clamped coordinate (every arm is evaluated).
    std::vector<std::pair<int64_t, ScalarRef>> pieces;
    int64_t offset = 0;
    for (unsigned i = 0; i < n.numOperands(); ++i) {
      int64_t size = operandShape(i)[a];
      if (size == 0)
        continue;
      Index src = idx;
      src[a] = clampIndex(ib_.add(idx[a], ib_.constant(-offset)), size - 1);
      offset += size;
      pieces.push_back({offset, valueAt(n.operand(i), src)});
    }
    if (pieces.empty())
      return fail("concat of empty operands");
    ScalarRef t = ib_.emit(idx[a]);
    ScalarRef r = pieces.back().second;
    for (size_t i = pieces.size() - 1; i-- > 0;)
      r = dag().select(dag().compare(ScalarOp::Lt, t, dag().constInt(DType::I64, pieces[i].first)),
                       pieces[i].second, r);
    return r;
  }
  case OpKind::Pad: {
    PadOp op(n);
    std::vector<int64_t> in = operandShape(0);
    const std::vector<int64_t> &pads = op.pads();
    size_t rank = in.size();
    Index src = idx;
    ScalarRef inBounds;
    for (size_t d = 0; d < rank; ++d) {
      int64_t before = pads[d], after = pads[d + rank], size = in[d];
      if (before == 0 && after == 0)
        continue;
      Affine i = ib_.add(idx[d], ib_.constant(-before));
      auto [lo, hi] = ib_.range(i);
      if (lo >= 0 && hi < size) {
        src[d] = i;
        continue;
      }
      if (op.mode() == "constant" || op.mode() == "edge") {
        if (op.mode() == "constant") {
          ScalarRef x = ib_.emit(i);
          ScalarRef ok = dag().compare(ScalarOp::Ge, x, dag().constInt(DType::I64, 0));
          ScalarRef ok2 = dag().compare(ScalarOp::Lt, x, dag().constInt(DType::I64, size));
          ScalarRef both = dag().binary(ScalarOp::And, ok, ok2);
          inBounds = inBounds.valid() ? dag().binary(ScalarOp::And, inBounds, both) : both;
        }
        src[d] = clampIndex(i, size - 1);
        continue;
      }
      if (op.mode() == "wrap") { // period n
        const int64_t lift = lo < 0 ? (-lo / size + 1) * size : 0;
        src[d] = ib_.mod(ib_.add(i, ib_.constant(lift)), size);
        continue;
      }
      // reflect: period 2(n-1), folded back into [0, n).
      if (size == 1) {
        src[d] = ib_.constant(0);
        continue;
      }
      int64_t period = 2 * (size - 1);
      int64_t lift = (lo < 0 ? (-lo / period + 1) * period : 0);
      Affine m = ib_.mod(ib_.add(i, ib_.constant(lift)), period);
      ScalarRef mv = ib_.emit(m);
      ScalarRef folded =
          dag().select(dag().compare(ScalarOp::Lt, mv, dag().constInt(DType::I64, size)), mv,
                       dag().sub(dag().constInt(DType::I64, period), mv));
      src[d] = ib_.atom(folded, size - 1);
    }
    ScalarRef x = valueAt(n.operand(0), src);
    if (!inBounds.valid())
      return x;
    return dag().select(inBounds, x, dag().constant(v->type().dtype, op.value()));
  }
  case OpKind::Gather: {
    const Value *data = n.operand(0), *indices = n.operand(1);
    std::vector<int64_t> dataShape = operandShape(0);
    auto a = static_cast<size_t>(
        *normalizeAxis(GatherOp(n).axis(), static_cast<int64_t>(dataShape.size())));
    size_t ri = indices->type().shape.size();
    Index indIdx(idx.begin() + static_cast<std::ptrdiff_t>(a),
                 idx.begin() + static_cast<std::ptrdiff_t>(a + ri));
    ScalarRef k = dag().cast(valueAt(indices, indIdx), DType::I64);
    int64_t size = dataShape[a];
    // Negative indices count from the end; out-of-range ones (an error in
    // the reference) are clamped to stay in bounds.
    Affine pick;
    if (dag().node(k).op == ScalarOp::ConstInt) {
      int64_t c = dag().node(k).ivalue;
      pick = ib_.constant(
          std::clamp<int64_t>(c < 0 ? c + size : c, 0, std::max<int64_t>(size - 1, 0)));
    } else {
      ScalarRef zero = dag().constInt(DType::I64, 0);
      ScalarRef wrapped = dag().select(dag().compare(ScalarOp::Lt, k, zero),
                                       dag().add(k, dag().constInt(DType::I64, size)), k);
      ScalarRef clamped = dag().binary(ScalarOp::Min, dag().binary(ScalarOp::Max, wrapped, zero),
                                       dag().constInt(DType::I64, std::max<int64_t>(size - 1, 0)));
      pick = ib_.atom(clamped, std::max<int64_t>(size - 1, 0));
    }
    Index src(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(a));
    src.push_back(pick);
    src.insert(src.end(), idx.begin() + static_cast<std::ptrdiff_t>(a + ri), idx.end());
    return valueAt(data, src);
  }
  case OpKind::Resize: {
    ResizeOp op(n);
    std::vector<int64_t> in = operandShape(0);
    const bool nearest = op.mode() == "nearest", cubic = op.mode() == "cubic";
    const std::string &mode = op.coordinate_transformation_mode();
    DType f64 = DType::F64;
    auto c64 = [&](double x) { return dag().constFloat(f64, x); };
    // Per dim: the taps (index, weight, present) of the output coordinate.
    struct Tap {
      Affine index;
      ScalarRef weight, present;
    };
    std::vector<std::vector<Tap>> taps(in.size());
    // tf_crop_and_resize: whether the output coordinate maps outside the
    // input in any dim (the element is then extrapolation_value).
    const bool crop = mode == "tf_crop_and_resize";
    ScalarRef outside;
    for (size_t d = 0; d < in.size(); ++d) {
      int64_t inLen = in[d], outLen = outShape[d];
      double scale = op.scales().empty() ? static_cast<double>(outLen) / static_cast<double>(inLen)
                                         : op.scales()[d];
      if (inLen == outLen && scale == 1.0 && !crop) {
        taps[d].push_back({idx[d], c64(1.0), ScalarRef{}});
        continue;
      }
      // The resized length as ONNX defines it (see originalCoordinate in
      // ir/ops/DataMovement.cpp, the reference this mirrors).
      double resized =
          op.scales().empty() ? static_cast<double>(outLen) : scale * static_cast<double>(inLen);
      ScalarRef x = dag().cast(ib_.emit(idx[d]), f64);
      ScalarRef c;
      const double span = crop ? (op.roi()[d + in.size()] - op.roi()[d]) * (inLen - 1) : 0.0;
      if (crop)
        c = dag().add(resized == 1.0 ? c64(span / 2.0)
                                     : dag().div(dag().mul(x, c64(span)), c64(resized - 1.0)),
                      c64(op.roi()[d] * static_cast<double>(inLen - 1)));
      else if (mode == "asymmetric")
        c = dag().div(x, c64(scale));
      else if (mode == "align_corners")
        c = resized == 1.0
                ? c64(0.0)
                : dag().div(dag().mul(x, c64(static_cast<double>(inLen - 1))), c64(resized - 1.0));
      else if (mode == "pytorch_half_pixel" && resized == 1.0)
        c = c64(0.0);
      else if (mode == "half_pixel_symmetric")
        c = dag().sub(dag().div(dag().add(x, c64(0.5)), c64(scale)),
                      c64(0.5 - static_cast<double>(inLen) / 2.0 *
                                    (1.0 - static_cast<double>(outLen) / resized)));
      else
        c = dag().sub(dag().div(dag().add(x, c64(0.5)), c64(scale)), c64(0.5));
      ScalarRef maxIndex = c64(static_cast<double>(inLen - 1));
      if (crop) {
        ScalarRef out = dag().binary(ScalarOp::Or, dag().compare(ScalarOp::Lt, c, c64(0.0)),
                                     dag().compare(ScalarOp::Lt, maxIndex, c));
        outside = outside.valid() ? dag().binary(ScalarOp::Or, outside, out) : out;
      }
      auto clamp = [&](ScalarRef val) {
        ScalarRef lo = c64(0.0);
        return dag().select(
            dag().compare(ScalarOp::Lt, val, lo), lo,
            dag().select(dag().compare(ScalarOp::Lt, maxIndex, val), maxIndex, val));
      };
      auto toIndex = [&](ScalarRef val) {
        return ib_.atom(dag().cast(val, DType::I64), inLen - 1);
      };
      // The neighbours base + k of c (base = floor(c), or c - 1 when c is
      // an integer, the ratio r = c - base then 1), as cubicTaps and
      // antialiasTaps of ir/ops/PadResize.cpp take them.
      const double a = op.cubic_coeff_a();
      auto keysNear = [&](ScalarRef t) { // ((a + 2) t - (a + 3)) t t + 1, |t| <= 1
        ScalarRef u = dag().sub(dag().mul(c64(a + 2.0), t), c64(a + 3.0));
        return dag().add(dag().mul(dag().mul(u, t), t), c64(1.0));
      };
      auto keysFar = [&](ScalarRef t) { // ((a t - 5a) t + 8a) t - 4a, 1 < |t| < 2
        ScalarRef u = dag().sub(dag().mul(c64(a), t), c64(5.0 * a));
        return dag().sub(dag().mul(dag().add(dag().mul(u, t), c64(8.0 * a)), t), c64(4.0 * a));
      };
      // Taps of weights `w` at positions `at`: read at the edge beyond it,
      // or (exclude_outside) left out and the rest renormalized; a zero
      // weight's tap is not read.
      auto addTaps = [&](std::vector<ScalarRef> w, const std::vector<ScalarRef> &at) {
        ScalarRef sum = c64(0.0);
        for (size_t k = 0; k < w.size() && op.exclude_outside(); ++k) {
          ScalarRef inside =
              dag().binary(ScalarOp::And, dag().compare(ScalarOp::Ge, at[k], c64(0.0)),
                           dag().compare(ScalarOp::Le, at[k], maxIndex));
          w[k] = dag().select(inside, w[k], c64(0.0));
          sum = dag().add(sum, w[k]);
        }
        for (size_t k = 0; k < w.size(); ++k) {
          ScalarRef weight = op.exclude_outside() ? dag().div(w[k], sum) : w[k];
          ScalarRef nonzero =
              dag().unary(ScalarOp::Not, dag().compare(ScalarOp::Eq, w[k], c64(0.0)));
          taps[d].push_back({toIndex(clamp(at[k])), weight, nonzero});
        }
      };
      auto baseAndRatio = [&] {
        ScalarRef fl = dag().unary(ScalarOp::Floor, c);
        ScalarRef isInt = dag().compare(ScalarOp::Eq, c, fl);
        return std::pair{dag().select(isInt, dag().sub(fl, c64(1.0)), fl),
                         dag().select(isInt, c64(1.0), dag().sub(c, fl))};
      };
      if (!nearest && op.antialias() && scale < 1.0) {
        auto [base, r] = baseAndRatio();
        // antialiasTaps: the filter stretched by 1 / scale over 2 - 2 start
        // neighbours, normalized to sum 1.
        const int64_t start = resizeAntialiasStart(cubic, scale);
        auto filter = [&](ScalarRef x) { // antialiasWeight
          x = dag().unary(ScalarOp::Abs, x);
          if (!cubic)
            return dag().binary(ScalarOp::Max, c64(0.0), dag().sub(c64(1.0), x));
          return dag().select(
              dag().compare(ScalarOp::Le, x, c64(1.0)), keysNear(x),
              dag().select(dag().compare(ScalarOp::Lt, x, c64(2.0)), keysFar(x), c64(0.0)));
        };
        std::vector<ScalarRef> w, at;
        ScalarRef sum = c64(0.0);
        for (int64_t i = start; i < 2 - start; ++i) {
          const double fi = static_cast<double>(i);
          w.push_back(filter(dag().mul(dag().sub(c64(fi), r), c64(scale))));
          sum = dag().add(sum, w.back());
          at.push_back(dag().add(base, c64(fi)));
        }
        for (ScalarRef &wk : w)
          wk = dag().div(wk, sum);
        addTaps(w, at);
        continue;
      }
      if (cubic) {
        // cubicTaps: the four neighbours of c (no clamp of c itself),
        // Keys' weights.
        auto [base, r] = baseAndRatio();
        ScalarRef s = dag().sub(c64(1.0), r);
        std::vector<ScalarRef> at;
        for (int k = 0; k < 4; ++k)
          at.push_back(dag().add(base, c64(static_cast<double>(k - 1))));
        addTaps({keysFar(dag().add(r, c64(1.0))), keysNear(r), keysNear(s),
                 keysFar(dag().add(s, c64(1.0)))},
                at);
        continue;
      }
      if (nearest) {
        const std::string &nm = op.nearest_mode();
        ScalarRef r;
        if (nm == "floor") {
          r = dag().unary(ScalarOp::Floor, c);
        } else if (nm == "ceil") {
          r = dag().unary(ScalarOp::Ceil, c);
        } else {
          ScalarRef fl = dag().unary(ScalarOp::Floor, c);
          ScalarRef half = dag().compare(ScalarOp::Eq, dag().sub(c, fl), c64(0.5));
          ScalarRef tie = nm == "round_prefer_ceil" ? dag().unary(ScalarOp::Ceil, c) : fl;
          r = dag().select(half, tie, dag().unary(ScalarOp::Floor, dag().add(c, c64(0.5))));
        }
        taps[d].push_back({toIndex(clamp(r)), c64(1.0), ScalarRef{}});
        continue;
      }
      ScalarRef cc = clamp(c);
      ScalarRef lo = dag().unary(ScalarOp::Floor, cc);
      ScalarRef w = dag().sub(cc, lo);
      Affine loIdx = toIndex(lo);
      ScalarRef hiRaw =
          dag().binary(ScalarOp::Min, dag().add(ib_.emit(loIdx), dag().constInt(DType::I64, 1)),
                       dag().constInt(DType::I64, inLen - 1));
      taps[d].push_back({loIdx, dag().sub(c64(1.0), w), ScalarRef{}});
      taps[d].push_back({ib_.atom(hiRaw, inLen - 1), w, dag().compare(ScalarOp::Gt, w, c64(0.0))});
    }
    auto extrapolate = [&](ScalarRef value) {
      const DType t = v->type().dtype;
      return outside.valid()
                 ? dag().select(outside, dag().cast(c64(op.extrapolation_value()), t), value)
                 : value;
    };
    if (nearest) {
      Index src;
      for (auto &t : taps)
        src.push_back(t[0].index);
      return extrapolate(valueAt(n.operand(0), src));
    }
    // Sum over the corners in the reference's order, skipping taps of zero
    // weight (their value may be inf or NaN).
    std::vector<size_t> pick(in.size(), 0);
    ScalarRef acc = c64(0.0);
    while (true) {
      Index src;
      ScalarRef weight = c64(1.0), present;
      for (size_t d = 0; d < in.size(); ++d) {
        const Tap &t = taps[d][pick[d]];
        src.push_back(t.index);
        weight = dag().mul(weight, t.weight);
        if (t.present.valid())
          present = present.valid() ? dag().binary(ScalarOp::And, present, t.present) : t.present;
      }
      ScalarRef term = dag().mul(weight, dag().cast(valueAt(n.operand(0), src), f64));
      if (present.valid())
        term = dag().select(present, term, c64(0.0));
      acc = dag().add(acc, term);
      size_t d = in.size();
      while (d-- > 0) {
        if (++pick[d] < taps[d].size())
          break;
        pick[d] = 0;
      }
      if (d == static_cast<size_t>(-1))
        break;
    }
    return extrapolate(dag().cast(acc, v->type().dtype));
  }
  default:
    return fail("no kernel lowering for op '" + std::string(n.mnemonic()) + "'");
  }
}

} // namespace lowering

namespace detail {
bool resizeLowerable(const Node &n) {
  ResizeOp op(n);
  const TensorType &in = n.operand(0)->type(), &out = n.result(0)->type();
  int64_t taps = 1;
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (!in.shape[d].isStatic() || !out.shape[d].isStatic())
      continue;
    const double scale = op.scales().empty() ? static_cast<double>(out.shape[d].size()) /
                                                   static_cast<double>(in.shape[d].size())
                                             : op.scales()[d];
    if (scale == 1.0 && in.shape[d] == out.shape[d] &&
        op.coordinate_transformation_mode() != "tf_crop_and_resize")
      continue; // read as it is (the lowering's identity dims)
    taps *= resizeTapsPerDim(op.mode(), op.antialias(), scale);
    if (taps > kMaxResizeTaps)
      return false;
  }
  return true;
}
} // namespace detail

} // namespace kiln::codegen
