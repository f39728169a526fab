//===- OnnxShape.cpp - Converters of shape and data movement ops -*- C++ -*-===//
//
// Constant, Shape, Size, ConstantOfShape, Range, Reshape, Flatten,
// Transpose, Squeeze, Unsqueeze, Concat, Split, Slice, Gather, Expand, Tile,
// Pad, Resize, Upsample, DepthToSpace and SpaceToDepth; and the ops built
// from constants of a static shape: Trilu (a mask), EyeLike, OneHot and
// CumSum (an iota / a 0-1 triangle), and ScatterND with constant indices
// (a gather map).
//
// ONNX passes the configuration of most of these ops (Reshape's shape,
// Slice's starts, Pad's pads, Squeeze's axes since opset 13, ...) as
// tensor inputs; Kiln's ops take it as attributes, so those inputs must be
// known at import time: constants, folded shape computations (see Note
// [Import-time folding] in NodeContext.cpp), or for Reshape and Expand the
// symbolic entries of Note [Shape values].
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

/// Integer tensor of `dtype` and `shape` holding `entries` when all are
/// known; otherwise records them on `computed` (see Note [Shape values]).
Value *shapeResult(NodeContext &ctx, Value *computed, const SymInts &entries) {
  if (!computed)
    return nullptr;
  bool known =
      std::all_of(entries.begin(), entries.end(), [](const SymInt &e) { return e.isKnown(); });
  if (!known || constantOf(computed)) {
    ctx.setShapeValue(computed, entries);
    return computed;
  }
  Ints values;
  for (const SymInt &e : entries)
    values.push_back(*e.value);
  return ctx.constant(
      Tensor::fromInts(computed->type().dtype, staticSizes(computed->type().shape), values));
}

