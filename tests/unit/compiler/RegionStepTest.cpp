//===- RegionStepTest.cpp - Compiled if and loop regions --------*- C++ -*-===//
//
// Note [Compiled regions] in codegen/ExecutableBuilder.cpp: an `if` with a run-time
// condition and a `loop` with a run-time trip count compile their regions
// and run as one step each, equal to the interpreter for both branches and
// trip counts 0, 1 and several, at 1 and 2 threads, and through an artifact
// (the regions nested in it, compiled); a damaged nested region is an error. A loop whose result
// the run sizes (a value grown for a run-time number of iterations) is a compile error.
//
//===----------------------------------------------------------------------===//
#include "runtime/reference/RegionStep.h"
#include "codegen/CompileCache.h"
#include "codegen/Compiler.h"
#include "ir/Interpreter.h"
#include "ir/Parser.h"
#include "tests/unit/compiler/ArtifactRoundTrip.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::codegen;

namespace {

std::unique_ptr<Graph> parse(const char *text) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  auto m = parseModule(text, diag);
  EXPECT_TRUE(m.succeeded()) << collect.str();
  return m.succeeded() ? std::move((*m)->graphs().front()) : nullptr;
}

// An if on a value (its condition an input) with a symbolic region, and a
// loop whose trip count is an input, carrying a value and a captured weight
// (whose exp hoist-loop-invariants moves before the loop).
const char kModel[] =
    R"(graph @g(%c: bool[], %n: i64[], %x: f32[3,40], %w: f32[3,40]) -> (f32[3,40], f32[3,40]) {
  %y = if(%c, %x, %w) {else_branch = graph @else(%a: f32[R,C], %b: f32[R,C]) -> (f32[R,C]) {
      %s = sub(%a, %b) : f32[R,C]
      return %s
    }, then_branch = graph @then(%a: f32[R,C], %b: f32[R,C]) -> (f32[R,C]) {
      %s = add(%a, %b) : f32[R,C]
      %e = exp(%s) : f32[R,C]
      return %e
    }} : f32[3,40]
  %t = constant dense<true> : bool[]
  %z = loop(%n, %t, %y, %w) {body = graph @body(%i: i64[], %k: bool[], %a: f32[3,40], %b: f32[3,40]) -> (bool[], f32[3,40]) {
      %f = cast(%i) {to = f32} : f32[]
      %e = exp(%b) : f32[3,40]
      %m = mul(%a, %e) : f32[3,40]
      %s = add(%m, %f) : f32[3,40]
      %h = tanh(%s) : f32[3,40]
      return %k, %h
    }, num_carried = 1} : f32[3,40]
  return %y, %z
}
)";

Tensor values(std::vector<int64_t> shape, double scale) {
  Tensor t = Tensor::zeros(DType::F32, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setDouble(i, scale * std::sin(0.37 * double(i) + 1.0));
  return t;
}

TEST(RegionStepTest, IfAndLoopRegionsCompileAndEqualTheInterpreter) {
  auto g = parse(kModel);
  ASSERT_TRUE(g);
  for (int threads : {1, 2}) {
    CompileOptions opts;
    opts.threads = threads;
    DiagnosticEngine diag;
    ScopedDiagnosticCollector collect(diag);
    CompileReport report;
    auto exe = compile(*g, opts, diag, &report);
    ASSERT_TRUE(exe.succeeded()) << collect.str();
    EXPECT_EQ(report.numRegions, 2) << report.summary();
    EXPECT_EQ(report.numFallbacks, 0) << report.summary();
    for (bool cond : {true, false})
      for (int64_t trips : {0, 1, 7}) {
        std::vector<Tensor> in{Tensor::fromInts(DType::Bool, {}, {cond}),
                               Tensor::fromInts(DType::I64, {}, {trips}), values({3, 40}, 0.5),
                               values({3, 40}, 0.25)};
        auto want = interpret(*g, in, diag);
        ASSERT_TRUE(want.succeeded()) << collect.str();
        auto got = runCompiled(**exe, in, diag);
        ASSERT_TRUE(got.succeeded()) << collect.str();
        std::string label = "cond " + std::to_string(cond) + " trips " + std::to_string(trips) +
                            " threads " + std::to_string(threads);
        for (size_t k = 0; k < want->size(); ++k) {
          const Tensor &a = (*got)[k], &b = (*want)[k];
          ASSERT_EQ(a.shape(), b.shape()) << label;
          double worst = 0;
          for (int64_t i = 0; i < b.numel(); ++i)
            worst = std::max(worst, std::fabs(a.getDouble(i) - b.getDouble(i)));
          // exp and tanh are within a few ulps of the reference.
          EXPECT_LE(worst, 1e-6) << label << " output " << k;
        }
        // Saved, the regions are artifacts nested in the step's (Note
        // [Nested artifacts]): the loaded model gives the compiled values
        // exactly.
        if (threads == 1)
          kiln::testing::expectArtifactRoundTrip(**exe, in, *got, label);
      }
  }
}

TEST(RegionStepTest, ALoopResultSizedByTheRunIsACompileError) {
  auto g = parse(R"(graph @g(%n: i64[], %x: f32[1,2]) -> (f32[?,2], f32[?,2]) {
  %t = constant dense<true> : bool[]
  %r = loop(%n, %t, %x) {body = graph @body(%i: i64[], %c: bool[], %a: f32[?,2]) -> (bool[], f32[?,2]) {
      %b = concat(%a, %a) {axis = 0} : f32[?,2]
      return %c, %b
    }, num_carried = 1} : f32[?,2]
  return %r, %r
}
)");
  ASSERT_TRUE(g);
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  // A result whose size the run decides cannot be compiled at all.
  EXPECT_TRUE(compile(*g, CompileOptions{}, diag).failed());
  EXPECT_NE(collect.str().find("'loop' op result %r : f32[?,2] has a dynamic shape"),
            std::string::npos)
      << collect.str();
}

