//===- OnnxRNN.cpp - LSTM, GRU and RNN as layers or unrolled -----*- C++ -*-===//
//
// A recurrent node with the default activations, no clip and constant f32
// weights (what PyTorch's nn.LSTM / nn.GRU / nn.RNN with tanh export)
// becomes one `lstm`, `gru` or `rnn` op (ir/ops/Recurrent.cpp), which the
// compiler runs as one call per layer. Any other node becomes primitive ops over its static
// sequence length, so that the steps fuse like any other elementwise code.
// Per direction d:
//
//   XW = matmul(X, transpose(W[d])) + bias        [S, B, G*H] (all steps)
//   for t in 0..S-1 (S-1..0 for the reverse direction):
//     g = gather(XW, t) + matmul(H, transpose(R[d]))   [B, G*H]
//     split g into the G gates, apply the activations, update H (and C)
//   Y   = concat_t(unsqueeze(H_t))                  [S, B, H]
//
// and the directions are stacked into Y [S, D, B, H], Y_h / Y_c [D, B, H].
// Gate order follows ONNX: LSTM i, o, f, c; GRU z, r, h. Missing initial
// states are zeros (of batch 1 when the batch is symbolic: broadcasting
// makes it [B, H] after the first step). The weight transposes and slices
// fold at import time. Supported: directions forward / reverse /
// bidirectional, layout 0 and 1, `clip`, activations Sigmoid / Tanh /
// Relu, GRU linear_before_reset 0 and 1, sequence_lens equal to the
// sequence length. Not supported: peepholes (LSTM input P), input_forget,
// other activations, ragged sequence_lens.
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/Internal.h"

