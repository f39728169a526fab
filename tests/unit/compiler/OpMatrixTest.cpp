//===- OpMatrixTest.cpp - Every op compiled against the interpreter --------===//
//
// The differential matrix of issue 10, generated from the op table: every
// op with the Elementwise, Reduction or Normalization trait, over every
// dtype its type inference accepts, compiled (codegen::compile, for the CPU
// named by $KILN_TEST_CPU, default native; ctest runs this binary at native,
// haswell and x86-64) and compared with the reference interpreter within the
// op's `ulps` column of ir/Ops.def:
//
//   sizes    1 3 7 8 15 16 17 31 32 33 63 64 65 1000 4099 along the
//            innermost dim (vector bodies, remainders, both), 3 rows outside
//   forms    elementwise binary ops: same shape, scalar constant, scalar
//            input, row, column, column x row, scalar on the left; unary:
//            same shape; where: same shape and row/scalar branches
//   values   negative, +-0, subnormal, |x| up to 1e30, NaN, +-inf (floats);
//            the dtype's extremes (integers); random in between
//
// One graph per (op, dtype, attributes) holds every size and form, so one
// compile covers them all. Each compiled graph also goes through a `.kiln`
// artifact (ArtifactRoundTrip.h) and must give the same bits. A new op with one of these traits is
// covered without touching this file; an elementwise op without a bound fails.
//
// Every other op (data movement, windows, GEMM, constants) needs attributes
// that no default gives (shapes, pads, kernels): structuredCases() has one
// generator per mnemonic, over the same sizes, f32, and the matrix fails
// for an op of the table that has none. Data movement is exact over the
// special values; library ops (ulps -1) get values in [-1, 1) and a
// tolerance of 1e-4 of the output's magnitude (their blocked sums reorder).
// An op whose result has a dim only the run decides (nonzero) is refused
// by compile() at the node (StructuredCase::refusal) and compiled in stages
// (Note [Data-dependent shapes] in codegen/Staged.cpp), one stage per node.
//
//===----------------------------------------------------------------------===//
#include "tests/unit/compiler/OpMatrix.h"
#include "codegen/Compiler.h"
#include "codegen/Staged.h"
#include "codegen/cpu/CpuTarget.h"
#include "codegen/cpu/dnnl/OneDnnSteps.h"
#include "ir/Builder.h"
#include "ir/Compare.h"
#include "ir/Interpreter.h"
#include "ir/Parser.h"
#include "runtime/dnnl/AttentionStep.h"
#include "runtime/dnnl/RecurrentStep.h"
#include "tests/unit/OpBounds.h"
#include "tests/unit/compiler/ArtifactRoundTrip.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>

using namespace kiln;
using namespace kiln::codegen;

namespace kiln::testing {

std::string testCpu() {
  const char *cpu = std::getenv("KILN_TEST_CPU");
  return cpu && *cpu ? cpu : "native";
}

std::string targetRefusal() {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector why(diag);
  if (failed(kiln::codegen::cpu::resolveCpuTarget(testCpu(), diag)))
    return "--cpu " + testCpu() + " does not run on this machine: " + why.str();
  return "";
}

std::optional<std::vector<Tensor>> compileAndRun(const Graph &g, const std::vector<Tensor> &inputs,
                                                 const std::string &label, CompileOptions opts,
                                                 CompileReport *report) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  opts.cpu = testCpu();
  opts.threads = 1;
  opts.cache = false;
  auto exe = compile(g, opts, diag, report);
  if (failed(exe)) {
    ADD_FAILURE() << label << ": " << collect.str();
    return std::nullopt;
  }
  auto got = runCompiled(**exe, inputs, diag);
  if (failed(got)) {
    ADD_FAILURE() << label << ": " << collect.str();
    return std::nullopt;
  }
  kiln::testing::expectArtifactRoundTrip(**exe, inputs, *got, label);
  return got.take();
}

} // namespace kiln::testing