TEST(RegionStepTest, AGrowingLoopOfAKnownTripCountCompiles) {
  // 80 iterations (too many to unroll) growing a value: inline-regions
  // sizes the results from the body's types, the loop runs interpreted
  // and the relu after it compiles.
  auto g = parse(R"(graph @g(%x: f32[1,3]) -> (f32[?,3]) {
  %t = constant dense<true> : bool[]
  %n = constant dense<80> : i64[]
  %r = loop(%n, %t, %x, %x) {body = graph @body(%i: i64[], %c: bool[], %a: f32[?,3], %w: f32[1,3]) -> (bool[], f32[?,3]) {
      %f = cast(%i) {to = f32} : f32[]
      %v = sub(%w, %f) : f32[1,3]
      %b = concat(%a, %v) {axis = 0} : f32[?,3]
      return %c, %b
    }, num_carried = 1} : f32[?,3]
  %y = relu(%r) : f32[?,3]
  return %y
}
)");
  ASSERT_TRUE(g);
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  CompileReport report;
  auto exe = compile(*g, CompileOptions{}, diag, &report);
  ASSERT_TRUE(exe.succeeded()) << collect.str();
  EXPECT_EQ(report.numFallbacks, 1) << report.summary(); // the loop
  std::vector<Tensor> in{values({1, 3}, 40.0)};
  auto want = interpret(*g, in, diag);
  ASSERT_TRUE(want.succeeded()) << collect.str();
  auto got = runCompiled(**exe, in, diag);
  ASSERT_TRUE(got.succeeded()) << collect.str();
  ASSERT_EQ((*got)[0].shape(), (std::vector<int64_t>{81, 3}));
  EXPECT_EQ((*got)[0].toDoubles(), (*want)[0].toDoubles());
}

TEST(RegionStepTest, AScanOfKnownLengthCompilesRowByRow) {
  // The result's 5 rows refine the inferred `?` (as ONNX Scan imports).
  auto g = parse(R"(graph @g(%n: i64[], %x: f32[5,37]) -> (f32[5,37]) {
  %t = constant dense<true> : bool[]
  %r = loop(%n, %t, %x) {body = graph @body(%i: i64[], %c: bool[], %a: f32[5,37]) -> (bool[], f32[37]) {
      %g = gather(%a, %i) : f32[37]
      %e = exp(%g) : f32[37]
      return %c, %e
    }, num_carried = 0} : f32[5,37]
  return %r
}
)");
  ASSERT_TRUE(g);
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  CompileReport report;
  auto exe = compile(*g, CompileOptions{}, diag, &report);
  ASSERT_TRUE(exe.succeeded()) << collect.str();
  EXPECT_EQ(report.numRegions, 1) << report.summary();
  EXPECT_EQ(report.numFallbacks, 0) << report.summary();
  Tensor x = values({5, 37}, 3.0);
  std::vector<Tensor> in{Tensor::fromInts(DType::I64, {}, {5}), x};
  auto want = interpret(*g, in, diag);
  ASSERT_TRUE(want.succeeded()) << collect.str();
  auto got = runCompiled(**exe, in, diag);
  ASSERT_TRUE(got.succeeded()) << collect.str();
  ASSERT_EQ((*got)[0].shape(), (std::vector<int64_t>{5, 37}));
  for (int64_t i = 0; i < x.numel(); ++i)
    EXPECT_NEAR((*got)[0].getDouble(i), (*want)[0].getDouble(i),
                4e-7 * std::fabs((*want)[0].getDouble(i)))
        << i;
  // A run of another length contradicts the result type: an error, as on
  // the interpreter.
  in[0] = Tensor::fromInts(DType::I64, {}, {3});
  EXPECT_TRUE(interpret(*g, in, diag).failed());
  EXPECT_TRUE(runCompiled(**exe, in, diag).failed());
  EXPECT_NE(collect.str().find("ran 3 iteration(s) but scan result 0 has 5 rows"),
            std::string::npos)
      << collect.str();
}

