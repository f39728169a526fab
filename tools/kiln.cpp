//===- kiln.cpp - The kiln command-line driver ------------------*- C++ -*-===//
//
//   kiln opt FILE.kir [--passes=a,b] ...     run passes, print the IR
//   kiln run FILE.kir --input NAME=F.npy ... run on the interpreter
//   kiln ops                                 print the op table
//   kiln import MODEL.onnx -o OUT.kir        import an ONNX model
//   kiln compile FILE.kir [-o OUT.kiln]      compile for this CPU
//   kiln --version                           versions of Kiln, LLVM, oneDNN
//
// Exit status, every command: 0 success, 1 a model or data error (bad
// input, a failed check), 2 bad usage.
//
//===----------------------------------------------------------------------===//
#include "codegen/cpu/CpuJit.h"
#include "runtime/artifact/Artifact.h"
#include "runtime/dnnl/DnnlSteps.h"
#include "tools/Commands.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <malloc.h>
#include <new>

namespace kiln::tools {

bool matchFlag(const Args &args, size_t &i, std::string_view name, std::string &value) {
  const std::string &a = args[i];
  if (a.size() > name.size() && a.compare(0, name.size(), name) == 0 && a[name.size()] == '=') {
    value = a.substr(name.size() + 1);
    return true;
  }
  if (a == name) {
    if (i + 1 >= args.size()) {
      // A usage error, whatever the command: exit here so that no caller
      // goes on with an empty value.
      std::fprintf(stderr, "kiln: error: %s needs a value\n", std::string(name).c_str());
      std::exit(2);
    }
    value = args[++i];
    return true;
  }
  return false;
}

bool parseIntArg(const char *cmd, std::string_view flag, const std::string &value, int64_t lo,
                 int64_t hi, int64_t &out) {
  errno = 0;
  char *end = nullptr;
  long long n = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end || errno == ERANGE || n < lo || n > hi) {
    std::fprintf(stderr, "%s: error: %s expects an integer from %lld to %lld, got '%s'\n", cmd,
                 std::string(flag).c_str(), static_cast<long long>(lo), static_cast<long long>(hi),
                 value.c_str());
    return false;
  }
  out = n;
  return true;
}

bool parseDoubleArg(const char *cmd, std::string_view flag, const std::string &value, double lo,
                    double &out) {
  errno = 0;
  char *end = nullptr;
  double d = std::strtod(value.c_str(), &end);
  if (value.empty() || *end || errno == ERANGE || !std::isfinite(d) || d < lo) {
    std::fprintf(stderr, "%s: error: %s expects a number >= %g, got '%s'\n", cmd,
                 std::string(flag).c_str(), lo, value.c_str());
    return false;
  }
  out = d;
  return true;
}

bool parseDimArg(const char *cmd, const std::string &value, std::map<std::string, int64_t> &dims) {
  size_t eq = value.find('=');
  int64_t n;
  if (eq == std::string::npos || eq == 0) {
    std::fprintf(stderr, "%s: error: --dim expects SYM=SIZE, got '%s'\n", cmd, value.c_str());
    return false;
  }
  if (!parseIntArg(cmd, "--dim " + value.substr(0, eq), value.substr(eq + 1), 0, int64_t(1) << 40,
                   n))
    return false;
  dims[value.substr(0, eq)] = n;
  return true;
}

} // namespace kiln::tools

namespace {
const char kUsage[] =
    "usage: kiln <command> [options]\n"
    "\n"
    "commands:\n"
    "  opt FILE.kir [--passes=P1,P2] [options]   run passes and print the IR\n"
    "  run MODEL [--input NAME=FILE] [--data D]  run a model (interpreter, or --compile)\n"
    "  ops                                       print the op table (Markdown)\n"
    "  import MODEL.onnx [-o OUT.kir]            import an ONNX model to IR text\n"
    "  compile MODEL [-o OUT.kiln] ...           compile for this CPU (JIT, oneDNN); -o saves\n"
    "                                            an artifact that run, bench and inspect take\n"
    "  bench MODEL [--data D] [--threads N]      time the compiled model (median, spread)\n"
    "  inspect MODEL [--buffers]                 summarize a model and its compiled form\n"
    "  cache path|stats|clear                    the compile cache of compiled models\n"
    "  translate MODEL [--emit=mlir] [-o OUT]    write the graph as an MLIR 16 module\n"
    "  --version                                 print the versions of Kiln, LLVM and oneDNN\n"
    "\n"
    "`kiln <command> --help` describes each command's options.\n"
    "exit status: 0 success, 1 model or data error (bad input, failed check), 2 bad usage\n";
} // namespace

static int dispatch(int argc, char **argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  std::string cmd = argv[1];
  kiln::tools::Args args(argv + 2, argv + argc);
  if (cmd == "opt")
    return kiln::tools::optCommand(args);
  if (cmd == "run")
    return kiln::tools::runCommand(args);
  if (cmd == "ops")
    return kiln::tools::opsCommand(args);
  if (cmd == "compile")
    return kiln::tools::compileCommand(args);
  if (cmd == "import")
    return kiln::tools::importCommand(args);
  if (cmd == "translate")
    return kiln::tools::translateCommand(args);
  if (cmd == "bench")
    return kiln::tools::benchCommand(args);
  if (cmd == "inspect")
    return kiln::tools::inspectCommand(args);
  if (cmd == "cache")
    return kiln::tools::cacheCommand(args);
  if (cmd == "--version") {
    std::printf("kiln %s (LLVM %s, %s)\n", kiln::runtime::kilnVersion(),
                kiln::codegen::cpu::llvmVersion().c_str(),
                kiln::runtime::onednn::version().c_str());
    return 0;
  }
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::fprintf(stderr, "kiln: error: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}

int main(int argc, char **argv) {
  // Blocks of 1 MiB and more are mapped and unmapped, not kept in the heap:
  // a model's weights are converted one by one while their protobuf copies
  // are freed, and with glibc's dynamic threshold the freed blocks would
  // stay resident (the peak then holds the weights twice). Steady-state
  // runs allocate nothing large (arenas and output blocks are pooled).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  // Library code reports errors as diagnostics; what remains is running out
  // of memory (a model or tensor too large for this machine) or a third-party
  // library's exception: report it as an error, never a crash.
  try {
    return dispatch(argc, argv);
  } catch (const std::bad_alloc &) {
    std::fprintf(stderr, "kiln: error: out of memory\n");
  } catch (const std::exception &e) {
    std::fprintf(stderr, "kiln: error: %s\n", e.what());
  }
  return 1;
}
