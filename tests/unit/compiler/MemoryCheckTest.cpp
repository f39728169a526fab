//===- MemoryCheckTest.cpp - Executable memory plans and pools --*- C++ -*-===//
//
// Hand-built executables (C++ KernelFns) given deliberately wrong memory
// plans: finalize() must refuse each one, naming the buffers and the step,
// and change nothing. A correct plan with an in-place pair runs right.
// Output blocks and call contexts are pooled. And a compiled model (oneDNN
// matmul with an epilogue, fused pointwise kernels, a softmax written in
// place over its dying input, a reshape) run from 8 threads at once gives
// bit-identical outputs that match the interpreter.
//
//===----------------------------------------------------------------------===//
#include "codegen/Compiler.h"
#include "ir/Builder.h"
#include "ir/Interpreter.h"
#include "runtime/Executable.h"
#include "runtime/reference/HostTensors.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>

using namespace kiln;
using namespace kiln::runtime;

namespace {

// Every buffer is f32[3,8]: 96 bytes, 128 once aligned. Kernels run rows.
constexpr int64_t kRows = 3, kCols = 8;
constexpr uint64_t kSlot = 128;

/// buffers[1] = buffers[0] + 1.
void addOne(void *const *buffers, int64_t begin, int64_t end) {
  const float *in = static_cast<const float *>(buffers[0]);
  float *out = static_cast<float *>(buffers[1]);
  for (int64_t i = begin * kCols; i < end * kCols; ++i)
    out[i] = in[i] + 1;
}

/// buffers[2] = buffers[0] + buffers[1]; records whether it ran in place
/// (the output's pointer is the second input's).
std::atomic<int> gAddRanInPlace{0};
void add(void *const *buffers, int64_t begin, int64_t end) {
  const float *a = static_cast<const float *>(buffers[0]);
  const float *b = static_cast<const float *>(buffers[1]);
  float *out = static_cast<float *>(buffers[2]);
  if (buffers[2] == buffers[1])
    gAddRanInPlace = 1;
  for (int64_t i = begin * kCols; i < end * kCols; ++i)
    out[i] = a[i] + b[i];
}

HostTensor iota(float start) {
  HostTensor t = HostTensor::allocate(DType::F32, {kRows, kCols});
  for (int64_t i = 0; i < t.numElements(); ++i)
    static_cast<float *>(t.data)[i] = start + static_cast<float>(i);
  return t;
}

/// x -> t1 = x + 1 (step 0) -> t2 = t1 + 1 (step 1) -> t3 = t1 + t2
/// (step 2) -> y = t3 + 1 (step 3), y the output. Lifetimes: t1 0..2,
/// t2 1..2, t3 2..3. With `inPlace`, step 2 declares t3 in place of t2
/// (which dies there).
struct Chain {
  std::unique_ptr<Executable> exe = std::make_unique<Executable>();
  int32_t x, t1, t2, t3, y;

