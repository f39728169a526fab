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
//
//===----------------------------------------------------------------------===//
#include "codegen/Compiler.h"
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

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
const int64_t kSizes[] = {1, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000, 4099};
constexpr int64_t kRows = 3;

std::string testCpu() {
  const char *cpu = std::getenv("KILN_TEST_CPU");
  return cpu && *cpu ? cpu : "native";
}

/// Why $KILN_TEST_CPU cannot run on this machine (haswell without AVX2);
/// empty when it can. The tests skip, saying so.
std::string targetRefusal() {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector why(diag);
  if (failed(kiln::codegen::cpu::resolveCpuTarget(testCpu(), diag)))
    return "--cpu " + testCpu() + " does not run on this machine: " + why.str();
  return "";
}

/// Compiles `g` for $KILN_TEST_CPU on one thread (the other options as
/// given, the compile cache off), runs it on `inputs` and checks that its
/// artifact gives the same bits; nullopt, with a failure naming `label`,
/// when the compile or the run fails.
std::optional<std::vector<Tensor>> compileAndRun(const Graph &g, const std::vector<Tensor> &inputs,
                                                 const std::string &label, CompileOptions opts = {},
                                                 CompileReport *report = nullptr) {
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

struct Built {
  std::unique_ptr<Graph> graph;
  std::vector<Tensor> inputs;
  std::vector<std::string> labels; ///< per output
};

/// Attribute settings of an op in the matrix: the defaults, `to` over every
/// dtype for cast, the innermost axis for reductions and normalizations.
std::vector<std::vector<NamedAttr>> attrVariants(const OpInfo &op) {
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
std::optional<Built> build(const OpInfo &op, DType t, const std::vector<NamedAttr> &attrs,
                           unsigned seed) {
  Built b;
  b.graph = std::make_unique<Graph>("matrix");
  DiagnosticEngine diag;
  ScopedDiagnosticCollector quiet(diag);
  Builder builder(*b.graph, diag);
  std::mt19937 rng(seed);
  std::vector<Value *> outs;
  const bool allForms = t == DType::F32;
  const bool normalization = op.hasTrait(Normalization);
  for (int64_t n : kSizes) {
    if (!allForms && n != 1 && n != 7 && n != 16 && n != 17 && n != 65 && n != 4099)
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
        Tensor v = fill(ot, f.shapes[k], rng, !isFloat(ot) && needsSafeIntegers(op, k));
        if (normalization && k == 0 && isFloat(ot))
          for (int64_t i = 0; i < v.numel(); ++i) // finite rows; specials below
            v.setDouble(i, std::uniform_real_distribution<double>(-4, 4)(rng));
        if (!op.hasTrait(Elementwise) && k == 0 && isFloat(ot) && n > 2) {
          v.setDouble(n + n / 2, kNaN); // row 1 has a NaN
          v.setDouble(2 * n + 1, kInf); // row 2 an infinity
        }
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
};

using CaseGen = std::vector<StructuredCase> (*)(int64_t n);

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
         return {{{{1, 3, 5, n}, {3}, {3}, {3}, {3}}, {false, true, true, true, true}, {}}};
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
                  2}};
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

/// Empty when within a structured op's bound: exact for ulps 0, else 1e-4
/// of the output's magnitude (plus 1e-4 relative).
std::string compareStructured(const OpInfo &op, const Tensor &got, const Tensor &want) {
  if (op.ulps >= 0)
    return compare(op, got, want);
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return "type " + got.str() + " vs " + want.str();
  double scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i)
    scale = std::max(scale, std::fabs(want.getDouble(i)));
  Comparison c = compareTensors(got, want, Tolerance{1e-4, 1e-4 * std::max(scale, 1e-30)});
  return c.ok() ? "" : describe(c, Tolerance{1e-4, 1e-4 * scale});
}

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
  CompileReport report;
  auto got = compileAndRun(*g, inputs, std::string(op.mnemonic), {}, &report);
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

