//===- IsaCapTest.cpp - oneDNN's ISA cap is one per process ----------------===//
//
// codegen/cpu/dnnl/DnnlIsa.h: a process compiles for one oneDNN ISA. This
// binary is its own process, so the first compile here sets the cap.
//
//===----------------------------------------------------------------------===//
#include "codegen/Compiler.h"
#include "ir/Builder.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::codegen;

namespace {

/// A matmul (a oneDNN call) of f32[4,8] by a constant.
std::unique_ptr<Graph> matmulGraph() {
  auto g = std::make_unique<Graph>("mm");
  DiagnosticEngine diag;
  Builder b(*g, diag);
  Value *x = g->addInput(TensorType(DType::F32, makeShape({4, 8})), "x");
  Value *w = b.constant(Tensor::zeros(DType::F32, {8, 3}));
  g->setOutputs({b.createValue(OpKind::MatMul, {x, w})});
  return g;
}

TEST(IsaCapTest, OneCapPerProcess) {
  auto compileFor = [](const char *cpu, std::string &messages) {
    DiagnosticEngine diag;
    ScopedDiagnosticCollector collect(diag);
    CompileOptions opts;
    opts.cpu = cpu;
    bool ok = compile(*matmulGraph(), opts, diag).succeeded();
    messages = collect.str();
    return ok;
  };
  std::string m;
  ASSERT_TRUE(compileFor("haswell", m)) << m;
  EXPECT_TRUE(compileFor("x86-64-v3", m)) << m; // the same cap (avx2) again
  EXPECT_FALSE(compileFor("native", m));
  EXPECT_NE(m.find("this process already compiled for --cpu haswell (oneDNN ISA avx2)"),
            std::string::npos)
      << m;
  EXPECT_FALSE(compileFor("x86-64", m));
  EXPECT_NE(m.find("needs a process of its own"), std::string::npos) << m;
}

} // namespace
