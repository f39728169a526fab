//===- DimExprTest.cpp - Symbolic dim expressions ---------------*- C++ -*-===//
//
// The canonical form (equal expressions compare equal), the simplification
// rules, exact division, evaluation against a direct computation over random
// expressions and values, the text form's round trip, and parse errors.
//
//===----------------------------------------------------------------------===//
#include "ir/DimExpr.h"
#include "ir/Parser.h"
#include "ir/Type.h"

#include <functional>
#include <gtest/gtest.h>
#include <random>

using namespace kiln;

namespace {

DimExpr sym(const char *n) {
  return DimExpr::symbol(n);
}
DimExpr c(int64_t v) {
  return DimExpr(v);
}
DimExpr operator+(const DimExpr &a, const DimExpr &b) {
  return *add(a, b);
}
DimExpr operator-(const DimExpr &a, const DimExpr &b) {
  return *DimExpr::sub(a, b);
}
DimExpr operator*(const DimExpr &a, const DimExpr &b) {
  return *mul(a, b);
}
DimExpr operator/(const DimExpr &a, int64_t d) {
  return *DimExpr::floorDiv(a, d);
}
DimExpr modOf(const DimExpr &a, int64_t d) {
  return *DimExpr::mod(a, d);
}

/// The expression parsed back from the text form of a dim.
std::optional<DimExpr> parseDim(const std::string &text) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  auto t = parseTensorType("f32[" + text + "]", diag);
  if (t.failed())
    return std::nullopt;
  return t->shape.at(0).expr();
}

std::string parseError(const std::string &type) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  auto t = parseTensorType(type, diag);
  EXPECT_TRUE(t.failed()) << type;
  return collect.diagnostics().empty() ? "" : collect.diagnostics()[0].str();
}

int64_t floorDivInt(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && (a < 0));
}

} // namespace

TEST(DimExprTest, EqualExpressionsHaveOneForm) {
  DimExpr n = sym("N"), s = sym("S");
  EXPECT_EQ(n + s, s + n);
  EXPECT_EQ(c(2) * n - n, n);
  EXPECT_EQ((n + c(1)) * (n - c(1)), n * n - c(1));
  EXPECT_EQ((n * s) * c(3), s * (c(3) * n));
  EXPECT_TRUE((n - n).isConstant());
  EXPECT_EQ((n - n).constant(), 0);
  EXPECT_NE(n + c(1), n);
  EXPECT_EQ(n.symbolName(), "N");
  EXPECT_EQ((n + c(1)).symbolName(), "");
}

TEST(DimExprTest, DivisionAndModuloTakeOutMultiples) {
  DimExpr s = sym("S"), n = sym("N");
  EXPECT_EQ((c(8) * s + c(9)) / 8, s + c(1));
  EXPECT_EQ((c(9) * s) / 8, s + s / 8);
  EXPECT_EQ((s / 2) / 4, s / 8);
  EXPECT_EQ(DimExpr::ceilDiv(s, 8)->str(), "(S+7)/8");
  EXPECT_EQ(c(-7) / 2, c(-4)); // floor, as Python's //
  EXPECT_EQ(modOf(c(8) * s + c(9), 8), c(1));
  EXPECT_EQ(modOf(c(9) * s, 8), modOf(s, 8));
  EXPECT_EQ(modOf(modOf(s, 4), 4), modOf(s, 4));
  EXPECT_EQ(modOf(c(-7), 2), c(1));
  EXPECT_EQ(modOf(n * s, 1), c(0));
  EXPECT_FALSE(DimExpr::floorDiv(s, 0));
  EXPECT_FALSE(DimExpr::mod(s, -3));
}

TEST(DimExprTest, MinMaxPickAProvableSide) {
  DimExpr s = sym("S"), n = sym("N");
  EXPECT_EQ(DimExpr::max(s, c(0)), s);
  EXPECT_EQ(DimExpr::min(s + c(1), s), s);
  EXPECT_EQ(DimExpr::min(s, n), DimExpr::min(n, s));
  EXPECT_EQ(DimExpr::min(s, n).str(), "min(N,S)");
  // S - 1 may be negative (S = 0): no side is provable.
  EXPECT_EQ(DimExpr::max(s - c(1), c(0)).str(), "max(S-1,0)");
  EXPECT_EQ(DimExpr::min(c(3), c(5)), c(3));
}

TEST(DimExprTest, ExactDivision) {
  DimExpr n = sym("N"), s = sym("S");
  EXPECT_EQ(*DimExpr::exactDiv(c(12) * n, c(3)), c(4) * n);
  EXPECT_EQ(*DimExpr::exactDiv(c(64) * n * s, c(64) * n), s);
  EXPECT_EQ(*DimExpr::exactDiv(n * s + n, n), s + c(1));
  EXPECT_FALSE(DimExpr::exactDiv(c(2) * n + c(1), c(2)));
  EXPECT_FALSE(DimExpr::exactDiv(n, s));
  EXPECT_FALSE(DimExpr::exactDiv(n, c(0)));
}

