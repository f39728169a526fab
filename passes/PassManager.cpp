//===- PassManager.cpp - Passes, the pass registry and pipelines -*- C++ -*-===//
//
// The registry (built from Passes.def), the pipeline parser, and the pass
// manager with its instrumentation: verify-each, IR dumps, statistics and
// timing.
//
//===----------------------------------------------------------------------===//
#include "passes/PassManager.h"

#include "ir/Verifier.h"
#include "passes/Internal.h"
#include "passes/Passes.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace kiln {

Statistic::Statistic(Pass *owner, const char *name, const char *description)
    : name_(name), description_(description) {
  owner->statistics_.push_back(this);
}

//===----------------------------------------------------------------------===//
// Registry
//===----------------------------------------------------------------------===//

namespace {

std::vector<PassInfo> &registry() {
  static std::vector<PassInfo> passes = [] {
    std::vector<PassInfo> r;
#define PASS(Class, Name, Description)                                                             \
  r.push_back(PassInfo{Name, Description, [] { return create##Class##Pass(); }});
#include "passes/Passes.def"
    return r;
  }();
  return passes;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

} // namespace

std::span<const PassInfo> registeredPasses() {
  return registry();
}

const PassInfo *lookupPass(std::string_view name) {
  for (const PassInfo &p : registry())
    if (p.name == name)
      return &p;
  return nullptr;
}

void registerPass(std::string name, std::string description, PassFactory create) {
  KILN_ASSERT(!lookupPass(name) && "pass registered twice");
  registry().push_back(PassInfo{std::move(name), std::move(description), std::move(create)});
}

std::string knownPassNames() {
  std::string s;
  for (const PassInfo &p : registry())
    s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

LogicalResult parsePassPipeline(std::string_view pipeline, PassManager &pm,
                                DiagnosticEngine &diag) {
  if (trim(pipeline).empty())
    return success();
  std::vector<const PassInfo *> infos;
  size_t pos = 0;
  while (true) {
    size_t comma = pipeline.find(',', pos);
    std::string_view name =
        trim(pipeline.substr(pos, comma == std::string_view::npos ? comma : comma - pos));
    if (name.empty())
      return diag.emitError(Location()) << "empty pass name in pipeline '" << pipeline
                                        << "'; known passes: " << knownPassNames();
    const PassInfo *info = lookupPass(name);
    if (!info)
      return diag.emitError(Location()) << "unknown pass '" << name << "' in pipeline '" << pipeline
                                        << "'; known passes: " << knownPassNames();
    infos.push_back(info);
    if (comma == std::string_view::npos)
      break;
    pos = comma + 1;
  }
  for (const PassInfo *info : infos)
    pm.addPass(info->create());
  return success();
}

//===----------------------------------------------------------------------===//
// PassManager
//===----------------------------------------------------------------------===//

PassManager::PassManager(PassManagerOptions options) : options_(std::move(options)) {}
PassManager::~PassManager() = default;

void PassManager::addPass(std::unique_ptr<Pass> pass) {
  KILN_ASSERT(pass && "null pass");
  passes_.push_back(std::move(pass));
  passTime_.emplace_back();
}

std::string PassManager::pipelineString() const {
  std::string s;
  for (const auto &p : passes_)
    s += (s.empty() ? "" : ",") + std::string(p->name());
  return s;
}

bool PassManager::wants(const std::vector<std::string> &names, const Pass &pass) const {
  return std::find(names.begin(), names.end(), pass.name()) != names.end();
}

void PassManager::dumpIr(const char *when, const Pass &pass, const Graph &g) {
  std::ostream &os = options_.dumpStream ? *options_.dumpStream : std::cerr;
  os << "// -----// IR " << when << " " << pass.name() << " //----- //\n"
     << printGraph(g, options_.printOptions) << "\n";
  os.flush();
}

// Note [Passes in regions]
// A pass runs on every region too (the branches of an `if`, a `loop`'s
// body, and theirs), before the graph that holds them, so that a pass that
// reads types (infer-shapes) sees its regions' results as they now are.
// A region is immutable and shared: the pass runs on a clone, and a clone
// it changed replaces the region in its node. Passes keep a region's
// inputs and outputs (dce keeps returned values; nothing removes inputs),
// but a region's result types may become more precise (constant-fold of a
// nonzero in a loop body): the graph holding a changed region is
// re-inferred, so its nodes' recorded types follow.

namespace {

PassResult runOnRegions(Pass &pass, Graph &g, PassContext &ctx) {
  bool changed = false;
  for (Node *n : g.nodes())
    for (unsigned i = 0; i < n->attrs().size(); ++i) {
      const auto *region = std::get_if<GraphAttr>(&n->attr(i));
      if (!region || !*region)
        continue;
      std::unique_ptr<Graph> copy = (*region)->clone();
      PassResult inner = runOnRegions(pass, *copy, ctx);
      if (inner.failed)
        return inner;
      PassResult result = pass.run(*copy, ctx);
      if (result.failed)
        return result;
      if (inner.changed || result.changed) {
        n->setAttr(i, GraphAttr(std::move(copy)));
        changed = true;
      }
    }
  if (changed && failed(passes::reinferTypes(g, ctx.diag())))
    return PassResult::failure();
  return PassResult::success(changed);
}

} // namespace

LogicalResult PassManager::run(Graph &g, DiagnosticEngine &diag) {
  using Clock = std::chrono::steady_clock;
  PassContext ctx(diag);
  for (size_t i = 0; i < passes_.size(); ++i) {
    Pass &pass = *passes_[i];
    if (options_.printIrBeforeAll || wants(options_.printIrBefore, pass))
      dumpIr("before", pass, g);

    unsigned errorsBefore = diag.numErrors();
    Clock::time_point start = Clock::now();
    PassResult result = runOnRegions(pass, g, ctx); // Note [Passes in regions]
    if (!result.failed) {
      PassResult outer = pass.run(g, ctx);
      result = outer.failed ? outer : PassResult::success(outer.changed || result.changed);
    }
    passTime_[i] += Clock::now() - start;

    if (result.failed) {
      // A failed pass must have said why; make sure the user hears something.
      if (diag.numErrors() == errorsBefore)
        diag.emitError(Location()) << "pass '" << pass.name() << "' failed on graph '@" << g.name()
                                   << "' without a diagnostic";
      if (options_.printIrAfterFailure)
        dumpIr("after failed", pass, g);
      return failure();
    }
    if (options_.verifyEach) {
      Clock::time_point vstart = Clock::now();
      bool ok = succeeded(verify(g, diag));
      verifyTime_ += Clock::now() - vstart;
      if (!ok) {
        diag.emitError(Location())
            << "pass '" << pass.name() << "' produced invalid IR in graph '@" << g.name() << "'";
        if (options_.printIrAfterFailure)
          dumpIr("after failed", pass, g);
        return failure();
      }
    }
    if (options_.printIrAfterAll || wants(options_.printIrAfter, pass) ||
        (options_.printIrAfterChange && result.changed))
      dumpIr("after", pass, g);
  }
  return success();
}

LogicalResult PassManager::run(Module &m, DiagnosticEngine &diag) {
  bool ok = true;
  for (auto &g : m.graphs())
    ok &= succeeded(run(*g, diag));
  return ok ? success() : failure();
}

namespace {
const char kBar[] =
    "===-------------------------------------------------------------------------===\n";

std::string banner(const char *title) {
  std::string t = std::string("... ") + title + " ...";
  size_t pad = t.size() < 78 ? (78 - t.size()) / 2 : 0;
  return std::string(kBar) + std::string(pad, ' ') + t + "\n" + kBar;
}
} // namespace

std::string PassManager::statisticsReport() const {
  std::ostringstream os;
  os << banner("Pass statistics report");
  for (const auto &p : passes_) {
    os << p->name() << "\n";
    for (const Statistic *s : p->statistics())
      os << "  (S) " << s->value() << " " << s->name() << " - " << s->description() << "\n";
  }
  return os.str();
}

std::string PassManager::timingReport() const {
  using Seconds = std::chrono::duration<double>;
  double total = Seconds(verifyTime_).count();
  for (const auto &t : passTime_)
    total += Seconds(t).count();
  auto line = [&](double secs, std::string_view name) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "  %9.4f (%5.1f%%)  ", secs,
                  total > 0 ? 100.0 * secs / total : 0.0);
    return std::string(buf) + std::string(name) + "\n";
  };
  std::ostringstream os;
  os << banner("Pass execution timing report");
  char buf[64];
  std::snprintf(buf, sizeof(buf), "  Total Execution Time: %.4f seconds\n\n", total);
  os << buf << "  ----Wall Time----  ----Name----\n";
  for (size_t i = 0; i < passes_.size(); ++i)
    os << line(Seconds(passTime_[i]).count(), passes_[i]->name());
  if (options_.verifyEach)
    os << line(Seconds(verifyTime_).count(), "(verifier)");
  os << line(total, "Total");
  return os.str();
}

} // namespace kiln
