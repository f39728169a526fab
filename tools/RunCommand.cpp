//===- RunCommand.cpp - kiln run: run a model on the interpreter -*- C++ -*-===//
//
//   kiln run MODEL (.kir or .onnx) [--input NAME=FILE ...] [--data DIR] [--check]
//            [--expect K=FILE ...] [--graph NAME] [--output-dir D]
//            [--compile [--cpu NAME] [--threads N] [--bisect] [--check-each] ...]
//
// Binds each graph input to a tensor file (.npy, or an ONNX TensorProto
// .pb), runs the graph on the reference interpreter (or, with --compile,
// compiled for --cpu), prints every output (type and leading values) and
// the time, compares outputs with expected ones when asked (ir/Compare.h),
// bisects a compiled mismatch to its first wrong step (codegen/Bisect.h),
// and writes outputs as D/output_K.npy.
//
//===----------------------------------------------------------------------===//
#include "codegen/Compiler.h"
#include "codegen/Staged.h"
#include "codegen/SymbolicArtifact.h"
#include "frontend/onnx/OnnxImporter.h" // isOnnxPath
#include "ir/Interpreter.h"
#include "ir/Npy.h"
#include "ir/Parser.h"
#include "runtime/artifact/Artifact.h"
#include "tools/Commands.h"
#include "tools/Progress.h"

#ifdef KILN_HAS_MLIR
#include "codegen/mlir/MlirExport.h"
#include "passes/PassManager.h"
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

