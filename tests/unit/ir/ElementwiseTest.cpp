//===- ElementwiseTest.cpp - Elementwise op hooks ---------------*- C++ -*-===//
//
// Reference kernels of the elementwise ops against hand-computed values
// (broadcasting, integer dtypes, NaN, rounding ties), and their type
// inference errors through the Builder and the text parser.
//
//===----------------------------------------------------------------------===//
#include "ir/Builder.h"
#include "ir/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>

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
Tensor bools(std::vector<int64_t> shape, std::vector<int64_t> values) {
  return ints(DType::Bool, std::move(shape), std::move(values));
}

/// Runs one op's type inference and reference kernel on concrete tensors,
/// the way the interpreter does, collecting diagnostics.
class ElementwiseTest : public ::testing::Test {
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

TensorType type(DType t, std::vector<int64_t> sizes) {
  return TensorType(t, sizes);
}

/// Expects `t` to be an f32 tensor holding `want` (NaN matches NaN).
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

} // namespace

//===----------------------------------------------------------------------===//
// Broadcasting and arithmetic
//===----------------------------------------------------------------------===//

TEST_F(ElementwiseTest, AddBroadcastsRowAndColumn) {
  Tensor r = run(OpKind::Add, {f32({2, 1}, {10, 20}), f32({3}, {1, 2, 3})});
  EXPECT_EQ(r.type(), type(DType::F32, {2, 3}));
  expectValues(r, {11, 12, 13, 21, 22, 23});
}

TEST_F(ElementwiseTest, AddScalarAndSameShape) {
  expectValues(run(OpKind::Add, {f32({}, {1.5}), f32({2}, {1, 2})}), {2.5, 3.5});
  expectValues(run(OpKind::Add, {f32({2}, {1, 2}), f32({2}, {3, 4})}), {4, 6});
}

TEST_F(ElementwiseTest, AddMiddleBroadcast) {
  // [2,1,2] + [3,1] -> [2,3,2]
  Tensor a = f32({2, 1, 2}, {1, 2, 3, 4});
  Tensor b = f32({3, 1}, {10, 20, 30});
  expectValues(run(OpKind::Add, {a, b}), {11, 12, 21, 22, 31, 32, 13, 14, 23, 24, 33, 34});
}

TEST_F(ElementwiseTest, AddIntegersWrap) {
  Tensor r = run(OpKind::Add, {ints(DType::I8, {2}, {127, -5}), ints(DType::I8, {2}, {1, 3})});
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{-128, -2}));
  Tensor big = run(OpKind::Add, {ints(DType::I64, {1}, {std::numeric_limits<int64_t>::max()}),
                                 ints(DType::I64, {1}, {1})});
  EXPECT_EQ(big.toInts(), (std::vector<int64_t>{std::numeric_limits<int64_t>::min()}));
}

TEST_F(ElementwiseTest, AddF16RoundsToDType) {
  Tensor r = run(OpKind::Add, {Tensor::fromDoubles(DType::F16, {1}, {1.0}),
                               Tensor::fromDoubles(DType::F16, {1}, {0.0001})});
  EXPECT_EQ(r.dtype(), DType::F16);
  EXPECT_EQ(r.getDouble(0), 1.0); // below half an ulp of f16 at 1.0
}

TEST_F(ElementwiseTest, Sub) {
  expectValues(run(OpKind::Sub, {f32({2}, {5, 1}), f32({}, {2})}), {3, -1});
  EXPECT_EQ(run(OpKind::Sub, {ints(DType::U8, {1}, {0}), ints(DType::U8, {1}, {1})}).toInts(),
            (std::vector<int64_t>{255}));
}

TEST_F(ElementwiseTest, Mul) {
  expectValues(run(OpKind::Mul, {f32({3}, {1, -2, kInf}), f32({3}, {4, 0.5, 0})}), {4, -1, kNaN});
  EXPECT_EQ(
      run(OpKind::Mul, {ints(DType::I32, {2}, {-3, 70000}), ints(DType::I32, {2}, {7, 70000})})
          .toInts(),
      (std::vector<int64_t>{-21, 605032704}));
}

