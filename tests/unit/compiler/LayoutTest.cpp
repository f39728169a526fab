//===- LayoutTest.cpp - Channels-last buffers and collapsed matmuls -*- C++ -*-===//
//
// Note [Channels-last buffers] (codegen/ExecutableBuilder.cpp): conv/pool results
// whose every use is a conv/pool src or an epilogue residual are stored
// NHWC, any other reader gets a row-major twin from a to-row-major step.
// And the oneDNN matmul changes: x[..., M, K] @ W[K, N] with a constant
// 2-D W runs as one 2-D GEMM (broadcastDims maps epilogue operands onto the
// collapsed rows), reference implementations are refused when a shorter
// epilogue avoids them, and epilogue nodes oneDNN does not take run as one
// JIT kernel instead of reference fallbacks.
//
// Every case is compiled at 1 and 2 threads and compared with the reference
// interpreter on random inputs (|got - want| <= 1e-4 * max(1, |want|)); the
// layout claims are checked on the report's library-call lines and steps.
//
//===----------------------------------------------------------------------===//
#include "codegen/Compiler.h"
#include "codegen/cpu/dnnl/OneDnnSteps.h"
#include "ir/Builder.h"
#include "ir/Interpreter.h"
#include "ir/Parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <thread>

using namespace kiln;
using namespace kiln::codegen;

namespace {

Tensor randomTensor(const std::vector<int64_t> &shape, std::mt19937 &rng, double scale = 1.0) {
  Tensor t = Tensor::zeros(DType::F32, shape);
  std::uniform_real_distribution<double> real(-scale, scale);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setDouble(i, real(rng));
  return t;
}

/// Empty when |got - want| <= 1e-4 * max(1, |want|) everywhere.
std::string compare(const Tensor &got, const Tensor &want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return "type " + got.str() + " vs " + want.str();
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double a = got.getDouble(i), b = want.getDouble(i);
    if (!(std::fabs(a - b) <= 1e-4 * std::max(1.0, std::fabs(b)))) {
      if (first < 0)
        first = i;
      ++bad;
    }
  }
  if (!bad)
    return "";
  return std::to_string(bad) + " of " + std::to_string(want.numel()) +
         " elements differ; first: element " + std::to_string(first) + ": got " +
         std::to_string(got.getDouble(first)) + ", want " + std::to_string(want.getDouble(first));
}

std::string joinLines(const std::vector<std::string> &lines) {
  std::string s;
  for (const std::string &l : lines)
    s += l + "\n";
  return s;
}

/// One compile and run.
struct Outcome {
  bool compiled = false;
  /// Empty when every output matched.
  std::string mismatch;
  CompileReport report;

  /// Steps, library calls and fallbacks, for failure messages.
  std::string dump() const {
    return "steps:\n" + report.steps + "library calls:\n" + joinLines(report.libraryCalls) +
           "fallbacks:\n" + joinLines(report.fallbacks);
  }
};

Outcome compileAndCompare(const Graph &g, int threads, const CompileOptions &base = {},
                          unsigned seed = 11) {
  Outcome out;
  std::mt19937 rng(seed);
  std::vector<Tensor> inputs;
  for (const Value *v : g.inputs())
    inputs.push_back(randomTensor(staticSizes(v->type().shape), rng));
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  auto want = interpret(g, inputs, diag);
  if (failed(want)) {
    out.mismatch = "interpreter failed: " + collect.str();
    return out;
  }
  CompileOptions opts = base;
  opts.threads = threads;
  auto exe = compile(g, opts, diag, &out.report);
  if (failed(exe)) {
    out.mismatch = "compile failed: " + collect.str();
    return out;
  }
  out.compiled = true;
  // Twice: the second run reuses pooled memory, and must give the same.
  for (int run = 0; run < 2; ++run) {
    auto got = runCompiled(**exe, inputs, diag);
    if (failed(got)) {
      out.mismatch = "run failed: " + collect.str();
      return out;
    }
    for (size_t k = 0; k < want->size(); ++k) {
      std::string m = compare((*got)[k], (*want)[k]);
      if (!m.empty()) {
        out.mismatch = "run " + std::to_string(run) + " output " + std::to_string(k) + " (%" +
                       g.outputs()[k]->name() + "): " + m;
        return out;
      }
    }
  }
  return out;
}

/// Graphs built with Builder, random constants, named values.
struct GraphCase {
  std::unique_ptr<Graph> graph = std::make_unique<Graph>("layout");
  DiagnosticEngine diag;
  Builder b{*graph, diag};
  std::mt19937 rng{7};

