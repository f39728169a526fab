//===- BenchCommand.cpp - kiln bench: time a compiled model -----*- C++ -*-===//
//
//   kiln bench MODEL [--data DIR] [--runs N] [--warmup N] [--json] [--serve]
//              [--cpu NAME] [--threads N] [--dim SYM=N] ... (tools/CompileFlags.cpp)
//
// Compiles MODEL for --cpu, runs it once (first-run latency), checks the
// outputs against DIR/output_K when --data gives them, then times --runs
// runs after --warmup untimed ones and prints the median, the 10th and 90th
// percentiles, compile time, the memory plan and the process's peak
// resident memory. Inputs come from DIR/input_K (else random). Runs go
// through Executable::run with one output vector reused across calls, as
// an application calling the model in a loop would.
//
// --serve speaks the line protocol of bench/harness (one JSON object per
// line on stdout; commands on stdin), so that the harness can interleave
// Kiln with other engines in separate processes:
//   started:  {"event":"ready", "engine":"kiln", "compile_s":..., ...}
//   warmup N: {"event":"warmup","n":N}
//   run N:    {"event":"run","times":[s,...],"cpu_s":...,"wall_s":...}
//   quit:     {"event":"quit","peak_rss_kb":...}
// Errors before "ready" are printed to stderr and exit 1.
//
//===----------------------------------------------------------------------===//
#include "codegen/Compiler.h"
#include "codegen/MemoryPlan.h"
#include "codegen/Staged.h"
#include "codegen/SymbolicArtifact.h"
#include "frontend/onnx/OnnxImporter.h" // isOnnxPath
#include "runtime/artifact/Artifact.h"
#include "runtime/reference/HostTensors.h"
#include "tools/Commands.h"
#include "tools/Progress.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <sstream>

