//===- Compiler.h - Graph to runnable Executable (CPU) ----------*- C++ -*-===//
//
// The CPU compiler driver:
//   1. clone the graph and bind symbolic dims of its inputs (options.dims);
//   2. run the pipeline (kDefaultPipeline, through the pass registry);
//   3. plan fusion (codegen/Fusion.h);
//   4. lower each Kernel group to a codegen Kernel and JIT it (CpuJit);
//      build each Library group as a oneDNN call with post-ops
//      (codegen/cpu/dnnl/OneDnnSteps.h); run everything else, and whatever
//      a backend refuses, on its reference kernel (a step of its own, with
//      a warning naming the node: a model always runs);
//   5. wire buffers and steps into a runtime::Executable.
// A CompileReport records what happened: the fusion explanation, kernel
// text, LLVM IR when asked, library calls, fallbacks and time per phase.
//
//   DiagnosticEngine diag;
//   CompileOptions opts;
//   opts.threads = 2;
//   auto exe = compile(graph, opts, diag);              // FailureOr
//   auto outs = runCompiled(**exe, inputs, diag);        // kiln::Tensor in/out
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/Backend.h"
#include "ir/Graph.h"
#include "runtime/Executable.h"
#include "runtime/artifact/Artifact.h"

#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace kiln::codegen {

struct SharedKernels; // codegen/RunTimeSizes.h

/// A symbol of a graph and the sizes it may take (inclusive).
struct SymbolRange {
  std::string name;
  int64_t min = 1;
  int64_t max = 1;
};

/// The pipeline compile() runs before fusion.
inline constexpr const char *kDefaultPipeline =
    "infer-shapes,canonicalize,constant-fold,inline-regions,cse,hoist-loop-invariants,dce,"
    "fold-batch-norm,lower-batch-norm,fold-pad,canonicalize,constant-fold,dce";

struct CompileOptions {
  /// Threads a run uses by default (0: OpenMP's default). Also the thread
  /// count oneDNN layout choices are measured with.
  int threads = 0;
  /// The CPU to compile for (`--cpu`, codegen/cpu/CpuTarget.h): "native" or
  /// an LLVM x86-64 CPU name ("haswell", "x86-64-v2", "x86-64"). Sets the
  /// JIT's target features and caps oneDNN's ISA alike.
  std::string cpu = "native";
  /// Sizes of symbolic input dims, by symbol (`--dim N=1`).
  std::map<std::string, int64_t> dims;
  /// Fill CompileReport::fusion with the fusion decisions.
  bool explain = false;
  /// Fill CompileReport::kernels with each kernel's text.
  bool emitKernels = false;
  /// Fill CompileReport::llvm with each kernel's LLVM IR, before (false) or
  /// after (true) optimization.
  bool emitLLVM = false;
  bool emitLLVMOptimized = false;
  /// Passes before fusion.
  std::string pipeline = kDefaultPipeline;
  /// Run conv/matmul/gemm/pools through oneDNN (else: reference kernels).
  bool useLibraries = true;
  /// Compile kernel groups with the JIT (else: reference kernels, per node).
  bool useKernels = true;
  /// Fuse nodes into kernels (false: one kernel or library call per node,
  /// for bisecting fusion bugs and measuring per-step overhead).
  bool fuse = true;
  /// Compile the kernels that differ only in their sizes once, with
  /// run-time sizes (Note [Kernels shared across shapes] in
  /// codegen/KernelSharing.cpp); false (`--no-kernel-sharing`): one
  /// compile per kernel, for measuring what sharing costs or saves.
  bool shareKernels = true;
  LibraryLayout dnnlLayout = LibraryLayout::Blocked;
  RecurrentChoice recurrent = RecurrentChoice::Measure;
  /// LLVM optimization level of kernels.
  int optLevel = 3;
  /// Per-kernel LLVM IR dumps (empty: none).
  std::string dumpDir;
  /// Debugging aid (`--debug-fault-kernel`): the kernel of this name (as in
  /// --emit=kernels, e.g. `kernel_y`) gets a wrong answer on purpose: each
  /// value it stores to its first output has 1 added. Tests of the
  /// bisection (codegen/Bisect.h) plant faults with it; empty: none.
  std::string debugFaultKernel;
  /// Reuse and store compiled models in the compile cache
  /// (codegen/CompileCache.h); the CLI turns it on unless --no-cache.
  bool cache = false;
  /// Kernels compiled once for every size (Note [Kernels with run-time
  /// sizes] in codegen/RunTimeSizes.cpp): a kernel group one of them
  /// computes at these dims runs it instead of a kernel compiled for them.
  std::shared_ptr<const SharedKernels> sharedKernels;
  /// `--run-time-sizes`: when sharedKernels is not given, compile() first
  /// compiles them itself, for every symbol of the graph's inputs over
  /// its range in `ranges`, else 1..max(1024, its size in `dims`), from the
  /// graph as given (its symbols unbound; `dims` binds them for this
  /// compile). What that took is the "run-time sizes" phase of the report.
  bool runTimeSizes = false;
  /// `--dim SYM=LO..HI`: the sizes a symbol of the graph's inputs may
  /// take. A size in `dims` outside its symbol's range is an error.
  std::vector<SymbolRange> ranges;
};

