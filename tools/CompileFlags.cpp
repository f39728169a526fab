//===- CompileFlags.cpp - Options shared by the commands that compile -----===//
//
// `kiln compile`, `kiln run --compile`, `kiln bench` and `kiln inspect` take
// the same compile options and the same check tolerances, parsed here once
// so that they cannot drift apart (printCompileFlagsUsage prints their help).
//
//===----------------------------------------------------------------------===//
#include "tools/Commands.h"

#include "codegen/Bisect.h"
#include "codegen/Compiler.h"

#include <cstdio>

namespace kiln::tools {

namespace {

const char kCompileFlagsUsage[] =
    "  --cpu NAME              the CPU to compile for: native (default) or an LLVM x86-64\n"
    "                          name (haswell = AVX2, x86-64-v2, x86-64 = SSE2, ...); sets the\n"
    "                          JIT's features and caps oneDNN's ISA alike\n"
    "  --threads N             threads of the compiled model (default: OpenMP's)\n"
    "  --dim SYM=SIZE          bind symbolic input dim SYM (repeatable)\n"
    "  --dim SYM=LO..HI        the sizes SYM may take: the kernels are compiled once for\n"
    "                          the range (--run-time-sizes; a range of fewer than 4 sizes\n"
    "                          above 1 shares none), inputs outside it are an error; the\n"
    "                          size compiled is SYM's --dim SIZE, else the inputs', else HI\n"
    "  --run-time-sizes        first compile the kernels that can take their sizes at run\n"
    "                          time once, for each symbol over its --dim range, else over\n"
    "                          1..max(1024, its --dim size), then run them at the --dim\n"
    "                          sizes (what kiln::compile does for symbols left open)\n"
    "  --passes=P1,P2          the pipeline before fusion (default: the standard one)\n"
    "  --no-libraries          no oneDNN: conv, matmul, ... run on reference kernels\n"
    "  --no-kernels            no JIT: kernel groups run on reference kernels\n"
    "  --no-fusion             one kernel or library call per node\n"
    "  --no-kernel-sharing     compile each kernel for its own sizes, also those that\n"
    "                          differ from another only in sizes (by default compiled\n"
    "                          once, with run-time sizes)\n"
    "  --dnnl-layout=L         plain, blocked (default) or measure (time both per call)\n"
    "                          activations for convs and pools\n"
    "  --recurrent=R           kiln, onednn or measure (default): who runs LSTM/GRU/RNN layers\n"
    "  --no-cache              compile even when the compile cache has the model (the\n"
    "                          cache: $KILN_CACHE_DIR, else ~/.cache/kiln; KILN_CACHE=off\n"
    "                          disables it; `kiln cache` manages it)\n"
    "  --debug-fault-kernel K  debugging aid: kernel K (a name from --emit=kernels)\n"
    "                          adds 1 to its first output\n";

} // namespace

void printCompileFlagsUsage(std::FILE *f) {
  std::fputs(kCompileFlagsUsage, f);
  std::fprintf(f, "  (the standard pipeline: %s)\n", codegen::kDefaultPipeline);
}

const char kToleranceUsage[] =
    "  --rtol R, --atol A      check tolerance: element i passes when\n"
    "                          |got - want| <= A + R * |want| (default 1e-4 and 1e-4)\n";

namespace {

/// Sets `out` to the value `v` names among `choices`; false, with an error
/// naming `flag` and the choices, for another word.
template <typename T>
bool matchChoice(const char *cmd, const char *flag, const std::string &v,
                 std::initializer_list<std::pair<const char *, T>> choices, T &out) {
  std::string names;
  for (const auto &[name, value] : choices) {
    if (v == name) {
      out = value;
      return true;
    }
    names += names.empty() ? name : std::string(", ") + name;
  }
  std::fprintf(stderr, "%s: error: %s expects one of %s, got '%s'\n", cmd, flag, names.c_str(),
               v.c_str());
  return false;
}

/// `--dim SYM=LO..HI` (0 <= LO <= HI): a range of CompileOptions::ranges,
/// whose kernels then take their sizes at run time (runTimeSizes).
bool parseDimRange(const char *cmd, const std::string &value, codegen::CompileOptions &options) {
  const size_t eq = value.find('='), dots = value.find("..");
  if (eq == std::string::npos || eq == 0 || dots < eq) {
    std::fprintf(stderr, "%s: error: --dim expects SYM=LO..HI, got '%s'\n", cmd, value.c_str());
    return false;
  }
  const std::string sym = value.substr(0, eq);
  const std::string flag = "--dim " + sym;
  int64_t lo, hi;
  if (!parseIntArg(cmd, flag, value.substr(eq + 1, dots - eq - 1), 0, int64_t(1) << 40, lo) ||
      !parseIntArg(cmd, flag, value.substr(dots + 2), 0, int64_t(1) << 40, hi))
    return false;
  if (lo > hi) {
    std::fprintf(stderr, "%s: error: --dim %s: the range is empty (LO..HI needs LO <= HI)\n", cmd,
                 value.c_str());
    return false;
  }
  for (const codegen::SymbolRange &r : options.ranges)
    if (r.name == sym) {
      std::fprintf(stderr, "%s: error: --dim %s=LO..HI is given twice\n", cmd, sym.c_str());
      return false;
    }
  options.ranges.push_back({sym, lo, hi});
  options.runTimeSizes = true;
  return true;
}

/// Whether each --dim SYM=SIZE lies inside SYM's --dim range, if it has
/// one; a usage error naming both otherwise.
bool sizesInsideRanges(const char *cmd, const codegen::CompileOptions &options) {
  for (const codegen::SymbolRange &r : options.ranges) {
    auto size = options.dims.find(r.name);
    if (size != options.dims.end() && (size->second < r.min || size->second > r.max)) {
      std::fprintf(stderr, "%s: error: --dim %s=%lld is outside --dim %s=%lld..%lld\n", cmd,
                   r.name.c_str(), static_cast<long long>(size->second), r.name.c_str(),
                   static_cast<long long>(r.min), static_cast<long long>(r.max));
      return false;
    }
  }
  return true;
}

} // namespace

FlagMatch matchCompileFlag(const char *cmd, const Args &args, size_t &i,
                           codegen::CompileOptions &options, bool *compileOnly) {
  std::string v;
  const std::string &a = args[i];
  auto compileOnlyFlag = [&] {
    if (compileOnly)
      *compileOnly = true;
    return FlagMatch::Taken;
  };
  if (a == "--no-libraries") {
    options.useLibraries = false;
    return compileOnlyFlag();
  }
  if (a == "--no-kernels") {
    options.useKernels = false;
    return compileOnlyFlag();
  }
  if (a == "--no-fusion") {
    options.fuse = false;
    return compileOnlyFlag();
  }
  if (a == "--no-kernel-sharing") {
    options.shareKernels = false;
    return compileOnlyFlag();
  }
  if (a == "--no-cache") {
    options.cache = false;
    return compileOnlyFlag();
  }
  if (a == "--run-time-sizes") {
    options.runTimeSizes = true;
    return compileOnlyFlag();
  }
  if (matchFlag(args, i, "--cpu", v)) {
    if (v.empty()) {
      std::fprintf(stderr, "%s: error: --cpu expects a CPU name (native, haswell, x86-64, ...)\n",
                   cmd);
      return FlagMatch::Bad;
    }
    options.cpu = v;
    return compileOnlyFlag();
  }
  if (matchFlag(args, i, "--threads", v)) {
    int64_t n;
    if (!parseIntArg(cmd, "--threads", v, 1, 4096, n))
      return FlagMatch::Bad;
    options.threads = static_cast<int>(n);
    return compileOnlyFlag();
  }
  if (matchFlag(args, i, "--debug-fault-kernel", v)) {
    if (v.empty()) {
      std::fprintf(stderr, "%s: error: --debug-fault-kernel expects a kernel name\n", cmd);
      return FlagMatch::Bad;
    }
    options.debugFaultKernel = v;
    return compileOnlyFlag();
  }
  if (matchFlag(args, i, "--dim", v)) {
    if (v.find("..") != std::string::npos)
      return parseDimRange(cmd, v, options) && sizesInsideRanges(cmd, options) ? FlagMatch::Taken
                                                                               : FlagMatch::Bad;
    const std::string sym = v.substr(0, v.find('='));
    if (options.dims.count(sym)) {
      std::fprintf(stderr, "%s: error: --dim %s=SIZE is given twice\n", cmd, sym.c_str());
      return FlagMatch::Bad;
    }
    return parseDimArg(cmd, v, options.dims) && sizesInsideRanges(cmd, options) ? FlagMatch::Taken
                                                                                : FlagMatch::Bad;
  }
  if (matchFlag(args, i, "--passes", v)) {
    options.pipeline = v;
    return compileOnlyFlag();
  }
  if (matchFlag(args, i, "--dnnl-layout", v))
    return matchChoice(cmd, "--dnnl-layout", v,
                       {{"plain", codegen::LibraryLayout::Plain},
                        {"blocked", codegen::LibraryLayout::Blocked},
                        {"measure", codegen::LibraryLayout::Measure}},
                       options.dnnlLayout)
               ? compileOnlyFlag()
               : FlagMatch::Bad;
  if (matchFlag(args, i, "--recurrent", v))
    return matchChoice(cmd, "--recurrent", v,
                       {{"kiln", codegen::RecurrentChoice::Kiln},
                        {"onednn", codegen::RecurrentChoice::Library},
                        {"measure", codegen::RecurrentChoice::Measure}},
                       options.recurrent)
               ? compileOnlyFlag()
               : FlagMatch::Bad;
  return FlagMatch::No;
}

const char *compileFlagBeyondThreads(const codegen::CompileOptions &o) {
  const codegen::CompileOptions d;
  if (o.cpu != d.cpu)
    return "--cpu";
  if (!o.dims.empty() || !o.ranges.empty())
    return "--dim";
  if (o.runTimeSizes)
    return "--run-time-sizes";
  if (o.pipeline != d.pipeline)
    return "--passes";
  if (o.useLibraries != d.useLibraries)
    return "--no-libraries";
  if (o.useKernels != d.useKernels)
    return "--no-kernels";
  if (o.fuse != d.fuse)
    return "--no-fusion";
  if (o.shareKernels != d.shareKernels)
    return "--no-kernel-sharing";
  if (o.dnnlLayout != d.dnnlLayout)
    return "--dnnl-layout";
  if (o.recurrent != d.recurrent)
    return "--recurrent";
  if (o.debugFaultKernel != d.debugFaultKernel)
    return "--debug-fault-kernel";
  return nullptr;
}

bool onlyThreadsForArtifact(const char *cmd, const codegen::CompileOptions &options,
                            const std::string &file) {
  const char *flag = compileFlagBeyondThreads(options);
  if (!flag)
    return true;
  std::fprintf(stderr,
               "%s: error: %s does not apply to an artifact: '%s' is compiled already (only "
               "--threads does)\n",
               cmd, flag, file.c_str());
  return false;
}

FlagMatch matchCheckFlag(const char *cmd, const Args &args, size_t &i, CheckFlags &flags) {
  const std::string &a = args[i];
  if (a == "--check")
    flags.check = true;
  else if (a == "--bisect")
    flags.bisect = true;
  else if (a == "--check-each")
    flags.each = true;
  else
    return matchToleranceFlag(cmd, args, i, flags.tol);
  return FlagMatch::Taken;
}

bool bisectIfAsked(const Graph &g, std::span<const Tensor> inputs,
                   const codegen::CompileOptions &options, const CheckFlags &flags, bool outputsOk,
                   const char *hint, DiagnosticEngine &diag) {
  if (!flags.each && !(flags.bisect && !outputsOk))
    return outputsOk;
  auto steps = codegen::bisect(g, inputs, options, flags.tol, flags.each, diag);
  if (failed(steps))
    return false;
  std::printf("%s", steps->str(flags.each).c_str());
  if (!outputsOk && steps->firstBad < 0)
    std::printf("bisect: every step matches the interpreter alone, so the difference is in %s\n",
                hint);
  return outputsOk && steps->firstBad < 0;
}

FlagMatch matchToleranceFlag(const char *cmd, const Args &args, size_t &i, Tolerance &tol) {
  std::string v;
  if (matchFlag(args, i, "--rtol", v))
    return parseDoubleArg(cmd, "--rtol", v, 0, tol.rtol) ? FlagMatch::Taken : FlagMatch::Bad;
  if (matchFlag(args, i, "--atol", v))
    return parseDoubleArg(cmd, "--atol", v, 0, tol.atol) ? FlagMatch::Taken : FlagMatch::Bad;
  return FlagMatch::No;
}

} // namespace kiln::tools
