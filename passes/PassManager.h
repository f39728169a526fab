//===- PassManager.h - Passes, the pass registry and pipelines --*- C++ -*-===//
//
// A Pass transforms one Graph and reports whether it changed it or failed
// (a failed pass has already emitted a diagnostic). Passes keep counters as
// members (`Statistic numFolded{this, "num-folded", "Nodes folded"};`).
//
// Every pass is registered by one line in passes/Passes.def, which gives the
// factory, the pipeline name, `kiln opt --list-passes` and the docs. A
// pipeline is a string of pass names (`canonicalize,cse,dce`) parsed by
// parsePassPipeline, the same function in every tool.
//
// The PassManager runs a pipeline on graphs with the shared developer aids
// (STYLE.md section 9): the verifier after every pass, IR dumps before/after
// passes, statistics and timing. Dumps and reports go to stderr (or the
// stream the options name); passes never print to stdout.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Graph.h"
#include "ir/Printer.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln {

class Pass;

/// A named counter owned by a pass; registers itself with `owner` on
/// construction, so declaring it as a member is all a pass does. Counts
/// accumulate over every run of the pass instance.
class Statistic {
public:
  Statistic(Pass *owner, const char *name, const char *description);
  Statistic(const Statistic &) = delete;
  Statistic &operator=(const Statistic &) = delete;

  Statistic &operator++() {
    ++value_;
    return *this;
  }
  Statistic &operator+=(uint64_t n) {
    value_ += n;
    return *this;
  }
  uint64_t value() const { return value_; }
  const char *name() const { return name_; }
  const char *description() const { return description_; }

private:
  const char *name_;
  const char *description_;
  uint64_t value_ = 0;
};

/// What a pass run did: `changed` the graph, and/or `failed` (after
/// emitting a diagnostic).
struct PassResult {
  bool changed = false;
  bool failed = false;

  static PassResult success(bool changed) { return PassResult{changed, false}; }
  static PassResult failure() { return PassResult{false, true}; }
};

/// What a pass may use besides the graph: where to report diagnostics.
class PassContext {
public:
  explicit PassContext(DiagnosticEngine &diag) : diag_(diag) {}
  DiagnosticEngine &diag() const { return diag_; }

private:
  DiagnosticEngine &diag_;
};

/// Base class of all passes. A pass instance may run on many graphs; its
/// statistics accumulate across runs.
class Pass {
public:
  Pass(std::string_view name, std::string_view description)
      : name_(name), description_(description) {}
  virtual ~Pass() = default;
  Pass(const Pass &) = delete;
  Pass &operator=(const Pass &) = delete;

  /// The pipeline name (`constant-fold`).
  std::string_view name() const { return name_; }
  std::string_view description() const { return description_; }
  /// Transforms `g`. Must leave `g` verifiable unless it reports failure.
  virtual PassResult run(Graph &g, PassContext &ctx) = 0;
  /// The statistics declared as members, in declaration order.
  const std::vector<Statistic *> &statistics() const { return statistics_; }

private:
  friend class Statistic;
  std::string name_, description_;
  std::vector<Statistic *> statistics_;
};

/// Creates a fresh instance of a registered pass.
using PassFactory = std::function<std::unique_ptr<Pass>()>;

/// One entry of the pass registry.
struct PassInfo {
  std::string name;
  std::string description;
  PassFactory create;
};

/// Every registered pass: the lines of Passes.def in file order, then any
/// added with registerPass.
std::span<const PassInfo> registeredPasses();
/// The registered pass named `name`, or nullptr.
const PassInfo *lookupPass(std::string_view name);
/// Adds a pass outside Passes.def (tests, plugins). The name must be new.
void registerPass(std::string name, std::string description, PassFactory create);
/// "canonicalize, constant-fold, ..." (registry order), for messages.
std::string knownPassNames();

/// Options shared by every tool that runs pipelines (STYLE.md section 9).
struct PassManagerOptions {
  /// Run the verifier after every pass; a violation fails the pipeline.
  bool verifyEach = true;
  bool printIrBeforeAll = false;
  bool printIrAfterAll = false;
  /// Print after a pass only when it reported a change.
  bool printIrAfterChange = false;
  /// Print after a pass that failed (or broke the verifier).
  bool printIrAfterFailure = false;
  /// Pass names to print the IR before / after.
  std::vector<std::string> printIrBefore, printIrAfter;
  /// The tool should print timingReport() at the end. Timing is always
  /// collected (two clock reads per pass), so this only records the request.
  bool timePasses = false;
  /// How dumped IR is printed.
  PrintOptions printOptions;
  /// Where IR dumps go; nullptr means stderr.
  std::ostream *dumpStream = nullptr;
};

/// Runs a sequence of passes over graphs.
class PassManager {
public:
  explicit PassManager(PassManagerOptions options = {});
  ~PassManager();
  PassManager(const PassManager &) = delete;
  PassManager &operator=(const PassManager &) = delete;

  PassManagerOptions &options() { return options_; }
  void addPass(std::unique_ptr<Pass> pass);
  size_t size() const { return passes_.size(); }
  Pass &pass(size_t i) const { return *passes_[i]; }
  /// The pipeline as a string that parsePassPipeline reads back.
  std::string pipelineString() const;

  /// Runs every pass in order on `g`. Stops at the first pass that fails or
  /// leaves IR the verifier rejects (with verifyEach); both are reported to
  /// `diag`. An empty pipeline succeeds without touching `g`.
  LogicalResult run(Graph &g, DiagnosticEngine &diag);
  /// Runs the pipeline on each graph of `m` in order; fails if any failed
  /// (the other graphs still run).
  LogicalResult run(Module &m, DiagnosticEngine &diag);

  /// The statistics of every pass, grouped by pass in pipeline order.
  std::string statisticsReport() const;
  /// Wall time per pass (summed over every graph run), and the verifier.
  std::string timingReport() const;

private:
  void dumpIr(const char *when, const Pass &pass, const Graph &g);
  bool wants(const std::vector<std::string> &names, const Pass &pass) const;

  PassManagerOptions options_;
  std::vector<std::unique_ptr<Pass>> passes_;
  std::vector<std::chrono::steady_clock::duration> passTime_;
  std::chrono::steady_clock::duration verifyTime_{};
};

/// Parses a comma-separated list of pass names (spaces around names are
/// ignored; an empty string is the empty pipeline) and appends the passes to
/// `pm`. An unknown or empty name is an error that lists the known passes;
/// `pm` is left unchanged then.
LogicalResult parsePassPipeline(std::string_view pipeline, PassManager &pm, DiagnosticEngine &diag);

} // namespace kiln
