//===- TranslateCommand.cpp - kiln translate: graphs to MLIR ----*- C++ -*-===//
//
//   kiln translate MODEL [--emit=mlir] [-o OUT.mlir] [options]
//
// Writes a model's graph, after the standard pipeline (or --passes), as an
// MLIR 16 module in upstream dialects (codegen/mlir/MlirExport.h), checked
// by MLIR's verifier. Names on stderr the ops written as `@kiln.<op>` calls
// (no upstream form). A Kiln built without MLIR (-DKILN_MLIR=OFF) says so.
//
//===----------------------------------------------------------------------===//
#include "codegen/Compiler.h"
#include "passes/PassManager.h"
#include "tools/Commands.h"

#ifdef KILN_HAS_MLIR
#include "codegen/mlir/MlirExport.h"
#endif

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace kiln::tools {
namespace {

const char kTranslateUsage[] =
    "usage: kiln translate MODEL [--emit=mlir] [-o OUT.mlir] [options]\n"
    "  MODEL                   an ONNX model or a .kir file\n"
    "  --emit=mlir             an MLIR 16 module: func, tensor, arith, math and linalg (the\n"
    "                          default and only form); ops without an upstream form are\n"
    "                          calls of `@kiln.<op>`, listed on stderr\n"
    "  -o FILE                 write to FILE (default: stdout)\n"
    "  --graph NAME            the graph of a .kir file to write (default: the first)\n"
    "  --dim NAME=N            bind a symbolic dim (repeatable); unbound ones stay dynamic\n"
    "  --passes=LIST           the passes to run first (default: the standard pipeline;\n"
    "                          --passes= with nothing writes the graph as imported)\n"
    "  --inline-elements N     constants of at most N elements print inline (default 16);\n"
    "                          larger ones are dense_resource blobs\n"
    "  --print-locs            print each op's location (the node's ONNX name or file:line)\n";

} // namespace

int translateCommand(const Args &args) {
  std::string file, out, graphName, emit = "mlir";
  std::string pipeline = codegen::kDefaultPipeline;
  std::map<std::string, int64_t> dims;
  int64_t inlineElements = 16;
  bool printLocs = false;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string v;
    const std::string &a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kTranslateUsage, stdout);
      return 0;
    } else if (a.rfind("--emit=", 0) == 0) {
      emit = a.substr(7);
    } else if (matchFlag(args, i, "-o", v)) {
      if (v.empty())
        return 2;
      out = v;
    } else if (matchFlag(args, i, "--graph", v)) {
      if (v.empty())
        return 2;
      graphName = v;
    } else if (matchFlag(args, i, "--dim", v)) {
      if (v.empty() || !parseDimArg("kiln translate", v, dims))
        return 2;
    } else if (a.rfind("--passes=", 0) == 0) {
      pipeline = a.substr(9);
    } else if (matchFlag(args, i, "--inline-elements", v)) {
      if (!parseIntArg("kiln translate", "--inline-elements", v, 0, int64_t(1) << 40,
                       inlineElements))
        return 2;
    } else if (a == "--print-locs") {
      printLocs = true;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "kiln translate: error: unknown option '%s'\n%s", a.c_str(),
                   kTranslateUsage);
      return 2;
    } else if (file.empty()) {
      file = a;
    } else {
      std::fprintf(stderr, "kiln translate: error: more than one model file\n");
      return 2;
    }
  }
  if (file.empty()) {
    std::fputs(kTranslateUsage, stderr);
    return 2;
  }
  if (emit != "mlir") {
    std::fprintf(stderr, "kiln translate: error: --emit expects mlir, got '%s'\n", emit.c_str());
    return 2;
  }
  std::error_code ec;
  if (!out.empty() && std::filesystem::equivalent(file, out, ec)) {
    std::fprintf(stderr, "kiln translate: error: -o '%s' is the model itself\n", out.c_str());
    return 2;
  }
#ifndef KILN_HAS_MLIR
  (void)inlineElements;
  (void)printLocs;
  std::fprintf(stderr, "kiln translate: error: this kiln was built without MLIR (-DKILN_MLIR=OFF; "
                       "install libmlir-16-dev and configure with -DKILN_MLIR=ON)\n");
  return 1;
#else
  DiagnosticEngine diag;
  installStderrHandler(diag);
  auto model = loadModel(file, graphName, dims, diag);
  if (failed(model))
    return 1;
  PassManager pm;
  if (failed(parsePassPipeline(pipeline, pm, diag)))
    return 2;
  if (failed(pm.run(*model->graph, diag)))
    return 1;
  mlirgen::MlirExportOptions options;
  options.inlineElements = inlineElements;
  options.printLocs = printLocs;
  auto mlir = mlirgen::exportMlir(*model->graph, options, diag);
  if (failed(mlir))
    return 1;
  // The text as printed parses and verifies again (in process, libMLIR).
  if (failed(mlirgen::verifyMlir(mlir->text, out.empty() ? "<stdout>" : out, diag)))
    return 1;
  if (!mlir->calls.empty()) {
    std::string names;
    for (const std::string &c : mlir->calls)
      names += (names.empty() ? "" : ", ") + c;
    std::fprintf(stderr, "kiln translate: written as calls of @kiln.<op> (no upstream form): %s\n",
                 names.c_str());
  }
  if (out.empty()) {
    std::fwrite(mlir->text.data(), 1, mlir->text.size(), stdout);
    return 0;
  }
  std::ofstream os(out, std::ios::binary);
  os << mlir->text;
  os.close();
  if (!os) {
    std::fprintf(stderr, "kiln translate: error: cannot write '%s'\n", out.c_str());
    return 1;
  }
  return 0;
#endif
}

} // namespace kiln::tools
