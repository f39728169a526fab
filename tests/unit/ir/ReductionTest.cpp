//===- ReductionTest.cpp - Reduction and normalization op hooks -*- C++ -*-===//
//
// Reference kernels of reduce_*, argmax, softmax, log_softmax, layer_norm
// and batch_norm against hand-computed values, and their type inference
// (keepdims, symbolic dims, bad axes and operand shapes).
//
//===----------------------------------------------------------------------===//
#include "ir/Builder.h"
#include "ir/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace kiln;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

Tensor f32(std::vector<int64_t> shape, std::vector<double> values) {
  return Tensor::fromDoubles(DType::F32, std::move(shape), values);
}
Tensor ints(DType t, std::vector<int64_t> shape, std::vector<int64_t> values) {
  return Tensor::fromInts(t, std::move(shape), values);
}
TensorType type(DType t, std::vector<int64_t> sizes) {
  return TensorType(t, sizes);
}

/// Runs one op's type inference and reference kernel on concrete tensors,
/// the way the interpreter does, collecting diagnostics.
class ReductionTest : public ::testing::Test {
protected:
  /// The single result, or a null tensor on failure (see error()).
  Tensor run(OpKind kind, std::vector<Tensor> inputs, std::vector<NamedAttr> named = {}) {
    const OpInfo &info = opInfo(kind);
    auto attrs = buildAttrs(info, std::move(named), Location(), diag);
    if (failed(attrs))
      return Tensor();
    std::vector<TensorType> types;
    for (const Tensor &t : inputs)
      types.push_back(t.type());
    auto resultTypes = inferTypes(info, types, *attrs, 1, Location(), diag);
    if (failed(resultTypes))
      return Tensor();
    OpContext ctx{info, types, *attrs, 1, Location(), diag};
    auto results = info.reference(ctx, inputs, *resultTypes);
    if (failed(results))
      return Tensor();
    EXPECT_EQ((*results)[0].type(), (*resultTypes)[0]);
    return (*results)[0];
  }

  /// The inferred result type of `kind` on operands of `types`.
  FailureOr<TensorType> infer(OpKind kind, std::vector<TensorType> types,
                              std::vector<NamedAttr> named = {}) {
    Graph g("g");
    std::vector<Value *> operands;
    for (TensorType &t : types)
      operands.push_back(g.addInput(t));
    Builder b(g, diag);
    auto n = b.create(kind, operands, std::move(named));
    if (failed(n))
      return failure();
    return (*n)->result(0)->type();
  }

  /// The message of the one diagnostic reported so far.
  std::string error() const {
    EXPECT_EQ(collector.diagnostics().size(), 1u) << collector.str();
    return collector.diagnostics().empty() ? "" : collector.diagnostics()[0].message;
  }

  DiagnosticEngine diag;
  ScopedDiagnosticCollector collector{diag};
};

/// Expects `t` to hold `want` (NaN matches NaN, infinities exactly).
void expectValues(const Tensor &t, std::vector<double> want, double tol = 1e-6) {
  ASSERT_FALSE(t.isNull());
  std::vector<double> got = t.toDoubles();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << " is " << got[i];
    else if (std::isinf(want[i]))
      EXPECT_EQ(got[i], want[i]) << "element " << i;
    else
      EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
  }
}

// [2,3] = [[1, 2, 3], [4, 5, 6]]
Tensor matrix() {
  return f32({2, 3}, {1, 2, 3, 4, 5, 6});
}

} // namespace

//===----------------------------------------------------------------------===//
// reduce_*
//===----------------------------------------------------------------------===//

TEST_F(ReductionTest, ReduceSumAllAxesKeepsDims) {
  Tensor r = run(OpKind::ReduceSum, {matrix()});
  EXPECT_EQ(r.type(), type(DType::F32, {1, 1}));
  expectValues(r, {21});
}

TEST_F(ReductionTest, ReduceSumOneAxis) {
  Tensor rows = run(OpKind::ReduceSum, {matrix()}, {{"axes", Ints{1}}, {"keepdims", false}});
  EXPECT_EQ(rows.type(), type(DType::F32, {2}));
  expectValues(rows, {6, 15});
  Tensor cols = run(OpKind::ReduceSum, {matrix()}, {{"axes", Ints{-2}}});
  EXPECT_EQ(cols.type(), type(DType::F32, {1, 3}));
  expectValues(cols, {5, 7, 9});
}

