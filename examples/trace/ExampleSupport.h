//===- ExampleSupport.h - Shared tail of the tracing examples ---*- C++ -*-===//
//
// What both examples do once they have a model and its traced graph: verify
// the graph, print its IR (or write it to the .kir file given with -o), run
// it on the reference interpreter, compare with eager, and time both.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Interpreter.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "kiln/Trace.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>

namespace example {

/// Milliseconds per call of `fn`, the best of `reps` calls.
inline double bestMs(int reps, const std::function<void()> &fn) {
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    auto start = std::chrono::steady_clock::now();
    fn();
    std::chrono::duration<double, std::milli> ms = std::chrono::steady_clock::now() - start;
    best = std::min(best, ms.count());
  }
  return best;
}

/// Usage: NAME [-o FILE.kir] [--reps N]. Returns the process exit status.
inline int finish(const char *name, int argc, char **argv, const kiln::Graph &graph,
                  const std::vector<kiln::Tensor> &inputs, const kiln::Tensor &eagerOut,
                  const std::function<kiln::Tensor()> &runEager) {
  std::string outPath;
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-o") && i + 1 < argc) {
      outPath = argv[++i];
    } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [-o FILE.kir] [--reps N]\n", name);
      return 2;
    }
  }

  kiln::DiagnosticEngine diag;
  kiln::installStderrHandler(diag);
  if (kiln::failed(kiln::verify(graph, diag)))
    return 1;
  std::printf("%s: traced %zu nodes; the graph verifies\n", name, graph.numNodes());

  if (outPath.empty()) {
    std::printf("%s", kiln::printGraph(graph, {.printLocs = true, .elideBlobs = true}).c_str());
  } else {
    std::ofstream out(outPath, std::ios::binary);
    out << kiln::printGraph(graph, {.printLocs = true});
    if (!out) {
      std::fprintf(stderr, "%s: error: cannot write '%s'\n", name, outPath.c_str());
      return 1;
    }
    std::printf("%s: wrote the IR (with locations and weights) to %s\n", name, outPath.c_str());
  }

  auto traced = kiln::interpret(graph, inputs, diag);
  if (kiln::failed(traced))
    return 1;
  double diff = kiln::maxAbsDiff(eagerOut, (*traced)[0]);
  bool same = kiln::allClose(eagerOut, (*traced)[0]);
  std::printf("%s: traced graph vs eager: max abs diff %g (%s)\n", name, diff,
              same ? "match" : "MISMATCH");

  double eagerMs = bestMs(reps, [&] { (void)runEager(); });
  double graphMs = bestMs(reps, [&] { (void)kiln::interpret(graph, inputs, diag); });
  std::printf("%s: eager %.3f ms, traced graph on the reference interpreter %.3f ms "
              "(best of %d)\n",
              name, eagerMs, graphMs, reps);
  std::printf("%s: note: both run the reference kernels; to compile the graph, write it with "
              "-o and run `kiln run FILE.kir --compile`, or call kiln::compile (kiln/kiln.h, "
              "examples/embed)\n",
              name);
  return same ? 0 : 1;
}

} // namespace example
