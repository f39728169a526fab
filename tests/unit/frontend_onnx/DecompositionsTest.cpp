//===- DecompositionsTest.cpp - ONNX ops built from primitive ops -*- C++ -*-===//
//
// Numeric checks, on the reference interpreter, of the converters that have
// no Kiln op of their own: LayerNormalization's Mean / InvStdDev outputs,
// Mod, ConvTranspose with negative total padding, Reshape allowzero, Trilu,
// Hardmax, OneHot, CumSum, EyeLike, ScatterND (constant indices), IsInf,
// Shrink, the hyperbolic and inverse hyperbolic functions, Tan, and Dropout
// in training mode with ratio 0, NegativeLogLikelihoodLoss and
// SoftmaxCrossEntropyLoss, the quantization ops, LpNormalization,
// MeanVarianceNormalization, CenterCropPad and ReverseSequence. Expected values are numpy's /
// ONNX's reference results, computed by hand.
//
//===----------------------------------------------------------------------===//
#include "OnnxTestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

using namespace kiln;
using namespace kiln::testing;

namespace {

/// Imports `b` and runs it on `inputs`; fails the test when either fails.
std::vector<Tensor> run(const ModelBuilder &b, std::vector<Tensor> inputs) {
  auto r = importModel(b);
  EXPECT_TRUE(r.ok) << r.errors;
  if (!r.ok)
    return {};
  return runGraph(*r.module, std::move(inputs));
}

void expectNear(const Tensor &t, const std::vector<double> &want, double tol = 1e-5) {
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size())) << t.str();
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(t.getDouble(static_cast<int64_t>(i)), want[i], tol) << "element " << i;
}

Tensor f32(std::vector<int64_t> shape, std::vector<double> v) {
  return Tensor::fromDoubles(DType::F32, std::move(shape), v);
}
Tensor i64(std::vector<int64_t> shape, std::vector<int64_t> v) {
  return Tensor::fromInts(DType::I64, std::move(shape), v);
}

TEST(OnnxDecompositionsTest, LayerNormalizationMeanAndInvStdDev) {
  for (int64_t axis : {1, -1, 0}) {
    ModelBuilder b(17);
    b.input("x", {int64_t(2), int64_t(3)});
    b.init("s", {3}, {1, 1, 1});
    auto &n = b.node("LayerNormalization", {"x", "s"}, {"y", "mean", "inv"});
    attrInt(n, "axis", axis);
    attrFloat(n, "epsilon", 0.5f);
    b.output("y");
    b.output("mean");
    b.output("inv");
    std::vector<double> x{1, 2, 6, -3, 0, 3};
    auto outs = run(b, {f32({2, 3}, x)});
    ASSERT_EQ(outs.size(), 3u) << axis;
    if (axis == 0) {
      // One group of all six: mean 1.5, variance 45.5 / 6.
      EXPECT_EQ(outs[1].shape(), (std::vector<int64_t>{1, 1}));
      expectNear(outs[1], {1.5});
      expectNear(outs[2], {1 / std::sqrt(45.5 / 6 + 0.5)});
      continue;
    }
    // Rows: mean 3 and 0, variance 14/3 and 6.
    EXPECT_EQ(outs[1].shape(), (std::vector<int64_t>{2, 1})) << axis;
    expectNear(outs[1], {3, 0});
    double inv0 = 1 / std::sqrt(14.0 / 3 + 0.5), inv1 = 1 / std::sqrt(6.5);
    expectNear(outs[2], {inv0, inv1});
    expectNear(outs[0], {-2 * inv0, -1 * inv0, 3 * inv0, -3 * inv1, 0, 3 * inv1});
  }
  // Unused statistics add nothing beside layer_norm.
  ModelBuilder b(17);
  b.input("x", {int64_t(2), int64_t(3)});
  b.init("s", {3}, {1, 1, 1});
  b.node("LayerNormalization", {"x", "s"}, {"y", "mean", "inv"});
  b.output("y");
  auto r = importModel(b);
  ASSERT_TRUE(r.ok) << r.errors;
  EXPECT_EQ(r.module->graphs().front()->numNodes(), 2u) << r.text;
}