TEST_F(ElementwiseTest, DivFloatFollowsIeee) {
  expectValues(run(OpKind::Div, {f32({3}, {1, -1, 0}), f32({3}, {0, 0, 0})}), {kInf, -kInf, kNaN});
  expectValues(run(OpKind::Div, {f32({2}, {1, 7}), f32({2}, {4, -2})}), {0.25, -3.5});
}

TEST_F(ElementwiseTest, DivIntegerTruncatesTowardZero) {
  Tensor r = run(OpKind::Div,
                 {ints(DType::I32, {4}, {7, -7, 7, -7}), ints(DType::I32, {4}, {2, 2, -2, -2})});
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{3, -3, -3, 3}));
  int64_t min = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(run(OpKind::Div, {ints(DType::I64, {1}, {min}), ints(DType::I64, {1}, {-1})}).toInts(),
            (std::vector<int64_t>{min}));
}

TEST_F(ElementwiseTest, DivIntegerByZeroIsAnError) {
  Tensor r = run(OpKind::Div, {ints(DType::I64, {2}, {1, 2}), ints(DType::I64, {2}, {1, 0})});
  EXPECT_TRUE(r.isNull());
  EXPECT_EQ(error(), "'div' op integer division by zero");
}

TEST_F(ElementwiseTest, MaxMinPropagateNaN) {
  expectValues(run(OpKind::Max, {f32({3}, {1, kNaN, 5}), f32({3}, {2, 0, kNaN})}), {2, kNaN, kNaN});
  expectValues(run(OpKind::Min, {f32({3}, {1, kNaN, -kInf}), f32({3}, {2, 0, 0})}),
               {1, kNaN, -kInf});
  EXPECT_EQ(run(OpKind::Max, {ints(DType::I32, {2}, {-4, 9}), ints(DType::I32, {}, {0})}).toInts(),
            (std::vector<int64_t>{0, 9}));
  EXPECT_EQ(run(OpKind::Min, {ints(DType::I32, {2}, {-4, 9}), ints(DType::I32, {}, {0})}).toInts(),
            (std::vector<int64_t>{-4, 0}));
}

TEST_F(ElementwiseTest, Pow) {
  expectValues(run(OpKind::Pow, {f32({4}, {2, 4, -8, 0}), f32({4}, {10, 0.5, 1.0 / 3, 0})}),
               {1024, 2, kNaN, 1});
  Tensor r = run(OpKind::Pow, {ints(DType::I64, {5}, {3, -2, 2, 1, -1}),
                               ints(DType::I64, {5}, {4, 3, -1, -5, -3})});
  EXPECT_EQ(r.toInts(), (std::vector<int64_t>{81, -8, 0, 1, -1}));
}

TEST_F(ElementwiseTest, PowIntegerZeroToNegativeIsAnError) {
  EXPECT_TRUE(run(OpKind::Pow, {ints(DType::I32, {1}, {0}), ints(DType::I32, {1}, {-1})}).isNull());
  EXPECT_EQ(error(), "'pow' op integer 0 raised to a negative power");
}

TEST_F(ElementwiseTest, AbsNegSign) {
  expectValues(run(OpKind::Abs, {f32({3}, {-1.5, 0, 2})}), {1.5, 0, 2});
  EXPECT_EQ(run(OpKind::Abs, {ints(DType::I8, {2}, {-128, -3})}).toInts(),
            (std::vector<int64_t>{-128, 3})); // wraps like the hardware
  expectValues(run(OpKind::Neg, {f32({2}, {1, -2})}), {-1, 2});
  EXPECT_EQ(run(OpKind::Neg, {ints(DType::I32, {2}, {5, -7})}).toInts(),
            (std::vector<int64_t>{-5, 7}));
  expectValues(run(OpKind::Sign, {f32({4}, {-3, 0, 0.1, kNaN})}), {-1, 0, 1, kNaN});
  EXPECT_EQ(run(OpKind::Sign, {ints(DType::I64, {3}, {-9, 0, 4})}).toInts(),
            (std::vector<int64_t>{-1, 0, 1}));
}

