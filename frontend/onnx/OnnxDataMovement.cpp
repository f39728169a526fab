//===- OnnxDataMovement.cpp - CenterCropPad, Col2Im, ReverseSequence -*- C++ -*-===//
//
// Data-movement ops built from Kiln's slice, pad, gather and scatter:
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
//   Col2Im(x, image, block)  (18; PyTorch's nn.Fold) out[n, c, p] sums
//                            x[n, c * K + k, l] over the kernel offsets k
//                            and sliding positions l that land on image
//                            position p (l * stride - pad_begin + k *
//                            dilation, per spatial dim): a scatter_elements
//                            with reduction add along the flattened image,
//                            indices computed at import (image_shape and
//                            block_shape constant, x's dims 1 and 2
//                            static), positions off the image sent to one
//                            extra slot that is sliced away. Contributions
//                            add in ONNX's reference order (k, then l).
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

Values convertCol2Im(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  auto image = ctx.intsInput(1, "image_shape");
  auto block = ctx.intsInput(2, "block_shape");
  if (!x || !image || !block)
    return {};
  const size_t dims = image->size();
  const Ints strides = ctx.attrInts("strides", Ints(dims, 1));
  const Ints dilations = ctx.attrInts("dilations", Ints(dims, 1));
  const Ints pads = ctx.attrInts("pads", Ints(2 * dims, 0));
  if (dims == 0 || block->size() != dims || strides.size() != dims || dilations.size() != dims ||
      pads.size() != 2 * dims || x->type().rank() != 3) {
    ctx.emitError() << "needs an input of rank 3 and image_shape, block_shape, strides, "
                       "dilations (one per spatial dim) and pads (two per dim) that agree, got "
                    << x->type().str() << ", " << image->size() << " image dims, " << block->size()
                    << " block dims";
    return {};
  }
  auto cols = ctx.staticDim(x, 1), length = ctx.staticDim(x, 2);
  if (!cols || !length)
    return {};
  // The sliding positions per dim, and every spatial count.
  int64_t kernel = 1, pixels = 1, blocks = 1;
  Ints positions(dims);
  for (size_t d = 0; d < dims; ++d) {
    const int64_t span = dilations[d] * ((*block)[d] - 1) + 1;
    if ((*image)[d] <= 0 || (*block)[d] <= 0 || strides[d] <= 0 || dilations[d] <= 0) {
      ctx.emitError() << "image_shape, block_shape, strides and dilations must be positive";
      return {};
    }
    positions[d] = ((*image)[d] + pads[d] + pads[d + dims] - span) / strides[d] + 1;
    kernel *= (*block)[d];
    pixels *= (*image)[d];
    blocks *= std::max<int64_t>(positions[d], 0);
  }
  if (*cols % kernel != 0 || blocks != *length) {
    ctx.emitError() << "input " << x->type().str() << " needs dim 1 a multiple of the block size "
                    << kernel << " and dim 2 the " << blocks << " sliding positions";
    return {};
  }
  const int64_t channels = *cols / kernel;
  // index[k * L + l]: the flat image position of offset k at position l, or
  // `pixels` (the extra slot) off the image.
  Ints index;
  index.reserve(static_cast<size_t>(kernel * blocks));
  Ints k(dims, 0);
  for (int64_t kf = 0; kf < kernel; ++kf) {
    Ints l(dims, 0);
    for (int64_t lf = 0; lf < blocks; ++lf) {
      int64_t flat = 0;
      bool inside = true;
      for (size_t d = 0; d < dims; ++d) {
        const int64_t p = l[d] * strides[d] - pads[d] + k[d] * dilations[d];
        inside = inside && p >= 0 && p < (*image)[d];
        flat = flat * (*image)[d] + p;
      }
      index.push_back(inside ? flat : pixels);
      for (size_t d = dims; d-- > 0 && ++l[d] == positions[d];)
        l[d] = 0;
    }
    for (size_t d = dims; d-- > 0 && ++k[d] == (*block)[d];)
      k[d] = 0;
  }
  auto batch = x->type().shape[0].expr();
  if (!batch) {
    ctx.emitError() << "needs a known batch dim, got " << x->type().str();
    return {};
  }
  const std::vector<DimExpr> updatesShape = {*batch, DimExpr(channels), DimExpr(kernel * blocks)};
  Value *updates =
      ctx.create(OpKind::Reshape, {x}, {{"shape", Ints{0, channels, kernel * blocks}}});
  Value *indices = ctx.create(
      OpKind::Expand, {ctx.constant(Tensor::fromInts(DType::I64, {1, 1, kernel * blocks}, index))},
      {{"shape", updatesShape}});
  Value *zeros =
      ctx.create(OpKind::Expand, {ctx.scalarLike(x, 0.0)},
                 {{"shape", std::vector<DimExpr>{*batch, DimExpr(channels), DimExpr(pixels + 1)}}});
  Value *sum = ctx.create(OpKind::ScatterElements, {zeros, indices, updates},
                          {{"axis", int64_t(2)}, {"reduction", std::string("add")}});
  sum = ctx.create(OpKind::Slice, {sum},
                   {{"starts", Ints{0}}, {"ends", Ints{pixels}}, {"axes", Ints{2}}});
  Ints outShape = {0, channels};
  outShape.insert(outShape.end(), image->begin(), image->end());
  return {ctx.create(OpKind::Reshape, {sum}, {{"shape", outShape}})};
}

const Converter kConverters[] = {
    {"CenterCropPad", 18, convertCenterCropPad},
    {"Col2Im", 18, convertCol2Im},
    {"ReverseSequence", 10, convertReverseSequence},
};

} // namespace

std::span<const Converter> dataMovementConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