TEST(OnnxDecompositionsTest, ModIntegersPythonAndC) {
  std::vector<int64_t> a{-4, 7, 5, 4, -7, 8, -9}, d{2, -3, 8, -2, 3, 5, 4};
  for (int fmod : {0, 1}) {
    ModelBuilder b(13);
    b.input("a", {int64_t(7)}, onnx::TensorProto::INT64);
    b.input("b", {int64_t(7)}, onnx::TensorProto::INT64);
    attrInt(b.node("Mod", {"a", "b"}, {"y"}), "fmod", fmod);
    b.output("y");
    auto outs = run(b, {i64({7}, a), i64({7}, d)});
    ASSERT_EQ(outs.size(), 1u);
    if (fmod == 0) // Python: the sign of the divisor
      EXPECT_EQ(outs[0].toInts(), (std::vector<int64_t>{0, -2, 5, 0, 2, 3, 3}));
    else // C: the sign of the dividend
      EXPECT_EQ(outs[0].toInts(), (std::vector<int64_t>{0, 1, 5, 0, -1, 3, -1}));
  }
  // Unsigned, broadcast against a scalar divisor.
  ModelBuilder b(13);
  b.input("a", {int64_t(3)}, onnx::TensorProto::UINT8);
  b.node("Mod", {"a", "m"}, {"y"});
  onnx::TensorProto m;
  m.set_name("m");
  m.set_data_type(onnx::TensorProto::UINT8);
  m.add_int32_data(7);
  *b.graph().add_initializer() = m;
  b.output("y");
  auto outs = run(b, {Tensor::fromInts(DType::U8, {3}, {250, 7, 6})});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].toInts(), (std::vector<int64_t>{5, 0, 6}));
}

// Input [2, 3, 2] (N, C, d) holding 0.0, 0.1, ... in row-major order,
// target [[2, 0], [-1, 1]]: the picked log-probabilities are 0.4, 0.1, (an
// ignored one) and 0.9; weights [1, 2, 3] give them 3, 1, 0 and 2.
TEST(OnnxDecompositionsTest, NegativeLogLikelihoodLoss) {
  std::vector<double> x(12);
  for (int i = 0; i < 12; ++i)
    x[static_cast<size_t>(i)] = 0.1 * i;
  auto loss = [&](const std::string &reduction, bool weighted, bool ignore,
                  std::vector<int64_t> target) {
    ModelBuilder b(13);
    b.input("x", {int64_t(2), int64_t(3), int64_t(2)});
    b.input("t", {int64_t(2), int64_t(2)}, onnx::TensorProto::INT64);
    if (weighted)
      b.init("w", {3}, {1, 2, 3});
    auto &n = b.node("NegativeLogLikelihoodLoss", {"x", "t", weighted ? "w" : ""}, {"y"});
    attrString(n, "reduction", reduction);
    if (ignore)
      attrInt(n, "ignore_index", -1);
    b.output("y");
    auto outs = run(b, {f32({2, 3, 2}, x), i64({2, 2}, std::move(target))});
    return outs.empty() ? Tensor() : outs[0];
  };
  const std::vector<int64_t> withIgnored{2, 0, -1, 1}, plain{2, 0, 0, 1};
  expectNear(loss("none", true, true, withIgnored), {-1.2, -0.1, 0.0, -1.8});
  expectNear(loss("sum", true, true, withIgnored), {-3.1});
  expectNear(loss("mean", true, true, withIgnored), {-3.1 / 6});
  expectNear(loss("mean", false, true, withIgnored), {-1.4 / 3});
  expectNear(loss("mean", false, false, plain), {-0.5});
  expectNear(loss("mean", true, false, plain), {-(1.2 + 0.1 + 0.6 + 1.8) / 7});
  // An ignored target's loss is 0 even where class 0's log-probability is
  // -inf (not -(-inf) * 0 = NaN).
  x[6] = -std::numeric_limits<double>::infinity();
  expectNear(loss("sum", true, true, withIgnored), {-3.1});

  ModelBuilder b(13);
  b.input("x", {int64_t(2), int64_t(3)});
  b.input("t", {int64_t(2), int64_t(1)}, onnx::TensorProto::INT64);
  attrString(b.node("NegativeLogLikelihoodLoss", {"x", "t"}, {"y"}, "nll"), "reduction", "avg");
  b.output("y");
  EXPECT_EQ(importModel(b).errors,
            "m.onnx: node 'nll': error: NegativeLogLikelihoodLoss: reduction must be 'none', "
            "'sum' or 'mean', got 'avg'");
}

TEST(OnnxDecompositionsTest, SoftmaxCrossEntropyLossAndLogProb) {
  ModelBuilder b(13);
  b.input("s", {int64_t(2), int64_t(3)});
  b.input("t", {int64_t(2)}, onnx::TensorProto::INT64);
  b.node("SoftmaxCrossEntropyLoss", {"s", "t"}, {"loss", "logp"});
  b.output("loss");
  b.output("logp");
  auto outs = run(b, {f32({2, 3}, {1, 2, 3, 1, 1, 1}), i64({2}, {2, 0})});
  ASSERT_EQ(outs.size(), 2u);
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  expectNear(outs[1], {1 - lse, 2 - lse, 3 - lse, -std::log(3.0), -std::log(3.0), -std::log(3.0)});
  expectNear(outs[0], {((lse - 3) + std::log(3.0)) / 2});
}

