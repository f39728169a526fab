//===- SequenceTest.cpp - ONNX sequence ops ---------------------*- C++ -*-===//
//
// Note [Sequences] (frontend/onnx/Internal.h): lists resolved at import
// time, a sequence a Loop appends to stacked into a tensor whose element
// shape an empty start learns from the body, and the errors where a
// sequence reaches what Kiln cannot express. Values are checked on the
// interpreter.
//
//===----------------------------------------------------------------------===//
#include "OnnxTestUtil.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::testing;

namespace {

Tensor iota(std::vector<int64_t> shape, double start) {
  Tensor t = Tensor::zeros(DType::F32, shape);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setDouble(i, start + double(i));
  return t;
}

TEST(OnnxSequenceTest, ListsResolveAtImport) {
  // seq = [x, y]; insert z at 0; erase the last: [z, x]. Its length, its
  // element 1, its concat on axis 0, its stack on the last axis; and w
  // split into chunks of 2 rows and concatenated back.
  ModelBuilder b(17);
  b.input("x", {int64_t(2), int64_t(3)});
  b.input("y", {int64_t(2), int64_t(3)});
  b.input("z", {int64_t(2), int64_t(3)});
  b.input("w", {int64_t(5), int64_t(2)});
  b.initInts("zero", {}, {0});
  b.initInts("one", {}, {1});
  b.initInts("two", {}, {2});
  b.node("SequenceConstruct", {"x", "y"}, {"s0"}, "construct");
  b.node("SequenceInsert", {"s0", "z", "zero"}, {"s1"}, "insert");
  b.node("SequenceErase", {"s1"}, {"s2"}, "erase");
  b.node("Identity", {"s2"}, {"s3"}, "identity");
  b.node("SequenceLength", {"s3"}, {"len"}, "length");
  b.node("SequenceAt", {"s3", "one"}, {"at1"}, "at");
  attrInt(b.node("ConcatFromSequence", {"s3"}, {"cat"}, "cat"), "axis", 0);
  onnx::NodeProto &stack = b.node("ConcatFromSequence", {"s3"}, {"stack"}, "stack");
  attrInt(stack, "axis", -1);
  attrInt(stack, "new_axis", 1);
  b.node("SplitToSequence", {"w", "two"}, {"pieces"}, "split");
  b.node("SequenceLength", {"pieces"}, {"npieces"}, "npieces");
  attrInt(b.node("ConcatFromSequence", {"pieces"}, {"joined"}, "join"), "axis", 0);
  for (const char *o : {"len", "at1", "cat", "stack", "npieces", "joined"})
    b.output(o);
  auto r = importModel(b);
  ASSERT_TRUE(r.ok) << r.errors;
  EXPECT_NE(r.text.find("-> (i64[], f32[2,3], f32[4,3], f32[2,3,2], i64[], f32[5,2])"),
            std::string::npos)
      << r.text;
  Tensor x = iota({2, 3}, 0), y = iota({2, 3}, 10), z = iota({2, 3}, 20), w = iota({5, 2}, 30);
  auto outs = runGraph(*r.module, {x, y, z, w});
  ASSERT_EQ(outs.size(), 6u) << r.text;
  EXPECT_EQ(outs[0].toDoubles(), std::vector<double>{2});
  EXPECT_EQ(outs[1].toDoubles(), x.toDoubles());
  EXPECT_EQ(outs[2].shape(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(outs[2].toDoubles(), (std::vector<double>{20, 21, 22, 23, 24, 25, 0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(outs[3].shape(), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(outs[3].toDoubles(), (std::vector<double>{20, 0, 21, 1, 22, 2, 23, 3, 24, 4, 25, 5}));
  EXPECT_EQ(outs[4].toDoubles(), std::vector<double>{3});
  EXPECT_EQ(outs[5].toDoubles(), w.toDoubles());
}

TEST(OnnxSequenceTest, PositionsCountFromTheEndAndSplitsTakeSizes) {
  // [x, y, z]: insert w at -1 (before z): [x, y, w, z]; erase at -3: [x, w, z];
  // erase at 0: [w, z]. v split into rows without keeping the axis, and
  // into sizes [1, 3].
  ModelBuilder b(17);
  for (const char *in : {"x", "y", "z", "w"})
    b.input(in, {int64_t(2)});
  b.input("v", {int64_t(4), int64_t(2)});
  b.initInts("minus1", {}, {-1});
  b.initInts("minus3", {}, {-3});
  b.initInts("zero", {}, {0});
  b.initInts("sizes", {2}, {1, 3});
  b.node("SequenceConstruct", {"x", "y", "z"}, {"s0"}, "construct");
  b.node("SequenceInsert", {"s0", "w", "minus1"}, {"s1"}, "insert");
  b.node("SequenceErase", {"s1", "minus3"}, {"s2"}, "erase");
  b.node("SequenceErase", {"s2", "zero"}, {"s3"}, "erase0");
  attrInt(b.node("ConcatFromSequence", {"s3"}, {"left"}, "cat"), "axis", 0);
  onnx::NodeProto &rows = b.node("SplitToSequence", {"v"}, {"rows"}, "rows");
  attrInt(rows, "keepdims", 0);
  b.node("SequenceAt", {"rows", "minus1"}, {"last_row"}, "last");
  b.node("SplitToSequence", {"v", "sizes"}, {"parts"}, "parts");
  b.node("SequenceAt", {"parts", "minus1"}, {"tail"}, "tail");
  for (const char *o : {"left", "last_row", "tail"})
    b.output(o);
  auto r = importModel(b);
  ASSERT_TRUE(r.ok) << r.errors;
  Tensor x = iota({2}, 0), y = iota({2}, 10), z = iota({2}, 20), w = iota({2}, 30),
         v = iota({4, 2}, 40);
  auto outs = runGraph(*r.module, {x, y, z, w, v});
  ASSERT_EQ(outs.size(), 3u) << r.text;
  EXPECT_EQ(outs[0].toDoubles(), (std::vector<double>{30, 31, 20, 21}));
  EXPECT_EQ(outs[1].shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(outs[1].toDoubles(), (std::vector<double>{46, 47}));
  EXPECT_EQ(outs[2].shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(outs[2].toDoubles(), (std::vector<double>{42, 43, 44, 45, 46, 47}));
}

/// for i in range(n): h = h * 2 + 1; outs.append(h)   (outs starts empty)
/// then outs[-1], len(outs), torch.stack(outs, 1), torch.cat(outs, 1).
/// The body declares the element rank only; the elements are [B, 3].
ModelBuilder appendModel() {
  ModelBuilder b(17);
  b.input("n", {}, onnx::TensorProto::INT64);
  b.input("h0", {std::string("B"), int64_t(3)});
  b.init("two", {}, {2});
  b.init("one", {}, {1});
  b.initInts("last", {}, {-1});
  attrInt(b.node("SequenceEmpty", {}, {"empty"}, "empty"), "dtype", onnx::TensorProto::FLOAT);
  SubgraphBuilder body("body");
  body.input("i", onnx::TensorProto::INT64, {});
  body.input("c", onnx::TensorProto::BOOL, {});
  body.input("h_in", onnx::TensorProto::FLOAT, {});
  body.sequenceInput("outs_in", onnx::TensorProto::FLOAT, 2);
  body.node("Mul", {"h_in", "two"}, {"m"});
  body.node("Add", {"m", "one"}, {"h_out"});
  body.node("SequenceInsert", {"outs_in", "h_out"}, {"outs_out"});
  body.node("Identity", {"c"}, {"c_out"});
  body.output("c_out");
  body.output("h_out");
  body.output("outs_out");
  onnx::NodeProto &loop = b.node("Loop", {"n", "", "h0", "empty"}, {"h", "outs"}, "loop");
  attrGraph(loop, "body", body.g);
  b.node("SequenceAt", {"outs", "last"}, {"final"}, "at");
  b.node("SequenceLength", {"outs"}, {"count"}, "length");
  onnx::NodeProto &stack = b.node("ConcatFromSequence", {"outs"}, {"stacked"}, "stack");
  attrInt(stack, "axis", 1);
  attrInt(stack, "new_axis", 1);
  attrInt(b.node("ConcatFromSequence", {"outs"}, {"joined"}, "join"), "axis", 1);
  for (const char *o : {"h", "final", "count", "stacked", "joined"})
    b.output(o);
  return b;
}

TEST(OnnxSequenceTest, ALoopAppendingToAnEmptySequenceStacksIt) {
  auto r = importModel(appendModel());
  ASSERT_TRUE(r.ok) << r.errors;
  // The element shape came from what the body appends, symbolic B included.
  EXPECT_NE(r.text.find("%outs_in: f32[?,B,3]"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("constant_of_shape() {shape = [0, B, 3]} : f32[0,B,3]"), std::string::npos)
      << r.text;
  for (int64_t batch : {1, 2})
    for (int64_t n : {1, 3}) {
      Tensor h0 = iota({batch, 3}, 0);
      auto outs = runGraph(*r.module, {Tensor::fromInts(DType::I64, {}, {n}), h0});
      ASSERT_EQ(outs.size(), 5u) << r.text;
      // The rows after each step k (1-based): h0 * 2^k + 2^k - 1.
      std::vector<std::vector<double>> steps;
      std::vector<double> h = h0.toDoubles();
      for (int64_t k = 0; k < n; ++k) {
        for (double &v : h)
          v = v * 2 + 1;
        steps.push_back(h);
      }
      std::string label = "batch " + std::to_string(batch) + " n " + std::to_string(n);
      EXPECT_EQ(outs[0].toDoubles(), h) << label;
      EXPECT_EQ(outs[1].toDoubles(), h) << label;
      EXPECT_EQ(outs[2].toDoubles(), std::vector<double>{double(n)}) << label;
      // stack on axis 1: [B, n, 3]; cat on axis 1: [B, 3n].
      std::vector<double> stacked, joined;
      for (int64_t row = 0; row < batch; ++row)
        for (int64_t k = 0; k < n; ++k)
          for (int64_t c = 0; c < 3; ++c)
            stacked.push_back(steps[size_t(k)][size_t(row * 3 + c)]);
      EXPECT_EQ(outs[3].shape(), (std::vector<int64_t>{batch, n, 3})) << label;
      EXPECT_EQ(outs[3].toDoubles(), stacked) << label;
      EXPECT_EQ(outs[4].shape(), (std::vector<int64_t>{batch, 3 * n})) << label;
      EXPECT_EQ(outs[4].toDoubles(), stacked) << label; // the same order
    }
}

TEST(OnnxSequenceTest, MisusesAreErrorsAtTheNode) {
  struct Case {
    const char *what;
    std::function<void(ModelBuilder &)> edit;
    const char *error;
  };
  const Case cases[] = {
      {"another op reads a sequence",
       [](ModelBuilder &b) {
         b.node("SequenceConstruct", {"x"}, {"s"}, "construct");
         b.node("Relu", {"s"}, {"y"}, "relu");
         b.output("y");
       },
       "node 'relu': error: Relu: input 0 ('s') is a sequence where the op takes a tensor"},
      {"a graph output is a sequence",
       [](ModelBuilder &b) {
         b.node("SequenceConstruct", {"x"}, {"s"}, "construct");
         b.output("s");
       },
       "graph output 's' is a sequence; Kiln's graphs return tensors"},
      {"a position out of range",
       [](ModelBuilder &b) {
         b.initInts("five", {}, {5});
         b.node("SequenceConstruct", {"x", "x"}, {"s"}, "construct");
         b.node("SequenceAt", {"s", "five"}, {"y"}, "at");
         b.output("y");
       },
       "node 'at': error: SequenceAt: position 5 is out of range for a sequence of 2 element(s)"},
      {"a position computed by the run into a list",
       [](ModelBuilder &b) {
         b.input("p", {}, onnx::TensorProto::INT64);
         b.node("SequenceConstruct", {"x", "x"}, {"s"}, "construct");
         b.node("SequenceAt", {"s", "p"}, {"y"}, "at");
         b.output("y");
       },
       "SequenceAt: input 1 (position, 'p') must be known at import time"},
      {"a concat of an empty sequence",
       [](ModelBuilder &b) {
         b.node("SequenceEmpty", {}, {"s"}, "empty");
         attrInt(b.node("ConcatFromSequence", {"s"}, {"y"}, "cat"), "axis", 0);
         b.output("y");
       },
       "node 'cat': error: ConcatFromSequence: the sequence is empty"},
      {"elements of two dtypes",
       [](ModelBuilder &b) {
         b.input("k", {int64_t(2)}, onnx::TensorProto::INT64);
         b.node("SequenceConstruct", {"x", "k"}, {"s"}, "construct");
         b.node("SequenceLength", {"s"}, {"y"}, "len");
         b.output("y");
       },
       "SequenceConstruct: input 1 is i64[2] but input 0 is f32[2]"},
  };
  for (const Case &c : cases) {
    ModelBuilder b(17);
    b.input("x", {int64_t(2)});
    c.edit(b);
    EXPECT_TRUE(importFails(b, c.error)) << c.what;
  }
}

TEST(OnnxSequenceTest, AnInsertAtAPositionIntoACarriedSequenceIsAnError) {
  ModelBuilder b = appendModel();
  onnx::GraphProto *body = b.graph().mutable_node(1)->mutable_attribute(0)->mutable_g();
  body->mutable_node(2)->add_input("i"); // SequenceInsert(outs_in, h_out, i)
  EXPECT_TRUE(importFails(b, "SequenceInsert: a position into a sequence a Loop carries is not "
                             "supported"));
}

} // namespace
