//===- TraceControlFlowTest.cpp - kiln::cond, whileLoop, forLoop ----------===//
//
// Each combinator eagerly and traced: the traced graph keeps the decision
// (an `if` or `loop` node), and on other inputs (the other branch, another
// trip count) the graph on the interpreter gives what the eager run gives;
// values read from outside a function are captured; mistakes are located
// errors.
//
//===----------------------------------------------------------------------===//
#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "kiln/Modules.h"
#include "kiln/Trace.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

std::vector<Tensor> run(const Graph &graph, const std::vector<Tensor> &inputs) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collected(diag);
  auto out = interpret(graph, inputs, diag);
  EXPECT_TRUE(out.succeeded()) << collected.str();
  return out.succeeded() ? *out : std::vector<Tensor>{};
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

/// relu(x) * w when sum(x) > 0, else -x + w: w is read from outside both
/// branches (a capture).
std::vector<Tensor> branchy(const Tensor &x, const Tensor &w) {
  Tensor positive = greater(reduce_sum(x, {.keepdims = false}), scalar(0.0));
  return cond(
      positive, [&](const std::vector<Tensor> &a) { return std::vector{mul(relu(a[0]), w)}; },
      [&](const std::vector<Tensor> &a) { return std::vector{add(neg(a[0]), w)}; }, {x});
}

TEST(TraceControlFlow, CondKeepsBothBranches) {
  Tensor w = tensor({1, 2, 3}, {3});
  Tensor pos = tensor({1, -2, 4}, {3}), negv = tensor({-1, -2, 0.5}, {3});
  DiagnosticEngine warnings;
  ScopedDiagnosticCollector collected(warnings);
  auto g = trace([&](const std::vector<Tensor> &in) { return branchy(in[0], in[1]); }, {pos, w},
                 {.inputNames = {"x", "w"}, .diag = &warnings});
  std::string text = printGraph(*g);
  EXPECT_TRUE(contains(text, "= if(")) << text;
  EXPECT_EQ(collected.str(), "") << "cond reads its predicate without a host-read warning";
  for (const Tensor &x : {pos, negv}) {
    auto eager = branchy(x, w);
    auto traced = run(*g, {x, w});
    ASSERT_EQ(traced.size(), 1u);
    EXPECT_TRUE(eager[0].bitwiseEqual(traced[0])) << x.str() << " " << traced[0].str();
  }
}

TEST(TraceControlFlow, WhileLoopKeepsADataDependentExit) {
  // Halve until the max is at most 1: the trip count depends on the values.
  auto fn = [](const Tensor &x) {
    return whileLoop(
        [](const std::vector<Tensor> &c) {
          return greater(reduce_max(c[0], {.keepdims = false}), scalar(1.0));
        },
        [](const std::vector<Tensor> &c) { return std::vector{mul(c[0], scalar(0.5))}; }, {x})[0];
  };
  auto g = trace(fn, {tensor({3, 5}, {2})});
  EXPECT_TRUE(contains(printGraph(*g), "= loop(")) << printGraph(*g);
  for (double big : {0.5, 7.0, 100.0}) {
    Tensor x = tensor({big, 1}, {2});
    auto traced = run(*g, {x});
    ASSERT_EQ(traced.size(), 1u);
    EXPECT_TRUE(fn(x).bitwiseEqual(traced[0])) << big << ": " << traced[0].str();
  }
}

TEST(TraceControlFlow, ForLoopWithACondInsideReadingAnOuterValue) {
  // x = x * 2 on even steps, x + b on odd ones, b computed before the loop.
  auto fn = [](const Tensor &x, const Tensor &b0) {
    Tensor b = add(b0, scalar(1.0));
    return forLoop(
        4,
        [&](const Tensor &i, const std::vector<Tensor> &c) {
          Tensor two = tensorOfInts({2}, {});
          Tensor even = equal(sub(i, mul(div(i, two), two)), tensorOfInts({0}, {}));
          return cond(
              even, [](const std::vector<Tensor> &a) { return std::vector{add(a[0], a[0])}; },
              [&](const std::vector<Tensor> &a) { return std::vector{add(a[0], b)}; }, c);
        },
        {x})[0];
  };
  Tensor x = tensor({1, 2}, {2}), b0 = tensor({10, 20}, {2});
  auto g = trace([&](const std::vector<Tensor> &in) { return fn(in[0], in[1]); }, {x, b0});
  std::string text = printGraph(*g);
  EXPECT_TRUE(contains(text, "= loop(")) << text;
  EXPECT_TRUE(contains(text, "= if(")) << text;
  Tensor x2 = tensor({-3, 0.25}, {2}), b2 = tensor({1, 1}, {2});
  auto traced = run(*g, {x2, b2});
  ASSERT_EQ(traced.size(), 1u);
  EXPECT_TRUE(fn(x2, b2).bitwiseEqual(traced[0])) << traced[0].str();
}

