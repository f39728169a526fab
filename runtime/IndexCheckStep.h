//===- IndexCheckStep.h - Index ranges checked at run time -------*- C++ -*-===//
//
// An extern step that reads one integer buffer, the indices of a gather
// whose kernel runs next, and fails the run when one is outside [-size,
// size): the reference's error, where the kernel would clamp the index
// (codegen/LowerNode.cpp). The compiler adds one before a kernel group
// that reads a gather's indices from memory (codegen/IndexChecks.cpp).
// Artifacts store it (kind "kiln.index-check").
//
//===----------------------------------------------------------------------===//
#pragma once

#include "ir/DType.h"
#include "runtime/Executable.h"

#include <memory>
#include <string>
#include <string_view>

namespace kiln::runtime {

class IndexCheckStep final : public ExternStep {
public:
  static constexpr const char *kKind = "kiln.index-check";

  /// `node` names the gather in errors ("node '/tok/Gather'"); the indices
  /// are `count` elements of `dtype` (i32 or i64) indexing axis `axis` of
  /// size `size`.
  IndexCheckStep(std::string node, DType dtype, int64_t count, int64_t axis, int64_t size);
  std::string describe() const override { return "index check of " + node_; }
  Status run(std::span<void *const> buffers, const StepContext &ctx) const override;
  bool save(SavedStep &out, std::string &why) const override;

  /// Rebuilds a saved step over a buffer of `bufferBytes`; null, with
  /// `why`, for a damaged payload.
  static std::shared_ptr<const IndexCheckStep> load(std::string_view payload, size_t bufferBytes,
                                                    std::string &why);

private:
  std::string node_;
  DType dtype_;
  int64_t count_, axis_, size_;
};

} // namespace kiln::runtime
