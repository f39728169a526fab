//===- LinalgTest.cpp - matmul, gemm, conv, conv_transpose, pools -*- C++ -*-===//
//
// Reference kernels against hand-computed values, a cross-check of the
// blocked conv / conv_transpose / matmul kernels against naive loops written
// from the ONNX definitions, and type inference (shapes, symbolic dims,
// errors).
//
//===----------------------------------------------------------------------===//
#include "ir/Builder.h"
#include "ir/Interpreter.h"
#include "ir/Parser.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

using namespace kiln;

namespace {

using Doubles = std::vector<double>;
using Sizes = std::vector<int64_t>;

Tensor tensor(Sizes shape, const Doubles &values, DType dtype = DType::F32) {
  return Tensor::fromDoubles(dtype, std::move(shape), values);
}

/// 0, 1, 2, ... in `shape`.
Tensor iota(Sizes shape, DType dtype = DType::F32) {
  Tensor t = Tensor::zeros(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setDouble(i, static_cast<double>(i));
  return t;
}

Tensor random(Sizes shape, unsigned seed, DType dtype = DType::F32) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  Tensor t = Tensor::zeros(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setDouble(i, dist(gen));
  return t;
}

/// Builds one `kind` node over graph inputs typed like `inputs` and
/// evaluates it; on failure returns a null tensor and sets `error`.
Tensor run(OpKind kind, const std::vector<Tensor> &inputs, std::vector<NamedAttr> attrs = {},
           std::string *error = nullptr) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  Graph g;
  std::vector<Value *> operands;
  for (const Tensor &t : inputs)
    operands.push_back(g.addInput(t.type()));
  Builder b(g, diag);
  auto node = b.create(kind, operands, std::move(attrs));
  if (failed(node)) {
    if (error)
      *error = c.str();
    else
      ADD_FAILURE() << c.str();
    return Tensor();
  }
  auto results = evaluateNode(**node, inputs, diag);
  if (failed(results)) {
    ADD_FAILURE() << c.str();
    return Tensor();
  }
  return (*results)[0];
}

/// The inferred result type of `kind` on operands given as type text, or
/// the first error message.
std::string infer(OpKind kind, const std::vector<std::string> &operandTypes,
                  std::vector<NamedAttr> named = {}) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector c(diag);
  std::vector<TensorType> types;
  for (const std::string &text : operandTypes) {
    auto t = parseTensorType(text, diag);
    if (failed(t))
      return "bad type " + text;
    types.push_back(*t);
  }
  const OpInfo &info = opInfo(kind);
  auto attrs = buildAttrs(info, std::move(named), Location(), diag);
  if (failed(attrs))
    return c.diagnostics().front().message;
  auto results = inferTypes(info, types, *attrs, 1, Location(), diag);
  if (failed(results))
    return c.diagnostics().front().message;
  return (*results)[0].str();
}

void expectValues(const Tensor &t, const Sizes &shape, const Doubles &values, double tol = 1e-6) {
  ASSERT_FALSE(t.isNull());
  EXPECT_EQ(t.shape(), shape);
  Doubles got = t.toDoubles();
  ASSERT_EQ(got.size(), values.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != values[i]) { // exact first, so infinities compare
      EXPECT_NEAR(got[i], values[i], tol) << "at flat index " << i;
    }
}

void expectClose(const Tensor &got, const Tensor &want, double tol) {
  ASSERT_FALSE(got.isNull());
  expectValues(got, want.shape(), want.toDoubles(), tol);
}

//===----------------------------------------------------------------------===//
// Naive oracles, written straight from the ONNX definitions
//===----------------------------------------------------------------------===//

struct NaiveWindow {
  Sizes strides, pads, dilations;
  int64_t group = 1;
};

/// Calls fn(flat output index, out multi-index) over `sizes`.
template <typename Fn> void forEachIndex(const Sizes &sizes, Fn fn) {
  Sizes idx(sizes.size(), 0);
  int64_t total = 1;
  for (int64_t s : sizes)
    total *= s;
  for (int64_t flat = 0; flat < total; ++flat) {
    fn(flat, idx);
    for (size_t i = idx.size(); i-- > 0;) {
      if (++idx[i] < sizes[i])
        break;
      idx[i] = 0;
    }
  }
}

int64_t flatten(const Sizes &idx, const Sizes &shape) {
  int64_t f = 0;
  for (size_t i = 0; i < shape.size(); ++i)
    f = f * shape[i] + idx[i];
  return f;
}

