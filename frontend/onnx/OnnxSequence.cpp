//===- OnnxSequence.cpp - Converters of the ONNX sequence ops ---*- C++ -*-===//
//
// SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceErase,
// SequenceAt, SequenceLength, ConcatFromSequence and SplitToSequence, on
// the two forms Note [Sequences] (Internal.h) describes: a list known at
// import time, and a tensor stacking a Loop-carried sequence's elements on
// axis 0. A position must be known at import time on a list; a stacked
// sequence takes appends and reads at any position.
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"

namespace kiln::onnximport {

Value *stackList(ImportState &state, const Sequence &s, const std::string &what) {
  if (s.elems.empty()) {
    state.diag.emitError(state.builder.loc())
        << what << " is empty where Kiln needs its elements' shape (docs/ONNX.md, Sequences)";
    return nullptr;
  }
  std::vector<Value *> rows;
  for (Value *e : s.elems) {
    if (e->type() != s.elems[0]->type()) {
      state.diag.emitError(state.builder.loc())
          << what << " holds elements of two types (" << s.elems[0]->type().str() << " and "
          << e->type().str() << "); Kiln stacks the elements of one";
      return nullptr;
    }
    rows.push_back(state.builder.createValue(OpKind::Unsqueeze, {e}, {{"axes", Ints{0}}}));
    if (!rows.back())
      return nullptr;
  }
  return rows.size() == 1 ? rows[0]
                          : state.builder.createValue(OpKind::Concat, rows, {{"axis", int64_t(0)}});
}

Value *moveAxis0(NodeContext &ctx, Value *v, int64_t axis) {
  if (!v || axis == 0)
    return v;
  Ints perm;
  for (int64_t d = 1; d < v->type().rank(); ++d)
    perm.push_back(d);
  perm.insert(perm.begin() + axis, 0);
  return ctx.create(OpKind::Transpose, {v}, {{"perm", perm}});
}

Value *dimValue(NodeContext &ctx, Value *v, int64_t axis) {
  Value *dim = ctx.create(OpKind::ShapeOf, {v}, {{"start", axis}, {"end", axis + 1}});
  return ctx.create(OpKind::Reshape, {dim}, {{"shape", Ints{}}});
}

namespace {

using Values = std::vector<Value *>;

/// The position input `i` of a sequence of `n` elements, known at import
/// time, in [0, n] (`inclusiveEnd`: an insert) or [0, n); nullopt after an
/// error.
std::optional<int64_t> constantPosition(NodeContext &ctx, size_t i, int64_t n, bool inclusiveEnd) {
  auto p = ctx.scalarInput(i, "position");
  if (!p)
    return std::nullopt;
  int64_t pos = static_cast<int64_t>(*p);
  int64_t hi = inclusiveEnd ? n : n - 1;
  if (pos < -n || pos > hi) {
    ctx.emitError() << "position " << pos << " is out of range for a sequence of " << n
                    << " element(s)";
    return std::nullopt;
  }
  return pos < 0 ? pos + n : pos;
}

Values convertSequenceEmpty(NodeContext &ctx) {
  int64_t code = ctx.attrInt("dtype", onnx::TensorProto::FLOAT);
  auto dtype = dtypeFromOnnx(static_cast<int32_t>(code));
  if (!dtype) {
    ctx.emitError() << "dtype " << onnxTypeName(static_cast<int32_t>(code))
                    << " is not a Kiln dtype";
    return {nullptr};
  }
  return {ctx.sequence(Sequence::list(*dtype, {}))};
}

Values convertSequenceConstruct(NodeContext &ctx) {
  Values elems;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    Value *v = ctx.input(i, "inputs");
    if (!v)
      return {nullptr};
    if (!elems.empty() && v->type().dtype != elems[0]->type().dtype) {
      ctx.emitError() << "input " << i << " is " << v->type().str() << " but input 0 is "
                      << elems[0]->type().str() << " (a sequence has one dtype)";
      return {nullptr};
    }
    elems.push_back(v);
  }
  if (elems.empty()) {
    ctx.emitError() << "no inputs";
    return {nullptr};
  }
  const DType dtype = elems[0]->type().dtype;
  return {ctx.sequence(Sequence::list(dtype, std::move(elems)))};
}

Values convertSequenceInsert(NodeContext &ctx) {
  const Sequence *seq = ctx.sequenceInput(0, "input_sequence");
  Value *x = ctx.input(1, "tensor");
  if (!seq || !x)
    return {nullptr};
  if (x->type().dtype != seq->dtype) {
    ctx.emitError() << "tensor " << x->type().str() << " into a sequence of "
                    << dtypeName(seq->dtype);
    return {nullptr};
  }
  if (seq->stacked) {
    if (ctx.hasInput(2)) {
      ctx.emitError() << "a position into a sequence a Loop carries is not "
                         "supported (Kiln appends to one; docs/ONNX.md, Sequences)";
      return {nullptr};
    }
    Value *row = ctx.create(OpKind::Unsqueeze, {x}, {{"axes", Ints{0}}});
    Value *grown = ctx.create(OpKind::Concat, {seq->stacked, row}, {{"axis", int64_t(0)}});
    if (!grown)
      return {nullptr};
    // The elements appended so far: their dims where all agree, else `?`.
    TensorType appended = x->type();
    if (seq->appended && seq->appended->rank() == appended.rank())
      for (size_t d = 0; d < appended.shape.size(); ++d)
        if (seq->appended->shape[d] != appended.shape[d])
          appended.shape[d] = Dim::dynamic();
    return {ctx.sequence(Sequence::stackedIn(grown, appended))};
  }
  Values elems = seq->elems;
  const int64_t n = static_cast<int64_t>(elems.size());
  int64_t pos = n;
  if (ctx.hasInput(2)) {
    auto p = constantPosition(ctx, 2, n, true);
    if (!p)
      return {nullptr};
    pos = *p;
  }
  elems.insert(elems.begin() + pos, x);
  return {ctx.sequence(Sequence::list(seq->dtype, std::move(elems)))};
}

Values convertSequenceErase(NodeContext &ctx) {
  const Sequence *seq = ctx.sequenceInput(0, "input_sequence");
  if (!seq)
    return {nullptr};
  if (seq->stacked) {
    ctx.emitError() << "erasing from a sequence a Loop carries is not supported "
                       "(docs/ONNX.md, Sequences)";
    return {nullptr};
  }
  Values elems = seq->elems;
  const int64_t n = static_cast<int64_t>(elems.size());
  int64_t pos = n - 1;
  if (ctx.hasInput(1)) {
    auto p = constantPosition(ctx, 1, n, false);
    if (!p)
      return {nullptr};
    pos = *p;
  } else if (n == 0) {
    ctx.emitError() << "the sequence is empty";
    return {nullptr};
  }
  elems.erase(elems.begin() + pos);
  return {ctx.sequence(Sequence::list(seq->dtype, std::move(elems)))};
}

Values convertSequenceAt(NodeContext &ctx) {
  const Sequence *seq = ctx.sequenceInput(0, "input_sequence");
  if (!seq)
    return {nullptr};
  if (!seq->stacked) {
    auto p = constantPosition(ctx, 1, static_cast<int64_t>(seq->elems.size()), false);
    if (!p)
      return {nullptr};
    return {seq->elems[static_cast<size_t>(*p)]};
  }
  // A position the run computes: a gather on the stacked axis (negative
  // positions count from the end, as gather's indices do).
  Value *pos = ctx.input(1, "position");
  if (pos && pos->type().rank() != 0)
    pos = ctx.create(OpKind::Reshape, {pos}, {{"shape", Ints{}}});
  return {ctx.create(OpKind::Gather, {seq->stacked, pos}, {{"axis", int64_t(0)}})};
}

Values convertSequenceLength(NodeContext &ctx) {
  const Sequence *seq = ctx.sequenceInput(0, "input_sequence");
  if (!seq)
    return {nullptr};
  if (!seq->stacked)
    return {
        ctx.constant(Tensor::fromInts(DType::I64, {}, {static_cast<int64_t>(seq->elems.size())}))};
  return {dimValue(ctx, seq->stacked, 0)};
}

Values convertConcatFromSequence(NodeContext &ctx) {
  const Sequence *seq = ctx.sequenceInput(0, "input_sequence");
  if (!seq)
    return {nullptr};
  if (!ctx.hasAttr("axis")) {
    ctx.emitError() << "attribute 'axis' is missing";
    return {nullptr};
  }
  int64_t axis = ctx.attrInt("axis", 0);
  const bool newAxis = ctx.attrInt("new_axis", 0) != 0;
  if (!seq->stacked) {
    if (seq->elems.empty()) {
      ctx.emitError() << "the sequence is empty";
      return {nullptr};
    }
    Ints a{axis};
    if (!ctx.normalizeAxes(a, seq->elems[0]->type().rank() + (newAxis ? 1 : 0)))
      return {nullptr};
    Values parts;
    for (Value *e : seq->elems)
      parts.push_back(newAxis ? ctx.create(OpKind::Unsqueeze, {e}, {{"axes", Ints{a[0]}}}) : e);
    return {parts.size() == 1 ? parts[0] : ctx.create(OpKind::Concat, parts, {{"axis", a[0]}})};
  }
  // Stacked [n, e0, e1, ...]: the new axis is axis 0 moved to `axis`; a
  // concat along element axis `a` is that, merged with the axis after it.
  Value *t = seq->stacked;
  const int64_t elemRank = t->type().rank() - 1;
  Ints a{axis};
  if (!ctx.normalizeAxes(a, elemRank + (newAxis ? 1 : 0)))
    return {nullptr};
  Value *moved = moveAxis0(ctx, t, a[0]);
  if (newAxis || !moved)
    return {moved};
  std::vector<DimExpr> shape;
  for (int64_t d = 0; d < elemRank; ++d) {
    const Dim &dim = t->type().shape[static_cast<size_t>(d + 1)];
    if (d == a[0]) {
      shape.push_back(DimExpr(-1));
    } else if (dim.isDynamic()) {
      ctx.emitError() << "the elements' dim " << d << " is unknown (" << t->type().str()
                      << " stacked)";
      return {nullptr};
    } else {
      shape.push_back(*dim.expr());
    }
  }
  return {ctx.create(OpKind::Reshape, {moved}, {{"shape", shape}})};
}

Values convertSplitToSequence(NodeContext &ctx) {
  Value *x = ctx.input(0, "input");
  if (!x)
    return {nullptr};
  Ints a{ctx.attrInt("axis", 0)};
  if (!ctx.normalizeAxes(a, x->type().rank()))
    return {nullptr};
  auto dim = ctx.staticDim(x, a[0]);
  if (!dim)
    return {nullptr};
  Ints sizes;
  bool squeeze = false;
  if (!ctx.hasInput(1)) {
    sizes.assign(static_cast<size_t>(*dim), 1);
    squeeze = ctx.attrInt("keepdims", 1) == 0;
  } else {
    const Tensor *split = ctx.constantInput(1, "split");
    if (!split)
      return {nullptr};
    if (split->rank() == 0) {
      int64_t chunk = split->getInt(0);
      if (chunk <= 0) {
        ctx.emitError() << "split " << chunk << " must be positive";
        return {nullptr};
      }
      for (int64_t left = *dim; left > 0; left -= chunk)
        sizes.push_back(std::min(chunk, left));
    } else {
      int64_t sum = 0;
      for (int64_t i = 0; i < split->numel(); ++i) {
        sizes.push_back(split->getInt(i));
        sum += sizes.back();
        if (sizes.back() < 0)
          sum = -1;
      }
      if (sum != *dim) {
        ctx.emitError() << "split " << sizes << " does not sum to dim " << a[0] << " (" << *dim
                        << ") of " << x->type().str();
        return {nullptr};
      }
    }
  }
  Values elems;
  int64_t start = 0;
  for (int64_t size : sizes) {
    Value *piece = ctx.create(OpKind::Slice, {x},
                              {{"starts", Ints{start}}, {"ends", Ints{start + size}}, {"axes", a}});
    if (squeeze)
      piece = ctx.create(OpKind::Squeeze, {piece}, {{"axes", a}});
    if (!piece)
      return {nullptr};
    elems.push_back(piece);
    start += size;
  }
  return {ctx.sequence(Sequence::list(x->type().dtype, std::move(elems)))};
}

const Converter kConverters[] = {
    {"ConcatFromSequence", 11, convertConcatFromSequence},
    {"SequenceAt", 11, convertSequenceAt},
    {"SequenceConstruct", 11, convertSequenceConstruct},
    {"SequenceEmpty", 11, convertSequenceEmpty},
    {"SequenceErase", 11, convertSequenceErase},
    {"SequenceInsert", 11, convertSequenceInsert},
    {"SequenceLength", 11, convertSequenceLength},
    {"SplitToSequence", 11, convertSplitToSequence},
};

} // namespace

std::span<const Converter> sequenceConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
