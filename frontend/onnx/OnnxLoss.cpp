//===- OnnxLoss.cpp - Converters of the ONNX loss ops -----------*- C++ -*-===//
//
// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss, decomposed into
// Kiln ops as ONNX's reference defines them. For input (N, C, d1..dk) and
// target (N, d1..dk):
//
//   ignored = target == ignore_index        (all false without the attribute)
//   t       = where(ignored, 0, target)     (an in-range class everywhere)
//   picked  = squeeze(gather_elements(input, unsqueeze(t, 1), axis 1), 1)
//   w       = where(ignored, 0, gather(weight, t))   (weight given)
//           = where(ignored, 0, 1)                   (no weight, ignore_index)
//   loss    = -picked * w                   (-picked without either)
//   none: loss;  sum: sum(loss);  mean: sum(loss) / sum(w) when there is a
//   w, else mean(loss)
//
// SoftmaxCrossEntropyLoss is the same over log_softmax(scores, axis 1),
// which is also its optional second output. The loss at an ignored target
// is 0 (even where class 0's input is -inf). A target outside [0, C) that
// is not ignore_index is read as gathers read indices: from the end for
// [-C, 0), an error of the gather when the graph runs beyond that.
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"

namespace kiln::onnximport {
namespace {

using Values = std::vector<Value *>;

/// The loss of NegativeLogLikelihoodLoss over `input` (log-probabilities,
/// class axis 1), inputs 1 (target) and 2 (weight) of ctx's node.
Value *negativeLogLikelihood(NodeContext &ctx, Value *input) {
  Value *target = ctx.input(1, "target");
  Value *weight = ctx.optionalInput(2);
  const std::string reduction = ctx.attrString("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    ctx.emitError() << "reduction must be 'none', 'sum' or 'mean', got '" << reduction << "'";
    return nullptr;
  }
  if (!input || !target)
    return nullptr;
  const TensorType &in = input->type();
  const TensorType &tt = target->type();
  bool shapesFit = in.rank() >= 2 && tt.rank() == in.rank() - 1 && isInteger(tt.dtype) &&
                   tt.shape[0] == in.shape[0];
  for (int64_t i = 1; shapesFit && i < tt.rank(); ++i)
    shapesFit = tt.shape[static_cast<size_t>(i)] == in.shape[static_cast<size_t>(i + 1)];
  if (!shapesFit) {
    ctx.emitError() << "needs input (N, C, d1..dk) and an integer target (N, d1..dk), got "
                    << in.str() << " and " << tt.str();
    return nullptr;
  }
  if (weight && (weight->type().rank() != 1 || weight->type().dtype != in.dtype)) {
    ctx.emitError() << "weight must be a vector of " << dtypeName(in.dtype) << ", got "
                    << weight->type().str();
    return nullptr;
  }

  Value *ignored = nullptr;
  Value *t = target;
  if (ctx.hasAttr("ignore_index")) {
    Value *ignore = ctx.scalarLike(target, static_cast<double>(ctx.attrInt("ignore_index", 0)));
    ignored = ctx.create(OpKind::Equal, {target, ignore});
    t = ctx.create(OpKind::Where, {ignored, ctx.scalarLike(target, 0.0), target});
  }
  Value *index = ctx.create(OpKind::Unsqueeze, {t}, {{"axes", Ints{1}}});
  Value *picked = ctx.create(OpKind::Squeeze,
                             {ctx.create(OpKind::GatherElements, {input, index}, {{"axis", 1}})},
                             {{"axes", Ints{1}}});
  Value *loss = ctx.create(OpKind::Neg, {picked});

  Value *w = nullptr;
  if (weight)
    w = ctx.create(OpKind::Gather, {weight, t}, {{"axis", 0}});
  if (ignored)
    w = ctx.create(OpKind::Where,
                   {ignored, ctx.scalarLike(input, 0.0), w ? w : ctx.scalarLike(input, 1.0)});
  if (w)
    loss = ctx.create(OpKind::Mul, {loss, w});
  if (ignored)
    loss = ctx.create(OpKind::Where, {ignored, ctx.scalarLike(input, 0.0), loss});
  if (reduction == "none" || !loss)
    return loss;

  const std::vector<NamedAttr> whole = {{"keepdims", false}}; // every axis
  if (reduction == "mean" && !w)
    return ctx.create(OpKind::ReduceMean, {loss}, whole);
  Value *sum = ctx.create(OpKind::ReduceSum, {loss}, whole);
  if (reduction == "sum")
    return sum;
  return ctx.create(OpKind::Div, {sum, ctx.create(OpKind::ReduceSum, {w}, whole)});
}

Values convertNegativeLogLikelihoodLoss(NodeContext &ctx) {
  return {negativeLogLikelihood(ctx, ctx.input(0, "input"))};
}

Values convertSoftmaxCrossEntropyLoss(NodeContext &ctx) {
  Value *scores = ctx.input(0, "scores");
  Value *logProb = ctx.create(OpKind::LogSoftmax, {scores}, {{"axis", 1}});
  Value *loss = negativeLogLikelihood(ctx, logProb);
  if (ctx.numOutputs() > 1)
    return {loss, logProb};
  return {loss};
}

const Converter kConverters[] = {
    {"NegativeLogLikelihoodLoss", 12, convertNegativeLogLikelihoodLoss},
    {"SoftmaxCrossEntropyLoss", 12, convertSoftmaxCrossEntropyLoss},
};

} // namespace

std::span<const Converter> lossConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
