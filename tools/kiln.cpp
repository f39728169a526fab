//===- kiln.cpp - The kiln command-line driver ------------------*- C++ -*-===//
//
//   kiln opt FILE.kir [--passes=a,b] ...     run passes, print the IR
//   kiln run FILE.kir --input NAME=F.npy ... run on the interpreter
//   kiln ops                                 print the op table
//   kiln import MODEL.onnx -o OUT.kir        import an ONNX model
//   kiln compile FILE.kir [--explain-fusion] compile for this CPU
//
//===----------------------------------------------------------------------===//
#include "tools/Commands.h"

#include <cstdio>
#include <cstring>

namespace kiln::tools {

bool matchFlag(const Args &args, size_t &i, std::string_view name, std::string &value) {
  const std::string &a = args[i];
  if (a.size() > name.size() && a.compare(0, name.size(), name) == 0 && a[name.size()] == '=') {
    value = a.substr(name.size() + 1);
    return true;
  }
  if (a == name) {
    if (i + 1 >= args.size()) {
      std::fprintf(stderr, "kiln: error: %s needs a value\n", std::string(name).c_str());
      value.clear();
      return true;
    }
    value = args[++i];
    return true;
  }
  return false;
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
    "  compile MODEL [--explain-fusion] ...      compile for this CPU (JIT, oneDNN)\n"
    "\n"
    "`kiln <command> --help` describes each command's options.\n";
} // namespace

int main(int argc, char **argv) {
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
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::fprintf(stderr, "kiln: error: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}
