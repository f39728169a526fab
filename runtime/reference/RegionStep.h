//===- RegionStep.h - An if or loop whose regions are compiled --*- C++ -*-===//
//
// An extern step that runs an `if` or a `loop` node (ir/ops/ControlFlow.cpp)
// with its regions compiled to Executables of their own (Note [Compiled
// regions] in codegen/ExecutableBuilder.cpp): an `if` reads its condition and runs
// one branch on the captured operands; a `loop` runs its body while the
// trip count and the condition allow, each iteration's carried outputs
// feeding the next (Executable::run alternates two output blocks, so an
// iteration allocates nothing). The results are copied into the step's
// buffers. Saved in an artifact, it is the node as a reference step (the
// regions interpreted when the artifact runs): artifacts do not nest
// executables.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Executable.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln {
class Node;
} // namespace kiln

namespace kiln::runtime {

class RegionStep final : public ExternStep {
public:
  /// `node` is an `if` (regions: then, else) or a `loop` (regions: body),
  /// each region compiled for the static types of the operands it gets;
  /// `owner` keeps the graph that holds the node alive.
  RegionStep(const Node *node, std::shared_ptr<const void> owner,
             std::vector<std::shared_ptr<const Executable>> regions);
  std::string describe() const override;
  Status run(std::span<void *const> buffers, const StepContext &ctx) const override;
  /// Saves the node as a reference step (runtime/reference/ReferenceStep.h).
  bool save(SavedStep &out, std::string &why) const override;
  uint64_t constantBytes() const override;

private:
  Status runIf(std::span<void *const> buffers, const RunOptions &opts) const;
  Status runLoop(std::span<void *const> buffers, const RunOptions &opts) const;

  const Node *node_;
  std::shared_ptr<const void> owner_;
  std::vector<std::shared_ptr<const Executable>> regions_;
};

} // namespace kiln::runtime
