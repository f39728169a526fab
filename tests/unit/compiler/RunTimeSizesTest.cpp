//===- RunTimeSizesTest.cpp - Kernels compiled once for every size =========//
//
// Note [Kernels with run-time sizes] (codegen/RunTimeSizes.cpp): graphs with
// symbolic dims are lowered once for a range of sizes; each merged kernel
// is JIT-compiled at $KILN_TEST_CPU (OpMatrix.h) and run at sizes on and
// off the sampled grid, 1 included, against the interpreter running the
// static lowering at that size.
//
//===----------------------------------------------------------------------===//
#include "codegen/RunTimeSizes.h"
#include "codegen/cpu/CpuJit.h"
#include "ir/Parser.h"
#include "tests/unit/compiler/OpMatrix.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace kiln;
using namespace kiln::codegen;
using namespace kiln::testing;

namespace {

struct Case {
  const char *name;
  const char *kir;
  std::vector<SymbolRange> ranges;
  /// Sizes to run at, each one value per range.
  std::vector<std::vector<int64_t>> runAt;
  /// Layouts (layoutKey, kPoolLayout) some merged kernel must have.
  std::vector<std::string> layouts = {};
};

const Case kCases[] = {
    {"bias_gelu",
     R"(graph @g(%x: f32[N,S,40]) -> (f32[N,S,40]) {
  %b = constant dense<[0.5]> : f32[1]
  %y = add(%x, %b) : f32[N,S,40]
  %z = gelu(%y) : f32[N,S,40]
  return %z
})",
     {{"N", 1, 16}, {"S", 1, 128}},
     {{1, 1}, {2, 3}, {3, 17}, {1, 64}, {5, 33}}},
    {"softmax_rows_of_run_time_length",
     R"(graph @g(%x: f32[N,4,S,S]) -> (f32[N,4,S,S]) {
  %c = constant dense<[0.125]> : f32[1]
  %y = mul(%x, %c) : f32[N,4,S,S]
  %z = softmax(%y) : f32[N,4,S,S]
  return %z
})",
     {{"N", 1, 8}, {"S", 1, 64}},
     {{1, 1}, {2, 5}, {1, 16}, {3, 17}, {2, 64}}},
    {"layer_norm_and_mean_over_a_symbol",
     R"(graph @g(%x: f32[N,S,24], %g: f32[24]) -> (f32[N,S,24], f32[N,1,24]) {
  %y = layer_norm(%x, %g) {epsilon = 1e-05} : f32[N,S,24]
  %m = reduce_mean(%x) {axes = [1]} : f32[N,1,24]
  return %y, %m
})",
     {{"N", 1, 8}, {"S", 1, 100}},
     {{1, 1}, {2, 7}, {4, 16}, {1, 99}}},
    {"heads_transposed",
     R"(graph @g(%x: f32[N,S,4,8], %y: f32[N,4,S,8]) -> (f32[N,4,S,8]) {
  %t = transpose(%x) {perm = [0, 2, 1, 3]} : f32[N,4,S,8]
  %z = add(%t, %y) : f32[N,4,S,8]
  return %z
})",
     {{"N", 1, 8}, {"S", 1, 64}},
     {{1, 1}, {2, 3}, {3, 16}, {1, 63}}},
    {"concat_along_a_symbol_and_pad",
     R"(graph @g(%x: f32[N,S,8], %y: f32[N,S,8]) -> (f32[N,2*S,8], f32[N,S+2,8]) {
  %c = concat(%x, %y) {axis = 1} : f32[N,2*S,8]
  %p = pad(%x) {pads = [0, 1, 0, 0, 1, 0], value = -1.5} : f32[N,S+2,8]
  return %c, %p
})",
     {{"N", 1, 8}, {"S", 1, 64}},
     {{1, 1}, {2, 3}, {3, 16}, {1, 64}}},
    {"slice_and_window_extents_with_a_minus_sign",
     R"(graph @g(%x: f32[N,S,8]) -> (f32[?,?,8], f32[?,?,8]) {
  %s = slice(%x) {axes = [1], ends = [9223372036854775807], starts = [1]} : f32[?,?,8]
  %y = sigmoid(%s) : f32[?,?,8]
  %a = slice(%x) {axes = [1], ends = [-2], starts = [0]} : f32[?,?,8]
  %b = slice(%x) {axes = [1], ends = [-1], starts = [1]} : f32[?,?,8]
  %c = slice(%x) {axes = [1], ends = [9223372036854775807], starts = [2]} : f32[?,?,8]
  %ab = add(%a, %b) : f32[?,?,8]
  %w = add(%ab, %c) : f32[?,?,8]
  return %y, %w
})",
     {{"N", 1, 8}, {"S", 3, 64}},
     {{1, 3}, {2, 4}, {3, 17}, {1, 64}}},
    // Note [Shared kernels in channels-last]: the conv's result is stored
    // channels-last, so the SiLU kernel iterates channels-last, the pool
    // runs as a kernel between the two convs and the mean reads a
    // channels-last buffer row by row.
    {"channels_last_after_a_conv",
     R"(graph @g(%x: f32[N,3,12,12]) -> (f32[N,8,6,6], f32[N,8,1,1]) {
  %w = constant dense<[0.25]> : f32[8,3,3,3]
  %c = conv(%x, %w) {pads = [1, 1, 1, 1]} : f32[N,8,12,12]
  %s = sigmoid(%c) : f32[N,8,12,12]
  %a = mul(%c, %s) : f32[N,8,12,12]
  %p = max_pool(%a) {kernel = [2, 2], strides = [2, 2]} : f32[N,8,6,6]
  %w2 = constant dense<[0.5]> : f32[8,8,1,1]
  %d = conv(%p, %w2) : f32[N,8,6,6]
  %m = reduce_mean(%a) {axes = [2, 3], keepdims = true} : f32[N,8,1,1]
  return %d, %m
})",
     {{"N", 1, 16}},
     {{1}, {2}, {5}, {16}},
     {"cl:icc", "pool", "cl:cr"}},
    {"integer_rows",
     R"(graph @g(%x: i32[N,S]) -> (i32[N,1], i32[N,S]) {
  %s = reduce_sum(%x) {axes = [1]} : i32[N,1]
  %m = reduce_max(%x) {axes = [1], keepdims = true} : i32[N,1]
  %d = sub(%x, %m) : i32[N,S]
  return %s, %d
})",
     {{"N", 1, 16}, {"S", 1, 300}},
     {{1, 1}, {2, 2}, {3, 255}, {16, 300}}},
};

