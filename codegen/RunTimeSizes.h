//===- RunTimeSizes.h - Kernels compiled once for every size ----*- C++ -*-===//
//
// Note [Kernels with run-time sizes] (RunTimeSizes.cpp): a graph whose
// inputs have symbolic dims is lowered at sampled sizes of its symbols, and
// the kernels each fusion group gives are merged into one kernel whose
// extents and varying index constants are polynomials over the symbols,
// read at run time from the kernel's size arguments (codegen/KernelIR.h).
//
//   std::vector<SymbolRange> ranges{{"N", 1, 64}, {"S", 1, 512}};
//   auto kernels = lowerForAllSizes(graph, ranges, options, diag);
//   for (const SizedKernel &k : *kernels)
//     if (k.kernel) ... else k.why ...
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/Compiler.h"
#include "codegen/Fusion.h"
#include "codegen/KernelIR.h"
#include "ir/Interpreter.h"
#include "runtime/KernelABI.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kiln::codegen {

/// "N in 1..64, S in 1..512".
std::string rangesStr(const std::vector<SymbolRange> &ranges);

/// The sizes at which a graph is lowered: a grid of three consecutive
/// values per symbol that the polynomials are fitted on, and the points
/// they are checked at (every corner of the ranges, and one more inside).
/// Each point has one size per range, in the ranges' order. nullopt (with
/// `why`) when a range is too small to fit (fewer than 4 sizes >= 2).
struct SamplePlan {
  std::vector<std::vector<int64_t>> fit, check;
};
std::optional<SamplePlan> samplePlan(const std::vector<SymbolRange> &ranges, std::string &why);

/// One kernel lowered at one point of a SamplePlan.
struct SampledKernel {
  Kernel kernel;
  std::vector<int64_t> sizes; ///< per symbol
};

/// Merges kernels lowered from one group at the points of `plan` (fit then
/// check, in the plan's order) into one kernel: they must be equal except
/// for i64 constants, integral float constants, extents and buffer dims,
/// and each of those must be a polynomial with integer coefficients and
/// degree at most 2 in each symbol that the fit points determine and the
/// check points confirm. A kernel equal at every point stays static.
/// nullopt with `why` (what differs, where) otherwise.
std::optional<Kernel> generalizeKernel(const std::vector<std::string> &symbols,
                                       const std::vector<SampledKernel> &samples, size_t numFit,
                                       std::string &why);

/// One kernel group of a graph lowered once for all sizes.
struct SizedKernel {
  std::string name;
  /// groupSignature of its group.
  std::string signature;
  /// How it lays out its buffers: layoutKey (Fusion.h), or kPoolLayout.
  std::string layout;
  /// The kernel (with run-time sizes where a symbol reaches it), or none.
  std::optional<Kernel> kernel;
  /// Why there is no kernel: the lowering differed between sizes in a way
  /// no polynomial describes.
  std::string why;
};

/// Prepares, fuses and lowers `g` at every point of samplePlan(ranges)
/// (CompileOptions::dims set to the point; the graph's own fusion and
/// pipeline options from `options`) and generalizes each kernel group.
/// Errors: a range that cannot be sampled, a point at which the graph does
/// not prepare (its sizes in `failedAt`, when given), fusion plans that
/// differ between points.
FailureOr<std::vector<SizedKernel>> lowerForAllSizes(const Graph &g,
                                                     const std::vector<SymbolRange> &ranges,
                                                     const CompileOptions &options,
                                                     DiagnosticEngine &diag,
                                                     std::vector<int64_t> *failedAt = nullptr);

/// A kernel with run-time sizes and its machine code.
struct SharedKernel {
  /// The merged kernel; loaded from a symbolic artifact
  /// (codegen/SymbolicArtifact.h), only what findSharedKernel reads (its
  /// name, symbols, buffers and extents), without a body.
  Kernel kernel;
  /// kernel.str() (`--emit=kernels`).
  std::string text;
  runtime::KernelFn fn = nullptr;
  std::shared_ptr<const runtime::KernelObject> object;
  /// The sizes it was merged for (SharedKernels::ranges, or narrower).
  std::vector<SymbolRange> ranges;
  /// groupSignature of the group it computes.
  std::string signature;
  /// How it lays out its buffers: layoutKey (Fusion.h), or kPoolLayout.
  std::string layout;
  /// The same kernel compiled to write its output over input `input`
  /// (Schedule::inPlaceInput), for each input it can (canWriteInPlace, of
  /// the same dims): where a compile's builder writes the group's output
  /// over a dying input (inPlaceCandidate), it runs this one, as it would
  /// its own kernel; an output in fresh memory costs a pass
  /// (bench/DYNAMIC.md).
  struct InPlace {
    int32_t input = -1;
    runtime::KernelFn fn = nullptr;
    std::shared_ptr<const runtime::KernelObject> object;
  };
  std::vector<InPlace> inPlace;
};