TEST_F(ReductionTest, ReduceSumMiddleAndOuterAxes) {
  // [2,3,2] over axes {0, 2}
  Tensor x = f32({2, 3, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Tensor r = run(OpKind::ReduceSum, {x}, {{"axes", Ints{2, 0}}, {"keepdims", false}});
  EXPECT_EQ(r.type(), type(DType::F32, {3}));
  expectValues(r, {1 + 2 + 7 + 8, 3 + 4 + 9 + 10, 5 + 6 + 11 + 12});
}

TEST_F(ReductionTest, ReduceSumIntegersAreExact) {
  int64_t big = int64_t(1) << 60;
  Tensor r = run(OpKind::ReduceSum, {ints(DType::I64, {3}, {big, 1, 1})});
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{big + 2}));
  EXPECT_EQ(run(OpKind::ReduceSum, {ints(DType::I8, {2}, {100, 100})}).toInts(),
            (std::vector<int64_t>{-56})); // wraps in the result dtype
}

TEST_F(ReductionTest, ReduceMean) {
  expectValues(run(OpKind::ReduceMean, {matrix()}, {{"axes", Ints{1}}, {"keepdims", false}}),
               {2, 5});
  // Integer mean truncates toward zero.
  EXPECT_EQ(run(OpKind::ReduceMean, {ints(DType::I32, {2, 2}, {1, 2, -1, -2})}, {{"axes", Ints{1}}})
                .toInts(),
            (std::vector<int64_t>{1, -1}));
  // A float mean of nothing is NaN.
  expectValues(run(OpKind::ReduceMean, {f32({0, 2}, {})}, {{"axes", Ints{0}}}), {kNaN, kNaN});
}

TEST_F(ReductionTest, ReduceMeanOfEmptyIntegersIsAnError) {
  EXPECT_TRUE(run(OpKind::ReduceMean, {ints(DType::I32, {0}, {})}).isNull());
  EXPECT_EQ(error(), "'reduce_mean' op integer mean of an empty reduction");
}

TEST_F(ReductionTest, ReduceMaxMin) {
  expectValues(run(OpKind::ReduceMax, {matrix()}, {{"axes", Ints{0}}}), {4, 5, 6});
  expectValues(run(OpKind::ReduceMin, {matrix()}, {{"axes", Ints{1}}}), {1, 4});
  EXPECT_EQ(run(OpKind::ReduceMax, {ints(DType::I32, {3}, {-7, -2, -9})}).toInts(),
            (std::vector<int64_t>{-2}));
  EXPECT_EQ(run(OpKind::ReduceMin, {ints(DType::U8, {3}, {7, 200, 9})}).toInts(),
            (std::vector<int64_t>{7}));
}

TEST_F(ReductionTest, ReduceMaxMinPropagateNaN) {
  Tensor x = f32({2, 3}, {1, kNaN, 3, 4, 5, 6});
  expectValues(run(OpKind::ReduceMax, {x}, {{"axes", Ints{1}}}), {kNaN, 6});
  expectValues(run(OpKind::ReduceMin, {x}, {{"axes", Ints{1}}}), {kNaN, 4});
}

TEST_F(ReductionTest, EmptyReductionsGiveTheIdentity) {
  Tensor e = f32({2, 0}, {});
  Ints axis{1};
  expectValues(run(OpKind::ReduceSum, {e}, {{"axes", axis}}), {0, 0});
  expectValues(run(OpKind::ReduceProd, {e}, {{"axes", axis}}), {1, 1});
  expectValues(run(OpKind::ReduceMax, {e}, {{"axes", axis}}), {-kInf, -kInf});
  expectValues(run(OpKind::ReduceMin, {e}, {{"axes", axis}}), {kInf, kInf});
  EXPECT_EQ(run(OpKind::ReduceMax, {ints(DType::I8, {0}, {})}).toInts(),
            (std::vector<int64_t>{-128}));
}

