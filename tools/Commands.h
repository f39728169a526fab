//===- Commands.h - The subcommands of the kiln CLI -------------*- C++ -*-===//
//
// Each subcommand is a function taking the arguments after its name and
// returning the process exit status: 0 on success, 1 on a user error (bad
// input, failed check), 2 on bad usage.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/Compiler.h"
#include "ir/Compare.h"
#include "ir/Graph.h"
#include "runtime/artifact/Artifact.h"

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::tools {

using Args = std::vector<std::string>;

int compileCommand(const Args &args);
int importCommand(const Args &args);
int optCommand(const Args &args);
int runCommand(const Args &args);
int opsCommand(const Args &args);
int benchCommand(const Args &args);
int inspectCommand(const Args &args);
int cacheCommand(const Args &args);
int translateCommand(const Args &args);

/// A model read for a command, and the graph to work on.
struct LoadedModel {
  std::unique_ptr<Module> module;
  Graph *graph = nullptr;
  /// For a symbolic artifact (loadSymbolicForCompile): what it holds, for
  /// the report ("symbolic artifact: ...").
  std::string artifactLine;
};

/// Reads a .kir file or an ONNX model (by extension; `onnxDims` binds the
/// model's symbolic dims), and picks the graph named `graphName` (empty:
/// the first). Errors are reported to `diag`.
FailureOr<LoadedModel> loadModel(const std::string &path, const std::string &graphName,
                                 const std::map<std::string, int64_t> &onnxDims,
                                 DiagnosticEngine &diag);
/// The dims to bind when importing a model compiled with `o`: its --dim
/// sizes, or none with --run-time-sizes (the compile binds them, after
/// compiling the kernels with run-time sizes from the unbound graph).
inline std::map<std::string, int64_t> dimsAtImport(const codegen::CompileOptions &o) {
  return o.runTimeSizes ? std::map<std::string, int64_t>{} : o.dims;
}

/// Note [Symbolic without --dim]
/// A model whose input dims have symbols that no --dim names is compiled
/// symbolic, not at a silent size: each such symbol gets the range
/// 1..codegen::kDefaultSharedMax, cut to where the graph's assumptions hold
/// (codegen::assumedMax: `seq == min(seq,64)` of a model with 64 positions
/// gives 1..64); its kernels take their sizes at run time, compiled once,
/// and the compile and inspect reports are at 1, which the report says. `kiln bench` and `kiln run`
/// take their sizes from their inputs instead; `-o` writes a symbolic artifact over the ranges.
///
/// loadModel for a command that compiles with `options`: the symbols left
/// open (in `open`) get the default range in options.ranges, and
/// options.runTimeSizes is set. An ONNX model imported with some --dim bound
/// is imported again unbound then (run-time sizes bind at compile time).
FailureOr<LoadedModel> loadForCompile(const std::string &path, const std::string &graphName,
                                      codegen::CompileOptions &options, std::set<std::string> &open,
                                      DiagnosticEngine &diag);

/// A symbolic artifact (Note [Symbolic artifacts] in
/// codegen/SymbolicArtifact.cpp) as a model to compile for the sizes a
/// command meets: its graph, `options` as it was compiled (with the
/// --threads given, and each --dim SYM=N given as a fixed size, which must
/// lie in its range) and `open` its symbols no --dim named. Any other
/// compile option given, or --graph (`graphName`), is an error from `cmd`
/// (exit 2: `usage`).
FailureOr<LoadedModel> loadSymbolicForCompile(const char *cmd, const std::string &path,
                                              const std::string &graphName,
                                              codegen::CompileOptions &options,
                                              std::set<std::string> &open, bool &usage,
                                              DiagnosticEngine &diag);

/// "N in 1..1024, seq in 1..64": the ranges of the symbols in `open` (the
/// ones no --dim names, Note [Symbolic without --dim]).
std::string openRangesStr(const std::vector<codegen::SymbolRange> &ranges,
                          const std::set<std::string> &open);

/// Reads a tensor file by extension: ONNX TensorProto for .pb, else .npy.
FailureOr<Tensor> readTensorFile(const std::string &path, DiagnosticEngine &diag);
/// The member of a loaded size set (runtime/artifact/Artifact.h) whose
/// inputs have `inputs`' shapes: for a lone artifact always it (its run
/// reports a wrong input); for a set, -1 with one error on stderr, from
/// `cmd`, naming `file`, the inputs and the sizes the set has.
int pickSetMember(const char *cmd, const std::string &file,
                  std::span<const runtime::ArtifactSetMember> set, std::span<const Tensor> inputs);
/// DIR/stem_K.pb, else DIR/stem_K.npy; empty when neither exists.
std::string findDataFile(const std::string &dir, const std::string &stem, size_t k);
/// Random inputs for `g`: floats uniform in [-1, 1], integers in [0, 4),
/// bools; symbolic dims from `dims` (else 1).
std::vector<Tensor> randomInputs(const Graph &g, const std::map<std::string, int64_t> &dims,
                                 unsigned seed);
/// For a command that compiles `g` at one size to report on it (inspect,
/// bench): binds every symbol of the input dims that `dims` lacks to the
/// largest size of its range in `ranges` (the smallest for a symbol in
/// `open`, Note [Symbolic without --dim]), else to 1, and returns every size
/// of `dims` as the report's line ("batch=64, seq=1 (batch: the largest of
/// --dim batch=1..64; symbols not given are 1; give --dim seq=N for other
/// sizes)"); empty when there are none. For a symbolic artifact
/// (`fromArtifact`) the ranges are the artifact's, and only --dim SYM=N
/// picks another size.
std::string bindSymbolsForReport(const Graph &g, std::map<std::string, int64_t> &dims,
                                 const std::vector<codegen::SymbolRange> &ranges = {},
                                 const std::set<std::string> &open = {}, bool fromArtifact = false);
/// False, with one error on stderr from `cmd` naming the input, its dim,
/// the symbol and the range, when an input tensor's size of a symbolic dim
/// is outside that symbol's range in `ranges` (`--dim SYM=LO..HI`).
bool checkInputRanges(const char *cmd, const Graph &g, std::span<const Tensor> inputs,
                      const std::vector<codegen::SymbolRange> &ranges);
/// Binds each symbol of `g`'s input dims that `dims` lacks to the size the
/// input tensor gives it (an input of another rank is skipped: the compile
/// names the mismatch).
void bindDimsFromInputs(const Graph &g, std::span<const Tensor> inputs,
                        std::map<std::string, int64_t> &dims);
/// Random tensors of the given types, as randomInputs makes them.
std::vector<Tensor> randomTensors(const std::vector<std::pair<DType, std::vector<int64_t>>> &types,
                                  unsigned seed);

/// If `arg` is `--name=value` returns value; if it is `--name` and a value
/// follows, consumes it from `args` at `i`; false when `arg` is not --name.
/// `--name` last on the line is a usage error: reported, and the process
/// exits with status 2.
bool matchFlag(const Args &args, size_t &i, std::string_view name, std::string &value);

/// Parses the value of `flag` as an integer in [lo, hi]; on a bad value
/// prints `cmd: error: ...` and returns false.
bool parseIntArg(const char *cmd, std::string_view flag, const std::string &value, int64_t lo,
                 int64_t hi, int64_t &out);
/// Parses a finite number >= lo (tolerances); same reporting.
bool parseDoubleArg(const char *cmd, std::string_view flag, const std::string &value, double lo,
                    double &out);
/// Parses `SYM=N` (N >= 0) into `dims`; same reporting.
bool parseDimArg(const char *cmd, const std::string &value, std::map<std::string, int64_t> &dims);

/// What a shared flag parser made of args[i].
enum class FlagMatch { No, Taken, Bad };

/// Prints the help text of the flags matchCompileFlag takes, the standard
/// pipeline included.
void printCompileFlagsUsage(std::FILE *f);
/// Help text of the flags matchToleranceFlag takes.
extern const char kToleranceUsage[];

/// The compile options every compiling command takes (--cpu, --threads,
/// --dim SYM=N and SYM=LO..HI (a range: CompileOptions::ranges, and
/// runTimeSizes), --passes, --no-libraries, --no-kernels, --no-fusion,
/// --no-kernel-sharing, --dnnl-layout). Bad values are reported as `cmd: error: ...` (Bad).
/// `compileOnly` is set for a flag that means nothing without compiling
/// (all but --dim), so `kiln run` can refuse it without --compile.
FlagMatch matchCompileFlag(const char *cmd, const Args &args, size_t &i,
                           codegen::CompileOptions &options, bool *compileOnly = nullptr);
/// The flag of the first compile option in `o` other than --threads (and
/// --no-cache) that differs from its default; null when none does.
const char *compileFlagBeyondThreads(const codegen::CompileOptions &o);
/// For a command given the compiled artifact `file`: false, after printing
/// `cmd: error: --cpu does not apply to an artifact: ...`, when `options`
/// set a compile option other than --threads (the usage error, exit 2).
bool onlyThreadsForArtifact(const char *cmd, const codegen::CompileOptions &options,
                            const std::string &file);
/// --rtol and --atol (ir/Compare.h: the one definition of --check).
FlagMatch matchToleranceFlag(const char *cmd, const Args &args, size_t &i, Tolerance &tol);

/// --check, --bisect, --check-each and the tolerance.
struct CheckFlags {
  bool check = false, bisect = false, each = false;
  Tolerance tol;
};
FlagMatch matchCheckFlag(const char *cmd, const Args &args, size_t &i, CheckFlags &flags);

/// With --check-each, or --bisect when `outputsOk` is false: bisects `g`
/// on `inputs` (codegen/Bisect.h) and prints the report; when every step
/// matches alone though the outputs did not, says that the difference is in
/// `hint`. Returns whether everything matched.
bool bisectIfAsked(const Graph &g, std::span<const Tensor> inputs,
                   const codegen::CompileOptions &options, const CheckFlags &flags, bool outputsOk,
                   const char *hint, DiagnosticEngine &diag);

/// `kiln compile --target cuda [-o FILE] --emit=cuda|ptx [--cuda-arch sm_NN]
/// [--cuda-dir DIR]`.
struct CudaEmitFlags {
  bool source = false, ptx = false;
  /// --target cuda: the whole model (a node without a kernel is an error),
  /// saved to `output` as a CUDA artifact when one is given.
  bool target = false;
  int arch = 90;
  std::string dir, output;
  bool any() const { return source || ptx || target || !dir.empty(); }
};
/// The CUDA backend's module of `g`'s kernels (codegen/CudaProgram.h):
/// prints its fusion decisions (options.explain), its CUDA C and/or PTX,
/// writes kernels.cu, .ptx and .cubin into `flags.dir` and the CUDA
/// artifact into `flags.output`, then a `cuda:` summary line
/// (tools/CudaEmit.cpp). `model` is the file compiled. The exit status.
int emitCuda(const Graph &g, const std::string &model, const codegen::CompileOptions &options,
             const CudaEmitFlags &flags, DiagnosticEngine &diag);

/// `kiln run --target cuda` (tools/CudaEmit.cpp): `g` compiled with the
/// CUDA backend for the machine's GPU and loaded on it; `run` is empty
/// after an error (no GPU, a node the backend cannot run), reported.
struct CudaRun {
  std::function<FailureOr<std::vector<Tensor>>(std::span<const Tensor>, DiagnosticEngine &)> run;
  /// "CUDA on NVIDIA H200, 12 kernels".
  std::string description;
};
CudaRun prepareCudaRun(const Graph &g, const codegen::CompileOptions &options,
                       DiagnosticEngine &diag);

/// `kiln run CUDA.kiln`: the CUDA artifact at `path` loaded on the
/// machine's GPU; `run` is empty after an error (no GPU, a damaged file),
/// reported. `inputs` and `outputs` get the model's ports ("name",
/// "f32[1,3]").
CudaRun prepareCudaArtifactRun(const std::string &path,
                               std::vector<std::pair<std::string, std::string>> &inputs,
                               std::vector<std::string> &outputs, DiagnosticEngine &diag);

/// `kiln inspect CUDA.kiln`: what the CUDA artifact at `path` holds. The
/// exit status.
int inspectCudaArtifact(const std::string &path);

/// "sm_90" or "90" -> 90; -1 for anything else.
int parseCudaArchFlag(const std::string &s);

} // namespace kiln::tools
