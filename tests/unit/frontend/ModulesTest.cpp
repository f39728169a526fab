//===- ModulesTest.cpp - Building blocks: names, init, load/save, trace ---===//
#include "kiln/Modules.h"
#include "ir/Interpreter.h"
#include "ir/Npy.h"
#include "ir/Printer.h"
#include "kiln/Trace.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>

namespace kiln {
namespace {

Error errorOf(const std::function<void()> &fn) {
  try {
    fn();
  } catch (const Error &e) {
    return e;
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return Error("none thrown");
}

std::vector<std::string> names(const nn::Module &m) {
  std::vector<std::string> out;
  for (const auto &[name, t] : m.namedParameters())
    out.push_back(name);
  return out;
}

/// A temporary directory removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("kiln-modules-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

/// A small CNN built with Sequential.
std::unique_ptr<nn::Sequential> makeCnn() {
  auto net = std::make_unique<nn::Sequential>();
  net->add<nn::Conv2d>("conv", 3, 4, 3, nn::Conv2dOptions{.padding = 1});
  net->add<nn::BatchNorm2d>("bn", 4);
  net->add<nn::ReLU>("relu");
  net->add<nn::Conv2d>("down", 4, 2, 3, nn::Conv2dOptions{.stride = 2, .bias = false});
  return net;
}

TEST(Modules, ParameterNamesFollowTheModuleTree) {
  auto cnn = makeCnn();
  EXPECT_EQ(names(*cnn),
            (std::vector<std::string>{"conv.weight", "conv.bias", "bn.weight", "bn.bias",
                                      "bn.running_mean", "bn.running_var", "down.weight"}));
  nn::Sequential outer;
  outer.add("features", std::move(cnn));
  outer.add<nn::Linear>("head", 4, 2);
  EXPECT_EQ(names(outer).front(), "features.conv.weight");
  EXPECT_EQ(names(outer).back(), "head.bias");
  EXPECT_EQ(parameterName(outer.parameter("features.bn.running_var")), "features.bn.running_var");
  nn::MultiheadAttention attn(8, 2);
  EXPECT_EQ(names(attn), (std::vector<std::string>{"in_proj_weight", "in_proj_bias",
                                                   "out_proj.weight", "out_proj.bias"}));
  EXPECT_EQ(attn.parameter("in_proj_weight").shape(), (std::vector<int64_t>{24, 8}));
}

TEST(Modules, InitializationIsDeterministic) {
  manualSeed(5);
  nn::Linear a(6, 3);
  manualSeed(5);
  nn::Linear b(6, 3);
  nn::Linear c(6, 3);
  EXPECT_TRUE(a.parameter("weight").bitwiseEqual(b.parameter("weight")));
  EXPECT_FALSE(a.parameter("weight").bitwiseEqual(c.parameter("weight")));
  double bound = 1.0 / std::sqrt(6.0);
  for (double v : toVector(a.parameter("weight")))
    EXPECT_LE(std::fabs(v), bound);
}

TEST(Modules, SaveAndLoadRoundTrip) {
  TempDir dir;
  manualSeed(1);
  auto saved = makeCnn();
  saved->saveParameters(dir.path.string());
  EXPECT_TRUE(std::filesystem::exists(dir.path / "bn.running_mean.npy"));
  manualSeed(2);
  auto loaded = makeCnn();
  Tensor x = randn({1, 3, 6, 6}, 3);
  EXPECT_FALSE((*saved)(x).bitwiseEqual((*loaded)(x)));
  Tensor before = loaded->parameter("conv.weight");
  loaded->loadParameters(dir.path.string());
  EXPECT_TRUE((*saved)(x).bitwiseEqual((*loaded)(x)));
  // The old tensor is untouched (a graph traced before keeps its weights).
  EXPECT_FALSE(before.bitwiseEqual(loaded->parameter("conv.weight")));
  EXPECT_EQ(parameterName(loaded->parameter("conv.weight")), "conv.weight");
  EXPECT_EQ(parameterName(before), "");
}

TEST(Modules, LoadErrorsNameTheFileAndChangeNothing) {
  TempDir dir;
  nn::Linear fc(3, 2);
  std::filesystem::create_directories(dir.path);
  DiagnosticEngine diag;
  ASSERT_TRUE(succeeded(writeNpy((dir.path / "weight.npy").string(), zeros({3, 2}), diag)));
  Tensor before = fc.parameter("weight");
  Error e = errorOf([&] { fc.loadParameters(dir.path.string()); });
  std::string what = e.what();
  EXPECT_NE(what.find("parameter 'weight' expects f32[2,3], got f32[3,2]"), std::string::npos)
      << what;
  EXPECT_NE(what.find("weight.npy"), std::string::npos) << what;
  EXPECT_NE(what.find("parameter 'bias': no file"), std::string::npos) << what;
  EXPECT_TRUE(fc.parameter("weight").bitwiseEqual(before));
  EXPECT_NE(std::string(errorOf([&] { fc.setParameter("weight", zeros({2})); }).what())
                .find("expects f32[2,3], got f32[2]"),
            std::string::npos);
  EXPECT_NE(std::string(errorOf([&] { (void)fc.parameter("nope"); }).what()).find("'nope'"),
            std::string::npos);
}

TEST(Modules, LayersComputeWhatTheySay) {
  nn::Linear fc(2, 1);
  fc.setParameter("weight", tensor({2, 3}, {1, 2}));
  fc.setParameter("bias", tensor({1}, {1}));
  EXPECT_EQ(toVector(fc(tensor({1, 1, 2, 0}, {2, 2}))), (std::vector<double>{6, 5}));
  // Rank-3 input goes through matmul + add.
  EXPECT_EQ(toVector(fc(tensor({1, 1, 2, 0}, {1, 2, 2}))), (std::vector<double>{6, 5}));

  nn::Embedding emb(4, 2);
  emb.setParameter("weight", tensor({0, 1, 2, 3, 4, 5, 6, 7}, {4, 2}));
  Tensor rows = emb(tensorOfInts({3, 0}, {2}));
  EXPECT_EQ(toVector(rows), (std::vector<double>{6, 7, 0, 1}));

  nn::LayerNorm norm({4});
  Tensor y = norm(tensor({1, 2, 3, 4}, {1, 4}));
  EXPECT_NEAR(item(reduce_mean(y)), 0.0, 1e-6);
}

TEST(Modules, ErrorsAreLocatedAtTheModuleCall) {
  nn::Linear fc(3, 2);
  int line = __LINE__ + 1;
  Error e = errorOf([&] { (void)fc(zeros({4, 5})); });
  EXPECT_NE(std::string(e.what()).find("ModulesTest.cpp:" + std::to_string(line) + ":"),
            std::string::npos)
      << e.what();
  EXPECT_NE(std::string(e.what()).find("'gemm' op"), std::string::npos) << e.what();

  nn::MultiheadAttention attn(8, 2);
  line = __LINE__ + 1;
  Error bad = errorOf([&] { (void)attn(zeros({2, 8})); });
  EXPECT_NE(std::string(bad.what()).find("ModulesTest.cpp:" + std::to_string(line) + ":"),
            std::string::npos)
      << bad.what();
  EXPECT_NE(std::string(bad.what()).find("batch-first input [batch, seq, 8], got f32[2,8]"),
            std::string::npos)
      << bad.what();
  EXPECT_NE(std::string(errorOf([] { nn::MultiheadAttention m(6, 4); }).what()).find("divisible"),
            std::string::npos);
}

TEST(Modules, BuildingBlocksTraceToTheirEagerResults) {
  manualSeed(9);
  auto cnn = makeCnn();
  nn::Embedding emb(10, 8);
  nn::MultiheadAttention attn(8, 2);
  nn::LayerNorm norm({8});
  nn::Sequential ff;
  ff.add<nn::Linear>("up", 8, 16);
  ff.add<nn::GELU>("act", "tanh");
  ff.add<nn::Linear>("down", 16, 8);

  Tensor image = randn({2, 3, 6, 6}, 1);
  auto cnnGraph = trace([&](const Tensor &x) { return (*cnn)(x); }, {image},
                        {.checkInputs = {{randn({2, 3, 6, 6}, 2)}}});
  DiagnosticEngine diag;
  EXPECT_TRUE(
      interpret(*cnnGraph, std::vector<Tensor>{image}, diag)->at(0).bitwiseEqual((*cnn)(image)));

  auto text = [&](const Tensor &ids) { return ff(norm(attn(emb(ids)))); };
  Tensor ids = tensorOfInts({1, 2, 3, 9, 0, 4}, {2, 3});
  auto textGraph =
      trace(text, {ids}, {.checkInputs = {{tensorOfInts({5, 5, 5, 1, 1, 1}, {2, 3})}}});
  EXPECT_TRUE(interpret(*textGraph, std::vector<Tensor>{ids}, diag)->at(0).bitwiseEqual(text(ids)));
  std::string printed = printGraph(*textGraph);
  EXPECT_NE(printed.find("gather(%weight, %input0)"), std::string::npos) << printed;
}

} // namespace
} // namespace kiln