/// y[n, m, o...] = b[m] + sum_{c, k...} x[n, g*Cg + c, o*s - p + k*d] * w[m, c, k...].
Tensor naiveConv(const Tensor &x, const Tensor &w, const Tensor *bias, const Sizes &outShape,
                 const NaiveWindow &p) {
  Tensor y = Tensor::zeros(DType::F64, outShape);
  const size_t ns = x.shape().size() - 2;
  const int64_t cg = w.dim(1), mg = w.dim(0) / p.group;
  forEachIndex(outShape, [&](int64_t flat, const Sizes &o) {
    const int64_t grp = o[1] / mg;
    double sum = bias ? bias->getDouble(o[1]) : 0;
    const Sizes filter(w.shape().begin() + 1, w.shape().end());
    const int64_t perFilter = w.numel() / w.dim(0);
    forEachIndex(filter, [&](int64_t wflat, const Sizes &k) {
      Sizes xi{o[0], grp * cg + k[0]};
      for (size_t i = 0; i < ns; ++i) {
        const int64_t pos = o[2 + i] * p.strides[i] - p.pads[i] + k[1 + i] * p.dilations[i];
        if (pos < 0 || pos >= x.dim(static_cast<int64_t>(2 + i)))
          return;
        xi.push_back(pos);
      }
      sum += x.getDouble(flatten(xi, x.shape())) * w.getDouble(o[1] * perFilter + wflat);
    });
    y.setDouble(flat, sum);
  });
  return y;
}

/// Scatters x[n, c, i...] * w[c, m, k...] to y[n, g*Mg + m, i*s - p + k*d].
Tensor naiveConvTranspose(const Tensor &x, const Tensor &w, const Sizes &outShape,
                          const NaiveWindow &p) {
  Tensor y = Tensor::zeros(DType::F64, outShape);
  const size_t ns = x.shape().size() - 2;
  const int64_t cg = x.dim(1) / p.group, mg = w.dim(1);
  forEachIndex(x.shape(), [&](int64_t xflat, const Sizes &i) {
    const int64_t grp = i[1] / cg;
    forEachIndex(Sizes(w.shape().begin() + 1, w.shape().end()), [&](int64_t, const Sizes &k) {
      Sizes yi{i[0], grp * mg + k[0]};
      for (size_t a = 0; a < ns; ++a) {
        const int64_t pos = i[2 + a] * p.strides[a] - p.pads[a] + k[1 + a] * p.dilations[a];
        if (pos < 0 || pos >= outShape[2 + a])
          return;
        yi.push_back(pos);
      }
      Sizes wi{i[1]};
      wi.insert(wi.end(), k.begin(), k.end());
      const int64_t yflat = flatten(yi, outShape);
      y.setDouble(yflat,
                  y.getDouble(yflat) + x.getDouble(xflat) * w.getDouble(flatten(wi, w.shape())));
    });
  });
  return y;
}

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

TEST(LinalgTest, MatMul2D) {
  Tensor y = run(OpKind::MatMul, {tensor({2, 2}, {1, 2, 3, 4}), tensor({2, 2}, {5, 6, 7, 8})});
  expectValues(y, {2, 2}, {19, 22, 43, 50});
}

TEST(LinalgTest, MatMulPromotesVectors) {
  expectValues(run(OpKind::MatMul, {tensor({3}, {1, 2, 3}), tensor({3}, {4, 5, 6})}), {}, {32});
  expectValues(run(OpKind::MatMul, {tensor({2}, {1, 2}), tensor({2, 3}, {1, 2, 3, 4, 5, 6})}), {3},
               {9, 12, 15});
  expectValues(run(OpKind::MatMul, {tensor({2, 2}, {1, 2, 3, 4}), tensor({2}, {1, 1})}), {2},
               {3, 7});
  // A vector against a batch of matrices: [2] x [2, 2, 1] -> [2, 1].
  expectValues(run(OpKind::MatMul, {tensor({2}, {1, 2}), tensor({2, 2, 1}, {1, 1, 2, 3})}), {2, 1},
               {3, 8});
}

TEST(LinalgTest, MatMulBroadcastsBatchDims) {
  // a[i] = (i + 1) * I, b[k] = (k + 1) * [[1, 1], [0, 1]]: y[i, k] = (i+1)(k+1) [[1, 1], [0, 1]].
  Tensor a = tensor({2, 1, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 2});
  Tensor b = tensor({3, 2, 2}, {1, 1, 0, 1, 2, 2, 0, 2, 3, 3, 0, 3});
  Doubles want;
  for (int i = 1; i <= 2; ++i)
    for (int k = 1; k <= 3; ++k)
      for (double v : {1, 1, 0, 1})
        want.push_back(i * k * v);
  expectValues(run(OpKind::MatMul, {a, b}), {2, 3, 2, 2}, want);
}

TEST(LinalgTest, MatMulIntegerAndHalf) {
  Tensor y = run(OpKind::MatMul, {tensor({2, 2}, {1, 2, 3, 4}, DType::I32),
                                  tensor({2, 2}, {5, 6, 7, 8}, DType::I32)});
  ASSERT_FALSE(y.isNull());
  EXPECT_EQ(y.dtype(), DType::I32);
  EXPECT_EQ(y.toInts(), (std::vector<int64_t>{19, 22, 43, 50}));
  y = run(OpKind::MatMul,
          {tensor({1, 2}, {-3, 2}, DType::I64), tensor({2, 1}, {4, 5}, DType::I64)});
  EXPECT_EQ(y.toInts(), (std::vector<int64_t>{-2}));
  // Integer results wrap to the dtype.
  y = run(OpKind::MatMul, {tensor({1, 2}, {100, 1}, DType::I8), tensor({2, 1}, {2, 0}, DType::I8)});
  EXPECT_EQ(y.toInts(), (std::vector<int64_t>{-56}));
  y = run(OpKind::MatMul,
          {tensor({2, 2}, {1, 2, 3, 4}, DType::F16), tensor({2, 2}, {0.5, 1, 1, 0}, DType::F16)});
  EXPECT_EQ(y.dtype(), DType::F16);
  expectValues(y, {2, 2}, {2.5, 1, 5.5, 3});
}

