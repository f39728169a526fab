//===- ApiTest.cpp - include/kiln/kiln.h as an application uses it --------===//
#include "kiln/kiln.h"

#include "ir/Compare.h"
#include "ir/Npy.h"
#include "kiln/Trace.h"

#include <gtest/gtest.h>

#include <cstdio>
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

} // namespace
