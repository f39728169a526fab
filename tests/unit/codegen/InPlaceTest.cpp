//===- InPlaceTest.cpp - canWriteInPlace and in-place JIT kernels -*- C++ -*-===//
//
// Which lowered kernels may write their output over an input
// (codegen::canWriteInPlace): elementwise chains, softmax and layer norm
// may; kernels that read the input anywhere but where they write (a
// transpose, a broadcast), kernels with two outputs, reductions to a
// smaller output and element-size changes may not. Then the JIT: a kernel
// compiled with Schedule::inPlaceInput, given one pointer for the input
// and the output, computes what the out-of-place kernel computes.
//
//===----------------------------------------------------------------------===//
#include "codegen/Fusion.h"
#include "codegen/KernelIR.h"
#include "codegen/cpu/CpuJit.h"
#include "codegen/cpu/dnnl/OneDnnSteps.h"
#include "ir/Builder.h"

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <new>
#include <random>

using namespace kiln;
using namespace kiln::codegen;

namespace {

/// A graph built with the Builder, planned and lowered.
struct Lowered {
  std::unique_ptr<Graph> graph = std::make_unique<Graph>("g");
  DiagnosticEngine diag;
  ScopedDiagnosticCollector quiet{diag};
  Builder b{*graph, diag};

  Value *input(std::vector<int64_t> shape, std::string name, DType t = DType::F32) {
    return graph->addInput(TensorType(t, std::move(shape)), std::move(name));
  }
  Value *op(OpKind kind, std::vector<Value *> operands, std::vector<NamedAttr> attrs = {}) {
    Value *v = b.createValue(kind, std::move(operands), std::move(attrs));
    EXPECT_NE(v, nullptr) << opInfo(kind).mnemonic << ": " << quiet.str();
    return v;
  }
  /// Sets the outputs, plans fusion and lowers the one kernel group.
  Kernel kernel(std::vector<Value *> outputs) {
    graph->setOutputs(std::move(outputs));
    auto plan = planFusion(*graph, FusionOptions{&cpu::oneDnnCapabilities()}, diag);
    EXPECT_TRUE(plan.succeeded()) << quiet.str();
    if (!plan.succeeded())
      return {};
    std::vector<const FusionGroup *> kernels;
    for (const FusionGroup &g : plan->groups)
      if (g.kind == FusionGroup::Kind::Kernel)
        kernels.push_back(&g);
    EXPECT_EQ(kernels.size(), 1u) << plan->explain();
    if (kernels.empty())
      return {};
    auto k = lowerGroup(*kernels[0], diag);
    EXPECT_TRUE(k.succeeded()) << quiet.str();
    return k.succeeded() ? k.take() : Kernel{};
  }
};

/// The index of the kernel input holding graph value `name`.
int32_t inputIndex(const Kernel &k, const std::string &name) {
  for (size_t i = 0; i < k.inputs.size(); ++i)
    if (k.inputs[i].name == name)
      return static_cast<int32_t>(i);
  ADD_FAILURE() << "no kernel input %" << name << " in\n" << k.str();
  return -1;
}

} // namespace

//===----------------------------------------------------------------------===//
// canWriteInPlace
//===----------------------------------------------------------------------===//

TEST(InPlaceTest, ElementwiseChainMayOverwriteEitherInput) {
  Lowered l;
  Value *x = l.input({8, 32}, "x");
  Value *y = l.input({8, 32}, "y");
  Kernel k = l.kernel({l.op(OpKind::Relu, {l.op(OpKind::Add, {x, l.op(OpKind::Exp, {y})})})});
  ASSERT_EQ(k.outputs.size(), 1u);
  EXPECT_TRUE(canWriteInPlace(k, 0, inputIndex(k, "x"))) << k.str();
  EXPECT_TRUE(canWriteInPlace(k, 0, inputIndex(k, "y"))) << k.str();
  // Out-of-range indices.
  EXPECT_FALSE(canWriteInPlace(k, 1, 0));
  EXPECT_FALSE(canWriteInPlace(k, 0, 2));
  EXPECT_FALSE(canWriteInPlace(k, -1, 0));
  EXPECT_FALSE(canWriteInPlace(k, 0, -1));
}

