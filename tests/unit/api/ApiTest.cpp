//===- ApiTest.cpp - include/kiln/kiln.h as an application uses it --------===//
#include "kiln/Cuda.h"
#include "kiln/kiln.h"

#include "ir/Compare.h"
#include "ir/Interpreter.h"
#include "ir/Npy.h"
#include "kiln/Trace.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <thread>
#include <unistd.h>

namespace {

const std::string kMlp = std::string(KILN_SOURCE_DIR) + "/examples/mlp/";

kiln::Tensor readNpyOrDie(const std::string &path) {
  kiln::DiagnosticEngine diag;
  auto t = kiln::readNpy(path, diag);
  EXPECT_TRUE(t.succeeded()) << path;
  return t.take();
}

std::string tempPath(const char *stem) {
  return "/tmp/kiln-api-test-" + std::string(stem) + "-" + std::to_string(::getpid()) + ".kiln";
}

void expectClose(const kiln::Tensor &got, const kiln::Tensor &want) {
  kiln::Comparison c = kiln::compareTensors(got, want, kiln::Tolerance{});
  EXPECT_TRUE(c.ok()) << kiln::describe(c, kiln::Tolerance{});
}

TEST(ApiTest, LoadsCompilesSavesLoadsAndRuns) {
  kiln::Model model = kiln::Model::load(kMlp + "mlp.kir");
  ASSERT_EQ(model.inputs().size(), 1u);
  EXPECT_EQ(model.inputs()[0].name, "x");
  kiln::CompileOptions options;
  options.threads = 1;
  kiln::Executable exe = kiln::compile(model, options);
  const kiln::Tensor x = readNpyOrDie(kMlp + "x.npy");
  const kiln::Tensor want = readNpyOrDie(kMlp + "expected_output_0.npy");
  std::vector<kiln::Tensor> out = exe.run({x});
  ASSERT_EQ(out.size(), 1u);
  expectClose(out[0], want);
  EXPECT_NE(exe.summary().find("fallbacks"), std::string::npos);

  const std::string path = tempPath("mlp");
  exe.save(path);
  kiln::Executable loaded = kiln::Executable::load(path);
  std::remove(path.c_str());
  EXPECT_EQ(loaded.inputs()[0].shape, (std::vector<int64_t>{4, 64}));
  std::vector<kiln::Tensor> again = loaded.run({x});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(std::memcmp(again[0].rawData(), out[0].rawData(), out[0].byteSize()), 0);

  // Into the caller's tensor.
  std::vector<kiln::Tensor> mine{kiln::Tensor::zeros(kiln::DType::F32, {4, 10})};
  loaded.runInto({x}, mine);
  expectClose(mine[0], want);
}

TEST(ApiTest, OneExecutableRunsOnManyThreadsAtOnce) {
  kiln::Executable exe = kiln::compile(kiln::Model::load(kMlp + "mlp.kir"));
  const kiln::Tensor x = readNpyOrDie(kMlp + "x.npy");
  const std::vector<kiln::Tensor> single = exe.run({x});
  std::vector<std::vector<kiln::Tensor>> got(8);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] {
      for (int r = 0; r < 20; ++r)
        got[t] = exe.run({x});
    });
  for (std::thread &t : threads)
    t.join();
  for (const auto &g : got)
    EXPECT_EQ(std::memcmp(g[0].rawData(), single[0].rawData(), single[0].byteSize()), 0);
}

TEST(ApiTest, CompilesATracedGraph) {
  kiln::Tensor w = kiln::randn({8, 4}, /*seed=*/3);
  auto graph = kiln::trace([&](const kiln::Tensor &in) { return kiln::relu(kiln::matmul(in, w)); },
                           {kiln::randn({2, 8}, /*seed=*/4)});
  kiln::Model model = kiln::Model::fromGraph(std::move(graph));
  kiln::Executable exe = kiln::compile(model);
  kiln::Tensor x = kiln::randn({2, 8}, /*seed=*/5);
  expectClose(exe.run({x})[0], kiln::relu(kiln::matmul(x, w)));
}