namespace {

using namespace kiln::testing;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
const int64_t kSizes[] = {1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000, 4099};
constexpr int64_t kRows = 3;

/// Interesting values of a float dtype, and random ones around them.
double floatValue(std::mt19937 &rng) {
  static const double special[] = {0.0,    -0.0,   1.0,   -1.0,  0.5,  -2.5,  3.0,  1e-40,
                                   -1e-40, 1e-310, 1e30,  -1e30, 1e10, -88.0, 88.0, 100.0,
                                   kNaN,   kInf,   -kInf, 65504, 1e-5, 2.0,   -0.75};
  if (rng() % 4 == 0)
    return special[rng() % std::size(special)];
  std::normal_distribution<double> normal(0.0, 3.0);
  return normal(rng);
}

int64_t intValue(DType t, std::mt19937 &rng) {
  const int64_t lo = intLowest(t), hi = intHighest(t);
  if (t == DType::Bool)
    return static_cast<int64_t>(rng() % 2);
  int64_t special[] = {0, 1, -1, 2, -7, 100, lo, hi, lo + 1, hi - 1};
  int64_t v = rng() % 3 == 0 ? special[rng() % std::size(special)]
                             : static_cast<int64_t>(rng() % 201) - 100;
  return std::clamp(v, lo, hi);
}

/// Operand `k` of `op` must stay where the reference kernel is defined
/// (integer division by zero and negative integer powers are errors).
bool needsSafeIntegers(const OpInfo &op, size_t k) {
  return k == 1 && (op.kind == OpKind::Div || op.kind == OpKind::Pow);
}

Tensor fill(DType t, const std::vector<int64_t> &shape, std::mt19937 &rng, bool safeInts) {
  Tensor x = Tensor::zeros(t, shape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (isFloat(t))
      x.setDouble(i, floatValue(rng));
    else if (safeInts)
      x.setInt(i, static_cast<int64_t>(rng() % 4) + 1);
    else
      x.setInt(i, intValue(t, rng));
  }
  return x;
}

/// One (shape per operand, which are constants) broadcast form.
struct Form {
  const char *name;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<bool> constant;
};

std::vector<Form> formsFor(const OpInfo &op, int64_t n, bool allForms) {
  std::vector<int64_t> full{kRows, n}, row{n}, col{kRows, 1}, scalar{}, lrow{1, n};
  if (op.minOperands == 1)
    return {{"same", {full}, {false}}};
  if (op.minOperands == 3)
    return {{"same", {full, full, full}, {false, false, false}},
            {"row-scalar", {full, row, scalar}, {false, false, true}}};
  std::vector<Form> forms = {{"same", {full, full}, {false, false}},
                             {"scalar-constant", {full, scalar}, {false, true}}};
  if (allForms) {
    forms.push_back({"scalar-input", {full, scalar}, {false, false}});
    forms.push_back({"row", {full, row}, {false, false}});
    forms.push_back({"column", {full, col}, {false, false}});
    forms.push_back({"column-row", {col, lrow}, {false, false}});
    forms.push_back({"scalar-left", {scalar, full}, {true, false}});
  }
  return forms;
}

/// Distance in ulps of dtype `t` (f32 grid for f32/f16/bf16 counts in their
/// own grid through float bits; f64 in double bits).
double ulpDistance(DType t, double a, double b) {
  if (t == DType::F64) {
    auto key = [](double v) {
      int64_t bits = std::bit_cast<int64_t>(v);
      return bits < 0 ? std::numeric_limits<int64_t>::min() - bits : bits;
    };
    int64_t ka = key(a), kb = key(b);
    // In unsigned arithmetic: the keys are near 2^62, beyond double's 53 bits.
    uint64_t d = ka > kb ? static_cast<uint64_t>(ka) - static_cast<uint64_t>(kb)
                         : static_cast<uint64_t>(kb) - static_cast<uint64_t>(ka);
    return static_cast<double>(d);
  }
  auto key = [](float v) {
    int32_t bits = std::bit_cast<int32_t>(v);
    return bits < 0 ? static_cast<int64_t>(std::numeric_limits<int32_t>::min()) - bits
                    : static_cast<int64_t>(bits);
  };
  double d =
      std::fabs(static_cast<double>(key(static_cast<float>(a)) - key(static_cast<float>(b))));
  // f16 and bf16 values are f32 values with 13 and 16 low mantissa bits 0.
  if (t == DType::F16)
    d /= 8192;
  else if (t == DType::BF16)
    d /= 65536;
  return d;
}

using kiln::testing::halfUlpOfOne;

double ulpOf(DType t, double v) {
  v = std::fabs(v);
  if (v == 0 || !std::isfinite(v))
    return 2 * halfUlpOfOne(t);
  int e = std::ilogb(v);
  return std::ldexp(2 * halfUlpOfOne(t), e);
}

/// Empty when `got` is within the op's bound of `want`, else the first
/// element outside it.
std::string compare(const OpInfo &op, const Tensor &got, const Tensor &want,
                    bool onePrimitive = false) {
  const kiln::testing::Bound bound = kiln::testing::compiledBound(op, want.dtype(), onePrimitive);
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return "type " + got.str() + " vs " + want.str();
  DType t = want.dtype();
  double scale = 0;
  if (!op.hasTrait(Elementwise))
    for (int64_t i = 0; i < want.numel(); ++i)
      if (std::isfinite(want.getDouble(i)))
        scale = std::max(scale, std::fabs(want.getDouble(i)));
  for (int64_t i = 0; i < want.numel(); ++i) {
    bool ok;
    if (!isFloat(t)) {
      ok = got.getInt(i) == want.getInt(i);
    } else {
      double g = got.getDouble(i), w = want.getDouble(i);
      if (std::isnan(g) || std::isnan(w))
        ok = std::isnan(g) && std::isnan(w);
      else if (g == w) // signed zeros too, where the op is exact
        ok = op.ulps != 0 || g != 0 || std::signbit(g) == std::signbit(w);
      else if (std::isinf(g) || std::isinf(w))
        ok = false;
      else if (op.hasTrait(Elementwise))
        ok = ulpDistance(t, g, w) <= static_cast<double>(bound.ulps) ||
             std::fabs(g - w) <= bound.abs;
      else
        ok = std::fabs(g - w) <= op.ulps * ulpOf(t, scale);
    }
    if (!ok) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "element %lld: got %.17g, want %.17g (bound %d ulps)",
                    static_cast<long long>(i), got.getDouble(i), want.getDouble(i), op.ulps);
      return buf;
    }
  }
  return "";
}