// Both implementations of a recurrent layer, each forced (the compiler
// otherwise keeps the faster, so one of them would go untested): Kiln's
// kernel (runtime/dnnl/RecurrentKernel.h, at the instruction set --cpu
// allows) and oneDNN's primitive, over the cells, directions, hidden sizes
// around the 16-lane vectors, batches around its 4-row blocks, with and
// without biases and initial states.
TEST(RecurrentMatrixTest, KilnKernelAndOneDnnPrimitiveEqualTheInterpreter) {
  if (std::string why = targetRefusal(); !why.empty())
    GTEST_SKIP() << why; // reason: $KILN_TEST_CPU cannot run on this host
  struct Sizes {
    int64_t seq, batch, input, hidden;
  };
  const Sizes shapes[] = {
      {1, 1, 1, 1}, {5, 3, 7, 17}, {4, 5, 70, 33}, {3, 2, 3, 64}, {2, 9, 130, 5}};
  const std::pair<OpKind, bool> cells[] = {
      {OpKind::Lstm, false}, {OpKind::Gru, true}, {OpKind::Gru, false}, {OpKind::Rnn, false}};
  std::mt19937 rng(11);
  auto uniform = [&](std::vector<int64_t> shape) {
    Tensor t = Tensor::zeros(DType::F32, shape);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.setDouble(i, std::uniform_real_distribution<double>(-1, 1)(rng));
    return t;
  };
  for (RecurrentChoice choice : {RecurrentChoice::Kiln, RecurrentChoice::Library})
    for (auto [kind, lbr] : cells)
      for (const char *direction : {"forward", "reverse", "bidirectional"}) {
        const OpInfo &op = opInfo(kind);
        const int64_t dirs = std::string(direction) == "bidirectional" ? 2 : 1;
        const int64_t gates = kind == OpKind::Lstm ? 4 : kind == OpKind::Gru ? 3 : 1;
        DiagnosticEngine diag;
        ScopedDiagnosticCollector collect(diag);
        auto g = std::make_unique<Graph>("recurrent");
        Builder builder(*g, diag);
        std::vector<Tensor> inputs;
        std::vector<Value *> outs;
        auto input = [&](Tensor t) {
          Value *v = g->addInput(TensorType(DType::F32, makeShape(t.shape())),
                                 "x" + std::to_string(inputs.size()));
          inputs.push_back(std::move(t));
          return v;
        };
        int variant = 0;
        for (const Sizes &s : shapes) {
          const int64_t gh = gates * s.hidden;
          std::vector<Value *> operands{input(uniform({s.seq, s.batch, s.input})),
                                        builder.constant(uniform({dirs, gh, s.input})),
                                        builder.constant(uniform({dirs, gh, s.hidden}))};
          // Every other shape has biases and initial states.
          if (variant++ % 2 == 1) {
            operands.push_back(builder.constant(uniform({dirs, 2 * gh})));
            operands.push_back(input(uniform({dirs, s.batch, s.hidden})));
            if (kind == OpKind::Lstm)
              operands.push_back(input(uniform({dirs, s.batch, s.hidden})));
          }
          std::vector<NamedAttr> attrs{{"direction", std::string(direction)}};
          if (kind == OpKind::Gru)
            attrs.push_back({"linear_before_reset", lbr});
          auto node = builder.create(kind, operands, attrs, op.numResults);
          ASSERT_TRUE(node.succeeded()) << collect.str();
          for (unsigned r = 0; r < (*node)->numResults(); ++r)
            outs.push_back((*node)->result(r));
        }
        g->setOutputs(outs);
        SCOPED_TRACE(std::string(op.mnemonic) + (lbr ? " lbr " : " ") + direction +
                     (choice == RecurrentChoice::Kiln ? " kiln" : " onednn") + " --cpu " +
                     testCpu());
        auto want = interpret(*g, inputs, diag);
        ASSERT_TRUE(want.succeeded()) << collect.str();
        CompileOptions opts;
        opts.recurrent = choice;
        CompileReport report;
        auto got = compileAndRun(*g, inputs, std::string(op.mnemonic), opts, &report);
        ASSERT_TRUE(got.has_value());
        EXPECT_EQ(report.numFallbacks, 0);
        // Kiln's kernel computes every cell but GRU with linear_before_reset 0.
        const bool kiln = choice == RecurrentChoice::Kiln && !(kind == OpKind::Gru && !lbr);
        EXPECT_EQ(report.libraryCalls.size(), std::size(shapes));
        for (const std::string &line : report.libraryCalls) // one per layer
          EXPECT_EQ(line.find(": kiln:") != std::string::npos, kiln) << line;
        for (size_t k = 0; k < want->size(); ++k) {
          std::string bad = compareStructured(op, (*got)[k], (*want)[k]);
          EXPECT_TRUE(bad.empty()) << "output " << k << ": " << bad;
        }
      }
}

