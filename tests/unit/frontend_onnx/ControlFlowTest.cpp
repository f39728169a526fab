//===- ControlFlowTest.cpp - ONNX If and Loop -------------------*- C++ -*-===//
//
// Subgraphs imported as regions: values read from enclosing scopes become
// captures (through two levels of nesting), captured initializers become
// constants inside, both If branches take the same captures, a Loop's
// carried value that grows is widened to `?`; and the errors of a broken
// subgraph. Values are checked on the interpreter.
//
//===----------------------------------------------------------------------===//
#include "OnnxTestUtil.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::testing;

namespace {

/// A subgraph: `nodes` over the names it reads, returning `outputs`.
struct SubgraphBuilder {
  onnx::GraphProto g;
  explicit SubgraphBuilder(const std::string &name) { g.set_name(name); }
  void input(const std::string &name, int32_t elemType, std::vector<int64_t> dims) {
    auto *vi = g.add_input();
    vi->set_name(name);
    auto *tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elemType);
    auto *shape = tt->mutable_shape();
    for (int64_t d : dims)
      shape->add_dim()->set_dim_value(d);
  }
  onnx::NodeProto &node(const std::string &op, std::vector<std::string> in,
                        std::vector<std::string> out) {
    auto *n = g.add_node();
    n->set_op_type(op);
    for (const auto &i : in)
      n->add_input(i);
    for (const auto &o : out)
      n->add_output(o);
    return *n;
  }
  void output(const std::string &name) { g.add_output()->set_name(name); }
};

void attrGraph(onnx::NodeProto &n, const std::string &name, const onnx::GraphProto &g) {
  *addAttr(n, name, onnx::AttributeProto::GRAPH).mutable_g() = g;
}

Tensor floats(std::vector<int64_t> shape, std::vector<double> v) {
  return Tensor::fromDoubles(DType::F32, std::move(shape), v);
}

/// y = c ? x + w : y0 * 2, with x and y0 read from the main graph and w an
/// initializer of the main graph.
ModelBuilder ifModel() {
  ModelBuilder b(17);
  b.input("c", {}, onnx::TensorProto::BOOL);
  b.input("x", {int64_t(3)});
  b.input("y0", {int64_t(3)});
  b.init("w", {3}, {10, 20, 30});
  b.init("two", {}, {2});
  SubgraphBuilder then("then");
  then.node("Add", {"x", "w"}, {"t"});
  then.output("t");
  SubgraphBuilder otherwise("else");
  otherwise.node("Mul", {"y0", "two"}, {"e"});
  otherwise.output("e");
  onnx::NodeProto &n = b.node("If", {"c"}, {"y"}, "if");
  attrGraph(n, "then_branch", then.g);
  attrGraph(n, "else_branch", otherwise.g);
  b.output("y");
  return b;
}