TEST(ApiTest, ErrorsAreKilnErrorsNamingTheProblem) {
  auto message = [](auto &&fn) -> std::string {
    try {
      fn();
    } catch (const kiln::Error &e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message([] { kiln::Model::load("/nonexistent/model.onnx"); }).find("model.onnx"),
            std::string::npos);
  EXPECT_NE(message([] { kiln::Executable::load(kMlp + "mlp.kir"); }).find("not a Kiln artifact"),
            std::string::npos);
  kiln::Executable exe = kiln::compile(kiln::Model::load(kMlp + "mlp.kir"));
  const std::string shape = message([&] {
    exe.run({kiln::Tensor::zeros(kiln::DType::F32, {4, 63})});
  });
  EXPECT_NE(shape.find("f32[4,64]"), std::string::npos) << shape;
  std::vector<kiln::Tensor> wrong{kiln::Tensor::zeros(kiln::DType::F32, {4, 9})};
  EXPECT_NE(message([&] {
              exe.runInto({kiln::Tensor::zeros(kiln::DType::F32, {4, 64})}, wrong);
            }).find("the model writes f32[4,10]"),
            std::string::npos);
  kiln::CompileOptions bad;
  bad.cpu = "pentium-pro";
  EXPECT_NE(message([&] {
              kiln::compile(kiln::Model::load(kMlp + "mlp.kir"), bad);
            }).find("unknown CPU 'pentium-pro'"),
            std::string::npos);
}

/// A model loaded from .kir text (through a temporary file named after
/// `stem`, removed again).
kiln::Model modelFromText(const std::string &stem, const std::string &text) {
  const std::string path = "/tmp/kiln-api-test-" + stem + "-" + std::to_string(::getpid()) + ".kir";
  std::ofstream(path) << text;
  kiln::Model m = kiln::Model::load(path);
  std::remove(path.c_str());
  return m;
}

/// A model with a symbolic batch N and sequence S: a broadcast add, a
/// softmax (a JIT kernel) and a matmul by a static weight (oneDNN).
const char kSymbolicText[] = "graph @sym(%x: f32[N,S,8], %y: f32[N,1,8], %w: f32[8,4]) -> "
                             "(f32[N,S,4]) {\n"
                             "  %0 = add(%x, %y) : f32[N,S,8]\n"
                             "  %1 = softmax(%0) {axis = -1} : f32[N,S,8]\n"
                             "  %2 = matmul(%1, %w) : f32[N,S,4]\n"
                             "  %3 = relu(%2) : f32[N,S,4]\n"
                             "  return %3\n"
                             "}\n";
kiln::Model symbolicModel() {
  return modelFromText("symbolic", kSymbolicText);
}

std::vector<kiln::Tensor> symbolicInputs(int64_t n, int64_t s, uint64_t seed) {
  return {kiln::randn({n, s, 8}, seed), kiln::randn({n, 1, 8}, seed + 1),
          kiln::randn({8, 4}, /*seed=*/99)};
}

std::vector<kiln::Tensor> interpreted(const kiln::Model &m, const std::vector<kiln::Tensor> &in) {
  kiln::DiagnosticEngine diag;
  auto out = kiln::interpret(m.graph(), in, diag);
  EXPECT_TRUE(out.succeeded());
  return out.take();
}

std::string errorOf(const std::function<void()> &fn) {
  try {
    fn();
  } catch (const kiln::Error &e) {
    return e.what();
  }
  return "no error";
}

// Note [Data-dependent shapes] in codegen/Staged.cpp: x[x > 0] * 2 compiles
// in stages; each count (0 included) runs the rest compiled for it.
TEST(ApiTest, ModelSizedByItsRunCompilesInStages) {
  kiln::Model model = modelFromText("mask", "graph @mask(%x: f32[N,4]) -> (f32[?]) {\n"
                                            "  %z = constant dense<0.0> : f32[]\n"
                                            "  %two = constant dense<2.0> : f32[]\n"
                                            "  %m = greater(%x, %z) : bool[N,4]\n"
                                            "  %nz = nonzero(%m) : i64[2,?]\n"
                                            "  %t = transpose(%nz) {perm = [1, 0]} : i64[?,2]\n"
                                            "  %v = gather_nd(%x, %t) : f32[?]\n"
                                            "  %y = mul(%v, %two) : f32[?]\n"
                                            "  return %y\n"
                                            "}\n");
  kiln::CompileOptions batch3;
  batch3.dims = {{"N", 3}};
  kiln::Executable exe = kiln::compile(model, batch3);
  EXPECT_NE(exe.summary().find("stages at %nz ('nonzero'"), std::string::npos) << exe.summary();
  for (uint64_t seed : {1, 2, 3}) {
    std::vector<kiln::Tensor> in = {kiln::randn({3, 4}, seed)};
    std::vector<kiln::Tensor> got = exe.run(in);
    ASSERT_EQ(got.size(), 1u);
    expectClose(got[0], interpreted(model, in)[0]);
  }
  std::vector<kiln::Tensor> none = {kiln::Tensor::zeros(kiln::DType::F32, {3, 4})};
  EXPECT_EQ(exe.run(none)[0].shape(), (std::vector<int64_t>{0}));
  std::vector<kiln::Tensor> out = {kiln::Tensor::zeros(kiln::DType::F32, {0})};
  EXPECT_THROW(exe.runInto(none, out), kiln::Error);
  EXPECT_THROW(exe.save(tempPath("staged")), kiln::Error);

  // With its batch left open: a specialization per batch, each staged.
  kiln::CompileOptions options;
  options.onSpecialize = [](const std::string &) {};
  kiln::Executable perSize = kiln::compile(model, options);
  for (int64_t n : {3, 5, 3}) {
    std::vector<kiln::Tensor> in = {kiln::randn({n, 4}, static_cast<uint64_t>(n))};
    expectClose(perSize.run(in)[0], interpreted(model, in)[0]);
  }
  EXPECT_EQ(perSize.specializations().size(), 2u);
  EXPECT_NE(perSize.summary().find("stages at %nz"), std::string::npos) << perSize.summary();
  EXPECT_THROW(perSize.save(tempPath("staged-per-size")), kiln::Error);
}

TEST(ApiTest, SymbolicModelCompilesOncePerSizeAndRunsEverySize) {
  kiln::Model model = symbolicModel();
  std::vector<std::string> log;
  kiln::CompileOptions options;
  options.threads = 1;
  options.maxSpecializations = 2;
  options.onSpecialize = [&](const std::string &line) { log.push_back(line); };
  kiln::Executable exe = kiln::compile(model, options);
  EXPECT_TRUE(log.empty()); // nothing compiled before the first run
  EXPECT_EQ(exe.inputs()[0].shape, (std::vector<int64_t>{-1, -1, 8}));
  // Sizes around the vector width (remainders) and an empty batch.
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{1, 1}, {3, 17}, {1, 1}, {0, 5}};
  for (auto [n, s] : sizes) {
    std::vector<kiln::Tensor> in = symbolicInputs(n, s, 10 + static_cast<uint64_t>(n * 100 + s));
    std::vector<kiln::Tensor> got = exe.run(in);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].shape(), (std::vector<int64_t>{n, s, 4}));
    expectClose(got[0], interpreted(model, in)[0]);
  }
  // First the kernels with run-time sizes (Note [Kernels with run-time
  // sizes]), once; {1,1} was kept when run again; {0,5} dropped the least
  // recently used {3,17}.
  ASSERT_EQ(log.size(), 4u);
  EXPECT_NE(log[0].find("run-time sizes: 1 kernel compiled once for N in 1..1024, S in 1..1024"),
            std::string::npos)
      << log[0];
  EXPECT_NE(log[1].find("compiling for N=1, S=1: no specialization for these sizes yet (1 of at "
                        "most 2 kept); its kernels with run-time sizes (1) are compiled already"),
            std::string::npos)
      << log[1];
  EXPECT_NE(log[3].find("N=0, S=5"), std::string::npos) << log[3];
  auto kept = exe.specializations();
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0], (std::map<std::string, int64_t>{{"N", 1}, {"S", 1}}));
  EXPECT_EQ(kept[1], (std::map<std::string, int64_t>{{"N", 0}, {"S", 5}}));
  EXPECT_NE(exe.summary().find("compiles per size of N, S; 2 specializations kept (N=1, S=1: 1 "
                               "kernel (1 with run-time sizes), 1 library call"),
            std::string::npos)
      << exe.summary();
  // Into the caller's tensor, at a new size.
  std::vector<kiln::Tensor> in = symbolicInputs(2, 9, 7);
  std::vector<kiln::Tensor> mine{kiln::Tensor::zeros(kiln::DType::F32, {2, 9, 4})};
  exe.runInto(in, mine);
  expectClose(mine[0], interpreted(model, in)[0]);
}