  explicit Chain(std::vector<std::pair<int, int>> inPlaceAt2 = {},
                 std::vector<std::pair<int, int>> inPlaceAt1 = {}) {
    x = exe->addInput(DType::F32, {kRows, kCols}, "x");
    t1 = exe->addTemp(DType::F32, {kRows, kCols}, "t1");
    t2 = exe->addTemp(DType::F32, {kRows, kCols}, "t2");
    t3 = exe->addTemp(DType::F32, {kRows, kCols}, "t3");
    y = exe->addTemp(DType::F32, {kRows, kCols}, "y");
    auto ids = [&](const std::vector<std::pair<int, int>> &pairs) {
      std::vector<std::pair<int32_t, int32_t>> out;
      for (auto [w, r] : pairs)
        out.emplace_back(id(w), id(r));
      return out;
    };
    exe->addKernelStep("inc1", addOne, {x, t1}, 1, kRows);
    exe->addKernelStep("inc2", addOne, {t1, t2}, 1, kRows, true, 1, ids(inPlaceAt1));
    exe->addKernelStep("sum", add, {t1, t2, t3}, 2, kRows, true, 1, ids(inPlaceAt2));
    exe->addKernelStep("inc3", addOne, {t3, y}, 1, kRows);
    exe->setOutputs({y});
  }
  /// 1 = t1, 2 = t2, 3 = t3.
  int32_t id(int k) const { return k == 1 ? t1 : k == 2 ? t2 : t3; }
  std::vector<uint64_t> offsets(uint64_t o1, uint64_t o2, uint64_t o3) const {
    std::vector<uint64_t> v(exe->buffers().size(), 0);
    v[static_cast<size_t>(t1)] = o1;
    v[static_cast<size_t>(t2)] = o2;
    v[static_cast<size_t>(t3)] = o3;
    return v;
  }
  /// Runs once and checks y = 2x + 4.
  void expectRunsRight() const {
    HostTensor in = iota(0);
    std::vector<HostTensor> outs;
    Status st = exe->run({&in, 1}, outs);
    ASSERT_TRUE(st.ok()) << st.error;
    ASSERT_EQ(outs.size(), 1u);
    for (int64_t i = 0; i < in.numElements(); ++i)
      ASSERT_EQ(static_cast<float *>(outs[0].data)[i], 2.f * static_cast<float>(i) + 4.f) << i;
  }
};

void expectContains(const std::string &s, const std::vector<std::string> &parts) {
  for (const std::string &p : parts)
    EXPECT_NE(s.find(p), std::string::npos) << "'" << p << "' not in: " << s;
}

} // namespace

//===----------------------------------------------------------------------===//
// Wrong plans are refused
//===----------------------------------------------------------------------===//

TEST(MemoryCheckTest, TwoLiveTempsAtTheSameOffset) {
  Chain c;
  Status st = c.exe->finalize(3 * kSlot, c.offsets(0, 0, 2 * kSlot));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error, "step 1 (inc2) writes %t2 [0, 96) over %t1 [0, 96), live from step 0 to "
                      "step 2");
  EXPECT_FALSE(c.exe->finalized());
  // Partial overlap counts too.
  Chain d;
  st = d.exe->finalize(4 * kSlot, d.offsets(0, 2 * kSlot, 2 * kSlot + 64));
  ASSERT_FALSE(st.ok());
  expectContains(st.error, {"step 2 (sum)", "%t3 [320, 416)", "%t2 [256, 352)"});
}

TEST(MemoryCheckTest, MisalignedOffset) {
  Chain c;
  Status st = c.exe->finalize(4 * kSlot, c.offsets(0, kSlot + 32, 3 * kSlot));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error, "%t2 at offset 160 is not aligned to 64 bytes");
}

TEST(MemoryCheckTest, BufferPastTheArenaEnd) {
  Chain c;
  Status st = c.exe->finalize(3 * kSlot, c.offsets(0, kSlot, 3 * kSlot));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error, "%t3 [384, 480) is outside its arena of 384 bytes");
  // Straddling the end.
  Chain d;
  st = d.exe->finalize(2 * kSlot + 64, d.offsets(0, kSlot, 2 * kSlot));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error, "%t3 [256, 352) is outside its arena of 320 bytes");
  // An offset so large that offset + size wraps.
  Chain e;
  st = e.exe->finalize(3 * kSlot, e.offsets(0, kSlot, ~uint64_t(63)));
  ASSERT_FALSE(st.ok());
  expectContains(st.error, {"%t3", "outside its arena of 384 bytes"});
}

TEST(MemoryCheckTest, UndeclaredInPlaceOverlap) {
  // t2 dies at step 2, where t3 is written: sharing is only allowed when
  // the step declares it.
  Chain c;
  Status st = c.exe->finalize(2 * kSlot, c.offsets(0, kSlot, kSlot));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error, "step 2 (sum) writes %t3 [128, 224) over %t2 [128, 224), live from step 1 "
                      "to step 2");
}

