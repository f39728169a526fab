//===- pointwise_bench.cpp - JIT kernel vs hand-fused C++ loop ------------===//
//
// Builds the pointwise model's computation (bench/pointwise_ref.h) as one
// Kernel by hand, with the scalar definitions of ir/ScalarExpr.h
// (sigmoid(v) = recip(1 + exp(-v)), gelu(v) = 0.5 * v * (1 + erf(v *
// 0.70710678...)), silu(v) = v * sigmoid(v)), JIT-compiles it with
// CpuJit, and times it against pointwise_ref (g++ -O3 -march=native
// -ffast-math) on 1x1024x1024 floats: one thread, 3 warm-up runs, then the
// median of 30 runs of each, interleaved. Prints both times, the ratio
// (JIT / reference; the target is <= 1.3) and the largest
// difference between the two results.
//
//   usage: kiln_pointwise_bench [runs] [pointwise.onnx]
//
// Given the model that scripts/make_models.py exports (pointwise-op17),
// it also imports and compiles the model itself (the whole `kiln compile`
// path: passes, fusion, JIT) and times the compiled model in the same
// interleaved runs: that is the measurement.
//
//===----------------------------------------------------------------------===//

#include "codegen/Compiler.h"
#include "codegen/cpu/CpuJit.h"
#include "frontend/onnx/OnnxImporter.h"
#include "pointwise_ref.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <random>
#include <vector>

using namespace kiln;
using namespace kiln::codegen;