using Built = kiln::testing::MatrixCase;

/// Attribute settings of an op in the matrix: the defaults, `to` over every
/// dtype for cast, the innermost axis for reductions and normalizations.
} // namespace

std::vector<std::vector<NamedAttr>> kiln::testing::attrVariants(const OpInfo &op) {
  if (op.kind == OpKind::Clip)
    return {{}, {{"min", -1.0}, {"max", 1.0}}, {{"min", 0.0}, {"max", 6.0}}};
  if (op.kind == OpKind::Gelu)
    return {{}, {{"approximate", std::string("tanh")}}};
  if (op.kind == OpKind::LeakyRelu || op.kind == OpKind::Elu)
    return {{}, {{"alpha", 0.3}}};
  if (op.kind == OpKind::Cast) {
    std::vector<std::vector<NamedAttr>> v;
    for (unsigned i = 0; i < kNumDTypes; ++i)
      v.push_back({{"to", static_cast<DType>(i)}});
    return v;
  }
  for (const AttrSpec &a : op.attrs) {
    if (std::string_view(a.name) == "axes")
      return {{{"axes", std::vector<int64_t>{1}}}};
    if (std::string_view(a.name) == "axis")
      return {{{"axis", int64_t(1)}}};
  }
  return {{}};
}

/// The graph of one (op, dtype, attributes) case with every size and form;
/// nullopt when the op's type inference refuses the dtype.
std::optional<Built> kiln::testing::buildMatrixCase(const OpInfo &op, DType t,
                                                    const std::vector<NamedAttr> &attrs,
                                                    unsigned seed,
                                                    const std::vector<int64_t> &onlySizes) {
  Built b;
  b.graph = std::make_unique<Graph>("matrix");
  DiagnosticEngine diag;
  ScopedDiagnosticCollector quiet(diag);
  Builder builder(*b.graph, diag);
  std::mt19937 rng(seed);
  std::vector<Value *> outs;
  const bool allForms = t == DType::F32;
  for (int64_t n : kSizes) {
    if (!allForms && n != 1 && n != 7 && n != 16 && n != 17 && n != 65 && n != 4099)
      continue;
    if (!onlySizes.empty() && std::find(onlySizes.begin(), onlySizes.end(), n) == onlySizes.end())
      continue;
    std::vector<Form> forms;
    if (op.hasTrait(Elementwise)) {
      forms = formsFor(op, n, allForms);
    } else if (op.kind == OpKind::LayerNorm) {
      forms = {{"rows", {{kRows, n}, {n}}, {false, true}}};
    } else {
      forms = {{"rows", {{kRows, n}}, {false}}};
    }
    for (const Form &f : forms) {
      std::vector<Value *> operands;
      for (size_t k = 0; k < f.shapes.size(); ++k) {
        DType ot = op.kind == OpKind::Where && k == 0 ? DType::Bool : t;
        Tensor v = matrixOperand(op, k, ot, f.shapes[k], rng);
        if (f.constant[k]) {
          operands.push_back(builder.constant(v));
        } else {
          operands.push_back(b.graph->addInput(TensorType(ot, makeShape(f.shapes[k])),
                                               "x" + std::to_string(b.inputs.size())));
          b.inputs.push_back(v);
        }
      }
      auto node = builder.create(op.kind, operands, attrs);
      if (failed(node)) {
        // The first node decides whether the op takes the dtype; a later
        // form it refuses is a gap in the matrix, reported.
        if (outs.empty())
          return std::nullopt;
        ADD_FAILURE() << op.mnemonic << " " << dtypeName(t) << " refuses form " << f.name
                      << " n=" << n << ": " << quiet.str();
        continue;
      }
      outs.push_back((*node)->result());
      b.labels.push_back(std::string(f.name) + " n=" + std::to_string(n));
    }
  }
  b.graph->setOutputs(outs);
  return b;
}