TEST(InPlaceTest, ReshapedElementwiseMayOverwrite) {
  Lowered l;
  Value *x = l.input({4, 6, 8}, "x");
  Value *r = l.op(OpKind::Reshape, {x}, {{"shape", Ints{24, 8}}});
  Kernel k = l.kernel({l.op(OpKind::Sigmoid, {r})});
  EXPECT_TRUE(canWriteInPlace(k, 0, inputIndex(k, "x"))) << k.str();
}

TEST(InPlaceTest, SoftmaxMayOverwriteItsInput) {
  for (OpKind kind : {OpKind::Softmax, OpKind::LogSoftmax}) {
    Lowered l;
    Value *x = l.input({6, 40}, "x");
    Kernel k = l.kernel({l.op(kind, {x}, {{"axis", int64_t(-1)}})});
    ASSERT_EQ(k.stages.size(), 3u) << k.str();
    EXPECT_TRUE(canWriteInPlace(k, 0, inputIndex(k, "x"))) << k.str();
  }
}

TEST(InPlaceTest, LayerNormMayOverwriteItsInputButNotItsScale) {
  Lowered l;
  Value *x = l.input({4, 7, 32}, "x");
  Value *scale = l.input({32}, "scale");
  Value *bias = l.input({32}, "bias");
  Kernel k = l.kernel({l.op(OpKind::LayerNorm, {x, scale, bias}, {{"axis", int64_t(-1)}})});
  EXPECT_TRUE(canWriteInPlace(k, 0, inputIndex(k, "x"))) << k.str();
  EXPECT_FALSE(canWriteInPlace(k, 0, inputIndex(k, "scale"))) << k.str();
  EXPECT_FALSE(canWriteInPlace(k, 0, inputIndex(k, "bias"))) << k.str();
}

TEST(InPlaceTest, TransposedReadMayNot) {
  Lowered l;
  Value *x = l.input({8, 32}, "x");
  Kernel k = l.kernel({l.op(OpKind::Relu, {l.op(OpKind::Transpose, {x}, {{"perm", Ints{1, 0}}})})});
  ASSERT_EQ(k.outputs[0].numElements(), k.inputs[0].numElements());
  EXPECT_FALSE(canWriteInPlace(k, 0, inputIndex(k, "x"))) << k.str();
}

TEST(InPlaceTest, InputReadAtTwoPlacesMayNot) {
  // x + transpose(x): x's element (i, j) is read where (j, i) is written.
  Lowered l;
  Value *x = l.input({16, 16}, "x");
  Kernel k =
      l.kernel({l.op(OpKind::Add, {x, l.op(OpKind::Transpose, {x}, {{"perm", Ints{1, 0}}})})});
  EXPECT_FALSE(canWriteInPlace(k, 0, inputIndex(k, "x"))) << k.str();
}

TEST(InPlaceTest, BroadcastReadMayNot) {
  Lowered l;
  Value *x = l.input({8, 32}, "x");
  Value *row = l.input({32}, "row");
  Value *col = l.input({8, 1}, "col");
  Kernel k = l.kernel({l.op(OpKind::Mul, {l.op(OpKind::Add, {x, row}), col})});
  EXPECT_TRUE(canWriteInPlace(k, 0, inputIndex(k, "x"))) << k.str();
  EXPECT_FALSE(canWriteInPlace(k, 0, inputIndex(k, "row"))) << k.str();
  EXPECT_FALSE(canWriteInPlace(k, 0, inputIndex(k, "col"))) << k.str();
}

