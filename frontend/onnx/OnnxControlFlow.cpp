//===- OnnxControlFlow.cpp - Converters of ONNX If, Loop, Scan --*- C++ -*-===//
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
//   - Scan: a `loop` over the scan axis of the first scan input, its body a
//     region built around the imported one (convertScan).
// A sequence a Loop carries enters and leaves the body stacked (Note
// [Sequences] in Internal.h).
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
    ctx.emitError() << "attribute '" << name << "' (a graph) is missing";
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
      ctx.emitError() << "the " << (taken ? "then" : "else") << " branch returns " << outs->size()
                      << " value(s) for " << ctx.numOutputs() << " output(s)";
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
  for (const ImportedRegion *r : {&*thenRegion, &*elseRegion})
    for (size_t k = 0; k < r->sequenceOutputs.size(); ++k)
      if (r->sequenceOutputs[k]) {
        ctx.emitError() << "output " << k
                        << " is a sequence, which Kiln imports only from a branch known at "
                           "import time (docs/ONNX.md, Sequences)";
        return none;
      }
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

/// The element rank the body declares for its sequence input `i`, or -1.
int64_t declaredElementRank(const onnx::GraphProto &body, int i) {
  if (i >= body.input_size() || !body.input(i).type().has_sequence_type())
    return -1;
  const auto &elem = body.input(i).type().sequence_type().elem_type();
  if (!elem.has_tensor_type() || !elem.tensor_type().has_shape())
    return -1;
  return elem.tensor_type().shape().dim_size();
}