/// A symbolic int list input (slice bounds, expand and constant_of_shape
/// targets): constants, or shape values whose entries are expressions over
/// the symbols (`x[:, :seq]`, Note [Symbolic attributes] in docs/IR.md).
std::optional<std::vector<DimExpr>> symbolicInts(NodeContext &ctx, size_t i, const char *what) {
  auto entries = ctx.shapeInput(i, what);
  if (!entries)
    return std::nullopt;
  std::vector<DimExpr> out;
  for (const SymInt &e : *entries) {
    auto x = e.asExpr();
    if (!x) {
      ctx.emitError() << "input " << i << " (" << what << ", '" << ctx.proto().input(int(i))
                      << "') has an entry that is neither known at import time nor an "
                         "expression of the graph's symbolic dims";
      return std::nullopt;
    }
    out.push_back(*x);
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Tensor makers
//===----------------------------------------------------------------------===//

std::string checkConstant(const onnx::NodeProto &node, int64_t) {
  for (const char *name : {"sparse_value", "value_string", "value_strings"})
    if (findAttr(node, name))
      return std::string("attribute '") + name + "' is not supported";
  return "";
}

Values convertConstant(NodeContext &ctx) {
  if (ctx.hasAttr("value")) {
    Tensor t = ctx.attrTensor("value");
    return {t.isNull() ? nullptr : ctx.constant(t)};
  }
  if (ctx.hasAttr("value_float"))
    return {ctx.constant(Tensor::scalar(DType::F32, ctx.attrFloat("value_float", 0)))};
  if (ctx.hasAttr("value_int"))
    return {ctx.constant(Tensor::fromInts(DType::I64, {}, {ctx.attrInt("value_int", 0)}))};
  if (ctx.hasAttr("value_floats")) {
    Floats v = ctx.attrFloats("value_floats");
    return {ctx.constant(Tensor::fromDoubles(DType::F32, {static_cast<int64_t>(v.size())}, v))};
  }
  if (ctx.hasAttr("value_ints")) {
    Ints v = ctx.attrInts("value_ints");
    return {ctx.constant(Tensor::fromInts(DType::I64, {static_cast<int64_t>(v.size())}, v))};
  }
  ctx.emitError() << "has no value attribute";
  return {};
}

Values convertShape(NodeContext &ctx) {
  Value *x = ctx.input(0, "data");
  if (!x)
    return {};
  int64_t start = ctx.attrInt("start", 0);
  int64_t end = ctx.attrInt("end", std::numeric_limits<int64_t>::max());
  int64_t rank = x->type().rank();
  auto clampDim = [rank](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + rank : i, 0, rank); };
  int64_t b = clampDim(start), e = std::max(b, clampDim(end));
  SymInts entries;
  for (int64_t i = b; i < e; ++i)
    entries.push_back(SymInt::ofDim(x, i));
  if (x->type().isStatic()) {
    Ints sizes;
    for (const SymInt &s : entries)
      sizes.push_back(*s.value);
    return {ctx.constant(Tensor::fromInts(DType::I64, {e - b}, sizes))};
  }
  Value *s = ctx.create(OpKind::ShapeOf, {x}, {{"start", start}, {"end", end}});
  return {shapeResult(ctx, s, entries)};
}

Values convertSize(NodeContext &ctx) {
  Value *x = ctx.input(0, "data");
  if (!x)
    return {};
  if (!x->type().isStatic()) {
    ctx.emitError() << "needs a static input shape, got " << x->type().str();
    return {};
  }
  return {
      ctx.constant(Tensor::fromInts(DType::I64, {}, {numElements(staticSizes(x->type().shape))}))};
}

Values convertConstantOfShape(NodeContext &ctx) {
  auto shape = symbolicInts(ctx, 0, "input");
  if (!shape)
    return {};
  DType dtype = DType::F32;
  double value = 0.0;
  if (ctx.hasAttr("value")) {
    Tensor t = ctx.attrTensor("value");
    if (t.isNull())
      return {};
    if (t.numel() != 1) {
      ctx.emitError() << "attribute 'value' must hold one element, got " << t.str();
      return {};
    }
    dtype = t.dtype();
    value = t.getDouble(0);
  }
  return {ctx.create(OpKind::ConstantOfShape, {},
                     {{"shape", *shape}, {"value", value}, {"dtype", dtype}})};
}

/// The element count of an integer Range from `start` by `delta` to a
/// symbolic `limit`: max(ceil((limit - start) / delta), 0).
std::optional<DimExpr> rangeLength(const DimExpr &limit, int64_t start, int64_t delta) {
  auto span = delta > 0 ? DimExpr::sub(limit, DimExpr(start)) : DimExpr::sub(DimExpr(start), limit);
  if (!span || delta == std::numeric_limits<int64_t>::min())
    return std::nullopt;
  auto count = DimExpr::ceilDiv(*span, delta > 0 ? delta : -delta);
  if (!count)
    return std::nullopt;
  return DimExpr::max(*count, DimExpr(0));
}

/// Range 27's `stash_type`: f16 / bf16 ranges computed in f32 (1, the
/// default) is what Kiln's range and iota do (in double, rounded once);
/// accumulating in the half type is not.
std::string checkRange(const onnx::NodeProto &node, int64_t) {
  const onnx::AttributeProto *a = findAttr(node, "stash_type");
  return !a || a->i() == onnx::TensorProto::FLOAT
             ? ""
             : "stash_type " + std::to_string(a->i()) + " (other than 1, float) is not supported";
}

/// Range folds to a constant when its inputs are known; an integer Range
/// whose limit is a shape value of symbolic dims (`torch.arange(seq)`)
/// becomes an iota of symbolic length.
Values convertRange(NodeContext &ctx) {
  Value *limitValue = ctx.input(1, "limit");
  if (limitValue && !constantOf(limitValue)) {
    auto limit = ctx.shapeValueOf(limitValue);
    if (limit && limit->size() == 1 && !(*limit)[0].isKnown() && (*limit)[0].expr) {
      auto start = ctx.scalarInput(0, "start");
      auto delta = ctx.scalarInput(2, "delta");
      if (!start || !delta)
        return {};
      DType dtype = limitValue->type().dtype;
      // iota computes in double: integers up to 2^53 are exact.
      bool integral = std::nearbyint(*start) == *start && std::nearbyint(*delta) == *delta &&
                      std::abs(*start) <= 0x1p53 && std::abs(*delta) <= 0x1p53;
      if (*delta == 0.0 || !integral) {
        ctx.emitError() << "with a limit computed from symbolic dims (" << (*limit)[0].expr->str()
                        << "), start " << formatDouble(*start) << " and delta "
                        << formatDouble(*delta) << " must be integers and delta nonzero";
        return {};
      }
      auto length = rangeLength(*(*limit)[0].expr, static_cast<int64_t>(*start),
                                static_cast<int64_t>(*delta));
      if (!length) {
        ctx.emitError() << "the length of a range from " << formatDouble(*start) << " to "
                        << (*limit)[0].expr->str() << " by " << formatDouble(*delta)
                        << " overflows";
        return {};
      }
      return {ctx.create(OpKind::Iota, {},
                         {{"shape", std::vector<DimExpr>{*length}},
                          {"start", *start},
                          {"delta", *delta},
                          {"dtype", dtype}})};
    }
  }
  auto start = ctx.scalarInput(0, "start");
  auto limit = ctx.scalarInput(1, "limit");
  auto delta = ctx.scalarInput(2, "delta");
  if (!start || !limit || !delta)
    return {};
  DType dtype = constantOf(ctx.input(0))->dtype();
  return {ctx.create(OpKind::Range, {},
                     {{"start", *start}, {"limit", *limit}, {"delta", *delta}, {"dtype", dtype}})};
}

//===----------------------------------------------------------------------===//
// Reshapes
//===----------------------------------------------------------------------===//

/// Reshape with allowzero=1 and a 0 in the shape: the 0 is a zero-size dim
/// (not "copy the input's dim", which is what Kiln's reshape means by 0), so
/// the result is empty, and so must the input be. An empty tensor has no
/// values: the result is a constant_of_shape of the target shape.
Value *reshapeToEmpty(NodeContext &ctx, Value *x, const SymInts &entries) {
  Ints shape;
  for (const SymInt &e : entries) {
    if (!e.isKnown() || *e.value < 0) {
      ctx.emitError() << "allowzero=1 with a 0 in the shape needs every other entry known and "
                         "non-negative (ONNX forbids -1 with it)";
      return nullptr;
    }
    shape.push_back(*e.value);
  }
  if (!x->type().isStatic() || numElements(staticSizes(x->type().shape)) != 0) {
    ctx.emitError() << "cannot reshape " << x->type().str() << " to the empty shape " << shape
                    << " (allowzero=1): element counts differ";
    return nullptr;
  }
  return ctx.create(OpKind::ConstantOfShape, {},
                    {{"shape", shape}, {"value", 0.0}, {"dtype", x->type().dtype}});
}

Values convertReshape(NodeContext &ctx) {
  Value *x = ctx.input(0, "data");
  auto entries = ctx.shapeInput(1, "shape");
  if (!x || !entries)
    return {};
  bool allowZero = ctx.opset() >= 14 && ctx.attrInt("allowzero", 0) != 0;
  if (allowZero &&
      std::any_of(entries->begin(), entries->end(), [](const SymInt &e) { return e.value == 0; }))
    return {reshapeToEmpty(ctx, x, *entries)};
  std::vector<DimExpr> shape;
  int unknown = 0;
  for (size_t i = 0; i < entries->size(); ++i) {
    const SymInt &e = (*entries)[i];
    if (e.isKnown()) {
      shape.push_back(*e.value);
      unknown += *e.value == -1;
    } else if (e.isDimOf(x, static_cast<int64_t>(i))) {
      shape.push_back(0); // copy the input's dim
    } else if (e.expr) {
      shape.push_back(*e.expr); // a dim of the graph's symbols (`seq`, `4*batch`)
    } else {
      shape.push_back(-1);
      ++unknown;
    }
  }
  if (unknown > 1) {
    auto d = ctx.emitError();
    d << "the target shape [";
    for (size_t i = 0; i < entries->size(); ++i) {
      const SymInt &e = (*entries)[i];
      d << (i ? ", " : "") << e.str();
    }
    d << "] of " << x->type().str() << " has more than one unknown dim";
    return {};
  }
  Value *y = ctx.create(OpKind::Reshape, {x}, {{"shape", shape}});
  // A shape value reshaped to a vector keeps its entries, in order.
  if (y && !constantOf(y) && y->type().rank() <= 1)
    if (auto e = ctx.shapeValueOf(x))
      ctx.setShapeValue(y, *e);
  return {y};
}

Values convertFlatten(NodeContext &ctx) {
  return {unary(ctx, OpKind::Flatten, {{"axis", ctx.attrInt("axis", 1)}})};
}

Values convertTranspose(NodeContext &ctx) {
  return {unary(ctx, OpKind::Transpose, {{"perm", ctx.attrInts("perm")}})};
}

/// Squeeze / Unsqueeze axes: an attribute before opset 13, an input since.
std::optional<Ints> readAxes(NodeContext &ctx, bool required) {
  if (ctx.opset() < 13) {
    if (required && !ctx.hasAttr("axes")) {
      ctx.emitError() << "missing attribute 'axes'";
      return std::nullopt;
    }
    return ctx.attrInts("axes");
  }
  if (!ctx.hasInput(1)) {
    if (required) {
      ctx.emitError() << "missing input 1 (axes)";
      return std::nullopt;
    }
    return Ints{};
  }
  return ctx.intsInput(1, "axes");
}

/// Squeeze and Unsqueeze of a shape value keep its entries.
Value *keepShapeValue(NodeContext &ctx, Value *in, Value *out) {
  if (auto s = ctx.shapeValueOf(in); s && !constantOf(in))
    return shapeResult(ctx, out, *s);
  return out;
}

Values convertSqueeze(NodeContext &ctx) {
  auto axes = readAxes(ctx, /*required=*/false);
  Value *x = ctx.input(0, "data");
  if (!axes)
    return {};
  return {keepShapeValue(ctx, x, ctx.create(OpKind::Squeeze, {x}, {{"axes", *axes}}))};
}

Values convertUnsqueeze(NodeContext &ctx) {
  auto axes = readAxes(ctx, /*required=*/true);
  Value *x = ctx.input(0, "data");
  if (!axes)
    return {};
  return {keepShapeValue(ctx, x, ctx.create(OpKind::Unsqueeze, {x}, {{"axes", *axes}}))};
}

Values convertConcat(NodeContext &ctx) {
  if (!ctx.hasAttr("axis")) {
    ctx.emitError() << "missing attribute 'axis'";
    return {};
  }
  int64_t axis = ctx.attrInt("axis", 0);
  std::vector<Value *> ins;
  bool shapeLike = true;
  SymInts entries;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    Value *v = ctx.input(i, "inputs");
    ins.push_back(v);
    auto s = v ? ctx.shapeValueOf(v) : std::nullopt;
    if (s && v->type().rank() == 1)
      entries.insert(entries.end(), s->begin(), s->end());
    else
      shapeLike = false;
  }
  Value *out = ctx.create(OpKind::Concat, ins, {{"axis", axis}});
  return {shapeLike ? shapeResult(ctx, out, entries) : out};
}