TEST(OnnxControlFlowTest, IfCapturesValuesOfTheMainGraph) {
  auto r = importModel(ifModel());
  ASSERT_TRUE(r.ok) << r.errors;
  // Both branches take x and y0 (the then-branch's capture first); the
  // initializers become constants inside the regions.
  EXPECT_NE(r.text.find("= if(%c, %x, %y0)"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("graph @then_branch(%x: f32[3], %y0: f32[3])"), std::string::npos)
      << r.text;
  EXPECT_NE(r.text.find("graph @else_branch(%x: f32[3], %y0: f32[3])"), std::string::npos)
      << r.text;
  EXPECT_NE(r.text.find("%w = constant @w : f32[3]"), std::string::npos) << r.text;
  Tensor x = floats({3}, {1, 2, 3}), y0 = floats({3}, {-1, -2, -3});
  for (bool c : {true, false}) {
    auto outs = runGraph(*r.module, {Tensor::fromInts(DType::Bool, {}, {c}), x, y0});
    ASSERT_EQ(outs.size(), 1u);
    std::vector<double> want =
        c ? std::vector<double>{11, 22, 33} : std::vector<double>{-2, -4, -6};
    EXPECT_EQ(outs[0].toDoubles(), want);
  }
}

/// for i in range(n): acc = cat(acc, [x * i]) if i % 2 else cat(acc, [z]);
/// also scans acc's row count: a Loop whose body holds an If that reads a
/// value of the main graph (z) through the body.
ModelBuilder loopModel() {
  ModelBuilder b(17);
  b.input("n", {}, onnx::TensorProto::INT64);
  b.input("x", {int64_t(1), int64_t(2)});
  b.input("z", {int64_t(1), int64_t(2)});
  b.initInts("two", {}, {2});
  b.initInts("zero", {}, {0});
  SubgraphBuilder odd("odd");
  odd.node("Cast", {"i"}, {"fi"});
  attrInt(*odd.g.mutable_node(0), "to", onnx::TensorProto::FLOAT);
  odd.node("Mul", {"x", "fi"}, {"row_odd"});
  odd.output("row_odd");
  SubgraphBuilder even("even");
  even.node("Identity", {"z"}, {"row_even"});
  even.output("row_even");
  SubgraphBuilder body("body");
  body.input("i", onnx::TensorProto::INT64, {});
  body.input("cond_in", onnx::TensorProto::BOOL, {});
  body.input("acc_in", onnx::TensorProto::FLOAT, {});
  body.node("Mod", {"i", "two"}, {"m"});
  body.node("Equal", {"m", "zero"}, {"is_even"});
  body.node("Not", {"is_even"}, {"is_odd"});
  onnx::NodeProto &inner = body.node("If", {"is_odd"}, {"row"});
  attrGraph(inner, "then_branch", odd.g);
  attrGraph(inner, "else_branch", even.g);
  body.node("Concat", {"acc_in", "row"}, {"acc_out"});
  attrInt(*body.g.mutable_node(4), "axis", 0);
  body.node("Shape", {"acc_out"}, {"rows"});
  body.node("Identity", {"cond_in"}, {"cond_out"});
  body.output("cond_out");
  body.output("acc_out");
  body.output("rows");
  onnx::NodeProto &n = b.node("Loop", {"n", "", "x"}, {"acc", "scan"}, "loop");
  attrGraph(n, "body", body.g);
  b.output("acc");
  b.output("scan");
  return b;
}

TEST(OnnxControlFlowTest, LoopWithNestedIfCapturesThroughTwoLevels) {
  auto r = importModel(loopModel());
  ASSERT_TRUE(r.ok) << r.errors;
  // The growing accumulator is `?` in the body; z is captured by the loop
  // (for the if inside) and by the if; the absent condition is `true`.
  EXPECT_NE(r.text.find("%acc_in: f32[?,2]"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("= loop(%n, %"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find(", %x, %z) {body = graph @body("), std::string::npos) << r.text;
  Tensor x = floats({1, 2}, {1, 2}), z = floats({1, 2}, {7, 8});
  auto outs = runGraph(*r.module, {Tensor::fromInts(DType::I64, {}, {4}), x, z});
  ASSERT_EQ(outs.size(), 2u) << r.text;
  // rows: x; i=0 even z; i=1 odd x*1; i=2 even z; i=3 odd x*3.
  EXPECT_EQ(outs[0].shape(), (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(outs[0].toDoubles(), (std::vector<double>{1, 2, 7, 8, 1, 2, 7, 8, 3, 6}));
  EXPECT_EQ(outs[1].shape(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(outs[1].toDoubles(), (std::vector<double>{2, 2, 3, 2, 4, 2, 5, 2}));
  // Zero iterations give the initial value and an empty scan.
  auto none = runGraph(*r.module, {Tensor::fromInts(DType::I64, {}, {0}), x, z});
  ASSERT_EQ(none.size(), 2u);
  EXPECT_EQ(none[0].toDoubles(), (std::vector<double>{1, 2}));
  EXPECT_EQ(none[1].shape(), (std::vector<int64_t>{0, 2}));
}

TEST(OnnxControlFlowTest, UnsupportedOpInsideASubgraphIsListedWithItsScope) {
  ModelBuilder b = ifModel();
  onnx::NodeProto *n = b.graph().mutable_node(0);
  onnx::GraphProto *then = n->mutable_attribute(0)->mutable_g();
  then->mutable_node(0)->set_op_type("NoSuchOp");
  auto r = importModel(b);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.errors.find("1 node uses ONNX ops or attributes that Kiln does not support: "
                          "NoSuchOp"),
            std::string::npos)
      << r.errors;
  EXPECT_NE(r.errors.find("<NoSuchOp #0 in then_branch of 'if'>"), std::string::npos) << r.errors;
}

TEST(OnnxControlFlowTest, SubgraphReadingAnUndefinedNameIsAnError) {
  ModelBuilder b = ifModel();
  onnx::GraphProto *otherwise = b.graph().mutable_node(0)->mutable_attribute(1)->mutable_g();
  otherwise->mutable_node(0)->set_input(0, "nowhere");
  auto r = importModel(b);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.errors.find("If: a subgraph reads 'nowhere', which is not defined by any node, "
                          "graph input or initializer"),
            std::string::npos)
      << r.errors;
}

TEST(OnnxControlFlowTest, BranchesOfDifferentDTypesAreAnErrorAtTheNode) {
  ModelBuilder b = ifModel();
  onnx::GraphProto *otherwise = b.graph().mutable_node(0)->mutable_attribute(1)->mutable_g();
  auto *cast = otherwise->add_node();
  cast->set_op_type("Cast");
  cast->add_input("e");
  cast->add_output("e64");
  attrInt(*cast, "to", onnx::TensorProto::DOUBLE);
  otherwise->mutable_output(0)->set_name("e64");
  auto r = importModel(b);
  ASSERT_FALSE(r.ok);
  EXPECT_NE(r.errors.find("'if' op result 0 is f32[3] in 'then_branch' but f64[3] in "
                          "'else_branch'"),
            std::string::npos)
      << r.errors;
}

} // namespace
