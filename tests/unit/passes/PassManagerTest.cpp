//===- PassManagerTest.cpp - Registry, pipelines, instrumentation -*- C++ -*-===//
//
// What the pass manager itself does: the registry built from Passes.def,
// pipeline parsing and its errors, statistics, verify-each, IR dumps and
// timing. What passes do to IR is tested with lit (tests/lit/passes/), not
// here. The graphs below have no nodes, or nodes the verifier rejects
// before running any op hook, so these tests do not depend on op kernels.
//
//===----------------------------------------------------------------------===//
#include "passes/PassManager.h"
#include "passes/Passes.h"

#include <algorithm>
#include <filesystem>
#include <gtest/gtest.h>

#include <set>
#include <sstream>

namespace kiln {
namespace {

/// A graph `@g(%x: f32[2]) -> (f32[2]) { return %x }`.
std::unique_ptr<Graph> identityGraph() {
  auto g = std::make_unique<Graph>("g");
  Value *x = g->addInput(TensorType(DType::F32, std::vector<int64_t>{2}), "x");
  g->setOutputs({x});
  return g;
}

/// Counts its runs; reports no change.
class CountingPass : public Pass {
public:
  CountingPass() : Pass("test-counting", "Counts runs and inputs") {}
  PassResult run(Graph &g, PassContext &) override {
    ++numRuns;
    numInputs += g.numInputs();
    return PassResult::success(false);
  }
  Statistic numRuns{this, "num-runs", "Times run"};
  Statistic numInputs{this, "num-inputs", "Graph inputs seen"};
};

/// Leaves the graph without outputs (verifier rule [V6]) and claims success.
class BreakOutputsPass : public Pass {
public:
  BreakOutputsPass() : Pass("test-break-outputs", "Removes the outputs") {}
  PassResult run(Graph &g, PassContext &) override {
    g.setOutputs({});
    return PassResult::success(true);
  }
};

/// Adds a `relu` with no operand (rule [V1]); the verifier reports it
/// without calling relu's type inference.
class BadArityPass : public Pass {
public:
  BadArityPass() : Pass("test-bad-arity", "Adds a node with a missing operand") {}
  PassResult run(Graph &g, PassContext &) override {
    g.createNode(opInfo(OpKind::Relu), {}, {g.input(0)->type()}, {}, Location());
    return PassResult::success(true);
  }
};

/// Fails, with or without a diagnostic.
class FailingPass : public Pass {
public:
  explicit FailingPass(bool withDiagnostic)
      : Pass("test-failing", "Always fails"), withDiagnostic_(withDiagnostic) {}
  PassResult run(Graph &g, PassContext &ctx) override {
    if (withDiagnostic_)
      ctx.diag().emitError(Location()) << "test-failing gave up on '@" << g.name() << "'";
    return PassResult::failure();
  }

private:
  bool withDiagnostic_;
};

/// The passes of the table, in its order (Passes.def is the one list).
std::vector<std::string> tablePasses() {
  return {
#define PASS(Class, FlagName, Description) FlagName,
#include "passes/Passes.def"
  };
}

TEST(PassRegistryTest, HoldsEveryPassOfPassesDef) {
  std::vector<std::string> names;
  for (const PassInfo &p : registeredPasses())
    names.push_back(p.name);
  std::vector<std::string> expected = tablePasses();
  ASSERT_GE(names.size(), expected.size());
  names.resize(expected.size()); // tests may have registered more after these
  EXPECT_EQ(names, expected);
  EXPECT_TRUE(std::is_sorted(expected.begin(), expected.end())) << "keep Passes.def sorted";
}

// A pass is a file, a registry line and a `.kir` test: every pass of the
// table has its lit directory with at least one test in it.
TEST(PassRegistryTest, EveryPassHasLitTests) {
  for (const std::string &name : tablePasses()) {
    std::filesystem::path dir = std::filesystem::path(KILN_SOURCE_DIR) / "tests/lit/passes" / name;
    bool any = false;
    if (std::filesystem::is_directory(dir))
      for (const auto &entry : std::filesystem::directory_iterator(dir))
        any = any || entry.path().extension() == ".kir";
    EXPECT_TRUE(any) << "pass '" << name << "' has no .kir test in " << dir;
  }
}

TEST(PassRegistryTest, FactoriesBuildPassesWithTheRegisteredNames) {
  std::set<std::string> seen;
  for (const PassInfo &p : registeredPasses()) {
    EXPECT_TRUE(seen.insert(p.name).second) << "duplicate pass " << p.name;
    EXPECT_FALSE(p.description.empty()) << p.name;
    std::unique_ptr<Pass> pass = p.create();
    ASSERT_NE(pass, nullptr);
    EXPECT_EQ(pass->name(), p.name);
    EXPECT_EQ(pass->description(), p.description);
  }
  EXPECT_EQ(lookupPass("cse")->name, "cse");
  EXPECT_EQ(lookupPass("no-such-pass"), nullptr);
}

TEST(PassRegistryTest, TestPassesCanBeRegisteredAndParsed) {
  if (!lookupPass("test-counting"))
    registerPass("test-counting", "Counts runs and inputs",
                 [] { return std::make_unique<CountingPass>(); });
  DiagnosticEngine diag;
  PassManager pm;
  ASSERT_TRUE(succeeded(parsePassPipeline("dce,test-counting", pm, diag)));
  ASSERT_EQ(pm.size(), 2u);
  EXPECT_EQ(pm.pass(1).name(), "test-counting");
  EXPECT_NE(knownPassNames().find("test-counting"), std::string::npos);
}

TEST(PipelineParserTest, ParsesNamesInOrder) {
  DiagnosticEngine diag;
  PassManager pm;
  ASSERT_TRUE(succeeded(parsePassPipeline("canonicalize,constant-fold,cse,dce", pm, diag)));
  ASSERT_EQ(pm.size(), 4u);
  EXPECT_EQ(pm.pass(0).name(), "canonicalize");
  EXPECT_EQ(pm.pass(3).name(), "dce");
  EXPECT_EQ(pm.pipelineString(), "canonicalize,constant-fold,cse,dce");
}

TEST(PipelineParserTest, PipelineStringRoundTrips) {
  DiagnosticEngine diag;
  PassManager a, b;
  ASSERT_TRUE(succeeded(parsePassPipeline(" cse , dce,cse ", a, diag)));
  EXPECT_EQ(a.pipelineString(), "cse,dce,cse");
  ASSERT_TRUE(succeeded(parsePassPipeline(a.pipelineString(), b, diag)));
  EXPECT_EQ(b.pipelineString(), a.pipelineString());
}

TEST(PipelineParserTest, EmptyStringIsTheEmptyPipeline) {
  DiagnosticEngine diag;
  PassManager pm;
  EXPECT_TRUE(succeeded(parsePassPipeline("", pm, diag)));
  EXPECT_EQ(pm.size(), 0u);
  auto g = identityGraph();
  EXPECT_TRUE(succeeded(pm.run(*g, diag)));
}

TEST(PipelineParserTest, UnknownPassListsTheKnownOnes) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  PassManager pm;
  EXPECT_TRUE(failed(parsePassPipeline("cse,no-such-pass,dce", pm, diag)));
  EXPECT_EQ(pm.size(), 0u) << "a bad pipeline adds nothing";
  ASSERT_EQ(collect.diagnostics().size(), 1u);
  const std::string &msg = collect.diagnostics()[0].message;
  EXPECT_NE(msg.find("unknown pass 'no-such-pass' in pipeline 'cse,no-such-pass,dce'"),
            std::string::npos)
      << msg;
  std::string known;
  for (const std::string &name : tablePasses())
    known += (known.empty() ? "known passes: " : ", ") + name;
  EXPECT_NE(msg.find(known), std::string::npos) << msg;
}

TEST(PipelineParserTest, EmptyNameIsAnError) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  PassManager pm;
  EXPECT_TRUE(failed(parsePassPipeline("cse,,dce", pm, diag)));
  EXPECT_TRUE(failed(parsePassPipeline("cse,", pm, diag)));
  ASSERT_EQ(collect.diagnostics().size(), 2u);
  EXPECT_NE(collect.diagnostics()[0].message.find("empty pass name"), std::string::npos);
}