TEST_F(ReductionTest, ReduceProd) {
  expectValues(run(OpKind::ReduceProd, {matrix()}, {{"axes", Ints{1}}}), {6, 120});
  EXPECT_EQ(run(OpKind::ReduceProd, {ints(DType::I64, {3}, {-2, 3, 5})}).toInts(),
            (std::vector<int64_t>{-30}));
}

TEST_F(ReductionTest, ReduceScalar) {
  Tensor r = run(OpKind::ReduceSum, {f32({}, {2.5})});
  EXPECT_EQ(r.type(), type(DType::F32, {}));
  expectValues(r, {2.5});
}

//===----------------------------------------------------------------------===//
// argmax
//===----------------------------------------------------------------------===//

TEST_F(ReductionTest, ArgMax) {
  Tensor x = f32({2, 3}, {1, 9, 9, 7, 2, 7});
  Tensor r = run(OpKind::ArgMax, {x}, {{"axis", int64_t(1)}});
  EXPECT_EQ(r.type(), type(DType::I64, {2, 1}));
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{1, 0}));
  Tensor last = run(OpKind::ArgMax, {x},
                    {{"axis", int64_t(-1)}, {"keepdims", false}, {"select_last_index", true}});
  EXPECT_EQ(last.type(), type(DType::I64, {2}));
  EXPECT_EQ(last.toInts(), (std::vector<int64_t>{2, 2}));
  Tensor cols = run(OpKind::ArgMax, {x}, {{"keepdims", false}});
  EXPECT_EQ(cols.toInts(), (std::vector<int64_t>{1, 0, 0}));
}

TEST_F(ReductionTest, ArgMaxIntegersAndNaN) {
  int64_t big = int64_t(1) << 60;
  EXPECT_EQ(run(OpKind::ArgMax, {ints(DType::I64, {3}, {big, big + 1, big})}).toInts(),
            (std::vector<int64_t>{1}));
  // NaN is the largest value, as in numpy.
  EXPECT_EQ(run(OpKind::ArgMax, {f32({4}, {1, kNaN, 5, kNaN})}).toInts(),
            (std::vector<int64_t>{1}));
  EXPECT_EQ(
      run(OpKind::ArgMax, {f32({4}, {1, kNaN, 5, kNaN})}, {{"select_last_index", true}}).toInts(),
      (std::vector<int64_t>{3}));
}

TEST_F(ReductionTest, ArgMaxOfEmptyAxisIsAnError) {
  EXPECT_TRUE(failed(infer(OpKind::ArgMax, {type(DType::F32, {2, 0})}, {{"axis", int64_t(1)}})));
  EXPECT_EQ(error(), "'argmax' op axis 1 of f32[2,0] is empty");
}

TEST_F(ReductionTest, ArgMaxRejectsBool) {
  EXPECT_TRUE(failed(infer(OpKind::ArgMax, {type(DType::Bool, {2})})));
  EXPECT_EQ(error(), "'argmax' op operand 0 must be a numeric tensor, got bool[2]");
}

//===----------------------------------------------------------------------===//
// softmax, log_softmax
//===----------------------------------------------------------------------===//

TEST_F(ReductionTest, SoftmaxLastAxis) {
  double e1 = std::exp(1.0), e2 = std::exp(2.0), s = 1 + e1 + e2;
  Tensor r = run(OpKind::Softmax, {f32({2, 3}, {0, 1, 2, 5, 5, 5})});
  expectValues(r, {1 / s, e1 / s, e2 / s, 1.0 / 3, 1.0 / 3, 1.0 / 3});
}

TEST_F(ReductionTest, SoftmaxIsStable) {
  expectValues(run(OpKind::Softmax, {f32({2}, {1000, 1000})}), {0.5, 0.5});
  expectValues(run(OpKind::Softmax, {f32({3}, {-kInf, 0, -kInf})}), {0, 1, 0});
  expectValues(run(OpKind::Softmax, {f32({2}, {kNaN, 0})}), {kNaN, kNaN});
}

TEST_F(ReductionTest, SoftmaxOtherAxis) {
  // Along axis 0 of [2,2]: columns [0, ln 3] and [1, 1].
  Tensor r = run(OpKind::Softmax, {f32({2, 2}, {0, 1, std::log(3.0), 1})}, {{"axis", int64_t(0)}});
  expectValues(r, {0.25, 0.5, 0.75, 0.5});
}

