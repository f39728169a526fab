//===- FusionTestUtil.h - Helpers of the fusion differential tests -*- C++ -*-===//
//
// Building graphs, running a fusion plan (kernels through lowerGroup and
// interpretKernel, library and fallback groups on reference kernels) and
// comparing it with the interpreter within each op's bound from ir/Ops.def.
// check() records every op it ran, so that FusionTest can require that
// every op of the table was covered.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/Fusion.h"
#include "codegen/cpu/dnnl/OneDnnSteps.h"
#include "ir/Builder.h"
#include "ir/Interpreter.h"
#include "tests/unit/OpBounds.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <unordered_map>

namespace kiln::codegen::fusiontest {

/// The fusion options of the CPU compiler: oneDNN's table of anchors and
/// epilogue ops.
FusionOptions cpuFusion();

/// Mnemonics of every op that appeared in a differential case.
std::set<std::string> &covered();

/// A graph under construction with the Builder (types are inferred).
struct TestGraph {
  std::unique_ptr<Graph> graph = std::make_unique<Graph>("test");
  DiagnosticEngine diag;
  ScopedDiagnosticCollector quiet{diag};
  Builder b{*graph, diag};

  Value *input(DType t, std::vector<int64_t> shape, std::string name = "") {
    Value *v = graph->addInput(TensorType(t, shape), std::move(name));
    return v;
  }
  Value *op(OpKind kind, std::vector<Value *> operands, std::vector<NamedAttr> attrs = {},
            std::string name = "") {
    Value *v = b.createValue(kind, std::move(operands), std::move(attrs));
    EXPECT_NE(v, nullptr) << "cannot build '" << opInfo(kind).mnemonic << "'";
    if (v && !name.empty())
      v->setName(std::move(name));
    return v;
  }
  std::vector<Value *> ops(OpKind kind, std::vector<Value *> operands, std::vector<NamedAttr> attrs,
                           unsigned numResults) {
    auto n = b.create(kind, std::move(operands), std::move(attrs), numResults);
    EXPECT_TRUE(n.succeeded());
    std::vector<Value *> out;
    if (n.succeeded())
      for (unsigned i = 0; i < (*n)->numResults(); ++i)
        out.push_back((*n)->result(i));
    return out;
  }
  Value *constant(Tensor t) { return b.constant(std::move(t)); }
  void outputs(std::vector<Value *> outs) { graph->setOutputs(std::move(outs)); }
};

struct InputOptions {
  /// Integer inputs are drawn from [intLo, intHi].
  int64_t intLo = -5, intHi = 5;
  /// Float inputs are normal(0, scale).
  double scale = 1.5;
  /// Explicit values for inputs by index.
  std::map<unsigned, Tensor> fixed;
};

struct Result {
  FusionPlan plan;
  int numKernels = 0;
  int numGroups(FusionGroup::Kind k) const {
    int n = 0;
    for (const FusionGroup &g : plan.groups)
      n += g.kind == k;
    return n;
  }
};

Tensor randomTensor(const TensorType &t, std::mt19937 &rng, const InputOptions &o);
/// Whether `n`'s compiled result may differ from the reference (its ulp
/// bound in ir/Ops.def is non-zero, unless its lowering is one primitive).
bool isInexact(const Node &n);
/// Plans, runs and compares `g` with the interpreter on random inputs.
Result check(const Graph &g, const InputOptions &o = {}, FusionOptions fo = cpuFusion(),
             unsigned seed = 1);
/// Every dtype of DTypes.def.
std::vector<DType> allDTypes();

} // namespace kiln::codegen::fusiontest
