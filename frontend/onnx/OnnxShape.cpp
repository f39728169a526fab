//===- OnnxShape.cpp - Converters of shape and data movement ops -*- C++ -*-===//
//
// Constant, Shape, Size, ConstantOfShape, Range, Reshape, Flatten,
// Transpose, Squeeze, Unsqueeze, Concat, Split, Slice, Gather, Expand, Tile,
// Pad, Resize, Upsample, DepthToSpace and SpaceToDepth. The ops built from
// constant masks and maps (Trilu, EyeLike, OneHot, CumSum, ScatterND) are
// in OnnxMasks.cpp.
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

const Converter kConverters[] = {
    {"Concat", 11, convertConcat},
    {"Constant", 11, convertConstant, checkConstant},
    {"ConstantOfShape", 9, convertConstantOfShape},
    {"DepthToSpace", 11, convertDepthToSpace, checkDepthToSpace},
    {"Expand", 8, convertExpand},
    {"Flatten", 11, convertFlatten},
    {"Gather", 11, convertGather},
    {"Pad", 11, convertPad, checkPad},
    {"Range", 11, convertRange, checkRange},
    {"Reshape", 5, convertReshape},
    {"Resize", 11, convertResize, checkResize},
    {"Shape", 1, convertShape},
    {"Size", 1, convertSize},
    {"Slice", 11, convertSlice},
    {"SpaceToDepth", 1, convertSpaceToDepth, checkDepthToSpace},
    {"Split", 11, convertSplit},
    {"Squeeze", 11, convertSqueeze},
    {"Tile", 6, convertTile},
    {"Transpose", 1, convertTranspose},
    {"Unsqueeze", 11, convertUnsqueeze},
    {"Upsample", 9, convertUpsample, checkUpsample},
};

} // namespace

std::span<const Converter> shapeConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
