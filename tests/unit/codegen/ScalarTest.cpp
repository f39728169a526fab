//===- ScalarTest.cpp - Scalar semantics against the reference kernels ----===//
//
// For every op of the table with the Elementwise trait, over every dtype its
// type inference accepts, several attribute settings and tricky values (NaN,
// infinities, signed zeros, huge and tiny numbers, integer extremes),
// lowerElementwise + evaluateScalars must give what the op's reference
// kernel gives: bit for bit for ops that are one primitive, within a stated
// number of ulps for the composites (see Note [Scalar precision] in
// ir/ops/Scalar.cpp). NaNs compare equal whatever their payload and sign.
//
// Also unit tests of the ScalarDag itself (structural hashing, folding,
// printing) and of evaluateScalars' primitive semantics.
//
//===----------------------------------------------------------------------===//
#include "ir/Builder.h"
#include "ir/ScalarExpr.h"
#include "tests/unit/OpBounds.h"

#include <gtest/gtest.h>
#include <set>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>

using namespace kiln;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// How close an op's scalar lowering must be to its reference kernel.
struct Tolerance {
  /// Allowed distance in ulps of the result dtype.
  int64_t ulps = 0;
  /// Differences up to this absolute value are accepted too (cancellation
  /// where the reference computes in double and the lowering in f32).
  double abs = 0;
};

/// The scalar lowering's bound (tests/unit/OpBounds.h): exact for one
/// primitive (evaluated in double, as the reference is), else the `ulps`
/// column of ir/Ops.def with its absolute floor.
Tolerance toleranceOf(const OpInfo &info, std::span<const Attribute> attrs,
                      std::span<const DType> operandTypes, DType result) {
  if (kiln::testing::lowersToOnePrimitive(info, attrs, operandTypes, result))
    return {};
  kiln::testing::Bound b = kiln::testing::compiledBound(info, result, false);
  return {b.ulps, b.abs};
}

/// Attribute settings to try for an op (each a list of named attributes).
std::vector<std::vector<NamedAttr>> attrVariants(std::string_view op) {
  if (op == "gelu")
    return {{}, {{"approximate", std::string("tanh")}}};
  if (op == "clip")
    return {{},
            {{"min", -1.0}, {"max", 1.0}},
            {{"min", 0.1}, {"max", 6.0}},
            {{"min", 0.0}},
            {{"min", 2.5}, {"max", -1.5}},
            {{"min", -1000.0}, {"max", 1000.0}},
            {{"min", 300.0}}};
  if (op == "elu")
    return {{}, {{"alpha", 0.3}}};
  if (op == "leaky_relu")
    return {{}, {{"alpha", 0.2}}, {{"alpha", -1.5}}};
  if (op == "hard_sigmoid")
    return {{}, {{"alpha", 1.0 / 6.0}, {"beta", 0.5}}};
  return {{}};
}

std::vector<double> floatValues() {
  std::vector<double> v = {0.0,    -0.0,  1.0,   -1.0,   0.5,   -0.5,    1.5,       -1.5,
                           2.5,    -2.5,  3.0,   -3.0,   6.0,   -6.0,    0.1,       -0.1,
                           1e-5,   -1e-5, 1e-20, -1e-20, 1e-40, -1e-40,  3.1415926, 20.0,
                           -20.0,  30.0,  -30.0, 88.0,   -88.0, 89.0,    -104.0,    100.0,
                           -100.0, 1e10,  -1e10, 3e38,   -3e38, 65504.0, -65504.0,  70000.0,
                           kInf,   -kInf, kNaN,  -kNaN,  0.75,  2.0,     -2.0,      4.5};
  std::mt19937 rng(42);
  std::normal_distribution<double> normal(0.0, 3.0);
  for (int i = 0; i < 64; ++i)
    v.push_back(normal(rng));
  return v;
}

std::vector<int64_t> intValues() {
  return {0,
          1,
          -1,
          2,
          -2,
          3,
          7,
          -7,
          10,
          100,
          -100,
          127,
          -128,
          255,
          1000,
          -1000,
          std::numeric_limits<int32_t>::max(),
          std::numeric_limits<int32_t>::min(),
          std::numeric_limits<int64_t>::max(),
          std::numeric_limits<int64_t>::min(),
          int64_t(1) << 40};
}

