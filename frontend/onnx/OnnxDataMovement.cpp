//===- OnnxDataMovement.cpp - CenterCropPad and ReverseSequence -*- C++ -*-===//
//
// Two data-movement ops built from Kiln's slice, pad and gather:
//
//   CenterCropPad(x, shape)  per axis of `axes`, to size s from size d: a
//                            slice [(d - s) / 2, that + s) when s < d, a
//                            zero pad of (s - d) / 2 before and the rest
//                            after when s > d (ONNX's reference); needs the
//                            shape constant and those dims static.
//   ReverseSequence(x, lens) out[t, b] = x[lens[b] - 1 - t, b] for
//                            t < lens[b], else x[t, b] (time and batch axes
//                            0 and 1, either way round): gather_elements
//                            along the time axis with indices from an iota
//                            and the lengths.
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"

namespace kiln::onnximport {
namespace {

using Values = std::vector<Value *>;

Values convertCenterCropPad(NodeContext &ctx) {
  Value *x = ctx.input(0, "input_data");
  auto shape = ctx.intsInput(1, "shape");
  if (!x || !shape)
    return {};
  const int64_t rank = x->type().rank();
  Ints axes = ctx.attrInts("axes", {});
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i)
      axes.push_back(i);
  if (!ctx.normalizeAxes(axes, rank))
    return {};
  if (axes.size() != shape->size()) {
    ctx.emitError() << "shape has " << shape->size() << " entries for " << axes.size() << " axes";
    return {};
  }
  Ints starts, ends, sliced;
  Ints pads(2 * static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = axes[i], want = (*shape)[i];
    auto have = ctx.staticDim(x, axis);
    if (!have)
      return {};
    if (want < 0) {
      ctx.emitError() << "shape entry " << i << " is negative (" << want << ")";
      return {};
    }
    if (want < *have) {
      const int64_t begin = (*have - want) / 2;
      starts.push_back(begin);
      ends.push_back(begin + want);
      sliced.push_back(axis);
    } else if (want > *have) {
      pads[static_cast<size_t>(axis)] = (want - *have) / 2;
      pads[static_cast<size_t>(axis + rank)] = want - *have - (want - *have) / 2;
    }
  }
  Value *y = x;
  if (!sliced.empty())
    y = ctx.create(OpKind::Slice, {y}, {{"starts", starts}, {"ends", ends}, {"axes", sliced}});
  if (std::any_of(pads.begin(), pads.end(), [](int64_t p) { return p != 0; }))
    y = ctx.create(OpKind::Pad, {y}, {{"pads", pads}});
  return {y};
}

Values convertReverseSequence(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  Value *lens = ctx.input(1, "sequence_lens");
  const int64_t batchAxis = ctx.attrInt("batch_axis", 1), timeAxis = ctx.attrInt("time_axis", 0);
  if (!x || !lens)
    return {};
  const int64_t rank = x->type().rank();
  if (rank < 2 || batchAxis == timeAxis || (batchAxis != 0 && batchAxis != 1) ||
      (timeAxis != 0 && timeAxis != 1)) {
    ctx.emitError() << "needs batch_axis and time_axis to be 0 and 1 of an input of rank >= 2, "
                       "got "
                    << batchAxis << " and " << timeAxis << " for " << x->type().str();
    return {};
  }
  if (lens->type().rank() != 1 || !isInteger(lens->type().dtype)) {
    ctx.emitError() << "sequence_lens must be an integer vector, got " << lens->type().str();
    return {};
  }
  auto time = x->type().shape[static_cast<size_t>(timeAxis)].expr();
  if (!time) {
    ctx.emitError() << "needs a known time dim, got " << x->type().str();
    return {};
  }
  // t: [T, 1] or [1, T]; len: the lengths along the batch axis; both then
  // broadcast over the trailing dims by expand.
  std::vector<DimExpr> iotaShape(static_cast<size_t>(rank), DimExpr(1));
  iotaShape[static_cast<size_t>(timeAxis)] = *time;
  Value *t = ctx.create(OpKind::Iota, {}, {{"shape", iotaShape}, {"axis", timeAxis}});
  Ints lensShape(static_cast<size_t>(rank), 1);
  lensShape[static_cast<size_t>(batchAxis)] = -1;
  Value *len = ctx.create(OpKind::Reshape, {ctx.castTo(lens, DType::I64)}, {{"shape", lensShape}});
  Value *reversed =
      ctx.create(OpKind::Sub, {ctx.create(OpKind::Sub, {len, ctx.scalarLike(len, 1)}), t});
  Value *index = ctx.create(OpKind::Where, {ctx.create(OpKind::Less, {t, len}), reversed, t});
  std::vector<DimExpr> full;
  for (const Dim &d : x->type().shape) {
    auto e = d.expr();
    if (!e) {
      ctx.emitError() << "needs known dims, got " << x->type().str();
      return {};
    }
    full.push_back(*e);
  }
  index = ctx.create(OpKind::Expand, {index}, {{"shape", full}});
  return {ctx.create(OpKind::GatherElements, {x, index}, {{"axis", timeAxis}})};
}

const Converter kConverters[] = {
    {"CenterCropPad", 18, convertCenterCropPad},
    {"ReverseSequence", 10, convertReverseSequence},
};

} // namespace

std::span<const Converter> dataMovementConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
