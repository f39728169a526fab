//===- LibraryStepMatrixTest.cpp - Library steps against the interpreter ===//
//
// The run-time steps that are not one op's kernel, each forced and compared
// with the reference interpreter at $KILN_TEST_CPU (OpMatrix.h): both
// implementations of a recurrent layer, concat pieces, attention calls; and
// their saved forms, damaged, refused.
//
//===----------------------------------------------------------------------===//
#include "codegen/cpu/dnnl/OneDnnSteps.h"
#include "ir/Builder.h"
#include "ir/Compare.h"
#include "ir/Interpreter.h"
#include "ir/Parser.h"
#include "runtime/dnnl/AttentionStep.h"
#include "runtime/dnnl/RecurrentStep.h"
#include "tests/unit/compiler/OpMatrix.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace kiln;
using namespace kiln::codegen;
using namespace kiln::testing;

namespace {

// Both implementations of a recurrent layer, each forced (the compiler
// otherwise keeps the faster, so one of them would go untested): Kiln's
// kernel (runtime/dnnl/RecurrentKernel.h, at the instruction set --cpu
// allows) and oneDNN's primitive, over the cells, directions, hidden sizes
// around the 16-lane vectors, batches around its 4-row blocks, with and
// without biases and initial states.
TEST(RecurrentMatrixTest, KilnKernelAndOneDnnPrimitiveEqualTheInterpreter) {
  if (std::string why = targetRefusal(); !why.empty())
    GTEST_SKIP() << why; // reason: $KILN_TEST_CPU cannot run on this host
  struct Sizes {
    int64_t seq, batch, input, hidden;
  };
  const Sizes shapes[] = {
      {1, 1, 1, 1}, {5, 3, 7, 17}, {4, 5, 70, 33}, {3, 2, 3, 64}, {2, 9, 130, 5}};
  const std::pair<OpKind, bool> cells[] = {
      {OpKind::Lstm, false}, {OpKind::Gru, true}, {OpKind::Gru, false}, {OpKind::Rnn, false}};
  std::mt19937 rng(11);
  auto uniform = [&](std::vector<int64_t> shape) {
    Tensor t = Tensor::zeros(DType::F32, shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.setDouble(i, std::uniform_real_distribution<double>(-1, 1)(rng));
    return t;
  };
  for (RecurrentChoice choice : {RecurrentChoice::Kiln, RecurrentChoice::Library})
    for (auto [kind, lbr] : cells)
      for (const char *direction : {"forward", "reverse", "bidirectional"}) {
        const OpInfo &op = opInfo(kind);
        const int64_t dirs = std::string(direction) == "bidirectional" ? 2 : 1;
        const int64_t gates = kind == OpKind::Lstm ? 4 : kind == OpKind::Gru ? 3 : 1;
        DiagnosticEngine diag;
        ScopedDiagnosticCollector collect(diag);
        auto g = std::make_unique<Graph>("recurrent");
        Builder builder(*g, diag);
        std::vector<Tensor> inputs;
        std::vector<Value *> outs;
        auto input = [&](Tensor t) {
          Value *v = g->addInput(TensorType(DType::F32, makeShape(t.shape())),
                                 "x" + std::to_string(inputs.size()));
          inputs.push_back(std::move(t));
          return v;
        };
        int variant = 0;
        for (const Sizes &s : shapes) {
          const int64_t gh = gates * s.hidden;
          std::vector<Value *> operands{input(uniform({s.seq, s.batch, s.input})),
                                        builder.constant(uniform({dirs, gh, s.input})),
                                        builder.constant(uniform({dirs, gh, s.hidden}))};
          // Every other shape has biases and initial states.
          if (variant++ % 2 == 1) {
            operands.push_back(builder.constant(uniform({dirs, 2 * gh})));
            operands.push_back(input(uniform({dirs, s.batch, s.hidden})));
            if (kind == OpKind::Lstm)
              operands.push_back(input(uniform({dirs, s.batch, s.hidden})));
          }
          std::vector<NamedAttr> attrs{{"direction", std::string(direction)}};
          if (kind == OpKind::Gru)
            attrs.push_back({"linear_before_reset", lbr});
          auto node = builder.create(kind, operands, attrs, op.numResults);
          ASSERT_TRUE(node.succeeded()) << collect.str();
          for (unsigned r = 0; r < (*node)->numResults(); ++r)
            outs.push_back((*node)->result(r));
        }
        g->setOutputs(outs);
        SCOPED_TRACE(std::string(op.mnemonic) + (lbr ? " lbr " : " ") + direction +
                     (choice == RecurrentChoice::Kiln ? " kiln" : " onednn") + " --cpu " +
                     testCpu());
        auto want = interpret(*g, inputs, diag);
        ASSERT_TRUE(want.succeeded()) << collect.str();
        CompileOptions opts;
        opts.recurrent = choice;
        CompileReport report;
        auto got = compileAndRun(*g, inputs, std::string(op.mnemonic), opts, &report);
        ASSERT_TRUE(got.has_value());
        EXPECT_EQ(report.numFallbacks, 0);
        // Kiln's kernel computes every cell but GRU with linear_before_reset 0.
        const bool kiln = choice == RecurrentChoice::Kiln && !(kind == OpKind::Gru && !lbr);
        EXPECT_EQ(report.libraryCalls.size(), std::size(shapes));
        for (const std::string &line : report.libraryCalls) // one per layer
          EXPECT_EQ(line.find(": kiln:") != std::string::npos, kiln) << line;
        for (size_t k = 0; k < want->size(); ++k) {
          std::string bad = compareStructured(op, (*got)[k], (*want)[k]);
          EXPECT_TRUE(bad.empty()) << "output " << k << ": " << bad;
        }
      }
}

// Kiln's recurrent kernel runs a bidirectional layer's directions on two
// threads when it may: the same bits as on one.
using runtime::onednn::RecurrentSpec;

/// A bidirectional layer of Kiln's kernel with initial states.
RecurrentSpec kilnBidirectional(RecurrentSpec::Cell cell, int64_t seq, int64_t batch, int64_t input,
                                int64_t hidden) {
  RecurrentSpec spec;
  spec.cell = cell;
  spec.direction = RecurrentSpec::Direction::Bidirectional;
  spec.impl = RecurrentSpec::Impl::Kiln;
  spec.seq = seq;
  spec.batch = batch;
  spec.input = input;
  spec.hidden = hidden;
  spec.hasH0 = true;
  spec.hasC0 = cell == RecurrentSpec::Cell::Lstm;
  return spec;
}

TEST(RecurrentMatrixTest, KilnKernelOnTwoThreadsGivesTheBitsOfOne) {
  for (RecurrentSpec::Cell cell :
       {RecurrentSpec::Cell::Lstm, RecurrentSpec::Cell::LbrGru, RecurrentSpec::Cell::Rnn}) {
    RecurrentSpec spec = kilnBidirectional(cell, 5, 3, 7, 17);
    spec.threads = 2;
    const int64_t d = 2, g = spec.gates(), h = spec.hidden;
    std::mt19937 rng(3);
    auto random = [&](int64_t n) {
      std::vector<float> v(static_cast<size_t>(n));
      for (float &x : v)
        x = std::uniform_real_distribution<float>(-1, 1)(rng);
      return v;
    };
    runtime::onednn::RecurrentStep step("rnn", spec, random(d * spec.input * g * h),
                                        random(d * h * g * h), random(d * spec.biasGates() * h));
    std::vector<float> x = random(spec.seq * spec.batch * spec.input);
    std::vector<float> h0 = random(d * spec.batch * h), c0 = random(d * spec.batch * h);
    auto run = [&](int threads) {
      std::vector<std::vector<float>> out{std::vector<float>(spec.seq * d * spec.batch * h),
                                          std::vector<float>(d * spec.batch * h),
                                          std::vector<float>(d * spec.batch * h)};
      std::vector<void *> buffers{x.data(), h0.data()};
      if (spec.hasC0)
        buffers.push_back(c0.data());
      for (size_t i = 0; i < (spec.hasC0 ? 3u : 2u); ++i)
        buffers.push_back(out[i].data());
      runtime::StepContext ctx;
      ctx.threads = threads;
      EXPECT_TRUE(step.run(buffers, ctx).ok());
      return out;
    };
    EXPECT_EQ(run(1), run(2)) << spec.cellName();
  }
}

// A saved recurrent step that is damaged (any byte of its parameters
// flipped, truncated, blobs or buffers of other sizes) is an error when
// loaded, never a crash or an oversized read.
TEST(RecurrentMatrixTest, DamagedSavedStepsAreErrors) {
  const RecurrentSpec spec = kilnBidirectional(RecurrentSpec::Cell::Lstm, 4, 2, 3, 5);
  const size_t f = sizeof(float);
  runtime::onednn::RecurrentStep step("lstm", spec, std::vector<float>(2 * 3 * 4 * 5, 0.5f),
                                      std::vector<float>(2 * 5 * 4 * 5, 0.25f),
                                      std::vector<float>(2 * 4 * 5, 0.f));
  runtime::SavedStep saved;
  std::string why;
  ASSERT_TRUE(step.save(saved, why)) << why;
  const size_t state = 2 * 2 * 5 * f;
  const std::vector<size_t> sizes{4 * 2 * 3 * f, state, state, 4 * 2 * 2 * 5 * f, state, state};
  auto load = [&](const std::string &payload, std::vector<std::span<const uint8_t>> blobs,
                  const std::vector<size_t> &buffers) {
    return runtime::onednn::loadRecurrentStep(payload, blobs, buffers, why);
  };
  ASSERT_NE(load(saved.payload, saved.blobs, sizes), nullptr) << why;
  for (size_t i = 0; i < saved.payload.size(); ++i)
    for (uint8_t mask : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xff)}) {
      std::string bad = saved.payload;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      if (load(bad, saved.blobs, sizes) == nullptr) {
        EXPECT_NE(why.find("recurrent step"), std::string::npos) << why;
      }
    }
  EXPECT_EQ(load(saved.payload.substr(0, saved.payload.size() - 1), saved.blobs, sizes), nullptr);
  std::vector<std::span<const uint8_t>> shortBlobs = saved.blobs;
  shortBlobs[1] = shortBlobs[1].subspan(4);
  EXPECT_EQ(load(saved.payload, shortBlobs, sizes), nullptr);
  std::vector<size_t> small = sizes;
  small[3] -= 4;
  EXPECT_EQ(load(saved.payload, saved.blobs, small), nullptr);
  EXPECT_EQ(load(saved.payload, saved.blobs, {sizes.begin(), sizes.end() - 1}), nullptr);
}

