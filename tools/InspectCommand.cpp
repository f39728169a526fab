//===- InspectCommand.cpp - kiln inspect: what a model is -------*- C++ -*-===//
//
//   kiln inspect MODEL [--buffers] [--steps] [--cpu NAME] [--threads N] [--dim SYM=N] ...
//
// Prints what a user asks first about a model: its inputs and outputs, node
// count and op histogram, parameters; then compiles it for --cpu and
// prints the summary (kernels, library calls, fallbacks, compile time) and
// the memory plan (arena, lower bound, naive sum; every buffer's offset,
// size and lifetime with --buffers; the steps with --steps).
//
//===----------------------------------------------------------------------===//
#include "codegen/Compiler.h"
#include "codegen/MemoryPlan.h"
#include "tools/Commands.h"

#include <cstdio>
#include <map>

namespace kiln::tools {
namespace {

const char kInspectUsage[] =
    "usage: kiln inspect MODEL [options]     (MODEL: a .kir file or an ONNX model)\n"
    "  --buffers               list every buffer of the memory plan\n"
    "  --steps                 list the compiled steps\n"
    "  --graph NAME            the graph to inspect (default: the first)\n"
    "  (symbolic dims not given with --dim are 1)\n";

void printInspectUsage(FILE *f) {
  std::fputs(kInspectUsage, f);
  std::fputs(kCompileFlagsUsage, f);
}

} // namespace

int inspectCommand(const Args &args) {
  std::string file, graphName;
  codegen::CompileOptions options;
  bool buffers = false, steps = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string v;
    const std::string &a = args[i];
    FlagMatch fm = matchCompileFlag("kiln inspect", args, i, options);
    if (fm == FlagMatch::Bad)
      return 2;
    if (fm == FlagMatch::Taken)
      continue;
    if (a == "--help" || a == "-h") {
      printInspectUsage(stdout);
      return 0;
    } else if (a == "--buffers") {
      buffers = true;
    } else if (a == "--steps") {
      steps = true;
    } else if (matchFlag(args, i, "--graph", v)) {
      graphName = v;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "kiln inspect: error: unknown option '%s'\n", a.c_str());
      printInspectUsage(stderr);
      return 2;
    } else if (file.empty()) {
      file = a;
    } else {
      std::fprintf(stderr, "kiln inspect: error: more than one model file\n");
      return 2;
    }
  }
  if (file.empty()) {
    printInspectUsage(stderr);
    return 2;
  }
  DiagnosticEngine diag;
  installStderrHandler(diag);
  auto model = loadModel(file, graphName, options.dims, diag);
  if (failed(model))
    return 1;
  Graph *g = model->graph;
  for (const Value *v : g->inputs())
    for (const Dim &d : v->type().shape)
      if (d.isSymbolic() && !d.symbol().empty())
        options.dims.emplace(d.symbol(), 1);

  std::printf("model: %s, graph @%s\n", file.c_str(), g->name().c_str());
  for (const Value *v : g->inputs())
    std::printf("  input  %%%s : %s\n", v->name().c_str(), v->type().str().c_str());
  for (const Value *v : g->outputs())
    std::printf("  output %%%s : %s\n", v->name().c_str(), v->type().str().c_str());
  std::map<std::string, int> histogram;
  uint64_t paramBytes = 0, params = 0;
  for (const Node *n : g->nodes()) {
    histogram[std::string(n->mnemonic())]++;
    if (n->kind() == OpKind::Constant) {
      const TensorType &t = n->result()->type();
      if (t.isStatic()) {
        params += static_cast<uint64_t>(numElements(staticSizes(t.shape)));
        paramBytes += static_cast<uint64_t>(numElements(staticSizes(t.shape))) * dtypeSize(t.dtype);
      }
    }
  }
  std::printf("nodes: %zu; constants: %llu values, %s\n", g->numNodes(),
              static_cast<unsigned long long>(params), formatBytes(paramBytes).c_str());
  std::string ops;
  for (auto &[op, count] : histogram)
    ops += (ops.empty() ? "" : ", ") + op + " " + std::to_string(count);
  std::printf("ops: %s\n", ops.c_str());

  codegen::CompileReport report;
  auto exe = codegen::compile(*g, options, diag, &report);
  if (failed(exe))
    return 1;
  std::printf("compiled: %s\n", report.summary().c_str());
  std::printf("target: %s\n", report.target.c_str());
  if (steps)
    std::printf("// steps\n%s", report.steps.c_str());
  std::printf("%s", report.memory.str(buffers).c_str());
  return 0;
}

} // namespace kiln::tools