// Kiln's recurrent kernel runs a bidirectional layer's directions on two
// threads when it may: the same bits as on one.
using runtime::onednn::RecurrentSpec;

/// A bidirectional layer of Kiln's kernel with initial states.
RecurrentSpec kilnBidirectional(RecurrentSpec::Cell cell, int64_t seq, int64_t batch, int64_t input,
                                int64_t hidden) {
  RecurrentSpec spec;
  spec.cell = cell;
  spec.direction = RecurrentSpec::Direction::Bidirectional;
  spec.impl = RecurrentSpec::Impl::Kiln;
  spec.seq = seq;
  spec.batch = batch;
  spec.input = input;
  spec.hidden = hidden;
  spec.hasH0 = true;
  spec.hasC0 = cell == RecurrentSpec::Cell::Lstm;
  return spec;
}

TEST(RecurrentMatrixTest, KilnKernelOnTwoThreadsGivesTheBitsOfOne) {
  for (RecurrentSpec::Cell cell :
       {RecurrentSpec::Cell::Lstm, RecurrentSpec::Cell::LbrGru, RecurrentSpec::Cell::Rnn}) {
    RecurrentSpec spec = kilnBidirectional(cell, 5, 3, 7, 17);
    spec.threads = 2;
    const int64_t d = 2, g = spec.gates(), h = spec.hidden;
    std::mt19937 rng(3);
    auto random = [&](int64_t n) {
      std::vector<float> v(static_cast<size_t>(n));
      for (float &x : v)
        x = std::uniform_real_distribution<float>(-1, 1)(rng);
      return v;
    };
    runtime::onednn::RecurrentStep step("rnn", spec, random(d * spec.input * g * h),
                                        random(d * h * g * h), random(d * spec.biasGates() * h));
    std::vector<float> x = random(spec.seq * spec.batch * spec.input);
    std::vector<float> h0 = random(d * spec.batch * h), c0 = random(d * spec.batch * h);
    auto run = [&](int threads) {
      std::vector<std::vector<float>> out{std::vector<float>(spec.seq * d * spec.batch * h),
                                          std::vector<float>(d * spec.batch * h),
                                          std::vector<float>(d * spec.batch * h)};
      std::vector<void *> buffers{x.data(), h0.data()};
      if (spec.hasC0)
        buffers.push_back(c0.data());
      for (size_t i = 0; i < (spec.hasC0 ? 3u : 2u); ++i)
        buffers.push_back(out[i].data());
      runtime::StepContext ctx;
      ctx.threads = threads;
      EXPECT_TRUE(step.run(buffers, ctx).ok());
      return out;
    };
    EXPECT_EQ(run(1), run(2)) << spec.cellName();
  }
}

