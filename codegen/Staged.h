//===- Staged.h - Graphs whose sizes a run decides --------------*- C++ -*-===//
//
// Compiled code for a graph in which a node's result size is known only when
// it runs (nonzero's count, a loop that scans for a number of iterations
// known only at run time): Note [Data-dependent shapes] in Staged.cpp.
//
//   auto model = StagedModel::compile(graph, options, diag, &report);
//   auto outs = (*model)->run(inputs, diag);
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/Compiler.h"

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::codegen {

/// The first node of `prepared` (a graph after compile()'s pipeline, its
/// inputs bound) with a result dim only its run decides (a `?`) while its
/// operands have none; null when there is none.
const Node *firstDataDependent(const Graph &prepared);

/// Whether `g` may compile in stages: a value-dependent node of it has a
/// `?` in its results (whether it still has after the pipeline, only
/// StagedModel::compile knows).
bool mayStage(const Graph &g);

/// A graph compiled whole, or in stages around its first data-dependent node.
class StagedModel {
public:
  /// Compiles `g` at options.dims: in stages when, after the pipeline, a
  /// node's result size is decided by its run (firstDataDependent), else
  /// whole, as compile() does. `report` is the whole compile's, or the first
  /// stage's. Errors as compile()'s.
  static FailureOr<std::unique_ptr<StagedModel>> compile(const Graph &g,
                                                         const CompileOptions &options,
                                                         DiagnosticEngine &diag,
                                                         CompileReport *report = nullptr);
  ~StagedModel();
  StagedModel(const StagedModel &) = delete;
  StagedModel &operator=(const StagedModel &) = delete;

  /// The executable of a graph compiled whole; null for stages.
  const runtime::Executable *whole() const;
  /// The first stage of a staged model; null when nothing runs before the
  /// data-dependent node, and for a whole one.
  const runtime::Executable *firstStage() const;
  /// The threads a run with `requested` (0: the default) uses, as
  /// runtime::Executable::resolveThreads says.
  int resolveThreads(int requested) const;
  /// The same, taken out (the model then runs nothing); null for stages.
  std::unique_ptr<runtime::Executable> takeWhole();
  /// Runs on `inputs` (checked as runCompiled checks them). The stage after
  /// the data-dependent node is compiled on first use for the sizes the run
  /// gives it and kept (at most kMaxKept sizes, least recently used
  /// dropped); each such compile is one line in `log` when given. Safe to
  /// call from several threads at once.
  FailureOr<std::vector<Tensor>> run(std::span<const Tensor> inputs, DiagnosticEngine &diag,
                                     const runtime::RunOptions &options = {},
                                     std::vector<std::string> *log = nullptr) const;
  /// For a staged model: where it is split and why ("stages at %y
  /// ('nonzero' at m.kir:3:3): its result i64[2,?] is sized by its run");
  /// empty for a whole one.
  const std::string &stages() const;

  static constexpr size_t kMaxKept = 8;

private:
  StagedModel();
  /// Stage 3 compiled for `sizes`, kept or compiled now; null after an error.
  std::shared_ptr<const StagedModel> restFor(const std::map<std::string, int64_t> &sizes,
                                             DiagnosticEngine &diag,
                                             std::vector<std::string> *log) const;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace kiln::codegen