Tensor kiln::testing::matrixOperand(const OpInfo &op, size_t k, DType t,
                                    const std::vector<int64_t> &shape, std::mt19937 &rng) {
  Tensor v = fill(t, shape, rng, !isFloat(t) && needsSafeIntegers(op, k));
  if (op.hasTrait(Normalization) && k == 0 && isFloat(t))
    for (int64_t i = 0; i < v.numel(); ++i) // finite rows; specials below
      v.setDouble(i, std::uniform_real_distribution<double>(-4, 4)(rng));
  const int64_t n = shape.empty() ? 1 : shape.back();
  if (!op.hasTrait(Elementwise) && k == 0 && isFloat(t) && n > 2 && v.numel() > 2 * n + 1) {
    v.setDouble(n + n / 2, kNaN); // row 1 has a NaN
    v.setDouble(2 * n + 1, kInf); // row 2 an infinity
  }
  return v;
}

std::string kiln::testing::compareWithBound(const OpInfo &op, const Tensor &got, const Tensor &want,
                                            bool onePrimitive) {
  return ::compare(op, got, want, onePrimitive);
}

namespace {

/// One case of a structured op: operand shapes (i64 operands are gather
/// indices), which are constants, attributes, results.
struct StructuredCase {
  StructuredCase(std::vector<std::vector<int64_t>> s, std::vector<bool> c, std::vector<NamedAttr> a,
                 unsigned r = 1, std::vector<DType> d = {})
      : shapes(std::move(s)), constant(std::move(c)), attrs(std::move(a)), results(r),
        dtypes(std::move(d)) {}
  std::vector<std::vector<int64_t>> shapes;
  std::vector<bool> constant;
  std::vector<NamedAttr> attrs;
  unsigned results = 1;
  std::vector<DType> dtypes; ///< empty: all f32
  /// Non-empty for an op whose result has a dim only the run decides
  /// (nonzero): compile() must fail at the op's node with this in its
  /// error, and the graph runs compiled in stages (codegen/Staged.h).
  std::string refusal;
};

using CaseGen = std::vector<StructuredCase> (*)(int64_t n);

StructuredCase withRefusal(StructuredCase c, std::string refusal) {
  c.refusal = std::move(refusal);
  return c;
}

/// The one graph of `text`, as a region attribute.
GraphAttr region(const char *text) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  auto g = parseRegion(text, diag);
  EXPECT_TRUE(g.succeeded()) << collect.str();
  return g.succeeded() ? *g : nullptr;
}