// A saved recurrent step that is damaged (any byte of its parameters
// flipped, truncated, blobs or buffers of other sizes) is an error when
// loaded, never a crash or an oversized read.
TEST(RecurrentMatrixTest, DamagedSavedStepsAreErrors) {
  const RecurrentSpec spec = kilnBidirectional(RecurrentSpec::Cell::Lstm, 4, 2, 3, 5);
  const size_t f = sizeof(float);
  runtime::onednn::RecurrentStep step("lstm", spec, std::vector<float>(2 * 3 * 4 * 5, 0.5f),
                                      std::vector<float>(2 * 5 * 4 * 5, 0.25f),
                                      std::vector<float>(2 * 4 * 5, 0.f));
  runtime::SavedStep saved;
  std::string why;
  ASSERT_TRUE(step.save(saved, why)) << why;
  const size_t state = 2 * 2 * 5 * f;
  const std::vector<size_t> sizes{4 * 2 * 3 * f, state, state, 4 * 2 * 2 * 5 * f, state, state};
  auto load = [&](const std::string &payload, std::vector<std::span<const uint8_t>> blobs,
                  const std::vector<size_t> &buffers) {
    return runtime::onednn::loadRecurrentStep(payload, blobs, buffers, why);
  };
  ASSERT_NE(load(saved.payload, saved.blobs, sizes), nullptr) << why;
  for (size_t i = 0; i < saved.payload.size(); ++i)
    for (uint8_t mask : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xff)}) {
      std::string bad = saved.payload;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      if (load(bad, saved.blobs, sizes) == nullptr) {
        EXPECT_NE(why.find("recurrent step"), std::string::npos) << why;
      }
    }
  EXPECT_EQ(load(saved.payload.substr(0, saved.payload.size() - 1), saved.blobs, sizes), nullptr);
  std::vector<std::span<const uint8_t>> shortBlobs = saved.blobs;
  shortBlobs[1] = shortBlobs[1].subspan(4);
  EXPECT_EQ(load(saved.payload, shortBlobs, sizes), nullptr);
  std::vector<size_t> small = sizes;
  small[3] -= 4;
  EXPECT_EQ(load(saved.payload, saved.blobs, small), nullptr);
  EXPECT_EQ(load(saved.payload, saved.blobs, {sizes.begin(), sizes.end() - 1}), nullptr);
}

// A concat of computed operands along an outer axis runs as one kernel per
// operand (Note [Concat pieces]): along the first and a middle axis, two to
// four operands (exp, sin, a resize, a plain input), sizes around the
// vector width; compared with the interpreter, the pieces named in the
// steps.
TEST(ConcatPiecesTest, OneKernelPerComputedOperandEqualsTheInterpreter) {
  if (std::string why = targetRefusal(); !why.empty())
    GTEST_SKIP() << why; // reason: $KILN_TEST_CPU cannot run on this host
  std::mt19937 rng(5);
  for (int64_t w : {1, 15, 16, 17, 64})
    for (int64_t axis : {0, 1})
      for (int operands = 2; operands <= 4; ++operands) {
        DiagnosticEngine diag;
        ScopedDiagnosticCollector collect(diag);
        auto g = std::make_unique<Graph>("pieces");
        Builder b(*g, diag);
        std::vector<Tensor> inputs;
        std::vector<Value *> parts;
        for (int i = 0; i < operands; ++i) {
          std::vector<int64_t> shape{3, 2 + i, 32, w};
          if (i == 2) // upsampled from half the rows: a resize of a smaller input
            shape[2] = 16;
          Tensor t = Tensor::zeros(DType::F32, shape);
          for (int64_t e = 0; e < t.numel(); ++e)
            t.setDouble(e, std::uniform_real_distribution<double>(-2, 2)(rng));
          Value *x = g->addInput(TensorType(DType::F32, makeShape(shape)),
                                 "x" + std::to_string(inputs.size()));
          inputs.push_back(t);
          if (i == 0)
            x = b.createValue(OpKind::Exp, {x});
          else if (i == 1)
            x = b.createValue(OpKind::Sin, {x});
          else if (i == 2)
            x = b.createValue(OpKind::Resize, {x},
                              {{"mode", std::string("linear")}, {"sizes", Ints{3, 2 + i, 32, w}}});
          ASSERT_NE(x, nullptr) << collect.str();
          parts.push_back(x);
        }
        if (axis == 0) // the same shapes along the first axis
          for (Value *&p : parts)
            p = b.createValue(OpKind::Slice, {p},
                              {{"starts", Ints{0}}, {"ends", Ints{2}}, {"axes", Ints{1}}});
        g->setOutputs({b.createValue(OpKind::Concat, parts, {{"axis", axis}})});
        SCOPED_TRACE("w " + std::to_string(w) + " axis " + std::to_string(axis) + " operands " +
                     std::to_string(operands) + " --cpu " + testCpu());
        auto want = interpret(*g, inputs, diag);
        ASSERT_TRUE(want.succeeded()) << collect.str();
        CompileReport report;
        auto got = compileAndRun(*g, inputs, "concat pieces", {}, &report);
        ASSERT_TRUE(got.has_value());
        // Within exp's and sin's bound (4 ulps; resize and the copies are exact).
        std::string bad = compareStructured(opInfo(OpKind::Sin), (*got)[0], (*want)[0]);
        EXPECT_TRUE(bad.empty()) << bad;
        // Outputs of at least 4096 elements are split, one piece per operand.
        const int64_t elements = want->front().numel();
        EXPECT_EQ(report.steps.find("_part" + std::to_string(operands - 1)) != std::string::npos,
                  elements >= 4096)
            << report.steps;
      }
}