/// The memory plan of a compiled model (codegen/MemoryPlan.h).
struct MemoryReport {
  uint64_t arenaBytes = 0;
  /// The largest live set (no plan can use less), at step `peakStep`.
  uint64_t lowerBound = 0;
  int32_t peakStep = -1;
  /// Every intermediate in memory of its own.
  uint64_t naiveBytes = 0;
  /// The per-call output block and the constants.
  uint64_t outputBytes = 0, constantBytes = 0;
  /// Buffers written in place of a dying input.
  int inPlace = 0;
  struct Buffer {
    std::string name;
    bool inArena = true; ///< else a graph output, in the output block
    uint64_t offset = 0, bytes = 0;
    int32_t first = -1, last = -1; ///< steps
    std::string inPlaceOf;
  };
  /// Every Temp buffer, in buffer order.
  std::vector<Buffer> buffers;

  /// The summary lines, and with `perBuffer` a table of every buffer.
  std::string str(bool perBuffer) const;
};

/// What compile() did.
struct CompileReport {
  /// FusionPlan::explain() (with options.explain).
  std::string fusion;
  /// Kernel texts (with options.emitKernels).
  std::string kernels;
  /// LLVM IR (with options.emitLLVM / emitLLVMOptimized).
  std::string llvm;
  /// Seconds per phase, in order ("passes", "fusion", "kernels", "library",
  /// "fallbacks", "regions" (compiling region steps), "memory").
  std::vector<std::pair<std::string, double>> phases;
  double totalSeconds = 0;
  int numKernels = 0, numLibraryCalls = 0, numFallbacks = 0;
  /// Of numKernels: those run by a kernel of CompileOptions::sharedKernels.
  int numSharedKernels = 0;
  /// `if` and `loop` nodes whose regions were compiled (Note [Compiled
  /// regions] in ExecutableBuilder.cpp); each is one step.
  int numRegions = 0;
  /// One line per library call: node, implementation, layouts, post-ops.
  std::vector<std::string> libraryCalls;
  /// One line per node run on its reference kernel, with the reason.
  std::vector<std::string> fallbacks;
  /// With CompileOptions::runTimeSizes: each kernel that stays per size,
  /// with the reason ("kernel_y: ...").
  std::vector<std::string> runTimeSizes;
  /// The steps (runtime::Executable::describe()).
  std::string steps;
  /// The target: --cpu name, LLVM CPU, vector math, oneDNN ISA.
  std::string target;
  /// The memory plan.
  MemoryReport memory;
  /// The compile cache entry this compile loaded (a hit) or stored; empty
  /// when the cache was not used.
  std::string cacheEntry;
  bool cacheHit = false;

  /// "3 kernels, 2 library calls, 0 fallbacks; compiled in 41.2 ms (...)".
  std::string summary() const;
  /// "3 kernels, 2 library calls, 0 fallbacks" (no timing: what artifacts
  /// record, so that they are byte-identical across compiles).
  std::string counts() const;
};

