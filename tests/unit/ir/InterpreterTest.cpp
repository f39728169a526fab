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
  EXPECT_EQ(c.diagnostics()[0].message,
            "input 1 ('%b') has N = 3 but input 0 ('%a') dim 0 bound N = 2");
}

TEST(InterpreterTest, AssumedEqualDimsAreCheckedOncePerRun) {
  // Note [Assumed equal dims]: broadcasting N against M, a matmul
  // contracting K with K2 and a concat's B against C are assumed equal,
  // the results keep the first; the inputs must bind them alike.
  auto m = parse(
      R"(graph @g(%a: f32[N,4], %b: f32[M,4], %x: f32[2,K], %w: f32[K2,3], %c: f32[B,8], %d: f32[C,8]) -> (f32[N,4], f32[N,4], f32[2,3], f32[B,16]) {
  %0 = add(%a, %b) : f32[N,4]
  %1 = mul(%a, %b) : f32[N,4]
  %2 = matmul(%x, %w) : f32[2,3]
  %3 = concat(%c, %d) {axis = 1} : f32[B,16]
  return %0, %1, %2, %3
}
)");
  ASSERT_TRUE(m);
  const Graph &g = *m->graphs()[0];
  std::vector<DimAssumption> assumed = dimAssumptions(g);
  std::vector<std::string> texts;
  for (const DimAssumption &a : assumed)
    texts.push_back(a.str() + " by " + std::string(a.node->mnemonic()));
  // add and mul assume the same pair: listed once, with the first node.
  EXPECT_EQ(texts,
            (std::vector<std::string>{"N == M by add", "K == K2 by matmul", "B == C by concat"}));

  auto run = [&](int64_t n, int64_t mm, int64_t k, int64_t k2, int64_t b, int64_t c) {
    DiagnosticEngine diag;
    ScopedDiagnosticCollector collect(diag);
    std::vector<Tensor> in = {Tensor::zeros(DType::F32, {n, 4}), Tensor::zeros(DType::F32, {mm, 4}),
                              Tensor::zeros(DType::F32, {2, k}), Tensor::zeros(DType::F32, {k2, 3}),
                              Tensor::zeros(DType::F32, {b, 8}), Tensor::zeros(DType::F32, {c, 8})};
    bool ok = interpret(g, in, diag).succeeded();
    std::vector<std::string> messages;
    for (const Diagnostic &d : collect.diagnostics())
      messages.push_back(d.message);
    return std::make_pair(ok, messages);
  };
  EXPECT_TRUE(run(3, 3, 5, 5, 2, 2).first);
  auto [ok, messages] = run(2, 3, 5, 6, 2, 2);
  EXPECT_FALSE(ok);
  EXPECT_EQ(messages, (std::vector<std::string>{
                          "'add' op assumes N == M, but the inputs give N = 2 (from input 0 ('%a') "
                          "dim 0) and M = 3 (from input 1 ('%b') dim 0)",
                          "'matmul' op assumes K == K2, but the inputs give K = 5 (from input 2 "
                          "('%x') dim 1) and K2 = 6 (from input 3 ('%w') dim 0)"}));
  // Broadcasting a 1 is refused too: the assumption is equality.
  EXPECT_FALSE(run(3, 1, 5, 5, 2, 2).first);
  EXPECT_FALSE(run(3, 3, 5, 5, 2, 4).first);
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
