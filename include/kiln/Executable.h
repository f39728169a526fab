//===- Executable.h - Load and run compiled models from C++ -----*- C++ -*-===//
//
// The runtime's API: an application that only runs models compiled
// beforehand (`kiln compile MODEL -o model.kiln`, or Executable::save)
// includes this header and links the CMake target `kiln::runtime`
// (libkiln_runtime.so: the runtime, oneDNN's steps, the reference kernels
// and the artifact loader; no LLVM, no compiler, no ONNX importer).
//
//   kiln::Executable exe = kiln::Executable::load("resnet18.kiln");
//   std::vector<kiln::Tensor> out = exe.run({input});       // any thread, at once
//
// kiln/kiln.h includes it and adds loading models and compiling them
// (`kiln::kiln`, libkiln.so). Every failure (a damaged, foreign or
// wrong-CPU artifact, inputs of the wrong count, dtype or shape) throws
// kiln::Error with the located message, the same text the `kiln` CLI
// prints.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/Tensor.h" // kiln::Tensor
#include "kiln/Error.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

/// An input or output of a model: its name, dtype and shape (symbolic dims
/// as -1 in a Model and in an Executable that compiles per size, as
/// compiled in any other Executable; a loaded size set gives its first
/// size's shapes).
struct PortInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
};

class Model;           // kiln/kiln.h
struct CompileOptions; // kiln/kiln.h

/// A compiled model. run() may be called from many threads at once.
/// Copies share the compiled code. An Executable compiled (kiln.h) with
/// symbols left unbound compiles a specialization on the first run at each new set
/// of sizes (logged through CompileOptions::onSpecialize) and reuses it;
/// it checks the inputs' sizes against each other (two inputs that give
/// `batch` different sizes are an error naming both) and against
/// CompileOptions::ranges.
class Executable {
public:
  /// Loads an artifact written by save() or `kiln compile -o`; a size set
  /// (several sizes in one file) runs whichever of its sizes the inputs
  /// have, without compiling.
  static Executable load(const std::string &path);

  /// Writes the compiled model as an artifact (atomically: a failed save
  /// leaves what was at `path`); steps run by reference kernels are saved
  /// as their IR nodes. One that compiles per size writes the
  /// specializations kept so far as a size set (an error before any run).
  void save(const std::string &path) const;
  /// Writes one that compiles per size as a symbolic artifact (codegen/
  /// SymbolicArtifact.h, as `kiln compile --dim SYM=LO..HI -o` does): its
  /// graph and its kernels with run-time sizes, compiled for the ranges of
  /// its open symbols (CompileOptions::ranges, else 1..1024), whether or
  /// not it has run. Model::load reads it back; the runtime alone does not.
  /// An error for one compiled at fixed sizes or in stages.
  void saveSymbolic(const std::string &path) const;

  /// Runs on `inputs` (in input order; their bytes are read in place, not
  /// copied) and returns the outputs.
  std::vector<Tensor> run(const std::vector<Tensor> &inputs) const;
  /// Runs and writes each output into the caller's tensor `outputs[k]`,
  /// which must have the output's dtype and shape (copied from the run's
  /// output block).
  void runInto(const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs) const;

  std::vector<PortInfo> inputs() const;
  std::vector<PortInfo> outputs() const;
  /// "3 kernels, 2 library calls, 0 fallbacks"; for one that compiles
  /// per size, "compiles per size of batch, seq; 2 specializations kept
  /// (batch=1, seq=5: ...; batch=3, seq=17: ...)".
  std::string summary() const;
  /// The sizes of the specializations kept, least recently used first, or
  /// of a loaded size set's members (empty for an Executable compiled for
  /// one size).
  std::vector<std::map<std::string, int64_t>> specializations() const;

  Executable(const Executable &) = default;
  Executable &operator=(const Executable &) = default;
  ~Executable();

private:
  Executable();
  struct Impl;
  std::shared_ptr<const Impl> impl_;
  friend Executable compile(const Model &model, const CompileOptions &options);
};

} // namespace kiln
