//===- kiln.h - Load, compile, save and run models from C++ -----*- C++ -*-===//
//
// The embedding API: one header for an application that runs models with
// Kiln. Link the CMake target `kiln_api`.
//
//   kiln::Model model = kiln::Model::load("resnet18.onnx");    // or .kir
//   kiln::CompileOptions options;
//   options.threads = 4;
//   kiln::Executable exe = kiln::compile(model, options);     // LLVM JIT + oneDNN
//   exe.save("resnet18.kiln");                                 // an artifact
//   kiln::Executable again = kiln::Executable::load("resnet18.kiln");   // no compile
//   std::vector<kiln::Tensor> out = again.run({input});        // any thread, at once
//
// For a GPU, compileForCuda writes a CUDA artifact (no GPU needed to write
// it) that kiln::CudaModel (kiln/Cuda.h) loads and runs on one:
//
//   kiln::compileForCuda(model, "resnet18-gpu.kiln");        // sm_90 by default
//   kiln::CudaModel gpu = kiln::CudaModel::load("resnet18-gpu.kiln");
//
// Models also come from the tracer: Model::fromGraph(kiln::trace(...)).
// Every failure (an unreadable or malformed model, an op no backend
// supports and no reference kernel runs, inputs of the wrong count, dtype
// or shape, a damaged artifact) throws kiln::Error with the located
// message, the same text the `kiln` CLI prints.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/Eager.h" // kiln::Tensor
#include "kiln/Error.h"
#include "kiln/Executable.h" // kiln::Executable, kiln::PortInfo

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

class Graph;
class Module;
struct CudaCompileOptions;
struct MlirOptions;

/// How to compile (the `kiln compile` flags of the same names).
struct CompileOptions {
  /// Threads a run uses (0: OpenMP's default, omp_get_max_threads()).
  int threads = 0;
  /// The CPU to compile for: "native", or an LLVM x86-64 CPU name
  /// ("haswell", "x86-64-v2", "x86-64"); a CPU this machine cannot run is
  /// refused. oneDNN takes one ISA cap per process: compiling for two
  /// different non-native CPUs in one process is an error.
  std::string cpu = "native";
  /// Sizes of symbolic input dims, by symbol ("batch" -> 8). A symbol
  /// left out stays symbolic: the Executable then compiles the model for
  /// the sizes of each run's inputs, once per distinct set of sizes (a
  /// specialization, kept for later runs; see Executable::run).
  std::map<std::string, int64_t> dims;
  /// The sizes a symbol may take, inclusive: a run with inputs outside is
  /// an error naming the symbol and the range, and so is a size in `dims`
  /// outside (compile() throws). The kernels with run-time sizes of the
  /// symbols left out of `dims` are compiled for these ranges (1..1024 for
  /// a symbol without one).
  struct Range {
    int64_t min = 0, max = INT64_MAX;
  };
  std::map<std::string, Range> ranges;
  /// Specializations kept at once (least recently used dropped first).
  size_t maxSpecializations = 8;
  /// Called with one line for each specialization compiled ("compiling
  /// for batch=8, seq=128: no specialization for these sizes yet (1 of at
  /// most 8 kept)"); nullptr writes the line to stderr. Compiles never
  /// happen silently. It is called with the Executable's compile lock held:
  /// it must not run the same Executable.
  std::function<void(const std::string &)> onSpecialize;
  /// Fuse nodes into kernels; run conv/matmul/pools through oneDNN.
  bool fusion = true, libraries = true;
  /// Reuse and store compiled models in the compile cache
  /// ($KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln).
  bool cache = false;
};

/// A model to compile: a graph read from a file or made by the tracer.
class Model {
public:
  /// Reads an ONNX model (.onnx) or Kiln IR (.kir); `dims` binds symbolic
  /// dims of an ONNX model at import. A symbolic artifact (`kiln compile
  /// --dim SYM=LO..HI -o M.kiln`) loads as its graph with its kernels
  /// compiled already: compile() then compiles each size it meets from them,
  /// inside the artifact's ranges, with its --cpu and flags (only threads,
  /// dims, maxSpecializations and onSpecialize apply, and no size is cached; for `native`,
  /// what each size compiles is for the machine that loads it, and the load
  /// checks that it has the features the stored kernels need).
  static Model load(const std::string &path, const std::map<std::string, int64_t> &dims = {});
  /// Takes over a graph (kiln::trace's result).
  static Model fromGraph(std::unique_ptr<Graph> graph);

  Model(Model &&) noexcept;
  Model &operator=(Model &&) noexcept;
  ~Model();

  std::vector<PortInfo> inputs() const;
  std::vector<PortInfo> outputs() const;
  /// The graph (for printing or interpreting it with the internal API).
  const Graph &graph() const;

private:
  Model();
  struct Impl;
  std::unique_ptr<Impl> impl_;
  friend Executable compile(const Model &model, const CompileOptions &options);
  friend std::string toMlir(const Model &model, const MlirOptions &options);
  friend void compileForCuda(const Model &model, const std::string &path,
                             const CudaCompileOptions &options);
};

/// Compiles `model` for this CPU (or options.cpu).
Executable compile(const Model &model, const CompileOptions &options = {});

/// How to compile for a CUDA GPU (the `kiln compile --target cuda` flags).
struct CudaCompileOptions {
  /// The compute capability compiled for, as in sm_90 (H100, H200): the
  /// artifact's CUBIN runs on a GPU of that capability, its PTX (compiled
  /// by the driver at load) on a later one; an earlier GPU refuses it.
  int arch = 90;
  /// Sizes of symbolic input dims, by symbol: a CUDA artifact is compiled
  /// for one size, so every symbol the model's inputs have needs one.
  std::map<std::string, int64_t> dims;
  /// Fuse nodes into kernels; run matmul and gemm through cuBLASLt and
  /// conv and the pools through cuDNN (else as generated kernels, where
  /// there are any).
  bool fusion = true, libraries = true;
};

/// Compiles `model` for a CUDA GPU (NVRTC, at options.arch) and saves it as
/// the CUDA artifact `path`, written whole or not at all: the file `kiln
/// compile MODEL --target cuda -o PATH` writes, byte for byte. Needs the
/// CUDA toolkit's NVRTC, not a GPU. A node the CUDA backend does not run
/// (an if or loop, a recurrent layer, sizes decided by the run, ...) or a
/// symbol without a size throws a kiln::Error naming it, and so does a
/// Kiln built without the CUDA backend.
void compileForCuda(const Model &model, const std::string &path,
                    const CudaCompileOptions &options = {});

/// How toMlir writes a model (the `kiln translate --emit=mlir` flags).
struct MlirOptions {
  /// Run the standard pipeline first, as `kiln translate` does; false
  /// writes the graph as loaded (`--passes=`).
  bool pipeline = true;
  /// Constants of at most this many elements print inline, larger ones as
  /// dense_resource blobs (`--inline-elements`).
  int64_t inlineElements = 16;
};

/// The model's graph as an MLIR 16 module of upstream dialects (func,
/// tensor, arith, math, linalg), the text `kiln translate MODEL
/// --emit=mlir` writes; an op MLIR has no form for is a call of a private
/// `@kiln.<op>` declaration. A dtype MLIR 16 lacks, a size no input dim
/// gives, a symbolic artifact, or a Kiln built without MLIR
/// (-DKILN_MLIR=OFF) throws a kiln::Error naming it.
std::string toMlir(const Model &model, const MlirOptions &options = {});

} // namespace kiln