TEST(MemoryCheckTest, DeclaredInPlacePairWhoseReadBufferIsReadLater) {
  // Step 1 declares t2 in place of t1, but t1 is read again by step 2.
  Chain c({}, {{2, 1}});
  Status st = c.exe->finalize(2 * kSlot, c.offsets(0, 0, kSlot));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error, "step 1 (inc2) writes %t2 [0, 96) in place of %t1 [0, 96), but they do not "
                      "share arena memory or %t1 is still read after it");
}

TEST(MemoryCheckTest, DeclaredInPlacePairAtDifferentOffsets) {
  // Declared, but the plan puts t3 half over t2: not the same block.
  Chain c({{3, 2}});
  Status st = c.exe->finalize(3 * kSlot, c.offsets(0, kSlot, kSlot + 64));
  ASSERT_FALSE(st.ok());
  expectContains(st.error, {"step 2 (sum) writes %t3 [192, 288) in place of %t2 [128, 224)"});
}

TEST(MemoryCheckTest, InPlaceDeclaredForAnotherBuffer) {
  // Step 2 declares t3 in place of t2, but the plan puts t3 over t1 (which
  // also dies at step 2): the declaration covers t2 only.
  Chain c({{3, 2}});
  Status st = c.exe->finalize(2 * kSlot, c.offsets(0, kSlot, 0));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error, "step 2 (sum) writes %t3 [0, 96) in place of %t2 [128, 224), but they do not "
                      "share arena memory or %t2 is still read after it");
}

TEST(MemoryCheckTest, StepWritingAnInput) {
  Executable exe;
  int32_t x = exe.addInput(DType::F32, {kRows, kCols}, "x");
  int32_t t = exe.addTemp(DType::F32, {kRows, kCols}, "t");
  exe.addKernelStep("inc", addOne, {t, x}, 1, kRows);
  exe.setOutputs({t});
  Status st = exe.finalize();
  ASSERT_FALSE(st.ok());
  // t is read before anything writes it, and x is written: the first
  // problem in step order is named.
  EXPECT_EQ(st.error, "step 0 (inc) reads %t before any step writes it");

  Executable exe2;
  int32_t x2 = exe2.addInput(DType::F32, {kRows, kCols}, "x");
  int32_t t2 = exe2.addTemp(DType::F32, {kRows, kCols}, "t");
  exe2.addKernelStep("fill", addOne, {x2, t2}, 1, kRows);
  exe2.addKernelStep("clobber", addOne, {t2, x2}, 1, kRows);
  exe2.setOutputs({t2});
  st = exe2.finalize();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error, "step 1 (clobber) writes %x, an input");

  Executable exe3;
  int32_t c = exe3.addConstant(iota(0), "c");
  int32_t t3 = exe3.addTemp(DType::F32, {kRows, kCols}, "t");
  exe3.addKernelStep("fill", addOne, {t3, c}, 0, kRows);
  exe3.setOutputs({t3});
  st = exe3.finalize();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error, "step 0 (fill) writes %c, a constant");
}

TEST(MemoryCheckTest, ReadingATempBeforeItIsWritten) {
  Executable exe;
  int32_t x = exe.addInput(DType::F32, {kRows, kCols}, "x");
  int32_t a = exe.addTemp(DType::F32, {kRows, kCols}, "a");
  int32_t b = exe.addTemp(DType::F32, {kRows, kCols}, "b");
  exe.addKernelStep("early", addOne, {b, a}, 1, kRows); // reads b, written below
  exe.addKernelStep("late", addOne, {x, b}, 1, kRows);
  exe.setOutputs({a});
  Status st = exe.finalize();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error, "step 0 (early) reads %b before any step writes it");
}

