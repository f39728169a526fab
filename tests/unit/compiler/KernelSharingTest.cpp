//===- KernelSharingTest.cpp - One kernel for kernels of several shapes ---===//
//
// Note [Kernels shared across shapes] (codegen/KernelSharing.cpp): graphs
// whose kernels differ only in sizes are compiled with and without sharing
// at $KILN_TEST_CPU (OpMatrix.h), on inputs with every value class, at 1
// and 2 threads: the shared kernels give the bits of their own compiles
// (and their artifacts too: compileAndRun checks that). The rules that keep
// a kernel's own compile are checked on kernels built by hand, and every
// merged kernel bound to a member's sizes computes what the member does.
//
//===----------------------------------------------------------------------===//
#include "codegen/KernelSharing.h"
#include "codegen/Compiler.h"
#include "ir/Interpreter.h"
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

/// Negative, +-0, subnormal, huge, NaN, +-inf, and ordinary values.
Tensor inputWithEveryValueClass(const TensorType &t, std::mt19937 &rng) {
  std::vector<int64_t> shape;
  for (const Dim &d : t.shape)
    shape.push_back(d.size());
  Tensor x = Tensor::zeros(t.dtype, shape);
  const double specials[] = {-0.0,
                             0.0,
                             1e-40,
                             -1e-40,
                             1e30,
                             -1e30,
                             std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity()};
  std::normal_distribution<double> normal(0.0, 3.0);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.setDouble(i, i % 4 == 3 ? specials[(i / 4) % 9] : normal(rng));
  return x;
}

struct Case {
  const char *name;
  const char *kir;
  /// Map kernels only: the same arithmetic, so the same bits. Reductions
  /// may sum in another order with a run-time trip count.
  bool sameBits;
};

const Case kCases[] = {
    {"pointwise_at_three_widths",
     R"(graph @g(%a: f32[4,17], %b: f32[6,40], %c: f32[3,129]) -> (f32[4,17], f32[6,40], f32[3,129]) {
  %k = constant dense<[0.5]> : f32[1]
  %ya = mul(%a, %k) : f32[4,17]
  %za = sigmoid(%ya) : f32[4,17]
  %yb = mul(%b, %k) : f32[6,40]
  %zb = sigmoid(%yb) : f32[6,40]
  %yc = mul(%c, %k) : f32[3,129]
  %zc = sigmoid(%yc) : f32[3,129]
  return %za, %zb, %zc
})",
     true},
    {"broadcast_bias_at_two_ranks_of_rows",
     R"(graph @g(%a: f32[2,5,24], %ba: f32[24], %b: f32[3,7,40], %bb: f32[40]) -> (f32[2,5,24], f32[3,7,40]) {
  %ya = add(%a, %ba) : f32[2,5,24]
  %za = relu(%ya) : f32[2,5,24]
  %yb = add(%b, %bb) : f32[3,7,40]
  %zb = relu(%yb) : f32[3,7,40]
  return %za, %zb
})",
     true},
    {"softmax_rows_of_three_lengths",
     R"(graph @g(%a: f32[3,7], %b: f32[5,33], %c: f32[2,100]) -> (f32[3,7], f32[5,33], f32[2,100]) {
  %sa = softmax(%a) : f32[3,7]
  %sb = softmax(%b) : f32[5,33]
  %sc = softmax(%c) : f32[2,100]
  return %sa, %sb, %sc
})",
     false},
};

TEST(KernelSharingTest, SharedKernelsGiveTheAnswersOfTheirOwnCompiles) {
  if (std::string why = targetRefusal(); !why.empty())
    GTEST_SKIP() << why; // reason: $KILN_TEST_CPU cannot run on this host
  std::mt19937 rng(11);
  for (const Case &c : kCases) {
    SCOPED_TRACE(c.name);
    DiagnosticEngine diag;
    ScopedDiagnosticCollector collect(diag);
    auto module = parseModule(c.kir, diag);
    ASSERT_TRUE(module.succeeded()) << collect.str();
    const Graph &g = *(*module)->graphs().front();
    std::vector<Tensor> inputs;
    for (const Value *v : g.inputs())
      inputs.push_back(inputWithEveryValueClass(v->type(), rng));
    CompileOptions own;
    own.shareKernels = false;
    CompileReport ownReport;
    auto want = compileAndRun(g, inputs, std::string(c.name) + " unshared", own, &ownReport);
    ASSERT_TRUE(want.has_value());
    EXPECT_EQ(ownReport.numSharedKernels, 0);
    for (int threads : {1, 2}) {
      CompileOptions shared;
      shared.threads = threads;
      CompileReport report;
      auto got = compileAndRun(g, inputs, std::string(c.name) + " shared", shared, &report);
      ASSERT_TRUE(got.has_value());
      EXPECT_EQ(report.numSharedKernels, report.numKernels) << report.counts();
      EXPECT_GE(report.numKernels, 2);
      ASSERT_EQ(got->size(), want->size());
      for (size_t i = 0; i < got->size(); ++i) {
        const Tensor &a = (*got)[i], &b = (*want)[i];
        ASSERT_EQ(a.shape(), b.shape());
        for (int64_t e = 0; e < a.numel(); ++e) {
          const double x = a.getDouble(e), y = b.getDouble(e);
          if (c.sameBits) {
            const float fx = static_cast<float>(x), fy = static_cast<float>(y);
            ASSERT_EQ(std::memcmp(&fx, &fy, sizeof(float)), 0)
                << "output " << i << " element " << e << ": " << x << " vs " << y;
          } else if (!(std::isnan(x) && std::isnan(y))) {
            ASSERT_NEAR(x, y, 1e-6 + 1e-6 * std::fabs(y)) << "output " << i << " element " << e;
          }
        }
      }
    }
  }
}