/// The values of `dtype` to feed an operand: doubles stored with setDouble
/// or ints with setInt, so they are exactly what a tensor can hold.
Tensor valuesOf(DType t) {
  if (t == DType::Bool)
    return Tensor::fromInts(t, {2}, {0, 1});
  if (isFloat(t)) {
    std::vector<double> v = floatValues();
    return Tensor::fromDoubles(t, {static_cast<int64_t>(v.size())}, v);
  }
  std::vector<int64_t> v = intValues();
  return Tensor::fromInts(t, {static_cast<int64_t>(v.size())}, v);
}

/// Ulp distance between two values of float dtype `t` (both finite or
/// equal infinities); NaN vs non-NaN is infinitely far.
int64_t ulpDistance(DType t, double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b) ? 0 : std::numeric_limits<int64_t>::max();
  if (a == b)
    return 0;
  if (t == DType::F64) {
    auto x = std::bit_cast<int64_t>(a), y = std::bit_cast<int64_t>(b);
    // Map the sign-magnitude bits to a monotonic integer line.
    auto line = [](int64_t v) { return v < 0 ? std::numeric_limits<int64_t>::min() - v : v; };
    __int128 d = static_cast<__int128>(line(x)) - line(y);
    d = d < 0 ? -d : d;
    return d > std::numeric_limits<int64_t>::max() ? std::numeric_limits<int64_t>::max()
                                                   : static_cast<int64_t>(d);
  }
  // f32, f16 and bf16 values are all exact floats; count in their own grid.
  auto bitsOf = [&](double v) -> int64_t {
    auto f = static_cast<float>(v);
    if (t == DType::F16)
      return floatToHalf(f);
    if (t == DType::BF16)
      return floatToBf16(f);
    return std::bit_cast<uint32_t>(f);
  };
  int64_t signBit = t == DType::F32 ? int64_t(1) << 31 : int64_t(1) << 15;
  int64_t x = bitsOf(a), y = bitsOf(b);
  int64_t ox = x & signBit ? -(x & (signBit - 1)) : x;
  int64_t oy = y & signBit ? -(y & (signBit - 1)) : y;
  return ox > oy ? ox - oy : oy - ox;
}

struct Case {
  const OpInfo *info;
  std::vector<Attribute> attrs;
  std::vector<DType> operandTypes;
  DType resultType;
  std::string label;
};

/// Every (dtype, attributes) combination an op's type inference accepts.
std::vector<Case> casesFor(const OpInfo &info) {
  std::vector<Case> cases;
  DiagnosticEngine diag;
  ScopedDiagnosticCollector quiet(diag);
  std::vector<DType> all;
  for (unsigned i = 0; i < kNumDTypes; ++i)
    all.push_back(static_cast<DType>(i));
  for (const std::vector<NamedAttr> &named : attrVariants(info.mnemonic)) {
    std::vector<std::vector<NamedAttr>> variants;
    if (info.kind == OpKind::Cast) {
      for (DType to : all) {
        std::vector<NamedAttr> v = named;
        v.push_back({"to", to});
        variants.push_back(v);
      }
    } else {
      variants.push_back(named);
    }
    for (const std::vector<NamedAttr> &v : variants) {
      auto attrs = buildAttrs(info, v, Location(), diag);
      if (failed(attrs))
        continue;
      for (DType t : all) {
        std::vector<DType> operandTypes(static_cast<size_t>(info.minOperands), t);
        if (info.kind == OpKind::Where)
          operandTypes[0] = DType::Bool;
        std::vector<TensorType> types;
        for (DType ot : operandTypes)
          types.emplace_back(ot, std::vector<int64_t>{1});
        auto rt = inferTypes(info, types, *attrs, 1, Location(), diag);
        if (failed(rt))
          continue;
        std::string label = std::string(info.mnemonic) + " " + std::string(dtypeName(t));
        for (const NamedAttr &a : v)
          label += " " + a.first + "=" + attrStr(a.second);
        cases.push_back({&info, *attrs, operandTypes, (*rt)[0].dtype, label});
      }
    }
  }
  return cases;
}

