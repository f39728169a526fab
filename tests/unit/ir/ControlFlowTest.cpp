//===- ControlFlowTest.cpp - if and loop in the interpreter -----*- C++ -*-===//
//
// The reference kernels of the region ops against values worked out by
// hand: both branches, trip counts 0, 1 and several, an early exit by the
// condition, a carried value that grows, scans, nesting, and the errors a
// run can meet (a scan that changes shape, a region input that does not
// bind).
//
//===----------------------------------------------------------------------===//
#include "ir/Interpreter.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

std::unique_ptr<Module> parse(const std::string &text) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  auto m = parseModule(text, diag);
  EXPECT_TRUE(m.succeeded()) << c.str();
  return m.succeeded() ? m.take() : nullptr;
}

Tensor boolean(bool b) {
  return Tensor::fromInts(DType::Bool, {}, {b ? 1 : 0});
}
Tensor i64(int64_t v) {
  return Tensor::fromInts(DType::I64, {}, {v});
}

// y = c ? x * 2 : -x, over a symbolic batch.
const char kIf[] = R"(graph @g(%c: bool[], %x: f32[N,2]) -> (f32[N,2]) {
  %y = if(%c, %x) {else_branch = graph @else(%a: f32[N,2]) -> (f32[N,2]) {
      %b = neg(%a) : f32[N,2]
      return %b
    }, then_branch = graph @then(%a: f32[N,2]) -> (f32[N,2]) {
      %k = constant dense<2.0> : f32[]
      %b = mul(%a, %k) : f32[N,2]
      return %b
    }} : f32[N,2]
  return %y
}
)";

TEST(ControlFlowTest, IfRunsTheBranchTheConditionPicks) {
  auto m = parse(kIf);
  ASSERT_TRUE(m);
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  Tensor x = Tensor::fromDoubles(DType::F32, {3, 2}, {1, -2, 3, -4, 5, -6});
  for (bool cond : {true, false}) {
    auto out = interpret(*m->graphs()[0], std::vector<Tensor>{boolean(cond), x}, diag);
    ASSERT_TRUE(out.succeeded()) << c.str();
    std::vector<double> want = cond ? std::vector<double>{2, -4, 6, -8, 10, -12}
                                    : std::vector<double>{-1, 2, -3, 4, -5, 6};
    EXPECT_EQ((*out)[0].toDoubles(), want) << cond;
  }
}

// Sums 0 + 1 + ... into a carried value while the running sum stays below
// a limit (captured), and scans the carried value before each iteration.
const char kLoop[] = R"(graph @g(%n: i64[], %x: f32[2], %limit: f32[]) -> (f32[2], f32[?,2]) {
  %t = constant dense<true> : bool[]
  %r, %s = loop(%n, %t, %x, %limit) {body = graph @body(%i: i64[], %c: bool[], %a: f32[2], %l: f32[]) -> (bool[], f32[2], f32[2]) {
      %f = cast(%i) {to = f32} : f32[]
      %b = add(%a, %f) : f32[2]
      %m = reduce_max(%b) {axes = [0], keepdims = false} : f32[]
      %go = less(%m, %l) : bool[]
      return %go, %b, %a
    }, num_carried = 1} : f32[2], f32[?,2]
  return %r, %s
}
)";

TEST(ControlFlowTest, LoopCarriesScansAndStopsOnTheCondition) {
  auto m = parse(kLoop);
  ASSERT_TRUE(m);
  const Graph &g = *m->graphs()[0];
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  Tensor x = Tensor::fromDoubles(DType::F32, {2}, {0, 10});
  auto run = [&](int64_t n, double limit) {
    auto out =
        interpret(g, std::vector<Tensor>{i64(n), x, Tensor::scalar(DType::F32, limit)}, diag);
    EXPECT_TRUE(out.succeeded()) << c.str();
    return out.succeeded() ? out.take() : std::vector<Tensor>();
  };
  // Three iterations add 0, 1, 2.
  auto three = run(3, 1000);
  ASSERT_EQ(three.size(), 2u);
  EXPECT_EQ(three[0].toDoubles(), (std::vector<double>{3, 13}));
  EXPECT_EQ(three[1].shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(three[1].toDoubles(), (std::vector<double>{0, 10, 0, 10, 1, 11}));
  // One iteration; none (the scan is empty, [0, 2]); a negative count is none.
  EXPECT_EQ(run(1, 1000)[1].shape(), (std::vector<int64_t>{1, 2}));
  for (int64_t n : {0, -5}) {
    auto none = run(n, 1000);
    ASSERT_EQ(none.size(), 2u);
    EXPECT_EQ(none[0].toDoubles(), (std::vector<double>{0, 10}));
    EXPECT_EQ(none[1].shape(), (std::vector<int64_t>{0, 2}));
  }
  // The condition stops it: after adding 0, 1, 2, 3 the max is 16 >= 15.
  auto early = run(100, 15);
  EXPECT_EQ(early[0].toDoubles(), (std::vector<double>{6, 16}));
  EXPECT_EQ(early[1].shape(), (std::vector<int64_t>{4, 2}));
}

// Appends one row per iteration (torch.cat in a scripted loop): the
// carried value's first dim is `?`; an if inside picks the row.
const char kGrow[] = R"(graph @g(%n: i64[], %x: f32[1,2]) -> (f32[?,2]) {
  %t = constant dense<true> : bool[]
  %r = loop(%n, %t, %x) {body = graph @body(%i: i64[], %c: bool[], %a: f32[?,2]) -> (bool[], f32[?,2]) {
      %two = constant dense<2> : i64[]
      %early = less(%i, %two) : bool[]
      %row = if(%early, %a) {else_branch = graph @late(%p: f32[?,2]) -> (f32[1,2]) {
          %q = reduce_max(%p) {axes = [0]} : f32[1,2]
          return %q
        }, then_branch = graph @first(%p: f32[?,2]) -> (f32[1,2]) {
          %q = reduce_sum(%p) {axes = [0]} : f32[1,2]
          return %q
        }} : f32[1,2]
      %b = concat(%a, %row) {axis = 0} : f32[?,2]
      return %c, %b
    }, num_carried = 1} : f32[?,2]
  return %r
}
)";

