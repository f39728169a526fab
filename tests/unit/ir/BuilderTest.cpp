//===- BuilderTest.cpp - Creating typed nodes -------------------*- C++ -*-===//
#include "ir/Builder.h"

#include <gtest/gtest.h>

using namespace kiln;

TEST(BuilderTest, InfersResultTypes) {
  Graph g;
  DiagnosticEngine diag;
  Builder b(g, diag);
  Value *x = g.addInput(TensorType(DType::F32, Shape{Dim::symbolic("N"), Dim(3)}), "x");
  Value *y = g.addInput(TensorType(DType::F32, std::vector<int64_t>{3}), "y");
  Value *s = b.createValue(OpKind::Add, {x, y});
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->type().str(), "f32[N,3]");
  Value *t = b.createValue(OpKind::Transpose, {s}, {{"perm", Ints{1, 0}}});
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type().str(), "f32[3,N]");
}

TEST(BuilderTest, AttributeErrors) {
  Graph g;
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  Builder b(g, diag);
  b.setLoc(Location::name("T_1"));
  Value *x = g.addInput(TensorType(DType::F32, std::vector<int64_t>{2, 3}), "x");
  EXPECT_EQ(b.createValue(OpKind::Transpose, {x}, {{"prem", Ints{1, 0}}}), nullptr);
  EXPECT_EQ(b.createValue(OpKind::Transpose, {x}, {{"perm", int64_t(1)}}), nullptr);
  EXPECT_EQ(b.createValue(OpKind::Unsqueeze, {x}), nullptr);
  EXPECT_EQ(b.createValue(OpKind::Add, {x}), nullptr);
  ASSERT_EQ(c.diagnostics().size(), 4u);
  EXPECT_EQ(c.diagnostics()[0].str(), "node 'T_1': error: 'transpose' op has no attribute 'prem'");
  EXPECT_EQ(c.diagnostics()[1].str(),
            "node 'T_1': error: 'transpose' op attribute 'perm' expects int list, got int");
  EXPECT_EQ(c.diagnostics()[2].str(),
            "node 'T_1': error: 'unsqueeze' op requires attribute 'axes'");
  EXPECT_EQ(c.diagnostics()[3].str(), "node 'T_1': error: 'add' op expects 2 operands, got 1");
  EXPECT_EQ(g.numNodes(), 0u);
}

TEST(BuilderTest, IntegersWidenToFloatAttributes) {
  Graph g;
  DiagnosticEngine diag;
  Builder b(g, diag);
  Value *x = g.addInput(TensorType(DType::F32, std::vector<int64_t>{2}), "x");
  auto n = b.create(OpKind::LeakyRelu, {x}, {{"alpha", int64_t(2)}});
  ASSERT_TRUE(n.succeeded());
  EXPECT_EQ(LeakyReluOp(**n).alpha(), 2.0);
}
