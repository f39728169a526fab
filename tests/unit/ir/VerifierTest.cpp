//===- VerifierTest.cpp - Graph invariants ----------------------*- C++ -*-===//
#include "ir/Verifier.h"
#include "ir/Builder.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {
std::string verifyErrors(const Graph &g) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  EXPECT_TRUE(failed(verify(g, diag)));
  return c.str();
}
} // namespace

TEST(VerifierTest, WrongResultTypeIsV5) {
  Graph g("g");
  Value *x = g.addInput(TensorType(DType::F32, std::vector<int64_t>{2}), "x");
  Node *n =
      g.createNode(opInfo(OpKind::Relu), {x}, {TensorType(DType::F32, std::vector<int64_t>{3})}, {},
                   Location::name("r"));
  g.setOutputs({n->result(0)});
  EXPECT_EQ(verifyErrors(g),
            "node 'r': error: [V5] 'relu' op result 0 has type f32[3] but the op infers f32[2]");
}

TEST(VerifierTest, UseBeforeDefinitionIsV2) {
  Graph g("g");
  Value *x = g.addInput(TensorType(DType::F32, std::vector<int64_t>{2}), "x");
  Node *a = g.createNode(opInfo(OpKind::Relu), {x}, {x->type()}, {}, Location::name("a"));
  Node *b = g.createNode(opInfo(OpKind::Neg), {a->result(0)}, {x->type()}, {}, Location::name("b"));
  b->moveBefore(a); // now b uses a's result before a defines it
  g.setOutputs({b->result(0)});
  EXPECT_EQ(verifyErrors(g),
            "node 'b': error: [V2] 'neg' op operand 0 is not defined before its use");
}

TEST(VerifierTest, ArityAndOutputs) {
  Graph g("g");
  Value *x = g.addInput(TensorType(DType::F32, std::vector<int64_t>{2}), "x");
  g.createNode(opInfo(OpKind::Add), {x}, {x->type()}, {}, Location::name("n"));
  EXPECT_EQ(verifyErrors(g), "node 'n': error: [V1] 'add' op has 1 operands, expects 2\n"
                             "error: [V6] graph '@g' has no outputs");
}

TEST(VerifierTest, DuplicateNamesAreV7) {
  Graph g("g");
  Value *x = g.addInput(TensorType(DType::F32, std::vector<int64_t>{2}), "x");
  Node *n = g.createNode(opInfo(OpKind::Relu), {x}, {x->type()}, {}, Location::name("n"));
  n->result(0)->setName("x");
  g.setOutputs({n->result(0)});
  EXPECT_EQ(verifyErrors(g),
            "node 'n': error: [V7] value name '%x' is defined twice in graph '@g'");
}

TEST(VerifierTest, ConstantValueMustMatchTypeV8) {
  Graph g("g");
  std::vector<Attribute> attrs = opInfo(OpKind::Constant).defaults;
  attrs[ConstantOp::value_index] = Tensor::fromDoubles(DType::F32, {2}, {1, 2});
  Node *n =
      g.createNode(opInfo(OpKind::Constant), {}, {TensorType(DType::F32, std::vector<int64_t>{3})},
                   attrs, Location::name("c"));
  g.setOutputs({n->result(0)});
  EXPECT_EQ(verifyErrors(g),
            "node 'c': error: [V8] 'constant' op value f32[2] does not match its type f32[3]");
}