// A concat of computed operands along an outer axis runs as one kernel per
// operand (Note [Concat pieces]): along the first and a middle axis, two to
// four operands (exp, sin, a resize, a plain input), sizes around the
// vector width; compared with the interpreter, the pieces named in the
// steps.
TEST(ConcatPiecesTest, OneKernelPerComputedOperandEqualsTheInterpreter) {
  if (std::string why = targetRefusal(); !why.empty())
    GTEST_SKIP() << why; // reason: $KILN_TEST_CPU cannot run on this host
  std::mt19937 rng(5);
  for (int64_t w : {1, 15, 16, 17, 64})
    for (int64_t axis : {0, 1})
      for (int operands = 2; operands <= 4; ++operands) {
        DiagnosticEngine diag;
        ScopedDiagnosticCollector collect(diag);
        auto g = std::make_unique<Graph>("pieces");
        Builder b(*g, diag);
        std::vector<Tensor> inputs;
        std::vector<Value *> parts;
        for (int i = 0; i < operands; ++i) {
          std::vector<int64_t> shape{3, 2 + i, 32, w};
          if (i == 2) // upsampled from half the rows: a resize of a smaller input
            shape[2] = 16;
          Tensor t = Tensor::zeros(DType::F32, shape);
          for (int64_t e = 0; e < t.numel(); ++e)
            t.setDouble(e, std::uniform_real_distribution<double>(-2, 2)(rng));
          Value *x = g->addInput(TensorType(DType::F32, makeShape(shape)),
                                 "x" + std::to_string(inputs.size()));
          inputs.push_back(t);
          if (i == 0)
            x = b.createValue(OpKind::Exp, {x});
          else if (i == 1)
            x = b.createValue(OpKind::Sin, {x});
          else if (i == 2)
            x = b.createValue(OpKind::Resize, {x},
                              {{"mode", std::string("linear")}, {"sizes", Ints{3, 2 + i, 32, w}}});
          ASSERT_NE(x, nullptr) << collect.str();
          parts.push_back(x);
        }
        if (axis == 0) // the same shapes along the first axis
          for (Value *&p : parts)
            p = b.createValue(OpKind::Slice, {p},
                              {{"starts", Ints{0}}, {"ends", Ints{2}}, {"axes", Ints{1}}});
        g->setOutputs({b.createValue(OpKind::Concat, parts, {{"axis", axis}})});
        SCOPED_TRACE("w " + std::to_string(w) + " axis " + std::to_string(axis) + " operands " +
                     std::to_string(operands) + " --cpu " + testCpu());
        auto want = interpret(*g, inputs, diag);
        ASSERT_TRUE(want.succeeded()) << collect.str();
        CompileReport report;
        auto got = compileAndRun(*g, inputs, "concat pieces", {}, &report);
        ASSERT_TRUE(got.has_value());
        // Within exp's and sin's bound (4 ulps; resize and the copies are exact).
        std::string bad = compareStructured(opInfo(OpKind::Sin), (*got)[0], (*want)[0]);
        EXPECT_TRUE(bad.empty()) << bad;
        // Outputs of at least 4096 elements are split, one piece per operand.
        const int64_t elements = want->front().numel();
        EXPECT_EQ(report.steps.find("_part" + std::to_string(operands - 1)) != std::string::npos,
                  elements >= 4096)
            << report.steps;
      }
}