namespace {

constexpr int64_t kRows = 1024, kCols = 1024, kN = kRows * kCols;

Kernel pointwiseKernel() {
  Kernel k;
  k.name = "pointwise_model";
  k.inputs = {{DType::F32, {1, kRows, kCols}, "x"}, {DType::F32, {1, kRows, kCols}, "y"}};
  k.outputs = {{DType::F32, {1, kRows, kCols}, "out0"}, {DType::F32, {1, kRows, kCols}, "c"}};
  k.outer = {1, kRows};
  k.inner = kCols;
  ScalarDag &g = k.dag;
  auto c = [&](double v) { return g.constFloat(DType::F32, v); };
  auto sigmoid = [&](ScalarRef v) {
    return g.unary(ScalarOp::Recip, g.add(c(1), g.unary(ScalarOp::Exp, g.unary(ScalarOp::Neg, v))));
  };
  auto gelu = [&](ScalarRef v) {
    return g.mul(g.mul(c(0.5), v),
                 g.add(c(1), g.unary(ScalarOp::Erf, g.mul(v, c(0.70710678118654752)))));
  };
  auto silu = [&](ScalarRef v) { return g.mul(v, sigmoid(v)); };
  ScalarRef off = g.add(g.mul(g.add(g.mul(g.index(0), g.constInt(DType::I64, kRows)), g.index(1)),
                              g.constInt(DType::I64, kCols)),
                        g.index(2));
  ScalarRef x = g.load(DType::F32, 0, off), y = g.load(DType::F32, 1, off);
  ScalarRef a = gelu(x);
  ScalarRef b = silu(g.add(g.mul(y, c(0.5)), a));
  ScalarRef cc = g.mul(g.unary(ScalarOp::Tanh, b), sigmoid(g.sub(a, y)));
  ScalarRef d = g.add(g.mul(g.add(cc, x), g.sub(b, c(0.25))), g.mul(a, y));
  ScalarRef e =
      g.sub(g.mul(sigmoid(d), gelu(g.mul(cc, c(2.0)))), g.unary(ScalarOp::Tanh, g.add(d, c(1.0))));
  Stage m;
  m.stores.push_back({0, off, g.add(g.mul(e, x), d)});
  m.stores.push_back({1, off, cc});
  k.stages = {m};
  return k;
}

struct AlignedFloats {
  float *p;
  explicit AlignedFloats(int64_t n)
      : p(static_cast<float *>(::operator new(static_cast<size_t>(n) * 4, std::align_val_t(64)))) {}
  ~AlignedFloats() { ::operator delete(p, std::align_val_t(64)); }
  AlignedFloats(const AlignedFloats &) = delete;
  AlignedFloats &operator=(const AlignedFloats &) = delete;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  int runs = argc > 1 ? std::atoi(argv[1]) : 30;
  if (runs < 1)
    runs = 30;
  DiagnosticEngine diag;
  installStderrHandler(diag);
  // The exported model, compiled like `kiln compile` does (optional).
  std::unique_ptr<Module> model;
  std::unique_ptr<runtime::Executable> exe;
  double modelCompileMs = 0;
  if (argc > 2) {
    auto m = importOnnx(argv[2], diag);
    if (!m)
      return 1;
    model = m.take();
    codegen::CompileOptions opts;
    opts.threads = 1;
    auto c0 = std::chrono::steady_clock::now();
    auto e = codegen::compile(*model->graphs().front(), opts, diag);
    modelCompileMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - c0).count();
    if (!e)
      return 1;
    exe = e.take();
  }
  auto jit = codegen::cpu::CpuJit::create(codegen::cpu::CpuJitOptions{}, diag);
  if (!jit)
    return 1;
  Kernel k = pointwiseKernel();
  auto t0 = std::chrono::steady_clock::now();
  auto fn = (*jit)->compile(k, Schedule{}, diag);
  double compileMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!fn)
    return 1;

  AlignedFloats x(kN), y(kN), jit0(kN), jit1(kN), ref0(kN), ref1(kN);
  std::mt19937 rng(42);
  std::normal_distribution<float> dist;
  for (int64_t i = 0; i < kN; ++i) {
    x.p[i] = dist(rng);
    y.p[i] = dist(rng);
  }
  void *buffers[] = {x.p, y.p, jit0.p, jit1.p};

  auto timeMs = [](auto &&f) {
    auto a = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
  };
  auto runJit = [&] { (*fn)(buffers, 0, kRows); };
  auto runRef = [&] { pointwise_ref(x.p, y.p, ref0.p, ref1.p, kN); };
  std::vector<Tensor> modelIn = {Tensor::borrow(DType::F32, {1, kRows, kCols}, nullptr, x.p),
                                 Tensor::borrow(DType::F32, {1, kRows, kCols}, nullptr, y.p)};
  std::vector<Tensor> modelOut;
  runtime::RunOptions ropts;
  ropts.threads = 1;
  bool modelOk = true;
  auto runModel = [&] {
    if (!exe)
      return;
    auto o = codegen::runCompiled(*exe, modelIn, diag, ropts);
    if (o)
      modelOut = o.take();
    else
      modelOk = false;
  };
  for (int i = 0; i < 3; ++i) {
    runJit();
    runRef();
    runModel();
  }
  std::vector<double> jitMs, refMs, modelMs;
  for (int i = 0; i < runs; ++i) {
    jitMs.push_back(timeMs(runJit));
    refMs.push_back(timeMs(runRef));
    if (exe)
      modelMs.push_back(timeMs(runModel));
  }
  if (!modelOk)
    return 1;
  double maxDiff = 0;
  for (int64_t i = 0; i < kN; ++i)
    maxDiff = std::max({maxDiff, static_cast<double>(std::fabs(jit0.p[i] - ref0.p[i])),
                        static_cast<double>(std::fabs(jit1.p[i] - ref1.p[i]))});
  double j = median(jitMs), r = median(refMs);
  std::printf("target:      %s\n", (*jit)->targetDescription().substr(0, 80).c_str());
  std::printf("compile:     %.1f ms\n", compileMs);
  std::printf("kiln jit:    %.3f ms median of %d (%.0f Melem/s), best %.3f ms\n", j, runs,
              kN / j / 1e3, *std::min_element(jitMs.begin(), jitMs.end()));
  std::printf("g++ -O3 -march=native -ffast-math: %.3f ms median (%.0f Melem/s), best %.3f ms\n", r,
              kN / r / 1e3, *std::min_element(refMs.begin(), refMs.end()));
  std::printf("ratio:       %.3f (jit / reference; target <= 1.3)\n", j / r);
  std::printf("max |diff|:  %.3g\n", maxDiff);
  if (exe) {
    double modelDiff = 0;
    if (modelOut.size() != 2 || modelOut[0].numel() != kN || modelOut[1].numel() != kN) {
      std::fprintf(stderr,
                   "error: %s does not have the two f32[1,1024,1024] outputs of the "
                   "pointwise model\n",
                   argv[2]);
      return 1;
    }
    for (int64_t i = 0; i < kN; ++i)
      modelDiff = std::max({modelDiff, std::fabs(modelOut[0].getDouble(i) - ref0.p[i]),
                            std::fabs(modelOut[1].getDouble(i) - ref1.p[i])});
    double mm = median(modelMs);
    std::printf("compiled model %s: compile %.1f ms, %.3f ms median (%.0f Melem/s), best %.3f ms\n",
                argv[2], modelCompileMs, mm, kN / mm / 1e3,
                *std::min_element(modelMs.begin(), modelMs.end()));
    std::printf("model ratio: %.3f (compiled model / reference; target <= 1.3)\n", mm / r);
    std::printf("model max |diff| vs reference: %.3g\n", modelDiff);
  }
  return 0;
}
