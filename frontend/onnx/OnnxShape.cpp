//===- OnnxShape.cpp - Converters of shape and data movement ops -*- C++ -*-===//
//
// Constant, Shape, Size, ConstantOfShape, Range, Reshape, Flatten,
// Transpose, Squeeze, Unsqueeze, Concat, Split, Slice, Gather, Expand, Tile,
// Pad, Resize, Upsample, DepthToSpace and SpaceToDepth.
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
  auto shape = ctx.intsInput(0, "input");
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

Values convertRange(NodeContext &ctx) {
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

Values convertReshape(NodeContext &ctx) {
  Value *x = ctx.input(0, "data");
  auto entries = ctx.shapeInput(1, "shape");
  if (!x || !entries)
    return {};
  bool allowZero = ctx.opset() >= 14 && ctx.attrInt("allowzero", 0) != 0;
  Ints shape;
  int unknown = 0;
  for (size_t i = 0; i < entries->size(); ++i) {
    const SymInt &e = (*entries)[i];
    if (e.isKnown()) {
      if (*e.value == 0 && allowZero) {
        ctx.emitError() << "allowzero=1 with a 0 in the shape is not supported";
        return {};
      }
      shape.push_back(*e.value);
      unknown += *e.value == -1;
    } else if (e.isDimOf(x, static_cast<int64_t>(i))) {
      shape.push_back(0); // copy the input's dim
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
      d << (i ? ", " : "")
        << (e.isKnown()        ? std::to_string(*e.value)
            : e.symbol.empty() ? "?"
                               : e.symbol);
    }
    d << "] of " << x->type().str() << " has more than one unknown dim";
    return {};
  }
  return {ctx.create(OpKind::Reshape, {x}, {{"shape", shape}})};
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
  return ctx.createMulti(OpKind::Split, {x}, {{"axis", axis}, {"sizes", sizes}}, n);
}

Values convertSlice(NodeContext &ctx) {
  Value *x = ctx.input(0, "data");
  auto starts = ctx.intsInput(1, "starts");
  auto ends = ctx.intsInput(2, "ends");
  std::optional<Ints> axes = Ints{}, steps = Ints{};
  if (ctx.hasInput(3))
    axes = ctx.intsInput(3, "axes");
  if (ctx.hasInput(4))
    steps = ctx.intsInput(4, "steps");
  if (!x || !starts || !ends || !axes || !steps)
    return {};
  Value *out =
      ctx.create(OpKind::Slice, {x},
                 {{"starts", *starts}, {"ends", *ends}, {"axes", *axes}, {"steps", *steps}});
  // A slice of a shape value: apply it to the entries (1-D, so axis 0).
  auto entries = ctx.shapeValueOf(x);
  if (out && entries && !constantOf(x) && starts->size() == 1) {
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
  Ints shape;
  int64_t offset = static_cast<int64_t>(entries->size()) - x->type().rank();
  for (size_t i = 0; i < entries->size(); ++i) {
    const SymInt &e = (*entries)[i];
    int64_t inDim = static_cast<int64_t>(i) - offset;
    if (e.isKnown()) {
      shape.push_back(*e.value);
    } else if (e.isDimOf(x, inDim)) {
      shape.push_back(1); // keeps the input's dim
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
  if (mode != "constant" && mode != "reflect" && mode != "edge")
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
  return {ctx.create(
      OpKind::Pad, {x},
      {{"pads", *pads}, {"mode", ctx.attrString("mode", "constant")}, {"value", *value}})};
}

std::string checkResize(const onnx::NodeProto &node, int64_t) {
  std::string mode = attrStringOr(node, "mode", "nearest");
  if (mode != "nearest" && mode != "linear")
    return "mode '" + mode + "' is not supported";
  std::string coord = attrStringOr(node, "coordinate_transformation_mode", "half_pixel");
  if (coord != "half_pixel" && coord != "asymmetric" && coord != "align_corners" &&
      coord != "pytorch_half_pixel")
    return "coordinate_transformation_mode '" + coord + "' is not supported";
  if (attrIntOr(node, "exclude_outside", 0) != 0)
    return "exclude_outside=1 is not supported";
  return "";
}

Values convertResize(NodeContext &ctx) {
  Value *x = ctx.input(0, "X");
  std::vector<NamedAttr> attrs{
      {"mode", ctx.attrString("mode", "nearest")},
      {"coordinate_transformation_mode",
       ctx.attrString("coordinate_transformation_mode", "half_pixel")},
      {"nearest_mode", ctx.attrString("nearest_mode", "round_prefer_floor")}};
  // Inputs: X, roi, scales, sizes; an empty scales tensor means "absent".
  if (ctx.hasInput(2)) {
    const Tensor *scales = ctx.constantInput(2, "scales");
    if (!scales)
      return {};
    if (scales->numel() > 0)
      attrs.emplace_back("scales", scales->toDoubles());
  }
  if (ctx.hasInput(3)) {
    auto sizes = ctx.intsInput(3, "sizes");
    if (!sizes)
      return {};
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

Values convertSpaceToDepth(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  int64_t b = ctx.attrInt("blocksize", 0);
  auto chw = staticCHW(ctx, x);
  if (!chw)
    return {};
  auto [c, h, w] = std::tuple((*chw)[0], (*chw)[1], (*chw)[2]);
  if (b <= 0 || h % b != 0 || w % b != 0) {
    ctx.emitError() << "blocksize " << b << " does not divide the spatial dims of "
                    << x->type().str();
    return {};
  }
  Value *y = ctx.create(OpKind::Reshape, {x}, {{"shape", Ints{0, c, h / b, b, w / b, b}}});
  y = ctx.create(OpKind::Transpose, {y}, {{"perm", Ints{0, 3, 5, 1, 2, 4}}});
  return {ctx.create(OpKind::Reshape, {y}, {{"shape", Ints{0, c * b * b, h / b, w / b}}})};
}

std::string checkDepthToSpace(const onnx::NodeProto &node, int64_t) {
  std::string mode = attrStringOr(node, "mode", "DCR");
  return mode == "DCR" || mode == "CRD" ? "" : "mode '" + mode + "' is not supported";
}

const Converter kConverters[] = {
    {"Concat", 11, 17, convertConcat},
    {"Constant", 11, 17, convertConstant, checkConstant},
    {"ConstantOfShape", 11, 17, convertConstantOfShape},
    {"DepthToSpace", 11, 17, convertDepthToSpace, checkDepthToSpace},
    {"Expand", 11, 17, convertExpand},
    {"Flatten", 11, 17, convertFlatten},
    {"Gather", 11, 17, convertGather},
    {"Pad", 11, 17, convertPad, checkPad},
    {"Range", 11, 17, convertRange},
    {"Reshape", 11, 17, convertReshape},
    {"Resize", 11, 17, convertResize, checkResize},
    {"Shape", 11, 17, convertShape},
    {"Size", 11, 17, convertSize},
    {"Slice", 11, 17, convertSlice},
    {"SpaceToDepth", 11, 17, convertSpaceToDepth},
    {"Split", 11, 17, convertSplit},
    {"Squeeze", 11, 17, convertSqueeze},
    {"Tile", 11, 17, convertTile},
    {"Transpose", 11, 17, convertTranspose},
    {"Unsqueeze", 11, 17, convertUnsqueeze},
    {"Upsample", 11, 17, convertUpsample, checkUpsample},
};

} // namespace

std::span<const Converter> shapeConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