TEST(MemoryCheckTest, AFailedFinalizeChangesNothing) {
  Chain c;
  ASSERT_FALSE(c.exe->finalize(3 * kSlot, c.offsets(0, 0, 2 * kSlot)).ok());
  for (const BufferDesc &b : c.exe->buffers())
    EXPECT_EQ(b.placement, BufferDesc::Placement::None) << b.name;
  EXPECT_EQ(c.exe->arenaBytes(), 0u);
  // The wrong offsets do not stick: a right plan now passes and runs.
  Status st = c.exe->finalize(3 * kSlot, c.offsets(0, kSlot, 2 * kSlot));
  ASSERT_TRUE(st.ok()) << st.error;
  c.expectRunsRight();
  EXPECT_EQ(c.exe->finalize().error, "the executable is already finalized");
}

//===----------------------------------------------------------------------===//
// Right plans run right
//===----------------------------------------------------------------------===//

TEST(MemoryCheckTest, CorrectPlanWithAnInPlacePairRuns) {
  // t1 is live 0..2, t2 1..2, t3 2..3 in place of t2: two slots suffice.
  Chain c({{3, 2}});
  Status st = c.exe->finalize(2 * kSlot, c.offsets(0, kSlot, kSlot));
  ASSERT_TRUE(st.ok()) << st.error;
  EXPECT_TRUE(c.exe->finalized());
  EXPECT_EQ(c.exe->arenaBytes(), 2 * kSlot);
  EXPECT_EQ(c.exe->buffers()[static_cast<size_t>(c.t3)].offset, kSlot);
  EXPECT_EQ(c.exe->buffers()[static_cast<size_t>(c.t3)].placement, BufferDesc::Placement::Arena);
  EXPECT_EQ(c.exe->buffers()[static_cast<size_t>(c.y)].placement,
            BufferDesc::Placement::OutputBlock);
  gAddRanInPlace = 0;
  c.expectRunsRight();
  EXPECT_EQ(gAddRanInPlace.load(), 1) << "step 2 did not get one pointer for t2 and t3";
  EXPECT_NE(c.exe->describe().find("%t3 in place of %t2"), std::string::npos) << c.exe->describe();
}

TEST(MemoryCheckTest, DefaultFinalizeGivesEachTempItsOwnMemory) {
  Chain c;
  Status st = c.exe->finalize();
  ASSERT_TRUE(st.ok()) << st.error;
  EXPECT_EQ(c.exe->arenaBytes(), 3 * kSlot);
  EXPECT_EQ(c.exe->outputBlockBytes(), kSlot);
  c.expectRunsRight();
}

TEST(MemoryCheckTest, RunBeforeFinalizeFails) {
  Chain c;
  HostTensor in = iota(0);
  std::vector<HostTensor> outs;
  Status st = c.exe->run({&in, 1}, outs);
  EXPECT_EQ(st.error, "the executable has no memory plan (finalize() was not called)");
  EXPECT_TRUE(outs.empty());
}

//===----------------------------------------------------------------------===//
// Pools
//===----------------------------------------------------------------------===//

TEST(MemoryCheckTest, OutputBlocksArePooled) {
  Chain c;
  ASSERT_TRUE(c.exe->finalize().ok());
  HostTensor in = iota(0);
  std::vector<HostTensor> outs;
  ASSERT_TRUE(c.exe->run({&in, 1}, outs).ok());
  void *first = outs[0].data;
  // The same vector again: its block stays alive during the call (the
  // outputs may be this call's inputs), so a second block is taken, and
  // from then on the two alternate without allocating.
  ASSERT_TRUE(c.exe->run({&in, 1}, outs).ok());
  void *alternate = outs[0].data;
  EXPECT_NE(alternate, first);
  ASSERT_TRUE(c.exe->run({&in, 1}, outs).ok());
  EXPECT_EQ(outs[0].data, first);
  ASSERT_TRUE(c.exe->run({&in, 1}, outs).ok());
  EXPECT_EQ(outs[0].data, alternate);

  // Holding the previous outputs elsewhere: the next call gets another
  // block, and the held outputs keep their values.
  std::vector<HostTensor> held = outs;
  HostTensor in2 = iota(100);
  ASSERT_TRUE(c.exe->run({&in2, 1}, outs).ok());
  EXPECT_NE(outs[0].data, held[0].data);
  for (int64_t i = 0; i < in.numElements(); ++i) {
    ASSERT_EQ(static_cast<float *>(held[0].data)[i], 2.f * static_cast<float>(i) + 4.f) << i;
    ASSERT_EQ(static_cast<float *>(outs[0].data)[i], 2.f * (100.f + static_cast<float>(i)) + 4.f)
        << i;
  }
  // Dropping the held outputs returns their block: two blocks now cycle.
  void *second = outs[0].data;
  held.clear();
  std::vector<HostTensor> other;
  ASSERT_TRUE(c.exe->run({&in, 1}, other).ok());
  EXPECT_TRUE(other[0].data == first || other[0].data == second || other[0].data == alternate);
  EXPECT_NE(other[0].data, outs[0].data);
  EXPECT_EQ(c.exe->pooledContexts(), 1u);
}