  Value *input(std::vector<int64_t> shape, const char *name) {
    return graph->addInput(TensorType(DType::F32, shape), name);
  }
  /// A constant of small random values (keeps chains of convs near 1).
  Value *weight(std::vector<int64_t> shape, double scale = 0.2) {
    return b.constant(randomTensor(shape, rng, scale));
  }
  Value *op(OpKind k, std::vector<Value *> operands, std::vector<NamedAttr> attrs = {},
            const char *name = nullptr) {
    Value *v = b.createValue(k, std::move(operands), std::move(attrs));
    EXPECT_NE(v, nullptr) << "building " << (name ? name : "a node");
    if (v && name)
      v->setName(name);
    return v;
  }
  /// conv(x, w[outC, C, 3, 3] (+ bias)) with pads 1.
  Value *conv3x3(Value *x, int64_t outC, const char *name, bool bias = false) {
    const int64_t inC = x->type().shape[1].size();
    std::vector<Value *> ops{x, weight({outC, inC, 3, 3})};
    if (bias)
      ops.push_back(weight({outC}));
    return op(OpKind::Conv, ops, {{"pads", Ints{1, 1, 1, 1}}}, name);
  }
  Value *relu(Value *v, const char *name) { return op(OpKind::Relu, {v}, {}, name); }
};

/// The report line of the library call whose first node is `%name`.
std::string callLine(const CompileReport &r, const std::string &name) {
  for (const std::string &l : r.libraryCalls)
    if (l.rfind("%" + name + ":", 0) == 0 || l.rfind("%" + name + "+", 0) == 0)
      return l;
  return "";
}

bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

int countOf(const std::string &s, const std::string &part) {
  int n = 0;
  for (size_t p = s.find(part); p != std::string::npos; p = s.find(part, p + 1))
    ++n;
  return n;
}

/// On AVX-512, brgconv is oneDNN's conv and it wants channels-last: the
/// layout assertions are made there (elsewhere only the values are).
bool brgconv(const std::string &line) {
  return contains(line, ": brgconv:avx512");
}

const codegen::LibraryLayout kPolicies[] = {codegen::LibraryLayout::Measure,
                                            codegen::LibraryLayout::Blocked,
                                            codegen::LibraryLayout::Plain};

const char *policyName(codegen::LibraryLayout p) {
  switch (p) {
  case codegen::LibraryLayout::Measure:
    return "measure";
  case codegen::LibraryLayout::Blocked:
    return "blocked";
  case codegen::LibraryLayout::Plain:
    return "plain";
  }
  return "?";
}

/// Compiles under every layout policy at 1 and 2 threads; expects equal
/// values, no fallback; returns the Blocked policy's report at 1 thread.
CompileReport expectCorrectEverywhere(const Graph &g, int expectLibraryCalls = -1) {
  CompileReport blocked;
  for (codegen::LibraryLayout policy : kPolicies)
    for (int threads : {1, 2}) {
      CompileOptions opts;
      opts.dnnlLayout = policy;
      Outcome o = compileAndCompare(g, threads, opts);
      const std::string where =
          std::string(policyName(policy)) + ", threads " + std::to_string(threads);
      EXPECT_TRUE(o.compiled) << where << ": " << o.mismatch;
      EXPECT_TRUE(o.mismatch.empty()) << where << ": " << o.mismatch << "\n" << o.dump();
      EXPECT_EQ(o.report.numFallbacks, 0) << where << "\n" << o.dump();
      if (expectLibraryCalls >= 0) {
        EXPECT_EQ(o.report.numLibraryCalls, expectLibraryCalls) << where << "\n" << o.dump();
      }
      if (policy == codegen::LibraryLayout::Blocked && threads == 1)
        blocked = o.report;
    }
  return blocked;
}

} // namespace

//===----------------------------------------------------------------------===//
// 1. conv chains stay channels-last
//===----------------------------------------------------------------------===//

TEST(ChannelsLastTest, ConvChainNeedsNoConversion) {
  GraphCase c;
  Value *x = c.input({1, 8, 16, 16}, "x");
  Value *r1 = c.relu(c.conv3x3(x, 8, "c1", true), "r1");
  Value *r2 = c.relu(c.conv3x3(r1, 8, "c2"), "r2");
  Value *c3 = c.conv3x3(r2, 8, "c3");
  c.graph->setOutputs({c3});
  CompileReport r = expectCorrectEverywhere(*c.graph, 3);
  EXPECT_EQ(r.steps.find("to-row-major"), std::string::npos) << r.steps;
  EXPECT_EQ(countOf(r.steps, "extern onednn conv"), 3) << r.steps;
  const std::string l1 = callLine(r, "c1"), l2 = callLine(r, "c2"), l3 = callLine(r, "c3");
  EXPECT_TRUE(contains(l1, "post-ops [eltwise_relu]")) << l1;
  EXPECT_TRUE(contains(l2, "post-ops [eltwise_relu]")) << l2;
  if (!brgconv(l2))
    GTEST_SKIP() << "not brgconv on AVX-512, layouts not asserted: " << l2;
  // The intermediate results are written and read as NHWC.
  EXPECT_TRUE(contains(l1, "dst acdb")) << l1;
  EXPECT_TRUE(contains(l2, "src acdb")) << l2;
  EXPECT_TRUE(contains(l2, "dst acdb")) << l2;
  EXPECT_TRUE(contains(l3, "src acdb")) << l3;
}