// Note [Symbolic artifacts] in codegen/SymbolicArtifact.cpp: the kernels
// compiled once by `kiln compile --dim ... -o` load with the model; each
// size compiles from them, inside the artifact's ranges.
TEST(ApiTest, SymbolicArtifactLoadsItsKernelsAndCompilesEachSize) {
  const std::string kir = "/tmp/kiln-api-test-sym-" + std::to_string(::getpid()) + ".kir";
  const std::string path = tempPath("symbolic");
  { std::ofstream(kir) << kSymbolicText; }
  const std::string cmd = std::string(KILN_TOOL) + " compile " + kir +
                          " --dim N=1..16 --dim S=1..32 --no-cache -o " + path + " > /dev/null";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::remove(kir.c_str());
  kiln::Model model = kiln::Model::load(path);
  std::vector<std::string> log;
  kiln::CompileOptions options;
  options.threads = 1;
  options.onSpecialize = [&](const std::string &line) { log.push_back(line); };
  kiln::Executable exe = kiln::compile(model, options);
  for (auto [n, s] : std::vector<std::pair<int64_t, int64_t>>{{3, 17}, {16, 32}, {1, 1}}) {
    std::vector<kiln::Tensor> in = symbolicInputs(n, s, 40 + static_cast<uint64_t>(n * 100 + s));
    std::vector<kiln::Tensor> got = exe.run(in);
    ASSERT_EQ(got.size(), 1u);
    expectClose(got[0], interpreted(model, in)[0]);
  }
  // No kernel was compiled for the ranges here: the artifact's ran.
  ASSERT_EQ(log.size(), 3u);
  for (const std::string &line : log)
    EXPECT_NE(line.find("its kernels with run-time sizes (1) are compiled already"),
              std::string::npos)
        << line;
  const std::string outside = errorOf([&] { exe.run(symbolicInputs(17, 2, 1)); });
  EXPECT_NE(outside.find("gives N = 17, outside its range 1..16 (the symbolic artifact's)"),
            std::string::npos)
      << outside;
  kiln::CompileOptions other;
  other.cpu = "haswell";
  const std::string flags = errorOf([&] { kiln::compile(model, other); });
  EXPECT_NE(flags.find("is a symbolic artifact, compiled for its CPU, flags and ranges already"),
            std::string::npos)
      << flags;
  // A fixed size inside the range: one compile, run at that size only.
  kiln::CompileOptions fixed;
  fixed.dims = {{"N", 2}, {"S", 5}};
  kiln::Executable two = kiln::compile(model, fixed);
  std::vector<kiln::Tensor> in = symbolicInputs(2, 5, 3);
  expectClose(two.run(in)[0], interpreted(model, in)[0]);
  // The runtime alone does not load it, and says why.
  const std::string runtimeOnly = errorOf([&] { kiln::Executable::load(path); });
  EXPECT_NE(runtimeOnly.find("a symbolic artifact (compiled over ranges of sizes)"),
            std::string::npos)
      << runtimeOnly;
  std::remove(path.c_str());
}

