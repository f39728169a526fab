//===- OneDnnSteps.h - Library ops through oneDNN 2.6 -----------*- C++ -*-===//
//
// Turns a library group (an anchor node that oneDNN runs, followed by an
// epilogue chain of elementwise nodes, each consuming the previous result;
// see codegen/Fusion.h) into one runtime ExternStep (runtime/dnnl/) that
// runs the anchor with the epilogue as oneDNN post-ops. The compile-time
// code is in three files: Anchors.cpp (one Anchor per op), Epilogue.cpp
// (the backend's op table and the post-op mapping) and OneDnnSteps.cpp
// (assembly and candidate timing). What it runs:
//
//   anchors:   conv (1-D/2-D/3-D, grouped, depthwise; strides, pads,
//              dilations), conv_transpose, matmul (batched, broadcasting
//              batch dims, 1-D operands), gemm (alpha, beta, transposes, C),
//              max_pool (dilations), avg_pool (count_include_pad, ceil_mode
//              through the right padding), global_avg_pool;
//   epilogue:  the epilogue rows of oneDnnCapabilities(): binary ones with a
//              tensor broadcastable to the anchor's result (binary post-ops;
//              a same-shape residual becomes a sum post-op when the
//              destination is blocked), unary ones as eltwise post-ops.
//
// Primitives are created once, here, with layout `any` where that helps;
// constant weights are reordered once into the layout the primitive
// prefers; activations are reordered from/to the plain row-major buffers of
// the runtime only when the chosen layout differs. A conv runs on the
// activation layout oneDNN prefers, or on plain activations when that is
// faster by measurement under --dnnl-layout=measure (Note [Conv layouts] in
// OneDnnSteps.cpp). Only f32 is supported.
//
// This file is compiled with exceptions: every dnnl::error is caught and
// turned into a "not supported" answer (the caller falls back) or a runtime
// Status.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "codegen/Backend.h"
#include "ir/Graph.h"
#include "runtime/Executable.h"

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace kiln::codegen::cpu {

/// How library convolutions choose their activation layout (the compile
/// option is backend-neutral: codegen/Backend.h).
using DnnlLayoutPolicy = codegen::LibraryLayout;

struct OneDnnOptions {
  DnnlLayoutPolicy layout = DnnlLayoutPolicy::Blocked;
  /// Kiln's kernel or oneDNN's primitive for recurrent layers.
  codegen::RecurrentChoice recurrent = codegen::RecurrentChoice::Measure;
  /// Threads used when measuring (0: OpenMP's default).
  int threads = 0;
  /// Values (rank >= 3) whose buffers hold channels-last data (N, spatial...,
  /// C: "acdb" for 4-D) instead of row-major; see Note [Channels-last
  /// buffers] in codegen/ExecutableBuilder.cpp. Only the src of a conv or pool, the
  /// result, and full-size residual operands of the epilogue may be; the
  /// caller reads result() back to know what the step wrote. Empty: none.
  std::function<bool(const Value *)> channelsLast;
};

/// An extern step copying a channels-last buffer of `v` (its first buffer)
/// into a row-major one (its second).
std::shared_ptr<const runtime::ExternStep> makeToRowMajorStep(const Value *v);

/// An extern step concatenating channels-last buffers along dim 1 (the
/// channels) into a channels-last buffer: `concat`'s operands' buffers,
/// then its result's. Null, with `why`, when oneDNN refuses.
std::shared_ptr<const runtime::ExternStep> makeChannelsLastConcatStep(const Node &concat,
                                                                      std::string &why);

/// A library call built for nodes[0, numNodes).
struct OneDnnCall {
  std::shared_ptr<const runtime::ExternStep> step;
  /// The step's buffers: these runtime operands, then `results` (one,
  /// except for a recurrent layer's outputs).
  std::vector<const Value *> operands;
  std::vector<const Value *> results;
  /// The operands the step reads channels-last; it reads every other
  /// operand row-major (one stored channels-last is then given to it as
  /// its row-major twin, Note [Channels-last buffers]).
  std::vector<const Value *> channelsLastOperands;
  /// How many of the given nodes (anchor first) the step computes; the rest
  /// of the epilogue did not map to post-ops and must run separately.
  size_t numNodes = 0;
  /// Implementation, layouts and post-ops, e.g.
  /// "brgconv:avx2 src aBcd8b wei ABcd8b8a dst aBcd8b post-ops [sum, eltwise_relu]".
  std::string detail;
  /// Compile-time measurements of the layout choice (empty if none).
  std::string measurement;
};

/// Builds a oneDNN step for `nodes` (anchor, then its epilogue chain). On
/// failure `why` says why the anchor is not supported (unsupported dtype or
/// configuration, or oneDNN's own refusal); no diagnostic is emitted.
FailureOr<OneDnnCall> buildOneDnnCall(std::span<const Node *const> nodes,
                                      const OneDnnOptions &options, std::string &why);

/// Whether `nodes` is an attention group (Note [Attention calls] in
/// codegen/Fusion.cpp): a matmul anchor, its epilogue, a softmax over the
/// last axis and a matmul of its result.
bool isAttentionGroup(std::span<const Node *const> nodes);

/// Builds one step for an attention group: the anchor with its whole
/// epilogue as post-ops, the softmax and the second matmul
/// (runtime/dnnl/AttentionStep.h). On failure (an epilogue node that is no
/// post-op, oneDNN's refusal) `why` says why; the caller then runs the
/// group as separate calls and kernels.
FailureOr<OneDnnCall> buildAttentionCall(std::span<const Node *const> nodes,
                                         const OneDnnOptions &options, std::string &why);

/// What oneDNN anchors, which epilogue ops it applies as post-ops, and
/// which anchors take channels-last buffers: the table the fusion planner
/// and the compiler driver read (codegen/cpu/dnnl/Epilogue.cpp).
const codegen::LibraryCapabilities &oneDnnCapabilities();

} // namespace kiln::codegen::cpu