// Attention (Note [Attention calls] in codegen/Fusion.cpp): q k^T, scaled
// by a mul or a div, with an additive mask of several broadcast shapes (a
// causal one with -inf above the diagonal), softmax over the keys, times v;
// 3-D and 4-D, lengths around the vector width. Compiled equals the
// interpreter (within matmul's relative tolerance), and on this machine's
// own CPU the group is one "attention" call; where the probabilities are
// also a graph output it is not, and still equal.
TEST(AttentionTest, OneCallEqualsTheInterpreter) {
  if (std::string why = targetRefusal(); !why.empty())
    GTEST_SKIP() << why; // reason: $KILN_TEST_CPU cannot run on this host
  struct Case {
    std::vector<int64_t> batch;
    int64_t lq, lk, d, dv;
    int mask; // 0 none, 1 [lq, lk] causal (-inf), 2 [batch0, 1, lq, lk] input
    bool divide, probsOut;
  };
  const Case cases[] = {
      {{2}, 5, 7, 8, 3, 0, false, false},      {{2, 3}, 17, 17, 16, 16, 1, false, false},
      {{1, 2}, 1, 33, 4, 5, 0, true, false},   {{3}, 64, 64, 32, 32, 1, true, false},
      {{2, 4}, 16, 15, 8, 8, 2, false, false}, {{2, 2}, 9, 9, 4, 4, 1, false, true},
  };
  std::mt19937 rng(11);
  for (const Case &c : cases) {
    DiagnosticEngine diag;
    ScopedDiagnosticCollector collect(diag);
    auto g = std::make_unique<Graph>("attention");
    Builder b(*g, diag);
    std::vector<Tensor> inputs;
    auto input = [&](std::vector<int64_t> shape, const std::string &name) {
      Tensor t = Tensor::zeros(DType::F32, shape);
      for (int64_t e = 0; e < t.numel(); ++e)
        t.setDouble(e, std::normal_distribution<double>(0, 1)(rng));
      inputs.push_back(t);
      return g->addInput(TensorType(DType::F32, makeShape(shape)), name);
    };
    auto shape = [&](int64_t rows, int64_t cols) {
      std::vector<int64_t> s = c.batch;
      s.push_back(rows);
      s.push_back(cols);
      return s;
    };
    Value *q = input(shape(c.lq, c.d), "q"), *kt = input(shape(c.d, c.lk), "kt");
    Value *v = input(shape(c.lk, c.dv), "v");
    Value *scores = b.createValue(OpKind::MatMul, {q, kt});
    Tensor scale = Tensor::scalar(DType::F32, c.divide ? std::sqrt(double(c.d)) : 0.3);
    scores = b.createValue(c.divide ? OpKind::Div : OpKind::Mul, {scores, b.constant(scale)});
    if (c.mask == 1) {
      Tensor m = Tensor::zeros(DType::F32, {c.lq, c.lk});
      for (int64_t i = 0; i < c.lq; ++i)
        for (int64_t j = i + 1; j < c.lk; ++j)
          m.setDouble(i * c.lk + j, -std::numeric_limits<double>::infinity());
      scores = b.createValue(OpKind::Add, {scores, b.constant(m)});
    } else if (c.mask == 2) {
      scores = b.createValue(OpKind::Add, {scores, input({c.batch[0], 1, c.lq, c.lk}, "mask")});
    }
    Value *probs = b.createValue(OpKind::Softmax, {scores}, {{"axis", int64_t(-1)}});
    Value *out = b.createValue(OpKind::MatMul, {probs, v});
    ASSERT_NE(out, nullptr) << collect.str();
    if (c.probsOut)
      g->setOutputs({out, probs});
    else
      g->setOutputs({out});
    std::string label = "lq " + std::to_string(c.lq) + " lk " + std::to_string(c.lk) + " mask " +
                        std::to_string(c.mask) + " --cpu " + testCpu();
    SCOPED_TRACE(label);
    auto want = interpret(*g, inputs, diag);
    ASSERT_TRUE(want.succeeded()) << collect.str();
    CompileReport report;
    auto got = compileAndRun(*g, inputs, label, {}, &report);
    ASSERT_TRUE(got.has_value());
    for (size_t k = 0; k < want->size(); ++k) {
      std::string bad = compareStructured(opInfo(OpKind::MatMul), (*got)[k], (*want)[k]);
      EXPECT_TRUE(bad.empty()) << "output " << k << ": " << bad;
    }
    std::string calls;
    for (const std::string &line : report.libraryCalls)
      calls += line + "\n";
    if (testCpu() == "native") {
      EXPECT_EQ(calls.find("attention:") != std::string::npos, !c.probsOut) << calls;
    }
  }
}