TEST(StatisticTest, RegisteredInDeclarationOrderAndAccumulated) {
  PassManager pm;
  pm.addPass(std::make_unique<CountingPass>());
  auto &pass = static_cast<CountingPass &>(pm.pass(0));
  ASSERT_EQ(pass.statistics().size(), 2u);
  EXPECT_STREQ(pass.statistics()[0]->name(), "num-runs");
  EXPECT_STREQ(pass.statistics()[1]->description(), "Graph inputs seen");

  DiagnosticEngine diag;
  auto g1 = identityGraph(), g2 = identityGraph();
  ASSERT_TRUE(succeeded(pm.run(*g1, diag)));
  ASSERT_TRUE(succeeded(pm.run(*g2, diag)));
  EXPECT_EQ(pass.numRuns.value(), 2u);
  EXPECT_EQ(pass.numInputs.value(), 2u);

  std::string report = pm.statisticsReport();
  EXPECT_NE(report.find("Pass statistics report"), std::string::npos);
  EXPECT_NE(report.find("test-counting\n  (S) 2 num-runs - Times run\n"), std::string::npos)
      << report;
}

TEST(StatisticTest, RealPassesDeclareStatistics) {
  for (const PassInfo &p : registeredPasses()) {
    if (p.name.rfind("test-", 0) == 0)
      continue;
    std::unique_ptr<Pass> pass = p.create();
    EXPECT_FALSE(pass->statistics().empty()) << p.name;
    for (const Statistic *s : pass->statistics())
      EXPECT_EQ(s->value(), 0u);
  }
}