TEST_F(ReductionTest, LogSoftmax) {
  double lse = std::log(1 + std::exp(1.0) + std::exp(2.0));
  expectValues(run(OpKind::LogSoftmax, {f32({3}, {0, 1, 2})}), {-lse, 1 - lse, 2 - lse});
  expectValues(run(OpKind::LogSoftmax, {f32({2}, {1000, 0})}), {0, -1000}, 1e-4);
}

TEST_F(ReductionTest, SoftmaxRequiresFloat) {
  EXPECT_TRUE(failed(infer(OpKind::Softmax, {type(DType::I32, {3})})));
  EXPECT_EQ(error(), "'softmax' op operand 0 must be a float tensor, got i32[3]");
}

TEST_F(ReductionTest, LogSoftmaxBadAxis) {
  EXPECT_TRUE(
      failed(infer(OpKind::LogSoftmax, {type(DType::F32, {2, 3})}, {{"axis", int64_t(2)}})));
  EXPECT_EQ(error(), "'log_softmax' op axis 2 is out of range for rank 2");
}

//===----------------------------------------------------------------------===//
// layer_norm, batch_norm
//===----------------------------------------------------------------------===//

TEST_F(ReductionTest, LayerNormLastAxis) {
  // Row [1,2,3]: mean 2, var 2/3.
  double inv = 1 / std::sqrt(2.0 / 3 + 1e-5);
  Tensor r = run(OpKind::LayerNorm, {matrix(), f32({3}, {1, 2, 1}), f32({3}, {0, 0, 10})});
  expectValues(r, {-inv, 0, inv + 10, -inv, 0, inv + 10}, 1e-5);
}

TEST_F(ReductionTest, LayerNormOverTrailingDimsWithBroadcastScale) {
  // axis 0 of [2,2]: all four elements {0, 2, 4, 6}: mean 3, var 5.
  Tensor x = f32({2, 2}, {0, 2, 4, 6});
  double inv = 1 / std::sqrt(5.0);
  Tensor r =
      run(OpKind::LayerNorm, {x, f32({2}, {1, 2})}, {{"axis", int64_t(0)}, {"epsilon", 0.0}});
  expectValues(r, {-3 * inv, -1 * inv * 2, 1 * inv, 3 * inv * 2});
}

TEST_F(ReductionTest, LayerNormScaleMustBroadcast) {
  EXPECT_TRUE(failed(infer(OpKind::LayerNorm, {type(DType::F32, {2, 3}), type(DType::F32, {4})})));
  EXPECT_EQ(error(),
            "'layer_norm' op scale shape [4] does not broadcast to the normalized shape [3]");
}

TEST_F(ReductionTest, LayerNormBiasMustBroadcast) {
  EXPECT_TRUE(failed(infer(OpKind::LayerNorm, {type(DType::F32, {2, 3}), type(DType::F32, {3}),
                                               type(DType::F32, {2, 3})})));
  EXPECT_EQ(error(),
            "'layer_norm' op bias shape [2,3] does not broadcast to the normalized shape [3]");
}

TEST_F(ReductionTest, LayerNormSymbolic) {
  TensorType x(DType::F32, Shape{Dim::symbolic("N"), Dim::symbolic("D")});
  auto t = infer(OpKind::LayerNorm, {x, type(DType::F32, {8})});
  ASSERT_TRUE(t.succeeded()) << collector.str();
  EXPECT_EQ(t->str(), "f32[N,D]");
}

TEST_F(ReductionTest, LayerNormNegativeEpsilon) {
  EXPECT_TRUE(failed(infer(OpKind::LayerNorm, {type(DType::F32, {3}), type(DType::F32, {3})},
                           {{"epsilon", -1.0}})));
  EXPECT_EQ(error(), "'layer_norm' op epsilon must be non-negative, got -1.0");
}