namespace kiln::tools {
namespace {

const char kRunUsage[] =
    "usage: kiln run MODEL [--input NAME=FILE ...] [--data DIR] [options]\n"
    "  MODEL                  a .kir file, an ONNX model (.onnx) or a compiled artifact\n"
    "                         (.kiln, from kiln compile -o; runs compiled, takes --threads;\n"
    "                         a symbolic one, compiled over ranges, also --dim SYM=N;\n"
    "                         a CUDA one, kiln compile --target cuda -o, runs on the GPU)\n"
    "  --input NAME=FILE      bind graph input %NAME to FILE (.npy or ONNX .pb)\n"
    "  --data DIR             an ONNX test_data_set folder: inputs from DIR/input_K.pb\n"
    "                         (or .npy), expected outputs from DIR/output_K.pb (or .npy)\n"
    "  --check                compare the outputs with the expected ones of --data\n"
    "  --compile              compile the model for this CPU and run the compiled code\n"
    "  --target cpu|cuda      cpu: as --compile; cuda: compile the model for the machine's\n"
    "                         GPU with the CUDA backend and run it there (no\n"
    "                         convolution or pooling yet);\n"
    "                         without a GPU, an error saying what is missing\n"
    "  --bisect               with --compile --check: when outputs differ, name the first\n"
    "                         compiled step that differs from the interpreter\n"
    "  --check-each           with --compile: compare every step with the interpreter\n"
    "  --codegen=kiln|mlir    kiln: Kiln's code generator (the default, with --compile);\n"
    "                         mlir: compile through MLIR's own lowering (linalg to loops,\n"
    "                         MLIR's ExecutionEngine; no libraries, no fusion): a\n"
    "                         cross-check of the compiled path, not a fast one\n"
    "  --repeat N             run N times and print the median time (default 1)\n"
    "  --graph NAME           the graph to run when the file has several (default: the first)\n"
    "  --output-dir DIR       write output K to DIR/output_K.npy (DIR is created)\n"
    "  --print-limit N        print at most N values per output (default 8)\n"
    "  --expect K=FILE.npy    compare output K with FILE (repeatable)\n"
    "compile options (with --compile; --dim also without):\n";

void printRunUsage(FILE *f) {
  std::fputs(kRunUsage, f);
  printCompileFlagsUsage(f);
  std::fputs("tolerance of --check and --expect:\n", f);
  std::fputs(kToleranceUsage, f);
}

std::string formatMs(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f ms", ms);
  return buf;
}

} // namespace

int runCommand(const Args &args) {
  std::string file, graphName, outDir, dataDir;
  bool compiled = false, compileOnly = false, cuda = false, mlirPath = false;
  int repeat = 1;
  codegen::CompileOptions copts;
  copts.cache = true; // --no-cache turns it off
  CheckFlags checks;
  int64_t printLimit = 8;
  std::vector<std::pair<size_t, std::string>> expects;
  std::vector<std::pair<std::string, std::string>> inputs;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string v;
    const std::string &a = args[i];
    FlagMatch fm = matchCompileFlag("kiln run", args, i, copts, &compileOnly);
    if (fm == FlagMatch::No)
      fm = matchCheckFlag("kiln run", args, i, checks);
    if (fm == FlagMatch::Bad)
      return 2;
    if (fm == FlagMatch::Taken)
      continue;
    if (a == "--help" || a == "-h") {
      printRunUsage(stdout);
      return 0;
    } else if (matchFlag(args, i, "--input", v)) {
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) {
        std::fprintf(stderr, "kiln run: error: --input expects NAME=FILE.npy, got '%s'\n",
                     v.c_str());
        return 2;
      }
      std::string name = v.substr(0, eq);
      if (name[0] == '%')
        name.erase(0, 1);
      inputs.emplace_back(name, v.substr(eq + 1));
    } else if (matchFlag(args, i, "--expect", v)) {
      size_t eq = v.find('=');
      char *end = nullptr;
      unsigned long k = eq == std::string::npos ? 0 : std::strtoul(v.c_str(), &end, 10);
      if (eq == std::string::npos || end != v.c_str() + eq || eq + 1 == v.size()) {
        std::fprintf(stderr, "kiln run: error: --expect expects K=FILE.npy, got '%s'\n", v.c_str());
        return 2;
      }
      expects.emplace_back(k, v.substr(eq + 1));
    } else if (matchFlag(args, i, "--graph", v)) {
      graphName = v;
    } else if (matchFlag(args, i, "--data", v)) {
      dataDir = v;
    } else if (a == "--compile") {
      compiled = true;
    } else if (a.rfind("--codegen=", 0) == 0) {
      if (a != "--codegen=mlir" && a != "--codegen=kiln") {
        std::fprintf(stderr, "kiln run: error: --codegen expects kiln or mlir, got '%s'\n",
                     a.substr(10).c_str());
        return 2;
      }
      mlirPath = a == "--codegen=mlir";
      compiled = true;
    } else if (matchFlag(args, i, "--target", v)) {
      if (v != "cuda" && v != "cpu") {
        std::fprintf(stderr, "kiln run: error: --target expects cpu or cuda, got '%s'\n",
                     v.c_str());
        return 2;
      }
      cuda = v == "cuda";
      compiled = true; // --target cpu is --compile
    } else if (matchFlag(args, i, "--repeat", v)) {
      int64_t n;
      if (!parseIntArg("kiln run", "--repeat", v, 1, 1000000, n))
        return 2;
      repeat = static_cast<int>(n);
    } else if (matchFlag(args, i, "--output-dir", v)) {
      outDir = v;
    } else if (matchFlag(args, i, "--print-limit", v)) {
      if (!parseIntArg("kiln run", "--print-limit", v, 0, INT64_MAX, printLimit))
        return 2;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "kiln run: error: unknown option '%s'\n", a.c_str());
      printRunUsage(stderr);
      return 2;
    } else if (file.empty()) {
      file = a;
    } else {
      std::fprintf(stderr, "kiln run: error: more than one model file\n");
      return 2;
    }
  }
  if (file.empty()) {
    printRunUsage(stderr);
    return 2;
  }
  const bool isSymbolic = runtime::isSymbolicArtifactFile(file); // compiled per size from it
  if (cuda && (runtime::isArtifactFile(file) || isSymbolic || checks.bisect || checks.each ||
               copts.cpu != "native")) {
    std::fprintf(stderr, "kiln run: error: --target cuda runs a model (.kir or ONNX) on the GPU: "
                         "it takes no artifact, --bisect, --check-each or --cpu\n");
    return 2;
  }
  // --dim is taken (the import binds it); the rest of the compile options
  // are Kiln's code generator's, and the MLIR path runs on one thread.
  codegen::CompileOptions beyondDims = copts;
  beyondDims.dims.clear();
  beyondDims.ranges.clear();
  if (mlirPath && (cuda || runtime::isArtifactFile(file) || isSymbolic || checks.bisect ||
                   checks.each || compileFlagBeyondThreads(beyondDims) ||
                   copts.threads != codegen::CompileOptions{}.threads)) {
    std::fprintf(stderr, "kiln run: error: --codegen=mlir compiles a model (.kir or ONNX) "
                         "through MLIR on one thread: it takes no artifact, --target cuda, "
                         "--bisect, --check-each, --threads or compile options but --dim\n");
    return 2;
  }