/// An empty stacked sequence of `t`'s type with its `?` length 0: a
/// constant, or a constant_of_shape for symbolic element dims. nullptr
/// (with an error) when an element dim is unknown.
Value *emptyStack(NodeContext &ctx, const TensorType &t, size_t c) {
  std::vector<DimExpr> shape{DimExpr(0)};
  TensorType elems = t;
  elems.shape.erase(elems.shape.begin());
  for (size_t d = 1; d < t.shape.size(); ++d) {
    if (t.shape[d].isDynamic()) {
      ctx.emitError() << "carried sequence " << c
                      << " starts empty and the body appends elements of unknown shape (" << t.str()
                      << " stacked); Kiln needs the shape to start it";
      return nullptr;
    }
    shape.push_back(*t.shape[d].expr());
  }
  if (isStatic(elems.shape)) {
    std::vector<int64_t> sizes{0};
    for (size_t d = 1; d < t.shape.size(); ++d)
      sizes.push_back(t.shape[d].size());
    return ctx.constant(Tensor::zeros(t.dtype, sizes));
  }
  return ctx.create(OpKind::ConstantOfShape, {}, {{"shape", shape}, {"dtype", t.dtype}});
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
  if (!trip || !cond)
    return none;
  const size_t n = ctx.numInputs() - std::min<size_t>(ctx.numInputs(), 2);
  if (static_cast<size_t>(body->input_size()) != 2 + n) {
    ctx.emitError() << "body declares " << body->input_size() << " input(s), the op gives it 2 + "
                    << n << " carried";
    return none;
  }
  // A carried sequence (Note [Sequences]) enters the body stacked: its
  // initial value is a stacked sequence, or a list stacked here (an empty
  // one once the body says what it appends).
  Values carried(n, nullptr);
  std::vector<const Sequence *> seqs(n, nullptr);
  std::vector<TensorType> inputTypes{scalarInputType(*body, 0, DType::I64),
                                     scalarInputType(*body, 1, DType::Bool)};
  std::vector<unsigned> stackedInputs;
  for (size_t c = 0; c < n; ++c) {
    const Sequence *s =
        ctx.isSequenceInput(2 + c) ? ctx.sequenceInput(2 + c, "v_initial") : nullptr;
    if (ctx.failed())
      return none;
    if (!s) {
      carried[c] = ctx.input(2 + c, "v_initial");
      if (!carried[c])
        return none;
      inputTypes.push_back(carried[c]->type());
      continue;
    }
    seqs[c] = s;
    stackedInputs.push_back(static_cast<unsigned>(2 + c));
    if (!s->stacked && !s->elems.empty())
      carried[c] =
          stackList(ctx.state(), *s, "the initial value of carried sequence " + std::to_string(c));
    else
      carried[c] = s->stacked;
    TensorType t;
    if (carried[c]) {
      t = carried[c]->type();
    } else if (!ctx.failed()) {
      int64_t rank = declaredElementRank(*body, static_cast<int>(2 + c));
      if (rank < 0) {
        ctx.emitError() << "carried sequence " << c
                        << " starts empty and the body does not declare its element rank";
        return none;
      }
      t = TensorType(s->dtype, Shape(static_cast<size_t>(rank) + 1, Dim::dynamic()));
    }
    if (ctx.failed())
      return none;
    t.shape[0] = Dim::dynamic(); // the length grows
    inputTypes.push_back(std::move(t));
  }
  FailureOr<ImportedRegion> region = failure();
  // Each pass makes at least one more dim `?` (a carried value that
  // changes), or learns one of an empty sequence's element dims (once per
  // dim): the body's carried outputs then fit in a bounded number of passes.
  size_t maxPasses = 1;
  for (size_t c = 0; c < n; ++c)
    maxPasses += 2 * inputTypes[2 + c].shape.size();
  std::vector<std::vector<bool>> learned(n);
  for (size_t pass = 0; pass < maxPasses; ++pass) {
    region = importRegion(ctx, *body, "body", inputTypes, {}, stackedInputs);
    if (failed(region))
      return none;
    const std::vector<Value *> &outs = region->graph->outputs();
    if (outs.size() < 1 + n) {
      ctx.emitError() << "the body returns " << outs.size()
                      << " value(s), fewer than the condition and " << n << " carried";
      return none;
    }
    bool changed = false;
    for (size_t c = 0; c < n; ++c) {
      const std::optional<Sequence> &seqOut = region->sequenceOutputs[1 + c];
      if (bool(seqs[c]) != bool(seqOut)) {
        ctx.emitError() << "carried value " << c << " enters the body as a "
                        << (seqs[c] ? "sequence" : "tensor") << " but leaves it as a "
                        << (seqs[c] ? "tensor" : "sequence");
        return none;
      }
      TensorType &in = inputTypes[2 + c];
      TensorType out = outs[1 + c]->type();
      // What the body appended says more than the concat it made.
      if (seqOut && seqOut->appended && seqOut->appended->rank() + 1 == out.rank())
        for (size_t d = 1; d < out.shape.size(); ++d)
          if (out.shape[d].isDynamic())
            out.shape[d] = seqOut->appended->shape[d - 1];
      if (out.dtype != in.dtype || out.rank() != in.rank())
        continue; // the op's inference reports it, at the node
      learned[c].resize(in.shape.size(), false);
      for (size_t d = 0; d < in.shape.size(); ++d) {
        if (!in.shape[d].isDynamic() && out.shape[d] != in.shape[d]) {
          in.shape[d] = Dim::dynamic();
          changed = true;
        } else if (in.shape[d].isDynamic() && !out.shape[d].isDynamic() && d > 0 && !carried[c] &&
                   !learned[c][d]) {
          in.shape[d] = out.shape[d]; // an empty sequence's element dim
          learned[c][d] = changed = true;
        }
      }
    }
    if (!changed)
      break;
  }
  for (size_t c = 0; c < n; ++c)
    if (!carried[c] && !(carried[c] = emptyStack(ctx, inputTypes[2 + c], c)))
      return none;
  Values operands{trip, cond};
  operands.insert(operands.end(), carried.begin(), carried.end());
  for (const Capture &c : region->captures)
    operands.push_back(c.outer);
  Values results = ctx.createMulti(
      OpKind::Loop, operands,
      {{"body", GraphAttr(std::move(region->graph))}, {"num_carried", static_cast<int64_t>(n)}},
      static_cast<unsigned>(ctx.numOutputs()));
  for (size_t c = 0; c < n && c < results.size(); ++c)
    if (seqs[c] && results[c])
      results[c] = ctx.sequence(Sequence::stackedIn(results[c]));
  return results;
}

