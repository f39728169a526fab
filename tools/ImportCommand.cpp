//===- ImportCommand.cpp - kiln import: ONNX to .kir ------------*- C++ -*-===//
//
//   kiln import MODEL.onnx [-o OUT.kir] [--dim NAME=N ...] [options]
//
// Imports an ONNX model (frontend/onnx) and prints its graph in the text
// form, with the weights in the blobs section, to OUT.kir or stdout.
//
//===----------------------------------------------------------------------===//
#include "frontend/onnx/OnnxImporter.h"
#include "ir/Printer.h"
#include "tools/Commands.h"

#include <charconv>
#include <cstdio>
#include <fstream>

namespace kiln::tools {
namespace {

const char kImportUsage[] =
    "usage: kiln import MODEL.onnx [-o OUT.kir] [options]\n"
    "  -o FILE                 write the IR to FILE (default: stdout)\n"
    "  --dim NAME=N            make the dynamic dim NAME (an ONNX dim_param) static (repeatable)\n"
    "  --dynamic-dims=MODE     unbound dynamic dims: symbolic (default: dim_param names become\n"
    "                          symbols), anonymous (all become '?'), error\n"
    "  --fold-limit N          evaluate all-constant nodes with at most N result elements at\n"
    "                          import time (default 1048576; 0 disables)\n"
    "  --keep-dead-nodes       keep nodes whose results are unused\n"
    "  --print-locs            print each node's location (ONNX node name)\n"
    "  --elide-blobs           print blob references without their bytes (does not parse back)\n";

} // namespace

int importCommand(const Args &args) {
  std::string file, out;
  OnnxImportOptions opts;
  PrintOptions printOpts;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string v;
    const std::string &a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kImportUsage, stdout);
      return 0;
    } else if (matchFlag(args, i, "-o", v)) {
      if (v.empty())
        return 2;
      out = v;
    } else if (matchFlag(args, i, "--dim", v)) {
      size_t eq = v.find('=');
      int64_t size = -1;
      const char *end = v.data() + v.size();
      auto r = eq == std::string::npos ? std::from_chars_result{end, std::errc::invalid_argument}
                                       : std::from_chars(v.data() + eq + 1, end, size);
      if (eq == 0 || eq == std::string::npos || r.ec != std::errc() || r.ptr != end || size < 0) {
        std::fprintf(stderr, "kiln import: error: --dim expects NAME=SIZE, got '%s'\n", v.c_str());
        return 2;
      }
      opts.dimBindings[v.substr(0, eq)] = size;
    } else if (matchFlag(args, i, "--dynamic-dims", v)) {
      if (v == "symbolic")
        opts.dynamicDims = OnnxDynamicDims::Symbolic;
      else if (v == "anonymous")
        opts.dynamicDims = OnnxDynamicDims::Anonymous;
      else if (v == "error")
        opts.dynamicDims = OnnxDynamicDims::Error;
      else {
        std::fprintf(stderr,
                     "kiln import: error: --dynamic-dims expects symbolic, anonymous or error, "
                     "got '%s'\n",
                     v.c_str());
        return 2;
      }
    } else if (matchFlag(args, i, "--fold-limit", v)) {
      const char *end = v.data() + v.size();
      auto r = std::from_chars(v.data(), end, opts.foldElementLimit);
      if (v.empty() || r.ec != std::errc() || r.ptr != end || opts.foldElementLimit < 0) {
        std::fprintf(stderr, "kiln import: error: --fold-limit expects a count, got '%s'\n",
                     v.c_str());
        return 2;
      }
    } else if (a == "--keep-dead-nodes") {
      opts.removeDeadNodes = false;
    } else if (a == "--print-locs") {
      printOpts.printLocs = true;
    } else if (a == "--elide-blobs") {
      printOpts.elideBlobs = true;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "kiln import: error: unknown option '%s'\n%s", a.c_str(), kImportUsage);
      return 2;
    } else if (file.empty()) {
      file = a;
    } else {
      std::fprintf(stderr, "kiln import: error: more than one model file\n");
      return 2;
    }
  }
  if (file.empty()) {
    std::fputs(kImportUsage, stderr);
    return 2;
  }

  DiagnosticEngine diag;
  installStderrHandler(diag);
  auto module = importOnnx(file, diag, opts);
  if (failed(module))
    return 1;
  std::string text = printModule(**module, printOpts);
  if (out.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  std::ofstream os(out, std::ios::binary);
  os << text;
  os.close();
  if (!os) {
    std::fprintf(stderr, "kiln import: error: cannot write '%s'\n", out.c_str());
    return 1;
  }
  return 0;
}

} // namespace kiln::tools