std::map<std::string, int64_t> sizesOf(const Case &c, const std::vector<int64_t> &at) {
  std::map<std::string, int64_t> m;
  for (size_t i = 0; i < c.ranges.size(); ++i)
    m[c.ranges[i].name] = at[i];
  return m;
}

/// A buffer of `n` elements of `t` with random values and, for floats, the
/// special classes at fixed places.
std::vector<uint8_t> randomBuffer(DType t, int64_t n, std::mt19937 &rng) {
  std::vector<uint8_t> bytes(static_cast<size_t>(std::max<int64_t>(n, 1)) * dtypeSize(t) + 64);
  Tensor view = Tensor::borrow(t, {n}, nullptr, bytes.data());
  const double special[] = {std::numeric_limits<double>::quiet_NaN(),
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(),
                            -0.0,
                            1e-40,
                            3e38,
                            -7.5};
  for (int64_t i = 0; i < n; ++i) {
    if (isFloat(t))
      view.setDouble(i, i % 97 == 13 ? special[(i / 97) % 7]
                                     : std::uniform_real_distribution<double>(-4, 4)(rng));
    else
      view.setInt(i, std::uniform_int_distribution<int64_t>(-1000, 1000)(rng));
  }
  return bytes;
}

/// Empty when `got` equals `want` (floats within 4e-6 relative, 1e-6
/// absolute; NaN matches NaN, infinities exactly).
std::string compare(DType t, const void *got, const void *want, int64_t n) {
  Tensor g = Tensor::borrow(t, {n}, nullptr, const_cast<void *>(got));
  Tensor w = Tensor::borrow(t, {n}, nullptr, const_cast<void *>(want));
  for (int64_t i = 0; i < n; ++i) {
    if (!isFloat(t)) {
      if (g.getInt(i) != w.getInt(i))
        return "element " + std::to_string(i) + ": " + std::to_string(g.getInt(i)) + " vs " +
               std::to_string(w.getInt(i));
      continue;
    }
    double a = g.getDouble(i), b = w.getDouble(i);
    bool ok = std::isnan(b)   ? std::isnan(a)
              : std::isinf(b) ? a == b
                              : std::fabs(a - b) <= 1e-6 + 4e-6 * std::fabs(b);
    if (!ok)
      return "element " + std::to_string(i) + ": " + std::to_string(a) + " vs " + std::to_string(b);
  }
  return "";
}

