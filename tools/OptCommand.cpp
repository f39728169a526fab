//===- OptCommand.cpp - kiln opt: the pass driver ---------------*- C++ -*-===//
//
// Parses a .kir file, runs a pass pipeline on every graph, prints the
// result. With no pipeline it round-trips the text (the canonical form).
//
//===----------------------------------------------------------------------===//
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "tools/Commands.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

namespace kiln::tools {
namespace {

const char kOptUsage[] =
    "usage: kiln opt FILE.kir [options]     (FILE may be - for stdin)\n"
    "  --split-input-file     treat '// -----' lines as separators of independent inputs\n"
    "  --print-locs           print node locations\n"
    "  --elide-blobs          do not print blob contents\n"
    "  -o FILE                write the output to FILE instead of stdout\n";

struct Chunk {
  std::string text;
  unsigned firstLine;
};

std::vector<Chunk> splitInput(const std::string &text, bool split) {
  std::vector<Chunk> chunks;
  if (!split)
    return {Chunk{text, 1}};
  std::istringstream in(text);
  std::string line, cur;
  unsigned lineNo = 0, start = 1;
  while (std::getline(in, line)) {
    ++lineNo;
    if (line.rfind("// -----", 0) == 0) {
      chunks.push_back(Chunk{cur, start});
      cur.clear();
      start = lineNo + 1;
      continue;
    }
    cur += line + "\n";
  }
  chunks.push_back(Chunk{cur, start});
  return chunks;
}

} // namespace

int optCommand(const Args &args) {
  std::string input, output;
  bool split = false;
  PrintOptions popts;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string v;
    const std::string &a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kOptUsage, stdout);
      return 0;
    } else if (a == "--split-input-file") {
      split = true;
    } else if (a == "--print-locs") {
      popts.printLocs = true;
    } else if (a == "--elide-blobs") {
      popts.elideBlobs = true;
    } else if (matchFlag(args, i, "-o", v)) {
      output = v;
    } else if (!a.empty() && a[0] == '-' && a != "-") {
      std::fprintf(stderr, "kiln opt: error: unknown option '%s'\n%s", a.c_str(), kOptUsage);
      return 2;
    } else if (input.empty()) {
      input = a;
    } else {
      std::fprintf(stderr, "kiln opt: error: more than one input file\n");
      return 2;
    }
  }
  if (input.empty()) {
    std::fputs(kOptUsage, stderr);
    return 2;
  }
  std::string text;
  if (input == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    text = ss.str();
    input = "<stdin>";
  } else {
    std::ifstream in(input, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "kiln opt: error: cannot open '%s'\n", input.c_str());
      return 1;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  DiagnosticEngine diag;
  diag.addSourceFile(input, text);
  installStderrHandler(diag);

  std::string out;
  bool ok = true;
  for (const Chunk &c : splitInput(text, split)) {
    ParseOptions opts;
    opts.filename = input;
    opts.firstLine = c.firstLine;
    auto module = parseModule(c.text, diag, opts);
    if (failed(module)) {
      ok = false;
      continue;
    }
    if (!out.empty())
      out += "// -----\n";
    out += printModule(**module, popts);
  }
  if (!output.empty()) {
    std::ofstream o(output, std::ios::binary);
    if (!o) {
      std::fprintf(stderr, "kiln opt: error: cannot write '%s'\n", output.c_str());
      return 1;
    }
    o << out;
  } else {
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  return ok ? 0 : 1;
}

} // namespace kiln::tools