Values convertSplit(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  int64_t axis = ctx.attrInt("axis", 0);
  Ints sizes;
  if (ctx.opset() < 13) {
    sizes = ctx.attrInts("split");
  } else if (ctx.hasInput(1)) {
    auto s = ctx.intsInput(1, "split");
    if (!s)
      return {};
    sizes = *s;
  }
  unsigned n = static_cast<unsigned>(ctx.numOutputs());
  if (n == 0) {
    ctx.emitError() << "has no outputs";
    return {};
  }
  // Opset 18: `num_outputs` equal parts, the last one smaller when the dim
  // does not divide (ceil-sized parts, as torch.chunk / tensor_split).
  if (ctx.opset() >= 18 && ctx.hasAttr("num_outputs") && sizes.empty() && x) {
    int64_t parts = ctx.attrInt("num_outputs", 0);
    int64_t rank = x->type().rank();
    int64_t a = axis < 0 ? axis + rank : axis;
    if (parts != static_cast<int64_t>(n)) {
      ctx.emitError() << "has num_outputs " << parts << " but " << n << " outputs";
      return {};
    }
    if (a >= 0 && a < rank && x->type().shape[static_cast<size_t>(a)].isStatic()) {
      int64_t d = x->type().shape[static_cast<size_t>(a)].size();
      int64_t chunk = (d + parts - 1) / parts;
      if (chunk * (parts - 1) < d) {
        sizes.assign(static_cast<size_t>(parts), chunk);
        sizes.back() = d - chunk * (parts - 1);
      }
    }
  }
  return ctx.createMulti(OpKind::Split, {x}, {{"axis", axis}, {"sizes", sizes}}, n);
}