TEST(ChannelsLastTest, Conv1DAndConv3DChains) {
  {
    GraphCase c;
    Value *x = c.input({2, 6, 20}, "x");
    Value *c1 = c.op(OpKind::Conv, {x, c.weight({8, 6, 3})}, {{"pads", Ints{1, 1}}}, "c1");
    Value *r1 = c.relu(c1, "r1");
    Value *c2 =
        c.op(OpKind::Conv, {r1, c.weight({5, 8, 3}), c.weight({5})}, {{"strides", Ints{2}}}, "c2");
    c.graph->setOutputs({c2});
    CompileReport r = expectCorrectEverywhere(*c.graph, 2);
    EXPECT_EQ(r.steps.find("to-row-major"), std::string::npos) << r.steps;
  }
  {
    GraphCase c;
    Value *x = c.input({1, 4, 6, 7, 5}, "x");
    Value *c1 = c.op(OpKind::Conv, {x, c.weight({8, 4, 3, 3, 3})},
                     {{"pads", Ints{1, 1, 1, 1, 1, 1}}}, "c1");
    Value *c2 = c.op(OpKind::Conv, {c.relu(c1, "r1"), c.weight({3, 8, 2, 2, 2})}, {}, "c2");
    c.graph->setOutputs({c2});
    CompileReport r = expectCorrectEverywhere(*c.graph, 2);
    EXPECT_EQ(r.steps.find("to-row-major"), std::string::npos) << r.steps;
  }
}

TEST(ChannelsLastTest, ConvTransposeBetweenConvs) {
  GraphCase c;
  Value *x = c.input({1, 8, 7, 7}, "x");
  Value *c1 = c.relu(c.conv3x3(x, 8, "c1"), "r1");
  Value *up = c.op(
      OpKind::ConvTranspose, {c1, c.weight({8, 4, 3, 3}), c.weight({4})},
      {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"output_padding", Ints{1, 1}}}, "up");
  Value *c2 = c.conv3x3(c.relu(up, "r2"), 6, "c2");
  c.graph->setOutputs({c2});
  CompileReport r = expectCorrectEverywhere(*c.graph, 3);
  EXPECT_EQ(r.steps.find("to-row-major"), std::string::npos) << r.steps;
}

//===----------------------------------------------------------------------===//
// 2. Residual blocks
//===----------------------------------------------------------------------===//

TEST(ChannelsLastTest, ResidualBlockReadsTheSharedValueChannelsLast) {
  for (bool residualFirst : {false, true}) {
    SCOPED_TRACE(residualFirst ? "add(x0, c2)" : "add(c2, x0)");
    GraphCase c;
    Value *x = c.input({1, 8, 16, 16}, "x");
    Value *x0 = c.conv3x3(x, 16, "x0", true); // src of c1 and the residual
    Value *r1 = c.relu(c.conv3x3(x0, 16, "c1"), "r1");
    Value *c2 = c.conv3x3(r1, 16, "c2");
    Value *sum = c.op(OpKind::Add,
                      residualFirst ? std::vector<Value *>{x0, c2} : std::vector<Value *>{c2, x0},
                      {}, "sum");
    Value *y = c.relu(sum, "y");
    c.graph->setOutputs({y});
    CompileReport r = expectCorrectEverywhere(*c.graph, 3);
    EXPECT_EQ(r.steps.find("to-row-major"), std::string::npos) << r.steps;
    const std::string l0 = callLine(r, "x0"), l1 = callLine(r, "c1"), l2 = callLine(r, "c2");
    // The residual add and relu are post-ops of c2.
    EXPECT_TRUE(contains(l2, "%c2+%sum+%y:")) << l2;
    if (!brgconv(l1))
      continue;
    EXPECT_TRUE(contains(l0, "dst acdb")) << l0;
    EXPECT_TRUE(contains(l1, "src acdb")) << l1;
    EXPECT_TRUE(contains(l2, "src acdb")) << l2;
  }
}

TEST(ChannelsLastTest, ResidualIsTheConvsOwnSrc) {
  // y = relu(conv(x0) + x0): x0 channels-last, read as src and as the sum.
  GraphCase c;
  Value *x = c.input({2, 8, 9, 11}, "x");
  Value *x0 = c.relu(c.conv3x3(x, 8, "c0"), "x0");
  Value *c1 = c.conv3x3(x0, 8, "c1", true);
  Value *y = c.relu(c.op(OpKind::Add, {c1, x0}, {}, "sum"), "y");
  Value *z = c.conv3x3(y, 4, "z");
  c.graph->setOutputs({z});
  CompileReport r = expectCorrectEverywhere(*c.graph, 3);
  EXPECT_EQ(r.steps.find("to-row-major"), std::string::npos) << r.steps;
}

//===----------------------------------------------------------------------===//
// 3. A value with a non-library reader is not channels-last
//===----------------------------------------------------------------------===//

