//===- OnnxControlFlow.cpp - Converters of ONNX If and Loop -----*- C++ -*-===//
//
// If and Loop map onto the region ops `if` and `loop` (ir/ops/ControlFlow.cpp,
// Note [Regions] in docs/IR.md). Their subgraphs are imported as regions by
// importRegion (OnnxImporter.cpp), which turns every value a subgraph reads
// from an enclosing scope into a region input and the op's operand, and
// copies a captured constant into the region instead:
//   - If: a condition known at import time imports the branch it selects
//     into the graph around it (importInline), and nothing else. Otherwise
//     both branches take the same captures, the then-branch's first
//     (importRegion's seed), then the ones only the else-branch reads, which
//     the then-branch takes as unused inputs;
//   - Loop: M and cond may be absent (INT64_MAX iterations; true); the body
//     takes (iteration, condition, carried..., captures...). A carried value
//     enters the body with the initial value's type; where the body gives
//     back a different dim, that dim becomes `?` and the body is imported
//     again (a value grown by torch.cat in a scripted loop), at most once
//     per dim.
// Scan and the sequence ops are not converted.
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"

#include <limits>

namespace kiln::onnximport {
namespace {

using Values = std::vector<Value *>;

/// The subgraph attribute `name` of the node, or an error.
const onnx::GraphProto *graphAttr(NodeContext &ctx, const char *name) {
  const onnx::AttributeProto *a = findAttr(ctx.proto(), name);
  if (!a || !a->has_g()) {
    ctx.emitError() << ctx.opType() << ": attribute '" << name << "' (a graph) is missing";
    return nullptr;
  }
  return &a->g();
}

Values convertIf(NodeContext &ctx) {
  Values none(ctx.numOutputs(), nullptr);
  Value *cond = ctx.input(0, "cond");
  const onnx::GraphProto *thenBody = graphAttr(ctx, "then_branch");
  const onnx::GraphProto *elseBody = graphAttr(ctx, "else_branch");
  if (!cond || !thenBody || !elseBody)
    return none;
  // A condition known at import time (a shape test the exporter wrote)
  // selects its branch; the other is not imported, so a branch that is
  // invalid for these shapes (and never runs) is no error.
  if (const Tensor *c = constantOf(cond); c && c->numel() == 1) {
    bool taken = c->getDouble(0) != 0;
    auto outs =
        importInline(ctx, taken ? *thenBody : *elseBody, taken ? "then_branch" : "else_branch");
    if (failed(outs))
      return none;
    if (outs->size() != ctx.numOutputs()) {
      ctx.emitError() << "If: the " << (taken ? "then" : "else") << " branch returns "
                      << outs->size() << " value(s) for " << ctx.numOutputs() << " output(s)";
      return none;
    }
    return outs.take();
  }
  auto thenRegion = importRegion(ctx, *thenBody, "then_branch", {}, {});
  if (failed(thenRegion))
    return none;
  std::vector<std::string> seed;
  for (const Capture &c : thenRegion->captures)
    seed.push_back(c.name);
  auto elseRegion = importRegion(ctx, *elseBody, "else_branch", {}, seed);
  if (failed(elseRegion))
    return none;
  // The else-branch took the then-branch's captures first, then its own.
  const std::vector<Capture> &captures = elseRegion->captures;
  for (size_t k = thenRegion->captures.size(); k < captures.size(); ++k)
    thenRegion->graph->addInput(captures[k].outer->type(), captures[k].name);
  Values operands{cond};
  for (const Capture &c : captures)
    operands.push_back(c.outer);
  return ctx.createMulti(OpKind::If, operands,
                         {{"then_branch", GraphAttr(std::move(thenRegion->graph))},
                          {"else_branch", GraphAttr(std::move(elseRegion->graph))}},
                         static_cast<unsigned>(ctx.numOutputs()));
}

/// The type of the body's scalar input `i` (iteration or condition): the
/// declared shape when it has one element, else a 0-d tensor.
TensorType scalarInputType(const onnx::GraphProto &body, int i, DType dtype) {
  if (i < body.input_size() && body.input(i).type().has_tensor_type() &&
      body.input(i).type().tensor_type().has_shape()) {
    const auto &shape = body.input(i).type().tensor_type().shape();
    if (shape.dim_size() == 1 && shape.dim(0).has_dim_value() && shape.dim(0).dim_value() == 1)
      return TensorType(dtype, std::vector<int64_t>{1});
  }
  return TensorType(dtype, std::vector<int64_t>{});
}

Values convertLoop(NodeContext &ctx) {
  Values none(ctx.numOutputs(), nullptr);
  const onnx::GraphProto *body = graphAttr(ctx, "body");
  if (!body)
    return none;
  Value *trip =
      ctx.hasInput(0)
          ? ctx.input(0, "M")
          : ctx.constant(Tensor::fromInts(DType::I64, {}, {std::numeric_limits<int64_t>::max()}));
  Value *cond =
      ctx.hasInput(1) ? ctx.input(1, "cond") : ctx.constant(Tensor::fromInts(DType::Bool, {}, {1}));
  Values carried;
  for (size_t i = 2; i < ctx.numInputs(); ++i)
    carried.push_back(ctx.input(i, "v_initial"));
  for (Value *v : carried)
    if (!v)
      return none;
  if (!trip || !cond)
    return none;
  const size_t n = carried.size();
  std::vector<TensorType> inputTypes{scalarInputType(*body, 0, DType::I64),
                                     scalarInputType(*body, 1, DType::Bool)};
  for (Value *v : carried)
    inputTypes.push_back(v->type());
  FailureOr<ImportedRegion> region = failure();
  // Each pass makes at least one more dim `?`; the body's carried outputs
  // then fit in at most one pass per dim.
  size_t maxPasses = 1;
  for (Value *v : carried)
    maxPasses += v->type().shape.size();
  for (size_t pass = 0; pass < maxPasses; ++pass) {
    region = importRegion(ctx, *body, "body", inputTypes, {});
    if (failed(region))
      return none;
    const std::vector<Value *> &outs = region->graph->outputs();
    if (outs.size() < 1 + n) {
      ctx.emitError() << "Loop: the body returns " << outs.size()
                      << " value(s), fewer than the condition and " << n << " carried";
      return none;
    }
    bool widened = false;
    for (size_t c = 0; c < n; ++c) {
      TensorType &in = inputTypes[2 + c];
      const TensorType &out = outs[1 + c]->type();
      if (out.dtype != in.dtype || out.rank() != in.rank())
        continue; // the op's inference reports it, at the node
      for (size_t d = 0; d < in.shape.size(); ++d)
        if (!in.shape[d].isDynamic() && out.shape[d] != in.shape[d]) {
          in.shape[d] = Dim::dynamic();
          widened = true;
        }
    }
    if (!widened)
      break;
  }
  Values operands{trip, cond};
  operands.insert(operands.end(), carried.begin(), carried.end());
  for (const Capture &c : region->captures)
    operands.push_back(c.outer);
  return ctx.createMulti(
      OpKind::Loop, operands,
      {{"body", GraphAttr(std::move(region->graph))}, {"num_carried", static_cast<int64_t>(n)}},
      static_cast<unsigned>(ctx.numOutputs()));
}

const Converter kConverters[] = {
    {"If", 11, convertIf},
    {"Loop", 11, convertLoop},
};

} // namespace

std::span<const Converter> controlFlowConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
