//===- InterpreterTest.cpp - The reference interpreter ----------*- C++ -*-===//
#include "ir/Interpreter.h"
#include "ir/Parser.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {
std::unique_ptr<Module> parse(const char *text) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  auto m = parseModule(text, diag);
  EXPECT_TRUE(m.succeeded()) << c.str();
  return m.succeeded() ? m.take() : nullptr;
}

const char kModel[] = R"(graph @g(%x: f32[N,3], %y: f32[3]) -> (f32[N,3], f32[3,N]) {
  %c = constant dense<[1.0, 2.0, 3.0]> : f32[3]
  %0 = add(%x, %y) : f32[N,3]
  %1 = mul(%0, %c) : f32[N,3]
  %2 = relu(%1) : f32[N,3]
  %3 = transpose(%2) {perm = [1, 0]} : f32[3,N]
  return %2, %3
}
)";
} // namespace

TEST(InterpreterTest, RunsAGraphWithSymbolicBatch) {
  auto m = parse(kModel);
  ASSERT_TRUE(m);
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  std::vector<Tensor> in = {Tensor::fromDoubles(DType::F32, {2, 3}, {1, -2, 3, -4, 5, -6}),
                            Tensor::fromDoubles(DType::F32, {3}, {1, 1, 1})};
  auto out = interpret(*m->graphs()[0], in, diag);
  ASSERT_TRUE(out.succeeded()) << c.str();
  EXPECT_EQ((*out)[0].toDoubles(), (std::vector<double>{2, 0, 12, 0, 12, 0}));
  EXPECT_EQ((*out)[1].shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ((*out)[1].toDoubles(), (std::vector<double>{2, 0, 0, 12, 12, 0}));
}

TEST(InterpreterTest, InputMismatchesAreNamed) {
  auto m = parse(kModel);
  ASSERT_TRUE(m);
  const Graph &g = *m->graphs()[0];
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  std::vector<Tensor> wrongShape = {Tensor::zeros(DType::F32, {2, 4}),
                                    Tensor::zeros(DType::F32, {3})};
  EXPECT_TRUE(interpret(g, wrongShape, diag).failed());
  std::vector<Tensor> wrongDType = {Tensor::zeros(DType::F64, {2, 3}),
                                    Tensor::zeros(DType::F32, {3})};
  EXPECT_TRUE(interpret(g, wrongDType, diag).failed());
  std::vector<Tensor> tooFew = {Tensor::zeros(DType::F32, {2, 3})};
  EXPECT_TRUE(interpret(g, tooFew, diag).failed());
  ASSERT_EQ(c.diagnostics().size(), 3u);
  EXPECT_EQ(c.diagnostics()[0].message, "input 0 ('%x') expects shape f32[N,3], got f32[2,4]");
  EXPECT_EQ(c.diagnostics()[1].message, "input 0 ('%x') expects dtype f32, got f64");
  EXPECT_EQ(c.diagnostics()[2].message, "graph '@g' takes 2 input(s), got 1");
}

TEST(InterpreterTest, SymbolsMustBindConsistently) {
  auto m = parse(R"(graph @g(%a: f32[N], %b: f32[N]) -> (f32[N]) {
  %0 = add(%a, %b) : f32[N]
  return %0
}
)");
  ASSERT_TRUE(m);
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  std::vector<Tensor> in = {Tensor::zeros(DType::F32, {2}), Tensor::zeros(DType::F32, {3})};
  EXPECT_TRUE(interpret(*m->graphs()[0], in, diag).failed());
  ASSERT_EQ(c.diagnostics().size(), 1u);
  EXPECT_EQ(c.diagnostics()[0].message, "input 1 ('%b') has N = 3 but input 0 ('%a') bound N = 2");
}

TEST(InterpreterTest, ExpressionDimsAreCheckedAgainstTheBoundSymbols) {
  auto m = parse(R"(graph @g(%a: f32[N,S], %b: f32[N,S+1]) -> (f32[N,2*S+1]) {
  %0 = concat(%a, %b) {axis = 1} : f32[N,2*S+1]
  return %0
}
)");
  ASSERT_TRUE(m);
  const Graph &g = *m->graphs()[0];
  std::vector<Tensor> good = {Tensor::zeros(DType::F32, {2, 3}), Tensor::zeros(DType::F32, {2, 4})};
  DiagnosticEngine diag;
  auto out = interpret(g, good, diag);
  ASSERT_TRUE(out.succeeded());
  EXPECT_EQ((*out)[0].shape(), (std::vector<int64_t>{2, 7}));

  ScopedDiagnosticCollector c(diag);
  std::vector<Tensor> bad = {Tensor::zeros(DType::F32, {2, 3}), Tensor::zeros(DType::F32, {2, 3})};
  EXPECT_TRUE(interpret(g, bad, diag).failed());
  ASSERT_EQ(c.diagnostics().size(), 1u);
  EXPECT_EQ(c.diagnostics()[0].message, "input 1 ('%b') has dim 1 = 3 but S+1 = 4");

  auto lone = parse(R"(graph @h(%a: f32[2*S]) -> (f32[2*S]) {
  %0 = neg(%a) : f32[2*S]
  return %0
}
)");
  ASSERT_TRUE(lone);
  ScopedDiagnosticCollector c2(diag);
  std::vector<Tensor> one = {Tensor::zeros(DType::F32, {4})};
  EXPECT_TRUE(interpret(*lone->graphs()[0], one, diag).failed());
  ASSERT_EQ(c2.diagnostics().size(), 1u);
  EXPECT_EQ(c2.diagnostics()[0].message,
            "input 0 ('%a') dim 0 is 2*S, whose symbols no input dim binds by itself");
}