TEST(ChannelsLastTest, ValueReadByAKernelIsRowMajor) {
  struct Reader {
    const char *name;
    std::function<Value *(GraphCase &, Value *)> apply;
  };
  const Reader readers[] = {
      {"sigmoid", [](GraphCase &c, Value *v) { return c.op(OpKind::Sigmoid, {v}, {}, "k"); }},
      {"transpose",
       [](GraphCase &c, Value *v) {
         return c.op(OpKind::Transpose, {v}, {{"perm", Ints{0, 2, 3, 1}}}, "k");
       }},
      {"reduce_mean",
       [](GraphCase &c, Value *v) {
         return c.op(OpKind::ReduceMean, {v}, {{"axes", Ints{1}}, {"keepdims", true}}, "k");
       }},
      {"matmul (library, not conv/pool)",
       [](GraphCase &c, Value *v) {
         return c.op(OpKind::MatMul, {v, c.weight({16, 5})}, {}, "k");
       }},
  };
  for (const Reader &rd : readers) {
    SCOPED_TRACE(rd.name);
    GraphCase c;
    Value *x = c.input({1, 8, 16, 16}, "x");
    Value *v = c.relu(c.conv3x3(x, 8, "c1"), "v");
    Value *c2 = c.conv3x3(v, 8, "c2");
    Value *k = rd.apply(c, v);
    c.graph->setOutputs({c2, k});
    CompileReport r = expectCorrectEverywhere(*c.graph);
    // The reader takes %v as it is stored (a pointwise kernel of its shape
    // reads it channels-last; the others make the prediction row-major):
    // %v itself is never converted.
    EXPECT_EQ(r.steps.find("to-row-major %v "), std::string::npos) << r.steps;
  }
}

TEST(ChannelsLastTest, GraphOutputReadByAConvIsRowMajor) {
  GraphCase c;
  Value *x = c.input({1, 8, 10, 10}, "x");
  Value *v = c.conv3x3(x, 8, "v");
  Value *c2 = c.relu(c.conv3x3(v, 8, "c2"), "r2");
  c.graph->setOutputs({v, c2});
  CompileReport r = expectCorrectEverywhere(*c.graph, 2);
  EXPECT_EQ(r.steps.find("to-row-major"), std::string::npos) << r.steps;
}

//===----------------------------------------------------------------------===//
// 4. Mispredictions: a row-major twin
//===----------------------------------------------------------------------===//

// The residual x0 is predicted channels-last (its uses: c1's src, and the
// add in c2's epilogue), but oneDNN takes at most 32 post-ops: the 40 tanh
// nodes push the add out of c2's call into a kernel, which reads x0's
// row-major twin.
TEST(ChannelsLastTest, ResidualPushedOutOfTheCallReadsATwin) {
  GraphCase c;
  Value *x = c.input({1, 8, 12, 12}, "x");
  Value *x0 = c.conv3x3(x, 8, "x0");
  Value *r1 = c.relu(c.conv3x3(x0, 8, "c1"), "r1");
  Value *t = c.conv3x3(r1, 8, "c2");
  for (int i = 0; i < 40; ++i)
    t = c.op(OpKind::Tanh, {t});
  Value *y = c.relu(c.op(OpKind::Add, {t, x0}, {}, "sum"), "y");
  c.graph->setOutputs({y});
  CompileReport r = expectCorrectEverywhere(*c.graph, 3);
  EXPECT_GE(r.numKernels, 1) << r.steps;
  EXPECT_EQ(r.steps.find("reference"), std::string::npos) << r.steps;
  // The epilogue kernel reads %x0 channels-last (no twin), iterates in
  // channels-last order and writes %y so; %y, a graph output, is converted
  // once, after the kernel.
  EXPECT_EQ(countOf(r.steps, "%x0.row_major"), 0) << r.steps;
  const size_t kernel = r.steps.find("kernel ");
  ASSERT_NE(kernel, std::string::npos) << r.steps;
  EXPECT_TRUE(contains(r.steps.substr(kernel), "%x0, %y)")) << r.steps;
  EXPECT_EQ(countOf(r.steps, "to-row-major %y (%y, %y.row_major)"), 1) << r.steps;
  EXPECT_LT(kernel, r.steps.find("to-row-major %y")) << r.steps;
}

// Two kernels read the same mispredicted value: one twin, one conversion.
TEST(ChannelsLastTest, TwinIsMadeOnce) {
  GraphCase c;
  Value *x = c.input({1, 8, 12, 12}, "x");
  Value *x0 = c.conv3x3(x, 8, "x0");
  auto longTail = [&](Value *t) {
    for (int i = 0; i < 36; ++i)
      t = c.op(OpKind::Tanh, {t});
    return t;
  };
  Value *a = c.op(OpKind::Add, {longTail(c.conv3x3(x0, 8, "c1")), x0}, {}, "a");
  Value *b = c.op(OpKind::Add, {longTail(c.conv3x3(x0, 8, "c2")), x0}, {}, "b");
  c.graph->setOutputs({a, b});
  CompileReport r = expectCorrectEverywhere(*c.graph, 3);
  // Both kernels read %x0 channels-last: no twin of it; each writes its
  // graph output channels-last, converted once each.
  EXPECT_EQ(countOf(r.steps, "%x0.row_major"), 0) << r.steps;
  EXPECT_EQ(countOf(r.steps, "to-row-major %a (%a, %a.row_major)"), 1) << r.steps;
  EXPECT_EQ(countOf(r.steps, "to-row-major %b (%b, %b.row_major)"), 1) << r.steps;
}