// A saved attention step whose payload is damaged (each byte flipped), cut
// short, or given other buffers is an error when loaded, never a crash.
TEST(AttentionTest, DamagedSavedStepsAreErrors) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  Graph g("attention");
  Builder b(g, diag);
  Value *q = g.addInput(TensorType(DType::F32, makeShape({2, 6, 4})), "q");
  Value *kt = g.addInput(TensorType(DType::F32, makeShape({2, 4, 6})), "kt");
  Value *v = g.addInput(TensorType(DType::F32, makeShape({2, 6, 3})), "v");
  Value *s = b.createValue(OpKind::Mul, {b.createValue(OpKind::MatMul, {q, kt}),
                                         b.constant(Tensor::scalar(DType::F32, 0.5))});
  Value *p = b.createValue(OpKind::Softmax, {s}, {{"axis", int64_t(-1)}});
  g.setOutputs({b.createValue(OpKind::MatMul, {p, v})});
  if (std::string why = targetRefusal(); !why.empty())
    GTEST_SKIP() << why; // reason: $KILN_TEST_CPU cannot run on this host
  CompileOptions opts;
  opts.cpu = testCpu();
  opts.threads = 1;
  opts.cache = false;
  auto exe = compile(g, opts, diag);
  ASSERT_TRUE(exe.succeeded()) << collect.str();
  const runtime::Step *step = nullptr;
  for (const runtime::Step &st : (*exe)->steps())
    if (st.externStep && st.externStep->describe().rfind("onednn attention", 0) == 0)
      step = &st;
  ASSERT_NE(step, nullptr) << "no attention step";
  runtime::SavedStep saved;
  std::string why;
  ASSERT_TRUE(step->externStep->save(saved, why)) << why;
  std::vector<size_t> sizes;
  for (int32_t id : step->buffers)
    sizes.push_back((*exe)->buffers()[static_cast<size_t>(id)].byteSize());
  auto load = [&](const std::string &payload, const std::vector<size_t> &buffers) {
    return runtime::onednn::loadStep(saved.kind, payload, saved.blobs, buffers, nullptr, why);
  };
  ASSERT_NE(load(saved.payload, sizes), nullptr) << why;
  for (size_t i = 0; i < saved.payload.size(); ++i)
    for (uint8_t mask : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xff)}) {
      std::string bad = saved.payload;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      load(bad, sizes); // an error or a step that fits its buffers; no crash
    }
  EXPECT_EQ(load(saved.payload.substr(0, saved.payload.size() - 1), sizes), nullptr);
  std::vector<size_t> small = sizes;
  small.back() -= 4;
  EXPECT_EQ(load(saved.payload, small), nullptr);
  EXPECT_EQ(load(saved.payload, {sizes.begin(), sizes.end() - 1}), nullptr);
}

} // namespace