TEST(RunTimeSizesTest, MergedKernelsEqualTheStaticLoweringAtEverySize) {
  if (std::string why = targetRefusal(); !why.empty())
    GTEST_SKIP() << why; // reason: $KILN_TEST_CPU cannot run on this host
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  auto target = cpu::resolveCpuTarget(testCpu(), diag);
  ASSERT_TRUE(target.succeeded()) << collect.str();
  cpu::CpuJitOptions jitOptions;
  jitOptions.target = *target;
  auto jit = cpu::CpuJit::create(jitOptions, diag);
  ASSERT_TRUE(jit.succeeded()) << collect.str();
  std::mt19937 rng(5);
  for (const Case &c : kCases) {
    SCOPED_TRACE(c.name);
    auto module = parseModule(c.kir, diag);
    ASSERT_TRUE(module.succeeded()) << collect.str();
    const Graph &g = *(*module)->graphs().front();
    CompileOptions options;
    auto merged = lowerForAllSizes(g, c.ranges, options, diag);
    ASSERT_TRUE(merged.succeeded()) << collect.str();
    std::vector<runtime::KernelFn> fns;
    // Per kernel: (input, the kernel compiled to write over it), as
    // compileSharedKernels compiles them (SharedKernel::inPlace).
    std::vector<std::vector<std::pair<size_t, runtime::KernelFn>>> inPlaceFns;
    bool anySized = false;
    for (const SizedKernel &k : *merged) {
      ASSERT_TRUE(k.kernel.has_value()) << k.name << ": " << k.why;
      anySized |= k.kernel->hasRunTimeSizes();
      auto fn = (*jit)->compile(*k.kernel, Schedule{}, diag);
      ASSERT_TRUE(fn.succeeded()) << k.kernel->str() << collect.str();
      fns.push_back(*fn);
      inPlaceFns.emplace_back();
      const Kernel &m = *k.kernel;
      for (int32_t in : inPlaceInputs(m)) {
        Schedule s;
        s.inPlaceInput = {in};
        auto f = (*jit)->compile(m, s, diag);
        ASSERT_TRUE(f.succeeded()) << m.str() << collect.str();
        inPlaceFns.back().emplace_back(static_cast<size_t>(in), *f);
      }
    }
    EXPECT_TRUE(anySized) << "no kernel reads a run-time size";
    if (std::string(c.name) == "channels_last_after_a_conv") {
      EXPECT_FALSE(inPlaceFns.front().empty()) << "the SiLU kernel is not compiled in place";
    }
    for (const std::string &layout : c.layouts)
      EXPECT_TRUE(std::any_of(merged->begin(), merged->end(),
                              [&](const SizedKernel &k) { return k.layout == layout; }))
          << "no kernel in layout " << layout;
    for (const std::vector<int64_t> &at : c.runAt) {
      std::map<std::string, int64_t> sizes = sizesOf(c, at);
      std::string where;
      for (const auto &[name, v] : sizes)
        where += name + "=" + std::to_string(v) + " ";
      SCOPED_TRACE(where);
      std::vector<std::string> layouts;
      auto fixed = lowerAtSizes(g, sizes, options, diag, nullptr, nullptr, &layouts);
      ASSERT_TRUE(fixed.succeeded()) << collect.str();
      ASSERT_EQ(fixed->size(), merged->size());
      for (size_t i = 0; i < fixed->size(); ++i) {
        const Kernel &want = (*fixed)[i];
        const Kernel &sized = *(*merged)[i].kernel;
        ASSERT_EQ(want.name, sized.name);
        ASSERT_EQ(layouts[i], (*merged)[i].layout) << want.name; // the same buffers
        std::vector<int64_t> values;
        for (const std::string &s : sized.symbols)
          values.push_back(sizes.at(s));
        const Kernel bound = sized.bind(values);
        // The loops may differ (the static lowering chose its inner loop
        // for this size), the buffers may not.
        for (size_t b = 0; b < want.inputs.size(); ++b)
          ASSERT_EQ(bound.inputs[b].shape, want.inputs[b].shape) << sized.str();
        for (size_t b = 0; b < want.outputs.size(); ++b)
          ASSERT_EQ(bound.outputs[b].shape, want.outputs[b].shape) << sized.str();
        std::vector<std::vector<uint8_t>> ins, got, ref;
        std::vector<void *> jitArgs, refArgs;
        for (const KernelBuffer &b : want.inputs) {
          ins.push_back(randomBuffer(b.dtype, b.numElements(), rng));
          jitArgs.push_back(ins.back().data());
          refArgs.push_back(ins.back().data());
        }
        for (const KernelBuffer &b : want.outputs) {
          size_t bytes =
              static_cast<size_t>(std::max<int64_t>(b.numElements(), 1)) * dtypeSize(b.dtype);
          got.emplace_back(bytes, 0xAB);
          ref.emplace_back(bytes, 0xCD);
        }
        for (size_t o = 0; o < got.size(); ++o) {
          jitArgs.push_back(got[o].data());
          refArgs.push_back(ref[o].data());
        }
        jitArgs.push_back(values.data());
        // In three pieces, as threads split the outer range.
        const int64_t n = bound.numOuter();
        fns[i](jitArgs.data(), 0, n / 3);
        fns[i](jitArgs.data(), n / 3, 2 * n / 3);
        fns[i](jitArgs.data(), 2 * n / 3, n);
        interpretKernel(want, refArgs);
        for (size_t o = 0; o < got.size(); ++o)
          EXPECT_EQ(compare(want.outputs[o].dtype, got[o].data(), ref[o].data(),
                            want.outputs[o].numElements()),
                    "")
              << "output " << o << " of " << sized.str();
        // Written in place: one buffer, the input's copy, is read and
        // written, as the runtime passes it for both.
        for (const auto &[in, inPlaceFn] : inPlaceFns[i]) {
          std::vector<uint8_t> alias = ins[in];
          std::vector<void *> args;
          for (size_t b = 0; b < ins.size(); ++b)
            args.push_back(b == in ? alias.data() : ins[b].data());
          args.push_back(alias.data());
          args.push_back(values.data());
          inPlaceFn(args.data(), 0, n / 3);
          inPlaceFn(args.data(), n / 3, 2 * n / 3);
          inPlaceFn(args.data(), 2 * n / 3, n);
          EXPECT_EQ(compare(want.outputs[0].dtype, alias.data(), ref[0].data(),
                            want.outputs[0].numElements()),
                    "")
              << "in place of input " << in << ": " << sized.str();
        }
      }
    }
  }
}

