//===- CompileCommand.cpp - kiln compile: the CPU compiler -----*- C++ -*-===//
//
//   kiln compile MODEL [-o FILE] [--dim SYM=A,B,...|SYM=LO..HI] ...
//                [--explain-fusion] [--emit=kernels|llvm|llvm-opt|cuda|ptx] [--steps]
//                [--target cpu|cuda] [--cuda-arch sm_NN] [--cuda-dir DIR]
//                [--report-memory] [--profile N] [--check [--bisect]] [--check-each]
//                [--cpu NAME] [--threads N] [--dim SYM=N] ... (tools/CompileFlags.cpp)
//
// Compiles a graph for --cpu (codegen/Compiler.h) and prints what was
// asked: fusion decisions by node name, kernel text, LLVM IR, the steps,
// the memory plan (arena, lower bound, naive sum, every buffer's offset,
// size and lifetime), then a summary (kernels, library calls, fallbacks,
// compile time per phase) and the target. Warnings about fallbacks go to
// stderr. --profile runs the compiled model N times on random inputs and
// prints each step's time next to the interpreter's time for the whole
// graph; --check compares the compiled outputs with the reference
// interpreter's (ir/Compare.h), --bisect names the first step that differs
// and --check-each prints every step's error (codegen/Bisect.h).
//
//===----------------------------------------------------------------------===//
#include "codegen/Compiler.h"
#include "codegen/RunTimeSizes.h"
#include "codegen/Staged.h"
#include "codegen/SymbolicArtifact.h"
#include "ir/Interpreter.h"
#include "ir/Parser.h"
#include "runtime/artifact/Artifact.h"
#include "tools/Commands.h"
#include "tools/Progress.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <random>