TEST(RegionStepTest, TheCacheKeyCoversConstantsInsideRegions) {
  // Two models that differ only in a weight inside a loop body (its blob
  // prints elided) must not share a compile cache entry.
  auto text = [](int v) {
    std::string w = "[";
    for (int i = 0; i < 20; ++i)
      w += (i ? ", " : "") + std::to_string(v + i) + ".0";
    return "graph @g(%n: i64[], %x: f32[20]) -> (f32[20]) {\n"
           "  %t = constant dense<true> : bool[]\n"
           "  %r = loop(%n, %t, %x) {body = graph @body(%i: i64[], %c: bool[], %a: f32[20]) -> "
           "(bool[], f32[20]) {\n"
           "      %w = constant dense<" +
           w +
           "]> : f32[20]\n"
           "      %b = mul(%a, %w) : f32[20]\n"
           "      return %c, %b\n"
           "    }, num_carried = 1} : f32[20]\n"
           "  return %r\n}\n";
  };
  std::string one = text(1), two = text(2);
  auto a = parse(one.c_str()), b = parse(two.c_str());
  ASSERT_TRUE(a && b);
  CompileOptions o;
  EXPECT_NE(cacheKey(*a, o, "znver4", ""), cacheKey(*b, o, "znver4", ""));
  EXPECT_EQ(cacheKey(*a, o, "znver4", ""), cacheKey(*parse(one.c_str()), o, "znver4", ""));
}

} // namespace

// Note [Nested artifacts]: the step's payload round-trips, and a payload or
// regions that do not fit the step's buffers are refused with the reason.
TEST(RegionStepTest, ASavedRegionStepThatDoesNotFitIsRefused) {
  auto g = parse(kModel);
  ASSERT_TRUE(g);
  const Node *loop = nullptr;
  for (const Node *n : g->nodes())
    if (n->kind() == OpKind::Loop)
      loop = n;
  ASSERT_TRUE(loop);
  const runtime::RegionStep::Spec spec = runtime::RegionStep::Spec::of(*loop);
  std::string why;
  auto back = runtime::RegionStep::Spec::parse(spec.str(), why);
  ASSERT_TRUE(back.has_value()) << why;
  EXPECT_EQ(back->str(), spec.str());
  EXPECT_TRUE(back->isLoop);
  EXPECT_EQ(back->numCarried, 1u);
  for (const char *bad : {"", "loop", "while 1 1 4\nx", "loop 1 1 9999999\nx",
                          "loop 1 1 2 f32 1 -3 i64 0 0 0 0\nx", "if 1 1 1 bool 0 0 0 0\nx"}) {
    why.clear();
    EXPECT_FALSE(runtime::RegionStep::Spec::parse(bad, why).has_value()) << bad;
    EXPECT_NE(why.find("corrupt"), std::string::npos) << bad;
  }
  // The right payload without its body region, and with the wrong buffers.
  std::vector<size_t> bytes{8, 1, 480, 480, 480};
  why.clear();
  EXPECT_EQ(runtime::RegionStep::load(spec.str(), {}, bytes, why), nullptr);
  EXPECT_NE(why.find("does not fit"), std::string::npos) << why;

  // A body that fits a loop of one carried f32[4], and payloads that lie
  // about it: a carried value with no operand, scan rows whose bytes
  // overflow, an iteration input of a million elements.
  auto body = parse(R"(graph @body(%i: i64[], %k: bool[], %a: f32[4]) -> (bool[], f32[4]) {
  %h = tanh(%a) : f32[4]
  return %k, %h
}
)");
  ASSERT_TRUE(body);
  DiagnosticEngine diag;
  auto exe = compile(*body, CompileOptions{}, diag);
  ASSERT_TRUE(exe.succeeded());
  std::shared_ptr<const runtime::Executable> region = std::move(*exe);
  const std::vector<size_t> fit{8, 1, 16, 16};
  why.clear();
  EXPECT_NE(
      runtime::RegionStep::load("loop 1 1 3 i64 0 bool 0 f32 1 4 0 0 0\nx", {region}, fit, why),
      nullptr)
      << why;
  for (const char *lie :
       {"loop 1 1 2 i64 0 bool 0 0 0 0\nx", "loop 1 1 3 i64 0 bool 0 f32 1 4 0 1 1000000 0\nx",
        "loop 2 1 3 i64 0 bool 0 f32 1 4 1 1099511627776 0 0\nx"}) {
    why.clear();
    const std::vector<size_t> wrapped{8, 1, 16, 16, 4};
    EXPECT_EQ(runtime::RegionStep::load(
                  lie, {region}, std::string(lie).rfind("loop 2", 0) == 0 ? wrapped : fit, why),
              nullptr)
        << lie;
  }
}
