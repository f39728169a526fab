//===- RuntimeTest.cpp - runtime::Executable --------------------*- C++ -*-===//
//
// Hand-built executables: kernel steps with a C++ KernelFn, extern steps,
// input checks, outputs that are inputs or constants, the parallel split of
// the outer range, and concurrent runs.
//
//===----------------------------------------------------------------------===//
#include "runtime/CopyStep.h"
#include "runtime/Executable.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>

using namespace kiln;
using namespace kiln::runtime;

namespace {

/// out[i] = a[i] * 2 + b[i] over rows of 8 (outer = rows).
void axpyRows(void *const *buffers, int64_t begin, int64_t end) {
  const float *a = static_cast<const float *>(buffers[0]);
  const float *b = static_cast<const float *>(buffers[1]);
  float *out = static_cast<float *>(buffers[2]);
  for (int64_t r = begin; r < end; ++r)
    for (int64_t j = 0; j < 8; ++j)
      out[r * 8 + j] = a[r * 8 + j] * 2 + b[r * 8 + j];
}

/// Counts how often each outer point runs (buffers[0] holds int counters).
void countPoints(void *const *buffers, int64_t begin, int64_t end) {
  auto *counts = static_cast<std::atomic<int> *>(buffers[0]);
  for (int64_t i = begin; i < end; ++i)
    counts[i].fetch_add(1);
}

/// Zeroes buffers[0], whose size is in the executable's only buffer: the
/// test keeps it in `gZeroCount`.
int64_t gZeroCount = 0;
void zeroInts(void *const *buffers, int64_t, int64_t) {
  std::memset(buffers[0], 0, static_cast<size_t>(gZeroCount) * sizeof(int));
}

HostTensor filled(std::vector<int64_t> shape, float start) {
  HostTensor t = HostTensor::allocate(DType::F32, std::move(shape));
  for (int64_t i = 0; i < t.numElements(); ++i)
    static_cast<float *>(t.data)[i] = start + static_cast<float>(i);
  return t;
}

class NegateStep : public ExternStep {
public:
  std::string describe() const override { return "negate"; }
  Status run(std::span<void *const> buffers, const StepContext &ctx) const override {
    if (ctx.threads < 1)
      return Status::failure("no threads");
    const float *in = static_cast<const float *>(buffers[0]);
    float *out = static_cast<float *>(buffers[1]);
    for (int i = 0; i < 24; ++i)
      out[i] = -in[i];
    return Status::success();
  }
};

class FailingStep : public ExternStep {
public:
  std::string describe() const override { return "fails"; }
  Status run(std::span<void *const>, const StepContext &) const override {
    return Status::failure("it broke");
  }
};

/// x, c (constant) -> y = -(x * 2 + c)
std::unique_ptr<Executable> makeExecutable() {
  auto exe = std::make_unique<Executable>();
  int32_t x = exe->addInput(DType::F32, {3, 8}, "x");
  int32_t c = exe->addConstant(filled({3, 8}, 100), "c");
  int32_t t = exe->addTemp(DType::F32, {3, 8}, "t");
  int32_t y = exe->addTemp(DType::F32, {3, 8}, "y");
  exe->addKernelStep("axpy", axpyRows, {x, c, t}, 2, 3, /*parallel=*/true, /*grain=*/1);
  exe->addExternStep(std::make_shared<NegateStep>(), {t, y}, 1);
  exe->setOutputs({y, x, c, y});
  EXPECT_TRUE(exe->finalize().ok());
  return exe;
}

} // namespace

TEST(RuntimeTest, RunsKernelAndExternSteps) {
  auto exe = makeExecutable();
  for (int threads : {1, 2}) {
    std::vector<HostTensor> outs;
    RunOptions opts;
    opts.threads = threads;
    HostTensor x = filled({3, 8}, 0);
    Status st = exe->run({&x, 1}, outs, opts);
    ASSERT_TRUE(st.ok()) << st.error;
    ASSERT_EQ(outs.size(), 4u);
    for (int i = 0; i < 24; ++i)
      EXPECT_EQ(static_cast<float *>(outs[0].data)[i], -(2.f * i + 100.f + i));
    // Outputs that are an input or a constant are copies, not aliases.
    EXPECT_NE(outs[1].data, x.data);
    EXPECT_EQ(std::memcmp(outs[1].data, x.data, x.byteSize()), 0);
    EXPECT_EQ(static_cast<float *>(outs[2].data)[5], 105.f);
    // The same buffer twice shares its bytes.
    EXPECT_EQ(outs[0].data, outs[3].data);
  }
}

