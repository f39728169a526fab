//===- ReferenceStep.h - A node run on its reference kernel -----*- C++ -*-===//
//
// An extern step that runs one IR node on its reference kernel
// (evaluateNode, ir/Interpreter.h): the compiler's fallback for a node no
// backend handles (Note [Fallback steps] in codegen/ExecutableBuilder.cpp). It is
// saved in artifacts as the node's own one-node graph in .kir text (kind
// "kiln.reference") and rebuilt by parsing it, so a model with a fallback
// deploys and caches like any other; the loader needs the IR library and
// its reference kernels, not LLVM.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Executable.h"

#include <memory>
#include <string>
#include <string_view>

namespace kiln {
class Node;
} // namespace kiln

namespace kiln::runtime {

class ReferenceStep final : public ExternStep {
public:
  static constexpr const char *kKind = "kiln.reference";

  /// Runs `node` (its operands then its results are the step's buffers);
  /// `owner` keeps the graph that holds it alive.
  ReferenceStep(const Node *node, std::shared_ptr<const void> owner);
  std::string describe() const override;
  Status run(std::span<void *const> buffers, const StepContext &ctx) const override;
  bool save(SavedStep &out, std::string &why) const override;

  /// Rebuilds a saved step; `bufferBytes` are the sizes of its buffers
  /// (operands, then results), which the node's types must match. Null,
  /// with `why`, for a payload that does not parse, verify or fit.
  static std::shared_ptr<const ReferenceStep>
  load(std::string_view payload, std::span<const size_t> bufferBytes, std::string &why);

private:
  const Node *node_;
  std::shared_ptr<const void> owner_;
};

} // namespace kiln::runtime