#ifndef KILN_HAS_MLIR
  if (mlirPath) {
    std::fprintf(stderr, "kiln run: error: this kiln was built without MLIR (-DKILN_MLIR=OFF)\n");
    return 1;
  }
#endif
  const bool isCudaArtifact = runtime::isCudaArtifactFile(file);
  if (isCudaArtifact && (compiled || compileOnly || checks.bisect || checks.each ||
                         !graphName.empty() || compileFlagBeyondThreads(copts))) {
    std::fprintf(stderr,
                 "kiln run: error: '%s' is a CUDA artifact, which runs on the GPU as compiled: "
                 "it takes none of --compile, --bisect, --check-each, --graph or compile "
                 "options\n",
                 file.c_str());
    return 2;
  }
  if ((compileOnly || checks.bisect || checks.each) && !compiled && !isCudaArtifact &&
      !runtime::isArtifactFile(file) && !isSymbolic) {
    std::fprintf(stderr, "kiln run: error: compile options (--cpu, --threads, --bisect, "
                         "--check-each, ...) need --compile; without it the interpreter runs\n");
    return 2;
  }
  if (checks.bisect && !checks.check && expects.empty()) {
    std::fprintf(stderr, "kiln run: error: --bisect needs --check or --expect\n");
    return 2;
  }

  if (checks.check && dataDir.empty() && expects.empty()) {
    std::fprintf(stderr, "kiln run: error: --check needs --data DIR (with output_K files)\n");
    return 2;
  }
  DiagnosticEngine diag;
  installStderrHandler(diag);
  // An artifact: compiled already; its signature stands in for the graph.
  std::unique_ptr<runtime::Executable> exe;
  std::unique_ptr<codegen::StagedModel> staged; // exe is null when it has stages
  runtime::ArtifactInfo artifact;
  // A size set's members (runtime/artifact/Artifact.h); a lone artifact is
  // a set of one. The inputs pick the member that runs.
  std::vector<runtime::ArtifactSetMember> sizeSet;
  const bool isArtifact = runtime::isArtifactFile(file);
  if (isArtifact) {
    if (!onlyThreadsForArtifact("kiln run", copts, file))
      return 2;
    if (checks.bisect || checks.each || !graphName.empty()) {
      std::fprintf(stderr,
                   "kiln run: error: --bisect, --check-each and --graph need the model; "
                   "'%s' is a compiled artifact\n",
                   file.c_str());
      return 2;
    }
    if (runtime::Status st = runtime::loadArtifactSet(file, sizeSet); !st.ok()) {
      std::fprintf(stderr, "kiln run: error: %s\n", st.error.c_str());
      return 1;
    }
    artifact = sizeSet.front().info;
    compiled = true;
  }
  // A CUDA artifact: loaded on the GPU now (no GPU is an error here); its
  // ports stand in for the graph.
  CudaRun cudaRun; // and --target cuda
  std::vector<std::pair<std::string, std::string>> cudaInputs;
  std::vector<std::string> cudaOutputs;
  if (isCudaArtifact) {
    cudaRun = prepareCudaArtifactRun(file, cudaInputs, cudaOutputs, diag);
    if (!cudaRun.run)
      return 1;
  }
  compiled |= isSymbolic;
  bool isOnnx = isOnnxPath(file);
  if (!isArtifact && !isCudaArtifact && !isOnnx && !isSymbolic && !copts.dims.empty()) {
    std::fprintf(stderr, "kiln run: error: --dim applies to ONNX models; a .kir graph takes its "
                         "symbolic dims from its inputs\n");
    return 2;
  }
  LoadedModel model;
  if (isSymbolic) {
    std::set<std::string> open;
    bool usage = false;
    auto loaded = loadSymbolicForCompile("kiln run", file, graphName, copts, open, usage, diag);
    if (failed(loaded))
      return usage ? 2 : 1;
    model = loaded.take();
  } else if (!isArtifact && !isCudaArtifact) {
    auto loaded = loadModel(file, graphName, dimsAtImport(copts), diag);
    if (failed(loaded) || failed(codegen::checkRanges(*loaded->graph, copts, diag)))
      return 1;
    model = loaded.take();
  }
  Graph *g = model.graph;
  // The names and types inputs are bound by, and outputs printed with.
  std::vector<std::string> inputNames, inputTypes, outputNames;
  std::string graphLabel = isCudaArtifact ? "CUDA artifact '" + file + "'"
                           : isArtifact   ? "artifact '" + file + "'"
                                          : "graph '@" + g->name() + "'";
  if (isCudaArtifact) {
    for (const auto &[name, type] : cudaInputs) {
      inputNames.push_back(name);
      inputTypes.push_back(type);
    }
    outputNames = cudaOutputs;
  } else if (isArtifact) {
    for (const runtime::ArtifactPort &p : artifact.inputs) {
      inputNames.push_back(p.name);
      inputTypes.push_back(runtime::typeString(p.dtype, p.dims) +
                           (sizeSet.size() > 1 ? " or another size of the set (" +
                                                     runtime::setSizesList(sizeSet) + ")"
                                               : ""));
    }
    for (const runtime::ArtifactPort &p : artifact.outputs)
      outputNames.push_back(p.name);
  } else {
    for (const Value *v : g->inputs()) {
      inputNames.push_back(v->name());
      inputTypes.push_back(v->type().str());
    }
    for (const Value *v : g->outputs())
      outputNames.push_back(v->name());
  }
  const unsigned numInputs = static_cast<unsigned>(inputNames.size());

  // Inputs from --data come in graph input order; --input overrides them.
  if (!dataDir.empty()) {
    if (!std::filesystem::is_directory(dataDir)) {
      std::fprintf(stderr, "kiln run: error: --data '%s' is not a folder\n", dataDir.c_str());
      return 1;
    }
    for (unsigned k = 0; k < numInputs; ++k) {
      std::string f = findDataFile(dataDir, "input", k);
      bool given = false;
      for (auto &[name, path] : inputs)
        given |= name == inputNames[k];
      if (!f.empty() && !given)
        inputs.emplace_back(inputNames[k], f);
    }
    if (checks.check)
      for (size_t k = 0; k < outputNames.size(); ++k) {
        std::string f = findDataFile(dataDir, "output", k);
        if (f.empty()) {
          std::fprintf(stderr, "kiln run: error: --check: '%s' has no output_%zu.pb or .npy\n",
                       dataDir.c_str(), k);
          return 1;
        }
        expects.emplace_back(k, f);
      }
  }

  // Bind inputs by name.
  std::map<std::string, std::string> byName;
  for (auto &[name, path] : inputs) {
    if (!byName.emplace(name, path).second) {
      std::fprintf(stderr, "kiln run: error: input '%%%s' is given twice\n", name.c_str());
      return 1;
    }
  }
  std::vector<Tensor> values(numInputs);
  bool ok = true;
  for (unsigned i = 0; i < numInputs; ++i) {
    const std::string &name = inputNames[i];
    auto it = byName.find(name);
    if (it == byName.end()) {
      std::fprintf(stderr, "kiln run: error: missing --input %s=FILE.npy for input %%%s: %s\n",
                   name.c_str(), name.c_str(), inputTypes[i].c_str());
      ok = false;
      continue;
    }
    // A file that cannot be read is reported once (by the reader), and the
    // run stops: the input stays bound, so it is not reported as unknown too.
    auto t = readTensorFile(it->second, diag);
    if (failed(t))
      return 1;
    values[i] = t.take();
    byName.erase(it);
  }
  for (auto &[name, path] : byName) {
    std::string known;
    for (const std::string &n : inputNames)
      known += " %" + n;
    std::fprintf(stderr, "kiln run: error: %s has no input '%%%s' (inputs:%s)\n",
                 graphLabel.c_str(), name.c_str(), known.c_str());
    ok = false;
  }
  if (!ok)
    return 1;

  if (g && !checkInputRanges("kiln run", *g, values, copts.ranges))
    return 1;
  if (isArtifact) {
    const int k = pickSetMember("kiln run", file, sizeSet, values);
    if (k < 0)
      return 1;
    exe = std::move(sizeSet[static_cast<size_t>(k)].exe);
    artifact = sizeSet[static_cast<size_t>(k)].info;
    if (sizeSet.size() > 1)
      std::printf("size: %s (of %zu in the set)\n", sizeSet[static_cast<size_t>(k)].sizes.c_str(),
                  sizeSet.size());
  }

  // The compiled path: bind the graph's symbolic dims from the inputs given,
  // compile once, then run.
  codegen::CompileReport report;
  if (compiled && !isArtifact) {
    if (failed(checkInputs(*g, values, diag)))
      return 1;
    const std::map<std::string, int64_t> importDims = copts.dims;
    bindDimsFromInputs(*g, values, copts.dims);
    // An ONNX model is imported again with those dims, as `kiln compile
    // --dim` imports it: the same graph, so the same compile cache key.
    if (isSymbolic) {
      std::string sizes;
      for (const auto &[name, n] : copts.dims)
        sizes += (sizes.empty() ? "" : ", ") + name + "=" + std::to_string(n);
      std::printf("size: %s (compiled from the symbolic artifact)\n", sizes.c_str());
    }
    if (isOnnx && copts.dims != importDims && !copts.runTimeSizes) {
      auto reloaded = loadModel(file, graphName, dimsAtImport(copts), diag);
      if (failed(reloaded))
        return 1;
      model = reloaded.take();
      g = model.graph;
    }
  }