// Attention (Note [Attention calls] in codegen/Fusion.cpp): q k^T, scaled
// by a mul or a div, with an additive mask of several broadcast shapes (a
// causal one with -inf above the diagonal), softmax over the keys, times v;
// 3-D and 4-D, lengths around the vector width. Compiled equals the
// interpreter (within matmul's relative tolerance), and on this machine's
// own CPU the group is one "attention" call; where the probabilities are
// also a graph output it is not, and still equal.
TEST(AttentionTest, OneCallEqualsTheInterpreter) {
  if (std::string why = targetRefusal(); !why.empty())
    GTEST_SKIP() << why; // reason: $KILN_TEST_CPU cannot run on this host
  struct Case {
    std::vector<int64_t> batch;
    int64_t lq, lk, d, dv;
    int mask; // 0 none, 1 [lq, lk] causal (-inf), 2 [batch0, 1, lq, lk] input
    bool divide, probsOut;
  };
  const Case cases[] = {
      {{2}, 5, 7, 8, 3, 0, false, false},      {{2, 3}, 17, 17, 16, 16, 1, false, false},
      {{1, 2}, 1, 33, 4, 5, 0, true, false},   {{3}, 64, 64, 32, 32, 1, true, false},
      {{2, 4}, 16, 15, 8, 8, 2, false, false}, {{2, 2}, 9, 9, 4, 4, 1, false, true},
  };
  std::mt19937 rng(11);
  for (const Case &c : cases) {
    DiagnosticEngine diag;
    ScopedDiagnosticCollector collect(diag);
    auto g = std::make_unique<Graph>("attention");
    Builder b(*g, diag);
    std::vector<Tensor> inputs;
    auto input = [&](std::vector<int64_t> shape, const std::string &name) {
      Tensor t = Tensor::zeros(DType::F32, shape);
      for (int64_t e = 0; e < t.numel(); ++e)
        t.setDouble(e, std::normal_distribution<double>(0, 1)(rng));
      inputs.push_back(t);
      return g->addInput(TensorType(DType::F32, makeShape(shape)), name);
    };
    auto shape = [&](int64_t rows, int64_t cols) {
      std::vector<int64_t> s = c.batch;
      s.push_back(rows);
      s.push_back(cols);
      return s;
    };
    Value *q = input(shape(c.lq, c.d), "q"), *kt = input(shape(c.d, c.lk), "kt");
    Value *v = input(shape(c.lk, c.dv), "v");
    Value *scores = b.createValue(OpKind::MatMul, {q, kt});
    Tensor scale = Tensor::scalar(DType::F32, c.divide ? std::sqrt(double(c.d)) : 0.3);
    scores = b.createValue(c.divide ? OpKind::Div : OpKind::Mul, {scores, b.constant(scale)});
    if (c.mask == 1) {
      Tensor m = Tensor::zeros(DType::F32, {c.lq, c.lk});
      for (int64_t i = 0; i < c.lq; ++i)
        for (int64_t j = i + 1; j < c.lk; ++j)
          m.setDouble(i * c.lk + j, -std::numeric_limits<double>::infinity());
      scores = b.createValue(OpKind::Add, {scores, b.constant(m)});
    } else if (c.mask == 2) {
      scores = b.createValue(OpKind::Add, {scores, input({c.batch[0], 1, c.lq, c.lk}, "mask")});
    }
    Value *probs = b.createValue(OpKind::Softmax, {scores}, {{"axis", int64_t(-1)}});
    Value *out = b.createValue(OpKind::MatMul, {probs, v});
    ASSERT_NE(out, nullptr) << collect.str();
    if (c.probsOut)
      g->setOutputs({out, probs});
    else
      g->setOutputs({out});
    std::string label = "lq " + std::to_string(c.lq) + " lk " + std::to_string(c.lk) + " mask " +
                        std::to_string(c.mask) + " --cpu " + testCpu();
    SCOPED_TRACE(label);
    auto want = interpret(*g, inputs, diag);
    ASSERT_TRUE(want.succeeded()) << collect.str();
    CompileReport report;
    auto got = compileAndRun(*g, inputs, label, {}, &report);
    ASSERT_TRUE(got.has_value());
    for (size_t k = 0; k < want->size(); ++k) {
      std::string bad = compareStructured(opInfo(OpKind::MatMul), (*got)[k], (*want)[k]);
      EXPECT_TRUE(bad.empty()) << "output " << k << ": " << bad;
    }
    std::string calls;
    for (const std::string &line : report.libraryCalls)
      calls += line + "\n";
    if (testCpu() == "native") {
      EXPECT_EQ(calls.find("attention:") != std::string::npos, !c.probsOut) << calls;
    }
  }
}

