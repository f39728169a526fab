//===- Internal.h - Shared parts of the oneDNN library backend --*- C++ -*-===//
//
// Private to codegen/cpu/dnnl/: what the anchors (Anchors.cpp), the
// epilogue mapping (Epilogue.cpp) and the assembly with its candidate timing
// (OneDnnSteps.cpp) share. Compiled with exceptions.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/cpu/dnnl/OneDnnSteps.h"
#include "runtime/dnnl/DnnlSteps.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::codegen::cpu::onednn {

using namespace runtime::onednn;
using dnnl::algorithm;
using dnnl::memory;

/// The tensor of a constant value, or null.
const Tensor *constantOf(const Value *v);
std::vector<int64_t> sizesOf(const Value *v);
/// f32 of `d` in the layout the primitive prefers.
memory::desc anyMd(const dims &d);
/// The layout of `md` in oneDNN's verbose notation ("abcd", "aBcd8b").
std::string layoutString(const memory::desc &md);
const char *algorithmName(algorithm a);

/// One input of the anchor primitive.
struct AnchorInput {
  int arg;
  /// The graph value; for a constant, its tensor (or a transformed copy
  /// in `owned`) is used at compile time instead.
  const Value *value = nullptr;
  const Tensor *constant = nullptr;
  Tensor owned;
  /// The plain (or strided) layout of the buffer / tensor bytes.
  memory::desc userMd;
};

/// A post-op: eltwise, or binary with a tensor from outside the group.
struct PostOp {
  enum class Kind { Eltwise, Binary } kind = Kind::Eltwise;
  algorithm alg = algorithm::eltwise_relu;
  float alpha = 0, beta = 0;
  const Value *other = nullptr;
  const Tensor *constant = nullptr;
  Tensor owned;
  /// The other operand's dims in the anchor's oneDNN dst rank.
  dims otherDims;
  /// A factor the other operand is scaled by first (gemm's beta).
  float scale = 1.f;
};

struct Anchor {
  OpKind kind = OpKind::Constant;
  /// How steps and reports name it ("matmul", "conv").
  std::string kindName;
  /// The anchor's result as the graph sees it, and as oneDNN does (these
  /// differ only for matmul with 1-D operands).
  std::vector<int64_t> graphShape;
  dims dstDims;
  std::vector<AnchorInput> inputs;
  /// Creates the primitive descriptor (throws dnnl::error when oneDNN has
  /// no implementation); `blocked` asks for layout `any` activations.
  std::function<dnnl::primitive_desc(const dnnl::primitive_attr &, bool blocked)> makePd;
  bool supportsBlocked = false;
  /// Whether a same-shape residual may use the `sum` post-op (convs; oneDNN
  /// 2.6's nhwc pooling ignores it).
  bool supportsSum = false;
  /// Post-ops the anchor itself needs (gemm's alpha and C), before the
  /// epilogue's.
  std::vector<PostOp> ownPostOps;
};

/// The anchor for `n`, or failure with `why`. Throws dnnl::error when
/// oneDNN refuses a descriptor.
FailureOr<Anchor> makeAnchor(const Node &n, std::string &why);

/// The post-ops computing `n` from `chain` (the previous result), or
/// nullopt when `n` does not map.
std::optional<std::vector<PostOp>> mapEpilogueNode(const Node &n, const Value *chain,
                                                   const Anchor &a);

/// The call running an `lstm`, `gru` or `rnn` node as one oneDNN RNN
/// primitive (Recurrent.cpp), or failure with `why`.
FailureOr<OneDnnCall> buildRecurrentCall(const Node &n, const OneDnnOptions &options,
                                         std::string &why);

} // namespace kiln::codegen::cpu::onednn