TEST_F(ElementwiseTest, ReluAndLeakyRelu) {
  expectValues(run(OpKind::Relu, {f32({4}, {-1, 0, 2, kNaN})}), {0, 0, 2, kNaN});
  EXPECT_EQ(run(OpKind::Relu, {ints(DType::I32, {2}, {-1, 3})}).toInts(),
            (std::vector<int64_t>{0, 3}));
  expectValues(run(OpKind::LeakyRelu, {f32({2}, {-2, 3})}), {-0.02, 3});
  expectValues(run(OpKind::LeakyRelu, {f32({2}, {-2, 3})}, {{"alpha", 0.5}}), {-1, 3});
}

TEST_F(ElementwiseTest, Clip) {
  expectValues(run(OpKind::Clip, {f32({4}, {-1, 0.5, 7, kNaN})}, {{"min", 0.0}, {"max", 6.0}}),
               {0, 0.5, 6, kNaN});
  expectValues(run(OpKind::Clip, {f32({2}, {-kInf, kInf})}), {-kInf, kInf}); // no bounds
  // Integer bounds round inward; min > max gives max everywhere (numpy).
  EXPECT_EQ(run(OpKind::Clip, {ints(DType::I32, {4}, {-5, 1, 2, 9})}, {{"min", -1.5}, {"max", 2.5}})
                .toInts(),
            (std::vector<int64_t>{-1, 1, 2, 2}));
  expectValues(run(OpKind::Clip, {f32({2}, {0, 9})}, {{"min", 5.0}, {"max", 1.0}}), {1, 1});
}

//===----------------------------------------------------------------------===//
// Float math
//===----------------------------------------------------------------------===//

TEST_F(ElementwiseTest, ExpLogSqrtRsqrtReciprocal) {
  expectValues(run(OpKind::Exp, {f32({3}, {0, 1, -kInf})}), {1, std::numbers::e, 0});
  expectValues(run(OpKind::Log, {f32({4}, {1, std::numbers::e, 0, -1})}), {0, 1, -kInf, kNaN});
  expectValues(run(OpKind::Sqrt, {f32({3}, {4, 2, -1})}), {2, std::numbers::sqrt2, kNaN});
  expectValues(run(OpKind::Rsqrt, {f32({2}, {4, 0})}), {0.5, kInf});
  expectValues(run(OpKind::Reciprocal, {f32({3}, {4, -0.5, 0})}), {0.25, -2, kInf});
}

TEST_F(ElementwiseTest, Trigonometry) {
  expectValues(run(OpKind::Sin, {f32({2}, {0, std::numbers::pi / 2})}), {0, 1});
  expectValues(run(OpKind::Cos, {f32({2}, {0, std::numbers::pi})}), {1, -1});
  expectValues(run(OpKind::Tanh, {f32({3}, {0, 100, -100})}), {0, 1, -1});
}

TEST_F(ElementwiseTest, CeilFloor) {
  expectValues(run(OpKind::Ceil, {f32({3}, {-1.5, 1.2, 2})}), {-1, 2, 2});
  expectValues(run(OpKind::Floor, {f32({3}, {-1.5, 1.8, 2})}), {-2, 1, 2});
}

TEST_F(ElementwiseTest, RoundHalfToEven) {
  Tensor r = run(OpKind::Round, {f32({8}, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, -2.6})});
  expectValues(r, {0, 2, 2, 0, -2, -2, 2, -3});
  EXPECT_TRUE(std::signbit(r.getDouble(3))); // round(-0.5) is -0.0
  expectValues(run(OpKind::Round, {f32({2}, {kNaN, kInf})}), {kNaN, kInf});
}

TEST_F(ElementwiseTest, SigmoidIsStable) {
  expectValues(run(OpKind::Sigmoid, {f32({4}, {0, 1000, -1000, 2})}),
               {0.5, 1, 0, 1 / (1 + std::exp(-2.0))});
}