TEST(RunTimeSizesTest, SamplePlanFitsAGridAndChecksEveryCorner) {
  std::string why;
  auto plan = samplePlan({{"N", 1, 64}, {"S", 1, 512}}, why);
  ASSERT_TRUE(plan.has_value()) << why;
  EXPECT_EQ(plan->fit.size(), 9u);
  for (const std::vector<int64_t> &corner :
       std::vector<std::vector<int64_t>>{{2, 2}, {2, 512}, {64, 2}, {64, 512}})
    EXPECT_NE(std::find(plan->check.begin(), plan->check.end(), corner), plan->check.end());
  EXPECT_FALSE(samplePlan({{"N", 1, 4}}, why).has_value());
  EXPECT_NE(why.find("fewer than 4 sizes"), std::string::npos) << why;
  EXPECT_FALSE(samplePlan({{"N", 1, int64_t(1) << 20}}, why).has_value());
  EXPECT_NE(why.find("checked up to"), std::string::npos) << why;
}

// A constant that is no polynomial of the sizes (here S*S*S) or differs in
// structure between sizes leaves the group without a merged kernel, saying
// what differed.
TEST(RunTimeSizesTest, WhatNoPolynomialFitsIsRefusedWithTheReason) {
  auto sample = [](int64_t s, int64_t constant) {
    Kernel k;
    k.name = "k";
    k.outputs.push_back({DType::I64, {s}, "y"});
    k.outer = {s};
    k.inner = 1;
    Stage st;
    st.stores.push_back({0, k.dag.index(0), k.dag.constInt(DType::I64, constant)});
    k.stages.push_back(st);
    return SampledKernel{std::move(k), {s}};
  };
  std::string why;
  std::vector<SampledKernel> cube, square;
  for (int64_t s : {37, 38, 39, 2, 64}) {
    cube.push_back(sample(s, s * s * s));
    square.push_back(sample(s, 3 * s * s - 1));
  }
  EXPECT_FALSE(generalizeKernel({"S"}, cube, 3, why).has_value());
  EXPECT_NE(why.find("constant %1 is 8 at S=2"), std::string::npos) << why;
  why.clear();
  auto k = generalizeKernel({"S"}, square, 3, why);
  ASSERT_TRUE(k.has_value()) << why;
  EXPECT_EQ(k->outerDims.at(0).str(), "S");
  EXPECT_EQ(k->bind({5}).outer, std::vector<int64_t>{5});
  std::vector<int64_t> y(5, 0);
  interpretKernel(*k, {y.data()}, {5});
  EXPECT_EQ(y, std::vector<int64_t>(5, 74));
}

} // namespace