// Executable::saveSymbolic: the API's own compile over ranges, saved before
// any run and loaded back, runs every size from the kernels it saved.
TEST(ApiTest, SymbolicModelSavesASymbolicArtifact) {
  kiln::Model model = symbolicModel();
  kiln::CompileOptions options;
  options.threads = 1;
  options.ranges["N"] = {1, 12};
  const std::string path = tempPath("saved-symbolic");
  kiln::compile(model, options).saveSymbolic(path);
  std::vector<std::string> log;
  kiln::CompileOptions quiet;
  quiet.onSpecialize = [&](const std::string &line) { log.push_back(line); };
  kiln::Executable exe = kiln::compile(kiln::Model::load(path), quiet);
  for (auto [n, s] : std::vector<std::pair<int64_t, int64_t>>{{12, 3}, {2, 40}}) {
    std::vector<kiln::Tensor> in = symbolicInputs(n, s, 70 + static_cast<uint64_t>(n + s));
    expectClose(exe.run(in)[0], interpreted(model, in)[0]);
  }
  ASSERT_EQ(log.size(), 2u);
  EXPECT_NE(log[0].find("its kernels with run-time sizes (1) are compiled already"),
            std::string::npos)
      << log[0];
  const std::string outside = errorOf([&] { exe.run(symbolicInputs(13, 2, 1)); });
  EXPECT_NE(outside.find("outside its range 1..12"), std::string::npos) << outside;
  kiln::CompileOptions fixed;
  fixed.dims = {{"N", 2}, {"S", 5}};
  const std::string one =
      errorOf([&] { kiln::compile(model, fixed).saveSymbolic(tempPath("fixed")); });
  EXPECT_NE(one.find("as a symbolic artifact: the model is compiled for one size"),
            std::string::npos)
      << one;
  std::remove(path.c_str());
}

