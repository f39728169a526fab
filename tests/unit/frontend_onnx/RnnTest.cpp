//===- RnnTest.cpp - LSTM, GRU and RNN unrolling ----------------*- C++ -*-===//
//
// The imported graphs run on the reference interpreter and are compared
// with a direct implementation of the ONNX equations (written here with
// plain loops), for every direction, with and without initial states and
// biases, and for both GRU variants: as the one `lstm` / `gru` / `rnn` op
// the importer makes of a node with the default activations, and unrolled
// into primitive ops (a node with a clip, here one no value reaches).
//
//===----------------------------------------------------------------------===//
#include "OnnxTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace kiln;
using namespace kiln::testing;

namespace {

std::vector<float> randomValues(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float &x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>((seed >> 8) % 2001) / 1000.0f - 1.0f;
  }
  return v;
}

double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}

enum class Kind { LSTM, GRU, RNN };

struct Case {
  Kind kind;
  std::string direction = "forward";
  bool bias = true, initial = false, linearBeforeReset = true;
  /// Sets clip = 1e30, which the layer ops do not take: unrolled.
  bool clip = false;
  int64_t seq = 3, batch = 2, input = 3, hidden = 2;
};

int gates(Kind k) {
  return k == Kind::LSTM ? 4 : k == Kind::GRU ? 3 : 1;
}

/// Expected Y [S, D, B, H] and Y_h [D, B, H] from the ONNX equations.
std::pair<std::vector<double>, std::vector<double>>
reference(const Case &c, const std::vector<float> &x, const std::vector<float> &w,
          const std::vector<float> &r, const std::vector<float> &b, const std::vector<float> &h0) {
  int64_t dirs = c.direction == "bidirectional" ? 2 : 1, g = gates(c.kind), H = c.hidden;
  std::vector<double> y(static_cast<size_t>(c.seq * dirs * c.batch * H)),
      yh(static_cast<size_t>(dirs * c.batch * H));
  for (int64_t d = 0; d < dirs; ++d) {
    bool rev = c.direction == "reverse" || d == 1;
    for (int64_t n = 0; n < c.batch; ++n) {
      std::vector<double> h(static_cast<size_t>(H), 0.0), cell(static_cast<size_t>(H), 0.0);
      if (c.initial)
        for (int64_t j = 0; j < H; ++j)
          h[j] = h0[static_cast<size_t>((d * c.batch + n) * H + j)];
      for (int64_t i = 0; i < c.seq; ++i) {
        int64_t t = rev ? c.seq - 1 - i : i;
        // xw[k] = W x + Wb, hr[k] = R h + Rb for each gate row k.
        std::vector<double> xw(static_cast<size_t>(g * H)), hr(static_cast<size_t>(g * H));
        for (int64_t k = 0; k < g * H; ++k) {
          double a = c.bias ? b[static_cast<size_t>(d * 2 * g * H + k)] : 0;
          for (int64_t q = 0; q < c.input; ++q)
            a += w[static_cast<size_t>((d * g * H + k) * c.input + q)] *
                 x[static_cast<size_t>((t * c.batch + n) * c.input + q)];
          xw[k] = a;
          double e = c.bias ? b[static_cast<size_t>(d * 2 * g * H + g * H + k)] : 0;
          for (int64_t q = 0; q < H; ++q)
            e += r[static_cast<size_t>((d * g * H + k) * H + q)] * h[q];
          hr[k] = e;
        }
        std::vector<double> hn(static_cast<size_t>(H));
        for (int64_t j = 0; j < H; ++j) {
          if (c.kind == Kind::LSTM) {
            double ig = sigmoid(xw[j] + hr[j]), og = sigmoid(xw[H + j] + hr[H + j]);
            double fg = sigmoid(xw[2 * H + j] + hr[2 * H + j]);
            double cg = std::tanh(xw[3 * H + j] + hr[3 * H + j]);
            cell[j] = fg * cell[j] + ig * cg;
            hn[j] = og * std::tanh(cell[j]);
          } else if (c.kind == Kind::GRU) {
            double z = sigmoid(xw[j] + hr[j]), rg = sigmoid(xw[H + j] + hr[H + j]);
            double cand;
            if (c.linearBeforeReset) {
              cand = std::tanh(xw[2 * H + j] + rg * hr[2 * H + j]);
            } else {
              double e = c.bias ? b[static_cast<size_t>(d * 2 * g * H + g * H + 2 * H + j)] : 0;
              for (int64_t q = 0; q < H; ++q) {
                double rq = sigmoid(xw[H + q] + hr[H + q]);
                e += r[static_cast<size_t>((d * g * H + 2 * H + j) * H + q)] * rq * h[q];
              }
              cand = std::tanh(xw[2 * H + j] + e);
            }
            hn[j] = (1 - z) * cand + z * h[j];
          } else {
            hn[j] = std::tanh(xw[j] + hr[j]);
          }
        }
        h = hn;
        for (int64_t j = 0; j < H; ++j)
          y[static_cast<size_t>(((t * dirs + d) * c.batch + n) * H + j)] = h[j];
      }
      for (int64_t j = 0; j < H; ++j)
        yh[static_cast<size_t>((d * c.batch + n) * H + j)] = h[j];
    }
  }
  return {y, yh};
}