TEST(RuntimeTest, NamesInputMismatches) {
  auto exe = makeExecutable();
  std::vector<HostTensor> outs;
  EXPECT_EQ(exe->run({}, outs).error, "expected 1 input, got 0");
  HostTensor bad = filled({8, 3}, 0);
  EXPECT_EQ(exe->run({&bad, 1}, outs).error, "input 0 (%x) expects f32[3,8], got f32[8,3]");
  HostTensor ints = HostTensor::allocate(DType::I32, {3, 8});
  EXPECT_EQ(exe->run({&ints, 1}, outs).error, "input 0 (%x) expects f32[3,8], got i32[3,8]");
}

TEST(RuntimeTest, ReportsStepFailures) {
  Executable exe;
  int32_t x = exe.addInput(DType::F32, {2}, "x");
  exe.addExternStep(std::make_shared<FailingStep>(), {x}, 1);
  exe.setOutputs({x});
  ASSERT_TRUE(exe.finalize().ok());
  HostTensor in = filled({2}, 0);
  std::vector<HostTensor> outs;
  EXPECT_EQ(exe.run({&in, 1}, outs).error, "step 0 (fails): it broke");
}

TEST(RuntimeTest, MisalignedInputsAreCopied) {
  auto exe = makeExecutable();
  HostTensor x = filled({3, 8}, 0);
  std::vector<float> shifted(25);
  std::memcpy(shifted.data() + 1, x.data, x.byteSize());
  HostTensor odd = x;
  odd.data = shifted.data() + 1;
  std::vector<HostTensor> a, b;
  ASSERT_TRUE(exe->run({&x, 1}, a).ok());
  ASSERT_TRUE(exe->run({&odd, 1}, b).ok());
  EXPECT_EQ(std::memcmp(a[0].data, b[0].data, a[0].byteSize()), 0);
}

TEST(RuntimeTest, SplitsTheOuterRangeExactlyOnce) {
  for (int64_t n : {1, 2, 3, 7, 64, 1001}) {
    for (int64_t grain : {1, 4, 100}) {
      for (int threads : {1, 2, 3}) {
        gZeroCount = n;
        Executable exe;
        int32_t counts = exe.addTemp(DType::I32, {n}, "counts");
        exe.addKernelStep("zero", zeroInts, {counts}, 0, 1, false);
        exe.addKernelStep("count", countPoints, {counts}, 0, n, true, grain);
        exe.setOutputs({counts});
        ASSERT_TRUE(exe.finalize().ok());
        std::vector<HostTensor> outs;
        RunOptions opts;
        opts.threads = threads;
        ASSERT_TRUE(exe.run({}, outs, opts).ok());
        for (int64_t i = 0; i < n; ++i)
          ASSERT_EQ(static_cast<int *>(outs[0].data)[i], 1) << "n=" << n << " point " << i;
      }
    }
  }
}

TEST(RuntimeTest, ConcurrentRunsGiveIdenticalOutputs) {
  auto exe = makeExecutable();
  HostTensor x = filled({3, 8}, 1);
  std::vector<HostTensor> want;
  ASSERT_TRUE(exe->run({&x, 1}, want).ok());
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int r = 0; r < 200; ++r) {
        std::vector<HostTensor> got;
        RunOptions opts;
        opts.threads = 1 + r % 2;
        if (!exe->run({&x, 1}, got, opts).ok() ||
            std::memcmp(got[0].data, want[0].data, want[0].byteSize()) != 0)
          ++mismatches;
      }
    });
  for (auto &t : threads)
    t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(RuntimeTest, ProfilesSteps) {
  auto exe = makeExecutable();
  HostTensor x = filled({3, 8}, 0);
  RunProfile profile;
  RunOptions opts;
  opts.profile = true;
  std::vector<HostTensor> outs;
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(exe->run({&x, 1}, outs, opts, &profile).ok());
  EXPECT_EQ(profile.runs, 3);
  ASSERT_EQ(profile.stepSeconds.size(), 2u);
  EXPECT_GE(profile.stepSeconds[0], 0.0);
  EXPECT_NE(exe->describe().find("1: extern negate (%t, %y)"), std::string::npos)
      << exe->describe();
}

