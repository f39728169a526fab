//===- SymbolicArtifact.h - Models compiled once for ranges of sizes -*- C++ -*-===//
//
// Note [Symbolic artifacts] (SymbolicArtifact.cpp): `kiln compile MODEL
// --dim batch=1..64 -o M.kiln` keeps the symbols. The file (magic KILNSYM,
// framed as runtime/artifact/FileFormat.h says) holds the graph as it was
// compiled, its constants (mapped, not copied, on load), the compile
// options (ranges, fixed dims, CPU, flags) and the kernels compiled with
// run-time sizes (codegen/RunTimeSizes.h) with their machine code. Loading
// links that code without LLVM (runtime::LoadedCode) and gives back the
// graph and options with CompileOptions::sharedKernels set: each size a
// run meets is then compiled as `kiln compile --dim` compiles one, running
// those kernels, so it builds the memory plan and the oneDNN calls and
// compiles only the kernels that stay per size (none on the CNNs of
// bench/DYNAMIC.md). It needs the compiler library, not only the runtime
// (a size set, Artifact.h, is what a machine without it runs).
//
//   if (failed(saveSymbolicArtifact(graph, options, *shared, {}, "m.onnx", path, diag))) ...
//   auto loaded = loadSymbolicArtifact(path, diag);
//   std::string why;
//   auto o = withSizes(loaded->options, *loaded->graph, {{"batch", 8}}, 0, why);
//   compile(*loaded->graph, *o, diag);
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/Compiler.h"
#include "ir/Graph.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

namespace kiln::codegen {

struct SharedKernels;

/// A symbolic artifact, loaded.
struct SymbolicModel {
  std::unique_ptr<Module> module;
  Graph *graph = nullptr;
  /// As compiled: ranges, dims, CPU and flags, with sharedKernels set.
  CompileOptions options;
  /// The symbols no --dim named when it was compiled (over a default range).
  std::set<std::string> open;
  /// The model file it was compiled from (its file name).
  std::string model;
  runtime::TargetInfo target;
  std::string kilnVersion;
  uint64_t fileBytes = 0, constantBytes = 0, codeBytes = 0;
};

/// Writes `g` (its symbols unbound, as compile() takes it), `options`
/// (their ranges and dims) and `shared` (compiled for those options, every
/// kernel with its object code) to `path`, through a temporary file renamed
/// over it. `model` names the model file; `open`, the symbols no --dim
/// named. Errors name `path`.
LogicalResult saveSymbolicArtifact(const Graph &g, const CompileOptions &options,
                                   const SharedKernels &shared, const std::set<std::string> &open,
                                   const std::string &model, const std::string &path,
                                   DiagnosticEngine &diag);

/// The options to compile a loaded symbolic artifact's graph `g` with:
/// `options` (as loaded) with `threads` when it is > 0 and each size of
/// `sizes` fixed. A size must name a symbol of `g`'s inputs, agree with a
/// size the artifact fixed and lie inside its symbol's range; nullopt with
/// `why` (naming the size) otherwise.
std::optional<CompileOptions> withSizes(const CompileOptions &options, const Graph &g,
                                        const std::map<std::string, int64_t> &sizes, int threads,
                                        std::string &why);

/// `g` parsed back from the text a symbolic artifact stores it as (its
/// constants shared, not copied): every value named as the loaded graph's
/// will be. Kernel names come from value names, so the kernels an artifact
/// saves are compiled from this graph, and a load finds each by name.
FailureOr<std::unique_ptr<Module>> asStored(const Graph &g, DiagnosticEngine &diag);

/// Loads the symbolic artifact at `path`, checking it as loadArtifact checks
/// an artifact (magic, format, checksum, Kiln version, this CPU's
/// features) and linking its code. Errors name `path`.
FailureOr<SymbolicModel> loadSymbolicArtifact(const std::string &path, DiagnosticEngine &diag);

} // namespace kiln::codegen
