//===- ParserTest.cpp - Text form: parse, print, round-trip -----*- C++ -*-===//
#include "ir/Parser.h"
#include "ir/Printer.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace kiln;

namespace {
std::unique_ptr<Module> parseOk(const std::string &text) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  auto m = parseModule(text, diag);
  EXPECT_TRUE(m.succeeded()) << c.str();
  return m.succeeded() ? m.take() : nullptr;
}

std::string parseError(const std::string &text) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  ParseOptions opts;
  opts.filename = "t.kir";
  auto m = parseModule(text, diag, opts);
  EXPECT_TRUE(m.failed());
  return c.diagnostics().empty() ? std::string() : c.diagnostics()[0].str();
}

const char kCanonical[] = R"(graph @g(%x: f32[N,3], %y: f32[3]) -> (f32[N,3], f32[N,3]) {
  %c = constant dense<[1.0, 2.5, -0.125]> : f32[3]
  %0 = add(%x, %y) : f32[N,3]
  %1 = mul(%0, %c) : f32[N,3]
  %2 = transpose(%1) {perm = [1, 0]} : f32[3,N]
  %out = transpose(%2) {perm = [1, 0]} : f32[N,3]
  return %out, %0
}
)";
} // namespace

TEST(ParserTest, CanonicalTextRoundTrips) {
  auto m = parseOk(kCanonical);
  ASSERT_TRUE(m);
  EXPECT_EQ(printModule(*m), kCanonical);
}

TEST(ParserTest, ParsePrintParseIsStructurallyEqual) {
  auto a = parseOk(kCanonical);
  ASSERT_TRUE(a);
  auto b = parseOk(printModule(*a));
  ASSERT_TRUE(b);
  std::string why;
  EXPECT_TRUE(structurallyEqual(*a->graphs()[0], *b->graphs()[0], false, &why)) << why;
}

TEST(ParserTest, DefaultsAreOmittedAndAttributesSorted) {
  auto m = parseOk(R"(graph @g(%x: f32[2,3]) -> (f32[2,3]) {
  %0 = leaky_relu(%x) {alpha = 0.01} : f32[2,3]
  %1 = gemm(%0, %x) {trans_b = true, alpha = 2} : f32[2,2]
  return %0
})");
  ASSERT_TRUE(m);
  std::string text = printModule(*m);
  EXPECT_NE(text.find("%0 = leaky_relu(%x) : f32[2,3]"), std::string::npos) << text;
  EXPECT_NE(text.find("{alpha = 2.0, trans_b = true}"), std::string::npos) << text;
}

TEST(ParserTest, BlobsCarryWeights) {
  const char *text = R"(graph @g(%x: f32[2]) -> (f32[2]) {
  %w = constant @layer.w : f32[2]
  %0 = add(%x, %w) : f32[2]
  return %0
}

blobs {
  @layer.w = "AACAPwAAAEA="
}
)";
  auto m = parseOk(text);
  ASSERT_TRUE(m);
  const Node *c = m->graphs()[0]->front();
  EXPECT_EQ(ConstantOp(*c).value().toDoubles(), (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(ConstantOp(*c).name(), "layer.w");
  EXPECT_EQ(printModule(*m), text);
  PrintOptions elide;
  elide.elideBlobs = true;
  EXPECT_NE(printModule(*m, elide).find("@layer.w = elided"), std::string::npos);
}

TEST(ParserTest, LargeUnnamedConstantsBecomeBlobs) {
  std::string values;
  for (int i = 0; i < 20; ++i)
    values += (i ? ", " : "") + std::to_string(i) + ".0";
  auto m = parseOk("graph @g() -> (f32[20]) {\n  %c = constant dense<[" + values +
                   "]> : f32[20]\n  return %c\n}\n");
  ASSERT_TRUE(m);
  std::string printed = printModule(*m);
  EXPECT_NE(printed.find("%c = constant @cst.c : f32[20]"), std::string::npos) << printed;
  auto again = parseOk(printed);
  ASSERT_TRUE(again);
  EXPECT_EQ(printModule(*again), printed);
}

TEST(ParserTest, ConstantsOfEveryDType) {
  const char *text = R"(graph @g() -> (bool[3], i8[2], u8[1], i64[2], f16[2], bf16[1], f64[1]) {
  %b = constant dense<[true, false, true]> : bool[3]
  %i = constant dense<[-128, 127]> : i8[2]
  %u = constant dense<[255]> : u8[1]
  %l = constant dense<[-9223372036854775808, 9223372036854775807]> : i64[2]
  %h = constant dense<[0.5, -inf]> : f16[2]
  %bf = constant dense<[3.140625]> : bf16[1]
  %d = constant dense<[0.1]> : f64[1]
  return %b, %i, %u, %l, %h, %bf, %d
}
)";
  auto m = parseOk(text);
  ASSERT_TRUE(m);
  EXPECT_EQ(printModule(*m), text);
}

TEST(ParserTest, FloatsPrintShortestExact) {
  auto m = parseOk("graph @g() -> (f32[3]) {\n  %c = constant dense<[0.1, 1e-07, 3.4028235e+38]> "
                   ": f32[3]\n  return %c\n}\n");
  ASSERT_TRUE(m);
  EXPECT_NE(printModule(*m).find("dense<[0.1, 1e-07, 3.4028235e+38]>"), std::string::npos);
}