/// Runs one case over all value combinations; returns the worst ulp
/// distance seen (failing the test on larger ones) and counts compared
/// elements.
void runCase(const Case &c, int64_t &worst, int64_t &compared) {
  const Tolerance tol = toleranceOf(*c.info, c.attrs, c.operandTypes, c.resultType);
  size_t arity = c.operandTypes.size();
  std::vector<Tensor> pools;
  for (DType t : c.operandTypes)
    pools.push_back(valuesOf(t));
  // Unary: every value; binary: every pair; ternary (where): every pair of
  // the value operands under both conditions.
  std::vector<std::vector<int64_t>> picks;
  if (arity == 1) {
    for (int64_t i = 0; i < pools[0].numel(); ++i)
      picks.push_back({i});
  } else if (arity == 2) {
    for (int64_t i = 0; i < pools[0].numel(); ++i)
      for (int64_t j = 0; j < pools[1].numel(); ++j)
        picks.push_back({i, j});
  } else {
    for (int64_t k = 0; k < 2; ++k)
      for (int64_t i = 0; i < pools[1].numel(); i += 3)
        for (int64_t j = 0; j < pools[2].numel(); j += 5)
          picks.push_back({k, i, j});
  }

  DiagnosticEngine diag;
  ScopedDiagnosticCollector quiet(diag);
  ScalarDag dag;
  std::vector<ScalarRef> operands;
  for (size_t k = 0; k < arity; ++k)
    operands.push_back(
        dag.load(c.operandTypes[k], static_cast<int32_t>(k), dag.constInt(DType::I64, 0)));
  auto result = lowerElementwise(*c.info, c.attrs, operands, c.resultType, dag, Location(), diag);
  ASSERT_TRUE(result.succeeded()) << c.label << ": " << quiet.str();
  ASSERT_EQ(dag.type(*result), c.resultType) << c.label;

  std::vector<TensorType> operandTypes;
  for (DType t : c.operandTypes)
    operandTypes.emplace_back(t, std::vector<int64_t>{});
  std::vector<TensorType> resultTypes{TensorType(c.resultType, std::vector<int64_t>{})};
  OpContext ctx{*c.info, operandTypes, c.attrs, 1, Location(), diag};

  int failures = 0;
  for (const std::vector<int64_t> &pick : picks) {
    std::vector<Tensor> inputs;
    for (size_t k = 0; k < arity; ++k) {
      Tensor t = Tensor::zeros(c.operandTypes[k], {});
      std::memcpy(t.mutableRawData(),
                  static_cast<const char *>(pools[k].rawData()) +
                      static_cast<size_t>(pick[k]) * dtypeSize(c.operandTypes[k]),
                  dtypeSize(c.operandTypes[k]));
      inputs.push_back(t);
    }
    auto ref = c.info->reference(ctx, inputs, resultTypes);
    if (failed(ref))
      continue; // integer division by zero, 0 to a negative power: errors
    const Tensor &want = (*ref)[0];
    auto vals = evaluateScalars(dag, [&](const ScalarNode &n, const std::vector<ScalarValue> &) {
      ScalarValue v;
      const Tensor &in = inputs[static_cast<size_t>(n.slot)];
      if (isFloat(in.dtype()))
        v.f = in.getDouble(0);
      else
        v.i = in.getInt(0);
      return v;
    });
    const ScalarValue &got = vals[static_cast<size_t>(result->id)];
    ++compared;
    std::string where;
    for (size_t k = 0; k < arity; ++k)
      where += (k ? ", " : "") + std::to_string(inputs[k].getDouble(0));
    if (!isFloat(c.resultType)) {
      if (got.i != want.getInt(0) && failures++ < 5)
        ADD_FAILURE() << c.label << " at (" << where << "): got " << got.i << ", want "
                      << want.getInt(0);
      continue;
    }
    double w = want.getDouble(0), g = got.f;
    int64_t d = ulpDistance(c.resultType, g, w);
    bool closeAbs = !std::isnan(g) && !std::isnan(w) && std::fabs(g - w) <= tol.abs;
    if (!closeAbs)
      worst = std::max(worst, d);
    if (d > tol.ulps && !closeAbs && failures++ < 5)
      ADD_FAILURE() << c.label << " at (" << where << "): got " << g << ", want " << w << " (" << d
                    << " ulps, allowed " << tol.ulps << ")";
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Every elementwise op against its reference kernel
//===----------------------------------------------------------------------===//

TEST(ScalarSemanticsTest, EveryElementwiseOpMatchesItsReferenceKernel) {
  int ops = 0;
  for (const OpInfo &info : allOps()) {
    if (!info.hasTrait(Elementwise))
      continue;
    ++ops;
    EXPECT_GE(info.ulps, 0) << "elementwise op '" << info.mnemonic
                            << "' needs an ulp bound in the ulps column of ir/Ops.def";
    std::vector<Case> cases = casesFor(info);
    EXPECT_FALSE(cases.empty()) << "no dtype accepted by '" << info.mnemonic << "'";
    int64_t worst = 0, compared = 0;
    for (const Case &c : cases)
      runCase(c, worst, compared);
    EXPECT_GT(compared, 0) << info.mnemonic;
    // The worst distance seen, for the record (see the tolerance table).
    RecordProperty(std::string(info.mnemonic) + "_worst_ulps", std::to_string(worst));
    if (info.ulps > 0)
      std::printf("[ scalar   ] %-13s worst %lld ulps over %lld values\n",
                  std::string(info.mnemonic).c_str(), static_cast<long long>(worst),
                  static_cast<long long>(compared));
  }
  EXPECT_GT(ops, 0);
}

TEST(ScalarSemanticsTest, NonElementwiseOpIsAnError) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  ScalarDag dag;
  ScalarRef x = dag.load(DType::F32, 0, dag.constInt(DType::I64, 0));
  ScalarRef ops[] = {x};
  auto r = lowerElementwise(opInfo(OpKind::Softmax), opInfo(OpKind::Softmax).defaults, ops,
                            DType::F32, dag, Location::name("sm"), diag);
  EXPECT_TRUE(failed(r));
  EXPECT_NE(collect.str().find("'softmax' op is not elementwise"), std::string::npos)
      << collect.str();
}

//===----------------------------------------------------------------------===//
// ScalarDag
//===----------------------------------------------------------------------===//

TEST(ScalarDagTest, StructuralHashingCreatesEachNodeOnce) {
  ScalarDag dag;
  ScalarRef i = dag.index(0);
  ScalarRef a = dag.load(DType::F32, 0, i);
  ScalarRef b = dag.load(DType::F32, 0, dag.index(0));
  EXPECT_EQ(a, b);
  ScalarRef e1 = dag.unary(ScalarOp::Exp, a);
  ScalarRef e2 = dag.unary(ScalarOp::Exp, b);
  EXPECT_EQ(e1, e2);
  EXPECT_EQ(dag.nodes().size(), 3u);
  // Signed zeros and NaN constants are distinct by bits, not by ==.
  EXPECT_NE(dag.constFloat(DType::F32, 0.0), dag.constFloat(DType::F32, -0.0));
  EXPECT_EQ(dag.constFloat(DType::F32, kNaN), dag.constFloat(DType::F32, kNaN));
}

TEST(ScalarDagTest, ConstantsAreRoundedToTheirType) {
  ScalarDag dag;
  EXPECT_EQ(dag.node(dag.constFloat(DType::F32, 0.1)).fvalue, static_cast<double>(0.1f));
  EXPECT_EQ(dag.node(dag.constInt(DType::I8, 300)).ivalue, 44);
  EXPECT_EQ(dag.node(dag.constant(DType::I8, 300.7)).ivalue, 127); // saturates
  EXPECT_EQ(dag.node(dag.constant(DType::Bool, 0.5)).ivalue, 1);
  EXPECT_EQ(dag.constFloat(DType::F32, 0.1), dag.constFloat(DType::F32, static_cast<float>(0.1)));
}

TEST(ScalarDagTest, IndexArithmeticFoldsConstantsAndIdentities) {
  ScalarDag dag;
  ScalarRef i = dag.index(1);
  ScalarRef zero = dag.constInt(DType::I64, 0), one = dag.constInt(DType::I64, 1);
  EXPECT_EQ(dag.add(i, zero), i);
  EXPECT_EQ(dag.mul(i, one), i);
  EXPECT_EQ(dag.div(i, one), i);
  EXPECT_EQ(dag.node(dag.mul(i, zero)).ivalue, 0);
  ScalarRef six = dag.mul(dag.constInt(DType::I64, 2), dag.constInt(DType::I64, 3));
  EXPECT_EQ(dag.node(six).op, ScalarOp::ConstInt);
  EXPECT_EQ(dag.node(six).ivalue, 6);
  EXPECT_EQ(dag.node(dag.binary(ScalarOp::Rem, i, one)).ivalue, 0);
  // Casts to the same type and selects with equal arms disappear.
  EXPECT_EQ(dag.cast(i, DType::I64), i);
  ScalarRef c = dag.compare(ScalarOp::Lt, i, six);
  EXPECT_EQ(dag.select(c, i, i), i);
  EXPECT_EQ(dag.select(dag.constInt(DType::Bool, 1), i, six), i);
}

TEST(ScalarDagTest, PrintsOneLinePerNode) {
  ScalarDag dag;
  ScalarRef x = dag.load(DType::F32, 2, dag.index(0));
  ScalarRef e = dag.unary(ScalarOp::Exp, x);
  dag.add(e, dag.constFloat(DType::F32, 1.0));
  EXPECT_EQ(dag.str(), "%0 = index i64 #0\n"
                       "%1 = load f32 #2[%0]\n"
                       "%2 = exp f32 %1\n"
                       "%3 = constf f32 1.0\n"
                       "%4 = add f32 %2, %3\n");
}

TEST(ScalarDagTest, EveryPrimitiveHasANameAndArity) {
  std::set<std::string> names;
  for (unsigned op = 0; op < kNumScalarOps; ++op) {
    auto s = static_cast<ScalarOp>(op);
    EXPECT_TRUE(names.insert(scalarOpName(s)).second) << "duplicate name " << scalarOpName(s);
    unsigned want = 0;
    switch (scalarClass(s)) {
    case ScalarClass::Leaf:
      want = s == ScalarOp::Load ? 1 : 0;
      break;
    case ScalarClass::Binary:
    case ScalarClass::BoolBinary:
    case ScalarClass::IntBinary:
    case ScalarClass::Compare:
      want = 2;
      break;
    case ScalarClass::Select:
      want = 3;
      break;
    default:
      want = 1;
    }
    EXPECT_EQ(scalarArity(s), want) << scalarOpName(s) << ": arity and class disagree";
  }
}

//===----------------------------------------------------------------------===//
// evaluateScalars: the primitives' edge cases
//===----------------------------------------------------------------------===//

namespace {

/// Evaluates `op` on constants of type `t`.
ScalarValue evalBinary(ScalarOp op, DType t, double a, double b) {
  ScalarDag dag;
  ScalarRef r = dag.binary(op, dag.constant(t, a), dag.constant(t, b));
  return evaluateScalars(dag, [](const ScalarNode &, const auto &) {
    return ScalarValue{};
  })[static_cast<size_t>(r.id)];
}

ScalarValue evalCast(DType from, DType to, double v) {
  ScalarDag dag;
  ScalarRef r = dag.cast(dag.constant(from, v), to);
  return evaluateScalars(dag, [](const ScalarNode &, const auto &) {
    return ScalarValue{};
  })[static_cast<size_t>(r.id)];
}

} // namespace

TEST(EvaluateScalarsTest, IntegerDivisionTruncatesAndNeverTraps) {
  EXPECT_EQ(evalBinary(ScalarOp::Div, DType::I32, -7, 2).i, -3);
  EXPECT_EQ(evalBinary(ScalarOp::Rem, DType::I32, -7, 2).i, -1);
  EXPECT_EQ(evalBinary(ScalarOp::Div, DType::I32, 5, 0).i, 0);
  EXPECT_EQ(evalBinary(ScalarOp::Div, DType::I8, -128, -1).i, -128);
  ScalarDag dag;
  ScalarRef r = dag.div(dag.constInt(DType::I64, std::numeric_limits<int64_t>::min()),
                        dag.constInt(DType::I64, -1));
  EXPECT_EQ(dag.node(r).ivalue, std::numeric_limits<int64_t>::min());
}

TEST(EvaluateScalarsTest, IntegerArithmeticWrapsToTheWidth) {
  EXPECT_EQ(evalBinary(ScalarOp::Add, DType::I8, 127, 1).i, -128);
  EXPECT_EQ(evalBinary(ScalarOp::Sub, DType::U8, 0, 1).i, 255);
  EXPECT_EQ(evalBinary(ScalarOp::Mul, DType::I32, 65536, 65536).i, 0);
  EXPECT_EQ(evalBinary(ScalarOp::Pow, DType::I32, 3, 4).i, 81);
  EXPECT_EQ(evalBinary(ScalarOp::Pow, DType::I32, -1, -3).i, -1);
  EXPECT_EQ(evalBinary(ScalarOp::Pow, DType::I32, 2, -1).i, 0);
}

TEST(EvaluateScalarsTest, FloatMaxMinPropagateNaNAndKeepTheFirstOnTies) {
  EXPECT_TRUE(std::isnan(evalBinary(ScalarOp::Max, DType::F32, kNaN, 1).f));
  EXPECT_TRUE(std::isnan(evalBinary(ScalarOp::Min, DType::F32, 1, kNaN).f));
  EXPECT_TRUE(std::signbit(evalBinary(ScalarOp::Max, DType::F32, -0.0, 0.0).f));
  EXPECT_FALSE(std::signbit(evalBinary(ScalarOp::Max, DType::F32, 0.0, -0.0).f));
  EXPECT_EQ(evalBinary(ScalarOp::Max, DType::F32, 2, 3).f, 3);
}

TEST(EvaluateScalarsTest, FloatNodesRoundToTheirDType) {
  // 1 + 2^-30 is not an f32.
  EXPECT_EQ(evalBinary(ScalarOp::Add, DType::F32, 1, std::ldexp(1.0, -30)).f, 1.0);
  EXPECT_EQ(evalBinary(ScalarOp::Add, DType::F64, 1, std::ldexp(1.0, -30)).f,
            1 + std::ldexp(1.0, -30));
  // f16 overflows to inf above 65504 (+ half an ulp).
  EXPECT_EQ(evalBinary(ScalarOp::Add, DType::F16, 65504, 32).f, kInf);
}

TEST(EvaluateScalarsTest, CastsSaturateTruncateAndTestForZero) {
  EXPECT_EQ(evalCast(DType::F32, DType::I8, 300.5).i, 127);
  EXPECT_EQ(evalCast(DType::F32, DType::I8, -2.9).i, -2);
  EXPECT_EQ(evalCast(DType::F32, DType::I32, kNaN).i, 0);
  EXPECT_EQ(evalCast(DType::F32, DType::U8, -5).i, 0);
  EXPECT_EQ(evalCast(DType::F32, DType::Bool, kNaN).i, 1);
  EXPECT_EQ(evalCast(DType::F32, DType::Bool, -0.0).i, 0);
  EXPECT_EQ(evalCast(DType::I32, DType::I8, 200).i, -56);
  EXPECT_EQ(evalCast(DType::I64, DType::F32, 16777217).f, 16777216.0);
  EXPECT_EQ(evalCast(DType::Bool, DType::F32, 1).f, 1.0);
}

TEST(EvaluateScalarsTest, LeavesComeFromTheCallback) {
  ScalarDag dag;
  ScalarRef i = dag.index(0);
  ScalarRef x = dag.load(DType::F32, 0, dag.mul(i, dag.constInt(DType::I64, 2)));
  ScalarRef s = dag.stageValue(DType::F32, 0);
  ScalarRef r = dag.add(x, s);
  std::vector<float> buf = {1, 2, 3, 4, 5};
  auto vals = evaluateScalars(dag, [&](const ScalarNode &n, const std::vector<ScalarValue> &v) {
    ScalarValue out;
    if (n.op == ScalarOp::Index)
      out.i = 2;
    else if (n.op == ScalarOp::Load)
      out.f = buf[static_cast<size_t>(v[static_cast<size_t>(n.args[0].id)].i)];
    else
      out.f = 0.25;
    return out;
  });
  EXPECT_EQ(vals[static_cast<size_t>(r.id)].f, 5.25);
}
