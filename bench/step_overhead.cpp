//===- step_overhead.cpp - What one step of a run costs ---------*- C++ -*-===//
//
//   kiln_step_overhead [STEPS] [RUNS]
//
// Measures the runtime's cost per step, on one thread, two ways:
//
//   1. a hand-built Executable of STEPS kernel steps whose KernelFn does
//      nothing (each reads the previous step's 1-element buffer and writes
//      its own), against the same empty function called STEPS times through
//      a function-pointer array: the difference per step is the runtime's
//      own overhead (argument lookup, range split decision, loop);
//   2. a compiled model of STEPS tiny kernels: a chain of softmax / relu /
//      neg on f32[1,16], compiled with fusion off (one kernel per node):
//      run time / STEPS is what a step costs end to end, computing its 16
//      elements included. (With fusion on the chain is one kernel; long
//      softmax chains fuse into one kernel that LLVM compiles slowly, so
//      that variant is not measured here.)
//
// Each figure is the median of RUNS calls of Executable::run (outputs vector
// reused: the steady state of an application calling a model in a loop).
//
//===----------------------------------------------------------------------===//
#include "codegen/Compiler.h"
#include "ir/Parser.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace kiln;
using Clock = std::chrono::steady_clock;

namespace {

/// Does nothing, but the compiler cannot know it (noinline, reads the
/// range).
__attribute__((noinline)) void emptyKernel(void *const *buffers, int64_t begin, int64_t end) {
  asm volatile("" : : "r"(buffers), "r"(begin), "r"(end) : "memory");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Median seconds of `runs` calls of exe.run on `inputs`.
double timeRuns(const runtime::Executable &exe, const std::vector<runtime::HostTensor> &inputs,
                int runs) {
  std::vector<runtime::HostTensor> outs;
  runtime::RunOptions opts;
  opts.threads = 1;
  std::vector<double> times;
  for (int r = 0; r < runs + 10; ++r) {
    const auto t0 = Clock::now();
    runtime::Status st = exe.run(inputs, outs, opts);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!st.ok()) {
      std::fprintf(stderr, "kiln_step_overhead: error: %s\n", st.error.c_str());
      std::exit(1);
    }
    if (r >= 10)
      times.push_back(s);
  }
  return median(times);
}

std::unique_ptr<runtime::Executable> compileText(const std::string &text, bool fuse) {
  DiagnosticEngine diag;
  auto module = parseModule(text, diag);
  if (failed(module)) {
    std::fprintf(stderr, "kiln_step_overhead: error: the generated graph does not parse\n");
    std::exit(1);
  }
  codegen::CompileOptions options;
  options.threads = 1;
  options.fuse = fuse;
  auto exe = codegen::compile(*(*module)->graphs().front(), options, diag);
  if (failed(exe)) {
    std::fprintf(stderr, "kiln_step_overhead: error: the generated graph does not compile\n");
    std::exit(1);
  }
  return exe.take();
}

} // namespace

int main(int argc, char **argv) {
  const int steps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 1000;
  const int runs = argc > 2 ? std::max(1, std::atoi(argv[2])) : 300;

  // 1. Empty kernels.
  runtime::Executable exe;
  int32_t prev = exe.addInput(DType::F32, {1}, "x");
  for (int i = 0; i < steps; ++i) {
    int32_t next = exe.addTemp(DType::F32, {1}, "t" + std::to_string(i));
    exe.addKernelStep("empty", emptyKernel, {prev, next}, 1, 1, /*parallel=*/false);
    prev = next;
  }
  exe.setOutputs({prev});
  if (runtime::Status st = exe.finalize(); !st.ok()) {
    std::fprintf(stderr, "kiln_step_overhead: error: %s\n", st.error.c_str());
    return 1;
  }
  std::vector<runtime::HostTensor> in{runtime::HostTensor::allocate(DType::F32, {1})};
  const double runSeconds = timeRuns(exe, in, runs);

  std::vector<runtime::KernelFn> fns(static_cast<size_t>(steps), emptyKernel);
  std::vector<void *> args(2, in[0].data);
  std::vector<double> direct;
  for (int r = 0; r < runs + 10; ++r) {
    const auto t0 = Clock::now();
    for (runtime::KernelFn fn : fns)
      fn(args.data(), 0, 1);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r >= 10)
      direct.push_back(s);
  }
  const double directSeconds = median(direct);
  std::printf("empty kernels: %d steps, median of %d runs, 1 thread\n", steps, runs);
  std::printf("  Executable::run        %8.2f ns per step (%.1f us per run)\n",
              runSeconds * 1e9 / steps, runSeconds * 1e6);
  std::printf("  direct calls           %8.2f ns per step\n", directSeconds * 1e9 / steps);
  std::printf("  runtime overhead       %8.2f ns per step\n",
              (runSeconds - directSeconds) * 1e9 / steps);

  // 2. A compiled model of tiny kernels.
  const char *ops[] = {"softmax", "relu", "neg"};
  std::string text = "graph @tiny(%x: f32[1,16]) -> (f32[1,16]) {\n";
  std::string last = "%x";
  for (int i = 0; i < steps; ++i) {
    text += "  %v" + std::to_string(i) + " = " + ops[i % 3] + "(" + last + ") : f32[1,16]\n";
    last = "%v" + std::to_string(i);
  }
  text += "  return " + last + "\n}\n";
  auto unfused = compileText(text, /*fuse=*/false);
  std::vector<runtime::HostTensor> x{runtime::HostTensor::allocate(DType::F32, {1, 16})};
  for (int i = 0; i < 16; ++i)
    static_cast<float *>(x[0].data)[i] = static_cast<float>(i) * 0.1f;
  const double unfusedSeconds = timeRuns(*unfused, x, runs);
  std::printf("tiny-kernel model: %d ops (softmax, relu, neg on f32[1,16]), median of %d runs, "
              "1 thread\n",
              steps, runs);
  std::printf("  unfused: %zu steps   %8.2f ns per step (%.1f us per run)\n",
              unfused->steps().size(), unfusedSeconds * 1e9 / unfused->steps().size(),
              unfusedSeconds * 1e6);
  return 0;
}