/// The generator of each structured op, by mnemonic.
const std::map<std::string, CaseGen> &structuredCases() {
  static const std::map<std::string, CaseGen> gens = {
      {"avg_pool",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{1, 3, 5, n}}, {false}, {{"kernel", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
                 {{{1, 3, 5, n}},
                  {false},
                  {{"kernel", Ints{3, 1}}, {"strides", Ints{2, 1}}, {"count_include_pad", true}}},
                 // Dilated windows, counting the padding and not.
                 {{{1, 3, 5, n}},
                  {false},
                  {{"kernel", Ints{2, 3}},
                   {"pads", Ints{1, 2, 1, 2}},
                   {"dilations", Ints{2, 2}},
                   {"count_include_pad", true}}},
                 {{{1, 3, 5, n}},
                  {false},
                  {{"kernel", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"dilations", Ints{3, 1}}}}};
       }},
      {"batch_norm",
       [](int64_t n) -> std::vector<StructuredCase> {
         // Constant parameters (lower-batch-norm writes sub, mul, add) and
         // parameters computed at run time (the batch_norm kernel).
         return {{{{1, 3, 5, n}, {3}, {3}, {3}, {3}}, {false, true, true, true, true}, {}},
                 {{{1, 3, 5, n}, {3}, {3}, {3}, {3}}, {false, false, false, false, false}, {}}};
       }},
      {"concat",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{kRows, n}, {kRows, 5}}, {false, false}, {{"axis", int64_t(1)}}},
                 {{{kRows, n}, {2, n}}, {false, true}, {{"axis", int64_t(0)}}}};
       }},
      {"constant", [](int64_t) -> std::vector<StructuredCase> { return {}; }},
      {"constant_of_shape",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{}, {}, {{"shape", Ints{kRows, n}}, {"value", 1.5}}}};
       }},
      {"conv",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {
             {{{1, 3, 5, n}, {4, 3, 3, 3}, {4}}, {false, true, true}, {{"pads", Ints{1, 1, 1, 1}}}},
             {{{1, 4, 5, n}, {4, 1, 3, 1}},
              {false, true},
              {{"pads", Ints{1, 0, 1, 0}}, {"group", int64_t(4)}}}};
       }},
      {"conv_transpose",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{1, 3, 5, n}, {3, 2, 2, 2}}, {false, true}, {{"strides", Ints{2, 2}}}}};
       }},
      {"expand",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{kRows, 1}}, {false}, {{"shape", Ints{kRows, n}}}},
                 {{{n}}, {false}, {{"shape", Ints{kRows, n}}}}};
       }},
      {"flatten",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{kRows, 2, n}}, {false}, {{"axis", int64_t(2)}}}};
       }},
      {"gather",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{kRows, n}, {5}},
                  {false, true},
                  {{"axis", int64_t(1)}},
                  1,
                  {DType::F32, DType::I64}}};
       }},
      {"gather_elements",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{kRows, n}, {kRows, 5}},
                  {false, true},
                  {{"axis", int64_t(1)}},
                  1,
                  {DType::F32, DType::I64}}};
       }},
      {"gather_nd",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{n, 4}, {5, 1}}, {false, true}, {}, 1, {DType::F32, DType::I64}}};
       }},
      {"gemm",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{kRows, n}, {5, n}, {5}}, {false, true, true}, {{"trans_b", true}}},
                 {{{n, kRows}, {n, 5}}, {false, false}, {{"trans_a", true}, {"alpha", 0.5}}}};
       }},
      {"gru",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{3, kRows, n}, {1, 15, n}, {1, 15, 5}, {1, 30}, {1, kRows, 5}},
                  {false, true, true, true, false},
                  {{"linear_before_reset", true}},
                  2},
                 {{{3, kRows, n}, {2, 15, n}, {2, 15, 5}, {2, 30}},
                  {false, true, true, true},
                  {{"direction", std::string("bidirectional")}},
                  2}};
       }},
      {"global_avg_pool",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{1, 3, 5, n}}, {false}, {}}};
       }},
      // Regions over symbolic dims (bound from the operands); ops that
      // round once, so the op's bound (exact) holds however they compile.
      {"if",
       [](int64_t n) -> std::vector<StructuredCase> {
         GraphAttr add = region(R"(graph @then(%x: f32[R,C], %y: f32[R,C]) -> (f32[R,C]) {
  %s = add(%x, %y) : f32[R,C]
  %m = mul(%s, %x) : f32[R,C]
  return %m
})");
         GraphAttr sub = region(R"(graph @else(%x: f32[R,C], %y: f32[R,C]) -> (f32[R,C]) {
  %s = sub(%x, %y) : f32[R,C]
  return %s
})");
         StructuredCase c{{{1}, {kRows, n}, {kRows, n}},
                          {false, false, false},
                          {{"then_branch", add}, {"else_branch", sub}}};
         c.dtypes = {DType::Bool, DType::F32, DType::F32};
         return {c, c};
       }},
      {"loop",
       [](int64_t n) -> std::vector<StructuredCase> {
         GraphAttr body = region(
             R"(graph @body(%i: i64[], %c: bool[], %a: f32[R,C], %w: f32[R,C]) -> (bool[], f32[R,C]) {
  %s = add(%a, %w) : f32[R,C]
  %m = max(%s, %a) : f32[R,C]
  return %c, %m
})");
         StructuredCase c{{{}, {}, {kRows, n}, {kRows, n}},
                          {false, false, false, true},
                          {{"body", body}, {"num_carried", int64_t(1)}}};
         c.dtypes = {DType::I64, DType::Bool, DType::F32, DType::F32};
         return {c};
       }},
      {"lstm",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{4, kRows, n}, {2, 20, n}, {2, 20, 5}, {2, 40}, {2, kRows, 5}, {2, kRows, 5}},
                  {false, true, true, true, false, false},
                  {{"direction", std::string("bidirectional")}},
                  3},
                 {{{2, 1, n}, {1, 8, n}, {1, 8, 2}}, {false, true, true}, {}, 3}};
       }},
      {"matmul",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{kRows, n}, {n, 5}}, {false, true}, {}},
                 {{{2, kRows, n}, {2, n, 4}}, {false, false}, {}}};
       }},
      {"max_pool",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{1, 3, 5, n}}, {false}, {{"kernel", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}}};
       }},
      {"scatter_elements",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{kRows, n}, {kRows, 2}, {kRows, 2}},
                  {false, true, false},
                  {{"axis", int64_t(1)}},
                  1,
                  {DType::F32, DType::I64, DType::F32}},
                 {{{kRows, n}, {kRows, 2}, {kRows, 2}},
                  {false, true, false},
                  {{"axis", int64_t(1)}, {"reduction", std::string("add")}},
                  1,
                  {DType::F32, DType::I64, DType::F32}}};
       }},
      {"scatter_nd",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{n, 4}, {5, 1}, {5, 4}},
                  {false, true, false},
                  {{"reduction", std::string("max")}},
                  1,
                  {DType::F32, DType::I64, DType::F32}}};
       }},
      {"nonzero",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {
             withRefusal({{{kRows, n}}, {false}, {}}, "has a dynamic shape after shape inference")};
       }},
      {"pad",
       [](int64_t n) -> std::vector<StructuredCase> {
         std::vector<StructuredCase> c = {
             {{{kRows, n}}, {false}, {{"pads", Ints{0, 1, 1, 2}}, {"value", 0.5}}},
             {{{kRows, n}}, {false}, {{"pads", Ints{1, 2, 0, 1}}, {"mode", std::string("edge")}}},
             // wrap wider than the dim on one side, cropping on the other
             {{{kRows, n}}, {false}, {{"pads", Ints{2, 3, 0, -1}}, {"mode", std::string("wrap")}}}};
         if (n > 2)
           c.push_back({{{kRows, n}},
                        {false},
                        {{"pads", Ints{0, 2, 0, 1}}, {"mode", std::string("reflect")}}});
         return c;
       }},
      {"iota",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{}, {}, {{"shape", Ints{kRows, n}}, {"axis", int64_t(1)}, {"dtype", DType::F32}}},
                 {{}, {}, {{"shape", Ints{kRows, n}}, {"start", -2.0}, {"delta", 3.0}}}};
       }},
      {"range",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{},
                  {},
                  {{"start", 1.0}, {"limit", static_cast<double>(n) + 1}, {"dtype", DType::F32}}}};
       }},
      {"reshape",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{kRows, n}}, {false}, {{"shape", Ints{n, kRows}}}}};
       }},
      {"resize",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{1, 3, 2, n}}, {false}, {{"scales", Floats{1, 1, 2, 2}}}},
                 {{{1, 3, 2, n}},
                  {false},
                  {{"scales", Floats{1, 1, 2, 2}}, {"mode", std::string("linear")}}},
                 // Cubic up and down, its taps beyond both edges, with and
                 // without exclude_outside.
                 {{{1, 3, 2, n}},
                  {false},
                  {{"scales", Floats{1, 1, 2, 1.5}}, {"mode", std::string("cubic")}}},
                 {{{1, 3, 4, n}},
                  {false},
                  {{"scales", Floats{1, 1, 0.75, 0.6}},
                   {"mode", std::string("cubic")},
                   {"cubic_coeff_a", -0.5},
                   {"exclude_outside", true}}},
                 // Antialiased downscaling: the filter stretched over 4 to 8
                 // neighbours per dim, linear and cubic (with
                 // exclude_outside), and an upscaled dim it leaves alone.
                 {{{1, 3, 9, n}},
                  {false},
                  {{"scales", Floats{1, 1, 0.25, 0.6}},
                   {"mode", std::string("linear")},
                   {"antialias", true}}},
                 {{{1, 3, 5, n}},
                  {false},
                  {{"scales", Floats{1, 1, 0.5, 1.5}},
                   {"mode", std::string("cubic")},
                   {"exclude_outside", true},
                   {"antialias", true}}},
                 // tf_crop_and_resize: a crop reaching past both edges of
                 // the rows (extrapolated) and inside the columns.
                 {{{1, 3, 4, n}},
                  {false},
                  {{"sizes", Ints{1, 3, 5, n}},
                   {"mode", std::string("linear")},
                   {"coordinate_transformation_mode", std::string("tf_crop_and_resize")},
                   {"roi", Floats{0, 0, -0.2, 0.1, 1, 1, 1.3, 0.8}},
                   {"extrapolation_value", 7.0}}}};
       }},
      {"rnn",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{3, kRows, n}, {1, 4, n}, {1, 4, 4}, {1, 8}},
                  {false, true, true, true},
                  {{"direction", std::string("reverse")}},
                  2}};
       }},
      {"shape",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{kRows, n}}, {false}, {}}};
       }},
      {"slice",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {
             {{{kRows, n}},
              {false},
              {{"starts", Ints{n / 3}}, {"ends", Ints{n}}, {"axes", Ints{1}}, {"steps", Ints{2}}}},
             {{{kRows, n}},
              {false},
              {{"starts", Ints{-1}},
               {"ends", Ints{-n - 1}},
               {"axes", Ints{1}},
               {"steps", Ints{-1}}}}};
       }},
      {"split",
       [](int64_t n) -> std::vector<StructuredCase> {
         if (n < 2)
           return {{{{kRows, n}}, {false}, {{"axis", int64_t(0)}, {"sizes", Ints{1, 2}}}, 2}};
         return {{{{kRows, n}}, {false}, {{"axis", int64_t(1)}, {"sizes", Ints{1, n - 1}}}, 2}};
       }},
      {"squeeze",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{kRows, 1, n}}, {false}, {{"axes", Ints{1}}}}};
       }},
      {"top_k",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{kRows, n}}, {false}, {{"k", std::min<int64_t>(n, 3)}}, 2},
                 {{{kRows, n}},
                  {false},
                  {{"k", int64_t(1)}, {"axis", int64_t(0)}, {"largest", false}},
                  2},
                 // k an operand (n / 2; from the data in a model): sized by
                 // the run, so the graph compiles in stages.
                 withRefusal({{{kRows, n}, {1}}, {false, true}, {}, 2, {DType::F32, DType::I64}},
                             "has a dynamic shape after shape inference")};
       }},
      {"transpose",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{kRows, n}}, {false}, {}},
                 {{{2, kRows, n}}, {false}, {{"perm", Ints{1, 2, 0}}}}};
       }},
      {"unsqueeze",
       [](int64_t n) -> std::vector<StructuredCase> {
         return {{{{kRows, n}}, {false}, {{"axes", Ints{0, 2}}}}};
       }},
  };
  return gens;
}