Values convertSlice(NodeContext &ctx) {
  Value *x = ctx.input(0, "data");
  auto bounds = symbolicInts(ctx, 1, "starts");
  auto endBounds = symbolicInts(ctx, 2, "ends");
  std::optional<Ints> axes = Ints{}, steps = Ints{};
  if (ctx.hasInput(3))
    axes = ctx.intsInput(3, "axes");
  if (ctx.hasInput(4))
    steps = ctx.intsInput(4, "steps");
  if (!x || !bounds || !endBounds || !axes || !steps)
    return {};
  Value *out =
      ctx.create(OpKind::Slice, {x},
                 {{"starts", *bounds}, {"ends", *endBounds}, {"axes", *axes}, {"steps", *steps}});
  // A slice of a shape value: apply it to the entries (1-D, so axis 0).
  auto entries = ctx.shapeValueOf(x);
  auto starts = constantInts(*bounds), ends = constantInts(*endBounds);
  if (out && entries && !constantOf(x) && starts && ends && starts->size() == 1) {
    int64_t n = static_cast<int64_t>(entries->size());
    int64_t step = steps->empty() ? 1 : (*steps)[0];
    int64_t b = (*starts)[0], e = (*ends)[0];
    if (step > 0) {
      b = std::clamp<int64_t>(b < 0 ? b + n : b, 0, n);
      e = std::clamp<int64_t>(e < 0 ? e + n : e, 0, n);
      SymInts picked;
      for (int64_t i = b; i < e; i += step)
        picked.push_back((*entries)[static_cast<size_t>(i)]);
      if (static_cast<int64_t>(picked.size()) == out->type().shape[0].size())
        return {shapeResult(ctx, out, picked)};
    }
  }
  return {out};
}