TEST(InPlaceTest, KernelWithTwoOutputsMayNot) {
  Lowered l;
  Value *x = l.input({8, 32}, "x");
  Value *e = l.op(OpKind::Exp, {x});
  Kernel k = l.kernel({e, l.op(OpKind::Relu, {e})});
  ASSERT_EQ(k.outputs.size(), 2u) << k.str();
  EXPECT_FALSE(canWriteInPlace(k, 0, inputIndex(k, "x"))) << k.str();
  EXPECT_FALSE(canWriteInPlace(k, 1, inputIndex(k, "x"))) << k.str();
}

TEST(InPlaceTest, ReductionToASmallerOutputMayNot) {
  Lowered l;
  Value *x = l.input({8, 32}, "x");
  Kernel k = l.kernel({l.op(OpKind::ReduceSum, {x}, {{"axes", Ints{1}}})});
  EXPECT_FALSE(canWriteInPlace(k, 0, inputIndex(k, "x"))) << k.str();
  // Keeping the dims does not change the element count.
  Lowered m;
  Value *y = m.input({8, 32}, "y");
  Kernel k2 = m.kernel({m.op(OpKind::ReduceMax, {y}, {{"axes", Ints{1}}, {"keepdims", true}})});
  EXPECT_FALSE(canWriteInPlace(k2, 0, inputIndex(k2, "y"))) << k2.str();
}

TEST(InPlaceTest, ElementSizeChangeMayNot) {
  Lowered l;
  Value *x = l.input({8, 32}, "x");
  Kernel k = l.kernel({l.op(OpKind::Cast, {x}, {{"to", DType::F16}})});
  EXPECT_FALSE(canWriteInPlace(k, 0, inputIndex(k, "x"))) << k.str();
  // Same size, other type: allowed (each element is read, then replaced).
  Lowered m;
  Value *y = m.input({8, 32}, "y");
  Kernel k2 = m.kernel({m.op(OpKind::Cast, {y}, {{"to", DType::I32}})});
  EXPECT_TRUE(canWriteInPlace(k2, 0, inputIndex(k2, "y"))) << k2.str();
}

//===----------------------------------------------------------------------===//
// JIT: in place equals out of place
//===----------------------------------------------------------------------===//

namespace {

/// 64-byte aligned float storage.
struct Floats {
  float *p;
  size_t n;
  explicit Floats(size_t count) : n(count) {
    p = static_cast<float *>(
        ::operator new(std::max<size_t>(count, 16) * sizeof(float), std::align_val_t(64)));
    std::memset(p, 0, std::max<size_t>(count, 16) * sizeof(float));
  }
  ~Floats() { ::operator delete(p, std::align_val_t(64)); }
  Floats(const Floats &) = delete;
  Floats &operator=(const Floats &) = delete;
};

cpu::CpuJit &jit() {
  static std::shared_ptr<cpu::CpuJit> j = [] {
    DiagnosticEngine diag;
    auto created = cpu::CpuJit::create(cpu::CpuJitOptions{}, diag);
    if (!created) {
      std::fprintf(stderr, "cannot create the CPU JIT\n");
      std::abort();
    }
    return *created;
  }();
  return *j;
}

/// Compiles `k` out of place and in place over input `in` (all inputs
/// f32), runs both on the same random data (the in-place one with the
/// input's pointer as the output's, over the outer range in two halves),
/// and returns how many output elements differ in their bits (-1 when it
/// could not run). Other inputs must stay untouched.
int inPlaceMismatches(const Kernel &k, int32_t in, uint32_t seed) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  auto outOfPlace = jit().compile(k, Schedule{}, diag);
  EXPECT_TRUE(outOfPlace.succeeded()) << collect.str();
  Schedule s;
  s.inPlaceInput = {in};
  auto inPlace = jit().compile(k, s, diag);
  EXPECT_TRUE(inPlace.succeeded()) << collect.str();
  if (!outOfPlace.succeeded() || !inPlace.succeeded())
    return -1;

  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 2.f);
  std::vector<std::unique_ptr<Floats>> a, b;
  for (const KernelBuffer &buf : k.inputs) {
    EXPECT_EQ(buf.dtype, DType::F32);
    const auto n = static_cast<size_t>(buf.numElements());
    a.push_back(std::make_unique<Floats>(n));
    b.push_back(std::make_unique<Floats>(n));
    for (size_t i = 0; i < n; ++i)
      a.back()->p[i] = b.back()->p[i] = d(rng);
  }
  const auto outN = static_cast<size_t>(k.outputs[0].numElements());
  Floats out(outN);
  std::vector<void *> argsA, argsB;
  for (size_t i = 0; i < a.size(); ++i) {
    argsA.push_back(a[i]->p);
    argsB.push_back(b[i]->p);
  }
  argsA.push_back(out.p);
  argsB.push_back(b[static_cast<size_t>(in)]->p); // the same memory
  const int64_t n = k.numOuter();
  (*outOfPlace)(argsA.data(), 0, n);
  (*inPlace)(argsB.data(), 0, n / 2);
  (*inPlace)(argsB.data(), n / 2, n);
  const float *got = b[static_cast<size_t>(in)]->p;
  int bad = 0;
  for (size_t i = 0; i < outN; ++i)
    bad += std::memcmp(&got[i], &out.p[i], sizeof(float)) != 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (static_cast<int32_t>(i) != in) {
      EXPECT_EQ(std::memcmp(a[i]->p, b[i]->p, a[i]->n * sizeof(float)), 0) << "input " << i;
    }
  return bad;
}