TEST(VerifyEachTest, CatchesAPassThatBreaksTheGraph) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  PassManager pm;
  pm.addPass(std::make_unique<BreakOutputsPass>());
  pm.addPass(std::make_unique<CountingPass>());
  auto &counter = static_cast<CountingPass &>(pm.pass(1));
  auto g = identityGraph();
  EXPECT_TRUE(failed(pm.run(*g, diag)));
  EXPECT_EQ(counter.numRuns.value(), 0u) << "the pipeline stops at the broken pass";
  std::string all = collect.str();
  EXPECT_NE(all.find("[V6] graph '@g' has no outputs"), std::string::npos) << all;
  EXPECT_NE(all.find("pass 'test-break-outputs' produced invalid IR in graph '@g'"),
            std::string::npos)
      << all;
}

TEST(VerifyEachTest, ReportsTheVerifierRule) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  PassManager pm;
  pm.addPass(std::make_unique<BadArityPass>());
  auto g = identityGraph();
  EXPECT_TRUE(failed(pm.run(*g, diag)));
  EXPECT_NE(collect.str().find("[V1] 'relu' op has 0 operands"), std::string::npos)
      << collect.str();
}

TEST(VerifyEachTest, OffLetsTheBrokenGraphThrough) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  PassManagerOptions opts;
  opts.verifyEach = false;
  PassManager pm(opts);
  pm.addPass(std::make_unique<BreakOutputsPass>());
  auto g = identityGraph();
  EXPECT_TRUE(succeeded(pm.run(*g, diag)));
  EXPECT_TRUE(collect.diagnostics().empty());
}

TEST(PassFailureTest, StopsThePipelineAndKeepsThePassDiagnostic) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  PassManager pm;
  pm.addPass(std::make_unique<FailingPass>(true));
  pm.addPass(std::make_unique<CountingPass>());
  auto g = identityGraph();
  EXPECT_TRUE(failed(pm.run(*g, diag)));
  EXPECT_EQ(static_cast<CountingPass &>(pm.pass(1)).numRuns.value(), 0u);
  ASSERT_EQ(collect.diagnostics().size(), 1u);
  EXPECT_EQ(collect.diagnostics()[0].message, "test-failing gave up on '@g'");
}

TEST(PassFailureTest, SilentFailureStillReportsAnError) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  PassManager pm;
  pm.addPass(std::make_unique<FailingPass>(false));
  auto g = identityGraph();
  EXPECT_TRUE(failed(pm.run(*g, diag)));
  ASSERT_EQ(collect.diagnostics().size(), 1u);
  EXPECT_NE(collect.diagnostics()[0].message.find("pass 'test-failing' failed on graph '@g'"),
            std::string::npos);
}