TEST_F(ElementwiseTest, HardSigmoidAndHardSwish) {
  expectValues(run(OpKind::HardSigmoid, {f32({3}, {-10, 0, 1})}), {0, 0.5, 0.7});
  expectValues(run(OpKind::HardSigmoid, {f32({2}, {0, 1})}, {{"alpha", 0.25}, {"beta", 0.25}}),
               {0.25, 0.5});
  expectValues(run(OpKind::HardSwish, {f32({4}, {-4, 0, 1, 4})}), {0, 0, 1.0 * (1.0 / 6 + 0.5), 4});
}

TEST_F(ElementwiseTest, Elu) {
  expectValues(run(OpKind::Elu, {f32({2}, {-1, 2})}), {std::exp(-1.0) - 1, 2});
  expectValues(run(OpKind::Elu, {f32({1}, {-1})}, {{"alpha", 2.0}}), {2 * (std::exp(-1.0) - 1)});
}

TEST_F(ElementwiseTest, Softplus) {
  expectValues(run(OpKind::Softplus, {f32({4}, {0, 1, 1000, -1000})}),
               {std::log(2.0), std::log1p(std::exp(1.0)), 1000, 0});
}

TEST_F(ElementwiseTest, ErfAndGelu) {
  expectValues(run(OpKind::Erf, {f32({3}, {0, 1, -kInf})}), {0, std::erf(1.0), -1});
  expectValues(run(OpKind::Gelu, {f32({3}, {0, 1, -1})}), {0, 0.841344746, -0.158655254});
  expectValues(run(OpKind::Gelu, {f32({2}, {1, -1})}, {{"approximate", std::string("tanh")}}),
               {0.841191990, -0.158808010});
}

TEST_F(ElementwiseTest, GeluRejectsUnknownApproximation) {
  EXPECT_TRUE(
      failed(infer(OpKind::Gelu, {type(DType::F32, {2})}, {{"approximate", std::string("fast")}})));
  EXPECT_EQ(error(), "'gelu' op approximate must be \"none\" or \"tanh\", got \"fast\"");
}

//===----------------------------------------------------------------------===//
// Comparisons, logic, where, cast
//===----------------------------------------------------------------------===//