#ifdef KILN_HAS_MLIR
  // Note [The MLIR CPU path] in codegen/mlir/MlirRun.cpp: the standard
  // pipeline, then MLIR's lowering.
  std::unique_ptr<mlirgen::MlirProgram> mlirProgram;
  if (mlirPath) {
    PassManager pm;
    if (failed(parsePassPipeline(codegen::kDefaultPipeline, pm, diag)) || failed(pm.run(*g, diag)))
      return 1;
    std::optional<CompileProgress> progress(std::in_place, file);
    auto p = mlirgen::MlirProgram::compile(*g, diag);
    progress.reset();
    if (failed(p))
      return 1;
    mlirProgram = p.take();
  }
#else
  const void *mlirProgram = nullptr;
#endif
  if (mlirProgram) {
    // compiled above
  } else if (cuda && !isCudaArtifact) {
    cudaRun = prepareCudaRun(*g, copts, diag);
    if (!cudaRun.run)
      return 1;
  } else if (compiled && !isArtifact) {
    std::optional<CompileProgress> progress(std::in_place, file);
    auto e = codegen::StagedModel::compile(*g, copts, diag, &report);
    progress.reset();
    if (failed(e))
      return 1;
    staged = e.take();
    exe = staged->takeWhole();
    if (!exe)
      std::printf("%s\n", staged->stages().c_str());
  }
  std::vector<std::string> stageLog; // Note [Data-dependent shapes] in codegen/Staged.cpp
  auto runOnce = [&]() -> FailureOr<std::vector<Tensor>> {
#ifdef KILN_HAS_MLIR
    if (mlirProgram)
      return mlirProgram->run(values, diag);
#endif
    if (cudaRun.run)
      return cudaRun.run(values, diag);
    if (staged && !exe)
      return staged->run(values, diag, {copts.threads, false}, &stageLog);
    if (!exe)
      return interpret(*g, values, diag);
    runtime::RunOptions ropts;
    ropts.threads = copts.threads;
    return codegen::runCompiled(*exe, values, diag, ropts);
  };
  std::vector<double> times;
  FailureOr<std::vector<Tensor>> outs = failure();
  // Compiled code: the first run (cold caches, oneDNN's first-call setup,
  // pools being filled) is reported apart, not as the time.
  double firstMs = -1;
  const bool compiledRun = exe || staged || cudaRun.run || mlirProgram;
  if (compiledRun) {
    auto start = std::chrono::steady_clock::now();
    if (failed(runOnce()))
      return 1;
    firstMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  for (int r = 0; r < repeat; ++r) {
    auto start = std::chrono::steady_clock::now();
    outs = runOnce();
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
            .count());
    if (failed(outs))
      return 1;
  }
  std::sort(times.begin(), times.end());
  double ms = times[times.size() / 2];

  for (size_t k = 0; k < outs->size(); ++k) {
    const Tensor &t = (*outs)[k];
    std::printf("output %zu (%%%s): %s = %s\n", k, outputNames[k].c_str(), t.type().str().c_str(),
                previewValues(t, printLimit).c_str());
  }
  const std::string how =
      mlirProgram   ? "MLIR's lowering to loops, " + std::to_string(g->numNodes()) + " nodes"
      : cudaRun.run ? cudaRun.description
      : isArtifact  ? "artifact, " + std::to_string(exe->steps().size()) + " steps"
                    : std::string(exe      ? "compiled"
                                  : staged ? "compiled in stages"
                                           : "reference interpreter") +
                         ", " + std::to_string(g->numNodes()) + " nodes";
  const std::string first = firstMs >= 0 ? ", after a first run of " + formatMs(firstMs) : "";
  if (repeat > 1)
    std::printf("time: %.3f ms (%s, median of %d runs%s)\n", ms, how.c_str(), repeat,
                first.c_str());
  else
    std::printf("time: %.3f ms (%s%s)\n", ms, how.c_str(), first.c_str());
  if (isArtifact)
    std::printf("artifact: %s; --cpu %s (%s), Kiln %s\n", artifact.summary.c_str(),
                artifact.target.requested.c_str(), artifact.target.cpu.c_str(),
                artifact.kilnVersion.c_str());
  else if (exe || (staged && staged->firstStage())) {
    const codegen::MemoryReport &m = report.memory;
    std::printf("compile: %s%s\n", exe ? "" : "first stage: ", report.summary().c_str());
    std::printf("target: %s\n", report.target.c_str());
    std::printf("memory: arena %llu bytes, lower bound %llu bytes, naive %llu bytes, %d in "
                "place; arena / lower bound = %.3f (plan checked)\n",
                static_cast<unsigned long long>(m.arenaBytes),
                static_cast<unsigned long long>(m.lowerBound),
                static_cast<unsigned long long>(m.naiveBytes), m.inPlace,
                m.lowerBound ? static_cast<double>(m.arenaBytes) / static_cast<double>(m.lowerBound)
                             : 1.0);
  }
  if (isSymbolic)
    std::printf("artifact: %s\n", model.artifactLine.c_str());
  for (const std::string &line : stageLog) // each stage compiled after a data-dependent node
    std::printf("compile: %s\n", line.c_str());

  bool checksOk = true;
  for (auto &[k, path] : expects) {
    if (k >= outs->size()) {
      std::fprintf(stderr, "kiln run: error: --expect %zu: the graph has %zu output(s)\n", k,
                   outs->size());
      return 1;
    }
    auto want = readTensorFile(path, diag);
    if (failed(want))
      return 1;
    const Tensor &got = (*outs)[k];
    if (got.shape() != want->shape()) {
      std::fprintf(stderr, "check output %zu: FAIL: shape %s, expected %s from '%s'\n", k,
                   sizesStr(got.shape()).c_str(), sizesStr(want->shape()).c_str(), path.c_str());
      checksOk = false;
      continue;
    }
    Comparison c = compareTensors(got, *want, checks.tol);
    std::printf("check output %zu: %s\n", k, describe(c, checks.tol).c_str());
    checksOk &= c.ok();
  }
  // Against the interpreter on the same inputs, step by step.
  if (staged && !exe && (checks.each || checks.bisect))
    std::fprintf(stderr, "kiln run: warning: --check-each and --bisect take one executable and "
                         "are not run on a model compiled in stages\n");
  if (exe && g)
    checksOk = bisectIfAsked(*g, values, copts, checks, checksOk,
                             "the reference data (compare with the interpreter: run without "
                             "--compile) or in the whole schedule (memory plan, layouts across "
                             "steps)",
                             diag);

  if (!outDir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(outDir, ec);
    if (ec) {
      std::fprintf(stderr, "kiln run: error: cannot create '%s': %s\n", outDir.c_str(),
                   ec.message().c_str());
      return 1;
    }
    for (size_t k = 0; k < outs->size(); ++k) {
      std::filesystem::path p =
          std::filesystem::path(outDir) / ("output_" + std::to_string(k) + ".npy");
      for (auto &[name, in] : inputs) {
        if (std::filesystem::exists(in) && std::filesystem::equivalent(in, p, ec)) {
          std::fprintf(stderr, "kiln run: error: refusing to overwrite input file '%s'\n",
                       p.c_str());
          return 1;
        }
      }
      if (failed(writeNpy(p.string(), (*outs)[k], diag)))
        return 1;
    }
  }
  return checksOk ? 0 : 1;
}

} // namespace kiln::tools