TEST(LinalgTest, MatMulMatchesNaiveAcrossBlocks) {
  // Sizes that cross the GEMM's row groups (4), column blocks (256) and
  // depth blocks (128).
  const int64_t m = 7, k = 300, n = 270;
  Tensor a = random({m, k}, 1), b = random({k, n}, 2);
  Tensor want = Tensor::zeros(DType::F64, {m, n});
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += a.getDouble(i * k + p) * b.getDouble(p * n + j);
      want.setDouble(i * n + j, s);
    }
  expectClose(run(OpKind::MatMul, {a, b}), want, 1e-4);
}

TEST(LinalgTest, MatMulTypeInference) {
  EXPECT_EQ(infer(OpKind::MatMul, {"f32[N,3,4]", "f32[4,5]"}), "f32[N,3,5]");
  EXPECT_EQ(infer(OpKind::MatMul, {"f32[4]", "f32[2,4,6]"}), "f32[2,6]");
  EXPECT_EQ(infer(OpKind::MatMul, {"f32[2,1,3,4]", "f32[5,4,6]"}), "f32[2,5,3,6]");
  EXPECT_EQ(infer(OpKind::MatMul, {"f32[3,K]", "f32[4,5]"}), "f32[3,5]");
  EXPECT_EQ(infer(OpKind::MatMul, {"f32[2,3]", "f32[4,5]"}),
            "'matmul' op contracting dims 3 and 4 do not match in f32[2,3] x f32[4,5]");
  EXPECT_EQ(infer(OpKind::MatMul, {"f32[2,3,4]", "f32[5,4,6]"}),
            "'matmul' op batch dims of f32[2,3,4] and f32[5,4,6] are not broadcastable (2 vs 5)");
  EXPECT_EQ(infer(OpKind::MatMul, {"f32[]", "f32[3]"}),
            "'matmul' op operands must have rank >= 1, got f32[] and f32[3]");
  EXPECT_EQ(infer(OpKind::MatMul, {"f32[2,3]", "f64[3,2]"}),
            "'matmul' op operands must have the same dtype, got f32[2,3] and f64[3,2]");
  EXPECT_EQ(infer(OpKind::MatMul, {"bool[2,2]", "bool[2,2]"}),
            "'matmul' op operands must be numeric, got bool[2,2]");
}

//===----------------------------------------------------------------------===//
// gemm
//===----------------------------------------------------------------------===//