// Rounding half to even, saturation to the zero point's type, per-axis
// scales and zero points, and the way back.
TEST(OnnxDecompositionsTest, QuantizeAndDequantizeLinear) {
  {
    ModelBuilder b(13);
    b.input("x", {int64_t(6)});
    b.input("s", {});
    b.input("z", {}, onnx::TensorProto::UINT8);
    b.node("QuantizeLinear", {"x", "s", "z"}, {"y"});
    b.output("y");
    auto outs = run(b, {f32({6}, {0, 1.5, 2.5, -3.5, 1000, -1000}), f32({}, {1.0}),
                        Tensor::fromInts(DType::U8, {}, {128})});
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_EQ(outs[0].str(), "u8[6]");
    EXPECT_EQ(outs[0].toInts(), (std::vector<int64_t>{128, 130, 130, 124, 255, 0}));
  }
  {
    ModelBuilder b(13);
    b.input("x", {int64_t(2), int64_t(3)});
    b.input("s", {int64_t(3)});
    b.input("z", {int64_t(3)}, onnx::TensorProto::INT8);
    attrInt(b.node("QuantizeLinear", {"x", "s", "z"}, {"y"}), "axis", 1);
    b.output("y");
    auto outs = run(b, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3}, {1, 2, 4}),
                        Tensor::fromInts(DType::I8, {3}, {0, 1, -1})});
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_EQ(outs[0].toInts(), (std::vector<int64_t>{1, 2, 0, 4, 3, 1}));
  }
  ModelBuilder b(13);
  b.input("x", {int64_t(3)}, onnx::TensorProto::UINT8);
  b.input("s", {});
  b.input("z", {}, onnx::TensorProto::UINT8);
  b.node("DequantizeLinear", {"x", "s", "z"}, {"y"});
  b.output("y");
  auto outs = run(b, {Tensor::fromInts(DType::U8, {3}, {128, 130, 0}), f32({}, {0.5}),
                      Tensor::fromInts(DType::U8, {}, {128})});
  ASSERT_EQ(outs.size(), 1u);
  expectNear(outs[0], {0, 1, -64}, 0);

  // DynamicQuantizeLinear of all zeros: scale 1/255 (as the reference), not 0.
  ModelBuilder d(13);
  d.input("x", {int64_t(2)});
  d.node("DynamicQuantizeLinear", {"x"}, {"y", "s", "z"});
  d.output("y");
  d.output("s");
  d.output("z");
  auto dq = run(d, {f32({2}, {0, 0})});
  ASSERT_EQ(dq.size(), 3u);
  EXPECT_EQ(dq[0].toInts(), (std::vector<int64_t>{0, 0}));
  expectNear(dq[1], {1.0 / 255}, 1e-9);
  EXPECT_EQ(dq[2].toInts(), (std::vector<int64_t>{0}));
}

// (a - za) @ (b - zb) in i32, scaled by sa * sb / sy, plus zy: here
// [[1, 2]] @ [[1], [2]] = 5, times 0.5 * 1 / 0.25 = 10, plus 10.
TEST(OnnxDecompositionsTest, QLinearMatMulAndMatMulInteger) {
  ModelBuilder b(13);
  b.input("a", {int64_t(1), int64_t(2)}, onnx::TensorProto::UINT8);
  b.input("b", {int64_t(2), int64_t(1)}, onnx::TensorProto::UINT8);
  b.input("sa", {});
  b.input("sb", {});
  b.input("sy", {});
  b.input("z", {}, onnx::TensorProto::UINT8);
  b.input("za", {}, onnx::TensorProto::UINT8);
  b.input("zy", {}, onnx::TensorProto::UINT8);
  b.node("QLinearMatMul", {"a", "sa", "za", "b", "sb", "z", "sy", "zy"}, {"y"});
  b.node("MatMulInteger", {"a", "b", "za"}, {"i"});
  b.output("y");
  b.output("i");
  auto u8 = [](std::vector<int64_t> shape, std::vector<int64_t> v) {
    return Tensor::fromInts(DType::U8, std::move(shape), v);
  };
  auto outs = run(b, {u8({1, 2}, {2, 3}), u8({2, 1}, {1, 2}), f32({}, {0.5}), f32({}, {1}),
                      f32({}, {0.25}), u8({}, {0}), u8({}, {1}), u8({}, {10})});
  ASSERT_EQ(outs.size(), 2u);
  EXPECT_EQ(outs[0].str(), "u8[1,1]");
  EXPECT_EQ(outs[0].toInts(), (std::vector<int64_t>{20}));
  EXPECT_EQ(outs[1].str(), "i32[1,1]");
  EXPECT_EQ(outs[1].toInts(), (std::vector<int64_t>{5}));
}