Values convertGather(NodeContext &ctx) {
  Value *data = ctx.input(0, "data");
  Value *indices = ctx.input(1, "indices");
  int64_t axis = ctx.attrInt("axis", 0);
  Value *out = ctx.create(OpKind::Gather, {data, indices}, {{"axis", axis}});
  // Gathering entries of a shape value with constant indices.
  auto entries = data ? ctx.shapeValueOf(data) : std::nullopt;
  const Tensor *idx = constantOf(indices);
  if (out && entries && idx && !constantOf(data) && data->type().rank() == 1) {
    int64_t n = static_cast<int64_t>(entries->size());
    SymInts picked;
    for (int64_t k : idx->toInts()) {
      if (k < -n || k >= n)
        return {out};
      picked.push_back((*entries)[static_cast<size_t>(k < 0 ? k + n : k)]);
    }
    return {shapeResult(ctx, out, picked)};
  }
  return {out};
}

Values convertExpand(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  auto entries = ctx.shapeInput(1, "shape");
  if (!x || !entries)
    return {};
  std::vector<DimExpr> shape;
  int64_t offset = static_cast<int64_t>(entries->size()) - x->type().rank();
  for (size_t i = 0; i < entries->size(); ++i) {
    const SymInt &e = (*entries)[i];
    int64_t inDim = static_cast<int64_t>(i) - offset;
    if (e.isKnown()) {
      shape.push_back(*e.value);
    } else if (e.isDimOf(x, inDim)) {
      shape.push_back(1); // keeps the input's dim
    } else if (e.expr) {
      shape.push_back(*e.expr); // a symbolic size (`seq`)
    } else {
      ctx.emitError() << "entry " << i << " of the target shape is not known at import time";
      return {};
    }
  }
  return {ctx.create(OpKind::Expand, {x}, {{"shape", shape}})};
}

Values convertTile(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  auto repeats = ctx.intsInput(1, "repeats");
  if (!x || !repeats)
    return {};
  if (static_cast<int64_t>(repeats->size()) != x->type().rank()) {
    ctx.emitError() << "repeats " << *repeats << " must have one entry per dim of "
                    << x->type().str();
    return {};
  }
  Value *y = x;
  for (size_t a = 0; a < repeats->size(); ++a) {
    int64_t r = (*repeats)[a];
    if (r < 0) {
      ctx.emitError() << "repeats " << *repeats << " has a negative entry";
      return {};
    }
    if (r == 1)
      continue;
    if (r == 0) {
      y = ctx.create(OpKind::Slice, {y},
                     {{"starts", Ints{0}}, {"ends", Ints{0}}, {"axes", Ints{int64_t(a)}}});
      continue;
    }
    y = ctx.create(OpKind::Concat, std::vector<Value *>(static_cast<size_t>(r), y),
                   {{"axis", int64_t(a)}});
  }
  return {y};
}

//===----------------------------------------------------------------------===//
// Pad and Resize
//===----------------------------------------------------------------------===//