TEST(ApiTest, DimsTheModelAssumesEqualAreCheckedAtEveryRun) {
  // Two inputs with their own batch symbols, broadcast together: the model
  // assumes B == C (Note [Assumed equal dims]) and compiles per size of both.
  kiln::Model model = modelFromText("assumed", "graph @two(%a: f32[B,8], %b: f32[C,8]) -> "
                                               "(f32[B,8]) {\n"
                                               "  %0 = mul(%a, %b) : f32[B,8]\n"
                                               "  %1 = tanh(%0) : f32[B,8]\n"
                                               "  return %1\n"
                                               "}\n");
  kiln::CompileOptions options;
  options.onSpecialize = [](const std::string &) {};
  kiln::Executable exe = kiln::compile(model, options);
  std::vector<kiln::Tensor> in = {kiln::randn({3, 8}, 1), kiln::randn({3, 8}, 2)};
  expectClose(exe.run(in)[0], interpreted(model, in)[0]);
  std::string e = errorOf([&] { exe.run({kiln::randn({3, 8}, 1), kiln::randn({4, 8}, 2)}); });
  EXPECT_NE(e.find("'mul' op assumes B == C, but the inputs give B = 3 (from input 0 ('%a') dim "
                   "0) and C = 4 (from input 1 ('%b') dim 0)"),
            std::string::npos)
      << e;
}

TEST(ApiTest, PerSizeModelSavesItsSpecializationsAsASizeSet) {
  // Note [Size sets]: save() after runs at two sizes writes both; load()
  // runs either without compiling and refuses a third, naming the sizes.
  kiln::Model model = symbolicModel();
  kiln::CompileOptions options;
  options.onSpecialize = [](const std::string &) {};
  kiln::Executable exe = kiln::compile(model, options);
  std::vector<kiln::Tensor> small = symbolicInputs(1, 3, 4), big = symbolicInputs(2, 9, 5);
  exe.run(big);
  exe.run(small);
  const std::string path = "/tmp/kiln-api-test-set-" + std::to_string(::getpid()) + ".kiln";
  exe.save(path);
  kiln::Executable loaded = kiln::Executable::load(path);
  std::remove(path.c_str());
  EXPECT_EQ(loaded.specializations(), (std::vector<std::map<std::string, int64_t>>{
                                          {{"N", 1}, {"S", 3}}, {{"N", 2}, {"S", 9}}}));
  EXPECT_NE(loaded.summary().find("a size set of 2 sizes (N=1, S=3: "), std::string::npos)
      << loaded.summary();
  expectClose(loaded.run(small)[0], interpreted(model, small)[0]);
  expectClose(loaded.run(big)[0], interpreted(model, big)[0]);
  std::string e = errorOf([&] { loaded.run(symbolicInputs(2, 4, 6)); });
  EXPECT_NE(e.find("no size of this size set fits the inputs (f32[2,4,8], f32[2,1,8], f32[8,4]); "
                   "it was compiled for N=1, S=3; N=2, S=9"),
            std::string::npos)
      << e;
}

TEST(ApiTest, SymbolicModelChecksSizes) {
  kiln::Model model = symbolicModel();
  kiln::CompileOptions options;
  options.ranges["S"] = {1, 64};
  options.onSpecialize = [](const std::string &) {};
  kiln::Executable exe = kiln::compile(model, options);
  // Two inputs that give N different sizes: one error naming both.
  std::vector<kiln::Tensor> bad = symbolicInputs(2, 3, 1);
  bad[1] = kiln::randn({5, 1, 8}, 2);
  std::string e = errorOf([&] { exe.run(bad); });
  EXPECT_NE(e.find("input 1 ('%y') has N = 5 but input 0 ('%x') dim 0 bound N = 2"),
            std::string::npos)
      << e;
  e = errorOf([&] { exe.run(symbolicInputs(1, 65, 1)); });
  EXPECT_NE(e.find("input 0 ('%x') dim 1 gives S = 65, outside its range 1..64"), std::string::npos)
      << e;
  e = errorOf([&] { exe.save("/tmp/kiln-api-test-never-written.kiln"); });
  EXPECT_NE(e.find("cannot save a model that compiles per size before it has run"),
            std::string::npos)
      << e;
  // A size fixed in dims is checked, and the others still compile per size.
  kiln::CompileOptions fixed;
  fixed.dims["N"] = 2;
  fixed.onSpecialize = [](const std::string &) {};
  kiln::Executable half = kiln::compile(model, fixed);
  e = errorOf([&] { half.run(symbolicInputs(3, 4, 1)); });
  EXPECT_NE(e.find("input 0 ('%x') dim 0 gives N = 3, but the model was compiled with N = 2"),
            std::string::npos)
      << e;
  std::vector<kiln::Tensor> in = symbolicInputs(2, 4, 1);
  expectClose(half.run(in)[0], interpreted(model, in)[0]);
  // Ranges name symbols of the inputs, are not empty, and hold a size
  // fixed in dims (the rule codegen::checkRanges gives the CLI too).
  kiln::CompileOptions wrong;
  wrong.ranges["T"] = {1, 2};
  e = errorOf([&] { kiln::compile(model, wrong); });
  EXPECT_NE(e.find("CompileOptions::ranges: the range T=1..2 names no symbolic dim of the "
                   "graph's inputs (its symbols: N, S)"),
            std::string::npos)
      << e;
  wrong.ranges = {{"S", {5, 4}}};
  e = errorOf([&] { kiln::compile(model, wrong); });
  EXPECT_NE(e.find("the range S=5..4 is empty or negative"), std::string::npos) << e;
  wrong.ranges = {{"N", {1, 8}}};
  wrong.dims["N"] = 9;
  e = errorOf([&] { kiln::compile(model, wrong); });
  EXPECT_NE(e.find("N=9 is outside its range 1..8"), std::string::npos) << e;
  kiln::CompileOptions inside = fixed;
  inside.ranges["N"] = {1, 8};
  expectClose(kiln::compile(model, inside).run(in)[0], interpreted(model, in)[0]);
}