TEST(OnnxDecompositionsTest, BlockedQuantizationNeedsMatchingRanks) {
  ModelBuilder b(21);
  b.input("x", {int64_t(2), int64_t(4)});
  b.input("s", {int64_t(2)});
  auto &n = b.node("QuantizeLinear", {"x", "s"}, {"y"}, "q");
  attrInt(n, "axis", 1);
  attrInt(n, "block_size", 2);
  b.output("y");
  EXPECT_EQ(importModel(b).errors,
            "m.onnx: node 'q': error: QuantizeLinear: with block_size 2, y_scale must have the "
            "rank of f32[2,4], got f32[2]");
}

// L1 and L2 norms along an axis; a zero norm gives 0, not NaN.
TEST(OnnxDecompositionsTest, LpNormalization) {
  for (int64_t p : {1, 2}) {
    ModelBuilder b(13);
    b.input("x", {int64_t(2), int64_t(2)});
    auto &n = b.node("LpNormalization", {"x"}, {"y"});
    attrInt(n, "p", p);
    attrInt(n, "axis", 0);
    b.output("y");
    auto outs = run(b, {f32({2, 2}, {3, 0, -4, 0})});
    ASSERT_EQ(outs.size(), 1u);
    if (p == 1)
      expectNear(outs[0], {3.0 / 7, 0, -4.0 / 7, 0});
    else
      expectNear(outs[0], {0.6, 0, -0.8, 0});
  }
}

TEST(OnnxDecompositionsTest, MeanVarianceNormalization) {
  ModelBuilder b(13);
  b.input("x", {int64_t(1), int64_t(2), int64_t(1), int64_t(2)});
  b.node("MeanVarianceNormalization", {"x"}, {"y"});
  b.output("y");
  // Per channel over N, H, W: channel 0 holds {1, 3}, channel 1 {5, 5}.
  auto outs = run(b, {f32({1, 2, 1, 2}, {1, 3, 5, 5})});
  ASSERT_EQ(outs.size(), 1u);
  expectNear(outs[0], {-1, 1, 0, 0});
}

// A centered crop of 5 to 2 starts at 1; a pad of 1 to 4 puts 1 before and
// 2 after.
TEST(OnnxDecompositionsTest, CenterCropPad) {
  ModelBuilder b(18);
  b.input("x", {int64_t(5), int64_t(1)});
  b.initInts("s", {2}, {2, 4});
  b.node("CenterCropPad", {"x", "s"}, {"y"});
  b.output("y");
  auto outs = run(b, {f32({5, 1}, {0, 1, 2, 3, 4})});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].str(), "f32[2,4]");
  expectNear(outs[0], {0, 1, 0, 0, 0, 2, 0, 0});
}

// Batch on axis 0, time on axis 1: row b reverses its first lens[b] steps.
TEST(OnnxDecompositionsTest, ReverseSequence) {
  ModelBuilder b(13);
  b.input("x", {int64_t(2), int64_t(4)});
  b.input("lens", {int64_t(2)}, onnx::TensorProto::INT64);
  auto &n = b.node("ReverseSequence", {"x", "lens"}, {"y"});
  attrInt(n, "batch_axis", 0);
  attrInt(n, "time_axis", 1);
  b.output("y");
  auto outs = run(b, {f32({2, 4}, {0, 1, 2, 3, 4, 5, 6, 7}), i64({2}, {3, 1})});
  ASSERT_EQ(outs.size(), 1u);
  expectNear(outs[0], {2, 1, 0, 3, 4, 5, 6, 7});
}

TEST(OnnxDecompositionsTest, ModFloats) {
  std::vector<double> a{-4.3, 7.2, 5.0, 4.3, -7.2, 8.0}, d{2.1, -3.4, 8.0, -2.1, 3.4, 5.0};
  for (int fmod : {0, 1}) {
    ModelBuilder b(13);
    b.input("a", {int64_t(6)});
    b.input("b", {int64_t(6)});
    attrInt(b.node("Mod", {"a", "b"}, {"y"}), "fmod", fmod);
    b.output("y");
    auto outs = run(b, {f32({6}, a), f32({6}, d)});
    ASSERT_EQ(outs.size(), 1u);
    std::vector<double> want;
    for (size_t i = 0; i < a.size(); ++i) {
      double fa = static_cast<float>(a[i]), fd = static_cast<float>(d[i]);
      double r = std::fmod(fa, fd);
      if (fmod == 0 && r != 0 && (r < 0) != (fd < 0))
        r += fd;
      want.push_back(r);
    }
    expectNear(outs[0], want);
  }
}