std::string checkPad(const onnx::NodeProto &node, int64_t) {
  std::string mode = attrStringOr(node, "mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return "mode '" + mode + "' is not supported";
  return "";
}

Values convertPad(NodeContext &ctx) {
  Value *x = ctx.input(0, "data");
  auto pads = ctx.intsInput(1, "pads");
  std::optional<double> value = 0.0;
  if (ctx.hasInput(2))
    value = ctx.scalarInput(2, "constant_value");
  if (!x || !pads || !value)
    return {};
  // Opset 18: `axes` names the dims `pads` covers (begins, then ends).
  if (ctx.hasInput(3)) {
    auto axes = ctx.intsInput(3, "axes");
    if (!axes)
      return {};
    int64_t rank = x->type().rank();
    if (pads->size() != 2 * axes->size()) {
      ctx.emitError() << "has " << pads->size() << " pads for " << axes->size()
                      << " axes; it needs two per axis";
      return {};
    }
    if (!ctx.normalizeAxes(*axes, rank))
      return {};
    Ints full(static_cast<size_t>(2 * rank), 0);
    for (size_t k = 0; k < axes->size(); ++k) {
      int64_t a = (*axes)[k];
      full[static_cast<size_t>(a)] = (*pads)[k];
      full[static_cast<size_t>(a + rank)] = (*pads)[k + axes->size()];
    }
    pads = std::move(full);
  }
  return {ctx.create(
      OpKind::Pad, {x},
      {{"pads", *pads}, {"mode", ctx.attrString("mode", "constant")}, {"value", *value}})};
}

std::string checkResize(const onnx::NodeProto &node, int64_t) {
  std::string mode = attrStringOr(node, "mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return "mode '" + mode + "' is not supported";
  std::string coord = attrStringOr(node, "coordinate_transformation_mode", "half_pixel");
  if (coord != "half_pixel" && coord != "asymmetric" && coord != "align_corners" &&
      coord != "pytorch_half_pixel" && coord != "half_pixel_symmetric" &&
      coord != "tf_crop_and_resize")
    return "coordinate_transformation_mode '" + coord + "' is not supported";
  std::string policy = attrStringOr(node, "keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return "keep_aspect_ratio_policy '" + policy + "' is not supported";
  return "";
}

Values convertResize(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  std::vector<NamedAttr> attrs{
      {"mode", ctx.attrString("mode", "nearest")},
      {"coordinate_transformation_mode",
       ctx.attrString("coordinate_transformation_mode", "half_pixel")},
      {"nearest_mode", ctx.attrString("nearest_mode", "round_prefer_floor")},
      {"cubic_coeff_a", ctx.attrFloat("cubic_coeff_a", -0.75)},
      {"exclude_outside", ctx.attrInt("exclude_outside", 0) != 0},
      {"antialias", ctx.attrInt("antialias", 0) != 0}}; // opset 18
  if (!x)
    return {};
  // Opset 18: `axes` names the dims that scales / sizes cover; the others
  // keep their size (scale 1).
  int64_t rank = x->type().rank();
  std::optional<Ints> axes;
  if (ctx.hasAttr("axes")) {
    axes = ctx.attrInts("axes");
    if (!ctx.normalizeAxes(*axes, rank))
      return {};
  }
  // Inputs: X, roi, scales, sizes; an empty scales tensor means "absent".
  // roi (starts, then ends, per axis of `axes`) matters to
  // tf_crop_and_resize only; the other dims keep [0, 1].
  if (ctx.attrString("coordinate_transformation_mode", "half_pixel") == "tf_crop_and_resize") {
    const Tensor *roi = ctx.constantInput(1, "roi");
    if (!roi)
      return {};
    std::vector<double> v = roi->toDoubles();
    const size_t covered = axes ? axes->size() : static_cast<size_t>(rank);
    if (v.size() != 2 * covered) {
      ctx.emitError() << "tf_crop_and_resize needs a start and an end per axis in roi, got "
                      << v.size() << " values for " << covered << " axes";
      return {};
    }
    std::vector<double> full(2 * static_cast<size_t>(rank), 0.0);
    for (size_t i = 0; i < static_cast<size_t>(rank); ++i)
      full[static_cast<size_t>(rank) + i] = 1.0;
    for (size_t i = 0; i < covered; ++i) {
      const auto d = static_cast<size_t>(axes ? (*axes)[i] : static_cast<int64_t>(i));
      full[d] = v[i];
      full[static_cast<size_t>(rank) + d] = v[covered + i];
    }
    attrs.emplace_back("roi", std::move(full));
    attrs.emplace_back("extrapolation_value", ctx.attrFloat("extrapolation_value", 0.0));
  }
  if (ctx.hasInput(2)) {
    const Tensor *scales = ctx.constantInput(2, "scales");
    if (!scales)
      return {};
    if (scales->numel() > 0) {
      std::vector<double> v = scales->toDoubles();
      if (axes) {
        if (v.size() != axes->size()) {
          ctx.emitError() << "has " << v.size() << " scales for " << axes->size() << " axes";
          return {};
        }
        std::vector<double> full(static_cast<size_t>(rank), 1.0);
        for (size_t i = 0; i < v.size(); ++i)
          full[static_cast<size_t>((*axes)[i])] = v[i];
        v = std::move(full);
      }
      attrs.emplace_back("scales", std::move(v));
    }
  }
  if (ctx.hasInput(3)) {
    auto sizes = ctx.intsInput(3, "sizes");
    if (!sizes)
      return {};
    if (!sizes->empty() && axes) {
      if (sizes->size() != axes->size()) {
        ctx.emitError() << "has " << sizes->size() << " sizes for " << axes->size() << " axes";
        return {};
      }
      Ints full;
      for (int64_t d = 0; d < rank; ++d) {
        auto it = std::find(axes->begin(), axes->end(), d);
        if (it != axes->end()) {
          full.push_back((*sizes)[static_cast<size_t>(it - axes->begin())]);
        } else if (auto n = ctx.staticDim(x, d)) {
          full.push_back(*n);
        } else {
          return {};
        }
      }
      sizes = std::move(full);
    }
    // Opset 18's keep_aspect_ratio_policy: the sizes of the covered axes
    // become one scale (the smallest or largest ratio), the result's size
    // round_half_up(scale * size), and that scale maps coordinates.
    const std::string policy = ctx.attrString("keep_aspect_ratio_policy", "stretch");
    if (!sizes->empty() && policy != "stretch") {
      std::vector<int64_t> covered;
      for (int64_t d = 0; d < rank; ++d)
        if (!axes || std::find(axes->begin(), axes->end(), d) != axes->end())
          covered.push_back(d);
      std::optional<double> scale;
      for (int64_t d : covered) {
        auto n = ctx.staticDim(x, d);
        if (!n)
          return {};
        double r = static_cast<double>((*sizes)[static_cast<size_t>(d)]) / static_cast<double>(*n);
        scale = !scale ? r : policy == "not_larger" ? std::min(*scale, r) : std::max(*scale, r);
      }
      std::vector<double> scales(static_cast<size_t>(rank), 1.0);
      for (int64_t d : covered) {
        scales[static_cast<size_t>(d)] = *scale;
        (*sizes)[static_cast<size_t>(d)] = static_cast<int64_t>(
            std::floor(*scale * static_cast<double>(*ctx.staticDim(x, d)) + 0.5));
      }
      std::erase_if(attrs, [](const NamedAttr &a) { return a.first == "scales"; });
      attrs.emplace_back("scales", std::move(scales));
    }
    if (!sizes->empty())
      attrs.emplace_back("sizes", *sizes);
  }
  return {ctx.create(OpKind::Resize, {x}, std::move(attrs))};
}

std::string checkUpsample(const onnx::NodeProto &node, int64_t) {
  std::string mode = attrStringOr(node, "mode", "nearest");
  if (mode != "nearest" && mode != "linear")
    return "mode '" + mode + "' is not supported";
  return "";
}

Values convertUpsample(NodeContext &ctx) {
  // Upsample-9: asymmetric coordinates; nearest rounds down.
  Value *x = ctx.input(0, "X");
  const Tensor *scales = ctx.constantInput(1, "scales");
  if (!scales)
    return {};
  return {ctx.create(OpKind::Resize, {x},
                     {{"mode", ctx.attrString("mode", "nearest")},
                      {"coordinate_transformation_mode", std::string("asymmetric")},
                      {"nearest_mode", std::string("floor")},
                      {"scales", scales->toDoubles()}})};
}

//===----------------------------------------------------------------------===//
// DepthToSpace / SpaceToDepth: reshape, transpose, reshape
//===----------------------------------------------------------------------===//

/// The static [C, H, W] of a 4-D NCHW input (N may be symbolic), or an error.
std::optional<Ints> staticCHW(NodeContext &ctx, Value *x) {
  if (!x)
    return std::nullopt;
  const Shape &s = x->type().shape;
  if (s.size() != 4 || !s[1].isStatic() || !s[2].isStatic() || !s[3].isStatic()) {
    ctx.emitError() << "needs a 4-D input with static C, H and W, got " << x->type().str();
    return std::nullopt;
  }
  return Ints{s[1].size(), s[2].size(), s[3].size()};
}

Values convertDepthToSpace(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  int64_t b = ctx.attrInt("blocksize", 0);
  std::string mode = ctx.attrString("mode", "DCR");
  auto chw = staticCHW(ctx, x);
  if (!chw)
    return {};
  auto [c, h, w] = std::tuple((*chw)[0], (*chw)[1], (*chw)[2]);
  if (b <= 0 || c % (b * b) != 0 || (mode != "DCR" && mode != "CRD")) {
    ctx.emitError() << "blocksize " << b << " and mode '" << mode << "' do not fit "
                    << x->type().str();
    return {};
  }
  int64_t oc = c / (b * b);
  bool dcr = mode == "DCR";
  Ints split = dcr ? Ints{0, b, b, oc, h, w} : Ints{0, oc, b, b, h, w};
  Ints perm = dcr ? Ints{0, 3, 4, 1, 5, 2} : Ints{0, 1, 4, 2, 5, 3};
  Value *y = ctx.create(OpKind::Reshape, {x}, {{"shape", split}});
  y = ctx.create(OpKind::Transpose, {y}, {{"perm", perm}});
  return {ctx.create(OpKind::Reshape, {y}, {{"shape", Ints{0, oc, h * b, w * b}}})};
}

/// SpaceToDepth; `mode` (opset 28) orders a block's entries depth-column-row
/// (DCR: depth index (bh * b + bw) * C + c, the only order before 28) or
/// column-row-depth (CRD: c * b * b + bh * b + bw).
Values convertSpaceToDepth(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  int64_t b = ctx.attrInt("blocksize", 0);
  std::string mode = ctx.attrString("mode", "DCR");
  auto chw = staticCHW(ctx, x);
  if (!chw)
    return {};
  auto [c, h, w] = std::tuple((*chw)[0], (*chw)[1], (*chw)[2]);
  if (b <= 0 || h % b != 0 || w % b != 0 || (mode != "DCR" && mode != "CRD")) {
    ctx.emitError() << "blocksize " << b << " and mode '" << mode
                    << "' do not fit the spatial dims of " << x->type().str();
    return {};
  }
  Value *y = ctx.create(OpKind::Reshape, {x}, {{"shape", Ints{0, c, h / b, b, w / b, b}}});
  y = ctx.create(OpKind::Transpose, {y},
                 {{"perm", mode == "DCR" ? Ints{0, 3, 5, 1, 2, 4} : Ints{0, 1, 3, 5, 2, 4}}});
  return {ctx.create(OpKind::Reshape, {y}, {{"shape", Ints{0, c * b * b, h / b, w / b}}})};
}

/// DepthToSpace's and (from 28) SpaceToDepth's `mode`.
std::string checkDepthToSpace(const onnx::NodeProto &node, int64_t) {
  std::string mode = attrStringOr(node, "mode", "DCR");
  return mode == "DCR" || mode == "CRD" ? "" : "mode '" + mode + "' is not supported";
}

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
    {"Concat", 11, convertConcat},
    {"Constant", 11, convertConstant, checkConstant},
    {"ConstantOfShape", 9, convertConstantOfShape},
    {"CumSum", 11, convertCumSum},
    {"DepthToSpace", 11, convertDepthToSpace, checkDepthToSpace},
    {"Expand", 8, convertExpand},
    {"EyeLike", 9, convertEyeLike, checkEyeLike},
    {"Flatten", 11, convertFlatten},
    {"Gather", 11, convertGather},
    {"OneHot", 11, convertOneHot},
    {"Pad", 11, convertPad, checkPad},
    {"Range", 11, convertRange, checkRange},
    {"Reshape", 5, convertReshape},
    {"Resize", 11, convertResize, checkResize},
    {"ScatterND", 11, convertScatterND},
    {"Shape", 1, convertShape},
    {"Size", 1, convertSize},
    {"Slice", 11, convertSlice},
    {"SpaceToDepth", 1, convertSpaceToDepth, checkDepthToSpace},
    {"Split", 11, convertSplit},
    {"Squeeze", 11, convertSqueeze},
    {"Tile", 6, convertTile},
    {"Transpose", 1, convertTranspose},
    {"Trilu", 14, convertTrilu},
    {"Unsqueeze", 11, convertUnsqueeze},
    {"Upsample", 9, convertUpsample, checkUpsample},
};

} // namespace

std::span<const Converter> shapeConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