namespace kiln::tools {
namespace {

const char kBenchUsage[] =
    "usage: kiln bench MODEL [options]     (MODEL: a .kir file, an ONNX model or a .kiln\n"
    "                                      artifact: load time instead of compile time;\n"
    "                                      a symbolic one: load and that size's compile)\n"
    "  --data DIR              inputs from DIR/input_K.pb (or .npy; else random) and\n"
    "                          expected outputs from DIR/output_K to check against\n"
    "  --runs N                timed runs (default 50)\n"
    "  --warmup N              untimed runs before them (default 5)\n"
    "  --json                  print one JSON object instead of text\n"
    "  --serve                 the line protocol of bench/harness (see bench/README.md)\n"
    "  --graph NAME            the graph to compile (default: the first)\n"
    "  (symbolic dims not given with --dim SYM=N come from the inputs, else from the\n"
    "  largest size of their --dim range, else 1; the report says which sizes it measured)\n";

void printBenchUsage(FILE *f) {
  std::fputs(kBenchUsage, f);
  printCompileFlagsUsage(f);
  std::fputs(kToleranceUsage, f);
}

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

/// User + system CPU seconds of the process (all threads).
double cpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

/// This process's peak RSS: VmHWM of /proc/self/status (this address
/// space's high-water mark). getrusage's ru_maxrss is not used: Linux
/// carries the parent's peak over fork and exec into it, so `kiln bench`
/// started by a large process (a Python driver holding PyTorch) reported
/// the parent's size.
long peakRssKb() {
  if (FILE *f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    long kb = -1;
    while (kb < 0 && std::fgets(line, sizeof(line), f))
      if (std::sscanf(line, "VmHWM: %ld kB", &kb) != 1)
        kb = -1;
    std::fclose(f);
    if (kb >= 0)
      return kb;
  }
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::string jsonString(const std::string &s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20)
      out += ' ';
    else
      out += c;
  }
  return out + "\"";
}

std::string number(double v) {
  if (!std::isfinite(v))
    return "null";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

/// Compares outputs with expected tensors: "ok" or what is wrong, and the
/// largest absolute error.
std::string checkOutputs(const std::vector<runtime::HostTensor> &outs,
                         const std::vector<Tensor> &want, const Tolerance &tol, double &maxAbsErr) {
  maxAbsErr = 0;
  std::string problems;
  for (size_t k = 0; k < want.size() && k < outs.size(); ++k) {
    Tensor got = runtime::fromHostTensor(outs[k]);
    if (got.shape() != want[k].shape()) {
      problems += "output " + std::to_string(k) + " has shape " + sizesStr(got.shape()) +
                  ", expected " + sizesStr(want[k].shape()) + "; ";
      continue;
    }
    Comparison c = compareTensors(got, want[k], tol);
    maxAbsErr = std::max(maxAbsErr, c.maxAbs);
    if (!c.ok())
      problems += "output " + std::to_string(k) + " " + describe(c, tol) + "; ";
  }
  if (outs.size() != want.size() && !want.empty())
    problems +=
        std::to_string(outs.size()) + " outputs, expected " + std::to_string(want.size()) + "; ";
  if (problems.empty())
    return "ok";
  problems.resize(problems.size() - 2);
  return problems;
}

} // namespace

int benchCommand(const Args &args) {
  std::string file, graphName, dataDir;
  codegen::CompileOptions options;
  options.cache = true; // --no-cache turns it off
  int64_t runs = 50, warmup = 5;
  bool json = false, serve = false;
  Tolerance tol;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string v;
    const std::string &a = args[i];
    FlagMatch fm = matchCompileFlag("kiln bench", args, i, options);
    if (fm == FlagMatch::No)
      fm = matchToleranceFlag("kiln bench", args, i, tol);
    if (fm == FlagMatch::Bad)
      return 2;
    if (fm == FlagMatch::Taken)
      continue;
    if (a == "--help" || a == "-h") {
      printBenchUsage(stdout);
      return 0;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--serve") {
      serve = true;
    } else if (matchFlag(args, i, "--data", v)) {
      dataDir = v;
    } else if (matchFlag(args, i, "--runs", v)) {
      if (!parseIntArg("kiln bench", "--runs", v, 1, 10000000, runs))
        return 2;
    } else if (matchFlag(args, i, "--warmup", v)) {
      if (!parseIntArg("kiln bench", "--warmup", v, 0, 10000000, warmup))
        return 2;
    } else if (matchFlag(args, i, "--graph", v)) {
      graphName = v;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "kiln bench: error: unknown option '%s'\n", a.c_str());
      printBenchUsage(stderr);
      return 2;
    } else if (file.empty()) {
      file = a;
    } else {
      std::fprintf(stderr, "kiln bench: error: more than one model file\n");
      return 2;
    }
  }
  if (file.empty()) {
    printBenchUsage(stderr);
    return 2;
  }
  if (!dataDir.empty() && !std::filesystem::is_directory(dataDir)) {
    std::fprintf(stderr, "kiln bench: error: --data '%s' is not a folder\n", dataDir.c_str());
    return 1;
  }

  DiagnosticEngine diag;
  installStderrHandler(diag);
  const bool isArtifact = runtime::isArtifactFile(file);
  if (isArtifact && !onlyThreadsForArtifact("kiln bench", options, file))
    return 2;
  const bool isSymbolic = runtime::isSymbolicArtifactFile(file); // compiled per size from it
  std::set<std::string> open; // its symbols no --dim named (reported at 1)
  // What is run, and what the report says about it.
  std::unique_ptr<runtime::Executable> exe;
  std::unique_ptr<codegen::StagedModel> staged; // exe is null when it has stages
  codegen::CompileReport report;
  std::vector<Tensor> inputs, expected;
  std::string sizes; // the symbols' sizes, for the report
  size_t numNodes = 0;
  double loadSeconds = 0, compileSeconds = 0;
  std::vector<std::pair<DType, std::vector<int64_t>>> inputTypes;
  std::vector<std::string> inputNames;
  size_t numOutputs = 0;
  LoadedModel model;
  Graph *g = nullptr;
  const auto loadStart = Clock::now();
  std::map<std::string, int64_t> importDims; // the dims the model was imported with
  // An artifact, possibly a size set: --data's inputs pick the size, else
  // the set's first.
  std::vector<runtime::ArtifactSetMember> sizeSet;
  if (isArtifact) {
    if (runtime::Status st = runtime::loadArtifactSet(file, sizeSet); !st.ok()) {
      std::fprintf(stderr, "kiln bench: error: %s\n", st.error.c_str());
      return 1;
    }
    loadSeconds = secondsSince(loadStart);
    for (const runtime::ArtifactPort &p : sizeSet.front().info.inputs) {
      inputTypes.emplace_back(p.dtype, p.dims);
      inputNames.push_back(p.name);
    }
    numOutputs = sizeSet.front().info.outputs.size();
  } else {
    importDims = options.dims;
    bool usage = false;
    auto loaded = isSymbolic ? loadSymbolicForCompile("kiln bench", file, graphName, options, open,
                                                      usage, diag)
                             : loadModel(file, graphName, dimsAtImport(options), diag);
    if (failed(loaded))
      return usage ? 2 : 1;
    if (failed(codegen::checkRanges(*loaded->graph, options, diag)))
      return 1;
    model = loaded.take();
    g = model.graph;
    loadSeconds = secondsSince(loadStart);
    for (const Value *v : g->inputs())
      inputNames.push_back(v->name());
    numOutputs = g->outputs().size();
  }

  // Inputs (and expected outputs) from --data, else random.
  if (!dataDir.empty()) {
    for (unsigned k = 0; k < inputNames.size(); ++k) {
      std::string f = findDataFile(dataDir, "input", k);
      if (f.empty()) {
        std::fprintf(stderr, "kiln bench: error: '%s' has no input_%u.pb or .npy for %%%s\n",
                     dataDir.c_str(), k, inputNames[k].c_str());
        return 1;
      }
      auto t = readTensorFile(f, diag);
      if (failed(t))
        return 1;
      inputs.push_back(t.take());
    }
    for (size_t k = 0; k < numOutputs; ++k) {
      std::string f = findDataFile(dataDir, "output", k);
      if (f.empty()) {
        expected.clear();
        break;
      }
      auto t = readTensorFile(f, diag);
      if (failed(t))
        return 1;
      expected.push_back(t.take());
    }
    // Symbolic dims the user did not bind come from the inputs.
    if (g) {
      if (!checkInputRanges("kiln bench", *g, inputs, options.ranges))
        return 1;
      bindDimsFromInputs(*g, inputs, options.dims);
      sizes = bindSymbolsForReport(*g, options.dims, options.ranges, open, isSymbolic);
    }
  } else if (g) {
    sizes = bindSymbolsForReport(*g, options.dims, options.ranges, open, isSymbolic);
    inputs = randomInputs(*g, options.dims, 1234);
  } else {
    inputs = randomTensors(inputTypes, 1234);
  }
  // Dims bound from the inputs (or defaulted to 1) are bound at an ONNX
  // model's import, as `kiln compile --dim` binds them: the same graph, so
  // the same compile cache key (a model compiled with --dim is a warm
  // compile here). A .kir graph takes them at compile time either way.
  if (g && isOnnxPath(file) && options.dims != importDims && !options.runTimeSizes) {
    const auto reloadStart = Clock::now();
    auto reloaded = loadModel(file, graphName, dimsAtImport(options), diag);
    if (failed(reloaded))
      return 1;
    model = reloaded.take();
    g = model.graph;
    loadSeconds += secondsSince(reloadStart); // both imports
  }

  if (isArtifact) {
    const int k = pickSetMember("kiln bench", file, sizeSet, inputs);
    if (k < 0)
      return 1;
    runtime::ArtifactSetMember &m = sizeSet[static_cast<size_t>(k)];
    exe = std::move(m.exe);
    const runtime::ArtifactInfo &info = m.info;
    codegen::reportFromArtifact(info, *exe, report);
    report.target = "--cpu " + info.target.requested + " (cpu " + info.target.cpu + ", artifact)";
    report.memory.arenaBytes = exe->arenaBytes();
    report.memory.outputBytes = exe->outputBlockBytes();
    report.memory.constantBytes = info.constantBytes;
    if (sizeSet.size() > 1)
      sizes = m.sizes + " (of " + std::to_string(sizeSet.size()) + " in the set)";
  }
  if (g) {
    const auto compileStart = Clock::now();
    // The compiler takes the graph over (see compile(std::unique_ptr<Graph>)).
    std::unique_ptr<Graph> owned;
    for (auto &graph : model.module->graphs())
      if (graph.get() == g)
        owned = std::move(graph);
    numNodes = g->numNodes();
    std::optional<CompileProgress> progress(std::in_place, file);
    if (codegen::mayStage(*owned)) { // Note [Data-dependent shapes] in codegen/Staged.cpp
      auto model = codegen::StagedModel::compile(*owned, options, diag, &report);
      if (failed(model))
        return 1;
      staged = model.take();
      exe = staged->takeWhole();
    } else {
      auto compiled = codegen::compile(std::move(owned), options, diag, &report);
      if (failed(compiled))
        return 1;
      exe = compiled.take();
    }
    progress.reset();
    compileSeconds = secondsSince(compileStart);
    // The compiled model owns what it needs; the loaded one can go (as in an
    // application that compiles once and keeps only the executable).
    model.module.reset();
    g = nullptr;
  }
  // A staged model reports on its first stage (its steps, its memory).
  const runtime::Executable *first = exe ? exe.get() : staged->firstStage();
  const int threads =
      exe ? exe->resolveThreads(options.threads) : staged->resolveThreads(options.threads);
  const size_t numSteps = first ? first->steps().size() : 0;

  std::vector<runtime::HostTensor> in, outs;
  for (const Tensor &t : inputs)
    in.push_back(runtime::toHostTensor(t));
  runtime::RunOptions ropts;
  ropts.threads = options.threads;
  std::vector<std::string> stageLog;
  auto runOnce = [&]() -> bool {
    if (!exe) {
      auto got = staged->run(inputs, diag, ropts, &stageLog);
      if (failed(got))
        return false;
      outs.clear();
      for (const Tensor &t : *got)
        outs.push_back(runtime::toHostTensor(t));
      return true;
    }
    runtime::Status st = exe->run(in, outs, ropts);
    if (!st.ok()) {
      std::fprintf(stderr, "kiln bench: error: %s\n", st.error.c_str());
      return false;
    }
    return true;
  };
  const auto firstStart = Clock::now();
  if (!runOnce())
    return 1;
  const double firstRunSeconds = secondsSince(firstStart);
  double maxAbsErr = 0;
  std::string check =
      expected.empty() ? "no reference outputs" : checkOutputs(outs, expected, tol, maxAbsErr);

  const codegen::MemoryReport &m = report.memory;
  std::ostringstream ready;
  ready << "{\"event\":\"ready\",\"engine\":\"kiln\",\"model\":" << jsonString(file)
        << ",\"threads\":" << threads << ",\"load_s\":" << number(loadSeconds)
        << ",\"compile_s\":" << number(compileSeconds) << ",\"cache\":"
        << jsonString(isArtifact                  ? "artifact"
                      : report.cacheHit           ? "hit"
                      : report.cacheEntry.empty() ? "off"
                                                  : "miss")
        << ",\"target\":" << jsonString(report.target) << ",\"sizes\":" << jsonString(sizes)
        << ",\"first_run_s\":" << number(firstRunSeconds) << ",\"check\":" << jsonString(check)
        << ",\"max_abs_err\":" << number(maxAbsErr) << ",\"kernels\":" << report.numKernels
        << ",\"library_calls\":" << report.numLibraryCalls
        << ",\"fallbacks\":" << report.numFallbacks << ",\"steps\":" << numSteps
        << ",\"staged\":" << jsonString(staged && !exe ? staged->stages() : "")
        << ",\"arena_bytes\":" << m.arenaBytes << ",\"lower_bound_bytes\":" << m.lowerBound
        << ",\"naive_bytes\":" << m.naiveBytes << ",\"output_bytes\":" << m.outputBytes
        << ",\"constant_bytes\":" << m.constantBytes << ",\"in_place\":" << m.inPlace << "}";

  auto timeRuns = [&](int64_t n, std::vector<double> &times, double &cpu, double &wall) -> bool {
    times.clear();
    const double cpu0 = cpuSeconds();
    const auto wall0 = Clock::now();
    for (int64_t r = 0; r < n; ++r) {
      const auto t0 = Clock::now();
      if (!runOnce())
        return false;
      times.push_back(secondsSince(t0));
    }
    wall = secondsSince(wall0);
    cpu = cpuSeconds() - cpu0;
    return true;
  };

  if (serve) {
    std::printf("%s\n", ready.str().c_str());
    std::fflush(stdout);
    std::string line;
    while (std::getline(std::cin, line)) {
      std::istringstream cmd(line);
      std::string verb;
      int64_t n = 0;
      cmd >> verb >> n;
      if (verb == "quit")
        break;
      if ((verb != "run" && verb != "warmup") || n < 0) {
        std::printf("{\"event\":\"error\",\"message\":%s}\n",
                    jsonString("unknown command '" + line + "'").c_str());
        std::fflush(stdout);
        continue;
      }
      std::vector<double> times;
      double cpu = 0, wall = 0;
      if (!timeRuns(n, times, cpu, wall))
        return 1;
      if (verb == "warmup") {
        std::printf("{\"event\":\"warmup\",\"n\":%lld}\n", static_cast<long long>(n));
      } else {
        std::string list;
        for (double t : times)
          list += (list.empty() ? "" : ",") + number(t);
        std::printf("{\"event\":\"run\",\"times\":[%s],\"cpu_s\":%s,\"wall_s\":%s}\n", list.c_str(),
                    number(cpu).c_str(), number(wall).c_str());
      }
      std::fflush(stdout);
    }
    std::printf("{\"event\":\"quit\",\"peak_rss_kb\":%ld}\n", peakRssKb());
    std::fflush(stdout);
    return 0;
  }

  std::vector<double> times;
  double cpu = 0, wall = 0;
  if (!timeRuns(warmup, times, cpu, wall) || !timeRuns(runs, times, cpu, wall))
    return 1;
  const double median = percentile(times, 0.5), p10 = percentile(times, 0.1),
               p90 = percentile(times, 0.9);
  if (json) {
    std::string r = ready.str();
    r.pop_back();
    std::printf("%s,\"runs\":%lld,\"warmup\":%lld,\"median_s\":%s,\"p10_s\":%s,\"p90_s\":%s,"
                "\"min_s\":%s,\"cpu_s\":%s,\"wall_s\":%s,\"peak_rss_kb\":%ld}\n",
                r.c_str(), static_cast<long long>(runs), static_cast<long long>(warmup),
                number(median).c_str(), number(p10).c_str(), number(p90).c_str(),
                number(*std::min_element(times.begin(), times.end())).c_str(), number(cpu).c_str(),
                number(wall).c_str(), peakRssKb());
    return check == "ok" || expected.empty() ? 0 : 1;
  }
  if (isArtifact) {
    std::printf("model:       %s (artifact, %zu steps)\n", file.c_str(), numSteps);
    std::printf("loaded:      %s in %.1f ms\n", report.counts().c_str(), loadSeconds * 1e3);
  } else {
    std::printf("model:       %s (%zu nodes)\n", file.c_str(), numNodes);
    if (isSymbolic)
      std::printf("artifact:    %s\n", model.artifactLine.c_str());
    if (first)
      std::printf("compiled:    %s%s\n", exe ? "" : "first stage: ", report.summary().c_str());
    if (staged && !exe) {
      std::printf("stages:      %s\n", staged->stages().c_str());
      for (const std::string &line : stageLog)
        std::printf("stages:      %s\n", line.c_str());
    }
  }
  std::printf("target:      %s\n", report.target.c_str());
  if (!sizes.empty())
    std::printf("sizes:       %s\n", sizes.c_str());
  if (expected.empty())
    std::printf("check:       %s\n", check.c_str());
  else
    std::printf("check:       %s (max abs error %.3g)\n", check.c_str(), maxAbsErr);
  std::printf("threads:     %d (cpu time / wall time during the runs: %.2f)\n", threads,
              wall > 0 ? cpu / wall : 0.0);
  std::printf("first run:   %.3f ms\n", firstRunSeconds * 1e3);
  std::printf("latency:     median %.3f ms, p10 %.3f ms, p90 %.3f ms (%lld runs after %lld "
              "warm-up)\n",
              median * 1e3, p10 * 1e3, p90 * 1e3, static_cast<long long>(runs),
              static_cast<long long>(warmup));
  if (isArtifact)
    std::printf("memory:      arena %s, outputs %s, constants %s (mapped from the file)\n",
                formatBytes(m.arenaBytes).c_str(), formatBytes(m.outputBytes).c_str(),
                formatBytes(m.constantBytes).c_str());
  else
    std::printf("memory:      arena %s (lower bound %s, naive %s), outputs %s, constants %s%s\n",
                formatBytes(m.arenaBytes).c_str(), formatBytes(m.lowerBound).c_str(),
                formatBytes(m.naiveBytes).c_str(), formatBytes(m.outputBytes).c_str(),
                formatBytes(m.constantBytes).c_str(), exe ? "" : " (the first stage's)");
  std::printf("peak RSS:    %.1f MiB\n", static_cast<double>(peakRssKb()) / 1024);
  return check == "ok" || expected.empty() ? 0 : 1;
}

} // namespace kiln::tools