namespace kiln::tools {
namespace {

const char kCompileUsageHead[] =
    "usage: kiln compile MODEL [options]     (MODEL: a .kir file or an ONNX model)\n"
    "  --graph NAME            the graph to compile (default: the first)\n"
    "  -o FILE, --output FILE  save the compiled model as an artifact (.kiln) that\n"
    "                          kiln run/bench/inspect and the runtime load without LLVM;\n"
    "                          over ranges (or symbols no --dim names), a symbolic\n"
    "                          artifact: the kernels compiled once, each size compiled\n"
    "                          from them by kiln run/bench/inspect when met\n"
    "  --dim SYM=A,B,...       with -o: compile at each listed size (every combination\n"
    "                          of the listed symbols) into one artifact, a size set;\n"
    "                          a run picks the size its inputs have; beside a range\n"
    "                          --dim SYM=LO..HI the sizes share the kernels compiled once\n"
    "                          for the range\n"
    "  --dim SYM=LO..HI        compile the kernels once for the range, then\n"
    "                          the model at HI, and with --check, --check-each or --profile\n"
    "                          also at LO and half way; a symbol with no --dim is compiled\n"
    "                          so over 1..1024 (less where the model assumes less), at 1\n"
    "                          (and 7)\n"
    "  --explain-fusion        print every fusion decision with its rule and reason\n"
    "  --emit=WHAT             print kernels (kernel IR text), llvm (LLVM IR before\n"
    "                          optimization) or llvm-opt (after O3); repeatable;\n"
    "                          cuda or ptx: the kernels as one CUDA module written by\n"
    "                          the CUDA backend and compiled by NVRTC (no GPU needed),\n"
    "                          its CUDA C or PTX, instead of a CPU compile\n"
    "  --target cpu|cuda       cuda: the whole model compiled by the CUDA backend (no GPU\n"
    "                          needed; a node it has no kernel for is an error); with -o\n"
    "                          a CUDA artifact (CUBIN and PTX) that kiln run runs on a GPU\n"
    "  --cuda-arch sm_NN       the compute capability of --target cuda and --emit=cuda|ptx\n"
    "                          (default sm_90)\n"
    "  --cuda-dir DIR          with --emit=cuda|ptx: also write kernels.cu, kernels.ptx\n"
    "                          and kernels.cubin into DIR\n"
    "  --steps                 print the executable's steps\n"
    "  --report-memory         print the memory plan: arena, lower bound, naive sum\n"
    "                          and each buffer's offset, size and lifetime (steps)\n"
    "  --profile N             run N times on random inputs; print time per step\n"
    "  --check                 compare outputs with the reference interpreter\n"
    "  --bisect                with --check: when outputs differ, name the first step\n"
    "                          that differs (its nodes, first bad element, kernel IR)\n"
    "  --check-each            compare every step with the interpreter: a table of max\n"
    "                          error per step, then the first bad step\n";

void printCompileUsage(FILE *f) {
  std::fputs(kCompileUsageHead, f);
  printCompileFlagsUsage(f);
  std::fputs(kToleranceUsage, f);
}

/// `--dim SYM=A,B,...`: the symbols compiled at several sizes.
using SizeLists = std::vector<std::pair<std::string, std::vector<int64_t>>>;

bool parseSizeList(const std::string &value, SizeLists &lists) {
  const size_t eq = value.find('=');
  if (eq == std::string::npos || eq == 0) {
    std::fprintf(stderr, "kiln compile: error: --dim expects SYM=A,B,..., got '%s'\n",
                 value.c_str());
    return false;
  }
  const std::string sym = value.substr(0, eq);
  if (value.find("..") != std::string::npos) {
    std::fprintf(stderr,
                 "kiln compile: error: --dim %s takes a list A,B,... or a range LO..HI, not "
                 "both in one flag, got '%s'\n",
                 sym.c_str(), value.c_str());
    return false;
  }
  for (const auto &[name, sizes] : lists)
    if (name == sym) {
      std::fprintf(stderr, "kiln compile: error: --dim %s is given twice\n", sym.c_str());
      return false;
    }
  std::vector<int64_t> sizes;
  std::string rest = value.substr(eq + 1);
  for (size_t start = 0; start <= rest.size();) {
    size_t comma = rest.find(',', start);
    if (comma == std::string::npos)
      comma = rest.size();
    int64_t n;
    if (!parseIntArg("kiln compile", "--dim " + sym, rest.substr(start, comma - start), 0,
                     int64_t(1) << 40, n))
      return false;
    if (std::find(sizes.begin(), sizes.end(), n) != sizes.end()) {
      std::fprintf(stderr, "kiln compile: error: --dim %s lists %lld twice\n", sym.c_str(),
                   static_cast<long long>(n));
      return false;
    }
    sizes.push_back(n);
    start = comma + 1;
  }
  lists.emplace_back(sym, std::move(sizes));
  return true;
}

/// Every combination of `lists` added to `fixed`, the first symbol slowest.
std::vector<std::map<std::string, int64_t>>
combinations(const SizeLists &lists, const std::map<std::string, int64_t> &fixed) {
  std::vector<std::map<std::string, int64_t>> out{fixed};
  for (const auto &[sym, sizes] : lists) {
    std::vector<std::map<std::string, int64_t>> next;
    for (const auto &partial : out)
      for (int64_t n : sizes) {
        next.push_back(partial);
        next.back()[sym] = n;
      }
    out = std::move(next);
  }
  return out;
}

std::string sizesText(const std::map<std::string, int64_t> &dims) {
  std::string s;
  for (const auto &[name, n] : dims)
    s += (s.empty() ? "" : ", ") + name + "=" + std::to_string(n);
  return s;
}

/// The kernels of `g` with run-time sizes compiled once, over the ranges
/// compile() would use at `dims` (codegen::sharedRanges), each kernel that
/// stays per size printed with why; null, after a warning, when none could
/// be compiled (then every size compiles all of its kernels).
std::shared_ptr<const codegen::SharedKernels>
compileSharedOnce(const std::string &file, const Graph &g, const codegen::CompileOptions &options,
                  const std::map<std::string, int64_t> &dims) {
  if (codegen::mayStage(g)) { // its stages share their own (codegen/Staged.cpp)
    std::printf("run-time sizes: none compiled for the whole model: it may compile in stages\n");
    return nullptr;
  }
  codegen::CompileOptions atDims = options;
  atDims.dims = dims;
  const std::vector<codegen::SymbolRange> ranges = codegen::sharedRanges(g, atDims);
  Diagnostic error;
  std::optional<CompileProgress> progress(std::in_place, file);
  auto shared = codegen::tryCompileSharedKernels(g, ranges, options, error);
  progress.reset();
  if (!shared) {
    std::fprintf(stderr, "%swarning: %s; every size compiles all of its kernels\n",
                 error.loc.isUnknown() ? "kiln compile: " : (error.loc.diagPrefix() + ": ").c_str(),
                 error.message.c_str());
    return nullptr;
  }
  std::printf("run-time sizes: %s in %.2f s\n", codegen::sharedKernelsStr(*shared).c_str(),
              shared->seconds);
  for (const auto &[name, why] : shared->perSize)
    std::printf("run-time sizes: %s compiles per size: %s\n", name.c_str(), why.c_str());
  return shared;
}

/// `kiln compile MODEL --dim SYM=A,B,... -o FILE`: one compile per
/// combination of sizes, saved as a size set (runtime/artifact/Artifact.h).
int compileSizeSet(const std::string &file, const std::string &graphName,
                   const codegen::CompileOptions &options, const SizeLists &lists,
                   const std::string &outputPath) {
  std::vector<std::unique_ptr<runtime::Executable>> exes;
  std::vector<runtime::ArtifactInfo> infos;
  std::vector<std::string> labels;
  const auto sizes = combinations(lists, options.dims);
  // With run-time sizes every size runs the kernels compiled once from the
  // graph as given (its symbols unbound); else each size is imported bound.
  std::optional<LoadedModel> unbound;
  std::shared_ptr<const codegen::SharedKernels> shared;
  if (options.runTimeSizes) {
    DiagnosticEngine diag;
    installStderrHandler(diag);
    auto model = loadModel(file, graphName, {}, diag);
    if (failed(model))
      return 1;
    unbound.emplace(model.take());
    for (const std::map<std::string, int64_t> &dims : sizes) { // every size, before compiling
      codegen::CompileOptions o = options;
      o.dims = dims;
      if (failed(codegen::checkRanges(*unbound->graph, o, diag)))
        return 1;
    }
    std::map<std::string, int64_t> largest; // each symbol's largest listed size
    for (const auto &dims : sizes)
      for (const auto &[name, n] : dims)
        largest[name] = std::max(largest[name], n);
    shared = compileSharedOnce(file, *unbound->graph, options, largest);
  }
  for (const std::map<std::string, int64_t> &dims : sizes) {
    DiagnosticEngine diag;
    installStderrHandler(diag);
    LoadedModel bound;
    if (!unbound) {
      auto model = loadModel(file, graphName, dims, diag);
      if (failed(model))
        return 1;
      bound = model.take();
    }
    const Graph &graph = unbound ? *unbound->graph : *bound.graph;
    codegen::CompileOptions o = options;
    o.dims = dims;
    o.sharedKernels = shared;
    o.runTimeSizes = false; // compiled once above, or not at all
    codegen::CompileReport report;
    std::optional<CompileProgress> progress(std::in_place, file);
    auto exe = codegen::compile(graph, o, diag, &report);
    progress.reset();
    if (failed(exe)) {
      std::fprintf(stderr, "kiln compile: error: compiling for %s failed\n",
                   sizesText(dims).c_str());
      return 1;
    }
    labels.push_back(sizesText(dims));
    std::printf("size %s: %s\n", labels.back().c_str(), report.summary().c_str());
    infos.push_back(codegen::artifactInfo(codegen::GraphPorts::of(graph), **exe, report,
                                          std::filesystem::path(file).filename().string()));
    exes.push_back(exe.take());
  }
  std::vector<runtime::ArtifactSetEntry> entries;
  for (size_t i = 0; i < exes.size(); ++i)
    entries.push_back({labels[i], exes[i].get(), &infos[i]});
  if (runtime::Status st = runtime::saveArtifactSet(entries, outputPath); !st.ok()) {
    std::fprintf(stderr, "kiln compile: error: %s\n", st.error.c_str());
    return 1;
  }
  std::error_code ec;
  std::printf("artifact: %s (%zu sizes, %ju bytes)\n", outputPath.c_str(), exes.size(),
              static_cast<uintmax_t>(std::filesystem::file_size(outputPath, ec)));
  return 0;
}

double secondsOf(const std::function<bool()> &fn, bool &ok) {
  const auto t0 = std::chrono::steady_clock::now();
  ok = fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// What `kiln compile` prints and does besides compiling.
struct ReportFlags {
  bool printSteps = false, reportMemory = false;
  int profileRuns = 0;
  CheckFlags checks;
  std::string outputPath;
};

/// Prints one `check output` line per output of `g`, the compiled result
/// against the interpreter's; whether every one is within `tol`.
bool checkOutputs(const Graph &g, const std::vector<Tensor> &compiled,
                  const std::vector<Tensor> &reference, const Tolerance &tol) {
  bool allOk = true;
  for (size_t k = 0; k < reference.size(); ++k) {
    const bool sameShape = compiled[k].shape() == reference[k].shape();
    Comparison c = sameShape ? compareTensors(compiled[k], reference[k], tol) : Comparison{};
    std::printf("check output %zu (%%%s): %s\n", k, g.outputs()[k]->name().c_str(),
                sameShape ? describe(c, tol).c_str() : "FAIL: the shapes differ");
    allOk &= sameShape && c.ok();
  }
  return allOk;
}

/// A model compiled in stages (Note [Data-dependent shapes] in
/// codegen/Staged.cpp): its first stage's report, and with --check a run
/// on random inputs against the interpreter; it cannot be saved.
int compileStaged(const codegen::StagedModel &model, const Graph &g,
                  const std::map<std::string, int64_t> &dims, const codegen::CompileReport &report,
                  const ReportFlags &flags, DiagnosticEngine &diag) {
  std::printf("%s\n", model.stages().c_str());
  if (flags.checks.each || flags.checks.bisect || flags.profileRuns > 0 || flags.printSteps ||
      flags.reportMemory)
    std::fprintf(stderr, "kiln compile: warning: --check-each, --bisect, --profile, --steps and "
                         "--report-memory take one executable and are not run on a model "
                         "compiled in stages\n");
  if (!flags.outputPath.empty()) {
    std::fprintf(stderr,
                 "kiln compile: error: -o: the model is compiled in stages, the last compiled "
                 "when a run gives its sizes, and an artifact holds compiled code only; '%s' is "
                 "not written\n",
                 flags.outputPath.c_str());
    return 1;
  }
  if (model.firstStage()) {
    std::printf("summary: first stage: %s\n", report.summary().c_str());
    std::printf("target: %s\n", report.target.c_str());
  }
  if (!flags.checks.check)
    return 0;
  std::vector<Tensor> inputs = randomInputs(g, dims, 1234);
  std::vector<std::string> log;
  auto compiled = model.run(inputs, diag, {}, &log);
  auto reference = interpret(g, inputs, diag);
  if (failed(compiled) || failed(reference))
    return 1;
  for (const std::string &line : log)
    std::printf("%s\n", line.c_str());
  return checkOutputs(g, *compiled, *reference, flags.checks.tol) ? 0 : 1;
}

/// Compiles `g` at options.dims and prints, saves, checks and profiles as
/// `flags` ask; the exit status.
int compileOneSize(const std::string &file, Graph &graph, codegen::CompileOptions options,
                   const ReportFlags &flags, DiagnosticEngine &diag) {
  Graph *g = &graph;
  const bool printSteps = flags.printSteps, reportMemory = flags.reportMemory;
  const int profileRuns = flags.profileRuns;
  const CheckFlags &checks = flags.checks;
  const std::string &outputPath = flags.outputPath;
  std::error_code ec;
  codegen::CompileReport report;
  // The per-buffer memory table needs a real compile (a cache entry keeps
  // the plan's offsets, not its lifetimes).
  options.cache &= !reportMemory;
  std::optional<CompileProgress> progress(std::in_place, file);
  auto model = codegen::StagedModel::compile(*g, options, diag, &report);
  progress.reset();
  if (failed(model))
    return 1;
  if (!(*model)->whole())
    return compileStaged(**model, *g, options.dims, report, flags, diag);
  auto exe = (*model)->takeWhole();
  if (options.explain)
    std::printf("// fusion decisions\n%s", report.fusion.c_str());
  if (options.emitKernels)
    std::printf("// kernels\n%s", report.kernels.c_str());
  if (options.emitLLVM || options.emitLLVMOptimized)
    std::printf("// llvm\n%s", report.llvm.c_str());
  if (printSteps)
    std::printf("// steps\n%s", report.steps.c_str());
  if (reportMemory)
    std::printf("// %s", report.memory.str(/*perBuffer=*/true).c_str());
  for (const std::string &line : report.libraryCalls)
    std::printf("library call %s\n", line.c_str());
  for (const std::string &line : report.fallbacks)
    std::printf("fallback %s\n", line.c_str());
  std::printf("summary: %s\n", report.summary().c_str());
  std::printf("target: %s\n", report.target.c_str());
  if (!outputPath.empty()) {
    const runtime::ArtifactInfo info = codegen::artifactInfo(
        codegen::GraphPorts::of(*g), *exe, report, std::filesystem::path(file).filename().string());
    if (runtime::Status st = runtime::saveArtifact(*exe, info, outputPath); !st.ok()) {
      std::fprintf(stderr, "kiln compile: error: %s\n", st.error.c_str());
      return 1;
    }
    std::printf("artifact: %s (%ju bytes)\n", outputPath.c_str(),
                static_cast<uintmax_t>(std::filesystem::file_size(outputPath, ec)));
  }

  if (!checks.check && !checks.each && profileRuns == 0)
    return 0;
  std::vector<Tensor> inputs = randomInputs(*g, options.dims, 1234);
  bool ok = true;
  std::vector<Tensor> compiled;
  runtime::RunProfile profile;
  runtime::RunOptions runOptions;
  runOptions.profile = profileRuns > 0;
  // One warm-up run, then the timed ones.
  for (int r = 0; r <= profileRuns; ++r) {
    auto outs = codegen::runCompiled(*exe, inputs, diag, runOptions, r > 0 ? &profile : nullptr);
    if (failed(outs))
      return 1;
    compiled = outs.take();
  }
  if (profileRuns > 0) {
    const auto &steps = exe->steps();
    double total = 0;
    for (double s : profile.stepSeconds)
      total += s;
    std::printf("// profile: %d runs, %d threads\n", profileRuns,
                exe->resolveThreads(options.threads));
    for (size_t i = 0; i < steps.size(); ++i)
      std::printf("step %zu %-60s %10.1f us\n", i, steps[i].name.c_str(),
                  profile.stepSeconds[i] * 1e6 / profileRuns);
    std::printf("compiled: %.3f ms per run (sum of steps)\n", total * 1e3 / profileRuns);
  }
  // The interpreter runs the graph as given, with bound dims in the inputs.
  std::vector<Tensor> reference;
  double interpSeconds = secondsOf(
      [&] {
        auto outs = interpret(*g, inputs, diag);
        if (failed(outs))
          return false;
        reference = outs.take();
        return true;
      },
      ok);
  if (!ok)
    return 1;
  if (profileRuns > 0)
    std::printf("interpreter: %.3f ms per run\n", interpSeconds * 1e3);
  bool allOk = !checks.check || checkOutputs(*g, compiled, reference, checks.tol);
  allOk = bisectIfAsked(*g, inputs, options, checks, allOk,
                        "the whole schedule (memory plan, layouts across steps)", diag);
  return allOk ? 0 : 1;
}

/// The symbols of options.ranges that options.dims does not fix, with
/// their ranges.
std::vector<codegen::SymbolRange> rangedSizes(const codegen::CompileOptions &options) {
  std::vector<codegen::SymbolRange> out;
  for (const codegen::SymbolRange &r : options.ranges)
    if (!options.dims.count(r.name))
      out.push_back(r);
  return out;
}

/// `kiln compile MODEL --dim SYM=LO..HI`: the kernels with run-time sizes
/// compiled once for the ranges, then the model compiled at HI of every
/// range, and with --check or --profile also at LO and in between: each
/// size reuses the kernels (Note [Compiling per size] in api/Kiln.cpp). A
/// symbol in `open` (no --dim, its range the default) is compiled at 1, and
/// also at 7 with --check or --profile: its range's HI would be a batch of
/// 1024 (Note [Symbolic without --dim] in tools/Commands.h).
int compileOverRanges(const std::string &file, Graph &g, codegen::CompileOptions options,
                      const std::set<std::string> &open, const ReportFlags &flags,
                      DiagnosticEngine &diag) {
  const std::vector<codegen::SymbolRange> ranged = rangedSizes(options);
  std::vector<std::map<std::string, int64_t>> points;
  enum class Pick { Lo, Mid, Hi };
  auto at = [&](Pick pick) {
    std::map<std::string, int64_t> dims = options.dims;
    for (const codegen::SymbolRange &r : ranged)
      dims[r.name] = pick == Pick::Lo     ? r.min
                     : open.count(r.name) ? (pick == Pick::Mid ? std::min<int64_t>(7, r.max) : 1)
                     : pick == Pick::Mid  ? r.min + (r.max - r.min) / 2
                                          : r.max;
    if (std::find(points.begin(), points.end(), dims) == points.end())
      points.push_back(dims);
  };
  if (flags.checks.check || flags.checks.each || flags.profileRuns > 0) {
    at(Pick::Lo);
    at(Pick::Mid);
  }
  at(Pick::Hi);
  if (!open.empty()) {
    std::string names;
    for (const std::string &s : open)
      names += (names.empty() ? "" : ", ") + s;
    std::printf("symbolic: %s (no --dim): compiled for %s, reported at %s; give --dim "
                "SYM=N or SYM=LO..HI for other sizes\n",
                names.c_str(), openRangesStr(options.ranges, open).c_str(),
                points.size() == 1 ? "1" : "1 and 7");
  }

  options.sharedKernels = compileSharedOnce(file, g, options, points.back());
  options.runTimeSizes = false; // compiled once above, or not at all
  ReportFlags perSize = flags;
  perSize.outputPath.clear(); // a symbolic artifact, written below
  if (!flags.outputPath.empty() && !options.sharedKernels) {
    std::fprintf(stderr,
                 "kiln compile: error: -o over %s: a symbolic artifact keeps the kernels "
                 "compiled with run-time sizes, and none were (above); '%s' is not written. "
                 "List the sizes to store instead (--dim SYM=A,B,...: a size set)\n",
                 codegen::rangesStr(ranged).c_str(), flags.outputPath.c_str());
    return 1;
  }
  int status = 0;
  const codegen::CompileOptions symbolic = options;
  for (const std::map<std::string, int64_t> &dims : points) {
    std::printf("// size %s\n", sizesText(dims).c_str());
    options.dims = dims;
    status = std::max(status, compileOneSize(file, g, options, perSize, diag));
  }
  if (status != 0 || flags.outputPath.empty())
    return status;
  // Note [Symbolic artifacts] in codegen/SymbolicArtifact.cpp.
  if (failed(codegen::saveSymbolicArtifact(g, symbolic, *symbolic.sharedKernels, open,
                                           std::filesystem::path(file).filename().string(),
                                           flags.outputPath, diag)))
    return 1;
  std::error_code ec;
  const size_t once = symbolic.sharedKernels->byName.size();
  std::printf("artifact: %s (symbolic over %s: %zu kernel%s compiled once, %zu per size; %ju "
              "bytes)\n",
              flags.outputPath.c_str(), codegen::rangesStr(ranged).c_str(), once,
              once == 1 ? "" : "s", symbolic.sharedKernels->perSize.size(),
              static_cast<uintmax_t>(std::filesystem::file_size(flags.outputPath, ec)));
  return 0;
}

} // namespace

int compileCommand(const Args &args) {
  std::string file, graphName;
  codegen::CompileOptions options;
  options.cache = true; // --no-cache turns it off
  ReportFlags flags;
  bool &printSteps = flags.printSteps, &reportMemory = flags.reportMemory;
  int &profileRuns = flags.profileRuns;
  CheckFlags &checks = flags.checks;
  std::string &outputPath = flags.outputPath;
  SizeLists sizeLists;
  CudaEmitFlags cuda;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string v;
    const std::string &a = args[i];
    if (size_t j = i; matchFlag(args, j, "--dim", v) && v.find(',') != std::string::npos) {
      if (!parseSizeList(v, sizeLists))
        return 2;
      i = j;
      continue;
    }
    FlagMatch m = matchCompileFlag("kiln compile", args, i, options);
    if (m == FlagMatch::No)
      m = matchCheckFlag("kiln compile", args, i, checks);
    if (m == FlagMatch::Bad)
      return 2;
    if (m == FlagMatch::Taken)
      continue;
    if (a == "--help" || a == "-h") {
      printCompileUsage(stdout);
      return 0;
    } else if (a == "--explain-fusion") {
      options.explain = true;
    } else if (a == "--steps") {
      printSteps = true;
    } else if (a == "--report-memory") {
      reportMemory = true;
    } else if (matchFlag(args, i, "--emit", v)) {
      if (v == "kernels")
        options.emitKernels = true;
      else if (v == "llvm")
        options.emitLLVM = true;
      else if (v == "llvm-opt")
        options.emitLLVMOptimized = true;
      else if (v == "cuda")
        cuda.source = true;
      else if (v == "ptx")
        cuda.ptx = true;
      else {
        std::fprintf(stderr,
                     "kiln compile: error: --emit expects kernels, llvm, llvm-opt, cuda or ptx, "
                     "got '%s'\n",
                     v.c_str());
        return 2;
      }
    } else if (matchFlag(args, i, "--target", v)) {
      if (v != "cpu" && v != "cuda") {
        std::fprintf(stderr, "kiln compile: error: --target expects cpu or cuda, got '%s'\n",
                     v.c_str());
        return 2;
      }
      cuda.target = v == "cuda";
    } else if (matchFlag(args, i, "--cuda-arch", v)) {
      cuda.arch = parseCudaArchFlag(v);
      if (cuda.arch < 0) {
        std::fprintf(stderr,
                     "kiln compile: error: --cuda-arch expects sm_NN (50 or more), got '%s'\n",
                     v.c_str());
        return 2;
      }
    } else if (matchFlag(args, i, "--cuda-dir", v)) {
      if (v.empty()) {
        std::fprintf(stderr, "kiln compile: error: --cuda-dir expects a folder\n");
        return 2;
      }
      cuda.dir = v;
    } else if (matchFlag(args, i, "--profile", v)) {
      int64_t n;
      if (!parseIntArg("kiln compile", "--profile", v, 1, 1000000, n))
        return 2;
      profileRuns = static_cast<int>(n);
    } else if (matchFlag(args, i, "--graph", v)) {
      graphName = v;
    } else if (matchFlag(args, i, "--output", v) || matchFlag(args, i, "-o", v)) {
      if (v.empty()) {
        std::fprintf(stderr, "kiln compile: error: -o expects a file name\n");
        return 2;
      }
      outputPath = v;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "kiln compile: error: unknown option '%s'\n", a.c_str());
      printCompileUsage(stderr);
      return 2;
    } else if (file.empty()) {
      file = a;
    } else {
      std::fprintf(stderr, "kiln compile: error: more than one model file\n");
      return 2;
    }
  }
  if (checks.bisect && !checks.check) {
    std::fprintf(stderr, "kiln compile: error: --bisect needs --check\n");
    return 2;
  }
  if (file.empty()) {
    printCompileUsage(stderr);
    return 2;
  }