bool isGeneric(const OpInfo &info) {
  return info.hasTrait(Elementwise) || info.hasTrait(Reduction) ||
         (info.hasTrait(Normalization) && info.minOperands <= 2);
}

} // namespace

std::string kiln::testing::compareStructured(const OpInfo &op, const Tensor &got,
                                             const Tensor &want) {
  if (op.ulps >= 0)
    return ::compare(op, got, want); // this file's, not kiln::compare
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return "type " + got.str() + " vs " + want.str();
  double scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    scale = std::max(scale, std::fabs(want.getDouble(i)));
  Comparison c = compareTensors(got, want, Tolerance{1e-4, 1e-4 * std::max(scale, 1e-30)});
  return c.ok() ? "" : describe(c, Tolerance{1e-4, 1e-4 * scale});
}

namespace {

class StructuredOpTest : public ::testing::TestWithParam<const OpInfo *> {};

TEST_P(StructuredOpTest, CompiledEqualsInterpreter) {
  const OpInfo &op = *GetParam();
  auto gen = structuredCases().find(std::string(op.mnemonic));
  ASSERT_NE(gen, structuredCases().end())
      << "op '" << op.mnemonic << "' has no case in structuredCases() of OpMatrixTest.cpp";
  if (std::string why = targetRefusal(); !why.empty())
    GTEST_SKIP() << why; // reason: $KILN_TEST_CPU cannot run on this host
  const bool library = op.ulps < 0 || op.kind == OpKind::BatchNorm;
  auto g = std::make_unique<Graph>("matrix");
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  Builder builder(*g, diag);
  std::mt19937 rng(7);
  std::vector<Tensor> inputs;
  std::vector<Value *> outs;
  std::vector<std::string> labels;
  std::string refusal;
  for (int64_t n : kSizes) {
    int ci = 0;
    for (const StructuredCase &c : gen->second(n)) {
      std::vector<Value *> operands;
      for (size_t k = 0; k < c.shapes.size(); ++k) {
        DType t = c.dtypes.empty() ? DType::F32 : c.dtypes[k];
        Tensor v = Tensor::zeros(t, c.shapes[k]);
        for (int64_t i = 0; i < v.numel(); ++i) {
          if (op.kind == OpKind::Loop && k == 0) // trip counts 0 to 4
            v.setInt(i, n % 5);
          else if (op.kind == OpKind::TopK && k == 1) // its k operand
            v.setInt(i, n / 2);
          else if (t == DType::Bool) // both branches of an if
            v.setInt(i, (n + ci) % 2);
          else if (t == DType::I64) // gather indices, negative ones too
            v.setInt(i, static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * n)) - n);
          // Finite values only for library ops and max_pool: oneDNN's max
          // pooling neither propagates NaN nor returns -inf for a window of
          // -inf (it starts from -FLT_MAX), a known deviation recorded in
          // docs/NUMERICS.md.
          else if (library || op.kind == OpKind::Resize || op.kind == OpKind::MaxPool)
            v.setDouble(i, std::uniform_real_distribution<double>(-1, 1)(rng));
          else
            v.setDouble(i, floatValue(rng));
        }
        if (op.kind == OpKind::BatchNorm && k == 4) // variances
          for (int64_t i = 0; i < v.numel(); ++i)
            v.setDouble(i, 0.5 + std::fabs(v.getDouble(i)));
        if (c.constant[k]) {
          operands.push_back(builder.constant(v));
        } else {
          operands.push_back(g->addInput(TensorType(t, makeShape(c.shapes[k])),
                                         "x" + std::to_string(inputs.size())));
          inputs.push_back(v);
        }
      }
      if (!c.refusal.empty())
        refusal = c.refusal;
      auto node = builder.create(op.kind, operands, c.attrs, c.results);
      ASSERT_TRUE(node.succeeded())
          << op.mnemonic << " n=" << n << " case " << ci << ": " << collect.str();
      for (unsigned r = 0; r < (*node)->numResults(); ++r) {
        outs.push_back((*node)->result(r));
        labels.push_back("n=" + std::to_string(n) + " case " + std::to_string(ci) + " result " +
                         std::to_string(r));
      }
      ++ci;
    }
  }
  if (outs.empty())
    return; // `constant`: nothing runs (its value is the reference's own)
  g->setOutputs(outs);
  auto want = interpret(*g, inputs, diag);
  ASSERT_TRUE(want.succeeded()) << collect.str();
  if (!refusal.empty()) {
    DiagnosticEngine compileDiag;
    ScopedDiagnosticCollector why(compileDiag);
    CompileOptions options;
    options.cpu = testCpu();
    options.cache = false;
    EXPECT_TRUE(failed(compile(*g, options, compileDiag))) << op.mnemonic << " compiled";
    EXPECT_NE(why.str().find(refusal), std::string::npos) << why.str();
    EXPECT_NE(why.str().find("'" + std::string(op.mnemonic) + "' op"), std::string::npos)
        << why.str();
  }
  CompileReport report;
  std::optional<std::vector<Tensor>> got;
  if (refusal.empty()) {
    got = compileAndRun(*g, inputs, std::string(op.mnemonic), {}, &report);
  } else {
    CompileOptions options;
    options.cpu = testCpu();
    options.threads = 1;
    auto staged = StagedModel::compile(*g, options, diag, &report);
    ASSERT_TRUE(staged.succeeded()) << collect.str();
    ASSERT_EQ((*staged)->whole(), nullptr) << op.mnemonic << " compiled whole";
    auto outs = (*staged)->run(inputs, diag);
    ASSERT_TRUE(outs.succeeded()) << collect.str();
    got = outs.take();
  }
  ASSERT_TRUE(got.has_value());
  // An op the library anchors runs there, not on its reference kernel.
  if (cpu::oneDnnCapabilities().anchors(op.kind)) {
    EXPECT_EQ(report.numFallbacks, 0)
        << (report.fallbacks.empty() ? std::string() : report.fallbacks.front());
  }
  int failures = 0;
  for (size_t k = 0; k < want->size(); ++k) {
    std::string bad = compareStructured(op, (*got)[k], (*want)[k]);
    if (!bad.empty() && failures++ < 4)
      ADD_FAILURE() << op.mnemonic << " " << labels[k] << " (--cpu " << testCpu() << "): " << bad;
  }
}

