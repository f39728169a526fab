//===- CopyStep.h - Copies of byte runs between buffers ---------*- C++ -*-===//
//
// An extern step that only moves bytes: runs of contiguous bytes from its
// source buffers into its result buffer. The compiler builds it for kernel
// groups that only concatenate (Note [Concat as copies] in
// codegen/CopyConcat.cpp); it depends on nothing but the runtime, so
// artifacts store and load it without oneDNN (kind "kiln.copy").
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Executable.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

class CopyStep final : public ExternStep {
public:
  /// `bytes` bytes from buffer `src` (0-based among the step's sources) at
  /// `srcOffset` to the result buffer at `dstOffset`.
  struct Run {
    int32_t src = 0;
    int64_t srcOffset = 0, dstOffset = 0, bytes = 0;
  };
  static constexpr const char *kKind = "kiln.copy";

  /// Adjacent runs (the same source, both ranges contiguous) are merged.
  CopyStep(std::string name, int32_t numSources, std::vector<Run> runs);
  std::string describe() const override { return name_; }
  Status run(std::span<void *const> buffers, const StepContext &ctx) const override;
  bool save(SavedStep &out, std::string &why) const override;
  const std::vector<Run> &runs() const { return runs_; }

  /// Rebuilds a saved step; `bufferBytes` are the sizes of its buffers
  /// (sources, then the result), which every run must stay within. Null,
  /// with `why`, for a damaged payload.
  static std::shared_ptr<const CopyStep>
  load(std::string_view payload, std::span<const size_t> bufferBytes, std::string &why);

private:
  std::string name_;
  int32_t numSources_;
  std::vector<Run> runs_;
  int64_t totalBytes_ = 0;
};

} // namespace kiln::runtime