TEST(OnnxDecompositionsTest, ConvTransposeOutputShapeBeyondTheKernel) {
  // ONNX's test_convtranspose_output_shape: 3*2+3 = 9 rows and 2*2+3 = 7
  // columns are computed, output_shape asks for 10 x 8: the last row and
  // column are zeros.
  ModelBuilder b(13);
  b.input("x", {int64_t(1), int64_t(1), int64_t(3), int64_t(3)});
  b.init("w", {1, 2, 3, 3}, std::vector<float>(18, 1.f));
  auto &n = b.node("ConvTranspose", {"x", "w"}, {"y"});
  attrInts(n, "strides", {3, 2});
  attrInts(n, "output_shape", {10, 8});
  b.output("y");
  auto outs = run(b, {f32({1, 1, 3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8})});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].shape(), (std::vector<int64_t>{1, 2, 10, 8}));
  std::vector<double> row0{0, 0, 1, 1, 3, 2, 2, 0}, row6{6, 6, 13, 7, 15, 8, 8, 0};
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t j = 0; j < 8; ++j) {
      EXPECT_EQ(outs[0].getDouble(c * 80 + j), row0[static_cast<size_t>(j)]);
      EXPECT_EQ(outs[0].getDouble(c * 80 + 6 * 8 + j), row6[static_cast<size_t>(j)]);
      EXPECT_EQ(outs[0].getDouble(c * 80 + 9 * 8 + j), 0.0);
    }
}

TEST(OnnxDecompositionsTest, ReshapeAllowZero) {
  ModelBuilder b(14);
  b.input("x", {int64_t(0), int64_t(3), int64_t(4)});
  b.initInts("shape", {3}, {3, 4, 0});
  attrInt(b.node("Reshape", {"x", "shape"}, {"y"}), "allowzero", 1);
  b.output("y");
  auto r = importModel(b);
  ASSERT_TRUE(r.ok) << r.errors;
  EXPECT_NE(r.text.find("-> (f32[3,4,0])"), std::string::npos) << r.text;
  // Without allowzero, 0 copies the input's dim.
  ModelBuilder c(14);
  c.input("x", {int64_t(2), int64_t(3), int64_t(4)});
  c.initInts("shape", {3}, {4, 0, 2});
  c.node("Reshape", {"x", "shape"}, {"y"});
  c.output("y");
  EXPECT_NE(importModel(c).text.find("-> (f32[4,3,2])"), std::string::npos);
  // A non-empty input cannot become an empty tensor.
  attrInt(*c.graph().mutable_node(0), "allowzero", 1);
  EXPECT_NE(importModel(c).errors.find("cannot reshape f32[2,3,4] to the empty shape [4, 0, 2] "
                                       "(allowzero=1): element counts differ"),
            std::string::npos);
}