TEST_F(ElementwiseTest, ComparisonsGiveBool) {
  Tensor a = f32({4}, {1, 2, 3, kNaN}), b = f32({}, {2});
  Tensor eq = run(OpKind::Equal, {a, b});
  EXPECT_EQ(eq.type(), type(DType::Bool, {4}));
  EXPECT_EQ(eq.toInts(), (std::vector<int64_t>{0, 1, 0, 0}));
  EXPECT_EQ(run(OpKind::Less, {a, b}).toInts(), (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_EQ(run(OpKind::Greater, {a, b}).toInts(), (std::vector<int64_t>{0, 0, 1, 0}));
  // i64 values that are equal as doubles but not as integers.
  int64_t big = (int64_t(1) << 60);
  EXPECT_EQ(
      run(OpKind::Equal, {ints(DType::I64, {1}, {big}), ints(DType::I64, {1}, {big + 1})}).toInts(),
      (std::vector<int64_t>{0}));
  EXPECT_EQ(run(OpKind::Equal, {bools({2}, {1, 0}), bools({2}, {1, 1})}).toInts(),
            (std::vector<int64_t>{1, 0}));
}

TEST_F(ElementwiseTest, LogicOps) {
  Tensor a = bools({4}, {0, 0, 1, 1}), b = bools({4}, {0, 1, 0, 1});
  EXPECT_EQ(run(OpKind::And, {a, b}).toInts(), (std::vector<int64_t>{0, 0, 0, 1}));
  EXPECT_EQ(run(OpKind::Or, {a, b}).toInts(), (std::vector<int64_t>{0, 1, 1, 1}));
  Tensor n = run(OpKind::Not, {a});
  EXPECT_EQ(n.type(), type(DType::Bool, {4}));
  EXPECT_EQ(n.toInts(), (std::vector<int64_t>{1, 1, 0, 0}));
}

TEST_F(ElementwiseTest, WhereBroadcastsAllThree) {
  Tensor r = run(OpKind::Where, {bools({2, 1}, {1, 0}), f32({3}, {1, 2, 3}), f32({}, {-1})});
  EXPECT_EQ(r.type(), type(DType::F32, {2, 3}));
  expectValues(r, {1, 2, 3, -1, -1, -1});
  int64_t big = (int64_t(1) << 62) + 1;
  EXPECT_EQ(run(OpKind::Where, {bools({2}, {1, 0}), ints(DType::I64, {2}, {big, 0}),
                                ints(DType::I64, {2}, {0, -big})})
                .toInts(),
            (std::vector<int64_t>{big, -big}));
}

TEST_F(ElementwiseTest, CastConversions) {
  Tensor x = f32({6}, {-1.7, 2.9, 300, kNaN, 0, -0.0});
  EXPECT_EQ(run(OpKind::Cast, {x}, {{"to", DType::I32}}).toInts(),
            (std::vector<int64_t>{-1, 2, 300, 0, 0, 0}));
  EXPECT_EQ(run(OpKind::Cast, {x}, {{"to", DType::U8}}).toInts(),
            (std::vector<int64_t>{0, 2, 255, 0, 0, 0})); // saturating
  Tensor toBool = run(OpKind::Cast, {x}, {{"to", DType::Bool}});
  EXPECT_EQ(toBool.type(), type(DType::Bool, {6}));
  EXPECT_EQ(toBool.toInts(), (std::vector<int64_t>{1, 1, 1, 1, 0, 0}));
  // int -> int wraps; int -> float and bool -> float are exact.
  EXPECT_EQ(run(OpKind::Cast, {ints(DType::I32, {2}, {300, -1})}, {{"to", DType::I8}}).toInts(),
            (std::vector<int64_t>{44, -1}));
  expectValues(run(OpKind::Cast, {ints(DType::I64, {2}, {-3, 7})}, {{"to", DType::F32}}), {-3, 7});
  Tensor f64 = run(OpKind::Cast, {bools({2}, {1, 0})}, {{"to", DType::F64}});
  EXPECT_EQ(f64.dtype(), DType::F64);
  expectValues(f64, {1, 0});
}

TEST_F(ElementwiseTest, EmptyAndScalarTensors) {
  Tensor e = run(OpKind::Add, {f32({0, 3}, {}), f32({3}, {1, 2, 3})});
  EXPECT_EQ(e.type(), type(DType::F32, {0, 3}));
  expectValues(run(OpKind::Exp, {f32({}, {0})}), {1});
}

TEST_F(ElementwiseTest, LargeSameShapeF32IsFast) {
  // The resnet-sized interpreter run depends on this path staying cheap.
  std::vector<double> values(1 << 20, 1.0);
  Tensor x = f32({1 << 20}, values);
  Tensor r = run(OpKind::Add, {x, x});
  ASSERT_FALSE(r.isNull());
  EXPECT_EQ(r.getDouble(12345), 2.0);
}

//===----------------------------------------------------------------------===//
// Type inference
//===----------------------------------------------------------------------===//

TEST_F(ElementwiseTest, InferSymbolicBroadcast) {
  TensorType x(DType::F32, Shape{Dim::symbolic("N"), Dim(1), Dim(4)});
  TensorType y(DType::F32, Shape{Dim(3), Dim(1)});
  auto t = infer(OpKind::Mul, {x, y});
  ASSERT_TRUE(t.succeeded()) << collector.str();
  EXPECT_EQ(t->str(), "f32[N,3,4]");
  TensorType z(DType::F32, Shape{Dim::symbolic("M"), Dim(4)});
  auto u = infer(OpKind::Add, {TensorType(DType::F32, Shape{Dim::symbolic("N")}), z});
  ASSERT_TRUE(u.succeeded());
  EXPECT_EQ(u->str(), "f32[M,4]");
}

TEST_F(ElementwiseTest, InferIncompatibleShapes) {
  EXPECT_TRUE(failed(infer(OpKind::Add, {type(DType::F32, {2, 3}), type(DType::F32, {4})})));
  EXPECT_EQ(error(), "'add' op operands have incompatible shapes [2,3] [4] (dim 1: 3 vs 4)");
}

TEST_F(ElementwiseTest, InferMixedDTypes) {
  EXPECT_TRUE(failed(infer(OpKind::Sub, {type(DType::F32, {2}), type(DType::I32, {2})})));
  EXPECT_EQ(error(), "'sub' op operands must have the same dtype, got f32[2] and i32[2]");
}

TEST_F(ElementwiseTest, InferFloatOnly) {
  EXPECT_TRUE(failed(infer(OpKind::Exp, {type(DType::I64, {2})})));
  EXPECT_EQ(error(), "'exp' op operand 0 must be a float tensor, got i64[2]");
}

TEST_F(ElementwiseTest, InferNumericRejectsBool) {
  EXPECT_TRUE(failed(infer(OpKind::Add, {type(DType::Bool, {2}), type(DType::Bool, {2})})));
  EXPECT_EQ(error(), "'add' op operand 0 must be a numeric tensor, got bool[2]");
}

TEST_F(ElementwiseTest, InferLogicRequiresBool) {
  EXPECT_TRUE(failed(infer(OpKind::Or, {type(DType::Bool, {2}), type(DType::I8, {2})})));
  EXPECT_EQ(error(), "'or' op operand 1 must be a bool tensor, got i8[2]");
}

TEST_F(ElementwiseTest, InferWhere) {
  auto ok = infer(OpKind::Where,
                  {type(DType::Bool, {2, 1}), type(DType::I32, {3}), type(DType::I32, {})});
  ASSERT_TRUE(ok.succeeded());
  EXPECT_EQ(ok->str(), "i32[2,3]");
  EXPECT_TRUE(failed(
      infer(OpKind::Where, {type(DType::F32, {2}), type(DType::F32, {2}), type(DType::F32, {2})})));
  EXPECT_EQ(error(), "'where' op operand 0 must be a bool tensor, got f32[2]");
}

TEST_F(ElementwiseTest, InferWhereBranchDTypes) {
  EXPECT_TRUE(failed(infer(
      OpKind::Where, {type(DType::Bool, {2}), type(DType::F32, {2}), type(DType::F16, {2})})));
  EXPECT_EQ(error(), "'where' op operands 1 and 2 must have the same dtype, got f32[2] and f16[2]");
}

TEST_F(ElementwiseTest, InferCastKeepsShape) {
  TensorType x(DType::F32, Shape{Dim::symbolic("N"), Dim(2)});
  auto t = infer(OpKind::Cast, {x}, {{"to", DType::Bool}});
  ASSERT_TRUE(t.succeeded());
  EXPECT_EQ(t->str(), "bool[N,2]");
}

TEST_F(ElementwiseTest, InferClipRejectsNaNBounds) {
  EXPECT_TRUE(failed(infer(OpKind::Clip, {type(DType::F32, {2})}, {{"min", kNaN}})));
  EXPECT_EQ(error(), "'clip' op bounds must not be nan, got min nan and max inf");
}

TEST_F(ElementwiseTest, InferWrongOperandCount) {
  EXPECT_TRUE(failed(infer(OpKind::Mul, {type(DType::F32, {2})})));
  EXPECT_EQ(error(), "'mul' op expects 2 operands, got 1");
}

TEST_F(ElementwiseTest, ParsedResultTypeMismatch) {
  const char *text = "graph @g(%a: f32[2,3], %b: f32[3]) -> (f32[2,4]) {\n"
                     "  %0 = add(%a, %b) : f32[2,4]\n"
                     "  return %0\n"
                     "}\n";
  EXPECT_TRUE(failed(parseModule(text, diag)));
  EXPECT_EQ(error(), "[V5] 'add' op result 0 has type f32[2,4] but the op infers f32[2,3]");
}

TEST_F(ElementwiseTest, ParsedComparisonOnBoolsIsRejected) {
  const char *text = "graph @g(%a: bool[2]) -> (bool[2]) {\n"
                     "  %0 = less(%a, %a) : bool[2]\n"
                     "  return %0\n"
                     "}\n";
  EXPECT_TRUE(failed(parseModule(text, diag)));
  EXPECT_EQ(error(), "'less' op operand 0 must be a numeric tensor, got bool[2]");
}