/// Compiles `g` for this CPU. Errors (unbound symbolic dims, pass failures,
/// graphs that are not static after the pipeline) are diagnostics; backend
/// refusals are warnings and the node runs on its reference kernel.
FailureOr<std::unique_ptr<runtime::Executable>> compile(const Graph &g,
                                                        const CompileOptions &options,
                                                        DiagnosticEngine &diag,
                                                        CompileReport *report = nullptr);

/// compile() on a graph the compiler takes over (no copy): each constant is
/// released as soon as the steps that read it are built, so a model's
/// weights are not held twice (as given and as packed) while compiling.
FailureOr<std::unique_ptr<runtime::Executable>> compile(std::unique_ptr<Graph> graph,
                                                        const CompileOptions &options,
                                                        DiagnosticEngine &diag,
                                                        CompileReport *report = nullptr);

/// Checks options.ranges against `g` (its symbols unbound): each range
/// names a symbol of its inputs once, is not empty or negative, and holds
/// the symbol's size in options.dims when it has one; with runTimeSizes,
/// each size in options.dims names a symbol too. compile() checks this
/// first; a caller compiling several sizes checks once before.
LogicalResult checkRanges(const Graph &g, const CompileOptions &options, DiagnosticEngine &diag);

/// `dims` and every input symbol of `g` that the graph assumes equal to a
/// dim `dims` gives (Note [Assumed equal dims] in ir/Interpreter.cpp),
/// transitively, with that size: what compile() binds.
std::map<std::string, int64_t> withAssumedDims(const Graph &g, std::map<std::string, int64_t> dims);

/// Binds the dims of `g`, runs the pipeline and names every value: what
/// prepareGraph does before it requires static shapes (a graph with shapes
/// sized by its run, codegen/Staged.h, is split here).
FailureOr<std::unique_ptr<Graph>>
preparePipeline(std::unique_ptr<Graph> g, const CompileOptions &options, DiagnosticEngine &diag);

/// What prepareGraph requires of preparePipeline's graph: static shapes,
/// constant gather indices in range.
LogicalResult checkPrepared(const Graph &g, DiagnosticEngine &diag);

/// Steps 1-2 of compile(): binds the dims of `g`, runs the pipeline,
/// requires static shapes and names every value. compile() and the
/// bisection (codegen/Bisect.h) start from this graph.
FailureOr<std::unique_ptr<Graph>>
prepareGraph(std::unique_ptr<Graph> g, const CompileOptions &options, DiagnosticEngine &diag);

/// Runs a compiled model on kiln::Tensor inputs (zero-copy both ways) and
/// returns its outputs; input mismatches (count, dtype, shape) and step
/// failures are errors. Safe to call from several threads at once.
FailureOr<std::vector<Tensor>> runCompiled(const runtime::Executable &exe,
                                           std::span<const Tensor> inputs, DiagnosticEngine &diag,
                                           const runtime::RunOptions &options = {},
                                           runtime::RunProfile *profile = nullptr);

/// A graph's inputs and outputs as declared (name and type, symbolic dims
/// kept): what an artifact records of the graph it was compiled from.
struct GraphPorts {
  std::vector<std::pair<std::string, TensorType>> inputs, outputs;
  static GraphPorts of(const Graph &g);
};

/// What an artifact of `exe` records about it: `ports` (symbolic dims
/// named, sized as compiled), `report`'s counts, target, library calls,
/// fallbacks and memory plan, and `model` as its origin.
runtime::ArtifactInfo artifactInfo(const GraphPorts &ports, const runtime::Executable &exe,
                                   const CompileReport &report, const std::string &model);

/// The other way: the counts, target, library calls and fallbacks that an
/// artifact of `exe` recorded (artifactInfo), into `report`, and the count
/// of kernels with run-time sizes from `exe`'s steps.
void reportFromArtifact(const runtime::ArtifactInfo &info, const runtime::Executable &exe,
                        CompileReport &report);

} // namespace kiln::codegen