/// out[i, j] = f(load0[i * inner + j]) over outer [rows], inner `inner`;
/// `body` builds f given the DAG, the loaded value and the inner index.
Kernel rowKernel(int64_t rows, int64_t inner,
                 const std::function<ScalarRef(ScalarDag &, ScalarRef, ScalarRef)> &body) {
  Kernel k;
  k.name = "k" + std::to_string(rows) + "x" + std::to_string(inner);
  k.inputs.push_back({DType::F32, {rows, inner}, "x"});
  k.outputs.push_back({DType::F32, {rows, inner}, "y"});
  k.outer = {rows};
  k.inner = inner;
  ScalarDag &d = k.dag;
  ScalarRef j = d.index(1);
  ScalarRef at = d.add(d.mul(d.index(0), d.constInt(DType::I64, inner)), j);
  Stage st;
  st.stores.push_back({0, at, body(d, d.load(DType::F32, 0, at), j)});
  k.stages.push_back(st);
  return k;
}

size_t groupsOf(const std::vector<Kernel> &kernels) {
  std::vector<const Kernel *> ptrs;
  for (const Kernel &k : kernels)
    ptrs.push_back(&k);
  std::vector<Schedule> schedules(kernels.size());
  return shareAcrossShapes(ptrs, schedules).size();
}

TEST(KernelSharingTest, KernelsThatWouldLoseWhatTheirSizesGiveKeepTheirOwnCompile) {
  auto scaled = [](double c) {
    return
        [c](ScalarDag &d, ScalarRef x, ScalarRef) { return d.mul(x, d.constFloat(DType::F32, c)); };
  };
  // Sizes and an integral float constant differ: one group.
  EXPECT_EQ(groupsOf({rowKernel(3, 17, scaled(2.0)), rowKernel(5, 40, scaled(3.0))}), 1u);
  // A float constant that is no integer differs: none; nor -0 against +0
  // (a size cast to a float is never -0), nor NaN against a number.
  EXPECT_EQ(groupsOf({rowKernel(3, 17, scaled(0.5)), rowKernel(5, 40, scaled(0.25))}), 0u);
  EXPECT_EQ(groupsOf({rowKernel(3, 17, scaled(0.0)), rowKernel(5, 40, scaled(-0.0))}), 0u);
  EXPECT_EQ(groupsOf({rowKernel(3, 17, scaled(NAN)), rowKernel(5, 40, scaled(1.0))}), 0u);
  EXPECT_EQ(groupsOf({rowKernel(3, 17, scaled(-0.0)), rowKernel(5, 40, scaled(-0.0))}), 1u);
  // The inner index reaches a comparison (a pad or concat along it): none.
  auto padded = [](int64_t edge) {
    return [edge](ScalarDag &d, ScalarRef x, ScalarRef j) {
      return d.select(d.compare(ScalarOp::Lt, j, d.constInt(DType::I64, edge)), x,
                      d.constFloat(DType::F32, 0.0));
    };
  };
  EXPECT_EQ(groupsOf({rowKernel(3, 17, padded(4)), rowKernel(5, 40, padded(9))}), 0u);
  // A divisor that differs: none; the same divisor at other sizes: one.
  auto gathered = [](int64_t rows, int64_t inner, int64_t divisor) {
    Kernel k = rowKernel(rows, inner, [](ScalarDag &, ScalarRef x, ScalarRef) { return x; });
    ScalarDag &d = k.dag;
    ScalarRef row = d.div(d.index(0), d.constInt(DType::I64, divisor));
    ScalarRef at = d.add(d.mul(row, d.constInt(DType::I64, inner)), d.index(1));
    k.stages[0].stores[0].value = d.load(DType::F32, 0, at);
    return k;
  };
  EXPECT_EQ(groupsOf({gathered(6, 17, 2), gathered(9, 40, 3)}), 0u);
  EXPECT_EQ(groupsOf({gathered(6, 17, 3), gathered(9, 40, 3)}), 1u);
}

TEST(KernelSharingTest, TheMergedKernelAtAMembersSizesIsThatMember) {
  std::vector<Kernel> kernels;
  for (auto [rows, inner] : {std::pair<int64_t, int64_t>{3, 17}, {5, 40}, {1, 7}, {4, 129}})
    kernels.push_back(rowKernel(rows, inner, [](ScalarDag &d, ScalarRef x, ScalarRef) {
      return d.add(d.mul(x, x), d.constFloat(DType::F32, 1.0));
    }));
  std::vector<const Kernel *> ptrs;
  for (const Kernel &k : kernels)
    ptrs.push_back(&k);
  std::vector<Schedule> schedules(kernels.size());
  auto shared = shareAcrossShapes(ptrs, schedules);
  ASSERT_EQ(shared.size(), 1u);
  // [1, 7] has an outer extent of 1, which the lowering would fold; built
  // by hand it has the same structure and joins.
  EXPECT_EQ(shared[0].members.size(), kernels.size());
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.f, 2.f);
  for (size_t m = 0; m < shared[0].members.size(); ++m) {
    const Kernel &own = kernels[shared[0].members[m]];
    std::vector<float> x(static_cast<size_t>(own.inputs[0].numElements()));
    for (float &v : x)
      v = normal(rng);
    std::vector<float> want(x.size()), got(x.size());
    interpretKernel(own, {x.data(), want.data()});
    interpretKernel(shared[0].kernel, {x.data(), got.data()}, shared[0].sizes[m]);
    EXPECT_EQ(got, want) << own.name;
  }
}

} // namespace
