//===- RegionStep.h - An if or loop whose regions are compiled --*- C++ -*-===//
//
// An extern step that runs an `if` or a `loop` node (ir/ops/ControlFlow.cpp)
// with its regions compiled to Executables of their own (Note [Compiled
// regions] in codegen/ExecutableBuilder.cpp): an `if` reads its condition and runs
// one branch on the captured operands; a `loop` runs its body while the
// trip count and the condition allow, each iteration's carried outputs
// feeding the next (Executable::run alternates two output blocks, so an
// iteration allocates nothing). The results are copied into the step's
// buffers. Saved in an artifact, it is its Spec and each region as an
// artifact of its own, nested (runtime/artifact/Artifact.cpp).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Executable.h"

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kiln {
class Node;
} // namespace kiln

namespace kiln::runtime {

class RegionStep final : public ExternStep {
public:
  static constexpr const char *kKind = "kiln.region";

  /// What running the node needs of it: no graph, so that an artifact can
  /// rebuild the step.
  struct Spec {
    bool isLoop = false;
    /// describe(): "compiled loop %x".
    std::string name;
    /// Every operand's static type (the step's first buffers).
    std::vector<DType> operandTypes;
    std::vector<std::vector<int64_t>> operandShapes;
    unsigned numResults = 0;
    /// A loop's carried values, and each scan result's rows.
    unsigned numCarried = 0;
    std::vector<int64_t> scanRows;
    /// A loop body's iteration number and condition inputs.
    std::vector<int64_t> iterShape, condShape;

    /// `node` (an if or a loop with static operand types) as a Spec.
    static Spec of(const Node &node);
    /// The payload an artifact stores, and back; nullopt (with `why`) for
    /// a payload that is not one.
    std::string str() const;
    static std::optional<Spec> parse(const std::string &payload, std::string &why);
  };

  /// `regions`: an `if`'s then and else, a `loop`'s body, each compiled
  /// for the static types of the operands it gets; `owner` keeps alive
  /// what they need (the graph of a compile), or null.
  RegionStep(Spec spec, std::shared_ptr<const void> owner,
             std::vector<std::shared_ptr<const Executable>> regions);
  /// The step an artifact stored (payload Spec::str()), its regions loaded
  /// already; null (with `why`) when they do not fit the step's buffers.
  static std::shared_ptr<const ExternStep>
  load(const std::string &payload, std::vector<std::shared_ptr<const Executable>> regions,
       std::span<const size_t> bufferBytes, std::string &why);

  std::string describe() const override;
  Status run(std::span<void *const> buffers, const StepContext &ctx) const override;
  /// Kind and payload; the artifact writer adds regions() as nested
  /// artifacts.
  bool save(SavedStep &out, std::string &why) const override;
  uint64_t constantBytes() const override;
  const std::vector<std::shared_ptr<const Executable>> &regions() const { return regions_; }

private:
  Status runIf(std::span<void *const> buffers, const RunOptions &opts) const;
  Status runLoop(std::span<void *const> buffers, const RunOptions &opts) const;

  Spec spec_;
  std::shared_ptr<const void> owner_;
  std::vector<std::shared_ptr<const Executable>> regions_;
};

} // namespace kiln::runtime