TEST(RuntimeTest, OutputsCanBeFedBackAsInputs) {
  // A recurrent loop: run(state, state). The previous outputs must stay
  // valid while the call reads them, and the result must equal a run on a
  // copy of them.
  auto exe = makeExecutable();
  HostTensor x = filled({3, 8}, 1);
  std::vector<HostTensor> state;
  ASSERT_TRUE(exe->run({&x, 1}, state).ok());
  for (int step = 0; step < 4; ++step) {
    HostTensor copy = HostTensor::allocate(DType::F32, {3, 8});
    std::memcpy(copy.data, state[0].data, copy.byteSize());
    std::vector<HostTensor> want;
    ASSERT_TRUE(exe->run({&copy, 1}, want).ok());
    Status st = exe->run({state.data(), 1}, state);
    ASSERT_TRUE(st.ok()) << st.error;
    ASSERT_EQ(std::memcmp(state[0].data, want[0].data, want[0].byteSize()), 0) << "step " << step;
  }
}

TEST(RuntimeTest, CopyStepCopiesRunsAndRoundTrips) {
  // Two sources interleaved in rows of 4 bytes; adjacent runs merge.
  std::vector<CopyStep::Run> runs = {{0, 0, 0, 4},  {1, 0, 4, 4},  {0, 4, 8, 4},
                                     {1, 4, 12, 4}, {1, 8, 16, 2}, {1, 10, 18, 2}};
  CopyStep step("copy %y", 2, runs);
  EXPECT_EQ(step.runs().size(), 4u); // the last three of b are contiguous on both sides
  std::vector<char> a = {'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'};
  std::vector<char> b = {'0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'A', 'B'};
  std::vector<char> y(20, '?');
  void *buffers[] = {a.data(), b.data(), y.data()};
  StepContext ctx;
  ASSERT_TRUE(step.run(buffers, ctx).ok());
  EXPECT_EQ(std::string(y.begin(), y.end()), "abcd0123efgh456789AB");

  SavedStep saved;
  std::string why;
  ASSERT_TRUE(step.save(saved, why));
  EXPECT_EQ(saved.kind, CopyStep::kKind);
  const size_t sizes[] = {a.size(), b.size(), y.size()};
  auto loaded = CopyStep::load(saved.payload, sizes, why);
  ASSERT_TRUE(loaded) << why;
  std::fill(y.begin(), y.end(), '?');
  ASSERT_TRUE(loaded->run(buffers, ctx).ok());
  EXPECT_EQ(std::string(y.begin(), y.end()), "abcd0123efgh456789AB");

  // A run outside its buffers, a wrong buffer count, a truncated or padded
  // payload: each a named error, never a copy out of bounds.
  const size_t small[] = {a.size(), b.size(), 19};
  EXPECT_FALSE(CopyStep::load(saved.payload, small, why));
  EXPECT_NE(why.find("outside its buffers"), std::string::npos) << why;
  const size_t two[] = {a.size(), y.size()};
  EXPECT_FALSE(CopyStep::load(saved.payload, two, why));
  for (size_t cut = 0; cut < saved.payload.size(); ++cut)
    EXPECT_FALSE(CopyStep::load(saved.payload.substr(0, cut), sizes, why)) << cut;
  EXPECT_FALSE(CopyStep::load(saved.payload + "x", sizes, why));
  EXPECT_NE(why.find("damaged copy step"), std::string::npos) << why;
}