// A max_pool or avg_pool between convs reads and writes channels-last
// buffers and runs as a kernel (Note [Pools as kernels] in
// codegen/PoolKernel.cpp): windows of 1 and 2 spatial dims, kernels 1 to
// 3, strides 1 and 2, dilation 2, no, even and uneven padding, ceil_mode,
// count_include_pad, channels around the vector width; inputs with
// negative, huge, subnormal, infinite and NaN elements. The convs around
// it are depthwise 1x1 with weight 1 (exact, NaN and inf pass through),
// so the output is the pool's: max_pool's must equal the interpreter's
// bits, avg_pool's be within its bound.
TEST(PoolKernelTest, ChannelsLastPoolsEqualTheInterpreter) {
  if (std::string why = targetRefusal(); !why.empty())
    GTEST_SKIP() << why; // reason: $KILN_TEST_CPU cannot run on this host
  struct Case {
    int64_t k, stride, dilation, padBegin, padEnd;
    bool ceil, includePad;
  };
  const Case cases[] = {{3, 2, 1, 0, 0, true, false}, {3, 1, 1, 1, 1, false, false},
                        {3, 1, 1, 1, 1, false, true}, {2, 2, 1, 0, 0, false, false},
                        {3, 2, 2, 2, 1, true, false}, {1, 1, 1, 0, 0, false, false},
                        {3, 2, 1, 1, 0, true, true}};
  const float special[] = {-1e30f,
                           1e-40f,
                           -0.0f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN()};
  std::mt19937 rng(11);
  int kernels = 0;
  for (OpKind kind : {OpKind::MaxPool, OpKind::AvgPool})
    for (int64_t spatial : {1, 2})
      for (int64_t channels : {3, 16, 17})
        for (const Case &c : cases) {
          DiagnosticEngine diag;
          ScopedDiagnosticCollector collect(diag);
          auto g = std::make_unique<Graph>("pool");
          Builder b(*g, diag);
          std::vector<int64_t> shape{2, channels, 9};
          if (spatial == 2)
            shape.push_back(8);
          Tensor x = Tensor::zeros(DType::F32, shape);
          for (int64_t e = 0; e < x.numel(); ++e)
            x.setDouble(e, rng() % 7 == 0 ? special[rng() % 6]
                                          : std::uniform_real_distribution<double>(-3, 3)(rng));
          std::vector<int64_t> ws{channels, 1, 1};
          if (spatial == 2)
            ws.push_back(1);
          Tensor one = Tensor::zeros(DType::F32, ws);
          for (int64_t e = 0; e < one.numel(); ++e)
            one.setDouble(e, 1.0);
          auto identity = [&](Value *v) {
            return b.createValue(OpKind::Conv, {v, b.constant(one)}, {{"group", channels}});
          };
          Value *in = identity(g->addInput(TensorType(DType::F32, makeShape(shape)), "x"));
          const Ints window(static_cast<size_t>(spatial), c.k);
          Ints pads(static_cast<size_t>(spatial), c.padBegin);
          pads.insert(pads.end(), static_cast<size_t>(spatial), c.padEnd);
          std::vector<NamedAttr> attrs{
              {"kernel", window},
              {"strides", Ints(static_cast<size_t>(spatial), c.stride)},
              {"pads", pads},
              {"dilations", Ints(static_cast<size_t>(spatial), c.dilation)},
              {"ceil_mode", c.ceil}};
          if (kind == OpKind::AvgPool)
            attrs.push_back({"count_include_pad", c.includePad});
          Value *pooled = b.createValue(kind, {in}, attrs);
          ASSERT_NE(pooled, nullptr) << collect.str();
          g->setOutputs({identity(pooled)});
          SCOPED_TRACE(std::string(kind == OpKind::MaxPool ? "max" : "avg") + " spatial " +
                       std::to_string(spatial) + " channels " + std::to_string(channels) + " k " +
                       std::to_string(c.k) + " stride " + std::to_string(c.stride) + " dilation " +
                       std::to_string(c.dilation) + " pads " + std::to_string(c.padBegin) + "," +
                       std::to_string(c.padEnd) + (c.ceil ? " ceil" : "") +
                       (c.includePad ? " include_pad" : "") + " --cpu " + testCpu());
          const std::vector<Tensor> inputs{x};
          auto want = interpret(*g, inputs, diag);
          ASSERT_TRUE(want.succeeded()) << collect.str();
          CompileReport report;
          auto got = compileAndRun(*g, inputs, "pool kernel", {}, &report);
          ASSERT_TRUE(got.has_value());
          std::string bad = compareStructured(opInfo(kind), (*got)[0], (*want)[0]);
          EXPECT_TRUE(bad.empty()) << bad;
          kernels += report.numKernels == 1 && report.numLibraryCalls == 2;
        }
  // Every case ran as a kernel (a pool given to oneDNN would not be tested).
  EXPECT_EQ(kernels, 2 * 2 * 3 * 7);
}