TEST(LinalgTest, GemmTransposesAndBroadcastsC) {
  // A^T = [[1, 3, 5], [2, 4, 6]]; B^T columns are the rows of B.
  Tensor a = tensor({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor b = tensor({4, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1});
  Tensor c = tensor({4}, {1, 2, 3, 4});
  Tensor y = run(OpKind::Gemm, {a, b, c},
                 {{"trans_a", true}, {"trans_b", true}, {"alpha", 0.5}, {"beta", 2.0}});
  expectValues(y, {2, 4}, {2.5, 5.5, 8.5, 12.5, 3, 6, 9, 14});
}

TEST(LinalgTest, GemmDefaultsWithColumnC) {
  Tensor y = run(OpKind::Gemm, {tensor({2, 2}, {1, 2, 3, 4}), tensor({2, 2}, {5, 6, 7, 8}),
                                tensor({2, 1}, {1, 2})});
  expectValues(y, {2, 2}, {20, 23, 45, 52});
  // Without C, and in f64.
  y = run(OpKind::Gemm, {tensor({1, 2}, {1, 2}, DType::F64), tensor({2, 1}, {3, 4}, DType::F64)},
          {{"alpha", 2.0}});
  EXPECT_EQ(y.dtype(), DType::F64);
  expectValues(y, {1, 1}, {22});
}

TEST(LinalgTest, GemmTypeInference) {
  EXPECT_EQ(infer(OpKind::Gemm, {"f32[K,N]", "f32[5,K]", "f32[5]"},
                  {{"trans_a", true}, {"trans_b", true}}),
            "f32[N,5]");
  EXPECT_EQ(infer(OpKind::Gemm, {"f32[2,3]", "f32[4,5]"}),
            "'gemm' op contracting dims 3 and 4 do not match in f32[2,3] (trans_a = false) x "
            "f32[4,5] (trans_b = false)");
  EXPECT_EQ(infer(OpKind::Gemm, {"f32[2,3,4]", "f32[4,5]"}),
            "'gemm' op A and B must be 2-D, got f32[2,3,4] and f32[4,5]");
  EXPECT_EQ(infer(OpKind::Gemm, {"f32[2,3]", "f32[3,5]", "f32[3]"}),
            "'gemm' op C f32[3] does not broadcast to the result shape [2,5]");
  EXPECT_EQ(infer(OpKind::Gemm, {"i32[2,3]", "i32[3,5]"}),
            "'gemm' op operand 0 must be a float tensor, got i32[2,3]");
}

//===----------------------------------------------------------------------===//
// conv
//===----------------------------------------------------------------------===//

TEST(LinalgTest, ConvPaddedWithBias) {
  // Ones kernel with pads 1: each output is its 3x3 neighbourhood sum, + 1.
  Tensor y =
      run(OpKind::Conv, {iota({1, 1, 3, 3}), tensor({1, 1, 3, 3}, Doubles(9, 1)), tensor({1}, {1})},
          {{"pads", Ints{1, 1, 1, 1}}});
  // iota is 0..8, so the sums of the 1..9 grid minus the window size.
  expectValues(y, {1, 1, 3, 3}, {9, 16, 13, 22, 37, 28, 21, 34, 25});
}

TEST(LinalgTest, ConvStridedDilated) {
  // x[i][j] = 5i + j; w = [[1, 2], [3, 4]] with dilation 2 sees x[a][b],
  // x[a][b+2], x[a+2][b], x[a+2][b+2]: 10 * x[a][b] + 82.
  Tensor y = run(OpKind::Conv, {iota({1, 1, 5, 5}), tensor({1, 1, 2, 2}, {1, 2, 3, 4})},
                 {{"strides", Ints{2, 2}}, {"dilations", Ints{2, 2}}});
  expectValues(y, {1, 1, 2, 2}, {82, 102, 182, 202});
}

TEST(LinalgTest, ConvAsymmetricPads) {
  // pads [h_begin, w_begin, h_end, w_end] = [0, 1, 0, 0]: one zero column in front.
  Tensor y = run(OpKind::Conv, {tensor({1, 1, 2, 2}, {1, 2, 3, 4}), tensor({1, 1, 1, 2}, {1, 10})},
                 {{"pads", Ints{0, 1, 0, 0}}});
  expectValues(y, {1, 1, 2, 2}, {10, 21, 30, 43});
}

TEST(LinalgTest, ConvGrouped) {
  // 1x1, two groups of two channels, two outputs per group.
  Tensor y =
      run(OpKind::Conv,
          {tensor({1, 4, 1, 1}, {1, 2, 3, 4}), tensor({4, 2, 1, 1}, {1, 0, 0, 1, 1, 1, 2, 0})},
          {{"group", int64_t(2)}});
  expectValues(y, {1, 4, 1, 1}, {1, 2, 7, 6});
  // 1-D, two groups of one channel.
  y = run(OpKind::Conv,
          {tensor({1, 2, 4}, {1, 2, 3, 4, 10, 20, 30, 40}), tensor({2, 1, 2}, {1, 1, 1, -1})},
          {{"group", int64_t(2)}});
  expectValues(y, {1, 2, 3}, {3, 5, 7, -10, -10, -10});
}

TEST(LinalgTest, ConvDepthwise) {
  // group = channels = 2, ones kernels, pads 1: channel 0 sums its
  // neighbourhood, channel 1 (all ones) counts it.
  Doubles x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  x.insert(x.end(), 9, 1.0);
  Tensor y = run(OpKind::Conv, {tensor({1, 2, 3, 3}, x), tensor({2, 1, 3, 3}, Doubles(18, 1))},
                 {{"group", int64_t(2)}, {"pads", Ints{1, 1, 1, 1}}});
  expectValues(y, {1, 2, 3, 3}, {12, 21, 16, 27, 45, 33, 24, 39, 28, 4, 6, 4, 6, 9, 6, 4, 6, 4});
}

TEST(LinalgTest, ConvOtherDTypes) {
  Tensor y = run(OpKind::Conv, {tensor({1, 1, 3}, {1, 2, 3}, DType::F64),
                                tensor({1, 1, 2}, {1, -1}, DType::F64)});
  EXPECT_EQ(y.dtype(), DType::F64);
  expectValues(y, {1, 1, 2}, {-1, -1});
  y = run(OpKind::Conv,
          {tensor({1, 1, 3}, {1, 2, 3}, DType::BF16), tensor({1, 1, 2}, {1, 2}, DType::BF16)});
  EXPECT_EQ(y.dtype(), DType::BF16);
  expectValues(y, {1, 1, 2}, {5, 8});
}

TEST(LinalgTest, ConvOfEmptyInputIsBias) {
  // Zero-length spatial input with pads: every window is padding.
  Tensor y = run(OpKind::Conv,
                 {Tensor::zeros(DType::F32, {1, 2, 0}), tensor({3, 2, 1}, Doubles(6, 1)),
                  tensor({3}, {1, 2, 3})},
                 {{"pads", Ints{1, 1}}});
  expectValues(y, {1, 3, 2}, {1, 1, 2, 2, 3, 3});
}

TEST(LinalgTest, ConvMatchesNaive) {
  struct Case {
    Sizes x, w;
    NaiveWindow p;
  };
  const std::vector<Case> cases = {
      // Batch 2, stride 2, asymmetric pads, dilation.
      {{2, 3, 9, 7}, {4, 3, 3, 2}, {{2, 1}, {1, 0, 2, 1}, {2, 1}, 1}},
      // Grouped with strides and pads.
      {{1, 6, 8, 8}, {9, 2, 3, 3}, {{2, 2}, {1, 1, 1, 1}, {1, 1}, 3}},
      // Enough depth and width for several im2col tiles.
      {{1, 64, 32, 32}, {4, 64, 3, 3}, {{1, 1}, {1, 1, 1, 1}, {1, 1}, 1}},
      // Pointwise, strided pointwise, 1-D and 3-D.
      {{2, 5, 6, 6}, {3, 5, 1, 1}, {{1, 1}, {0, 0, 0, 0}, {1, 1}, 1}},
      {{1, 5, 6, 6}, {3, 5, 1, 1}, {{2, 2}, {0, 0, 0, 0}, {1, 1}, 1}},
      {{2, 2, 11}, {3, 2, 4}, {{3}, {2, 1}, {2}, 1}},
      {{1, 2, 5, 4, 6}, {3, 2, 2, 3, 2}, {{1, 2, 1}, {1, 0, 1, 0, 1, 1}, {2, 1, 1}, 1}},
  };
  unsigned seed = 10;
  for (const Case &c : cases) {
    SCOPED_TRACE(testing::Message() << "x " << sizesStr(c.x) << " w " << sizesStr(c.w));
    Tensor x = random(c.x, seed++), w = random(c.w, seed++), b = random({c.w[0]}, seed++);
    Tensor y = run(OpKind::Conv, {x, w, b},
                   {{"strides", c.p.strides},
                    {"pads", c.p.pads},
                    {"dilations", c.p.dilations},
                    {"group", c.p.group}});
    ASSERT_FALSE(y.isNull());
    expectClose(y, naiveConv(x, w, &b, y.shape(), c.p), 1e-4);
  }
}

TEST(LinalgTest, ConvTypeInference) {
  EXPECT_EQ(infer(OpKind::Conv, {"f32[N,3,H,W]", "f32[8,3,3,3]"}, {{"pads", Ints{1, 1, 1, 1}}}),
            "f32[N,8,H,W]");
  EXPECT_EQ(infer(OpKind::Conv, {"f32[N,3,H,W]", "f32[8,3,3,3]"}, {{"strides", Ints{2, 2}}}),
            "f32[N,8,(H+1)/2-1,(W+1)/2-1]"); // floor((H-3)/2)+1
  EXPECT_EQ(infer(OpKind::MaxPool, {"f32[N,3,H,W]"},
                  {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", true}}),
            "f32[N,3,?,?]");
  EXPECT_EQ(infer(OpKind::Conv, {"f32[1,3,224,224]", "f32[64,3,7,7]", "f32[64]"},
                  {{"strides", Ints{2, 2}}, {"pads", Ints{3, 3, 3, 3}}}),
            "f32[1,64,112,112]");
  EXPECT_EQ(infer(OpKind::Conv, {"f32[1,C,8]", "f32[M,2,3]"}), "f32[1,M,6]");
}

TEST(LinalgTest, ConvTypeErrors) {
  EXPECT_EQ(infer(OpKind::Conv, {"f32[1,3,8,8]", "f32[4,4,3,3]"}),
            "'conv' op input channels 3 do not match weight channels 4 * group 1");
  EXPECT_EQ(infer(OpKind::Conv, {"f32[1,4,8,8]", "f32[6,1,3,3]"}, {{"group", int64_t(4)}}),
            "'conv' op output channels 6 are not divisible by group 4");
  EXPECT_EQ(infer(OpKind::Conv, {"f32[1,3,8,8]", "f32[4,3,3]"}),
            "'conv' op weight f32[4,3,3] must have the rank of the input f32[1,3,8,8]");
  EXPECT_EQ(infer(OpKind::Conv, {"f32[3,8]", "f32[4,3]"}),
            "'conv' op input f32[3,8] must have rank >= 3 (batch, channels, spatial dims)");
  EXPECT_EQ(infer(OpKind::Conv, {"f32[1,1,2,2,2,2]", "f32[1,1,1,1,1,1]"}),
            "'conv' op input f32[1,1,2,2,2,2] has 4 spatial dims, at most 3 are supported");
  EXPECT_EQ(infer(OpKind::Conv, {"f32[1,3,8,8]", "f32[4,3,3,3]"}, {{"strides", Ints{1, 1, 1}}}),
            "'conv' op strides [1, 1, 1] must have 2 entries, one per spatial dim");
  EXPECT_EQ(infer(OpKind::Conv, {"f32[1,3,8,8]", "f32[4,3,3,3]"}, {{"strides", Ints{0, 1}}}),
            "'conv' op strides [0, 1] must be positive");
  EXPECT_EQ(infer(OpKind::Conv, {"f32[1,3,8,8]", "f32[4,3,3,3]"}, {{"pads", Ints{1, 1}}}),
            "'conv' op pads [1, 1] must have 4 entries, a begin and an end per spatial dim");
  EXPECT_EQ(infer(OpKind::Conv, {"f32[1,3,8,8]", "f32[4,3,3,3]"}, {{"pads", Ints{-1, 0, 0, 0}}}),
            "'conv' op pads [-1, 0, 0, 0] must be non-negative");
  EXPECT_EQ(infer(OpKind::Conv, {"f32[1,3,8,8]", "f32[4,3,3,3]"}, {{"group", int64_t(0)}}),
            "'conv' op group 0 must be positive");
  EXPECT_EQ(infer(OpKind::Conv, {"f32[1,3,4,4]", "f32[4,3,3,3]"}, {{"dilations", Ints{2, 2}}}),
            "'conv' op window of kernel 3 and dilation 2 does not fit spatial dim 0 of size 4 "
            "with pads 0 and 0");
  EXPECT_EQ(infer(OpKind::Conv, {"f32[1,3,8,8]", "f32[4,3,3,3]", "f32[3]"}),
            "'conv' op bias f32[3] must have shape [4]");
  EXPECT_EQ(infer(OpKind::Conv, {"f32[1,3,8,8]", "f32[4,3,0,3]"}),
            "'conv' op weight f32[4,3,0,3] has an empty kernel");
  EXPECT_EQ(infer(OpKind::Conv, {"i32[1,3,8,8]", "i32[4,3,3,3]"}),
            "'conv' op operand 0 must be a float tensor, got i32[1,3,8,8]");
}

//===----------------------------------------------------------------------===//
// conv_transpose
//===----------------------------------------------------------------------===//

TEST(LinalgTest, ConvTransposeStride2OutputPadding) {
  // Each input element paints a 2x2 block at (2i, 2j); output_padding adds
  // a last row and column that only the bias reaches.
  Tensor y = run(
      OpKind::ConvTranspose,
      {tensor({1, 1, 2, 2}, {1, 2, 3, 4}), tensor({1, 1, 2, 2}, {1, 1, 1, 1}), tensor({1}, {0.5})},
      {{"strides", Ints{2, 2}}, {"output_padding", Ints{1, 1}}});
  expectValues(y, {1, 1, 5, 5}, {1.5, 1.5, 2.5, 2.5, 0.5, 1.5, 1.5, 2.5, 2.5, 0.5, 3.5, 3.5, 4.5,
                                 4.5, 0.5, 3.5, 3.5, 4.5, 4.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5});
}

TEST(LinalgTest, ConvTranspose1D) {
  // Stride 2, kernel 3: x0 paints [0, 3), x1 paints [2, 5); output_padding 1.
  Tensor x = tensor({1, 1, 2}, {1, 2}), w = tensor({1, 1, 3}, {1, 1, 1});
  expectValues(
      run(OpKind::ConvTranspose, {x, w}, {{"strides", Ints{2}}, {"output_padding", Ints{1}}}),
      {1, 1, 6}, {1, 1, 3, 2, 2, 0});
  // Pads crop the full output [1, 1, 3, 2, 2] on both sides.
  expectValues(run(OpKind::ConvTranspose, {x, w}, {{"strides", Ints{2}}, {"pads", Ints{1, 1}}}),
               {1, 1, 3}, {1, 3, 2});
  // Dilation 2: x0 paints 0 and 2, x1 paints 1 and 3.
  expectValues(run(OpKind::ConvTranspose, {x, tensor({1, 1, 2}, {1, 1})}, {{"dilations", Ints{2}}}),
               {1, 1, 4}, {1, 2, 1, 2});
}

TEST(LinalgTest, ConvTransposeGrouped) {
  // Two groups, two output channels per group: M = w[1] * group = 4.
  Tensor y =
      run(OpKind::ConvTranspose, {tensor({1, 2, 1}, {1, 2}), tensor({2, 2, 1}, {1, 2, 3, 4})},
          {{"group", int64_t(2)}});
  expectValues(y, {1, 4, 1}, {1, 2, 6, 8});
}

TEST(LinalgTest, ConvTransposeMatchesNaive) {
  struct Case {
    Sizes x, w;
    NaiveWindow p;
    Sizes outputPadding;
  };
  const std::vector<Case> cases = {
      {{2, 3, 4, 5}, {3, 2, 3, 3}, {{2, 2}, {1, 0, 1, 1}, {1, 1}, 1}, {1, 0}},
      {{1, 4, 3, 3}, {4, 3, 2, 2}, {{2, 1}, {0, 0, 0, 0}, {1, 2}, 2}, {1, 1}},
      {{1, 2, 5}, {2, 3, 3}, {{3}, {1, 2}, {2}, 1}, {2}},
      {{1, 2, 2, 3, 2}, {2, 2, 2, 2, 2}, {{2, 1, 2}, {0, 1, 0, 0, 0, 1}, {1, 1, 1}, 1}, {1, 0, 0}},
  };
  unsigned seed = 100;
  for (const Case &c : cases) {
    SCOPED_TRACE(testing::Message() << "x " << sizesStr(c.x) << " w " << sizesStr(c.w));
    Tensor x = random(c.x, seed++), w = random(c.w, seed++);
    Tensor y = run(OpKind::ConvTranspose, {x, w},
                   {{"strides", c.p.strides},
                    {"pads", c.p.pads},
                    {"dilations", c.p.dilations},
                    {"group", c.p.group},
                    {"output_padding", c.outputPadding}});
    ASSERT_FALSE(y.isNull());
    expectClose(y, naiveConvTranspose(x, w, y.shape(), c.p), 1e-4);
  }
}

TEST(LinalgTest, ConvTransposeTypeInference) {
  // out = stride * (in - 1) + output_padding + dilation * (kernel - 1) + 1 - pads.
  EXPECT_EQ(infer(OpKind::ConvTranspose, {"f32[N,8,7,7]", "f32[8,4,3,3]"},
                  {{"strides", Ints{2, 2}},
                   {"pads", Ints{1, 1, 1, 1}},
                   {"output_padding", Ints{1, 1}},
                   {"group", int64_t(2)}}),
            "f32[N,8,14,14]");
  EXPECT_EQ(infer(OpKind::ConvTranspose, {"f32[1,8,H,7]", "f32[8,4,3,3]"}), "f32[1,4,H+2,9]");
  EXPECT_EQ(infer(OpKind::ConvTranspose, {"f32[1,8,H,7]", "f32[8,4,3,3]"},
                  {{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
            "f32[1,4,2*H-1,13]");
  EXPECT_EQ(infer(OpKind::ConvTranspose, {"f32[1,3,4,4]", "f32[4,2,3,3]"}),
            "'conv_transpose' op input channels 3 do not match weight dim 0 of f32[4,2,3,3]");
  EXPECT_EQ(infer(OpKind::ConvTranspose, {"f32[1,3,4,4]", "f32[3,2,3,3]"}, {{"group", int64_t(2)}}),
            "'conv_transpose' op input channels 3 are not divisible by group 2");
  EXPECT_EQ(infer(OpKind::ConvTranspose, {"f32[1,3,4,4]", "f32[3,2,3,3]"},
                  {{"strides", Ints{2, 2}}, {"output_padding", Ints{2, 0}}}),
            "'conv_transpose' op output_padding [2, 0] must be smaller than the stride or the "
            "dilation in spatial dim 0");
  EXPECT_EQ(
      infer(OpKind::ConvTranspose, {"f32[1,3,1,1]", "f32[3,2,1,1]"}, {{"pads", Ints{1, 0, 0, 0}}}),
      "'conv_transpose' op output size 0 of spatial dim 0 is not positive (input "
      "f32[1,3,1,1], weight f32[3,2,1,1], pads [1, 0, 0, 0])");
  EXPECT_EQ(infer(OpKind::ConvTranspose, {"f32[1,3,4,4]", "f32[3,2,3,3]", "f32[3]"}),
            "'conv_transpose' op bias f32[3] must have shape [2]");
}

//===----------------------------------------------------------------------===//
// Pools
//===----------------------------------------------------------------------===//

TEST(LinalgTest, MaxPoolCeilMode) {
  // 5 wide, kernel 2, stride 2: floor gives 2 windows, ceil a third that
  // covers only the last row / column.
  Tensor x = iota({1, 1, 5, 5});
  expectValues(run(OpKind::MaxPool, {x}, {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}}),
               {1, 1, 2, 2}, {6, 8, 16, 18});
  expectValues(run(OpKind::MaxPool, {x},
                   {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", true}}),
               {1, 1, 3, 3}, {6, 8, 9, 16, 18, 19, 21, 23, 24});
}

TEST(LinalgTest, MaxPoolCeilModeDropsWindowStartingInPadding) {
  // Pads 1: ceil((5 + 2 - 2) / 2) + 1 = 4 windows, but the 4th would start
  // in the end padding and is dropped. Windows cover rows {0}, {1, 2}, {3, 4}.
  Tensor y = run(OpKind::MaxPool, {iota({1, 1, 5, 5})},
                 {{"kernel", Ints{2, 2}},
                  {"strides", Ints{2, 2}},
                  {"pads", Ints{1, 1, 1, 1}},
                  {"ceil_mode", true}});
  expectValues(y, {1, 1, 3, 3}, {0, 2, 4, 10, 12, 14, 20, 22, 24});
}

TEST(LinalgTest, MaxPoolDilatedAndPaddedNegative) {
  expectValues(run(OpKind::MaxPool, {tensor({1, 1, 5}, {1, 5, 2, 4, 3})},
                   {{"kernel", Ints{2}}, {"dilations", Ints{2}}}),
               {1, 1, 3}, {2, 5, 3});
  // Padding never wins, even over negative values.
  expectValues(run(OpKind::MaxPool, {tensor({1, 1, 2, 2}, {-1, -2, -3, -4})},
                   {{"kernel", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}}),
               {1, 1, 2, 2}, {-1, -2, -3, -4});
}

TEST(LinalgTest, AvgPoolCountIncludePad) {
  // Windows start at -1, 1, 3: {pad, 1}, {2, 3}, {4, 5}.
  Tensor x = tensor({1, 1, 5}, {1, 2, 3, 4, 5});
  std::vector<NamedAttr> attrs = {{"kernel", Ints{2}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}};
  expectValues(run(OpKind::AvgPool, {x}, attrs), {1, 1, 3}, {1, 2.5, 4.5});
  attrs.push_back({"count_include_pad", true});
  expectValues(run(OpKind::AvgPool, {x}, attrs), {1, 1, 3}, {0.5, 2.5, 4.5});
}

TEST(LinalgTest, AvgPoolCeilMode) {
  // Kernel 3, stride 2 over 6: the ceil window [4, 7) overhangs the input
  // and averages {5, 6} either way (the overhang is not padding).
  Tensor x = tensor({1, 1, 6}, {1, 2, 3, 4, 5, 6});
  for (bool include : {false, true})
    expectValues(run(OpKind::AvgPool, {x},
                     {{"kernel", Ints{3}},
                      {"strides", Ints{2}},
                      {"ceil_mode", true},
                      {"count_include_pad", include}}),
                 {1, 1, 3}, {2, 4, 5.5});
  // With pads 1 there are 4 windows starting at -1, 1, 3, 5; the last
  // covers {6, pad} within the padded input and overhangs beyond it.
  std::vector<NamedAttr> attrs = {
      {"kernel", Ints{3}}, {"strides", Ints{2}}, {"pads", Ints{1, 1}}, {"ceil_mode", true}};
  expectValues(run(OpKind::AvgPool, {x}, attrs), {1, 1, 4}, {1.5, 3, 5, 6});
  attrs.push_back({"count_include_pad", true});
  expectValues(run(OpKind::AvgPool, {x}, attrs), {1, 1, 4}, {1, 3, 5, 3});
}

TEST(LinalgTest, AvgPool2D) {
  expectValues(run(OpKind::AvgPool, {tensor({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})},
                   {{"kernel", Ints{2, 2}}}),
               {1, 1, 2, 2}, {3, 4, 6, 7});
}

TEST(LinalgTest, PoolWindowsOfOnlyPadding) {
  // Pads as large as the kernel make windows with no input element: -inf
  // for max_pool, 0 for avg_pool (see Note [Pool ceil_mode] in Linalg.cpp).
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<NamedAttr> attrs = {{"kernel", Ints{1}}, {"pads", Ints{1, 1}}};
  expectValues(run(OpKind::MaxPool, {tensor({1, 1, 1}, {5})}, attrs), {1, 1, 3}, {-inf, 5, -inf});
  expectValues(run(OpKind::AvgPool, {tensor({1, 1, 1}, {5})}, attrs), {1, 1, 3}, {0, 5, 0});
  Tensor empty = Tensor::zeros(DType::F32, {1, 1, 0});
  expectValues(run(OpKind::MaxPool, {empty}, attrs), {1, 1, 2}, {-inf, -inf});
  expectValues(run(OpKind::AvgPool, {empty}, attrs), {1, 1, 2}, {0, 0});
}

TEST(LinalgTest, GlobalAvgPool) {
  expectValues(run(OpKind::GlobalAvgPool, {tensor({1, 2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8})}),
               {1, 2, 1, 1}, {2.5, 6.5});
  Tensor y = run(OpKind::GlobalAvgPool, {tensor({2, 1, 3}, {1, 2, 3, 4, 5, 9}, DType::F16)});
  EXPECT_EQ(y.dtype(), DType::F16);
  expectValues(y, {2, 1, 1}, {2, 6});
}

TEST(LinalgTest, PoolTypeInference) {
  EXPECT_EQ(infer(OpKind::MaxPool, {"f32[N,64,112,112]"},
                  {{"kernel", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
            "f32[N,64,56,56]");
  EXPECT_EQ(infer(OpKind::MaxPool, {"f32[N,C,H,W]"},
                  {{"kernel", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}}),
            "f32[N,C,H,W]");
  EXPECT_EQ(infer(OpKind::AvgPool, {"f32[1,1,5,5]"},
                  {{"kernel", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"ceil_mode", true}}),
            "f32[1,1,3,3]");
  EXPECT_EQ(infer(OpKind::GlobalAvgPool, {"f32[N,C,H,W]"}), "f32[N,C,1,1]");
  EXPECT_EQ(infer(OpKind::MaxPool, {"f32[1,1,4,4]"}, {{"kernel", Ints{3}}}),
            "'max_pool' op kernel [3] must have 2 entries, one per spatial dim of the input "
            "f32[1,1,4,4]");
  EXPECT_EQ(infer(OpKind::AvgPool, {"f32[1,1,4,4]"}, {{"kernel", Ints{0, 2}}}),
            "'avg_pool' op kernel [0, 2] must be positive");
  EXPECT_EQ(infer(OpKind::MaxPool, {"f32[1,1,2,2]"}, {{"kernel", Ints{3, 3}}}),
            "'max_pool' op window of kernel 3 and dilation 1 does not fit spatial dim 0 of size "
            "2 with pads 0 and 0");
  EXPECT_EQ(infer(OpKind::GlobalAvgPool, {"f32[2,3]"}),
            "'global_avg_pool' op input f32[2,3] must have rank >= 3 (batch, channels, spatial "
            "dims)");
  EXPECT_EQ(infer(OpKind::MaxPool, {"i8[1,1,4,4]"}, {{"kernel", Ints{2, 2}}}),
            "'max_pool' op operand 0 must be a float tensor, got i8[1,1,4,4]");
}

} // namespace
