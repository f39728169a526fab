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
#include "codegen/Staged.h"
#include "codegen/SymbolicArtifact.h"
#include "ir/Interpreter.h"
#include "runtime/artifact/Artifact.h"
#include "tools/Commands.h"
#include "tools/Progress.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

namespace kiln::tools {
namespace {

const char kInspectUsage[] =
    "usage: kiln inspect MODEL [options]     (MODEL: a .kir file, an ONNX model or a\n"
    "                                        .kiln artifact: its metadata, no compile;\n"
    "                                        a symbolic one compiles a size from it)\n"
    "  --buffers               list every buffer of the memory plan\n"
    "  --steps                 list the compiled steps\n"
    "  --graph NAME            the graph to inspect (default: the first)\n"
    "  (symbolic dims not given with --dim SYM=N are the largest of their --dim range;\n"
    "  without --dim they are compiled symbolic over 1..1024, less where the model\n"
    "  assumes less (a decoder with 64 positions: 1..64), and reported at 1; the\n"
    "  report says which sizes it is for)\n";

void printInspectUsage(FILE *f) {
  std::fputs(kInspectUsage, f);
  printCompileFlagsUsage(f);
}

std::string portString(const runtime::ArtifactPort &p) {
  std::string s = std::string(runtime::elementTypeName(p.dtype)) + "[";
  for (size_t d = 0; d < p.dims.size(); ++d) {
    s += d ? "," : "";
    s += d < p.symbols.size() && !p.symbols[d].empty()
             ? p.symbols[d] + "=" + std::to_string(p.dims[d])
             : std::to_string(p.dims[d]);
  }
  return s + "]";
}

/// `kiln inspect ART.kiln`: what the artifact says about itself; for a size
/// set, each of its sizes.
int inspectArtifact(const std::string &file, bool steps) {
  std::vector<runtime::ArtifactSetMember> set;
  if (runtime::Status st = runtime::loadArtifactSet(file, set); !st.ok()) {
    std::fprintf(stderr, "kiln inspect: error: %s\n", st.error.c_str());
    return 1;
  }
  const runtime::ArtifactInfo &first = set.front().info;
  std::printf("artifact: %s, compiled from %s by Kiln %s (%s)\n", file.c_str(),
              first.model.empty() ? "?" : first.model.c_str(), first.kilnVersion.c_str(),
              first.dnnlVersion.c_str());
  const bool isSet = !set.front().sizes.empty(); // a size set, even of one size
  if (isSet) {
    std::error_code ec;
    std::printf("sizes: %zu in one file of %s (a size set; a run picks the size its inputs "
                "have): %s\n",
                set.size(), formatBytes(std::filesystem::file_size(file, ec)).c_str(),
                runtime::setSizesList(set).c_str());
  }
  for (const runtime::ArtifactSetMember &m : set) {
    const runtime::ArtifactInfo &info = m.info;
    if (isSet)
      std::printf("// size %s\n", m.sizes.c_str());
    for (const runtime::ArtifactPort &p : info.inputs)
      std::printf("  input  %%%s : %s\n", p.name.c_str(), portString(p).c_str());
    for (const runtime::ArtifactPort &p : info.outputs)
      std::printf("  output %%%s : %s\n", p.name.c_str(), portString(p).c_str());
    std::printf("compiled: %s\n", info.summary.c_str());
    std::printf("target: --cpu %s (cpu %s, oneDNN ISA %s)\n", info.target.requested.c_str(),
                info.target.cpu.c_str(),
                info.target.dnnlIsa.empty()    ? "unused"
                : info.target.dnnlIsa == "all" ? "uncapped"
                                               : info.target.dnnlIsa.c_str());
    size_t kernelSteps = 0;
    for (const runtime::Step &st : m.exe->steps())
      kernelSteps += st.kind == runtime::Step::Kind::Kernel;
    std::printf("file: %s: constants %s, machine code %s (%zu distinct kernel%s for %zu kernel "
                "step%s), %zu steps\n",
                formatBytes(info.fileBytes).c_str(), formatBytes(info.constantBytes).c_str(),
                formatBytes(info.codeBytes).c_str(), info.numKernels,
                info.numKernels == 1 ? "" : "s", kernelSteps, kernelSteps == 1 ? "" : "s",
                info.numSteps);
    std::printf("memory: arena %s, output block %s\n", formatBytes(m.exe->arenaBytes()).c_str(),
                formatBytes(m.exe->outputBlockBytes()).c_str());
    if (steps)
      std::printf("// steps\n%s", m.exe->describe().c_str());
  }
  return 0;
}

} // namespace

int inspectCommand(const Args &args) {
  std::string file, graphName;
  codegen::CompileOptions options;
  options.cache = true; // --no-cache turns it off
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
  if (runtime::isCudaArtifactFile(file)) {
    if (!onlyThreadsForArtifact("kiln inspect", options, file))
      return 2;
    if (buffers || steps) {
      std::fprintf(stderr,
                   "kiln inspect: error: --buffers and --steps describe a model or a "
                   "CPU artifact; '%s' is a CUDA artifact\n",
                   file.c_str());
      return 2;
    }
    return inspectCudaArtifact(file);
  }
  if (runtime::isArtifactFile(file)) {
    if (!onlyThreadsForArtifact("kiln inspect", options, file))
      return 2;
    if (buffers) {
      std::fprintf(stderr, "kiln inspect: error: --buffers needs the model; an artifact keeps "
                           "offsets, not the plan's lifetimes\n");
      return 2;
    }
    return inspectArtifact(file, steps);
  }
  DiagnosticEngine diag;
  installStderrHandler(diag);
  std::map<std::string, int64_t> given = options.dims;
  std::set<std::string> open;                                    // Note [Symbolic without --dim]
  const bool isSymbolic = runtime::isSymbolicArtifactFile(file); // compiled per size from it
  bool usage = false;
  auto model = isSymbolic ? loadSymbolicForCompile("kiln inspect", file, graphName, options, open,
                                                   usage, diag)
                          : loadForCompile(file, graphName, options, open, diag);
  if (failed(model))
    return usage ? 2 : 1;
  if (failed(codegen::checkRanges(*model->graph, options, diag)))
    return 1;
  if (isSymbolic) // its fixed sizes, and those given, are fixed
    given = options.dims;
  Graph *g = model->graph;
  const std::string sizes =
      bindSymbolsForReport(*g, options.dims, options.ranges, open, isSymbolic);

  std::printf("model: %s, graph @%s\n", file.c_str(), g->name().c_str());
  if (isSymbolic)
    std::printf("artifact: %s\n", model->artifactLine.c_str());
  for (const Value *v : g->inputs())
    std::printf("  input  %%%s : %s\n", v->name().c_str(), v->type().str().c_str());
  for (const Value *v : g->outputs())
    std::printf("  output %%%s : %s\n", v->name().c_str(), v->type().str().c_str());
  // Where each symbol is read from when the model runs (the first input
  // dim that is the symbol itself; another dim naming it is checked).
  std::map<std::string, std::string> sources;
  for (const Value *v : g->inputs())
    for (size_t d = 0; d < v->type().shape.size(); ++d)
      if (const std::string &s = v->type().shape[d].symbol(); !s.empty())
        sources.emplace(s, "%" + v->name() + " dim " + std::to_string(d));
  std::string symbols;
  for (const auto &[s, where] : sources) {
    std::string range;
    for (const codegen::SymbolRange &r : options.ranges)
      if (r.name == s)
        range = std::string(open.count(s) ? ", no --dim: " : ", ") + std::to_string(r.min) + ".." +
                std::to_string(r.max);
    if (range.empty() && !options.ranges.empty() && given.count(s))
      range = ", fixed at " + std::to_string(given.at(s)); // beside ranges: a specialization
    symbols += (symbols.empty() ? "" : ", ") + s + " (" + where + range + ")";
  }
  if (!symbols.empty())
    std::printf("symbols: %s\n", symbols.c_str());
  // Note [Assumed equal dims] in ir/Interpreter.cpp: checked at every run.
  for (const DimAssumption &a : dimAssumptions(*g))
    std::printf("assumes: %s ('%s' at %s)\n", a.str().c_str(),
                std::string(a.node->mnemonic()).c_str(), a.node->loc().diagPrefix().c_str());
  if (!sizes.empty())
    std::printf("sizes: %s; the plan and figures below are for these sizes\n", sizes.c_str());
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
  options.cache &= !buffers; // the per-buffer table needs a real compile
  std::optional<CompileProgress> progress(std::in_place, file);
  auto compiled = codegen::StagedModel::compile(*g, options, diag, &report);
  progress.reset();
  if (failed(compiled))
    return 1;
  if (!(*compiled)->whole()) { // Note [Data-dependent shapes] in codegen/Staged.cpp
    std::printf("%s\n", (*compiled)->stages().c_str());
    if (!(*compiled)->firstStage())
      return 0;
    std::printf("the plan and figures below are the first stage's\n");
  }
  std::printf("compiled: %s\n", report.summary().c_str());
  std::printf("target: %s\n", report.target.c_str());
  if (steps)
    std::printf("// steps\n%s", report.steps.c_str());
  std::printf("%s", report.memory.str(buffers).c_str());
  return 0;
}

} // namespace kiln::tools
