//===- Bisect.cpp - Which compiled step first differs from the interpreter -===//
//
// The algorithm is in Bisect.h.
//
//===----------------------------------------------------------------------===//
#include "codegen/Bisect.h"

#include "codegen/Fusion.h"
#include "codegen/cpu/dnnl/OneDnnSteps.h"
#include "ir/Extract.h"
#include "ir/Interpreter.h"
#include "ir/Ops.h"

#include <cstdio>
#include <map>
#include <set>

namespace kiln::codegen {
namespace {

std::string indented(const std::string &text, const char *pad) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string::npos ? text.size() : nl;
    if (end > pos)
      out += pad + text.substr(pos, end - pos);
    out += "\n";
    pos = end + 1;
  }
  return out;
}

std::string nodeLine(const Node &n) {
  std::string s;
  for (unsigned i = 0; i < n.numResults(); ++i)
    s += (i ? ", %" : "%") + n.result(i)->name();
  s += (n.numResults() ? " = " : "") + std::string(n.mnemonic()) + "(";
  for (unsigned i = 0; i < n.numOperands(); ++i)
    s += (i ? ", %" : "%") + n.operand(i)->name();
  s += ")";
  if (n.numResults())
    s += " : " + n.result()->type().str();
  std::string where = n.loc().diagPrefix();
  if (!where.empty())
    s += " at " + where;
  return s;
}

const char *kindName(FusionGroup::Kind k) {
  switch (k) {
  case FusionGroup::Kind::Kernel:
    return "kernel";
  case FusionGroup::Kind::Library:
    return "library call";
  case FusionGroup::Kind::Fallback:
    return "fallback";
  }
  return "?";
}

/// Runs the interpreter node by node, keeping every value.
LogicalResult interpretAll(const Graph &g, std::span<const Tensor> inputs,
                           std::map<const Value *, Tensor> &values, DiagnosticEngine &diag) {
  if (failed(checkInputs(g, inputs, diag)))
    return failure();
  for (unsigned i = 0; i < g.numInputs(); ++i)
    values[g.input(i)] = inputs[i];
  for (const Node *n : g.nodes()) {
    std::vector<Tensor> operands;
    for (const Value *v : n->operands())
      operands.push_back(values.at(v));
    auto results = evaluateNode(*n, operands, diag);
    if (failed(results))
      return failure();
    for (unsigned i = 0; i < n->numResults(); ++i)
      values[n->result(i)] = (*results)[i];
  }
  return success();
}

/// One group on its own: compiled alone and run on the interpreter's
/// values of its operands.
BisectStep runGroup(size_t index, const FusionGroup &group, const Graph &g,
                    const std::map<const Value *, Tensor> &values, const CompileOptions &options,
                    const Tolerance &tol) {
  BisectStep step;
  step.group = index;
  step.kind = kindName(group.kind);
  std::set<const Node *> members(group.nodes.begin(), group.nodes.end());
  members.insert(group.recomputed.begin(), group.recomputed.end());
  for (const Node *n : group.nodes)
    step.nodes.push_back(nodeLine(*n));

  // The group as a graph: its nodes in schedule order, constants copied,
  // every other outside operand an input.
  std::vector<const Node *> ordered;
  for (const Node *n : g.nodes())
    if (members.count(n))
      ordered.push_back(n);
  std::vector<const Value *> read;
  auto sub = extractNodes("group" + std::to_string(index), ordered, group.outputs, read);
  std::vector<Tensor> subInputs;
  for (const Value *v : read)
    subInputs.push_back(values.at(v));
  if (group.outputs.empty())
    return step;

  DiagnosticEngine quiet;
  ScopedDiagnosticCollector collect(quiet);
  CompileOptions subOptions = options;
  subOptions.pipeline = ""; // the graph is prepared already
  subOptions.emitKernels = true;
  subOptions.explain = subOptions.emitLLVM = subOptions.emitLLVMOptimized = false;
  subOptions.dims.clear();
  // The group's graph is static: no symbols to range over or size at run time.
  subOptions.ranges.clear();
  subOptions.runTimeSizes = false;
  subOptions.sharedKernels = nullptr;
  CompileReport report;
  auto exe = compile(std::move(sub), subOptions, quiet, &report);
  if (failed(exe)) {
    step.error = "the group does not compile alone: " + collect.str();
    return step;
  }
  step.kernelIR = report.kernels;
  step.steps = report.steps;
  auto got = runCompiled(**exe, subInputs, quiet);
  if (failed(got)) {
    step.error = "the group does not run alone: " + collect.str();
    return step;
  }
  for (size_t k = 0; k < group.outputs.size(); ++k) {
    Comparison c = compareTensors((*got)[k], values.at(group.outputs[k]), tol);
    step.maxAbs = std::max(step.maxAbs, c.shapesMatch ? c.maxAbs : INFINITY);
    step.results.emplace_back(group.outputs[k]->name(), c);
  }
  return step;
}

} // namespace

