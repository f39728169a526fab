//===- Bisect.h - Which compiled step first differs from the interpreter ---===//
//
// `kiln compile --check --bisect`, `kiln run --compile --check --bisect`
// and `--check-each`: when compiled outputs differ from the reference,
// find the step that is wrong.
//
//   1. prepare the graph as compile() does (prepareGraph) and plan fusion;
//   2. run the prepared graph on the interpreter, keeping every value;
//   3. for each fusion group in schedule order (a kernel, a library call
//      with its epilogue, or a fallback), build a graph of exactly its
//      nodes (the nodes it recomputes too; the constants it reads copied,
//      every other operand a graph input), compile it with the same options
//      and run it on the interpreter's values of its operands;
//   4. compare each of its results with the interpreter's (ir/Compare.h).
// The first group whose results differ is the first wrong step: its inputs
// were the interpreter's own, so the fault is in that step and not before.
// Without `all` the search stops there; with it (--check-each) every group
// is run and the report is a table of max error per step.
//
// A group compiled alone is the same kernel (same nodes, same names, same
// kernel IR) or the same oneDNN call as in the whole model; what it cannot
// reproduce are faults of the whole schedule (a memory plan that overlaps
// live buffers, layouts chosen across groups). Those the memory checker
// (Executable::checkMemory) and the layout tests cover.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/Compiler.h"
#include "ir/Compare.h"

#include <span>
#include <string>
#include <vector>

namespace kiln::codegen {

struct BisectStep {
  size_t group = 0;
  /// "kernel", "library call" or "fallback".
  std::string kind;
  /// What the group compiled to: kernel names, library call lines.
  std::string steps;
  /// One line per node: "%y = pow(%x, %c) at model.onnx: node 'Pow_3'".
  std::vector<std::string> nodes;
  /// Each result: its name and its comparison with the interpreter.
  std::vector<std::pair<std::string, Comparison>> results;
  /// Kernel IR text of the group's kernels (kiln compile --emit=kernels).
  std::string kernelIR;
  /// Set when the group could not be compiled or run alone.
  std::string error;
  double maxAbs = 0;

  bool ok() const;
};

struct BisectReport {
  std::vector<BisectStep> steps;
  /// Index into `steps` of the first step that differs; -1: none.
  int firstBad = -1;
  Tolerance tolerance;

  /// The first bad step in full (nodes, first bad element, kernel IR), or
  /// "no step differs"; with `table`, a line per step first.
  std::string str(bool table) const;
};

/// Steps 1-4 above on `g` with `inputs` (symbolic dims bound by
/// options.dims). Errors: the graph does not prepare or interpret.
FailureOr<BisectReport> bisect(const Graph &g, std::span<const Tensor> inputs,
                               const CompileOptions &options, const Tolerance &tol, bool all,
                               DiagnosticEngine &diag);

} // namespace kiln::codegen