TEST(MemoryCheckTest, OutputsOutliveTheExecutable) {
  std::vector<HostTensor> outs;
  {
    Chain c;
    ASSERT_TRUE(c.exe->finalize().ok());
    HostTensor in = iota(1);
    ASSERT_TRUE(c.exe->run({&in, 1}, outs).ok());
  }
  // The executable (and its pools) are gone; the block is still the
  // outputs' own.
  for (int64_t i = 0; i < kRows * kCols; ++i)
    ASSERT_EQ(static_cast<float *>(outs[0].data)[i], 2.f * (1.f + static_cast<float>(i)) + 4.f);
}

TEST(MemoryCheckTest, SequentialCallsUseOneContext) {
  Chain c({{3, 2}});
  ASSERT_TRUE(c.exe->finalize(2 * kSlot, c.offsets(0, kSlot, kSlot)).ok());
  EXPECT_EQ(c.exe->pooledContexts(), 0u);
  HostTensor in = iota(0);
  for (int r = 0; r < 20; ++r) {
    std::vector<HostTensor> outs; // a fresh vector each time
    RunOptions opts;
    opts.threads = 1 + r % 2;
    ASSERT_TRUE(c.exe->run({&in, 1}, outs, opts).ok());
    EXPECT_EQ(c.exe->pooledContexts(), 1u) << "call " << r;
  }
}

//===----------------------------------------------------------------------===//
// A compiled model, run concurrently
//===----------------------------------------------------------------------===//

namespace {

Tensor randomTensor(std::vector<int64_t> shape, std::mt19937 &rng, double scale = 1.0) {
  Tensor t = Tensor::zeros(DType::F32, shape);
  std::uniform_real_distribution<double> d(-scale, scale);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.setDouble(i, d(rng));
  return t;
}

/// x -> tanh(x * c0 + c1) (a fused pointwise kernel) -> matmul + bias +
/// relu (oneDNN with an epilogue) -> softmax (a reduction kernel, in place
/// over the dying matmul result) -> reshape -> matmul -> reshape, and a
/// second output from a fused pointwise kernel over the softmax.
std::unique_ptr<Graph> buildModel() {
  auto g = std::make_unique<Graph>("model");
  DiagnosticEngine diag;
  Builder b(*g, diag);
  std::mt19937 rng(11);
  auto op = [&](OpKind k, std::vector<Value *> operands, std::vector<NamedAttr> attrs = {}) {
    Value *v = b.createValue(k, std::move(operands), std::move(attrs));
    EXPECT_NE(v, nullptr) << opInfo(k).mnemonic;
    return v;
  };
  auto weight = [&](std::vector<int64_t> shape, double scale) {
    return b.constant(randomTensor(std::move(shape), rng, scale));
  };
  Value *x = g->addInput(TensorType(DType::F32, std::vector<int64_t>{512, 64}), "x");
  Value *p = op(OpKind::Tanh,
                {op(OpKind::Add, {op(OpKind::Mul, {x, weight({64}, 1.0)}), weight({64}, 0.5)})});
  Value *mm = op(OpKind::MatMul, {p, weight({64, 128}, 0.5)});
  Value *r = op(OpKind::Relu, {op(OpKind::Add, {mm, weight({128}, 0.5)})});
  Value *s = op(OpKind::Softmax, {r}, {{"axis", int64_t(-1)}});
  Value *rs = op(OpKind::Reshape, {s}, {{"shape", Ints{256, 256}}});
  Value *m2 = op(OpKind::MatMul, {rs, weight({256, 32}, 1.0)});
  Value *out = op(OpKind::Reshape, {m2}, {{"shape", Ints{256, 2, 16}}});
  Value *side = op(OpKind::Sigmoid, {op(OpKind::Mul, {s, s})});
  g->setOutputs({out, op(OpKind::ReduceSum, {side}, {{"axes", Ints{1}}})});
  return g;
}

} // namespace