  if (runtime::isArtifactFile(file) || runtime::isSymbolicArtifactFile(file) ||
      runtime::isCudaArtifactFile(file)) {
    std::fprintf(stderr,
                 "kiln compile: error: '%s' is a compiled artifact already; compile the "
                 "model it came from\n",
                 file.c_str());
    return 1;
  }
  std::error_code ec;
  if (!outputPath.empty() && std::filesystem::exists(outputPath) &&
      std::filesystem::equivalent(file, outputPath, ec)) {
    std::fprintf(stderr,
                 "kiln compile: error: refusing to overwrite the model '%s' with its "
                 "artifact\n",
                 file.c_str());
    return 1;
  }
  // Nothing the user gave is overwritten: -o replaces a compiled file only
  // (not, say, the external weights a model reads, model.onnx.data).
  if (!outputPath.empty() && std::filesystem::exists(outputPath) &&
      !runtime::isArtifactFile(outputPath) && !runtime::isSymbolicArtifactFile(outputPath) &&
      !runtime::isCudaArtifactFile(outputPath)) {
    std::fprintf(stderr,
                 "kiln compile: error: refusing to overwrite '%s': it exists and is not a Kiln "
                 "artifact (remove it first, or write elsewhere)\n",
                 outputPath.c_str());
    return 1;
  }
  if (!outputPath.empty() && !sizeLists.empty())
    for (const codegen::SymbolRange &r : rangedSizes(options))
      if (std::none_of(sizeLists.begin(), sizeLists.end(),
                       [&](const auto &list) { return list.first == r.name; })) {
        std::fprintf(stderr,
                     "kiln compile: error: -o with --dim %s=%lld..%lld beside a list of sizes: "
                     "a size set holds the model at every listed size, a symbolic artifact "
                     "over ranges; list %s's sizes too (--dim %s=A,B,...) or give ranges only\n",
                     r.name.c_str(), static_cast<long long>(r.min), static_cast<long long>(r.max),
                     r.name.c_str(), r.name.c_str());
        return 2;
      }
  if (cuda.any() && ((!outputPath.empty() && !cuda.target) || (options.explain && !cuda.target) ||
                     !sizeLists.empty() || !options.ranges.empty() || checks.check || checks.each ||
                     profileRuns > 0 || printSteps || reportMemory || options.emitKernels ||
                     options.emitLLVM || options.emitLLVMOptimized || options.cpu != "native")) {
    std::fprintf(stderr,
                 "kiln compile: error: --target cuda, --emit=cuda|ptx and --cuda-dir "
                 "compile with the CUDA backend instead of for a CPU: they take none of "
                 "--check, --profile, --steps, --report-memory, --emit=kernels|llvm, --cpu, "
                 "nor a --dim range or list (give --dim SYM=N); -o and --explain-fusion "
                 "need --target cuda\n");
    return 2;
  }
  cuda.output = outputPath;
  if (!sizeLists.empty()) {
    for (const auto &[sym, sizes] : sizeLists) {
      if (options.dims.count(sym)) {
        std::fprintf(stderr, "kiln compile: error: --dim %s is given twice\n", sym.c_str());
        return 2;
      }
      for (const codegen::SymbolRange &r : options.ranges)
        for (int64_t n : sizes)
          if (r.name == sym && (n < r.min || n > r.max)) {
            std::fprintf(stderr,
                         "kiln compile: error: --dim %s lists %lld, outside --dim %s=%lld..%lld\n",
                         sym.c_str(), static_cast<long long>(n), sym.c_str(),
                         static_cast<long long>(r.min), static_cast<long long>(r.max));
            return 2;
          }
    }
    if (outputPath.empty() || checks.check || checks.each || profileRuns > 0 || printSteps ||
        reportMemory || options.explain || options.emitKernels || options.emitLLVM ||
        options.emitLLVMOptimized) {
      std::fprintf(stderr, "kiln compile: error: --dim SYM=A,B,... compiles a size set: it "
                           "needs -o FILE and takes none of --check, --profile, --emit, "
                           "--steps, --report-memory, --explain-fusion (compile one size "
                           "with --dim SYM=N for those)\n");
      return 2;
    }
    return compileSizeSet(file, graphName, options, sizeLists, outputPath);
  }
  DiagnosticEngine diag;
  installStderrHandler(diag);
  std::set<std::string> open; // Note [Symbolic without --dim] in tools/Commands.h
  auto model = loadForCompile(file, graphName, options, open, diag);
  if (failed(model))
    return 1;
  Graph *g = model->graph;
  if (failed(codegen::checkRanges(*g, options, diag)))
    return 1;
  if (cuda.any())
    return emitCuda(*g, file, options, cuda, diag);
  if (!rangedSizes(options).empty() && !outputPath.empty()) {
    // Compiled as a symbolic artifact stores it, so that its kernels'
    // names are the loaded graph's (codegen::asStored).
    auto stored = codegen::asStored(*g, diag);
    if (failed(stored))
      return 1;
    return compileOverRanges(file, *(*stored)->graphs().front(), options, open, flags, diag);
  }
  if (!rangedSizes(options).empty())
    return compileOverRanges(file, *g, options, open, flags, diag);
  return compileOneSize(file, *g, options, flags, diag);
}

} // namespace kiln::tools