void expectInPlaceMatches(const Kernel &k, int32_t in, uint32_t seed) {
  ASSERT_TRUE(canWriteInPlace(k, 0, in)) << k.str();
  EXPECT_EQ(inPlaceMismatches(k, in, seed), 0) << k.str();
}

} // namespace

TEST(InPlaceJitTest, ElementwiseInPlaceEqualsOutOfPlace) {
  Lowered l;
  Value *x = l.input({9, 37}, "x");
  Value *y = l.input({9, 37}, "y");
  Value *row = l.input({37}, "row");
  Value *e = l.op(OpKind::Mul, {l.op(OpKind::Add, {x, row}), l.op(OpKind::Tanh, {y})});
  Kernel k = l.kernel({l.op(OpKind::Relu, {e})});
  expectInPlaceMatches(k, inputIndex(k, "x"), 1);
  expectInPlaceMatches(k, inputIndex(k, "y"), 2);
}

TEST(InPlaceJitTest, SoftmaxInPlaceEqualsOutOfPlace) {
  for (int64_t cols : {1, 7, 64, 133}) {
    Lowered l;
    Value *x = l.input({11, cols}, "x");
    Kernel k = l.kernel({l.op(OpKind::Softmax, {x}, {{"axis", int64_t(-1)}})});
    expectInPlaceMatches(k, inputIndex(k, "x"), static_cast<uint32_t>(cols));
  }
}

TEST(InPlaceJitTest, LayerNormInPlaceEqualsOutOfPlace) {
  Lowered l;
  Value *x = l.input({3, 5, 48}, "x");
  Value *scale = l.input({48}, "scale");
  Value *bias = l.input({48}, "bias");
  Kernel k = l.kernel({l.op(OpKind::LayerNorm, {x, scale, bias}, {{"axis", int64_t(-1)}})});
  expectInPlaceMatches(k, inputIndex(k, "x"), 3);
}

TEST(InPlaceJitTest, ForcedInPlaceTransposeIsWrong) {
  // The control: a kernel canWriteInPlace refuses, compiled in place
  // anyway, overwrites elements it has yet to read. If this passed, the
  // comparisons above could not see an aliasing bug.
  Lowered l;
  Value *x = l.input({16, 16}, "x");
  Kernel k = l.kernel({l.op(OpKind::Relu, {l.op(OpKind::Transpose, {x}, {{"perm", Ints{1, 0}}})})});
  ASSERT_FALSE(canWriteInPlace(k, 0, inputIndex(k, "x")));
  EXPECT_GT(inPlaceMismatches(k, inputIndex(k, "x"), 4), 0);
}
