//===- TraceTest.cpp - kiln::trace: graphs, locations, checks, warnings ---===//
#include "kiln/Trace.h"
#include "examples/trace/Models.h"
#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <gtest/gtest.h>

#include <functional>
#include <thread>

namespace kiln {
namespace {

Error errorOf(const std::function<void()> &fn) {
  try {
    fn();
  } catch (const Error &e) {
    return e;
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return Error("none thrown");
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

/// Runs `graph` on the interpreter; fails the test on a diagnostic.
std::vector<Tensor> run(const Graph &graph, const std::vector<Tensor> &inputs) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collected(diag);
  auto out = interpret(graph, inputs, diag);
  EXPECT_TRUE(out.succeeded()) << collected.str();
  return out.succeeded() ? *out : std::vector<Tensor>{};
}

TEST(Trace, RecordsEveryOpWithTheCallSite) {
  Tensor w = randn({3, 4}, 1);
  int line = 0;
  auto fn = [&](const Tensor &x) {
    line = __LINE__ + 1;
    Tensor h = matmul(x, w);
    return relu(h);
  };
  auto graph = trace(fn, {randn({2, 3}, 2)}, {.inputNames = {"x"}, .outputNames = {"y"}});
  PrintOptions withLocs;
  withLocs.printLocs = true;
  std::string text = printGraph(*graph, withLocs);
  EXPECT_TRUE(contains(text, "graph @forward(%x: f32[2,3]) -> (f32[2,4])")) << text;
  EXPECT_TRUE(contains(text, "matmul(%x, ")) << text;
  EXPECT_TRUE(contains(text, "%y = relu(")) << text;
  EXPECT_TRUE(contains(text, "TraceTest.cpp\":" + std::to_string(line) + ":")) << text;
  EXPECT_TRUE(contains(text, "TraceTest.cpp\":" + std::to_string(line + 1) + ":")) << text;
  DiagnosticEngine diag;
  EXPECT_TRUE(succeeded(verify(*graph, diag)));
}

TEST(Trace, DefaultInputNamesAndMultipleOutputs) {
  auto graph = trace(
      [](const std::vector<Tensor> &in) -> std::vector<Tensor> {
        return {add(in[0], in[1]), sub(in[0], in[1])};
      },
      {randn({2}, 1), randn({2}, 2)});
  std::string text = printGraph(*graph);
  EXPECT_TRUE(contains(text, "(%input0: f32[2], %input1: f32[2]) -> (f32[2], f32[2])")) << text;
  std::vector<Tensor> in{randn({2}, 3), randn({2}, 4)};
  auto out = run(*graph, in);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[1].bitwiseEqual(sub(in[0], in[1])));
}

TEST(Trace, ParametersBecomeNamedConstants) {
  manualSeed(3);
  example::MLP mlp;
  Tensor x = randn({4, 256}, 1);
  auto graph = trace([&](const Tensor &in) { return mlp(in); }, {x});
  std::string text = printGraph(*graph);
  EXPECT_TRUE(contains(text, "%fc1.weight = constant @fc1.weight : f32[128,256]")) << text;
  EXPECT_TRUE(contains(text, "%fc3.bias = constant @fc3.bias : f32[10]")) << text;
  // Module results are named after the module.
  EXPECT_TRUE(contains(text, "%fc1 = gemm(%input0, %fc1.weight, %fc1.bias)")) << text;
  EXPECT_TRUE(contains(text, "softmax(%fc3)")) << text;
  EXPECT_TRUE(run(*graph, {x})[0].bitwiseEqual(mlp(x)));
}

TEST(Trace, AModuleCanBeTracedDirectly) {
  manualSeed(3);
  example::MLP mlp;
  Tensor x = randn({4, 256}, 1);
  auto graph = trace(mlp, {x}, {.checkInputs = {{randn({4, 256}, 2)}}});
  EXPECT_TRUE(run(*graph, {x})[0].bitwiseEqual(mlp(x)));
}

TEST(Trace, ParametersAsInputs) {
  manualSeed(3);
  example::MLP mlp;
  Tensor x = randn({4, 256}, 1);
  auto graph = trace([&](const Tensor &in) { return mlp(in); }, {x},
                     {.inputNames = {"x"}, .parametersAsInputs = true});
  std::string text = printGraph(*graph);
  EXPECT_TRUE(contains(text, "(%x: f32[4,256], %fc1.weight: f32[128,256], %fc1.bias: f32[128]"))
      << text;
  EXPECT_FALSE(contains(text, "constant")) << text;
  EXPECT_TRUE(run(*graph, withParameters(*graph, {x}, mlp))[0].bitwiseEqual(mlp(x)));
}

TEST(Trace, ExampleModelsTraceToTheirEagerResults) {
  manualSeed(11);
  example::MLP mlp;
  Tensor x = randn({8, 256}, 5);
  auto mlpGraph = trace([&](const Tensor &in) { return mlp(in); }, {x},
                        {.checkInputs = {{randn({8, 256}, 6)}}});
  EXPECT_TRUE(run(*mlpGraph, {x})[0].bitwiseEqual(mlp(x)));

  example::EncoderBlock block(32, 4, 64);
  Tensor s = randn({2, 5, 32}, 7);
  auto blockGraph = trace([&](const Tensor &in) { return block(in); }, {s},
                          {.checkInputs = {{randn({2, 5, 32}, 8)}}});
  EXPECT_TRUE(run(*blockGraph, {s})[0].bitwiseEqual(block(s)));
  EXPECT_TRUE(contains(printGraph(*blockGraph), "@self_attn.in_proj_weight"));
}

TEST(Trace, ConstantsCreatedInTheFunction) {
  auto graph = trace([](const Tensor &x) { return mul(x, full({3}, 2.0)); }, {randn({3}, 1)});
  std::string text = printGraph(*graph);
  EXPECT_TRUE(contains(text, "constant dense<2.0> : f32[3]")) << text;
}

TEST(Trace, ReturningAnInputOrAConstant) {
  Tensor k = tensor({1, 2}, {2});
  auto graph = trace(
      [&](const std::vector<Tensor> &in) -> std::vector<Tensor> {
        return {in[0], k};
      },
      {randn({2}, 1)});
  std::vector<Tensor> x{randn({2}, 2)};
  auto out = run(*graph, x);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].bitwiseEqual(x[0]));
  EXPECT_TRUE(out[1].bitwiseEqual(k));
}

