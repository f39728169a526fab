//===- GraphTest.cpp - SSA graphs and the mutation API ----------*- C++ -*-===//
#include "ir/Builder.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {
struct Fixture {
  Graph g{"g"};
  DiagnosticEngine diag;
  Builder b{g, diag};
  Value *x = g.addInput(TensorType(DType::F32, std::vector<int64_t>{2, 3}), "x");
};
} // namespace

TEST(GraphTest, UseListsFollowOperands) {
  Fixture f;
  Value *r = f.b.createValue(OpKind::Relu, {f.x});
  Value *s = f.b.createValue(OpKind::Add, {r, r});
  ASSERT_TRUE(r && s);
  EXPECT_EQ(r->uses().size(), 2u);
  EXPECT_EQ(f.x->uses().size(), 1u);
  s->definingNode()->setOperand(1, f.x);
  EXPECT_EQ(r->uses().size(), 1u);
  EXPECT_EQ(f.x->uses().size(), 2u);
  f.g.setOutputs({s});
  EXPECT_TRUE(succeeded(verify(f.g, f.diag)));
}

TEST(GraphTest, ReplaceAllUsesWithUpdatesOutputs) {
  Fixture f;
  Value *a = f.b.createValue(OpKind::Relu, {f.x});
  Value *b = f.b.createValue(OpKind::Neg, {a});
  f.g.setOutputs({a, b});
  a->replaceAllUsesWith(f.x);
  EXPECT_FALSE(a->hasUses());
  EXPECT_EQ(f.g.outputs()[0], f.x);
  EXPECT_EQ(b->definingNode()->operand(0), f.x);
  EXPECT_TRUE(a->definingNode()->isUnused());
  f.g.erase(a->definingNode());
  EXPECT_EQ(f.g.numNodes(), 1u);
  EXPECT_TRUE(succeeded(verify(f.g, f.diag)));
}

TEST(GraphTest, InsertAndMove) {
  Fixture f;
  Value *a = f.b.createValue(OpKind::Relu, {f.x});
  f.b.setInsertionPoint(a->definingNode());
  Value *first = f.b.createValue(OpKind::Neg, {f.x});
  EXPECT_EQ(f.g.front(), first->definingNode());
  first->definingNode()->moveAfter(a->definingNode());
  EXPECT_EQ(f.g.back(), first->definingNode());
  first->definingNode()->moveBefore(a->definingNode());
  EXPECT_EQ(f.g.front(), first->definingNode());
  EXPECT_EQ(f.g.nodeList().size(), 2u);
}

TEST(GraphTest, CloneIsStructurallyEqualAndIndependent) {
  Fixture f;
  Value *a = f.b.createValue(OpKind::Relu, {f.x});
  Value *c = f.b.constant(Tensor::fromDoubles(DType::F32, {3}, {1, 2, 3}), "bias");
  Value *s = f.b.createValue(OpKind::Add, {a, c});
  f.g.setOutputs({s});
  auto copy = f.g.clone();
  std::string why;
  EXPECT_TRUE(structurallyEqual(f.g, *copy, true, &why)) << why;
  EXPECT_EQ(printGraph(f.g), printGraph(*copy));
  copy->front()->result(0)->setName("renamed");
  EXPECT_FALSE(structurallyEqual(f.g, *copy));
  // Constants share bytes with the original.
  Node *cn = c->definingNode();
  Node *cc = cn->prev() ? copy->front()->next() : nullptr;
  ASSERT_NE(cc, nullptr);
  EXPECT_EQ(ConstantOp(*cn).value().rawData(), ConstantOp(*cc).value().rawData());
}

TEST(GraphTest, StructuralEqualityNamesTheDifference) {
  Fixture a, b;
  a.g.setOutputs({a.b.createValue(OpKind::Relu, {a.x})});
  b.g.setOutputs({b.b.createValue(OpKind::Neg, {b.x})});
  std::string why;
  EXPECT_FALSE(structurallyEqual(a.g, b.g, false, &why));
  EXPECT_EQ(why, "node 0 ('relu'): op differs");
}