/// The kernels of one graph compiled once for every size of `ranges`
/// (CompileOptions::sharedKernels): a compile for one size runs them
/// instead of compiling its own.
struct SharedKernels {
  std::vector<SymbolRange> ranges;
  std::map<std::string, SharedKernel> byName;
  /// The groups left to each size's compile: (kernel name, why).
  std::vector<std::pair<std::string, std::string>> perSize;
  /// Why the kernels could not be merged over `ranges` themselves (the
  /// first error of the widest failed try), or empty.
  std::string narrowedBecause;
  /// The JIT session that owns the code.
  std::shared_ptr<const void> owner;
  /// What lowering at the sampled sizes and compiling took.
  double seconds = 0;
};

/// The inputs kernel `k` can write its one output over (canWriteInPlace, of
/// the output's dims): each gets a variant of a shared kernel
/// (SharedKernel::inPlace).
std::vector<int32_t> inPlaceInputs(const Kernel &k);

/// What `shared` holds, for a log line: "3 kernels compiled once for N in
/// 1..64" when every kernel merged over its ranges; else by range, "14
/// kernels compiled once: 14 for N in 1..64, S in 1..128 (not over N in
/// 1..64, S in 1..1024: WHY)"; "no kernel to compile once (the model has
/// none)".
std::string sharedKernelsStr(const SharedKernels &shared);

/// The largest size a symbol without a range is compiled for.
inline constexpr int64_t kDefaultSharedMax = 1024;

/// The largest size <= `hi` up to which `sym` keeps every assumption in
/// `assumed` (dimAssumptions of the graph) that names no other symbol (Note [Assumed equal dims]),
/// when they hold exactly at 1..that size: 64 for `seq == min(seq,64)`, a model whose positions end
/// at 64; else `hi` (no assumption, or one such as an even size that bounds nothing). A symbol with
/// no --dim range is compiled up to it.
int64_t assumedMax(std::span<const DimAssumption> assumed, const std::string &sym, int64_t hi);

/// The ranges compile() compiles the shared kernels of `g` over
/// (CompileOptions::runTimeSizes): each symbol of `g`'s inputs over its
/// range in options.ranges, else over 1..max(kDefaultSharedMax, its size in
/// options.dims) cut to assumedMax; none for a symbol the graph assumes equal to one of these
/// (withAssumedDims: a compile binds it from that one), by name.
std::vector<SymbolRange> sharedRanges(const Graph &g, const CompileOptions &options);

/// lowerForAllSizes over `ranges`, again over ranges halved (up to four
/// times) for the kernels that do not merge over wider ones, then one JIT
/// compile of every merged kernel for options.cpu.
FailureOr<std::shared_ptr<const SharedKernels>>
compileSharedKernels(const Graph &g, const std::vector<SymbolRange> &ranges,
                     const CompileOptions &options, DiagnosticEngine &diag);

/// compileSharedKernels with its errors kept: the kernels, or null with
/// `error` set to the first error ("cannot compile kernels with run-time
/// sizes: ...", at the node where it has one), for a caller that then
/// compiles every kernel per size and says why.
std::shared_ptr<const SharedKernels> tryCompileSharedKernels(const Graph &g,
                                                             const std::vector<SymbolRange> &ranges,
                                                             const CompileOptions &options,
                                                             Diagnostic &error);

/// A shared kernel at one set of sizes.
struct SharedUse {
  const SharedKernel *kernel = nullptr;
  std::vector<int64_t> sizes; ///< per symbol of the kernel
  int64_t numOuter = 0, inner = 0;
};

/// The shared kernel that computes what `k` does, `k` being `group`'s
/// lowering with the symbols bound to `dims` and its buffers laid out as
/// `layout` says (layoutKey, or kPoolLayout for `group`'s pool as a
/// kernel): one of the same name, group signature and layout, reading and
/// writing buffers of the same names, dtypes and (at `dims`) shapes, with
/// `dims` inside every one of its ranges. nullopt when there is none.
std::optional<SharedUse> findSharedKernel(const SharedKernels &shared, const FusionGroup &group,
                                          const Kernel &k, const std::string &layout,
                                          const std::map<std::string, int64_t> &dims);

/// A fusion group's nodes (ops, in order) and how their operands connect
/// (group inputs by position, earlier nodes), and which nodes give its
/// outputs: equal for the same group of a graph at any size.
std::string groupSignature(const FusionGroup &group);

/// The layout of a max_pool or avg_pool run as a kernel on channels-last
/// buffers (Note [Pools as kernels] in PoolKernel.cpp).
inline constexpr const char *kPoolLayout = "pool";

/// The kernels of `g`'s kernel groups with every symbol bound to `sizes`
/// (a static compile's lowering; the reference the tests compare with),
/// each in the layouts predicted for its buffers (Note [Shared kernels in
/// channels-last] in RunTimeSizes.cpp), with the channels-last pools run
/// as kernels among them. `splits`, when given: each kernel's inner-loop
/// split to use where it has an entry (lowerGroup), appended for the rest
/// as chosen; `signatures` gets each one's groupSignature, `layouts` its
/// layout.
FailureOr<std::vector<Kernel>> lowerAtSizes(const Graph &g,
                                            const std::map<std::string, int64_t> &sizes,
                                            const CompileOptions &options, DiagnosticEngine &diag,
                                            std::vector<size_t> *splits = nullptr,
                                            std::vector<std::string> *signatures = nullptr,
                                            std::vector<std::string> *layouts = nullptr);

} // namespace kiln::codegen