TEST_F(ReductionTest, BatchNorm) {
  // x [1,2,2]; channel 0: (x - 1) / sqrt(4) * 2 + 1; channel 1: (x - 0) / 1 * 1 + 0.
  Tensor x = f32({1, 2, 2}, {1, 3, -1, 5});
  Tensor r = run(OpKind::BatchNorm,
                 {x, f32({2}, {2, 1}), f32({2}, {1, 0}), f32({2}, {1, 0}), f32({2}, {4, 1})},
                 {{"epsilon", 0.0}});
  EXPECT_EQ(r.type(), x.type());
  expectValues(r, {1, 3, -1, 5});
  Tensor withEps = run(OpKind::BatchNorm, {f32({2, 1}, {3, 3}), f32({1}, {1}), f32({1}, {0}),
                                           f32({1}, {0}), f32({1}, {0})});
  expectValues(withEps, {3 / std::sqrt(1e-5), 3 / std::sqrt(1e-5)}, 1e-2);
}

TEST_F(ReductionTest, BatchNormChannelMismatch) {
  TensorType c3 = type(DType::F32, {3}), c4 = type(DType::F32, {4});
  EXPECT_TRUE(failed(infer(OpKind::BatchNorm, {type(DType::F32, {2, 3, 4}), c3, c3, c4, c3})));
  EXPECT_EQ(error(), "'batch_norm' op mean must have shape [3] (the channels of x), got f32[4]");
}

TEST_F(ReductionTest, BatchNormRank) {
  TensorType c = type(DType::F32, {3});
  EXPECT_TRUE(failed(infer(OpKind::BatchNorm, {c, c, c, c, c})));
  EXPECT_EQ(error(), "'batch_norm' op x must have rank at least 2 ([N, C, ...]), got f32[3]");
}

TEST_F(ReductionTest, BatchNormDTypes) {
  TensorType c = type(DType::F16, {3});
  EXPECT_TRUE(failed(infer(OpKind::BatchNorm, {type(DType::F32, {1, 3}), c, c, c, c})));
  EXPECT_EQ(error(), "'batch_norm' op operands must have the same dtype, got f32[1,3] and f16[3]");
}

//===----------------------------------------------------------------------===//
// Type inference of reduce_*
//===----------------------------------------------------------------------===//

TEST_F(ReductionTest, InferKeepsSymbolicDims) {
  TensorType x(DType::F32, Shape{Dim::symbolic("N"), Dim(3), Dim::dynamic()});
  auto kept = infer(OpKind::ReduceMean, {x}, {{"axes", Ints{1}}});
  ASSERT_TRUE(kept.succeeded());
  EXPECT_EQ(kept->str(), "f32[N,1,?]");
  auto dropped = infer(OpKind::ReduceMax, {x}, {{"axes", Ints{-1}}, {"keepdims", false}});
  ASSERT_TRUE(dropped.succeeded());
  EXPECT_EQ(dropped->str(), "f32[N,3]");
}

TEST_F(ReductionTest, InferBadAxis) {
  EXPECT_TRUE(failed(infer(OpKind::ReduceSum, {type(DType::F32, {2, 3})}, {{"axes", Ints{3}}})));
  EXPECT_EQ(error(), "'reduce_sum' op axis 3 is out of range for rank 2");
}

TEST_F(ReductionTest, InferRepeatedAxis) {
  EXPECT_TRUE(
      failed(infer(OpKind::ReduceProd, {type(DType::F32, {2, 3})}, {{"axes", Ints{1, -1}}})));
  EXPECT_EQ(error(), "'reduce_prod' op axis -1 is repeated");
}

TEST_F(ReductionTest, InferReduceRejectsBool) {
  EXPECT_TRUE(failed(infer(OpKind::ReduceMin, {type(DType::Bool, {2})})));
  EXPECT_EQ(error(), "'reduce_min' op operand 0 must be a numeric tensor, got bool[2]");
}

TEST_F(ReductionTest, ParsedArgMaxResultMustBeI64) {
  const char *text = "graph @g(%x: f32[2,3]) -> (f32[2,1]) {\n"
                     "  %0 = argmax(%x) {axis = 1} : f32[2,1]\n"
                     "  return %0\n"
                     "}\n";
  EXPECT_TRUE(failed(parseModule(text, diag)));
  EXPECT_EQ(error(), "[V5] 'argmax' op result 0 has type f32[2,1] but the op infers i64[2,1]");
}
