//===- AttentionStep.h - Attention as one library call -----------*- C++ -*-===//
//
// softmax(scores) x v, where scores = q x k^T with its scaling and mask (a
// matmul primitive and its post-ops), as one step (Note [Attention calls]
// in codegen/Fusion.cpp): the scores matmul writes its buffer, oneDNN's
// softmax runs over its last axis in place, and the weighted-sum matmul
// reads it and writes the result. The two matmuls are ordinary oneDNN
// steps (DnnlStep) run on buffer lists the step assembles from its own.
//
// Buffers: the operands of both matmuls except the scores (the first's,
// then the second's other ones), then the result, then the scores: a
// buffer written here and read by no other step, so the memory planner
// places it in the arena with this step's lifetime (shared with every
// other short-lived buffer, counted in the plan).
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Executable.h"
#include "runtime/dnnl/DnnlSteps.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::runtime::onednn {

class AttentionStep final : public runtime::ExternStep {
public:
  /// `scoresArgs[i]` / `weightedArgs[i]`: the step buffer that buffer i of
  /// the scores / weighted-sum step binds to. `scores` is the dims of the
  /// scores (row-major f32), in step buffer `scoresBuffer`. Creates the
  /// softmax primitive for the calling thread's OpenMP thread count; throws
  /// dnnl::error when oneDNN refuses.
  AttentionStep(std::string name, std::shared_ptr<const runtime::ExternStep> scoresStep,
                std::vector<int32_t> scoresArgs,
                std::shared_ptr<const runtime::ExternStep> weightedStep,
                std::vector<int32_t> weightedArgs, dims scores, int32_t scoresBuffer);
  ~AttentionStep() override;

  std::string describe() const override { return name_; }
  runtime::Status run(std::span<void *const> buffers,
                      const runtime::StepContext &ctx) const override;
  bool save(runtime::SavedStep &out, std::string &why) const override;
  uint64_t constantBytes() const override;
  /// oneDNN's softmax implementation ("jit:avx512_common", ...).
  const std::string &softmaxImpl() const { return softmaxImpl_; }

private:
  std::string name_;
  std::shared_ptr<const runtime::ExternStep> scoresStep_, weightedStep_;
  std::vector<int32_t> scoresArgs_, weightedArgs_;
  dims scores_;
  int32_t scoresBuffer_;
  dnnl::memory::desc scoresMd_;
  dnnl::primitive softmax_;
  dnnl::memory::desc softmaxScratchMd_;
  std::string softmaxImpl_;
  int createdThreads_ = 1;
};

/// The step save() wrote (kind "onednn.attention"), its two matmul steps
/// rebuilt by loadStep; null with `why` when the payload is corrupt or does
/// not match `bufferBytes`.
std::shared_ptr<const runtime::ExternStep>
loadAttentionStep(std::string_view payload, std::span<const std::span<const uint8_t>> blobs,
                  std::span<const size_t> bufferBytes, std::shared_ptr<const void> owner,
                  std::string &why);

/// The artifact kind of an attention step.
inline constexpr const char *kAttentionKind = "onednn.attention";

} // namespace kiln::runtime::onednn