bool BisectStep::ok() const {
  if (!error.empty())
    return false;
  for (const auto &[name, c] : results)
    if (!c.ok())
      return false;
  return true;
}

FailureOr<BisectReport> bisect(const Graph &g, std::span<const Tensor> inputs,
                               const CompileOptions &options, const Tolerance &tol, bool all,
                               DiagnosticEngine &diag) {
  auto prepared = prepareGraph(g.clone(), options, diag);
  if (failed(prepared))
    return failure();
  const Graph &pg = **prepared;
  FusionOptions fusionOptions;
  fusionOptions.library = &cpu::oneDnnCapabilities();
  fusionOptions.useLibraries = options.useLibraries;
  fusionOptions.fuse = options.fuse;
  auto plan = planFusion(pg, fusionOptions, diag);
  if (failed(plan))
    return failure();
  std::map<const Value *, Tensor> values;
  if (failed(interpretAll(pg, inputs, values, diag)))
    return failure();

  BisectReport report;
  report.tolerance = tol;
  for (size_t gi = 0; gi < plan->groups.size(); ++gi) {
    const FusionGroup &group = plan->groups[gi];
    if (group.outputs.empty())
      continue;
    report.steps.push_back(runGroup(gi, group, pg, values, options, tol));
    if (!report.steps.back().ok() && report.firstBad < 0) {
      report.firstBad = static_cast<int>(report.steps.size() - 1);
      if (!all)
        break;
    }
  }
  return report;
}

std::string BisectReport::str(bool table) const {
  std::string s;
  char buf[512];
  if (table) {
    s += "// check-each: every step against the interpreter, on the interpreter's inputs\n";
    std::snprintf(buf, sizeof(buf), "  %-6s %-13s %-28s %s\n", "group", "kind", "results",
                  "max abs err");
    s += buf;
    for (const BisectStep &st : steps) {
      std::string names;
      for (const auto &[name, c] : st.results)
        names += (names.empty() ? "%" : ",%") + name;
      if (names.size() > 28)
        names = names.substr(0, 25) + "...";
      std::snprintf(buf, sizeof(buf), "  %-6zu %-13s %-28s %-12.3g %s\n", st.group, st.kind.c_str(),
                    names.c_str(), st.maxAbs, st.ok() ? "ok" : "FAIL");
      s += buf;
    }
  }
  if (firstBad < 0)
    return s + "bisect: no step differs from the interpreter (" + std::to_string(steps.size()) +
           " steps compared)\n";
  const BisectStep &st = steps[static_cast<size_t>(firstBad)];
  s += "bisect: first step that differs from the interpreter: group " + std::to_string(st.group) +
       " (" + st.kind + ")\n";
  s += "  nodes:\n";
  for (const std::string &n : st.nodes)
    s += "    " + n + "\n";
  if (!st.error.empty())
    s += "  " + st.error + "\n";
  for (const auto &[name, c] : st.results)
    s += "  result %" + name + ": " + describe(c, tolerance) + "\n";
  if (!st.steps.empty())
    s += "  compiled to:\n" + indented(st.steps, "    ");
  if (!st.kernelIR.empty())
    s += "  kernel IR:\n" + indented(st.kernelIR, "    ");
  return s;
}

} // namespace kiln::codegen