namespace kiln::onnximport {
namespace {

using Values = std::vector<Value *>;

enum class Cell { LSTM, GRU, RNN };

Cell cellOf(const std::string &opType) {
  return opType == "LSTM" ? Cell::LSTM : opType == "GRU" ? Cell::GRU : Cell::RNN;
}
int numGates(Cell c) {
  return c == Cell::LSTM ? 4 : c == Cell::GRU ? 3 : 1;
}
std::vector<std::string> defaultActivations(Cell c) {
  if (c == Cell::LSTM)
    return {"Sigmoid", "Tanh", "Tanh"};
  if (c == Cell::GRU)
    return {"Sigmoid", "Tanh"};
  return {"Tanh"};
}

std::string checkRecurrent(const onnx::NodeProto &node, int64_t) {
  Cell cell = cellOf(node.op_type());
  std::string direction = attrStringOr(node, "direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return "direction '" + direction + "' is not supported";
  if (attrIntOr(node, "layout", 0) != 0 && attrIntOr(node, "layout", 0) != 1)
    return "layout " + std::to_string(attrIntOr(node, "layout", 0)) + " is not supported";
  if (cell == Cell::LSTM && attrIntOr(node, "input_forget", 0) != 0)
    return "input_forget=1 is not supported";
  if (cell == Cell::LSTM && node.input_size() > 7 && !node.input(7).empty())
    return "peepholes (input P) are not supported";
  if (const onnx::AttributeProto *a = findAttr(node, "activations"))
    for (const std::string &s : a->strings())
      if (s != "Sigmoid" && s != "Tanh" && s != "Relu")
        return "activation '" + s + "' is not supported";
  return "";
}

/// Everything one conversion needs.
class Unroller {
public:
  explicit Unroller(NodeContext &ctx) : ctx_(ctx), cell_(cellOf(ctx.opType())) {}

  Values run();

private:
  /// Whether the node is what the layer ops compute: default activations,
  /// no clip.
  bool isLayer() const;
  /// The node as one `lstm` / `gru` / `rnn` op on `x` (time major); fills
  /// ys_, hs_, cs_ with the stacked results.
  void emitLayer(Value *x);
  Value *index(int64_t i) { return ctx_.constant(Tensor::fromInts(DType::I64, {}, {i})); }
  /// `v[i]` along axis 0 (drops the axis).
  Value *pick(Value *v, int64_t i) {
    return ctx_.create(OpKind::Gather, {v, index(i)}, {{"axis", int64_t(0)}});
  }
  Value *transpose(Value *v, Ints perm) {
    return ctx_.create(OpKind::Transpose, {v}, {{"perm", std::move(perm)}});
  }
  Value *unsqueeze(Value *v, int64_t axis) {
    return ctx_.create(OpKind::Unsqueeze, {v}, {{"axes", Ints{axis}}});
  }
  Value *sliceLast(Value *v, int64_t begin, int64_t end) {
    return ctx_.create(OpKind::Slice, {v},
                       {{"starts", Ints{begin}}, {"ends", Ints{end}}, {"axes", Ints{-1}}});
  }
  Value *add(Value *a, Value *b) { return ctx_.create(OpKind::Add, {a, b}); }
  Value *mul(Value *a, Value *b) { return ctx_.create(OpKind::Mul, {a, b}); }
  /// Activation `k` of direction `dir`; `clip` applies to gate inputs only.
  Value *activate(Value *v, int64_t dir, int k, bool clipInput = true);
  Value *clip(Value *v) {
    if (!clip_)
      return v;
    return ctx_.create(OpKind::Clip, {v}, {{"min", -*clip_}, {"max", *clip_}});
  }
  /// Runs direction `d`; fills the hidden state per step and the finals.
  void runDirection(int64_t d, Value *x);

  NodeContext &ctx_;
  Cell cell_;
  int64_t hidden_ = 0, seqLen_ = 0, numDirections_ = 1;
  std::string direction_;
  std::vector<std::string> activations_;
  std::optional<double> clip_;
  bool linearBeforeReset_ = false;
  Value *w_ = nullptr, *r_ = nullptr, *b_ = nullptr, *h0_ = nullptr, *c0_ = nullptr;
  Value *zeros_ = nullptr;
  std::vector<Value *> ys_, hs_, cs_;
};

Value *Unroller::activate(Value *v, int64_t dir, int k, bool clipInput) {
  size_t perDir = defaultActivations(cell_).size();
  const std::string &name =
      activations_[static_cast<size_t>(dir) * perDir + static_cast<size_t>(k)];
  OpKind kind = name == "Sigmoid" ? OpKind::Sigmoid : name == "Tanh" ? OpKind::Tanh : OpKind::Relu;
  return ctx_.create(kind, {clipInput ? clip(v) : v});
}

void Unroller::runDirection(int64_t d, Value *x) {
  int64_t g = numGates(cell_), h = hidden_;
  Value *wt = transpose(pick(w_, d), {1, 0}); // [I, G*H]
  Value *rt = transpose(pick(r_, d), {1, 0}); // [H, G*H]
  Value *wb = nullptr, *rb = nullptr;
  if (b_) {
    Value *bd = pick(b_, d); // [2*G*H]
    wb = sliceLast(bd, 0, g * h);
    rb = sliceLast(bd, g * h, 2 * g * h);
  }
  Value *xw = ctx_.create(OpKind::MatMul, {x, wt}); // [S, B, G*H]
  if (b_)
    xw = add(xw, cell_ == Cell::GRU ? wb : add(wb, rb));
  Value *hPrev = h0_ ? pick(h0_, d) : zeros_;
  Value *cPrev = c0_ ? pick(c0_, d) : zeros_;
  // GRU with linear_before_reset = 0 applies R's h-gate block to r * H.
  Value *rtZR = nullptr, *rtH = nullptr, *rbZR = nullptr, *rbH = nullptr;
  if (cell_ == Cell::GRU && !linearBeforeReset_) {
    rtZR = sliceLast(rt, 0, 2 * h);
    rtH = sliceLast(rt, 2 * h, 3 * h);
    if (rb) {
      rbZR = sliceLast(rb, 0, 2 * h);
      rbH = sliceLast(rb, 2 * h, 3 * h);
    }
  }
  std::vector<Value *> steps(static_cast<size_t>(seqLen_), nullptr);
  bool reverse = direction_ == "reverse" || (direction_ == "bidirectional" && d == 1);
  for (int64_t i = 0; i < seqLen_; ++i) {
    int64_t t = reverse ? seqLen_ - 1 - i : i;
    Value *xt = pick(xw, t); // [B, G*H]
    if (cell_ == Cell::LSTM) {
      Value *gates = add(xt, ctx_.create(OpKind::MatMul, {hPrev, rt}));
      std::vector<Value *> p = ctx_.createMulti(OpKind::Split, {gates}, {{"axis", int64_t(-1)}}, 4);
      Value *in = activate(p[0], d, 0), *out = activate(p[1], d, 0);
      Value *forget = activate(p[2], d, 0), *cand = activate(p[3], d, 1);
      cPrev = add(mul(forget, cPrev), mul(in, cand));
      hPrev = mul(out, activate(cPrev, d, 2, /*clipInput=*/false));
    } else if (cell_ == Cell::GRU) {
      std::vector<Value *> xp = ctx_.createMulti(OpKind::Split, {xt}, {{"axis", int64_t(-1)}}, 3);
      Value *z, *r, *cand;
      if (linearBeforeReset_) {
        Value *hr = ctx_.create(OpKind::MatMul, {hPrev, rt});
        if (rb)
          hr = add(hr, rb);
        std::vector<Value *> hp = ctx_.createMulti(OpKind::Split, {hr}, {{"axis", int64_t(-1)}}, 3);
        z = activate(add(xp[0], hp[0]), d, 0);
        r = activate(add(xp[1], hp[1]), d, 0);
        cand = activate(add(xp[2], mul(r, hp[2])), d, 1);
      } else {
        Value *hzr = ctx_.create(OpKind::MatMul, {hPrev, rtZR});
        if (rbZR)
          hzr = add(hzr, rbZR);
        std::vector<Value *> hp =
            ctx_.createMulti(OpKind::Split, {hzr}, {{"axis", int64_t(-1)}}, 2);
        z = activate(add(xp[0], hp[0]), d, 0);
        r = activate(add(xp[1], hp[1]), d, 0);
        Value *hh = ctx_.create(OpKind::MatMul, {mul(r, hPrev), rtH});
        if (rbH)
          hh = add(hh, rbH);
        cand = activate(add(xp[2], hh), d, 1);
      }
      Value *one = ctx_.scalarLike(z, 1.0);
      hPrev = add(mul(ctx_.create(OpKind::Sub, {one, z}), cand), mul(z, hPrev));
    } else {
      hPrev = activate(add(xt, ctx_.create(OpKind::MatMul, {hPrev, rt})), d, 0);
    }
    steps[static_cast<size_t>(t)] = hPrev;
  }
  if (ctx_.isOutputUsed(0)) {
    std::vector<Value *> stacked;
    for (Value *s : steps)
      stacked.push_back(unsqueeze(s, 0));
    ys_.push_back(ctx_.create(OpKind::Concat, stacked, {{"axis", int64_t(0)}})); // [S, B, H]
  }
  hs_.push_back(hPrev);
  cs_.push_back(cPrev);
}

Values Unroller::run() {
  bool layoutBatchFirst = ctx_.attrInt("layout", 0) == 1;
  direction_ = ctx_.attrString("direction", "forward");
  numDirections_ = direction_ == "bidirectional" ? 2 : 1;
  activations_ = ctx_.attrStrings("activations");
  std::vector<std::string> defaults = defaultActivations(cell_);
  if (activations_.empty())
    for (int64_t d = 0; d < numDirections_; ++d)
      activations_.insert(activations_.end(), defaults.begin(), defaults.end());
  if (activations_.size() != defaults.size() * static_cast<size_t>(numDirections_)) {
    ctx_.emitError() << "expects " << defaults.size() * static_cast<size_t>(numDirections_)
                     << " activations, got " << activations_.size();
    return {};
  }
  if (ctx_.hasAttr("clip"))
    clip_ = ctx_.attrFloat("clip", 0.0);
  linearBeforeReset_ = ctx_.attrInt("linear_before_reset", 0) != 0;

  Value *x = ctx_.input(0, "X");
  w_ = ctx_.input(1, "W");
  r_ = ctx_.input(2, "R");
  b_ = ctx_.optionalInput(3);
  h0_ = ctx_.optionalInput(5);
  c0_ = cell_ == Cell::LSTM ? ctx_.optionalInput(6) : nullptr;
  if (!x || !w_ || !r_ || ctx_.failed())
    return {};
  if (layoutBatchFirst) {
    x = transpose(x, {1, 0, 2});
    if (h0_)
      h0_ = transpose(h0_, {1, 0, 2});
    if (c0_)
      c0_ = transpose(c0_, {1, 0, 2});
  }
  const Shape &xs = x->type().shape, &rs = r_->type().shape;
  if (xs.size() != 3 || rs.size() != 3 || !xs[0].isStatic() || !rs[2].isStatic()) {
    ctx_.emitError() << "needs X [seq, batch, input] with a static sequence length and R [dirs, "
                        "gates*hidden, hidden] with a static hidden size, got X "
                     << x->type().str() << " and R " << r_->type().str();
    return {};
  }
  seqLen_ = xs[0].size();
  hidden_ = rs[2].size();
  if (ctx_.hasAttr("hidden_size") && ctx_.attrInt("hidden_size", 0) != hidden_) {
    ctx_.emitError() << "hidden_size " << ctx_.attrInt("hidden_size", 0) << " does not match R "
                     << r_->type().str();
    return {};
  }
  if (ctx_.hasInput(4)) {
    auto lens = ctx_.intsInput(4, "sequence_lens");
    if (!lens)
      return {};
    for (int64_t l : *lens)
      if (l != seqLen_) {
        ctx_.emitError() << "sequence_lens " << *lens << " differ from the sequence length "
                         << seqLen_ << "; only full-length sequences are supported";
        return {};
      }
  }
  // Zero initial state: [B, H], or [1, H] (broadcast) when B is symbolic.
  int64_t batch = xs[1].isStatic() ? xs[1].size() : 1;
  zeros_ = ctx_.constant(Tensor::zeros(x->type().dtype, {batch, hidden_}));
  if (seqLen_ == 0) {
    ctx_.emitError() << "has an empty sequence";
    return {};
  }

  Value *y = nullptr, *yh = nullptr, *yc = nullptr;
  if (isLayer()) {
    emitLayer(x);
    if (ctx_.failed())
      return {};
    y = ys_[0];
    yh = hs_[0];
    yc = cell_ == Cell::LSTM ? cs_[0] : nullptr;
  } else {
    for (int64_t d = 0; d < numDirections_; ++d)
      runDirection(d, x);
    if (ctx_.failed())
      return {};
    auto stack = [&](const std::vector<Value *> &parts, int64_t axis) -> Value * {
      std::vector<Value *> u;
      for (Value *p : parts)
        u.push_back(unsqueeze(p, axis));
      return u.size() == 1 ? u[0] : ctx_.create(OpKind::Concat, u, {{"axis", axis}});
    };
    y = ys_.empty() ? nullptr : stack(ys_, 1); // [S, D, B, H]
    yh = stack(hs_, 0);                        // [D, B, H]
    yc = cell_ == Cell::LSTM ? stack(cs_, 0) : nullptr;
  }
  if (layoutBatchFirst) {
    if (y)
      y = transpose(y, {2, 0, 1, 3});
    yh = transpose(yh, {1, 0, 2});
    if (yc)
      yc = transpose(yc, {1, 0, 2});
  }
  return {y, yh, yc};
}

bool Unroller::isLayer() const {
  // Compiled, a layer op needs f32 constant weights (else it would run on
  // its reference kernel, slower than the unrolled ops).
  for (const Value *v : {w_, r_, b_})
    if (v && (v->type().dtype != DType::F32 || !v->definingNode() ||
              v->definingNode()->kind() != OpKind::Constant))
      return false;
  std::vector<std::string> defaults = defaultActivations(cell_);
  for (size_t i = 0; i < activations_.size(); ++i)
    if (activations_[i] != defaults[i % defaults.size()])
      return false;
  return !clip_;
}

void Unroller::emitLayer(Value *x) {
  const int64_t g = numGates(cell_);
  const Shape &xs = x->type().shape;
  Values operands{x, w_, r_};
  // Trailing operands only: a missing one before a given one is zeros.
  if (b_ || h0_ || c0_)
    operands.push_back(
        b_ ? b_ : ctx_.constant(Tensor::zeros(x->type().dtype, {numDirections_, 2 * g * hidden_})));
  if (h0_ || c0_) {
    Value *h0 = h0_;
    if (!h0 && xs[1].isStatic())
      h0 = ctx_.constant(Tensor::zeros(x->type().dtype, {numDirections_, xs[1].size(), hidden_}));
    else if (!h0)
      h0 = ctx_.create(OpKind::Mul, {c0_, ctx_.scalarLike(c0_, 0.0)});
    operands.push_back(h0);
  }
  if (c0_)
    operands.push_back(c0_);
  std::vector<NamedAttr> attrs{{"direction", direction_}};
  OpKind kind = OpKind::Rnn;
  if (cell_ == Cell::LSTM)
    kind = OpKind::Lstm;
  if (cell_ == Cell::GRU) {
    kind = OpKind::Gru;
    attrs.push_back({"linear_before_reset", linearBeforeReset_});
  }
  Values results = ctx_.createMulti(kind, operands, attrs, cell_ == Cell::LSTM ? 3 : 2);
  if (results.empty() || ctx_.failed())
    return;
  ys_.push_back(results[0]);
  hs_.push_back(results[1]);
  cs_.push_back(cell_ == Cell::LSTM ? results[2] : nullptr);
}

Values convertRecurrent(NodeContext &ctx) {
  return Unroller(ctx).run();
}

const Converter kConverters[] = {
    {"GRU", 7, convertRecurrent, checkRecurrent},
    {"LSTM", 7, convertRecurrent, checkRecurrent},
    {"RNN", 7, convertRecurrent, checkRecurrent},
};

} // namespace

std::span<const Converter> rnnConverters() {
  return kConverters;
}

} // namespace kiln::onnximport
