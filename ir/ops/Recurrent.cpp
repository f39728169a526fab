//===- Recurrent.cpp - lstm, gru and rnn layers ------------------*- C++ -*-===//
//
// Type inference and reference kernels of the recurrent layers, ONNX's
// LSTM, GRU and RNN (opset 14) with their default activations and no clip:
//
//   lstm(x, w, r, b?, h0?, c0?) {direction}                -> y, y_h, y_c
//   gru(x, w, r, b?, h0?) {direction, linear_before_reset} -> y, y_h
//   rnn(x, w, r, b?, h0?) {direction}                      -> y, y_h
//
//   x   [S, B, I]       the sequence (time major)
//   w   [D, G*H, I]     input weights, gates stacked: lstm i o f c,
//   r   [D, G*H, H]     recurrent weights              gru z r h, rnn i
//   b   [D, 2*G*H]      input biases then recurrent biases (zeros if absent)
//   h0  [D, B, H]       initial hidden state (zeros if absent); c0 likewise
//   y   [S, D, B, H]    the hidden state after every step
//   y_h [D, B, H]       the last hidden state; y_c the last cell state
//
// D is 2 for direction "bidirectional" (direction 0 forward, 1 reverse),
// else 1 ("forward", "reverse"). Per step, with a = x_t W^T + Wb and
// rec = h R^T + Rb split by gate:
//
//   lstm  i, o, f = sigmoid(a + rec) per gate, c~ = tanh(a_c + rec_c)
//         c = f * c + i * c~,  h = o * tanh(c)
//   gru   z, r = sigmoid(a + rec) per gate;
//         h~ = tanh(a_h + (r * h) R_h^T + Rb_h)   (linear_before_reset 0)
//         h~ = tanh(a_h + r * (h R_h^T + Rb_h))   (linear_before_reset 1)
//         h = (1 - z) * h~ + z * h
//   rnn   h = tanh(a + rec)
//
// Other activations, clip, peepholes and ragged sequence lengths are not
// this op: the ONNX importer unrolls those nodes into primitive ops
// (frontend/onnx/OnnxRNN.cpp). The reference kernels accumulate in double.
// Compiled, a layer is one call: Kiln's own kernel or a oneDNN RNN
// primitive, whichever is faster (codegen/cpu/dnnl/Recurrent.cpp).
//
//===----------------------------------------------------------------------===//
#include "ir/ops/Internal.h"

#include <cmath>