// The step itself: NHWC (and N,L,C / N,D,H,W,C) bytes in, NCHW bytes out.
TEST(ToRowMajorStepTest, TransposesChannelsLastData) {
  for (std::vector<int64_t> shape : std::vector<std::vector<int64_t>>{
           {2, 3, 4, 5}, {1, 7, 1, 1}, {3, 5, 6}, {2, 3, 2, 4, 5}, {1, 1, 3, 3}}) {
    std::string dims;
    for (int64_t d : shape)
      dims += (dims.empty() ? "" : ",") + std::to_string(d);
    SCOPED_TRACE(dims);
    DiagnosticEngine diag;
    ScopedDiagnosticCollector collect(diag);
    auto m = parseModule("graph @g(%v: f32[" + dims + "]) -> (f32[" + dims +
                             "]) {\n  %y = relu(%v) : f32[" + dims + "]\n  return %y\n}\n",
                         diag);
    ASSERT_TRUE(m.succeeded()) << collect.str();
    const Value *v = (*m)->graphs()[0]->inputs()[0];
    auto step = cpu::makeToRowMajorStep(v);
    EXPECT_EQ(step->describe(), "to-row-major %v");
    // Channels-last index (n, spatial..., c) of row-major element (n, c, spatial...).
    int64_t total = 1;
    for (int64_t d : shape)
      total *= d;
    const int64_t n = shape[0], ch = shape[1], sp = total / (n * ch);
    std::vector<float> nhwc(static_cast<size_t>(total)), out(static_cast<size_t>(total), -1.f);
    for (int64_t i = 0; i < total; ++i)
      nhwc[static_cast<size_t>(i)] = static_cast<float>(i) * 0.5f - 3.f;
    void *buffers[] = {nhwc.data(), out.data()};
    runtime::Status st = step->run({buffers, 2}, runtime::StepContext{});
    ASSERT_TRUE(st.ok()) << st.error;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t k = 0; k < ch; ++k)
        for (int64_t s = 0; s < sp; ++s) {
          const float want = nhwc[static_cast<size_t>((b * sp + s) * ch + k)];
          const float got = out[static_cast<size_t>((b * ch + k) * sp + s)];
          ASSERT_EQ(got, want) << "n " << b << " c " << k << " spatial " << s;
        }
  }
}

//===----------------------------------------------------------------------===//
// 5. Pools between convs
//===----------------------------------------------------------------------===//