/// The scan inputs' common length along their scan axes: the first dim
/// that is not `?`. Two static lengths that differ are an error; symbolic
/// ones are taken to agree (a shorter input fails its gather at run time).
std::optional<Dim> scanLength(NodeContext &ctx, std::span<Value *const> scans, const Ints &axes) {
  std::optional<Dim> len;
  size_t from = 0;
  for (size_t j = 0; j < scans.size(); ++j) {
    const Dim &d = scans[j]->type().shape[static_cast<size_t>(axes[j])];
    if (d.isDynamic())
      continue;
    if (len && d.isStatic() && len->isStatic() && d.size() != len->size()) {
      ctx.emitError() << "scan input " << j << " has " << d.size()
                      << " elements along its scan axis, scan input " << from << " has "
                      << len->size();
      return std::nullopt;
    }
    if (!len) {
      len = d;
      from = j;
    }
  }
  return len ? *len : Dim::dynamic();
}

/// `attr` (one 0/1 entry per scan input or output), or an error.
std::optional<Ints> scanDirections(NodeContext &ctx, const char *attr, size_t count) {
  Ints dirs = ctx.attrInts(attr, Ints(count, 0));
  bool ok = dirs.size() == count;
  for (int64_t d : dirs)
    ok &= d == 0 || d == 1;
  if (!ok) {
    ctx.emitError() << attr << " " << dirs << " must have " << count
                    << " entries, each 0 (forward) or 1 (reverse)";
    return std::nullopt;
  }
  return dirs;
}