namespace kiln {
namespace {

using namespace ops;

enum class Cell { Lstm, Gru, Rnn };

int64_t numGates(Cell c) {
  return c == Cell::Lstm ? 4 : c == Cell::Gru ? 3 : 1;
}

FailureOr<int64_t> numDirections(const OpContext &ctx, const std::string &direction) {
  if (direction == "forward" || direction == "reverse")
    return int64_t(1);
  if (direction == "bidirectional")
    return int64_t(2);
  return ctx.emitError() << "direction '" << direction
                         << "' is not one of forward, reverse, bidirectional";
}

/// Checks that dim `i` of operand `op` is `want` (static, or assumed equal
/// when either is symbolic).
LogicalResult expectDim(const OpContext &ctx, unsigned op, size_t i, const Dim &want,
                        const char *what) {
  const TensorType &t = ctx.operandType(op);
  const Dim &d = t.shape[i];
  if (d.isStatic() && want.isStatic() && d.size() != want.size())
    return ctx.emitError() << "operand " << op << " (" << what << ") " << t.str() << " needs dim "
                           << i << " = " << want.size();
  ctx.assumeEqual(want, d);
  return success();
}

FailureOr<std::vector<TensorType>> inferRecurrent(const OpContext &ctx, Cell cell,
                                                  const std::string &direction) {
  static const char *const kNames[] = {"x", "w", "r", "b", "h0", "c0"};
  if (failed(requireFloat(ctx, 0)) || failed(requireSameDType(ctx)))
    return failure();
  for (unsigned i = 0; i < ctx.numOperands(); ++i) {
    int64_t rank = i == 3 ? 2 : 3;
    if (ctx.operandType(i).rank() != rank)
      return ctx.emitError() << "operand " << i << " (" << kNames[i] << ") must have rank " << rank
                             << ", got " << ctx.operandType(i).str();
  }
  auto dirs = numDirections(ctx, direction);
  if (failed(dirs))
    return failure();
  const TensorType &x = ctx.operandType(0), &r = ctx.operandType(2);
  const Dim &hidden = r.shape[2];
  if (!hidden.isStatic() || hidden.size() < 1)
    return ctx.emitError() << "operand 2 (r) " << r.str()
                           << " needs a static, non-zero hidden size (dim 2)";
  const int64_t h = hidden.size(), g = numGates(cell);
  const Dim d(*dirs), gh(g * h);
  if (failed(expectDim(ctx, 1, 0, d, "w")) || failed(expectDim(ctx, 1, 1, gh, "w")) ||
      failed(expectDim(ctx, 1, 2, x.shape[2], "w")) || failed(expectDim(ctx, 2, 0, d, "r")) ||
      failed(expectDim(ctx, 2, 1, gh, "r")))
    return failure();
  if (ctx.numOperands() > 3 &&
      (failed(expectDim(ctx, 3, 0, d, "b")) || failed(expectDim(ctx, 3, 1, Dim(2 * g * h), "b"))))
    return failure();
  for (unsigned i = 4; i < ctx.numOperands(); ++i)
    if (failed(expectDim(ctx, i, 0, d, kNames[i])) ||
        failed(expectDim(ctx, i, 1, x.shape[1], kNames[i])) ||
        failed(expectDim(ctx, i, 2, hidden, kNames[i])))
      return failure();
  const TensorType state(x.dtype, Shape{d, x.shape[1], hidden});
  std::vector<TensorType> out{TensorType(x.dtype, Shape{x.shape[0], d, x.shape[1], hidden}), state};
  if (cell == Cell::Lstm)
    out.push_back(state);
  return out;
}

double sigmoid(double v) {
  return 1.0 / (1.0 + std::exp(-v));
}

FailureOr<std::vector<Tensor>> referenceRecurrent(std::span<const Tensor> in,
                                                  std::span<const TensorType> resultTypes,
                                                  Cell cell, const std::string &direction,
                                                  bool linearBeforeReset) {
  const Tensor &x = in[0], &w = in[1], &r = in[2];
  const int64_t seq = x.dim(0), batch = x.dim(1), input = x.dim(2);
  const int64_t dirs = w.dim(0), g = numGates(cell), hid = r.dim(2), gh = g * hid;
  const Tensor *b = in.size() > 3 ? &in[3] : nullptr;
  const Tensor *h0 = in.size() > 4 ? &in[4] : nullptr;
  const Tensor *c0 = in.size() > 5 ? &in[5] : nullptr;
  std::vector<Tensor> out;
  for (const TensorType &t : resultTypes)
    out.push_back(Tensor::zeros(t.dtype, staticSizes(t.shape)));
  auto su = [](int64_t v) { return static_cast<size_t>(v); };
  std::vector<double> hState(su(batch * hid)), cState(su(batch * hid)), a(su(gh)), rec(su(gh)),
      hr(su(hid));
  for (int64_t d = 0; d < dirs; ++d) {
    const bool reverse = direction == "reverse" || d == 1;
    for (int64_t n = 0; n < batch * hid; ++n) {
      hState[su(n)] = h0 ? h0->getDouble(d * batch * hid + n) : 0.0;
      cState[su(n)] = c0 ? c0->getDouble(d * batch * hid + n) : 0.0;
    }
    auto wAt = [&](int64_t row, int64_t k) { return w.getDouble((d * gh + row) * input + k); };
    auto rAt = [&](int64_t row, int64_t k) { return r.getDouble((d * gh + row) * hid + k); };
    auto wb = [&](int64_t row) { return b ? b->getDouble(d * 2 * gh + row) : 0.0; };
    auto rb = [&](int64_t row) { return b ? b->getDouble(d * 2 * gh + gh + row) : 0.0; };
    for (int64_t step = 0; step < seq; ++step) {
      const int64_t t = reverse ? seq - 1 - step : step;
      for (int64_t n = 0; n < batch; ++n) {
        double *h = &hState[su(n * hid)], *c = &cState[su(n * hid)];
        for (int64_t row = 0; row < gh; ++row) {
          double sa = wb(row), sr = rb(row);
          for (int64_t k = 0; k < input; ++k)
            sa += x.getDouble((t * batch + n) * input + k) * wAt(row, k);
          for (int64_t k = 0; k < hid; ++k)
            sr += h[k] * rAt(row, k);
          a[su(row)] = sa;
          rec[su(row)] = sr;
        }
        if (cell == Cell::Gru && !linearBeforeReset) {
          // The candidate's recurrent term reads r * h.
          for (int64_t j = 0; j < hid; ++j)
            hr[su(j)] = sigmoid(a[su(hid + j)] + rec[su(hid + j)]) * h[j];
          for (int64_t j = 0; j < hid; ++j) {
            double s = rb(2 * hid + j);
            for (int64_t k = 0; k < hid; ++k)
              s += hr[su(k)] * rAt(2 * hid + j, k);
            rec[su(2 * hid + j)] = s;
          }
        }
        for (int64_t j = 0; j < hid; ++j) {
          auto gate = [&](int64_t k) { return a[su(k * hid + j)] + rec[su(k * hid + j)]; };
          if (cell == Cell::Lstm) {
            double i = sigmoid(gate(0)), o = sigmoid(gate(1)), f = sigmoid(gate(2));
            c[j] = f * c[j] + i * std::tanh(gate(3));
            h[j] = o * std::tanh(c[j]);
          } else if (cell == Cell::Gru) {
            double z = sigmoid(gate(0)), rr = sigmoid(gate(1));
            double cand = linearBeforeReset
                              ? std::tanh(a[su(2 * hid + j)] + rr * rec[su(2 * hid + j)])
                              : std::tanh(gate(2));
            h[j] = (1 - z) * cand + z * h[j];
          } else {
            h[j] = std::tanh(gate(0));
          }
        }
        for (int64_t j = 0; j < hid; ++j)
          out[0].setDouble(((t * dirs + d) * batch + n) * hid + j, h[j]);
      }
    }
    for (int64_t n = 0; n < batch * hid; ++n) {
      out[1].setDouble(d * batch * hid + n, hState[su(n)]);
      if (cell == Cell::Lstm)
        out[2].setDouble(d * batch * hid + n, cState[su(n)]);
    }
  }
  return out;
}

} // namespace

FailureOr<std::vector<TensorType>> inferLstm(const OpContext &ctx) {
  return inferRecurrent(ctx, Cell::Lstm, LstmOp(ctx).direction());
}
FailureOr<std::vector<Tensor>> referenceLstm(const OpContext &ctx, std::span<const Tensor> in,
                                             std::span<const TensorType> rt) {
  return referenceRecurrent(in, rt, Cell::Lstm, LstmOp(ctx).direction(), false);
}

FailureOr<std::vector<TensorType>> inferGru(const OpContext &ctx) {
  return inferRecurrent(ctx, Cell::Gru, GruOp(ctx).direction());
}
FailureOr<std::vector<Tensor>> referenceGru(const OpContext &ctx, std::span<const Tensor> in,
                                            std::span<const TensorType> rt) {
  GruOp op(ctx);
  return referenceRecurrent(in, rt, Cell::Gru, op.direction(), op.linear_before_reset());
}

FailureOr<std::vector<TensorType>> inferRnn(const OpContext &ctx) {
  return inferRecurrent(ctx, Cell::Rnn, RnnOp(ctx).direction());
}
FailureOr<std::vector<Tensor>> referenceRnn(const OpContext &ctx, std::span<const Tensor> in,
                                            std::span<const TensorType> rt) {
  return referenceRecurrent(in, rt, Cell::Rnn, RnnOp(ctx).direction(), false);
}

} // namespace kiln