TEST(ChannelsLastTest, PoolsBetweenConvs) {
  GraphCase c;
  Value *x = c.input({2, 8, 17, 15}, "x");
  Value *c1 = c.relu(c.conv3x3(x, 16, "c1", true), "r1");
  Value *mp =
      c.op(OpKind::MaxPool, {c1},
           {{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}, "mp");
  Value *c2 = c.relu(c.conv3x3(mp, 16, "c2"), "r2");
  Value *ap = c.op(OpKind::AvgPool, {c2},
                   {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", true}}, "ap");
  Value *c3 = c.relu(c.conv3x3(ap, 16, "c3"), "r3");
  Value *gap = c.op(OpKind::GlobalAvgPool, {c3}, {}, "gap");
  Value *fc = c.op(OpKind::Conv, {gap, c.weight({10, 16, 1, 1}), c.weight({10})}, {}, "fc");
  c.graph->setOutputs({fc});
  CompileReport r = expectCorrectEverywhere(*c.graph);
  EXPECT_EQ(r.steps.find("to-row-major"), std::string::npos) << r.steps;
  const std::string lgap = callLine(r, "gap");
  EXPECT_FALSE(lgap.empty()) << joinLines(r.libraryCalls);
  if (!brgconv(callLine(r, "c2")))
    GTEST_SKIP() << "not brgconv on AVX-512"; // reason: the layouts below are brgconv's
  // Between channels-last convs the pools are kernels (Note [Pools as
  // kernels] in codegen/PoolKernel.cpp); the global pool is oneDNN's.
  EXPECT_TRUE(contains(r.steps, "kernel kernel_mp (%r1, %mp)")) << r.steps;
  EXPECT_TRUE(contains(r.steps, "kernel kernel_ap (%r2, %ap)")) << r.steps;
  EXPECT_EQ(r.numLibraryCalls, 5) << joinLines(r.libraryCalls);
  EXPECT_TRUE(contains(lgap, "src acdb")) << lgap;
}

TEST(ChannelsLastTest, PoolWithResidualEpilogueAndPoolOutput) {
  // A pool result read as a conv src and as the residual of the next pool;
  // the last pool is a graph output (row-major).
  GraphCase c;
  Value *x = c.input({1, 8, 16, 16}, "x");
  Value *c1 = c.conv3x3(x, 8, "c1");
  Value *p1 =
      c.op(OpKind::MaxPool, {c1},
           {{"kernel", Ints{3, 3}}, {"strides", Ints{1, 1}}, {"pads", Ints{1, 1, 1, 1}}}, "p1");
  Value *c2 = c.conv3x3(p1, 8, "c2");
  Value *p2 =
      c.op(OpKind::AvgPool, {c2},
           {{"kernel", Ints{3, 3}}, {"strides", Ints{1, 1}}, {"pads", Ints{1, 1, 1, 1}}}, "p2");
  Value *y = c.op(OpKind::Add, {p2, p1}, {}, "y");
  c.graph->setOutputs({y});
  CompileReport r = expectCorrectEverywhere(*c.graph);
  EXPECT_EQ(r.steps.find("reference"), std::string::npos) << r.steps;
}

// The smallest form of the case above: no channels-last value at all, a
// pool plus a full-size residual that is a graph input. Pools now take the
// blocked candidate (supportsBlocked), where a full-size runtime add
// becomes a `sum` post-op.
TEST(ChannelsLastTest, PoolPlusFullResidual) {
  for (OpKind kind : {OpKind::AvgPool, OpKind::MaxPool}) {
    SCOPED_TRACE(kind == OpKind::AvgPool ? "avg_pool" : "max_pool");
    GraphCase c;
    Value *x = c.input({1, 8, 16, 16}, "x");
    Value *r = c.input({1, 8, 16, 16}, "r");
    Value *p = c.op(kind, {x}, {{"kernel", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}}, "p");
    c.graph->setOutputs({c.op(OpKind::Add, {p, r}, {}, "y")});
    expectCorrectEverywhere(*c.graph, 1);
  }
}

//===----------------------------------------------------------------------===//
// Library producers that are not conv/pool
//===----------------------------------------------------------------------===//

// The Note says a value *produced by a conv or pool call* is stored
// channels-last; a matmul (whose oneDNN step only writes row-major) with
// a rank-3..5 result read only by convs or pools must stay row-major.
TEST(ChannelsLastTest, MatMulResultReadByAConv) {
  {
    SCOPED_TRACE("matmul f32[1,4,8,8] -> conv 3x3");
    GraphCase c;
    Value *x = c.input({1, 4, 8, 8}, "x");
    Value *m = c.op(OpKind::MatMul, {x, c.weight({8, 8})}, {}, "m");
    Value *y = c.conv3x3(m, 4, "y");
    c.graph->setOutputs({y});
    expectCorrectEverywhere(*c.graph, 2);
  }
  {
    SCOPED_TRACE("matmul f32[2,6,10] -> conv1d");
    GraphCase c;
    Value *x = c.input({2, 6, 12}, "x");
    Value *m = c.op(OpKind::MatMul, {x, c.weight({12, 10})}, {}, "m");
    Value *y = c.op(OpKind::Conv, {m, c.weight({5, 6, 3})}, {{"pads", Ints{1, 1}}}, "y");
    c.graph->setOutputs({y});
    expectCorrectEverywhere(*c.graph, 2);
  }
  {
    SCOPED_TRACE("batched matmul (runtime weights) -> max_pool");
    GraphCase c;
    Value *x = c.input({1, 4, 8, 8}, "x");
    Value *w = c.input({1, 4, 8, 8}, "w");
    Value *m = c.op(OpKind::MatMul, {x, w}, {}, "m");
    Value *y = c.op(OpKind::MaxPool, {m}, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}}, "y");
    c.graph->setOutputs({y});
    expectCorrectEverywhere(*c.graph, 2);
  }
}

//===----------------------------------------------------------------------===//
// 6. matmul of an N-D activation by a constant 2-D weight
//===----------------------------------------------------------------------===//

namespace {

struct MatMulEpilogue {
  const char *name;
  /// The epilogue on mm (shape lead..., 32); returns the output.
  std::function<Value *(GraphCase &, Value *)> apply;
  /// Whether oneDNN must take all of it as post-ops (no kernel); else
  /// either is right, as long as the values are.
  bool allPostOps;
};

std::vector<int64_t> sizes(const Value *v) {
  return staticSizes(v->type().shape);
}

std::vector<int64_t> withLast(std::vector<int64_t> s, std::vector<int64_t> keepMask) {
  // keepMask[i] == 1: keep dim i, else 1.
  for (size_t i = 0; i < s.size(); ++i)
    if (!keepMask[i])
      s[i] = 1;
  return s;
}

const MatMulEpilogue kMatMulEpilogues[] = {
    {"none", [](GraphCase &, Value *v) { return v; }, true},
    {"bias",
     [](GraphCase &c, Value *v) {
       return c.op(OpKind::Add, {v, c.weight({32})}, {}, "e");
     },
     true},
    {"bias_relu",
     [](GraphCase &c, Value *v) {
       return c.relu(c.op(OpKind::Add, {c.weight({32}), v}, {}, "e0"), "e");
     },
     true},
    {"residual_full_runtime",
     [](GraphCase &c, Value *v) {
       return c.op(OpKind::Add, {v, c.input(sizes(v), "r")}, {}, "e");
     },
     true},
    {"residual_full_constant",
     [](GraphCase &c, Value *v) {
       return c.op(OpKind::Add, {v, c.weight(sizes(v))}, {}, "e");
     },
     true},
    {"bias_residual_relu",
     [](GraphCase &c, Value *v) {
       Value *b = c.op(OpKind::Add, {v, c.weight({32})}, {}, "e0");
       Value *s = c.op(OpKind::Add, {c.input(sizes(v), "r"), b}, {}, "e1");
       return c.relu(s, "e");
     },
     true},
    // [M, N] over [B..., M, N]: not one row per collapsed row; must not be
    // taken as a [B*M, N] operand.
    {"broadcast_MN_runtime",
     [](GraphCase &c, Value *v) {
       std::vector<int64_t> s = sizes(v);
       return c.op(OpKind::Add, {v, c.input({s[s.size() - 2], s.back()}, "r")}, {}, "e");
     },
     false},
    {"broadcast_MN_constant_relu",
     [](GraphCase &c, Value *v) {
       std::vector<int64_t> s = sizes(v);
       Value *a = c.op(OpKind::Add, {v, c.weight({s[s.size() - 2], s.back()})}, {}, "e0");
       return c.relu(a, "e");
     },
     false},
    {"mul_per_row",
     [](GraphCase &c, Value *v) {
       std::vector<int64_t> s = sizes(v);
       s.back() = 1;
       return c.op(OpKind::Mul, {v, c.input(s, "r")}, {}, "e");
     },
     false},
    {"sub_per_batch",
     [](GraphCase &c, Value *v) {
       std::vector<int64_t> s = sizes(v);
       s[s.size() - 2] = 1; // [B..., 1, N]
       return c.op(OpKind::Sub, {v, c.input(s, "r")}, {}, "e");
     },
     false},
    {"max_per_M_row",
     [](GraphCase &c, Value *v) {
       std::vector<int64_t> s = sizes(v);
       std::vector<int64_t> keep(s.size(), 0);
       keep[s.size() - 2] = 1; // [1..., M, 1]
       return c.op(OpKind::Max, {v, c.weight(withLast(s, keep))}, {}, "e");
     },
     false},
    {"scalar_then_bias_relu",
     [](GraphCase &c, Value *v) {
       Value *a = c.op(OpKind::Mul, {v, c.weight({})}, {}, "e0");
       Value *b = c.op(OpKind::Add, {a, c.weight({32})}, {}, "e1");
       return c.relu(b, "e");
     },
     true},
};

} // namespace

class CollapsedMatMulTest
    : public ::testing::TestWithParam<std::tuple<size_t, std::vector<int64_t>>> {};

TEST_P(CollapsedMatMulTest, MatchesInterpreter) {
  const MatMulEpilogue &e = kMatMulEpilogues[std::get<0>(GetParam())];
  const std::vector<int64_t> xShape = std::get<1>(GetParam());
  GraphCase c;
  Value *x = c.input(xShape, "x");
  Value *mm = c.op(OpKind::MatMul, {x, c.weight({16, 32})}, {}, "mm");
  c.graph->setOutputs({e.apply(c, mm)});
  for (int threads : {1, 2}) {
    Outcome o = compileAndCompare(*c.graph, threads);
    ASSERT_TRUE(o.compiled) << o.mismatch;
    EXPECT_TRUE(o.mismatch.empty()) << "threads " << threads << ": " << o.mismatch << "\n"
                                    << o.dump();
    // 7. Whatever oneDNN does not take runs as a kernel, not a reference step.
    EXPECT_EQ(o.report.numFallbacks, 0) << o.dump();
    EXPECT_EQ(o.report.steps.find("reference"), std::string::npos) << o.dump();
    EXPECT_EQ(o.report.numLibraryCalls, 1) << o.dump();
    const std::string line = callLine(o.report, "mm");
    // One 2-D GEMM with the weights laid out by oneDNN.
    EXPECT_TRUE(contains(line, " src ab wei ")) << line;
    EXPECT_FALSE(contains(line, "wei abc")) << line;
    EXPECT_FALSE(line.rfind("ref", 0) == 0) << line;
    if (e.allPostOps) {
      EXPECT_EQ(o.report.numKernels, 0) << o.dump();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Epilogues, CollapsedMatMulTest,
    ::testing::Combine(::testing::Range<size_t>(0, std::size(kMatMulEpilogues)),
                       ::testing::Values(std::vector<int64_t>{2, 8, 16},
                                         std::vector<int64_t>{2, 3, 8, 16},
                                         std::vector<int64_t>{1, 5, 16})),
    [](const ::testing::TestParamInfo<std::tuple<size_t, std::vector<int64_t>>> &info) {
      std::string name = kMatMulEpilogues[std::get<0>(info.param)].name;
      for (int64_t d : std::get<1>(info.param))
        name += "_" + std::to_string(d);
      return name;
    });

// A runtime 2-D weight or a 3-D constant weight is not collapsed (batched
// GEMM); still right.
TEST(CollapsedMatMulTest, NotCollapsedCasesStillMatch) {
  {
    GraphCase c;
    Value *x = c.input({2, 8, 16}, "x");
    Value *w = c.input({16, 32}, "w");
    Value *mm = c.op(OpKind::MatMul, {x, w}, {}, "mm");
    c.graph->setOutputs({c.relu(c.op(OpKind::Add, {mm, c.weight({8, 32})}, {}, "e0"), "e")});
    expectCorrectEverywhere(*c.graph, 1);
  }
  {
    GraphCase c;
    Value *x = c.input({2, 8, 16}, "x");
    Value *mm = c.op(OpKind::MatMul, {x, c.weight({2, 16, 32})}, {}, "mm");
    c.graph->setOutputs({c.op(OpKind::Add, {mm, c.weight({32})}, {}, "e")});
    expectCorrectEverywhere(*c.graph, 1);
  }
  {
    // A 2-D activation by a constant: 2-D already.
    GraphCase c;
    Value *x = c.input({8, 16}, "x");
    Value *mm = c.op(OpKind::MatMul, {x, c.weight({16, 32})}, {}, "mm");
    c.graph->setOutputs({c.op(OpKind::Add, {mm, c.input({8, 1}, "r")}, {}, "e")});
    expectCorrectEverywhere(*c.graph, 1);
  }
}

//===----------------------------------------------------------------------===//
// 7. Epilogue nodes oneDNN does not take run as a kernel
//===----------------------------------------------------------------------===//

TEST(EpilogueKernelTest, UnmappedBroadcastRunsAsOneKernel) {
  GraphCase c;
  Value *x = c.input({2, 8, 16}, "x");
  Value *mm = c.op(OpKind::MatMul, {x, c.weight({16, 32})}, {}, "mm");
  Value *a = c.op(OpKind::Add, {mm, c.weight({8, 32})}, {}, "a"); // [M, N] over [B, M, N]
  Value *s = c.op(OpKind::Sigmoid, {a}, {}, "s");
  Value *y = c.op(OpKind::Mul, {s, c.weight({32})}, {}, "y");
  c.graph->setOutputs({y});
  for (int threads : {1, 2}) {
    Outcome o = compileAndCompare(*c.graph, threads);
    EXPECT_TRUE(o.mismatch.empty()) << o.mismatch << "\n" << o.dump();
    EXPECT_EQ(o.report.numFallbacks, 0) << o.dump();
    EXPECT_EQ(o.report.numLibraryCalls, 1) << o.dump();
    EXPECT_EQ(o.report.numKernels, 1) << o.dump();
    EXPECT_EQ(o.report.steps.find("reference"), std::string::npos) << o.dump();
    EXPECT_TRUE(contains(o.report.summary(), "0 fallbacks")) << o.report.summary();
    // The call stops at mm; a, s and y are one kernel reading mm.
    EXPECT_TRUE(contains(callLine(o.report, "mm"), "%mm: ")) << o.dump();
    EXPECT_EQ(countOf(o.report.steps, "kernel "), 1) << o.dump();
    EXPECT_TRUE(contains(o.report.steps, "(%mm, ")) << o.dump();
  }
}

TEST(EpilogueKernelTest, ConvEpiloguePastThePostOpLimitRunsAsOneKernel) {
  GraphCase c;
  Value *x = c.input({1, 8, 10, 10}, "x");
  Value *t = c.conv3x3(x, 8, "c", true);
  for (int i = 0; i < 40; ++i)
    t = c.op(i % 2 ? OpKind::Tanh : OpKind::Sigmoid, {t});
  c.graph->setOutputs({t});
  CompileReport r = expectCorrectEverywhere(*c.graph, 1);
  EXPECT_EQ(r.numKernels, 1) << r.steps;
  EXPECT_EQ(r.steps.find("reference"), std::string::npos) << r.steps;
}

//===----------------------------------------------------------------------===//
// Concurrent runs
//===----------------------------------------------------------------------===//

// Channels-last buffers, a to-row-major twin and an epilogue kernel, run
// from 4 threads at once: every run equals the interpreter.
TEST(ChannelsLastTest, ConcurrentRunsOfAMispredictedGraph) {
  GraphCase c;
  Value *x = c.input({1, 8, 12, 12}, "x");
  Value *x0 = c.conv3x3(x, 8, "x0");
  Value *r1 = c.relu(c.conv3x3(x0, 8, "c1"), "r1");
  Value *t = c.conv3x3(r1, 8, "c2");
  for (int i = 0; i < 34; ++i)
    t = c.op(OpKind::Tanh, {t});
  Value *y = c.relu(c.op(OpKind::Add, {t, x0}, {}, "sum"), "y");
  Value *mp = c.op(OpKind::MaxPool, {y}, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}}, "mp");
  Value *z = c.conv3x3(mp, 4, "z");
  c.graph->setOutputs({z});
  std::mt19937 rng(5);
  std::vector<Tensor> inputs{randomTensor({1, 8, 12, 12}, rng)};
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  auto want = interpret(*c.graph, inputs, diag);
  ASSERT_TRUE(want.succeeded()) << collect.str();
  CompileOptions opts;
  opts.threads = 2;
  CompileReport report;
  auto exe = compile(*c.graph, opts, diag, &report);
  ASSERT_TRUE(exe.succeeded()) << collect.str();
  // The epilogue kernel reads %x0 and writes %y channels-last for the
  // pool: nothing is converted.
  EXPECT_EQ(countOf(report.steps, "to-row-major"), 0) << report.steps;
  std::vector<std::string> errors(4);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < errors.size(); ++k)
    threads.emplace_back([&, k] {
      for (int it = 0; it < 5 && errors[k].empty(); ++it) {
        DiagnosticEngine d;
        ScopedDiagnosticCollector col(d);
        auto got = runCompiled(**exe, inputs, d);
        if (failed(got))
          errors[k] = "run failed: " + col.str();
        else
          errors[k] = compare((*got)[0], (*want)[0]);
      }
    });
  for (std::thread &th : threads)
    th.join();
  for (size_t k = 0; k < errors.size(); ++k)
    EXPECT_TRUE(errors[k].empty()) << "thread " << k << ": " << errors[k] << "\n" << report.steps;
}
