//===- RecurrentStep.h - One recurrent layer as one call ---------*- C++ -*-===//
//
// An `lstm`, `gru` or `rnn` node (ir/ops/Recurrent.cpp) runs over the whole
// sequence and both directions as Kiln's own kernel (RecurrentKernel.h) or
// as one oneDNN RNN primitive (lstm_forward, gru_forward, lbr_gru_forward
// or vanilla_rnn_forward with tanh): the input projections of all steps as
// one GEMM and each step's recurrent GEMM with the gate math fused, instead
// of the tens of tiny calls an unrolled graph makes. Note [Recurrent
// layers] in codegen/cpu/dnnl/Recurrent.cpp has the measurements.
//
// The step holds its weights in oneDNN's plain ldigo / ldgo layouts (gates
// in oneDNN's order) and reorders them once, when it is built, into the
// layout the primitive picks; an artifact stores the plain ones and the
// loader builds the step again from them, so a machine where oneDNN picks
// another layout still runs it.
//
// Buffers: x [S, B, I], h0 [D, B, H] and c0 when present, then y [S, D, B,
// H], y_h [D, B, H] and, for LSTM, y_c. oneDNN writes a bidirectional
// layer's output as [S, B, 2H]; the step copies it into y's [S, 2, B, H].
//
//===----------------------------------------------------------------------===//
#pragma once

#include "runtime/Executable.h"
#include "runtime/dnnl/DnnlSteps.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::runtime::onednn {

/// What a recurrent step computes, in oneDNN's terms.
struct RecurrentSpec {
  enum class Cell : int32_t { Lstm, Gru, LbrGru, Rnn };
  enum class Direction : int32_t { Forward, Reverse, Bidirectional };
  /// oneDNN's primitive, or Kiln's own kernel (RecurrentKernel.h).
  enum class Impl : int32_t { OneDnn, Kiln };
  Cell cell = Cell::Lstm;
  Impl impl = Impl::OneDnn;
  Direction direction = Direction::Forward;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  bool hasH0 = false, hasC0 = false;
  /// OpenMP threads the primitive is created for (Kiln's kernel: the
  /// threads it may use, one per direction).
  int32_t threads = 1;

  int64_t dirs() const { return direction == Direction::Bidirectional ? 2 : 1; }
  /// Gates in oneDNN's weights (4, 3, 3, 1) and in its bias (LBR GRU: 4).
  int64_t gates() const;
  int64_t biasGates() const { return cell == Cell::LbrGru ? 4 : gates(); }
  const char *cellName() const;
};

class RecurrentKernel;

class RecurrentStep final : public runtime::ExternStep {
public:
  /// Builds the primitive for `spec` and reorders the plain weights into
  /// its layout: weightsLayer [1, D, I, G, H] and weightsIter [1, D, H, G,
  /// H] (ldigo), bias [1, D, Gb, H] (ldgo). Throws dnnl::error when oneDNN
  /// refuses.
  RecurrentStep(std::string name, const RecurrentSpec &spec, std::vector<float> weightsLayer,
                std::vector<float> weightsIter, std::vector<float> bias);
  ~RecurrentStep() override;

  std::string describe() const override { return name_; }
  runtime::Status run(std::span<void *const> buffers,
                      const runtime::StepContext &ctx) const override;
  bool save(runtime::SavedStep &out, std::string &why) const override;
  uint64_t constantBytes() const override;

  /// The implementation and weight layouts oneDNN chose, e.g.
  /// "brgemm lstm bidirectional wei_layer abcde wei_iter ...".
  std::string detail() const;
  /// Who runs it: "kiln:avx512" (Kiln's kernel, its instruction set), or
  /// oneDNN's implementation ("brgemm", "ref", ...).
  const std::string &impl() const { return impl_; }
  const RecurrentSpec &spec() const { return spec_; }

private:
  std::string name_;
  RecurrentSpec spec_;
  std::vector<float> weightsLayer_, weightsIter_, bias_;
  dnnl::primitive prim_;
  dnnl::memory::desc srcLayerMd_, srcIterMd_, dstLayerMd_, dstIterMd_, scratchMd_, workspaceMd_;
  dnnl::memory packedLayer_, packedIter_, biasMem_;
  std::string impl_;
  /// Set for Impl::Kiln (then there is no primitive).
  std::unique_ptr<RecurrentKernel> kernel_;
  /// The memory objects of a finished run, kept for later ones (Note [Kept
  /// memory objects] in DnnlSteps.cpp).
  struct Binding;
  std::unique_ptr<Binding> takeBinding() const;
  mutable KeptPool<Binding> bindings_;
};

/// The step save() wrote (kind "onednn.rnn"), or null with `why` when the
/// payload is corrupt or does not match `bufferBytes` (the sizes of the
/// step's buffers).
std::shared_ptr<const runtime::ExternStep>
loadRecurrentStep(std::string_view payload, std::span<const std::span<const uint8_t>> blobs,
                  std::span<const size_t> bufferBytes, std::string &why);

/// The artifact kind of a recurrent step.
inline constexpr const char *kRecurrentKind = "onednn.rnn";

} // namespace kiln::runtime::onednn
