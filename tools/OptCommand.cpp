//===- OptCommand.cpp - kiln opt: the pass driver ---------------*- C++ -*-===//
//
// Parses a .kir file, runs a pass pipeline on every graph of every chunk,
// prints the result. With no pipeline it round-trips the text (the canonical
// form). The pipeline is the concatenation, in command-line order, of every
// `--passes=a,b` and every `--<pass-name>` flag (Passes.def). IR dumps,
// statistics and timing go to stderr; the exit status is 1 if any chunk
// failed to parse or any pass failed.
//
//===----------------------------------------------------------------------===//
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "passes/PassManager.h"
#include "tools/Commands.h"

#include <algorithm>
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
    "  -o FILE                write the output to FILE instead of stdout\n"
    "  --no-verify-input      do not run the verifier on the parsed input (for passes that\n"
    "                         repair stale types, e.g. infer-shapes)\n"
    "pass pipeline:\n"
    "  --passes=P1,P2,...     run these passes in order (also --pass-pipeline=)\n"
    "  --PASS                 append one pass (see --list-passes)\n"
    "  --list-passes          list the registered passes and exit\n"
    "  --dump-pass-pipeline   print the pipeline to stderr\n"
    "  --verify-each          verify the IR after every pass (default)\n"
    "  --no-verify-each       do not\n"
    "  --print-ir-before=P1,..  --print-ir-after=P1,..   dump the IR around these passes\n"
    "  --print-ir-before-all  --print-ir-after-all\n"
    "  --print-ir-after-change  dump after passes that changed the graph\n"
    "  --print-ir-after-failure dump after a pass that failed or broke the verifier\n"
    "  --stats                print pass statistics to stderr\n"
    "  --time-passes          print per-pass wall time to stderr\n";

/// Appends the comma-separated names in `list` to `out`.
void appendNames(std::vector<std::string> &out, const std::string &list) {
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos)
      comma = list.size();
    if (comma > pos)
      out.push_back(list.substr(pos, comma - pos));
    pos = comma + 1;
  }
}

void listPasses() {
  size_t width = 0;
  for (const PassInfo &p : registeredPasses())
    width = std::max(width, p.name.size());
  std::fputs("passes:\n", stdout);
  for (const PassInfo &p : registeredPasses())
    std::printf("  %-*s  %s\n", static_cast<int>(width), p.name.c_str(), p.description.c_str());
}

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
  bool split = false, verifyInput = true, dumpPipeline = false, stats = false;
  std::string pipeline;
  PrintOptions popts;
  PassManagerOptions pmOpts;
  auto addToPipeline = [&pipeline](const std::string &p) {
    if (p.empty())
      return;
    pipeline += (pipeline.empty() ? "" : ",") + p;
  };
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
    } else if (a == "--no-verify-input") {
      verifyInput = false;
    } else if (matchFlag(args, i, "--passes", v) || matchFlag(args, i, "--pass-pipeline", v)) {
      if (v.empty() && (a == "--passes" || a == "--pass-pipeline"))
        return 2; // matchFlag reported the missing value
      addToPipeline(v);
    } else if (a == "--list-passes") {
      listPasses();
      return 0;
    } else if (a == "--dump-pass-pipeline") {
      dumpPipeline = true;
    } else if (a == "--verify-each") {
      pmOpts.verifyEach = true;
    } else if (a == "--no-verify-each" || a == "--verify-each=false") {
      pmOpts.verifyEach = false;
    } else if (a == "--print-ir-after-all") {
      pmOpts.printIrAfterAll = true;
    } else if (a == "--print-ir-before-all") {
      pmOpts.printIrBeforeAll = true;
    } else if (a == "--print-ir-after-change") {
      pmOpts.printIrAfterChange = true;
    } else if (a == "--print-ir-after-failure") {
      pmOpts.printIrAfterFailure = true;
    } else if (matchFlag(args, i, "--print-ir-after", v)) {
      appendNames(pmOpts.printIrAfter, v);
    } else if (matchFlag(args, i, "--print-ir-before", v)) {
      appendNames(pmOpts.printIrBefore, v);
    } else if (a == "--stats") {
      stats = true;
    } else if (a == "--time-passes") {
      pmOpts.timePasses = true;
    } else if (a.size() > 2 && a.rfind("--", 0) == 0 && lookupPass(a.substr(2))) {
      addToPipeline(a.substr(2));
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

  // Names given to --print-ir-before/after must be passes too.
  for (const auto *names : {&pmOpts.printIrBefore, &pmOpts.printIrAfter})
    for (const std::string &name : *names)
      if (!lookupPass(name)) {
        std::fprintf(stderr,
                     "kiln opt: error: unknown pass '%s' in --print-ir option; known passes: %s\n",
                     name.c_str(), knownPassNames().c_str());
        return 2;
      }
  pmOpts.printOptions = popts;
  PassManager pm(pmOpts);
  if (failed(parsePassPipeline(pipeline, pm, diag)))
    return 2;
  if (dumpPipeline)
    std::fprintf(stderr, "%s\n", pm.pipelineString().c_str());

  std::string out;
  bool ok = true;
  for (const Chunk &c : splitInput(text, split)) {
    ParseOptions opts;
    opts.filename = input;
    opts.firstLine = c.firstLine;
    opts.verify = verifyInput;
    auto module = parseModule(c.text, diag, opts);
    if (failed(module) || failed(pm.run(**module, diag))) {
      ok = false;
      continue;
    }
    if (!out.empty())
      out += "// -----\n";
    out += printModule(**module, popts);
  }
  if (stats)
    std::fputs(pm.statisticsReport().c_str(), stderr);
  if (pmOpts.timePasses)
    std::fputs(pm.timingReport().c_str(), stderr);
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
