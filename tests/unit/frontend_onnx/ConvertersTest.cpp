//===- ConvertersTest.cpp - ONNX op converters by family --------*- C++ -*-===//
//
// What each family of converters produces (checked on the printed IR), the
// opset-dependent forms of the ops whose attributes became inputs, the
// folding of exporter shape subgraphs, and numeric checks of decompositions
// on the reference interpreter.
//
//===----------------------------------------------------------------------===//
#include "OnnxTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace kiln;
using namespace kiln::testing;

namespace {

/// The body of the single graph: the lines between the header and `return`.
std::string body(const ImportResult &r) {
  size_t begin = r.text.find("{\n");
  size_t end = r.text.find("  return");
  if (!r.ok || begin == std::string::npos || end == std::string::npos)
    return "<import failed: " + r.errors + ">";
  return r.text.substr(begin + 2, end - begin - 2);
}

std::string unaryModel(const std::string &op, int64_t opset, std::vector<OnnxDim> dims,
                       const std::function<void(onnx::NodeProto &)> &attrs = {}) {
  ModelBuilder b(opset);
  b.input("x", dims);
  auto &n = b.node(op, {"x"}, {"y"});
  if (attrs)
    attrs(n);
  b.output("y");
  return b.bytes();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

TEST(OnnxConvertersTest, ElementwiseOneToOne) {
  for (auto [op, mnemonic] :
       std::vector<std::pair<std::string, std::string>>{{"Relu", "relu"},
                                                        {"Sigmoid", "sigmoid"},
                                                        {"Tanh", "tanh"},
                                                        {"Erf", "erf"},
                                                        {"Exp", "exp"},
                                                        {"Sqrt", "sqrt"},
                                                        {"Softplus", "softplus"},
                                                        {"HardSwish", "hard_swish"},
                                                        {"Floor", "floor"},
                                                        {"Reciprocal", "reciprocal"}}) {
    auto r = importBytes(unaryModel(op, 14, {int64_t(3)}));
    EXPECT_EQ(body(r), "  %y = " + mnemonic + "(%x) : f32[3]\n") << op;
  }
  auto r = importBytes(unaryModel("LeakyRelu", 13, {int64_t(3)},
                                  [](onnx::NodeProto &n) { attrFloat(n, "alpha", 0.25f); }));
  EXPECT_EQ(body(r), "  %y = leaky_relu(%x) {alpha = 0.25} : f32[3]\n");
  EXPECT_EQ(body(importBytes(unaryModel("Identity", 13, {int64_t(3)}))), "");
  EXPECT_EQ(body(importBytes(unaryModel("Dropout", 13, {int64_t(3)}))), "");
}

TEST(OnnxConvertersTest, ElementwiseDecompositions) {
  ModelBuilder b;
  b.input("a", {int64_t(2)});
  b.input("c", {int64_t(2)});
  b.init("slope", {1}, {0.5f});
  b.node("LessOrEqual", {"a", "c"}, {"le"});
  b.node("PRelu", {"a", "slope"}, {"pr"});
  b.node("Selu", {"a"}, {"se"});
  b.output("le");
  b.output("pr");
  b.output("se");
  auto r = importModel(b);
  EXPECT_EQ(body(r), "  %0 = less(%a, %c) : bool[2]\n"
                     "  %1 = equal(%a, %c) : bool[2]\n"
                     "  %le = or(%0, %1) : bool[2]\n"
                     "  %slope = constant @slope : f32[1]\n"
                     "  %2 = constant dense<0.0> : f32[]\n"
                     "  %3 = less(%a, %2) : bool[2]\n"
                     "  %4 = mul(%a, %slope) : f32[2]\n"
                     "  %pr = where(%3, %4, %a) : f32[2]\n"
                     "  %5 = elu(%a) {alpha = 1.6732631921768188} : f32[2]\n"
                     "  %6 = constant dense<1.050701> : f32[]\n"
                     "  %se = mul(%5, %6) : f32[2]\n");
  auto outs = runGraph(*r.module, {Tensor::fromDoubles(DType::F32, {2}, {-2, 3}),
                                   Tensor::fromDoubles(DType::F32, {2}, {-2, 1})});
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[0].toInts(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(outs[1].toDoubles(), (std::vector<double>{-1, 3}));
}

TEST(OnnxConvertersTest, PowCastsItsExponentAndVariadicsChain) {
  ModelBuilder b;
  b.input("x", {int64_t(2)});
  b.initInts("two", {}, {2});
  b.node("Pow", {"x", "two"}, {"p"});
  b.node("Max", {"x", "p", "x"}, {"m"});
  b.node("Mean", {"x", "m"}, {"y"});
  b.output("y");
  EXPECT_EQ(body(importModel(b)), "  %0 = constant dense<2.0> : f32[]\n"
                                  "  %p = pow(%x, %0) : f32[2]\n"
                                  "  %1 = max(%x, %p) : f32[2]\n"
                                  "  %m = max(%1, %x) : f32[2]\n"
                                  "  %2 = add(%x, %m) : f32[2]\n"
                                  "  %3 = constant dense<2.0> : f32[]\n"
                                  "  %y = div(%2, %3) : f32[2]\n");
}

TEST(OnnxConvertersTest, ClipBoundsAreInputsFromOpset11) {
  for (int64_t opset : {11, 13}) {
    ModelBuilder b(opset);
    b.input("x", {int64_t(2)});
    b.input("hi", {int64_t(2)});
    b.init("lo", {}, {0.0f});
    b.node("Clip", {"x", "lo"}, {"a"});
    b.node("Clip", {"a", "", "hi"}, {"y"});
    b.output("y");
    EXPECT_EQ(body(importModel(b)), "  %a = clip(%x) {min = 0.0} : f32[2]\n"
                                    "  %0 = clip(%a) : f32[2]\n"
                                    "  %y = min(%0, %hi) : f32[2]\n")
        << opset;
  }
}

TEST(OnnxConvertersTest, CastAndUnsupportedCast) {
  auto r = importBytes(unaryModel("Cast", 13, {int64_t(2)}, [](onnx::NodeProto &n) {
    attrInt(n, "to", onnx::TensorProto::INT32);
  }));
  EXPECT_EQ(body(r), "  %y = cast(%x) {to = i32} : i32[2]\n");
  r = importBytes(unaryModel("Cast", 13, {int64_t(2)}, [](onnx::NodeProto &n) {
    attrInt(n, "to", onnx::TensorProto::STRING);
  }));
  EXPECT_EQ(r.errors, "error: m.onnx: 1 node uses ONNX ops or attributes that Kiln does not "
                      "support: Cast\n"
                      "m.onnx: node 'Cast_1': note: 'Cast' (opset 13) casts to STRING, which "
                      "Kiln does not support");
}

//===----------------------------------------------------------------------===//
// Shapes and folding
//===----------------------------------------------------------------------===//

/// x: [d0, 3, 4] -> Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1])).
ModelBuilder flattenBatch(OnnxDim d0, int64_t opset) {
  ModelBuilder b(opset);
  b.input("x", {d0, int64_t(3), int64_t(4)});
  b.initInts("zero", {}, {0});
  b.initInts("minus1", {1}, {-1});
  b.node("Shape", {"x"}, {"s"});
  b.node("Gather", {"s", "zero"}, {"n"});
  if (opset >= 13) {
    b.initInts("axes0", {1}, {0});
    b.node("Unsqueeze", {"n", "axes0"}, {"n1"});
  } else {
    attrInts(b.node("Unsqueeze", {"n"}, {"n1"}), "axes", {0});
  }
  attrInt(b.node("Concat", {"n1", "minus1"}, {"shape"}), "axis", 0);
  b.node("Reshape", {"x", "shape"}, {"y"});
  b.output("y");
  return b;
}

TEST(OnnxConvertersTest, ShapeSubgraphFoldsToAStaticReshape) {
  for (int64_t opset : {11, 13, 17})
    EXPECT_EQ(body(importModel(flattenBatch(int64_t(2), opset))),
              "  %y = reshape(%x) {shape = [2, -1]} : f32[2,12]\n")
        << opset;
}

TEST(OnnxConvertersTest, ShapeSubgraphOverASymbolicDim) {
  for (int64_t opset : {11, 13})
    EXPECT_EQ(body(importModel(flattenBatch(std::string("N"), opset))),
              "  %y = reshape(%x) {shape = [0, -1]} : f32[N,12]\n")
        << opset;
  OnnxImportOptions bound;
  bound.dimBindings["N"] = 5;
  EXPECT_EQ(body(importModel(flattenBatch(std::string("N"), 13), bound)),
            "  %y = reshape(%x) {shape = [5, -1]} : f32[5,12]\n");
}

/// torch.arange(2, S, 3) and torch.triu(m, 1) for m: [S, S] with S symbolic:
/// an iota of length max(ceil((S - 2) / 3), 0) = S/3 (sizes are >= 0), and
/// a mask from an iota column and row (j - i > 0).
TEST(OnnxConvertersTest, RangeAndTriluOverASymbolicLength) {
  ModelBuilder b(17);
  b.input("m", {std::string("S"), std::string("S")});
  b.initInts("i0", {1}, {0});
  b.initInts("start", {}, {2});
  b.initInts("delta", {}, {3});
  b.initInts("one", {}, {1});
  b.node("Shape", {"m"}, {"s"});
  b.node("Gather", {"s", "i0"}, {"n1"});
  b.node("Squeeze", {"n1"}, {"n"});
  b.node("Range", {"start", "n", "delta"}, {"r"});
  b.node("Trilu", {"m", "one"}, {"t"});
  b.output("r");
  b.output("t");
  ImportResult r = importModel(b);
  for (const char *want : {"iota() {delta = 3.0, shape = [S/3], start = 2.0} : i64[S/3]",
                           "iota() {shape = [S, 1]} : i64[S,1]",
                           "iota() {axis = 1, shape = [1, S]} : i64[1,S]", "greater(%", "where("})
    EXPECT_NE(r.text.find(want), std::string::npos) << want << "\n" << r.text << r.errors;
}

/// torch 1.13's `cls.expand(x.size(0), -1, -1)` on x: [N, 4]: the shape
/// [N, -1, -1] is compared with -1 entry by entry (Equal), -1 entries
/// replaced by 1 (Where), after a Reshape of the shape vector to [-1].
TEST(OnnxConvertersTest, ExpandByAShapeWithMinusOnes) {
  ModelBuilder b(17);
  b.input("x", {std::string("N"), int64_t(4)});
  b.init("cls", {1, 1, 4}, {1, 2, 3, 4});
  b.initInts("i0", {1}, {0});
  b.initInts("rest", {2}, {-1, -1});
  b.initInts("flat", {1}, {-1});
  b.initInts("ones", {3}, {1, 1, 1});
  b.initInts("neg", {}, {-1});
  b.node("Shape", {"x"}, {"s"});
  b.node("Gather", {"s", "i0"}, {"n"});
  attrInt(b.node("Concat", {"n", "rest"}, {"shape0"}), "axis", 0);
  b.node("Reshape", {"shape0", "flat"}, {"shape"});
  b.node("Mul", {"ones", "neg"}, {"minus"});
  b.node("Equal", {"shape", "minus"}, {"isMinus"});
  b.node("Where", {"isMinus", "ones", "shape"}, {"target"});
  b.node("Expand", {"cls", "target"}, {"y"});
  b.output("y");
  ImportResult r = importModel(b);
  EXPECT_NE(r.text.find("expand(%cls) {shape = [N, 1, 1]} : f32[N,1,4]"), std::string::npos)
      << r.text << r.errors;
}

/// x: [N, S, 64] -> Reshape(x, Concat(first, Cast(Cast(S * mult)))) where
/// first is N (Gather(Shape(x), 0)) or 2 * N.
ModelBuilder reshapeByArithmetic(bool doubleBatch, int64_t mult) {
  ModelBuilder b(17);
  b.input("x", {std::string("N"), std::string("S"), int64_t(64)});
  b.initInts("i0", {1}, {0});
  b.initInts("i1", {1}, {1});
  b.initInts("two", {1}, {2});
  b.initInts("mult", {1}, {mult});
  b.node("Shape", {"x"}, {"s"});
  b.node("Gather", {"s", "i0"}, {"n"});
  b.node("Gather", {"s", "i1"}, {"t"});
  b.node(doubleBatch ? "Mul" : "Identity",
         doubleBatch ? std::vector<std::string>{"n", "two"} : std::vector<std::string>{"n"},
         {"first"});
  b.node("Mul", {"t", "mult"}, {"m"});
  attrInt(b.node("Cast", {"m"}, {"m32"}), "to", onnx::TensorProto::INT32);
  attrInt(b.node("Cast", {"m32"}, {"m64"}), "to", onnx::TensorProto::INT64);
  attrInt(b.node("Concat", {"first", "m64"}, {"shape"}), "axis", 0);
  b.node("Reshape", {"x", "shape"}, {"y"});
  b.output("y");
  return b;
}

TEST(OnnxConvertersTest, ShapeArithmeticFoldsToExpressions) {
  // [N, 64*S]: N copies dim 0, 64*S is an expression entry (the dim itself).
  EXPECT_EQ(body(importModel(reshapeByArithmetic(false, 64))),
            "  %y = reshape(%x) {shape = [0, 64*S]} : f32[N,64*S]\n");
  // [N, 32*S] has half the elements: the entry disagrees with the input's count.
  auto half = importModel(reshapeByArithmetic(false, 32));
  EXPECT_NE(half.errors.find("cannot reshape f32[N,S,64] to shape [0, 32*S]: element counts "
                             "differ"),
            std::string::npos)
      << half.errors;
  // [2*N, 32*S]: entries that are not dims of x but expressions with the
  // same element count (x.view(2 * n, 32 * s)).
  EXPECT_EQ(body(importModel(reshapeByArithmetic(true, 32))),
            "  %y = reshape(%x) {shape = [2*N, 32*S]} : f32[2*N,32*S]\n");
}

TEST(OnnxConvertersTest, ConstantOfShapeRangeWhereAndExpandFold) {
  ModelBuilder b;
  b.input("x", {int64_t(2), int64_t(3)});
  b.initInts("start", {}, {0});
  b.initInts("delta", {}, {1});
  b.initInts("minus1", {}, {-1});
  b.node("Shape", {"x"}, {"s"});
  auto &cos = b.node("ConstantOfShape", {"s"}, {"ones"});
  attrTensor(cos, "value", ModelBuilder::intTensor("v", {1}, {1}));
  b.initInts("one", {}, {1});
  b.node("Gather", {"s", "one"}, {"limit"});
  b.node("Range", {"start", "limit", "delta"}, {"r"});      // [0, 1, 2]
  b.node("Equal", {"s", "minus1"}, {"isneg"});              // [false, false]
  b.node("Where", {"isneg", "ones_flat", "s"}, {"target"}); // [2, 3]
  b.initInts("ones_flat", {2}, {1, 1});
  b.node("Expand", {"r", "target"}, {"e"}); // i64[2,3]
  attrInt(b.node("Cast", {"e"}, {"ef"}), "to", onnx::TensorProto::FLOAT);
  b.node("Add", {"x", "ef"}, {"y"});
  b.output("y");
  auto r = importModel(b);
  EXPECT_EQ(body(r), "  %ef = constant dense<[0.0, 1.0, 2.0, 0.0, 1.0, 2.0]> : f32[2,3]\n"
                     "  %y = add(%x, %ef) : f32[2,3]\n");
}

TEST(OnnxConvertersTest, FoldLimit) {
  ModelBuilder b;
  b.input("x", {int64_t(2)});
  b.init("c", {2}, {1, 2});
  b.node("Neg", {"c"}, {"n"});
  b.node("Add", {"x", "n"}, {"y"});
  b.output("y");
  EXPECT_EQ(body(importModel(b)), "  %n = constant dense<[-1.0, -2.0]> : f32[2]\n"
                                  "  %y = add(%x, %n) : f32[2]\n");
  OnnxImportOptions noFold;
  noFold.foldElementLimit = 0;
  EXPECT_EQ(body(importModel(b, noFold)), "  %c = constant @c : f32[2]\n"
                                          "  %n = neg(%c) : f32[2]\n"
                                          "  %y = add(%x, %n) : f32[2]\n");
}

TEST(OnnxConvertersTest, ComputedShapeInputIsAnError) {
  ModelBuilder b;
  b.input("x", {int64_t(6)});
  b.input("shape", {int64_t(2)}, onnx::TensorProto::INT64);
  b.node("Reshape", {"x", "shape"}, {"y"}, "rs");
  b.output("y");
  EXPECT_EQ(importModel(b).errors,
            "m.onnx: node 'rs': error: Reshape: input 1 (shape, 'shape') must be known at import "
            "time, but it is computed from the graph's inputs");
}

TEST(OnnxConvertersTest, SqueezeUnsqueezeAxesAttributeThenInput) {
  // Opset 11: axes are attributes.
  ModelBuilder b11(11);
  b11.input("x", {int64_t(1), int64_t(3)});
  attrInts(b11.node("Squeeze", {"x"}, {"s"}), "axes", {0});
  attrInts(b11.node("Unsqueeze", {"s"}, {"y"}), "axes", {1});
  b11.output("y");
  // Opset 13: axes are inputs.
  ModelBuilder b13(13);
  b13.input("x", {int64_t(1), int64_t(3)});
  b13.initInts("a0", {1}, {0});
  b13.initInts("a1", {1}, {1});
  b13.node("Squeeze", {"x", "a0"}, {"s"});
  b13.node("Unsqueeze", {"s", "a1"}, {"y"});
  b13.output("y");
  std::string want = "  %s = squeeze(%x) {axes = [0]} : f32[3]\n"
                     "  %y = unsqueeze(%s) {axes = [1]} : f32[3,1]\n";
  EXPECT_EQ(body(importModel(b11)), want);
  EXPECT_EQ(body(importModel(b13)), want);
  // An opset-13 model with the old attribute form is an error, not ignored.
  ModelBuilder bad(13);
  bad.input("x", {int64_t(1), int64_t(3)});
  attrInts(bad.node("Unsqueeze", {"x"}, {"y"}, "u"), "axes", {0});
  bad.output("y");
  EXPECT_EQ(importModel(bad).errors, "m.onnx: node 'u': error: Unsqueeze: missing input 1 (axes)");
}

TEST(OnnxConvertersTest, ReduceSumAxesMoveAtOpset13) {
  ModelBuilder b11(11);
  b11.input("x", {int64_t(2), int64_t(3)});
  auto &r11 = b11.node("ReduceSum", {"x"}, {"y"});
  attrInts(r11, "axes", {1});
  attrInt(r11, "keepdims", 0);
  b11.output("y");
  ModelBuilder b13(13);
  b13.input("x", {int64_t(2), int64_t(3)});
  b13.initInts("axes", {1}, {1});
  attrInt(b13.node("ReduceSum", {"x", "axes"}, {"y"}), "keepdims", 0);
  b13.output("y");
  std::string want = "  %y = reduce_sum(%x) {axes = [1], keepdims = false} : f32[2]\n";
  EXPECT_EQ(body(importModel(b11)), want);
  EXPECT_EQ(body(importModel(b13)), want);
  // ReduceMean keeps its attribute through opset 17; noop_with_empty_axes.
  ModelBuilder b17(17);
  b17.input("x", {int64_t(2), int64_t(3)});
  attrInts(b17.node("ReduceMean", {"x"}, {"m"}), "axes", {-1});
  attrInt(b17.node("ReduceSum", {"m"}, {"y"}), "noop_with_empty_axes", 1);
  b17.output("y");
  EXPECT_EQ(body(importModel(b17)), "  %m = reduce_mean(%x) {axes = [-1]} : f32[2,1]\n");
}

TEST(OnnxConvertersTest, ReduceDecompositions) {
  auto r = importBytes(unaryModel("ReduceL2", 13, {int64_t(2), int64_t(2)}, [](auto &n) {
    attrInts(n, "axes", {1});
    attrInt(n, "keepdims", 0);
  }));
  ASSERT_TRUE(r.ok) << r.errors;
  auto outs = runGraph(*r.module, {Tensor::fromDoubles(DType::F32, {2, 2}, {3, 4, 6, 8})});
  EXPECT_EQ(outs[0].toDoubles(), (std::vector<double>{5, 10}));
  r = importBytes(unaryModel("ReduceLogSumExp", 13, {int64_t(3)}));
  outs = runGraph(*r.module, {Tensor::fromDoubles(DType::F32, {3}, {1000, 1000, 1000})});
  EXPECT_NEAR(outs[0].getDouble(0), 1000 + std::log(3.0), 1e-3);
}

TEST(OnnxConvertersTest, SplitSizesAttributeThenInput) {
  ModelBuilder b11(11);
  b11.input("x", {int64_t(5)});
  attrInts(b11.node("Split", {"x"}, {"a", "b"}), "split", {2, 3});
  b11.output("a");
  b11.output("b");
  ModelBuilder b13(13);
  b13.input("x", {int64_t(5)});
  b13.initInts("sizes", {2}, {2, 3});
  b13.node("Split", {"x", "sizes"}, {"a", "b"});
  b13.output("a");
  b13.output("b");
  std::string want = "  %a, %b = split(%x) {sizes = [2, 3]} : f32[2], f32[3]\n";
  EXPECT_EQ(body(importModel(b11)), want);
  EXPECT_EQ(body(importModel(b13)), want);
}

TEST(OnnxConvertersTest, SliceAndPadInputs) {
  for (int64_t opset : {11, 13}) {
    ModelBuilder b(opset);
    b.input("x", {int64_t(4), int64_t(6)});
    b.initInts("starts", {1}, {1});
    b.initInts("ends", {1}, {std::numeric_limits<int64_t>::max()});
    b.initInts("axes", {1}, {-1});
    b.initInts("steps", {1}, {2});
    b.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"s"});
    b.initInts("pads", {4}, {0, 1, 0, 1});
    b.init("value", {}, {0.5f});
    attrString(b.node("Pad", {"s", "pads", "value"}, {"y"}), "mode", "constant");
    b.output("y");
    EXPECT_EQ(body(importModel(b)),
              "  %s = slice(%x) {axes = [-1], ends = [9223372036854775807], starts = [1], steps = "
              "[2]} : f32[4,3]\n"
              "  %y = pad(%s) {pads = [0, 1, 0, 1], value = 0.5} : f32[4,5]\n")
        << opset;
  }
}

TEST(OnnxConvertersTest, ResizeScalesAndSizes) {
  ModelBuilder b(13);
  b.input("x", {int64_t(1), int64_t(1), int64_t(2), int64_t(2)});
  b.init("scales", {4}, {1, 1, 2, 2});
  auto &n = b.node("Resize", {"x", "", "scales"}, {"y"});
  attrString(n, "mode", "nearest");
  attrString(n, "coordinate_transformation_mode", "asymmetric");
  attrString(n, "nearest_mode", "floor");
  b.output("y");
  EXPECT_EQ(body(importModel(b)),
            "  %y = resize(%x) {coordinate_transformation_mode = \"asymmetric\", nearest_mode = "
            "\"floor\", scales = [1.0, 1.0, 2.0, 2.0]} : f32[1,1,4,4]\n");
  b.graph().mutable_node(0)->mutable_attribute(0)->set_s("cubic");
  attrInt(b.graph().mutable_node(0)[0], "exclude_outside", 1);
  EXPECT_NE(body(importModel(b)).find("exclude_outside = true, mode = \"cubic\""),
            std::string::npos)
      << body(importModel(b));
  // tf_crop_and_resize needs its roi (a start and an end per dim) at import.
  b.graph().mutable_node(0)->mutable_attribute(1)->set_s("tf_crop_and_resize");
  EXPECT_NE(importModel(b).errors.find("roi"), std::string::npos) << importModel(b).errors;
  b.init("roi", {8}, {0, 0, 0.25f, 0, 1, 1, 0.75f, 1});
  b.graph().mutable_node(0)->set_input(1, "roi");
  EXPECT_NE(body(importModel(b)).find("roi = [0.0, 0.0, 0.25, 0.0, 1.0, 1.0, 0.75, 1.0]"),
            std::string::npos)
      << importModel(b).errors;
}

//===----------------------------------------------------------------------===//
// Neural-network ops
//===----------------------------------------------------------------------===//

TEST(OnnxConvertersTest, ConvAutoPad) {
  for (auto [autoPad, pads] : std::vector<std::pair<std::string, std::string>>{
           {"SAME_UPPER", "[0, 0, 1, 1]"}, {"SAME_LOWER", "[1, 1, 0, 0]"}, {"VALID", ""}}) {
    ModelBuilder b;
    b.input("x", {int64_t(1), int64_t(1), int64_t(4), int64_t(4)});
    b.init("w", {1, 1, 2, 2}, {1, 1, 1, 1});
    auto &n = b.node("Conv", {"x", "w"}, {"y"});
    attrString(n, "auto_pad", autoPad);
    attrInts(n, "kernel_shape", {2, 2});
    b.output("y");
    std::string attrs = pads.empty() ? "{pads = [0, 0, 0, 0]}" : "{pads = " + pads + "}";
    std::string shape = pads.empty() ? "f32[1,1,3,3]" : "f32[1,1,4,4]";
    EXPECT_EQ(body(importModel(b)), "  %w = constant @w : f32[1,1,2,2]\n"
                                    "  %y = conv(%x, %w) " +
                                        attrs + " : " + shape + "\n")
        << autoPad;
  }
}

TEST(OnnxConvertersTest, GemmPoolsAndNorms) {
  ModelBuilder b(17);
  b.input("x", {int64_t(2), int64_t(3), int64_t(4), int64_t(4)});
  auto &mp = b.node("MaxPool", {"x"}, {"p"});
  attrInts(mp, "kernel_shape", {2, 2});
  attrInts(mp, "strides", {2, 2});
  b.node("GlobalMaxPool", {"p"}, {"g"});
  b.node("GlobalAveragePool", {"p"}, {"ga"});
  b.init("scale", {3}, {1, 1, 1});
  b.init("bias", {3}, {0, 0, 0});
  b.node("InstanceNormalization", {"p", "scale", "bias"}, {"in"});
  b.init("w", {5, 3}, std::vector<float>(15, 1.f));
  b.initInts("flat", {2}, {2, 3});
  b.node("Reshape", {"g", "flat"}, {"gf"});
  auto &gemm = b.node("Gemm", {"gf", "w"}, {"fc"});
  attrInt(gemm, "transB", 1);
  attrFloat(gemm, "alpha", 0.5f);
  b.node("LayerNormalization", {"fc", "lnw"}, {"ln"});
  b.init("lnw", {5}, {1, 1, 1, 1, 1});
  b.output("ln");
  b.output("ga");
  b.output("in");
  auto r = importModel(b);
  ASSERT_TRUE(r.ok) << r.errors;
  std::string t = body(r);
  EXPECT_NE(t.find("%p = max_pool(%x) {kernel = [2, 2], strides = [2, 2]} : f32[2,3,2,2]"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("%g = reduce_max(%p) {axes = [2, 3]} : f32[2,3,1,1]"), std::string::npos);
  EXPECT_NE(t.find("%ga = global_avg_pool(%p) : f32[2,3,1,1]"), std::string::npos);
  EXPECT_NE(t.find("%fc = gemm(%gf, %w) {alpha = 0.5, trans_b = true} : f32[2,5]"),
            std::string::npos);
  EXPECT_NE(t.find("%ln = layer_norm(%fc, %lnw) : f32[2,5]"), std::string::npos);
  // InstanceNormalization: layer_norm over each (n, c) plane, viewed as [N, C, H*W].
  EXPECT_NE(t.find("reshape(%p) {shape = [0, 3, -1]} : f32[2,3,4]"), std::string::npos) << t;
  EXPECT_NE(t.find("layer_norm("), std::string::npos) << t;

  // InstanceNormalization numerics: each (n, c) plane normalized.
  std::vector<double> xs;
  for (int i = 0; i < 2 * 3 * 16; ++i)
    xs.push_back(std::sin(i * 0.37) * 3);
  auto outs = runGraph(*r.module, {Tensor::fromDoubles(DType::F32, {2, 3, 4, 4}, xs)});
  ASSERT_EQ(outs.size(), 3u);
  const Tensor &in = outs[2];
  for (int plane = 0; plane < 6; ++plane) {
    double mean = 0, sq = 0;
    for (int k = 0; k < 4; ++k)
      mean += in.getDouble(plane * 4 + k) / 4;
    for (int k = 0; k < 4; ++k)
      sq += std::pow(in.getDouble(plane * 4 + k) - mean, 2) / 4;
    EXPECT_NEAR(mean, 0, 1e-5);
    EXPECT_NEAR(sq, 1, 1e-3);
  }
}

TEST(OnnxConvertersTest, SoftmaxBeforeOpset13Flattens) {
  auto r11 = importBytes(unaryModel("Softmax", 11, {int64_t(2), int64_t(2), int64_t(2)}));
  EXPECT_EQ(body(r11), "  %0 = flatten(%x) : f32[2,4]\n"
                       "  %1 = softmax(%0) : f32[2,4]\n"
                       "  %y = reshape(%1) {shape = [2, 2, 2]} : f32[2,2,2]\n");
  auto r13 = importBytes(unaryModel("Softmax", 13, {int64_t(2), int64_t(2), int64_t(2)}));
  EXPECT_EQ(body(r13), "  %y = softmax(%x) : f32[2,2,2]\n");
  auto last = importBytes(unaryModel("LogSoftmax", 11, {int64_t(2), int64_t(2)}));
  EXPECT_EQ(body(last), "  %y = log_softmax(%x) : f32[2,2]\n");
  // Numerically, opset 11 normalizes over both trailing dims together.
  auto outs =
      runGraph(*r11.module, {Tensor::fromDoubles(DType::F32, {2, 2, 2}, {0, 0, 0, 0, 1, 1, 1, 1})});
  for (int i = 0; i < 8; ++i)
    EXPECT_NEAR(outs[0].getDouble(i), 0.25, 1e-6);
}

// NonZero's count is decided by the run: a boolean mask's x[mask] (what
// torch exports: NonZero, Transpose, GatherND) imports with a `?` dim and
// runs in the interpreter at any count, none included.
TEST(OnnxConvertersTest, NonZeroMaskIndexingRunsAtAnyCount) {
  ModelBuilder b(17);
  b.input("x", {int64_t(2), int64_t(3)});
  b.input("m", {int64_t(2), int64_t(3)}, onnx::TensorProto::BOOL);
  b.node("NonZero", {"m"}, {"nz"});
  attrInts(b.node("Transpose", {"nz"}, {"idx"}), "perm", {1, 0});
  b.node("GatherND", {"x", "idx"}, {"y"});
  b.output("y");
  b.output("nz");
  auto r = importModel(b);
  ASSERT_TRUE(r.ok) << r.errors;
  EXPECT_NE(r.text.find("nonzero(%m) : i64[2,?]"), std::string::npos) << r.text;
  Tensor x = Tensor::fromDoubles(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto outs = runGraph(*r.module, {x, Tensor::fromInts(DType::Bool, {2, 3}, {0, 1, 0, 1, 0, 1})});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].str(), "f32[3]");
  EXPECT_EQ(outs[0].getDouble(0) + 10 * outs[0].getDouble(1) + 100 * outs[0].getDouble(2), 642);
  EXPECT_EQ(outs[1].str(), "i64[2,3]"); // rows (0, 1, 1), columns (1, 0, 2)
  EXPECT_EQ(outs[1].getInt(0) + outs[1].getInt(1) * 2 + outs[1].getInt(2) * 4, 6);
  EXPECT_EQ(outs[1].getInt(3) + outs[1].getInt(4) * 3 + outs[1].getInt(5) * 9, 19);
  auto none = runGraph(*r.module, {x, Tensor::zeros(DType::Bool, {2, 3})});
  ASSERT_EQ(none.size(), 2u);
  EXPECT_EQ(none[0].str(), "f32[0]");
  EXPECT_EQ(none[1].str(), "i64[2,0]");
}

} // namespace