TEST(OnnxDecompositionsTest, Trilu) {
  std::vector<double> x{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  struct Case {
    int upper;
    int64_t k;
    std::vector<double> want;
  } cases[] = {
      {1, 0, {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}},
      {1, 1, {0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12}},
      {0, 0, {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}},
      {0, -1, {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}},
  };
  for (const Case &c : cases) {
    ModelBuilder b(14);
    b.input("x", {int64_t(3), int64_t(4)});
    b.initInts("k", {}, {c.k});
    attrInt(b.node("Trilu", {"x", "k"}, {"y"}), "upper", c.upper);
    b.output("y");
    auto outs = run(b, {f32({3, 4}, x)});
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_EQ(outs[0].toDoubles(), c.want) << "upper " << c.upper << " k " << c.k;
  }
}

TEST(OnnxDecompositionsTest, HardmaxOneHotEyeLike) {
  ModelBuilder b(13);
  b.input("x", {int64_t(2), int64_t(3)});
  b.input("i", {int64_t(3)}, onnx::TensorProto::INT64);
  b.node("Hardmax", {"x"}, {"h"});
  attrInt(b.node("Hardmax", {"x"}, {"h0"}), "axis", 0);
  b.initInts("depth", {}, {3});
  b.init("values", {2}, {-1, 5});
  b.node("OneHot", {"i", "depth", "values"}, {"oh"});
  attrInt(b.node("OneHot", {"i", "depth", "values"}, {"oh0"}), "axis", 0);
  attrInt(b.node("EyeLike", {"x"}, {"eye"}), "k", 1);
  b.output("h");
  b.output("h0");
  b.output("oh");
  b.output("oh0");
  b.output("eye");
  auto outs = run(b, {f32({2, 3}, {1, 3, 3, 2, 0, 5}), i64({3}, {0, -1, 2})});
  ASSERT_EQ(outs.size(), 5u);
  // The first of equal maxima wins.
  EXPECT_EQ(outs[0].toDoubles(), (std::vector<double>{0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(outs[1].toDoubles(), (std::vector<double>{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(outs[2].shape(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(outs[2].toDoubles(), (std::vector<double>{5, -1, -1, -1, -1, 5, -1, -1, 5}));
  EXPECT_EQ(outs[3].toDoubles(), (std::vector<double>{5, -1, -1, -1, -1, -1, -1, 5, 5}));
  EXPECT_EQ(outs[4].toDoubles(), (std::vector<double>{0, 1, 0, 0, 0, 1}));
}

TEST(OnnxDecompositionsTest, CumSum) {
  struct Case {
    int exclusive, reverse;
    std::vector<double> want;
  } cases[] = {
      {0, 0, {1, 3, 6, 4, 9, 15}},
      {1, 0, {0, 1, 3, 0, 4, 9}},
      {0, 1, {6, 5, 3, 15, 11, 6}},
      {1, 1, {5, 3, 0, 11, 6, 0}},
  };
  for (const Case &c : cases) {
    ModelBuilder b(14);
    b.input("x", {int64_t(2), int64_t(3)});
    b.initInts("axis", {}, {-1});
    auto &n = b.node("CumSum", {"x", "axis"}, {"y"});
    attrInt(n, "exclusive", c.exclusive);
    attrInt(n, "reverse", c.reverse);
    b.output("y");
    auto outs = run(b, {f32({2, 3}, {1, 2, 3, 4, 5, 6})});
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_EQ(outs[0].toDoubles(), c.want) << c.exclusive << c.reverse;
  }
  // Along axis 0 (transposed to the last axis and back), on integers.
  ModelBuilder b(14);
  b.input("x", {int64_t(2), int64_t(3)}, onnx::TensorProto::INT64);
  b.initInts("axis", {1}, {0});
  b.node("CumSum", {"x", "axis"}, {"y"});
  b.output("y");
  auto outs = run(b, {i64({2, 3}, {1, 2, 3, 4, 5, 6})});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].toInts(), (std::vector<int64_t>{1, 2, 3, 5, 7, 9}));
}

TEST(OnnxDecompositionsTest, ScatterNDWithConstantIndices) {
  for (std::string reduction : {"none", "add", "mul"}) {
    ModelBuilder b(16);
    b.input("data", {int64_t(3), int64_t(2)});
    b.input("updates", {int64_t(2), int64_t(2)});
    b.initInts("indices", {2, 1}, {2, 0});
    attrString(b.node("ScatterND", {"data", "indices", "updates"}, {"y"}), "reduction", reduction);
    b.output("y");
    auto outs = run(b, {f32({3, 2}, {1, 2, 3, 4, 5, 6}), f32({2, 2}, {10, 20, 30, 40})});
    ASSERT_EQ(outs.size(), 1u);
    std::vector<double> want = reduction == "none"  ? std::vector<double>{30, 40, 3, 4, 10, 20}
                               : reduction == "add" ? std::vector<double>{31, 42, 3, 4, 15, 26}
                                                    : std::vector<double>{30, 80, 3, 4, 50, 120};
    EXPECT_EQ(outs[0].toDoubles(), want) << reduction;
  }
  // Indices computed from the graph's inputs, or a reduction over repeated
  // indices: the scatter_nd op.
  {
    ModelBuilder b(18);
    b.input("data", {int64_t(3)});
    b.input("indices", {int64_t(3), int64_t(1)}, onnx::TensorProto::INT64);
    b.input("updates", {int64_t(3)});
    attrString(b.node("ScatterND", {"data", "indices", "updates"}, {"y"}, "scatter"), "reduction",
               "max");
    b.output("y");
    auto r = importModel(b);
    ASSERT_TRUE(r.ok) << r.errors;
    EXPECT_NE(r.text.find("scatter_nd(%data, %indices, %updates) {reduction = \"max\"}"),
              std::string::npos)
        << r.text;
    auto outs =
        runGraph(*r.module, {f32({3}, {1, 5, 3}), Tensor::fromInts(DType::I64, {3, 1}, {2, -1, 0}),
                             f32({3}, {7, 2, 0})});
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_EQ(outs[0].toDoubles(), (std::vector<double>{1, 5, 7})); // 3 vs 7 and 2 at [2]
  }
}

TEST(OnnxDecompositionsTest, IsInfShrinkAndTrigonometry) {
  ModelBuilder b(13);
  b.input("x", {int64_t(4)});
  b.node("IsInf", {"x"}, {"inf"});
  attrInt(b.node("IsInf", {"x"}, {"neg"}), "detect_positive", 0);
  auto &s = b.node("Shrink", {"x"}, {"shrink"});
  attrFloat(s, "lambd", 1.5f);
  attrFloat(s, "bias", 1.0f);
  for (const char *out : {"inf", "neg", "shrink"})
    b.output(out);
  auto outs = run(b, {f32({4}, {INFINITY, -INFINITY, 2, -1})});
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[0].toInts(), (std::vector<int64_t>{1, 1, 0, 0}));
  EXPECT_EQ(outs[1].toInts(), (std::vector<int64_t>{0, 1, 0, 0}));
  EXPECT_EQ(outs[2].toDoubles()[2], 1.0);
  EXPECT_EQ(outs[2].toDoubles()[3], 0.0);

  std::vector<double> x{-0.9, -0.3, 0.2, 0.7};
  struct Fn {
    const char *op;
    double (*f)(double);
    std::vector<double> in;
  } fns[] = {{"Tan", [](double v) { return std::tan(v); }, x},
             {"Sinh", [](double v) { return std::sinh(v); }, x},
             {"Cosh", [](double v) { return std::cosh(v); }, x},
             {"Asinh", [](double v) { return std::asinh(v); }, x},
             {"Atanh", [](double v) { return std::atanh(v); }, x},
             {"Acosh", [](double v) { return std::acosh(v); }, {1, 1.5, 3, 10}}};
  for (const Fn &fn : fns) {
    ModelBuilder m(13);
    m.input("x", {int64_t(4)});
    m.node(fn.op, {"x"}, {"y"});
    m.output("y");
    auto ys = run(m, {f32({4}, fn.in)});
    ASSERT_EQ(ys.size(), 1u) << fn.op;
    std::vector<double> want;
    for (double v : fn.in)
      want.push_back(fn.f(static_cast<float>(v)));
    expectNear(ys[0], want, 1e-6);
  }
}

TEST(OnnxDecompositionsTest, DropoutTrainingWithRatioZeroIsTheIdentity) {
  for (float ratio : {0.f, 0.25f}) {
    ModelBuilder b(13);
    b.input("x", {int64_t(3)});
    b.init("ratio", {}, {ratio});
    onnx::TensorProto t;
    t.set_name("training");
    t.set_data_type(onnx::TensorProto::BOOL);
    t.add_int32_data(1);
    *b.graph().add_initializer() = t;
    b.node("Dropout", {"x", "ratio", "training"}, {"y", "mask"}, "dropout");
    b.output("y");
    b.output("mask");
    auto r = importModel(b);
    if (ratio == 0.f) {
      ASSERT_TRUE(r.ok) << r.errors;
      auto outs = runGraph(*r.module, {f32({3}, {1, -2, 3})});
      ASSERT_EQ(outs.size(), 2u);
      EXPECT_EQ(outs[0].toDoubles(), (std::vector<double>{1, -2, 3}));
      EXPECT_EQ(outs[1].toInts(), (std::vector<int64_t>{1, 1, 1}));
    } else {
      EXPECT_EQ(r.errors, "m.onnx: node 'dropout': error: Dropout: training_mode is true with "
                          "ratio 0.25 (a random mask); Kiln imports models for inference only");
    }
  }
}

} // namespace

/// Einsum of two operands against the sum it means, computed here directly.
TEST(OnnxDecompositionsTest, EinsumIsTransposesAndOneMatmul) {
  struct Case {
    const char *equation;
    std::vector<int64_t> a, b;
  };
  // Attention scores (a transposed right side), a bilinear contraction with a
  // letter summed on one side first, a broadcast '...' batch, implicit output.
  for (const Case &c :
       {Case{"bhid,bhjd->bhij", {2, 2, 3, 4}, {2, 2, 5, 4}},
        Case{"bij,jkl->bik", {2, 3, 4}, {4, 5, 2}}, Case{"...ij,jk->...ik", {2, 3, 4}, {4, 2}},
        Case{"ij,kj", {3, 4}, {2, 4}}}) {
    ModelBuilder b(13);
    b.input("a", std::vector<OnnxDim>(c.a.begin(), c.a.end()));
    b.input("b", std::vector<OnnxDim>(c.b.begin(), c.b.end()));
    attrString(b.node("Einsum", {"a", "b"}, {"y"}), "equation", c.equation);
    b.output("y");
    auto ramp = [](const std::vector<int64_t> &s, double k) {
      std::vector<double> v(static_cast<size_t>(numElements(s)));
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = std::sin(k * static_cast<double>(i + 1));
      return f32(s, v);
    };
    Tensor x = ramp(c.a, 0.7), y = ramp(c.b, 1.3);
    auto outs = run(b, {x, y});
    ASSERT_EQ(outs.size(), 1u) << c.equation;
    // The reference: every assignment of the letters, summed.
    std::string eq = c.equation, lhs = eq.substr(0, eq.find("->")), out;
    std::string ta = lhs.substr(0, lhs.find(',')), tb = lhs.substr(lhs.find(',') + 1);
    if (ta.rfind("...", 0) == 0)
      ta = "Z" + ta.substr(3);
    out = eq.find("->") == std::string::npos ? "ik" : eq.substr(eq.find("->") + 2);
    if (out.rfind("...", 0) == 0)
      out = "Z" + out.substr(3);
    std::map<char, int64_t> size;
    for (size_t i = 0; i < ta.size(); ++i)
      size[ta[i]] = c.a[i];
    for (size_t i = 0; i < tb.size(); ++i)
      size[tb[i]] = c.b[i];
    std::vector<char> letters;
    for (auto &[l, n] : size)
      letters.push_back(l);
    std::vector<int64_t> outShape;
    for (char l : out)
      outShape.push_back(size[l]);
    std::vector<double> want(static_cast<size_t>(numElements(outShape)), 0.0);
    std::map<char, int64_t> at;
    for (char l : letters)
      at[l] = 0;
    auto flat = [&](const std::string &t, const std::vector<int64_t> &shape) {
      int64_t f = 0;
      for (size_t i = 0; i < t.size(); ++i)
        f = f * shape[i] + at[t[i]];
      return f;
    };
    while (true) {
      want[static_cast<size_t>(flat(out, outShape))] +=
          x.getDouble(flat(ta, c.a)) * y.getDouble(flat(tb, c.b));
      size_t k = 0;
      while (k < letters.size() && ++at[letters[k]] == size[letters[k]])
        at[letters[k++]] = 0;
      if (k == letters.size())
        break;
    }
    EXPECT_EQ(outs[0].shape(), outShape) << c.equation;
    std::vector<double> got = outs[0].toDoubles();
    ASSERT_EQ(got.size(), want.size()) << c.equation;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-5) << c.equation << " element " << i;
  }
}

TEST(OnnxDecompositionsTest, EinsumDiagonalIsRefusedWithItsReason) {
  ModelBuilder b(13);
  b.input("a", {int64_t(3), int64_t(3)});
  attrString(b.node("Einsum", {"a"}, {"y"}, "diag"), "equation", "ii->i");
  b.output("y");
  EXPECT_EQ(importModel(b).errors,
            "m.onnx: node 'diag': error: Einsum: equation 'ii->i' repeats 'i' within an operand (a "
            "diagonal), which is not supported");
}

// A '...' dim summed away broadcasts too: z sums over 4 rows of b against
// the single row of a.
TEST(OnnxDecompositionsTest, EinsumBroadcastsSummedEllipsisDims) {
  ModelBuilder b(13);
  b.input("a", {int64_t(1), int64_t(3)});
  b.input("b", {int64_t(4), int64_t(3)});
  attrString(b.node("Einsum", {"a", "b"}, {"y"}), "equation", "...j,...j->j");
  b.output("y");
  auto outs = run(b, {f32({1, 3}, {1, 2, 3}), f32({4, 3}, {1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4})});
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].toDoubles(), (std::vector<double>{10, 20, 30}));
}

// TopK ranks NaN above every number; equal values (NaNs too) by index.
TEST(OnnxDecompositionsTest, TopKOrdersNaNFirstAndTiesByIndex) {
  ModelBuilder b(13);
  b.input("x", {int64_t(6)});
  b.initInts("k", {1}, {4});
  b.node("TopK", {"x", "k"}, {"v", "i"});
  b.output("v");
  b.output("i");
  double nan = std::nan("");
  auto outs = run(b, {f32({6}, {1, nan, 3, nan, 3, -1})});
  ASSERT_EQ(outs.size(), 2u);
  std::vector<double> v = outs[0].toDoubles();
  EXPECT_TRUE(std::isnan(v[0]) && std::isnan(v[1])) << v[0] << " " << v[1];
  EXPECT_EQ(v[2], 3);
  EXPECT_EQ(v[3], 3);
  EXPECT_EQ(outs[1].toDoubles(), (std::vector<double>{1, 3, 2, 4}));
}