TEST(Trace, KernelsReturningTheirInputKeepValuesApart) {
  // reshape to the same shape may return its input's bytes; the trace must
  // still tell the two values apart. See Note [Tensor identity].
  auto fn = [](const Tensor &x) {
    Tensor same = reshape(x, {.shape = {2, 2}});
    return add(exp(x), same);
  };
  Tensor x = randn({2, 2}, 1);
  auto graph = trace(fn, {x});
  Tensor other = randn({2, 2}, 2);
  EXPECT_TRUE(run(*graph, {other})[0].bitwiseEqual(fn(other)));
}

TEST(Trace, TheSameTensorTwiceAsInput) {
  Tensor x = randn({3}, 1);
  auto graph = trace([](const std::vector<Tensor> &in) { return sub(in[0], in[1]); }, {x, x});
  Tensor a = randn({3}, 2), b = randn({3}, 3);
  EXPECT_TRUE(run(*graph, {a, b})[0].bitwiseEqual(sub(a, b)));
}

/// Behaviour that depends on the input values: the trace freezes one branch.
Tensor valueDependent(const Tensor &x) {
  if (item(reduce_sum(x)) > 0)
    return mul(x, scalar(2.0));
  return neg(x);
}

TEST(Trace, CheckCatchesValueDependentBehaviour) {
  Tensor positive = full({3}, 1.0), negative = full({3}, -1.0);
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collected(diag);
  Error e = errorOf([&] {
    (void)trace(valueDependent, {positive}, {.checkInputs = {{negative}}, .diag = &diag});
  });
  std::string what = e.what();
  EXPECT_TRUE(contains(what, "trace check failed on check input set 0: output 0 differs")) << what;
  EXPECT_TRUE(contains(what, "note: ")) << what;
  EXPECT_TRUE(contains(what, "TraceTest.cpp")) << what;
  // The host read was reported as a warning at the item() call.
  ASSERT_EQ(collected.diagnostics().size(), 1u) << collected.str();
  const Diagnostic &warning = collected.diagnostics()[0];
  EXPECT_EQ(warning.severity, Severity::Warning);
  EXPECT_TRUE(contains(warning.loc.file(), "TraceTest.cpp"));
  EXPECT_TRUE(contains(warning.message, "'item' reads a traced value back to the host"))
      << warning.message;
  EXPECT_FALSE(isTracing());
}

TEST(Trace, CheckPassesWhenBothInputsTakeTheSameBranch) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collected(diag);
  auto graph =
      trace(valueDependent, {full({3}, 1.0)}, {.checkInputs = {{full({3}, 2.0)}}, .diag = &diag});
  EXPECT_TRUE(graph);
  EXPECT_EQ(collected.diagnostics().size(), 1u); // the warning still says why to be careful
}