TEST(TraceControlFlow, BranchesOfDifferentDTypesAreALocatedError) {
  Tensor x = tensor({1, 2}, {2});
  try {
    trace(
        [](const Tensor &a) {
          return cond(
              tensor({1}, {}, DType::Bool),
              [](const std::vector<Tensor> &v) { return std::vector{v[0]}; },
              [](const std::vector<Tensor> &v) {
                return std::vector{cast(v[0], {.to = DType::F64})};
              },
              {a})[0];
        },
        {x});
    ADD_FAILURE() << "expected a kiln::Error";
  } catch (const Error &e) {
    std::string what = e.what();
    EXPECT_TRUE(contains(what, "TraceControlFlowTest.cpp:")) << what;
    EXPECT_TRUE(contains(what, "'if' op result 0 is f32[2] in 'then_branch' but f64[2] in "
                               "'else_branch'"))
        << what;
  }
}

TEST(TraceControlFlow, LoopBodyChangingACarriedShapeIsALocatedError) {
  try {
    trace(
        [](const Tensor &a) {
          return forLoop(2,
                         [](const Tensor &, const std::vector<Tensor> &c) {
                           return std::vector{concat({c[0], c[0]}, {.axis = 0})};
                         },
                         {a})[0];
        },
        {tensor({1, 2}, {2})});
    ADD_FAILURE() << "expected a kiln::Error";
  } catch (const Error &e) {
    std::string what = e.what();
    EXPECT_TRUE(contains(what, "'loop' op carried value 0 enters the body as f32[2] but leaves "
                               "it as f32[4]"))
        << what;
  }
}

TEST(TraceControlFlow, AnInitialValueAlsoReadFromTheClosureStaysInvariant) {
  // x is the carried value's start and, read from the closure, a constant
  // of each step: x + x + x + x after three steps, as eagerly.
  auto fn = [](const Tensor &x) {
    return forLoop(
        3, [&](const Tensor &, const std::vector<Tensor> &c) { return std::vector{add(c[0], x)}; },
        {x})[0];
  };
  auto g = trace(fn, {tensor({1, 2}, {2})});
  Tensor other = tensor({-1, 0.5}, {2});
  auto traced = run(*g, {other});
  ASSERT_EQ(traced.size(), 1u);
  EXPECT_EQ(traced[0].toDoubles(), (std::vector<double>{-4, 2}));
  EXPECT_TRUE(fn(other).bitwiseEqual(traced[0]));
}

TEST(TraceControlFlow, BranchesOfTwoShapesAreALocatedError) {
  try {
    trace(
        [](const Tensor &a) {
          return cond(
              tensor({1}, {}, DType::Bool),
              [](const std::vector<Tensor> &v) { return std::vector{v[0]}; },
              [](const std::vector<Tensor> &v) {
                return std::vector{concat({v[0], v[0]}, {.axis = 0})};
              },
              {a})[0];
        },
        {tensor({1, 2}, {2})});
    ADD_FAILURE() << "expected a kiln::Error";
  } catch (const Error &e) {
    std::string what = e.what();
    EXPECT_TRUE(contains(what, "TraceControlFlowTest.cpp:")) << what;
    EXPECT_TRUE(contains(what, "'if' result 0 is f32[?]: a traced if needs results of one shape"))
        << what;
  }
}

TEST(TraceControlFlow, ParametersReadInARegionBecomeGraphInputs) {
  manualSeed(5);
  nn::Linear fc(4, 4);
  auto fn = [&](const Tensor &x) {
    return forLoop(
        2, [&](const Tensor &, const std::vector<Tensor> &c) { return std::vector{fc(c[0])}; },
        {x})[0];
  };
  Tensor x = tensor({1, 2, 3, 4}, {1, 4});
  auto g = trace(fn, {x}, {.inputNames = {"x"}, .parametersAsInputs = true});
  std::string text = printGraph(*g);
  EXPECT_TRUE(contains(text, "(%x: f32[1,4], %weight: f32[4,4], %bias: f32[4])")) << text;
  EXPECT_FALSE(contains(text, "constant @")) << text;
  auto traced = run(*g, withParameters(*g, {x}, fc));
  ASSERT_EQ(traced.size(), 1u);
  EXPECT_TRUE(fn(x).bitwiseEqual(traced[0])) << text;
}

TEST(TraceControlFlow, EagerWithoutATrace) {
  Tensor x = tensor({1, -2}, {2});
  EXPECT_EQ(branchy(x, tensor({0, 0}, {2}))[0].toDoubles(), (std::vector<double>{-1, 2}));
  auto r = forLoop(3,
                   [](const Tensor &, const std::vector<Tensor> &c) {
                     return std::vector{add(c[0], scalar(1.0))};
                   },
                   {x});
  EXPECT_EQ(r[0].toDoubles(), (std::vector<double>{4, 1}));
}

} // namespace
} // namespace kiln
