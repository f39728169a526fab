//===- ExecutableImpl.h - What a kiln::Executable holds ---------*- C++ -*-===//
//
// Shared by the runtime's half of the API (api/Executable.cpp: load, save,
// run; libkiln_runtime) and the compiler's (api/Kiln.cpp: compile; libkiln).
// An Executable holds one compiled size, a loaded size set, or a Specializer
// that compiles per size; only the compiler's half makes the last, so the
// runtime's half never links the compiler.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "kiln/Executable.h"
#include "runtime/Executable.h"
#include "runtime/artifact/Artifact.h"

#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

/// Why every GPU entry of the API throws in a Kiln built without the CUDA
/// backend (api/Cuda.cpp, compileForCuda in api/Kiln.cpp).
inline constexpr char kBuiltWithoutCuda[] =
    "this Kiln was built without the CUDA backend (CMake found no CUDA toolkit under "
    "KILN_CUDA_ROOT, /usr/local/cuda by default)";

using Sizes = std::map<std::string, int64_t>;

// Internal helpers (not part of the public API, though both libraries
// export them).
namespace detail {
/// "batch=1, seq=5" (the label of a size set's member) and back.
std::string sizesStr(const Sizes &sizes);
Sizes parseSizes(const std::string &text);
std::vector<PortInfo> portsOf(const std::vector<runtime::ArtifactPort> &ports);
} // namespace detail
using detail::parseSizes;
using detail::portsOf;
using detail::sizesStr;

class StagedRunner;

/// One compiled size: the runtime executable and what save() records; or,
/// for a model whose sizes its run decides, its stages (`exe` null, `info`
/// holding only the summary).
struct Compiled {
  std::shared_ptr<const runtime::Executable> exe;
  runtime::ArtifactInfo info;
  std::shared_ptr<const StagedRunner> staged;
};

using KeptSizes = std::vector<std::pair<Sizes, std::shared_ptr<const Compiled>>>;

/// An Executable that compiles per size (Note [Compiling per size] in
/// api/Kiln.cpp).
class Specializer {
public:
  virtual ~Specializer() = default;
  /// The specialization for `inputs`' sizes, compiled on first use; throws
  /// Error.
  virtual std::shared_ptr<const Compiled> forInputs(std::span<const Tensor> inputs) const = 0;
  /// The specializations kept, least recently used first.
  virtual KeptSizes keptCompiled() const = 0;
  virtual std::string summary() const = 0;
  /// The model's ports (symbolic dims as -1).
  virtual std::vector<PortInfo> inputs() const = 0;
  virtual std::vector<PortInfo> outputs() const = 0;
  /// Executable::saveSymbolic; throws Error.
  virtual void saveSymbolic(const std::string &path) const = 0;
};

/// A model compiled in stages (Note [Data-dependent shapes] in
/// codegen/Staged.cpp): it runs through the compiler's half.
class StagedRunner {
public:
  virtual ~StagedRunner() = default;
  /// Throws Error.
  virtual std::vector<Tensor> run(std::span<const Tensor> inputs) const = 0;
  virtual std::string summary() const = 0;
  virtual std::vector<PortInfo> inputs() const = 0;
  virtual std::vector<PortInfo> outputs() const = 0;
};

struct Executable::Impl {
  /// Compiled for one size (a loaded size set's first); null with `perSize`.
  std::shared_ptr<const Compiled> one;
  std::unique_ptr<Specializer> perSize;
  /// A loaded size set (runtime/artifact/Artifact.h).
  KeptSizes set;

  /// The compiled size that runs `inputs` (`hold` keeps a specialization
  /// alive while it runs); throws Error.
  const Compiled &forInputs(std::span<const Tensor> inputs,
                            std::shared_ptr<const Compiled> &hold) const;
  /// An Executable around `impl` (for compile()).
  static Executable wrap(std::shared_ptr<const Impl> impl);
};

} // namespace kiln