TEST(Trace, WarningsAsErrors) {
  int line = __LINE__ + 2;
  auto fn = [](const Tensor &x) {
    std::vector<double> v = toVector(x);
    return add(x, scalar(v[0]));
  };
  Error e = errorOf([&] { (void)trace(fn, {randn({1}, 1)}, {.warningsAsErrors = true}); });
  EXPECT_TRUE(contains(e.what(), "TraceTest.cpp:" + std::to_string(line) + ":")) << e.what();
  EXPECT_TRUE(contains(e.what(), "error: 'toVector' reads a traced value")) << e.what();
  EXPECT_FALSE(isTracing());
}

TEST(Trace, ViewsMadeOutsideTheEagerApiAreWarned) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collected(diag);
  int line = __LINE__ + 1;
  auto fn = [](const Tensor &x) { return neg(exp(x).view({4})); };
  Tensor x = randn({2, 2}, 1);
  Error e = errorOf([&] {
    (void)trace(fn, {x}, {.checkInputs = {{randn({2, 2}, 2)}}, .diag = &diag});
  });
  ASSERT_EQ(collected.diagnostics().size(), 1u) << collected.str();
  const Diagnostic &warning = collected.diagnostics()[0];
  EXPECT_EQ(warning.loc.line(), static_cast<unsigned>(line));
  EXPECT_TRUE(contains(warning.message, "sharing the bytes of a traced value")) << warning.message;
  EXPECT_TRUE(contains(e.what(), "a view of a traced value was recorded as a constant here"))
      << e.what();
}

TEST(Trace, ReadsOfValuesNotComputedFromInputsAreNotWarned) {
  Tensor w = randn({3}, 1);
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collected(diag);
  (void)trace([&](const Tensor &x) { return mul(x, scalar(item(reduce_max(w)))); }, {randn({3}, 2)},
              {.diag = &diag});
  EXPECT_TRUE(collected.diagnostics().empty()) << collected.str();
}

TEST(Trace, ErrorsInsideTheFunctionAreLocatedAndEndTheTrace) {
  int line = __LINE__ + 1;
  auto fn = [](const Tensor &x) { return matmul(x, zeros({5, 2})); };
  Error e = errorOf([&] { (void)trace(fn, {randn({2, 3}, 1)}); });
  EXPECT_TRUE(contains(e.what(), "TraceTest.cpp:" + std::to_string(line) + ":")) << e.what();
  EXPECT_TRUE(contains(e.what(), "error: 'matmul' op")) << e.what();
  EXPECT_FALSE(isTracing());
  // Eager calls after the failed trace are not recorded anywhere.
  EXPECT_EQ(item(add(scalar(1), scalar(2))), 3.0);
}

TEST(Trace, CheckInputsOfAnotherShape) {
  Error e = errorOf([&] {
    (void)trace([](const Tensor &x) { return relu(x); }, {randn({2, 3}, 1)},
                {.checkInputs = {{randn({4, 3}, 2)}}});
  });
  EXPECT_TRUE(contains(e.what(), "the traced graph does not accept these inputs")) << e.what();
  EXPECT_TRUE(contains(e.what(), "expects shape f32[2,3], got f32[4,3]")) << e.what();
}

TEST(Trace, BadOptionsAndNesting) {
  auto id = [](const Tensor &x) { return relu(x); };
  EXPECT_TRUE(contains(errorOf([&] {
                         (void)trace(id, {randn({1}, 1)}, {.inputNames = {"a", "b"}});
                       }).what(),
                       "2 input name(s) for 1 example input(s)"));
  EXPECT_TRUE(contains(errorOf([&] {
                         (void)trace(
                             [](const std::vector<Tensor> &in) { return add(in[0], in[1]); },
                             {randn({1}, 1), randn({1}, 2)}, {.inputNames = {"a", "a"}});
                       }).what(),
                       "input name 'a' is given twice"));
  EXPECT_TRUE(contains(errorOf([&] {
                         (void)trace(
                             [&](const Tensor &x) {
                               (void)trace(id, {x});
                               return x;
                             },
                             {randn({1}, 1)});
                       }).what(),
                       "cannot be nested"));
  EXPECT_FALSE(isTracing());
}

TEST(Trace, TracingStateIsPerThread) {
  Tensor seen;
  bool otherThreadTracing = true;
  auto graph = trace(
      [&](const Tensor &x) {
        std::thread other([&] {
          otherThreadTracing = isTracing();
          seen = exp(randn({2}, 5)); // eager on the other thread, not recorded
        });
        other.join();
        return neg(x);
      },
      {randn({2}, 1)});
  EXPECT_FALSE(otherThreadTracing);
  EXPECT_FALSE(contains(printGraph(*graph), "exp")) << printGraph(*graph);
}

} // namespace
} // namespace kiln