TEST(CompiledConcurrencyTest, ConcurrentRunsAreBitIdenticalAndMatchTheInterpreter) {
  std::unique_ptr<Graph> g = buildModel();
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  codegen::CompileOptions opts;
  opts.threads = 2;
  codegen::CompileReport report;
  auto compiled = codegen::compile(*g, opts, diag, &report);
  ASSERT_TRUE(compiled.succeeded()) << collect.str();
  const Executable &exe = **compiled;
  EXPECT_EQ(report.numFallbacks, 0) << report.steps;
  EXPECT_GE(report.numLibraryCalls, 2) << report.steps;
  EXPECT_GE(report.numKernels, 2) << report.steps;
  size_t inPlaceSteps = 0;
  for (const Step &s : exe.steps())
    inPlaceSteps += !s.inPlace.empty();
  ASSERT_GE(inPlaceSteps, 1u) << "no step runs in place:\n" << report.steps;
  EXPECT_EQ(report.memory.inPlace, static_cast<int>(inPlaceSteps));
  EXPECT_LE(report.memory.lowerBound, report.memory.arenaBytes);
  EXPECT_LE(report.memory.arenaBytes, report.memory.naiveBytes);

  std::mt19937 rng(5);
  std::vector<Tensor> inputs = {randomTensor({512, 64}, rng, 2.0)};
  auto want = interpret(*g, inputs, diag);
  ASSERT_TRUE(want.succeeded()) << collect.str();

  std::vector<HostTensor> in = {runtime::toHostTensor(inputs[0])};
  std::vector<HostTensor> reference;
  {
    RunOptions ro;
    ro.threads = 1;
    Status st = exe.run(in, reference, ro);
    ASSERT_TRUE(st.ok()) << st.error;
  }
  ASSERT_EQ(reference.size(), want->size());
  for (size_t k = 0; k < reference.size(); ++k) {
    Tensor got = runtime::fromHostTensor(reference[k]);
    ASSERT_EQ(got.shape(), (*want)[k].shape());
    // 1e-5 relative to max(1, |want|): the second output sums 256 values
    // near 0.5, where one float ulp is 1.5e-5.
    double worst = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      const double w = (*want)[k].getDouble(i);
      worst = std::max(worst, std::fabs(got.getDouble(i) - w) / std::max(1.0, std::fabs(w)));
    }
    EXPECT_LE(worst, 1e-5) << "output " << k << " vs the interpreter";
  }

  std::atomic<int> failures{0}, mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      std::vector<HostTensor> outs; // reused across calls, as an application would
      for (int r = 0; r < 50; ++r) {
        RunOptions ro;
        ro.threads = 1 + (t + r) % 2;
        if (!exe.run(in, outs, ro).ok()) {
          ++failures;
          continue;
        }
        for (size_t k = 0; k < reference.size(); ++k)
          if (outs.size() != reference.size() ||
              std::memcmp(outs[k].data, reference[k].data, reference[k].byteSize()) != 0)
            ++mismatches;
      }
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GE(exe.pooledContexts(), 1u);
  EXPECT_LE(exe.pooledContexts(), 9u);
}