// Scan(states..., scans...) {body, num_scan_inputs} -> states..., scan outputs...
// becomes
//   loop(len, true, states..., scans..., captures..., [len]) {
//     (i, c, s..., full..., cap..., [n]) -> (true, body(s..., gather(full, i')..., cap...))
//   }
// where i' is i, or n-1-i for a reversed input (the trip count then enters
// the body last), and the gather along the input's scan axis drops it (an
// input shorter than the trip count fails it). The loop stacks the body's
// scan outputs on axis 0; a reversed output is then flipped and one with
// another axis has axis 0 moved there. Scan-8 (a batch axis,
// sequence_lens) has no converter.
Values convertScan(NodeContext &ctx) {
  Values none(ctx.numOutputs(), nullptr);
  const onnx::GraphProto *body = graphAttr(ctx, "body");
  if (!body)
    return none;
  if (!ctx.hasAttr("num_scan_inputs")) {
    ctx.emitError() << "attribute 'num_scan_inputs' is missing";
    return none;
  }
  int64_t m = ctx.attrInt("num_scan_inputs", -1);
  if (m < 1 || static_cast<size_t>(m) > ctx.numInputs()) {
    ctx.emitError() << "num_scan_inputs " << m << " is not in [1, " << ctx.numInputs()
                    << "] (the node has " << ctx.numInputs() << " inputs)";
    return none;
  }
  const size_t numScans = static_cast<size_t>(m), n = ctx.numInputs() - numScans;
  if (ctx.numOutputs() < n) {
    ctx.emitError() << ctx.numOutputs() << " output(s), fewer than the " << n
                    << " state variable(s)";
    return none;
  }
  const size_t numOuts = ctx.numOutputs() - n;
  Values states, scans;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    Value *v = ctx.input(i, i < n ? "initial state" : "scan input");
    if (!v)
      return none;
    (i < n ? states : scans).push_back(v);
  }
  Ints inAxes = ctx.attrInts("scan_input_axes", Ints(numScans, 0));
  Ints outAxes = ctx.attrInts("scan_output_axes", Ints(numOuts, 0));
  auto inDirs = scanDirections(ctx, "scan_input_directions", numScans);
  auto outDirs = scanDirections(ctx, "scan_output_directions", numOuts);
  if (!inDirs || !outDirs)
    return none;
  if (inAxes.size() != numScans || outAxes.size() != numOuts) {
    ctx.emitError() << "scan_input_axes " << inAxes << " and scan_output_axes " << outAxes
                    << " must have one entry per scan input (" << numScans << ") and output ("
                    << numOuts << ")";
    return none;
  }
  std::vector<TensorType> inputTypes;
  for (Value *s : states)
    inputTypes.push_back(s->type());
  for (size_t j = 0; j < numScans; ++j) {
    if (scans[j]->type().rank() == 0) {
      ctx.emitError() << "scan input " << j << " is a scalar, with no axis to scan";
      return none;
    }
    Ints axis{inAxes[j]};
    if (!ctx.normalizeAxes(axis, scans[j]->type().rank()))
      return none;
    inAxes[j] = axis[0];
    TensorType slice = scans[j]->type();
    slice.shape.erase(slice.shape.begin() + inAxes[j]);
    inputTypes.push_back(std::move(slice));
  }
  std::optional<Dim> len = scanLength(ctx, scans, inAxes);
  if (!len)
    return none;
  auto region = importRegion(ctx, *body, "body", inputTypes, {});
  if (failed(region))
    return none;
  if (region->graph->outputs().size() != n + numOuts) {
    ctx.emitError() << "the body returns " << region->graph->outputs().size() << " value(s) for "
                    << n << " state(s) and " << numOuts << " scan output(s)";
    return none;
  }

  // The loop's body: the slices of the scan inputs, then the Scan's body.
  auto loopBody = std::make_unique<Graph>("body");
  Builder b(*loopBody, ctx.state().diag);
  b.setLoc(ctx.loc());
  Value *iter = loopBody->addInput(TensorType(DType::I64, std::vector<int64_t>{}), "iteration");
  loopBody->addInput(TensorType(DType::Bool, std::vector<int64_t>{}), "condition");
  std::vector<Value *> args;
  for (size_t i = 0; i < n; ++i)
    args.push_back(loopBody->addInput(inputTypes[i], "state" + std::to_string(i)));
  Values fulls;
  for (size_t j = 0; j < numScans; ++j)
    fulls.push_back(loopBody->addInput(scans[j]->type(), "scan" + std::to_string(j)));
  Values captured;
  for (const Capture &c : region->captures)
    captured.push_back(loopBody->addInput(c.outer->type(), c.name));
  Value *trip = len->isStatic() ? ctx.constant(Tensor::fromInts(DType::I64, {}, {len->size()}))
                                : dimValue(ctx, scans[0], inAxes[0]);
  if (!trip)
    return none;
  Value *tripIn = nullptr;
  for (size_t j = 0; j < numScans; ++j) {
    Value *index = iter;
    if ((*inDirs)[j]) { // trip - 1 - i
      if (!tripIn)
        tripIn = loopBody->addInput(trip->type(), "trip");
      Value *one = b.constant(Tensor::fromInts(DType::I64, {}, {1}));
      index = b.createValue(OpKind::Sub, {b.createValue(OpKind::Sub, {tripIn, one}), iter});
    }
    args.push_back(b.createValue(OpKind::Gather, {fulls[j], index}, {{"axis", inAxes[j]}}));
  }
  args.insert(args.end(), captured.begin(), captured.end());
  for (Value *a : args)
    if (!a)
      return none;
  auto outs = inlineRegion(b, *region->graph, args);
  if (failed(outs))
    return none;
  Value *keepGoing = b.constant(Tensor::fromInts(DType::Bool, {}, {1}));
  outs->insert(outs->begin(), keepGoing);
  loopBody->setOutputs(outs.take());

  Values operands{trip, ctx.constant(Tensor::fromInts(DType::Bool, {}, {1}))};
  operands.insert(operands.end(), states.begin(), states.end());
  operands.insert(operands.end(), scans.begin(), scans.end());
  for (const Capture &c : region->captures)
    operands.push_back(c.outer);
  if (tripIn)
    operands.push_back(trip);
  Values results = ctx.createMulti(
      OpKind::Loop, operands,
      {{"body", GraphAttr(std::move(loopBody))}, {"num_carried", static_cast<int64_t>(n)}},
      static_cast<unsigned>(n + numOuts));
  for (size_t k = 0; k < numOuts; ++k) {
    Value *&out = results[n + k];
    if (!out)
      return none;
    // The loop runs `len` times: its stacked outputs have `len` rows.
    TensorType t = out->type();
    t.shape[0] = *len;
    out->setType(std::move(t));
    if ((*outDirs)[k])
      out = ctx.create(OpKind::Slice, {out},
                       {{"starts", Ints{-1}},
                        {"ends", Ints{std::numeric_limits<int64_t>::min()}},
                        {"axes", Ints{0}},
                        {"steps", Ints{-1}}});
    Ints axis{outAxes[k]};
    if (!out || !ctx.normalizeAxes(axis, out->type().rank()))
      return none;
    out = moveAxis0(ctx, out, axis[0]);
  }
  return results;
}

const Converter kConverters[] = {
    {"If", 11, convertIf},
    {"Loop", 11, convertLoop},
    {"Scan", 9, convertScan},
};

} // namespace

std::span<const Converter> controlFlowConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