TEST(DimExprTest, TextFormRoundTrips) {
  DimExpr n = sym("N"), s = sym("S");
  for (const DimExpr &e :
       {n, n + c(1), s - c(1), c(2) * n * s + s - c(1), c(2) * (n / 8), s / 8 * n,
        DimExpr::ceilDiv(s, 8).value(), modOf(s + c(3), 4), DimExpr::min(s, c(128)),
        DimExpr::max(n, s) + c(1), c(-1) * n + s, (s + c(7)) / 8 * c(8)}) {
    auto back = parseDim(e.str());
    ASSERT_TRUE(back) << e.str();
    EXPECT_EQ(*back, e) << e.str() << " parsed back as " << back->str();
  }
  EXPECT_EQ(parseDim("2*(N+1)")->str(), "2*N+2");
  EXPECT_EQ(parseDim("N - 1 + 1")->str(), "N");
  EXPECT_EQ(parseDim("min(S, 512)")->str(), "min(S,512)");
  // A symbol may be named like a function when no '(' follows.
  EXPECT_EQ(parseDim("min+1")->str(), "min+1");
}

TEST(DimExprTest, ParseErrorsNameTheProblem) {
  EXPECT_NE(parseError("f32[N/0]").find("positive integer"), std::string::npos);
  EXPECT_NE(parseError("f32[N/S]").find("positive integer"), std::string::npos);
  EXPECT_NE(parseError("f32[-1]").find("bad dimension '-1'"), std::string::npos);
  EXPECT_NE(parseError("f32[3-5]").find("bad dimension '-2'"), std::string::npos);
  EXPECT_NE(parseError("f32[mod(N)]").find("','"), std::string::npos);
  EXPECT_NE(parseError("f32[(N+1]").find("')'"), std::string::npos);
  EXPECT_NE(parseError("f32[9223372036854775807*2*N]").find("overflows"), std::string::npos);
}

TEST(DimExprTest, DimsAreStaticWhenConstant) {
  Dim n = Dim::symbolic("N");
  EXPECT_TRUE((n - n).isStatic());
  EXPECT_EQ((n * Dim(0)).size(), 0);
  EXPECT_EQ((n + Dim(2)).str(), "N+2");
  EXPECT_TRUE((n + Dim::dynamic()).isDynamic());
  EXPECT_EQ(addConstant(Dim(3), -1).size(), 2);
  EXPECT_TRUE(addConstant(Dim(0), -1).isDynamic()); // never a size
  EXPECT_EQ(substituteDim(n * Dim(4), {{"N", 3}}).size(), 12);
  EXPECT_EQ(*evaluateDim(ceilDiv(n, 8), {{"N", 17}}), 3);
  EXPECT_FALSE(evaluateDim(n, {}));
  EXPECT_EQ(*exactDivDim(n * Dim(6), Dim(3)), n * Dim(2));
  EXPECT_EQ(n + Dim(1), Dim::symbolic("N") + Dim(1));
  EXPECT_NE(n, Dim::dynamic());
}

// Random expressions over two symbols, built through the canonicalizing
// operations and evaluated directly at the same time: the canonical form
// must evaluate to the direct value at random symbol values, and its text
// must parse back to the same form.
TEST(DimExprTest, RandomExpressionsEvaluateAndRoundTrip) {
  std::mt19937 rng(7);
  struct Pair {
    DimExpr e;
    std::function<int64_t(int64_t, int64_t)> f;
  };
  auto leaf = [&]() -> Pair {
    switch (rng() % 3) {
    case 0:
      return {sym("N"), [](int64_t n, int64_t) { return n; }};
    case 1:
      return {sym("S"), [](int64_t, int64_t s) { return s; }};
    default: {
      int64_t v = static_cast<int64_t>(rng() % 7) - 2;
      return {c(v), [v](int64_t, int64_t) { return v; }};
    }
    }
  };
  std::function<Pair(int)> build = [&](int depth) -> Pair {
    if (depth == 0)
      return leaf();
    Pair a = build(depth - 1), b = build(depth - 1);
    int64_t k = static_cast<int64_t>(rng() % 5) + 1;
    auto fa = a.f, fb = b.f;
    switch (rng() % 7) {
    case 0:
      return {a.e + b.e, [=](int64_t n, int64_t s) { return fa(n, s) + fb(n, s); }};
    case 1:
      return {a.e - b.e, [=](int64_t n, int64_t s) { return fa(n, s) - fb(n, s); }};
    case 2:
      return {a.e * b.e, [=](int64_t n, int64_t s) { return fa(n, s) * fb(n, s); }};
    case 3:
      return {a.e / k, [=](int64_t n, int64_t s) { return floorDivInt(fa(n, s), k); }};
    case 4:
      return {modOf(a.e, k),
              [=](int64_t n, int64_t s) { return fa(n, s) - floorDivInt(fa(n, s), k) * k; }};
    case 5:
      return {DimExpr::min(a.e, b.e),
              [=](int64_t n, int64_t s) { return std::min(fa(n, s), fb(n, s)); }};
    default:
      return {DimExpr::max(a.e, b.e),
              [=](int64_t n, int64_t s) { return std::max(fa(n, s), fb(n, s)); }};
    }
  };
  for (int i = 0; i < 400; ++i) {
    Pair p = build(static_cast<int>(rng() % 4));
    for (int j = 0; j < 8; ++j) {
      int64_t n = static_cast<int64_t>(rng() % 40), s = static_cast<int64_t>(rng() % 40);
      auto got = p.e.evaluate({{"N", n}, {"S", s}});
      ASSERT_TRUE(got) << p.e.str();
      ASSERT_EQ(*got, p.f(n, s)) << p.e.str() << " at N=" << n << " S=" << s;
    }
    if (p.e.isConstant())
      continue;                             // a negative constant is no dim
    auto back = parseDim("0+" + p.e.str()); // a leading constant parses any sign
    ASSERT_TRUE(back) << p.e.str();
    EXPECT_EQ(*back, p.e) << p.e.str() << " parsed back as " << back->str();
  }
}