TEST(PassManagerTest, ModuleRunContinuesAfterAFailedGraph) {
  DiagnosticEngine diag;
  ScopedDiagnosticCollector collect(diag);
  PassManager pm;
  pm.addPass(std::make_unique<CountingPass>());
  Module m;
  m.addGraph(identityGraph());
  Graph *broken = m.addGraph(std::make_unique<Graph>("empty")); // no outputs: [V6]
  (void)broken;
  m.addGraph(identityGraph());
  EXPECT_TRUE(failed(pm.run(m, diag)));
  EXPECT_EQ(static_cast<CountingPass &>(pm.pass(0)).numRuns.value(), 3u);
}

TEST(IrDumpTest, PrintsAfterAllWithAHeaderPerPass) {
  std::ostringstream dump;
  PassManagerOptions opts;
  opts.printIrAfterAll = true;
  opts.dumpStream = &dump;
  PassManager pm(opts);
  pm.addPass(std::make_unique<CountingPass>());
  pm.addPass(createDCEPass());
  DiagnosticEngine diag;
  auto g = identityGraph();
  ASSERT_TRUE(succeeded(pm.run(*g, diag)));
  std::string s = dump.str();
  size_t first = s.find("// -----// IR after test-counting //----- //\ngraph @g(");
  size_t second = s.find("// -----// IR after dce //----- //\ngraph @g(");
  EXPECT_NE(first, std::string::npos) << s;
  EXPECT_NE(second, std::string::npos) << s;
  EXPECT_LT(first, second);
}

TEST(IrDumpTest, PrintsOnlyTheNamedPasses) {
  std::ostringstream dump;
  PassManagerOptions opts;
  opts.printIrBefore = {"dce"};
  opts.printIrAfter = {"test-counting"};
  opts.dumpStream = &dump;
  PassManager pm(opts);
  pm.addPass(std::make_unique<CountingPass>());
  pm.addPass(createDCEPass());
  pm.addPass(createCSEPass());
  DiagnosticEngine diag;
  auto g = identityGraph();
  ASSERT_TRUE(succeeded(pm.run(*g, diag)));
  std::string s = dump.str();
  EXPECT_NE(s.find("IR after test-counting"), std::string::npos);
  EXPECT_NE(s.find("IR before dce"), std::string::npos);
  EXPECT_EQ(s.find("IR after dce"), std::string::npos);
  EXPECT_EQ(s.find("cse"), std::string::npos);
}

TEST(IrDumpTest, AfterChangeSkipsPassesThatChangedNothing) {
  std::ostringstream dump;
  PassManagerOptions opts;
  opts.printIrAfterChange = true;
  opts.verifyEach = false;
  opts.dumpStream = &dump;
  PassManager pm(opts);
  pm.addPass(std::make_unique<CountingPass>());
  pm.addPass(std::make_unique<BreakOutputsPass>());
  DiagnosticEngine diag;
  auto g = identityGraph();
  ASSERT_TRUE(succeeded(pm.run(*g, diag)));
  EXPECT_EQ(dump.str().find("test-counting"), std::string::npos);
  EXPECT_NE(dump.str().find("IR after test-break-outputs"), std::string::npos);
}

TEST(TimingTest, ReportListsEveryPassAndTheVerifier) {
  PassManagerOptions opts;
  opts.timePasses = true;
  PassManager pm(opts);
  pm.addPass(std::make_unique<CountingPass>());
  pm.addPass(createDCEPass());
  DiagnosticEngine diag;
  auto g = identityGraph();
  ASSERT_TRUE(succeeded(pm.run(*g, diag)));
  std::string r = pm.timingReport();
  EXPECT_NE(r.find("Pass execution timing report"), std::string::npos);
  EXPECT_NE(r.find("Total Execution Time:"), std::string::npos);
  EXPECT_NE(r.find("%)  test-counting\n"), std::string::npos) << r;
  EXPECT_NE(r.find("%)  dce\n"), std::string::npos) << r;
  EXPECT_NE(r.find("%)  (verifier)\n"), std::string::npos) << r;
  EXPECT_NE(r.find("%)  Total\n"), std::string::npos) << r;
}

} // namespace
} // namespace kiln