// A saved attention step whose payload is damaged (each byte flipped), cut
// short, or given other buffers is an error when loaded, never a crash.
TEST(AttentionTest, DamagedSavedStepsAreErrors) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  Graph g("attention");
  Builder b(g, diag);
  Value *q = g.addInput(TensorType(DType::F32, makeShape({2, 6, 4})), "q");
  Value *kt = g.addInput(TensorType(DType::F32, makeShape({2, 4, 6})), "kt");
  Value *v = g.addInput(TensorType(DType::F32, makeShape({2, 6, 3})), "v");
  Value *s = b.createValue(OpKind::Mul, {b.createValue(OpKind::MatMul, {q, kt}),
                                         b.constant(Tensor::scalar(DType::F32, 0.5))});
  Value *p = b.createValue(OpKind::Softmax, {s}, {{"axis", int64_t(-1)}});
  g.setOutputs({b.createValue(OpKind::MatMul, {p, v})});
  if (std::string why = targetRefusal(); !why.empty())
    GTEST_SKIP() << why; // reason: $KILN_TEST_CPU cannot run on this host
  CompileOptions opts;
  opts.cpu = testCpu();
  opts.threads = 1;
  opts.cache = false;
  auto exe = compile(g, opts, diag);
  ASSERT_TRUE(exe.succeeded()) << collect.str();
  const runtime::Step *step = nullptr;
  for (const runtime::Step &st : (*exe)->steps())
    if (st.externStep && st.externStep->describe().rfind("onednn attention", 0) == 0)
      step = &st;
  ASSERT_NE(step, nullptr) << "no attention step";
  runtime::SavedStep saved;
  std::string why;
  ASSERT_TRUE(step->externStep->save(saved, why)) << why;
  std::vector<size_t> sizes;
  for (int32_t id : step->buffers)
    sizes.push_back((*exe)->buffers()[static_cast<size_t>(id)].byteSize());
  auto load = [&](const std::string &payload, const std::vector<size_t> &buffers) {
    return runtime::onednn::loadStep(saved.kind, payload, saved.blobs, buffers, nullptr, why);
  };
  ASSERT_NE(load(saved.payload, sizes), nullptr) << why;
  for (size_t i = 0; i < saved.payload.size(); ++i)
    for (uint8_t mask : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xff)}) {
      std::string bad = saved.payload;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      load(bad, sizes); // an error or a step that fits its buffers; no crash
    }
  EXPECT_EQ(load(saved.payload.substr(0, saved.payload.size() - 1), sizes), nullptr);
  std::vector<size_t> small = sizes;
  small.back() -= 4;
  EXPECT_EQ(load(saved.payload, small), nullptr);
  EXPECT_EQ(load(saved.payload, {sizes.begin(), sizes.end() - 1}), nullptr);
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
      auto built = build(op, t, attrs, seed++);
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

std::vector<const OpInfo *> matrixOps() {
  std::vector<const OpInfo *> ops;
  for (const OpInfo &info : allOps())
    if (isGeneric(info))
      ops.push_back(&info);
  return ops;
}

INSTANTIATE_TEST_SUITE_P(Ops, OpMatrixTest, ::testing::ValuesIn(matrixOps()),
                         [](const ::testing::TestParamInfo<const OpInfo *> &info) {
                           return std::string(info.param->mnemonic);
                         });

} // namespace