std::vector<const OpInfo *> structuredOps() {
  std::vector<const OpInfo *> ops;
  for (const OpInfo &info : allOps())
    if (!isGeneric(info))
      ops.push_back(&info);
  return ops;
}

INSTANTIATE_TEST_SUITE_P(Ops, StructuredOpTest, ::testing::ValuesIn(structuredOps()),
                         [](const ::testing::TestParamInfo<const OpInfo *> &info) {
                           return std::string(info.param->mnemonic);
                         });

class OpMatrixTest : public ::testing::TestWithParam<const OpInfo *> {};

TEST_P(OpMatrixTest, CompiledEqualsInterpreter) {
  if (std::string why = targetRefusal(); !why.empty())
    GTEST_SKIP() << why; // reason: $KILN_TEST_CPU cannot run on this host
  const OpInfo &op = *GetParam();
  if (op.hasTrait(Elementwise)) {
    ASSERT_GE(op.ulps, 0) << "'" << op.mnemonic << "' needs a bound in ir/Ops.def";
  }
  int cases = 0;
  unsigned seed = 1;
  for (const std::vector<NamedAttr> &attrs : attrVariants(op)) {
    for (unsigned ti = 0; ti < kNumDTypes; ++ti) {
      DType t = static_cast<DType>(ti);
      auto built = buildMatrixCase(op, t, attrs, seed++);
      if (!built)
        continue;
      ++cases;
      std::string label = std::string(op.mnemonic) + " " + std::string(dtypeName(t));
      for (const NamedAttr &a : attrs)
        label += " " + a.first;
      DiagnosticEngine diag;
      ScopedDiagnosticCollector collect(diag);
      auto want = interpret(*built->graph, built->inputs, diag);
      ASSERT_TRUE(want.succeeded()) << label << ": " << collect.str();
      auto got = compileAndRun(*built->graph, built->inputs, label);
      ASSERT_TRUE(got.has_value());
      // One primitive (exp(x), a / b): no absolute floor (OpBounds.h).
      const Node *first = built->graph->outputs()[0]->definingNode();
      std::vector<DType> operandTypes;
      for (const Value *v : first->operands())
        operandTypes.push_back(v->type().dtype);
      const bool onePrimitive = op.hasTrait(Elementwise) && kiln::testing::lowersToOnePrimitive(
                                                                op, first->attrs(), operandTypes,
                                                                first->result()->type().dtype);
      int failures = 0;
      for (size_t k = 0; k < want->size(); ++k) {
        std::string bad = compare(op, (*got)[k], (*want)[k], onePrimitive);
        if (!bad.empty() && failures++ < 4)
          ADD_FAILURE() << label << " " << built->labels[k] << " (--cpu " << testCpu()
                        << "): " << bad;
      }
    }
  }
  EXPECT_GT(cases, 0) << "no dtype accepted by '" << op.mnemonic << "'";
}

} // namespace

std::vector<const OpInfo *> kiln::testing::matrixOps() {
  std::vector<const OpInfo *> ops;
  for (const OpInfo &info : allOps())
    if (isGeneric(info))
      ops.push_back(&info);
  return ops;
}

namespace {

INSTANTIATE_TEST_SUITE_P(Ops, OpMatrixTest, ::testing::ValuesIn(matrixOps()),
                         [](const ::testing::TestParamInfo<const OpInfo *> &info) {
                           return std::string(info.param->mnemonic);
                         });

} // namespace