TEST(ApiTest, SymbolicModelNamesTheSizesAFailedCompileWasFor) {
  // reshape to [3, -1] compiles only where 4*N divides by 3.
  kiln::Model model = modelFromText("odd", "graph @odd(%x: f32[N,4]) -> (f32[3,?]) {\n"
                                           "  %0 = reshape(%x) {shape = [3, -1]} : f32[3,?]\n"
                                           "  return %0\n"
                                           "}\n");
  kiln::CompileOptions options;
  options.onSpecialize = [](const std::string &) {};
  kiln::Executable exe = kiln::compile(model, options);
  EXPECT_EQ(exe.run({kiln::randn({3, 4}, 1)})[0].shape(), (std::vector<int64_t>{3, 4}));
  std::string e = errorOf([&] { exe.run({kiln::randn({2, 4}, 1)}); });
  EXPECT_NE(e.find("compiling for N=2: "), std::string::npos) << e;
  EXPECT_NE(e.find("cannot reshape"), std::string::npos) << e;
}

TEST(ApiTest, KernelsWithRunTimeSizesNarrowTheirRangesToWhatTheModelTakes) {
  // Positions from a table of 100 rows: the model is valid for S <= 100, so
  // the kernels are merged over S in 1..64 (the default 1..1024 halved
  // four times, Note [Kernels with run-time sizes]); S = 80 compiles its
  // own, S = 150 is the gather's error.
  kiln::Model model = modelFromText("positions", "graph @pos(%x: f32[S,8]) -> (f32[S,8]) {\n"
                                                 "  %t = constant dense<0.25> : f32[100,8]\n"
                                                 "  %r = iota() {shape = [S]} : i64[S]\n"
                                                 "  %g = gather(%t, %r) : f32[S,8]\n"
                                                 "  %y = add(%g, %x) : f32[S,8]\n"
                                                 "  %z = tanh(%y) : f32[S,8]\n"
                                                 "  return %z\n"
                                                 "}\n");
  std::vector<std::string> log;
  kiln::CompileOptions options;
  options.onSpecialize = [&](const std::string &line) { log.push_back(line); };
  kiln::Executable exe = kiln::compile(model, options);
  for (int64_t s : {50, 80}) {
    std::vector<kiln::Tensor> in = {kiln::randn({s, 8}, static_cast<uint64_t>(s))};
    expectClose(exe.run(in)[0], interpreted(model, in)[0]);
  }
  ASSERT_EQ(log.size(), 3u);
  EXPECT_NE(log[0].find(" for S in 1..64 (not over S in 1..1024: "), std::string::npos) << log[0];
  EXPECT_NE(log[0].find("'gather' op index 100 is out of range for axis 0 of size 100"),
            std::string::npos)
      << log[0];
  EXPECT_NE(log[1].find("compiling for S=50: no specialization for these sizes yet (1 of at most "
                        "8 kept); its kernels with run-time sizes"),
            std::string::npos)
      << log[1];
  EXPECT_EQ(log[2].find("kernels with run-time sizes"), std::string::npos) << log[2];
  std::string e = errorOf([&] { exe.run({kiln::randn({150, 8}, 1)}); });
  EXPECT_NE(e.find("'gather' op index 100 is out of range for axis 0 of size 100"),
            std::string::npos)
      << e;
}