TEST(ControlFlowTest, CarriedValueGrowsAndRegionsNest) {
  auto m = parse(kGrow);
  ASSERT_TRUE(m);
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  Tensor x = Tensor::fromDoubles(DType::F32, {1, 2}, {1, 2});
  auto out = interpret(*m->graphs()[0], std::vector<Tensor>{i64(4), x}, diag);
  ASSERT_TRUE(out.succeeded()) << c.str();
  // rows: [1,2]; i=0 sum [1,2]; i=1 sum [2,4]; i=2 max [2,4]; i=3 max [2,4].
  EXPECT_EQ((*out)[0].shape(), (std::vector<int64_t>{5, 2}));
  EXPECT_EQ((*out)[0].toDoubles(), (std::vector<double>{1, 2, 1, 2, 2, 4, 2, 4, 2, 4}));
}

TEST(ControlFlowTest, ScanOutputThatChangesShapeIsAnError) {
  auto m = parse(R"(graph @g(%n: i64[], %x: f32[1]) -> (f32[?,?]) {
  %t = constant dense<true> : bool[]
  %r, %s = loop(%n, %t, %x) {body = graph @body(%i: i64[], %c: bool[], %a: f32[?]) -> (bool[], f32[?], f32[?]) {
      %b = concat(%a, %a) {axis = 0} : f32[?]
      return %c, %b, %b
    }, num_carried = 1} : f32[?], f32[?,?]
  return %s
}
)");
  ASSERT_TRUE(m);
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  auto out =
      interpret(*m->graphs()[0], std::vector<Tensor>{i64(3), Tensor::zeros(DType::F32, {1})}, diag);
  EXPECT_TRUE(out.failed());
  EXPECT_NE(c.str().find("'loop' op scan output 0 is f32[4] in iteration 1 but f32[2] in "
                         "iteration 0; the stacked result needs one shape"),
            std::string::npos)
      << c.str();
}

TEST(ControlFlowTest, ARegionInputThatDoesNotBindIsNamed) {
  // The body says its carried value keeps 4 elements; the input has 3.
  auto m = parse(R"(graph @g(%n: i64[], %x: f32[?]) -> (f32[4]) {
  %t = constant dense<true> : bool[]
  %r = loop(%n, %t, %x) {body = graph @body(%i: i64[], %c: bool[], %a: f32[4]) -> (bool[], f32[4]) {
      return %c, %a
    }, num_carried = 1} : f32[4]
  return %r
}
)");
  ASSERT_TRUE(m);
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  auto out =
      interpret(*m->graphs()[0], std::vector<Tensor>{i64(2), Tensor::zeros(DType::F32, {3})}, diag);
  EXPECT_TRUE(out.failed());
  EXPECT_NE(c.str().find("'loop' op operand 2 (carried) has type f32[3] but region 'body' takes "
                         "f32[4]"),
            std::string::npos)
      << c.str();
}

TEST(ControlFlowTest, RegionsCompareStructurallyAndCloneShared) {
  auto a = parse(kGrow), b = parse(kGrow);
  ASSERT_TRUE(a && b);
  std::string why;
  EXPECT_TRUE(structurallyEqual(*a->graphs()[0], *b->graphs()[0], false, &why)) << why;
  auto c = a->graphs()[0]->clone();
  EXPECT_EQ(printGraph(*c), printGraph(*a->graphs()[0]));
  // A region that differs in one constant makes the graphs differ.
  std::string grown = kGrow;
  grown.replace(grown.find("constant dense<2>"), 17, "constant dense<3>");
  auto e = parse(grown);
  ASSERT_TRUE(e);
  EXPECT_FALSE(structurallyEqual(*a->graphs()[0], *e->graphs()[0], false, &why));
  EXPECT_NE(why.find("attribute 'body' differs"), std::string::npos) << why;
}

} // namespace
