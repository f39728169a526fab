//===- ControlFlowTest.cpp - ONNX If and Loop -------------------*- C++ -*-===//
//
// Subgraphs imported as regions: values read from enclosing scopes become
// captures (through two levels of nesting), captured initializers become
// constants inside, both If branches take the same captures, a Loop's
// carried value that grows is widened to `?`; Scan with reversed and
// transposed inputs and outputs; and the errors of a broken subgraph. Values are checked on the
// interpreter.
//
//===----------------------------------------------------------------------===//
#include "OnnxTestUtil.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::testing;

namespace {

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

/// Scan over x (rows 2, length `len` on axis 1, read in reverse): the state
/// is the running sum of the slices; scan output y is the state after each
/// step, stacked on axis 1; scan output z is each slice, in reverse order.
ModelBuilder scanModel(OnnxDim len) {
  ModelBuilder b(17);
  b.input("s0", {int64_t(2)});
  b.input("x", {int64_t(2), len});
  SubgraphBuilder body("body");
  body.input("s_in", onnx::TensorProto::FLOAT, {2});
  body.input("x_i", onnx::TensorProto::FLOAT, {2});
  body.node("Add", {"s_in", "x_i"}, {"s_out"});
  body.node("Identity", {"s_out"}, {"y_i"});
  body.node("Identity", {"x_i"}, {"z_i"});
  body.output("s_out");
  body.output("y_i");
  body.output("z_i");
  onnx::NodeProto &n = b.node("Scan", {"s0", "x"}, {"s", "y", "z"}, "scan");
  attrGraph(n, "body", body.g);
  attrInt(n, "num_scan_inputs", 1);
  attrInts(n, "scan_input_axes", {1});
  attrInts(n, "scan_input_directions", {1});
  attrInts(n, "scan_output_axes", {-1, 0});
  attrInts(n, "scan_output_directions", {0, 1});
  b.output("s");
  b.output("y");
  b.output("z");
  return b;
}

TEST(OnnxControlFlowTest, ScanReadsAndWritesInEitherDirectionOnAnyAxis) {
  for (OnnxDim len : {OnnxDim(int64_t(3)), OnnxDim(std::string("L"))}) {
    auto r = importModel(scanModel(len));
    ASSERT_TRUE(r.ok) << r.errors;
    // The scan length is the loop's trip count and the outputs' size.
    bool symbolic = std::holds_alternative<std::string>(len);
    EXPECT_NE(r.text.find(symbolic ? "-> (f32[2], f32[2,L], f32[L,2])"
                                   : "-> (f32[2], f32[2,3], f32[3,2])"),
              std::string::npos)
        << r.text;
    for (int64_t n : symbolic ? std::vector<int64_t>{1, 4} : std::vector<int64_t>{3}) {
      std::vector<double> xs;
      for (int64_t i = 0; i < 2 * n; ++i)
        xs.push_back(double(i + 1));
      auto outs = runGraph(*r.module, {floats({2}, {100, 200}), floats({2, n}, xs)});
      ASSERT_EQ(outs.size(), 3u) << r.text;
      // Step k reads column n-1-k; y[:, k] is the sum so far.
      std::vector<double> s{100, 200}, y(static_cast<size_t>(2 * n)), z;
      for (int64_t k = 0; k < n; ++k)
        for (int64_t row = 0; row < 2; ++row) {
          s[row] += xs[static_cast<size_t>(row * n + n - 1 - k)];
          y[static_cast<size_t>(row * n + k)] = s[row];
        }
      // z, written in reverse, is x transposed.
      for (int64_t col = 0; col < n; ++col)
        for (int64_t row = 0; row < 2; ++row)
          z.push_back(xs[static_cast<size_t>(row * n + col)]);
      EXPECT_EQ(outs[0].toDoubles(), s);
      EXPECT_EQ(outs[1].shape(), (std::vector<int64_t>{2, n}));
      EXPECT_EQ(outs[1].toDoubles(), y);
      EXPECT_EQ(outs[2].shape(), (std::vector<int64_t>{n, 2}));
      EXPECT_EQ(outs[2].toDoubles(), z);
    }
  }
}

TEST(OnnxControlFlowTest, ScanWithoutStatesOverAScalarIsAnErrorAtTheNode) {
  // No state: every input is scanned; x is a scalar, with no axis.
  ModelBuilder b(17);
  b.input("x", {});
  SubgraphBuilder body("body");
  body.input("x_i", onnx::TensorProto::FLOAT, {});
  body.node("Neg", {"x_i"}, {"y_i"});
  body.output("y_i");
  onnx::NodeProto &n = b.node("Scan", {"x"}, {"y"}, "scan");
  attrGraph(n, "body", body.g);
  attrInt(n, "num_scan_inputs", 1);
  b.output("y");
  EXPECT_TRUE(importFails(b, "node 'scan': error: Scan: scan input 0 is a scalar, with no axis to "
                             "scan"));
  // Over a vector it runs: y = -x.
  ModelBuilder ok(17);
  ok.input("x", {int64_t(4)});
  onnx::NodeProto &m = ok.node("Scan", {"x"}, {"y"}, "scan");
  attrGraph(m, "body", body.g);
  attrInt(m, "num_scan_inputs", 1);
  ok.output("y");
  auto r2 = importModel(ok);
  ASSERT_TRUE(r2.ok) << r2.errors;
  auto outs = runGraph(*r2.module, {floats({4}, {1, -2, 3, -4})});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].toDoubles(), (std::vector<double>{-1, 2, -3, 4}));
}

TEST(OnnxControlFlowTest, ScanInputsOfDifferentLengthsAreAnErrorAtTheNode) {
  ModelBuilder b = scanModel(int64_t(3));
  b.input("x2", {int64_t(2), int64_t(4)});
  onnx::NodeProto *n = b.graph().mutable_node(0);
  n->add_input("x2");
  n->mutable_attribute(1)->set_i(2);    // num_scan_inputs
  n->mutable_attribute(2)->add_ints(1); // scan_input_axes
  n->mutable_attribute(3)->add_ints(0); // scan_input_directions
  EXPECT_TRUE(
      importFails(b, "scan input 1 has 4 elements along its scan axis, scan input 0 has 3"));
}

TEST(OnnxControlFlowTest, UnsupportedOpInsideASubgraphIsListedWithItsScope) {
  ModelBuilder b = ifModel();
  onnx::NodeProto *n = b.graph().mutable_node(0);
  onnx::GraphProto *then = n->mutable_attribute(0)->mutable_g();
  then->mutable_node(0)->set_op_type("NoSuchOp");
  EXPECT_TRUE(importFails(b, "1 node uses ONNX ops or attributes that Kiln does not support: "
                             "NoSuchOp"));
  EXPECT_TRUE(importFails(b, "<NoSuchOp #0 in then_branch of 'if'>"));
}

TEST(OnnxControlFlowTest, SubgraphReadingAnUndefinedNameIsAnError) {
  ModelBuilder b = ifModel();
  onnx::GraphProto *otherwise = b.graph().mutable_node(0)->mutable_attribute(1)->mutable_g();
  otherwise->mutable_node(0)->set_input(0, "nowhere");
  EXPECT_TRUE(importFails(b, "If: a subgraph reads 'nowhere', which is not defined by any node, "
                             "graph input or initializer"));
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
  EXPECT_TRUE(importFails(b, "'if' op result 0 is f32[3] in 'then_branch' but f64[3] in "
                             "'else_branch'"));
}

} // namespace