TEST(ApiTest, SymbolicModelRunsManySizesOnManyThreads) {
  kiln::Model model = symbolicModel();
  kiln::CompileOptions options;
  options.maxSpecializations = 3; // fewer than the sizes: entries come and go
  options.onSpecialize = [](const std::string &) {};
  kiln::Executable exe = kiln::compile(model, options);
  std::vector<std::vector<kiln::Tensor>> inputs, want;
  for (int64_t s = 1; s <= 5; ++s) {
    inputs.push_back(symbolicInputs(2, s, static_cast<uint64_t>(s)));
    want.push_back(interpreted(model, inputs.back()));
  }
  std::vector<int> failures(8, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < failures.size(); ++t)
    threads.emplace_back([&, t] {
      for (size_t r = 0; r < 10; ++r) {
        size_t k = (t + r) % inputs.size();
        kiln::Comparison c = kiln::compareTensors(exe.run(inputs[k])[0], want[k][0], {});
        failures[t] += !c.ok();
      }
    });
  for (std::thread &t : threads)
    t.join();
  for (int f : failures)
    EXPECT_EQ(f, 0);
  EXPECT_LE(exe.specializations().size(), 3u);
}

// kiln/Cuda.h: a CUDA artifact (written by the CLI) loads on the machine's
// GPU and runs as the interpreter does; where there is none, loading it is
// one kiln::Error naming the file and what is missing; a CPU artifact or a
// damaged file is an error naming the file, GPU or not.
TEST(ApiTest, CudaModelsLoadOnTheGpuOrSayWhyNot) {
#if KILN_TEST_HAS_CUDA
  const std::string path = tempPath("cuda");
  const std::string command =
      std::string(KILN_TOOL) + " compile " + kMlp + "mlp.kir --target cuda -o " + path;
  ASSERT_EQ(std::system((command + " > /dev/null").c_str()), 0) << command;
  std::string error;
  std::optional<kiln::CudaModel> model;
  try {
    model.emplace(kiln::CudaModel::load(path));
  } catch (const kiln::Error &e) {
    error = e.what();
  }
  if (model) { // a GPU: the model runs as the interpreter does
    kiln::Tensor x = readNpyOrDie(kMlp + "x.npy");
    EXPECT_EQ(model->inputs().front().shape, x.shape());
    std::vector<kiln::Tensor> got = model->run({x});
    expectClose(got.front(), interpreted(kiln::Model::load(kMlp + "mlp.kir"), {x}).front());
  } else {
    EXPECT_NE(error.find("CUDA artifact '" + path + "': no CUDA driver on this machine"),
              std::string::npos)
        << error;
  }
  EXPECT_NE(errorOf([&] {
              kiln::CudaModel::load(kMlp + "mlp.kir");
            }).find("not a Kiln CUDA artifact (no KILNGPU magic)"),
            std::string::npos);
  std::remove(path.c_str());
#else
  EXPECT_NE(errorOf([&] {
              kiln::CudaModel::load(kMlp + "mlp.kir");
            }).find("this Kiln was built without the CUDA backend"),
            std::string::npos);
#endif
}

std::string fileBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

kiln::Model kirModel(const char *stem, const std::string &text) {
  const std::string path =
      "/tmp/kiln-api-test-" + std::string(stem) + "-" + std::to_string(::getpid()) + ".kir";
  std::ofstream(path) << text;
  kiln::Model m = kiln::Model::load(path);
  std::remove(path.c_str());
  return m;
}