TEST(ParserTest, LocationsAreParsedAndPrintedOnRequest) {
  const char *text = R"(graph @g(%x: f32[2]) -> (f32[2]) {
  %0 = relu(%x) : f32[2] loc("model.py":12:8)
  %1 = neg(%0) : f32[2] loc("Neg_1" in "m.onnx")
  %2 = abs(%1) : f32[2] loc(fused["a", "b.py":1:2])
  return %2
}
)";
  auto m = parseOk(text);
  ASSERT_TRUE(m);
  PrintOptions locs;
  locs.printLocs = true;
  EXPECT_EQ(printModule(*m, locs), text);
  EXPECT_EQ(printModule(*m).find("loc("), std::string::npos);
}

TEST(ParserTest, QuotedNames) {
  const char *text = R"(graph @"my graph"(%"input/0": f32[2]) -> (f32[2]) {
  %"layer1/relu:0" = relu(%"input/0") : f32[2]
  return %"layer1/relu:0"
}
)";
  auto m = parseOk(text);
  ASSERT_TRUE(m);
  EXPECT_EQ(printModule(*m), text);
}

TEST(ParserTest, MultipleGraphs) {
  auto m = parseOk("graph @a(%x: f32[1]) -> (f32[1]) {\n  return %x\n}\n\n"
                   "graph @b(%x: f32[1]) -> (f32[1]) {\n  return %x\n}\n");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->graphs().size(), 2u);
  EXPECT_NE(m->lookup("b"), nullptr);
}

TEST(ParserTest, ErrorsAreLocated) {
  EXPECT_EQ(parseError("graph @g(%x: f32[2]) -> (f32[2]) {\n  %0 = frobnicate(%x) : f32[2]\n"
                       "  return %0\n}\n"),
            "t.kir:2:8: error: unknown op 'frobnicate'");
  EXPECT_EQ(parseError("graph @g(%x: f32[2]) -> (f32[2]) {\n  %0 = relu(%y) : f32[2]\n"
                       "  return %0\n}\n"),
            "t.kir:2:13: error: use of undefined value '%y'");
  EXPECT_EQ(parseError("graph @g(%x: f32[2]) -> (f32[2]) {\n  %0 = relu(%1) : f32[2]\n"
                       "  %1 = relu(%0) : f32[2]\n  return %1\n}\n"),
            "t.kir:2:13: error: value '%1' is used before it is defined (the graph must be in "
            "topological order and free of cycles)");
  EXPECT_EQ(parseError("graph @g(%x: f32[2]) -> (f32[2]) {\n  %0 = relu(%x) : f33[2]\n"),
            "t.kir:2:19: error: unknown dtype 'f33'");
  EXPECT_EQ(parseError("graph @g(%x: f32[2]) -> (f32[2]) {\n  %0 = relu(%x) : f32[2]\n"),
            "t.kir:3:1: error: expected a node ('%name = ...') or 'return', got end of input");
  EXPECT_EQ(parseError("graph @g(%x: f32[2]) -> (f32[2]) {\n  %0 = transpose(%x) {perm = 1} : "
                       "f32[2]\n  return %0\n}\n"),
            "t.kir:2:30: error: expected '[', got '1'");
  EXPECT_EQ(parseError("graph @g(%x: f32[2]) -> (f32[2]) {\n  %0 = relu(%x) {alpha = 1.0} : "
                       "f32[2]\n  return %0\n}\n"),
            "t.kir:2:18: error: 'relu' op has no attribute 'alpha'");
  EXPECT_EQ(parseError("graph @g(%x: f32[2]) -> (f32[2]) {\n  %x = relu(%x) : f32[2]\n"
                       "  return %x\n}\n"),
            "t.kir:2:3: error: redefinition of value '%x'");
  EXPECT_EQ(parseError("graph @g() -> (i8[1]) {\n  %c = constant dense<300> : i8[1]\n"
                       "  return %c\n}\n"),
            "t.kir:2:23: error: value 300 is out of range for i8");
  EXPECT_EQ(parseError("graph @g() -> (f32[2]) {\n  %c = constant @w : f32[2]\n  return %c\n}\n"),
            "t.kir:2:17: error: constant refers to undefined blob '@w'");
  EXPECT_EQ(parseError("graph @g() -> (f32[2]) {\n  %c = constant @w : f32[2]\n  return %c\n}\n"
                       "blobs {\n  @w = \"AACAPw==\"\n}\n"),
            "t.kir:2:17: error: blob '@w' has 4 bytes but f32[2] needs 8");
  EXPECT_EQ(parseError("graph @g(%x: f32[2]) -> (f32[3]) {\n  return %x\n}\n"),
            "t.kir:2:10: error: returned value '%x' has type f32[2] but result 0 is declared "
            "f32[3]");
  EXPECT_EQ(parseError("graph @g(%x: f32[2]) -> (f32[2]) {\n  %0 = relu(%x) : f32[2]\n"
                       "  return %0 \"unterminated\n}\n"),
            "t.kir:3:13: error: unterminated string");
}

TEST(ParserTest, LiteralsAndTypes) {
  DiagnosticEngine diag;
  auto t = parseTensorType("f32[N,3,?]", diag);
  ASSERT_TRUE(t.succeeded());
  EXPECT_EQ(t->str(), "f32[N,3,?]");
  auto f = parseAttributeLiteral(AttrKind::Float, "-inf", diag);
  ASSERT_TRUE(f.succeeded());
  EXPECT_TRUE(std::isinf(std::get<double>(*f)));
  auto ints = parseAttributeLiteral(AttrKind::Ints, "[1, -2, 3]", diag);
  ASSERT_TRUE(ints.succeeded());
  EXPECT_EQ(std::get<std::vector<int64_t>>(*ints), (std::vector<int64_t>{1, -2, 3}));
  ScopedDiagnosticCollector c(diag);
  EXPECT_TRUE(parseAttributeLiteral(AttrKind::Int, "99999999999999999999", diag).failed());
  EXPECT_TRUE(parseTensorType("f32[-1]", diag).failed());
}