void check(const Case &c) {
  const char *op = c.kind == Kind::LSTM ? "LSTM" : c.kind == Kind::GRU ? "GRU" : "RNN";
  int64_t dirs = c.direction == "bidirectional" ? 2 : 1, g = gates(c.kind), H = c.hidden;
  auto x = randomValues(static_cast<size_t>(c.seq * c.batch * c.input), 1);
  auto w = randomValues(static_cast<size_t>(dirs * g * H * c.input), 2);
  auto r = randomValues(static_cast<size_t>(dirs * g * H * H), 3);
  auto b = randomValues(static_cast<size_t>(dirs * 2 * g * H), 4);
  auto h0 = randomValues(static_cast<size_t>(dirs * c.batch * H), 5);

  ModelBuilder m(13);
  m.input("x", {c.seq, c.batch, c.input});
  m.init("w", {dirs, g * H, c.input}, w);
  m.init("r", {dirs, g * H, H}, r);
  std::vector<std::string> ins{"x", "w", "r", c.bias ? "b" : ""};
  if (c.bias)
    m.init("b", {dirs, 2 * g * H}, b);
  if (c.initial) {
    ins.push_back("");
    ins.push_back("h0");
    m.input("h0", {dirs, c.batch, H});
  }
  auto &n = m.node(op, ins, {"y", "yh"}, "rnn");
  attrInt(n, "hidden_size", H);
  attrString(n, "direction", c.direction);
  if (c.kind == Kind::GRU)
    attrInt(n, "linear_before_reset", c.linearBeforeReset);
  if (c.clip)
    attrFloat(n, "clip", 1e30f);
  m.output("y");
  m.output("yh");
  auto imported = importModel(m);
  ASSERT_TRUE(imported.ok) << imported.errors;
  const std::string layer = c.kind == Kind::LSTM  ? " = lstm("
                            : c.kind == Kind::GRU ? " = gru("
                                                  : " = rnn(";
  EXPECT_EQ(imported.text.find(layer) != std::string::npos, !c.clip) << imported.text;

  std::vector<Tensor> inputs{Tensor::fromDoubles(DType::F32, {c.seq, c.batch, c.input},
                                                 std::vector<double>(x.begin(), x.end()))};
  if (c.initial)
    inputs.push_back(Tensor::fromDoubles(DType::F32, {dirs, c.batch, H},
                                         std::vector<double>(h0.begin(), h0.end())));
  auto outs = runGraph(*imported.module, inputs);
  ASSERT_EQ(outs.size(), 2u);
  auto [wantY, wantH] = reference(c, x, w, r, b, h0);
  EXPECT_EQ(outs[0].shape(), (std::vector<int64_t>{c.seq, dirs, c.batch, H}));
  EXPECT_EQ(outs[1].shape(), (std::vector<int64_t>{dirs, c.batch, H}));
  for (size_t i = 0; i < wantY.size(); ++i)
    EXPECT_NEAR(outs[0].getDouble(static_cast<int64_t>(i)), wantY[i], 1e-5) << op << " Y " << i;
  for (size_t i = 0; i < wantH.size(); ++i)
    EXPECT_NEAR(outs[1].getDouble(static_cast<int64_t>(i)), wantH[i], 1e-5) << op << " Y_h " << i;
}

TEST(OnnxRnnTest, LSTM) {
  check({Kind::LSTM});
  check({Kind::LSTM, "reverse"});
  check({Kind::LSTM, "bidirectional", true, true});
  check({Kind::LSTM, "forward", false, true});
}

TEST(OnnxRnnTest, GRU) {
  check({Kind::GRU});
  check({Kind::GRU, "bidirectional", true, true});
  check({Kind::GRU, "forward", true, true, /*linearBeforeReset=*/false});
  check({Kind::GRU, "reverse", false, false, false});
}

TEST(OnnxRnnTest, RNN) {
  check({Kind::RNN});
  check({Kind::RNN, "bidirectional", true, true});
}

TEST(OnnxRnnTest, Unrolled) {
  for (Kind k : {Kind::LSTM, Kind::GRU, Kind::RNN}) {
    Case c{k, "bidirectional", true, true};
    c.clip = true;
    check(c);
    c = Case{k, "reverse", false, false, false};
    c.clip = true;
    check(c);
  }
}

TEST(OnnxRnnTest, UnsupportedAttributesAreListed) {
  ModelBuilder m(13);
  m.input("x", {int64_t(2), int64_t(1), int64_t(1)});
  auto &n = m.node("LSTM", {"x", "w", "r", "", "", "", "", "p"}, {"y"}, "lstm");
  attrInt(n, "input_forget", 1);
  m.init("w", {1, 4, 1}, std::vector<float>(4, 0));
  m.init("r", {1, 4, 1}, std::vector<float>(4, 0));
  m.init("p", {1, 3}, std::vector<float>(3, 0));
  m.output("y");
  EXPECT_EQ(importModel(m).errors,
            "error: m.onnx: 1 node uses ONNX ops or attributes that Kiln does not support: LSTM\n"
            "m.onnx: node 'lstm': note: 'LSTM' (opset 13) input_forget=1 is not supported");
}

TEST(OnnxRnnTest, NeedsAStaticSequenceLength) {
  ModelBuilder m(13);
  m.input("x", {std::string("seq"), int64_t(1), int64_t(1)});
  m.node("RNN", {"x", "w", "r"}, {"y"}, "rnn");
  m.init("w", {1, 1, 1}, {1});
  m.init("r", {1, 1, 1}, {1});
  m.output("y");
  EXPECT_EQ(importModel(m).errors,
            "m.onnx: node 'rnn': error: RNN: needs X [seq, batch, input] with a static sequence "
            "length and R [dirs, gates*hidden, hidden] with a static hidden size, got X "
            "f32[seq,1,1] and R f32[1,1,1]");
}

} // namespace