// kiln::compileForCuda writes the file `kiln compile --target cuda -o`
// writes, byte for byte (here, without a GPU, as on one); a symbol without
// a size, a node the CUDA backend does not run and a compute capability
// out of range are each one kiln::Error naming it, and write nothing.
TEST(ApiTest, CompilesForCudaAsTheCliDoes) {
  const std::string api = tempPath("cuda-api");
  kiln::Model mlp = kiln::Model::load(kMlp + "mlp.kir");
#if KILN_TEST_HAS_CUDA
  const std::string cli = tempPath("cuda-cli");
  for (int arch : {80, 90}) {
    const std::string command = std::string(KILN_TOOL) + " compile " + kMlp +
                                "mlp.kir --target cuda --cuda-arch sm_" + std::to_string(arch) +
                                " -o " + cli + " > /dev/null";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    kiln::CudaCompileOptions options;
    options.arch = arch;
    kiln::compileForCuda(mlp, api, options);
    const std::string bytes = fileBytes(api);
    EXPECT_GT(bytes.size(), 1000u);
    EXPECT_TRUE(bytes == fileBytes(cli)) << "sm_" << arch << ": " << api << " is not " << cli;
  }
  if (!HasFailure()) {
    std::remove(api.c_str());
    std::remove(cli.c_str());
  }

  // The same model without fusion or libraries is another artifact.
  kiln::CudaCompileOptions plain;
  plain.fusion = plain.libraries = false;
  kiln::compileForCuda(mlp, api, plain);
  EXPECT_NE(fileBytes(api).find("KILNGPU"), std::string::npos);
  std::remove(api.c_str());

  const char *relu = "graph @g(%x: f32[B,4]) -> (f32[B,4]) {\n"
                     "  %y = relu(%x) : f32[B,4]\n  return %y\n}\n";
  kiln::Model symbolic = kirModel("symbolic", relu);
  EXPECT_NE(errorOf([&] { kiln::compileForCuda(symbolic, api); })
                .find("the inputs' symbol B has none; give each its size in "
                      "CudaCompileOptions::dims"),
            std::string::npos);
  kiln::CudaCompileOptions sized;
  sized.dims["B"] = 3;
  kiln::compileForCuda(symbolic, api, sized);
  EXPECT_FALSE(fileBytes(api).empty());
  std::remove(api.c_str());

  kiln::Model recurrent =
      kirModel("recurrent", "graph @g(%x: f32[5,2,3], %w: f32[1,16,3], %r: f32[1,16,4]) -> "
                            "(f32[5,1,2,4]) {\n"
                            "  %y, %h, %c = lstm(%x, %w, %r) : f32[5,1,2,4], f32[1,2,4], "
                            "f32[1,2,4]\n  return %y\n}\n");
  const std::string refused = errorOf([&] { kiln::compileForCuda(recurrent, api); });
  EXPECT_NE(refused.find("compileForCuda('" + api + "')"), std::string::npos) << refused;
  EXPECT_NE(refused.find("lstm"), std::string::npos) << refused;
  EXPECT_FALSE(std::ifstream(api).good()) << "a refused compile wrote " << api;

  kiln::CudaCompileOptions old;
  old.arch = 35;
  EXPECT_NE(
      errorOf([&] { kiln::compileForCuda(mlp, api, old); }).find("CudaCompileOptions::arch = 35"),
      std::string::npos);
#else
  EXPECT_NE(errorOf([&] {
              kiln::compileForCuda(mlp, api);
            }).find("this Kiln was built without the CUDA backend"),
            std::string::npos);
#endif
}

} // namespace

// kiln::toMlir writes what `kiln translate --emit=mlir` writes; what MLIR 16
// cannot hold is a kiln::Error naming it.
TEST(ApiTest, WritesMlirAsTheCliDoes) {
  kiln::Model mlp = kiln::Model::load(kMlp + "mlp.kir");
#if KILN_TEST_HAS_MLIR
  const std::string cli = tempPath("mlir-cli");
  const std::string command =
      std::string(KILN_TOOL) + " translate " + kMlp + "mlp.kir -o " + cli + " 2> /dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const std::string text = kiln::toMlir(mlp);
  EXPECT_NE(text.find("linalg."), std::string::npos);
  EXPECT_TRUE(text == fileBytes(cli)) << "toMlir differs from " << cli;
  if (!HasFailure())
    std::remove(cli.c_str());
  kiln::MlirOptions asLoaded;
  asLoaded.pipeline = false;
  asLoaded.inlineElements = 0;
  EXPECT_NE(kiln::toMlir(mlp, asLoaded).find("dense_resource<"), std::string::npos);

  const char *f8 = "graph @g(%x: f32[4]) -> (f32[4]) {\n"
                   "  %0 = cast(%x) {to = f8e5m2fnuz} : f8e5m2fnuz[4]\n"
                   "  %1 = cast(%0) {to = f32} : f32[4]\n  return %1\n}\n";
  EXPECT_NE(errorOf([&] {
              kiln::toMlir(kirModel("f8", f8), asLoaded);
            }).find("MLIR 16 has no element type for dtype f8e5m2fnuz"),
            std::string::npos);
#else
  EXPECT_NE(errorOf([&] { kiln::toMlir(mlp); }).find("built without MLIR"), std::string::npos);
#endif
}
